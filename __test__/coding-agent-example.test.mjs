// examples/coding-agent on knap, the way a user gets it: knap and packages/coding-agent packed
// with `npm pack`, installed offline under the reference's names `@caveman-ai/agent` and
// `@caveman-ai/coding-agent`; the seed's example runs unchanged, a turn goes to a fake provider
// on 127.0.0.1, and `caveman-code` is on node_modules/.bin.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { startFakeProvider } from "./fake-provider.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const example = path.join(root, "examples", "coding-agent");

function npmEnv(dir) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_") && !/_API_KEY$|^CAVE_/.test(k)));
  return { ...env, npm_config_cache: path.join(dir, ".npm-cache"), npm_config_update_notifier: "false" };
}

test("the example is the seed's code: it imports only @caveman-ai/coding-agent; package.json maps both names", () => {
  const source = fs.readFileSync(path.join(example, "index.mjs"), "utf8");
  const specifiers = [...source.matchAll(/from "([^"]+)"/g)].map((m) => m[1]);
  assert.deepEqual(specifiers, ["@caveman-ai/coding-agent"]);
  assert.match(source, /const agent = createCodingAgent\(\{ workspace: options\.workspace \?\? process\.cwd\(\) \}\);\n  return runCodingSession\(\{ agent, \.\.\.options \}\);/);
  const pkg = JSON.parse(fs.readFileSync(path.join(example, "package.json"), "utf8"));
  assert.deepEqual(pkg.dependencies, { "@caveman-ai/agent": "file:../..", "@caveman-ai/coding-agent": "file:../../packages/coding-agent" });
  const companion = JSON.parse(fs.readFileSync(path.join(root, "packages", "coding-agent", "package.json"), "utf8"));
  assert.equal(companion.name, "knap-coding-agent");
  assert.deepEqual(Object.keys(companion.exports), [".", "./cli", "./package.json"]);
  assert.deepEqual(companion.bin, { "caveman-code": "./bin.mjs" });
  const knap = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
  assert.equal(knap.bin["caveman-code"], "./bin/caveman-code.mjs");
  for (const subpath of ["./code", "./programmatic-tools", "./code/cli"]) assert.ok(knap.exports[subpath], subpath);
});

test("packed and installed under the aliases: the example and caveman-code run", { timeout: 600_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-coding-agent-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const env = npmEnv(dir);
  const pack = (cwd) => path.join(dir, JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", dir], { cwd, env, encoding: "utf8" }))[0].filename);
  const knapTarball = pack(root);
  const companionTarball = pack(path.join(root, "packages", "coding-agent"));

  const app = path.join(dir, "app");
  fs.mkdirSync(app);
  fs.copyFileSync(path.join(example, "index.mjs"), path.join(app, "index.mjs"));
  const pkg = JSON.parse(fs.readFileSync(path.join(example, "package.json"), "utf8"));
  pkg.dependencies = { "@caveman-ai/agent": `file:${knapTarball}`, "@caveman-ai/coding-agent": `file:${companionTarball}` };
  fs.writeFileSync(path.join(app, "package.json"), JSON.stringify(pkg, null, 2));
  execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund"], { cwd: app, env, encoding: "utf8", stdio: "pipe" });
  for (const name of ["agent", "coding-agent"]) {
    assert.equal(fs.lstatSync(path.join(app, "node_modules", "@caveman-ai", name)).isSymbolicLink(), false, `${name} is a real install`);
  }

  // Without the optional provider transport the command says what to install.
  const bin = path.join(app, "node_modules", ".bin", "caveman-code");
  const missing = spawnSync(bin, [], { cwd: app, env: { ...env, ANTHROPIC_API_KEY: "x" }, encoding: "utf8", input: "" });
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /^caveman-code: calling a model provider needs the optional package @mariozechner\/pi-ai/);
  assert.match(missing.stderr, /npm install @mariozechner\/pi-ai/);
  // pi-ai from this checkout stands in for `npm install @mariozechner/pi-ai` (no registry here).
  fs.symlinkSync(path.join(root, "node_modules", "@mariozechner"), path.join(app, "node_modules", "@mariozechner"));

  const help = spawnSync(bin, ["--help"], { cwd: app, env, encoding: "utf8" });
  assert.equal(help.status, 0);
  assert.match(help.stdout, /^Usage: caveman-code \[options\]\n\nOptions:\n/);

  const plain = spawnSync(process.execPath, ["index.mjs"], { cwd: app, env: { ...env, ANTHROPIC_API_KEY: "x" }, encoding: "utf8", input: "/mode\n/exit\n" });
  assert.equal(plain.status, 0, plain.stderr);
  assert.match(plain.stderr, /^cave: OBSERVE-ONLY — the Caveman engine\/gateway is not available here\.\n/);
  assert.match(plain.stdout, new RegExp(`^caveman-code · anthropic/claude-sonnet-4-6 · workspace ${app.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\nmode: observe-only\n`));
  assert.match(plain.stdout, /> mode: observe-only\n\nagent \[observe-only\] > \nsession · 0 turns · observe-only\n/);

  const noKey = spawnSync(process.execPath, ["index.mjs"], { cwd: app, env, encoding: "utf8" });
  assert.equal(noKey.status, 1);
  assert.equal(noKey.stderr, "caveman-code: caveman-code: no supported provider credential found; set ANTHROPIC_API_KEY, OPENAI_API_KEY, or GEMINI_API_KEY\n");

  // One turn through the example's main() against a fake provider: the only change is the
  // provider's base URL (passed the way any option reaches runCodingSession).
  const fake = await startFakeProvider([
    { text: "Looking.", toolCalls: [{ name: "read_file", args: { path: "index.mjs" } }] },
    { text: "It starts a coding session." },
  ]);
  t.after(() => fake.close());
  fs.writeFileSync(
    path.join(app, "turn.mjs"),
    `import { main } from "./index.mjs";
import { codingModelsAtProviderBaseURL } from "@caveman-ai/coding-agent";
const bill = await main({ runOverrides: { models: codingModelsAtProviderBaseURL("anthropic/claude-sonnet-4-6", process.argv[2]) } });
process.stderr.write("bill turns " + bill.turns + "\\n");
`,
  );
  const child = spawn(process.execPath, ["turn.mjs", fake.url], { cwd: app, env: { ...env, ANTHROPIC_API_KEY: "x" }, stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (c) => (out += c));
  child.stderr.on("data", (c) => (err += c));
  child.stdin.end("what is index.mjs?\n");
  const status = await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(status, 0, err);
  assert.match(out, /> \nIt starts a coding session\.\n\nturn 1 · observe-only · anthropic\/claude-sonnet-4-6 · /);
  assert.match(err, /tool read_file index\.mjs · ✓ \d+ B · /);
  assert.match(err, /bill turns 1\n$/);
  assert.equal(fake.requests.length, 2);
});
