// .ci/sections.sh: the "== title" headers of .ci/run with the seconds each section took, a
// summary at exit (a failing exit included) and the script's exit status kept.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

function script(body) {
  return spawnSync("bash", ["-c", `set -euo pipefail\nsource .ci/sections.sh\n${body}`], { cwd: root, encoding: "utf8" });
}

const timed = (title) => new RegExp(`^-- \\d+\\.\\d s: ${title}$`, "m");

test("each section prints its header, then its seconds when the next starts; a summary at exit", () => {
  const r = script('section "first step"\necho work\nsection "second step"\nsection_end\necho "== CI done"');
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trimEnd().split("\n");
  assert.equal(lines[0], "== first step");
  assert.equal(lines[1], "work");
  assert.match(lines[2], timed("first step"));
  assert.equal(lines[3], "== second step");
  assert.match(lines[4], timed("second step"));
  assert.equal(lines[5], "== CI done");
  assert.equal(lines[6], "== elapsed seconds per section");
  assert.match(lines[7], /^\s+\d+\.\d s {2}first step$/);
  assert.match(lines[8], /^\s+\d+\.\d s {2}second step$/);
  assert.equal(lines.length, 9);
});

test("a failing command still times its section, and the exit status is kept", () => {
  const r = script('section "ok"\nsection "breaks"\nfalse\nsection "never"');
  assert.equal(r.status, 1);
  assert.match(r.stdout, timed("breaks"));
  assert.doesNotMatch(r.stdout, /never/);
  assert.match(r.stdout, /== elapsed seconds per section\n\s+\d+\.\d s {2}ok\n\s+\d+\.\d s {2}breaks\n$/);
  assert.equal(script('section "x"\nexit 7').status, 7);
});

test(".ci/run opens every section through `section` (no untimed header left)", () => {
  const run = readFileSync(join(root, ".ci/run"), "utf8");
  assert.match(run, /^source \.ci\/sections\.sh$/m);
  const headers = run.split("\n").filter((l) => /^\s*echo "== /.test(l));
  assert.deepEqual(headers, ['echo "== CI done"']);
  assert.ok((run.match(/^\s*section "/gm) ?? []).length >= 10);
});
