// Behaviour that differs between the Node majors knap supports (20, 22, 24).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { tempWorkspace } from "./helpers.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));

// Node 22.18+ (and 23.6+) strip TypeScript types natively, so `node app.mts` runs an application
// written in TypeScript, as the reference's own examples are. knap has to load and work there.
test("a TypeScript application runs with Node's native type stripping", (t) => {
  if (!process.features?.typescript) {
    t.skip(`Node ${process.version} does not strip types natively (22.18+ does)`);
    return;
  }
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  const r = spawnSync(process.execPath, [path.join(here, "fixtures", "typescript-app.mts"), ws.root], { encoding: "utf8", cwd: here });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout.trim().split("\n").at(-1)), { text: "done", tools: ["bash", "lookup"], stdout: "aisdk\n" });
});

test("the package declares the Node versions it supports", async () => {
  const { default: pkg } = await import("../package.json", { with: { type: "json" } });
  assert.equal(pkg.engines.node, ">=20");
  const [major] = process.versions.node.split(".").map(Number);
  assert.ok(major >= 20, `knap supports Node ≥ 20, this is ${process.version}`);
});
