// Skill discovery over 1,000 skill folders: knap/plugins' loadAgentEnvironment and knap/ai-sdk's
// discoverSkills (knap-core's skills module) beside bashkit 0.7.1's discoverSkills, same tree.
// Target: ≤ 50 ms. Medians of 11 runs after one warm-up.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { loadAgentEnvironment } from "../lib/plugins.mjs";
import { discoverSkills } from "../lib/ai-sdk/index.mjs";
import * as bashkit from "bashkit";

const N = 1000;
const root = fs.mkdtempSync(path.join(os.tmpdir(), "knap-bench-skills-"));
const skills = path.join(root, ".skills");
for (let i = 0; i < N; i++) {
  const name = `skill-${String(i).padStart(4, "0")}`;
  fs.mkdirSync(path.join(skills, name), { recursive: true });
  fs.writeFileSync(path.join(skills, name, "SKILL.md"), `---\nname: ${name}\ndescription: Does task number ${i} with care\nlicense: MIT\nmetadata:\n  owner: team-${i % 7}\n---\n# ${name}\n\nSteps…\n`);
}

/** Median wall time and median CPU time (user + system, every thread of the process) of 11 runs. */
async function median(fn) {
  await fn();
  const times = [];
  const cpus = [];
  for (let i = 0; i < 11; i++) {
    const c = process.cpuUsage();
    const t = performance.now();
    const n = await fn();
    times.push(performance.now() - t);
    const d = process.cpuUsage(c);
    cpus.push((d.user + d.system) / 1000);
    if (n !== N) throw new Error(`expected ${N} skills, got ${n}`);
  }
  const mid = (a) => a.sort((x, y) => x - y)[5];
  return [mid(times), mid(cpus)];
}

const rows = [
  ["knap loadAgentEnvironment", await median(async () => (await loadAgentEnvironment({ cwd: root, skillRoots: [skills], includeDefaultRoots: false, includeWorkspacePlugin: false })).skills.length)],
  ["knap ai-sdk discoverSkills", await median(async () => (await discoverSkills({ cwd: root, paths: [".skills"] })).length)],
  ["bashkit discoverSkills", await median(async () => (await bashkit.discoverSkills({ cwd: root, paths: [".skills"] })).length)],
];
// On a shared machine the wall time carries the wait for a core; the CPU time is the work itself
// (on an idle machine the wall time is at most that: the folders are read on up to 4 threads).
console.log(`skill discovery, ${N} folders (median of 11, ms; machine: ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(2)})`);
console.log(`  ${"".padEnd(30)} ${"wall".padStart(7)} ${"cpu".padStart(7)}`);
for (const [name, [ms, cpu]] of rows) {
  const verdict = name.startsWith("knap") ? `${ms <= 50 ? "PASS" : "FAIL"} wall ≤ 50 ms, ${cpu <= 50 ? "PASS" : "FAIL"} cpu ≤ 50 ms` : "";
  console.log(`  ${name.padEnd(30)} ${ms.toFixed(1).padStart(7)} ${cpu.toFixed(1).padStart(7)}  ${verdict}`);
}
console.log(`  ratio bashkit / knap discoverSkills: wall ${(rows[2][1][0] / rows[1][1][0]).toFixed(2)}×, cpu ${(rows[2][1][1] / rows[1][1][1]).toFixed(2)}×`);
fs.rmSync(root, { recursive: true, force: true });
