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

async function median(fn) {
  await fn();
  const times = [];
  for (let i = 0; i < 11; i++) {
    const t = performance.now();
    const n = await fn();
    times.push(performance.now() - t);
    if (n !== N) throw new Error(`expected ${N} skills, got ${n}`);
  }
  return times.sort((a, b) => a - b)[5];
}

const rows = [
  ["knap loadAgentEnvironment", await median(async () => (await loadAgentEnvironment({ cwd: root, skillRoots: [skills], includeDefaultRoots: false, includeWorkspacePlugin: false })).skills.length)],
  ["knap ai-sdk discoverSkills", await median(async () => (await discoverSkills({ cwd: root, paths: [".skills"] })).length)],
  ["bashkit discoverSkills", await median(async () => (await bashkit.discoverSkills({ cwd: root, paths: [".skills"] })).length)],
];
console.log(`skill discovery, ${N} folders (median of 11, ms; machine: ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(2)})`);
for (const [name, ms] of rows) console.log(`  ${name.padEnd(30)} ${ms.toFixed(1).padStart(7)}  ${name.startsWith("knap") ? (ms <= 50 ? "PASS ≤ 50 ms" : "FAIL > 50 ms") : ""}`);
console.log(`  ratio bashkit / knap discoverSkills: ${(rows[2][1] / rows[1][1]).toFixed(2)}×`);
fs.rmSync(root, { recursive: true, force: true });
