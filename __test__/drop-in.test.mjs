// Drop-in: knap packed with `npm pack`, installed under the name `@caveman-ai/agent` into a copy
// of examples/drop-in, runs code written for the reference unchanged (imports from
// `@caveman-ai/agent` and `@caveman-ai/agent/testing`). No registry: the tarball has no dependencies.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const example = path.join(root, "examples", "drop-in");

/** npm's environment without the npm_* variables an outer `npm test` sets. */
function npmEnv(dir) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
  return { ...env, npm_config_cache: path.join(dir, ".npm-cache"), npm_config_update_notifier: "false" };
}

test("package.json exports ./testing next to the root entry", () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
  assert.equal(pkg.exports["."].import, "./lib/index.mjs");
  assert.equal(pkg.exports["./testing"].import, "./lib/testing.mjs");
  assert.deepEqual(Object.keys(pkg.dependencies ?? {}), [], "no runtime dependencies: installable offline");
});

test("examples/drop-in maps @caveman-ai/agent to knap and imports only the reference's names", () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(example, "package.json"), "utf8"));
  assert.equal(pkg.dependencies["@caveman-ai/agent"], "file:../..");
  const source = fs.readFileSync(path.join(example, "reviewer.mjs"), "utf8");
  const specifiers = [...source.matchAll(/from "([^"]+)"/g)].map((m) => m[1]).filter((s) => !s.startsWith("node:"));
  assert.deepEqual(specifiers, ["@caveman-ai/agent", "@caveman-ai/agent/testing"]);
});

test("npm pack + npm install --offline under the alias name; the example runs unchanged", { timeout: 600_000 }, (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-drop-in-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const env = npmEnv(dir);

  const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", dir], { cwd: root, env, encoding: "utf8" }));
  const tarball = path.join(dir, packed[0].filename);
  assert.ok(fs.existsSync(tarball));
  const files = packed[0].files.map((f) => f.path);
  for (const f of ["package.json", "lib/index.mjs", "lib/testing.mjs", "index.js", "knap.linux-x64-gnu.node"]) {
    assert.ok(files.includes(f), `${f} is in the tarball`);
  }

  const app = path.join(dir, "app");
  fs.mkdirSync(app);
  for (const f of ["reviewer.mjs", "package.json"]) fs.copyFileSync(path.join(example, f), path.join(app, f));
  const pkg = JSON.parse(fs.readFileSync(path.join(app, "package.json"), "utf8"));
  pkg.dependencies["@caveman-ai/agent"] = `file:${tarball}`;
  fs.writeFileSync(path.join(app, "package.json"), JSON.stringify(pkg, null, 2));

  execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund"], { cwd: app, env, encoding: "utf8", stdio: "pipe" });
  const installed = path.join(app, "node_modules", "@caveman-ai", "agent");
  assert.equal(fs.lstatSync(installed).isSymbolicLink(), false, "a real install, not a link to the checkout");
  assert.equal(JSON.parse(fs.readFileSync(path.join(installed, "package.json"), "utf8")).name, "knap");

  const out = execFileSync(process.execPath, ["reviewer.mjs"], { cwd: app, encoding: "utf8" });
  assert.deepEqual(out.trim().split("\n"), [
    'policy: {"name":"bash","effect":"external","agentPath":[]}',
    'policy: {"name":"grep","effect":"read","agentPath":[]}',
    'policy: {"name":"word_count","effect":"read","agentPath":[]}',
    'policy: {"name":"write_file","effect":"write","agentPath":[]}',
    "text: notes.txt has 3 lines and mentions beta once.",
    "stopReason: complete",
    'receipt.tools: [{"name":"bash","calls":1,"errors":0},{"name":"grep","calls":1,"errors":0},{"name":"word_count","calls":1,"errors":0},{"name":"write_file","calls":1,"errors":1,"denied":1}]',
    "out.txt written: false",
    "stream tool starts: bash, grep, word_count, write_file",
    "stream tool errors: write_file -> cave_tool_denied:read_only_review",
    "error: true cave_agent_run_failed",
  ]);
});
