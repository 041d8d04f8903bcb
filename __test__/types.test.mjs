// The typings (generated index.d.ts plus lib/*.d.mts) describe the public surface: the seed's
// code and the main entry points type-check under `tsc --strict`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

test("the public typings type-check the seed's code", (t) => {
  let tsc;
  try {
    tsc = require.resolve("typescript/bin/tsc");
  } catch {
    t.skip("typescript is not installed (npm ci installs it as a devDependency)");
    return;
  }
  const r = spawnSync(process.execPath, [tsc, "-p", path.join(here, "types", "tsconfig.json")], { encoding: "utf8" });
  assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
});
