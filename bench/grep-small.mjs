#!/usr/bin/env node
// grep per call on a small workspace (issue 8): knap's native grep against a naive synchronous
// JS grep (the one bench/kernel.mjs gives pi-agent-core) and the `rg` binary, measured in the same
// run, rounds rotated; medians per call and ratios.
//
//   node bench/grep-small.mjs [--calls 300] [--rounds 7] [--json]
//
// The workspace is kernel.mjs's: 24 source files of 40 lines in 4 directories plus a README (a
// `.gitignore` and a `.git` directory are added with --git, so the ignore rules have work to do).
// knap: `shellTools({workspace}).grep.execute({pattern})` awaited call after call (what a caller
// of the tool pays, binding included). JS: readdirSync recursion + readFileSync + split + RegExp,
// `path:line:text`, 200 matches. rg: `spawnSync("rg", [...the reference's flags])` per call
// (process start included: that is what the reference pays per call).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { shellTools } from "../lib/index.mjs";
import { native } from "../lib/native.mjs";

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const CALLS = arg("calls", 300);
const ROUNDS = arg("rounds", 7);
const JSON_OUT = args.includes("--json");
const GIT = args.includes("--git");
const PATTERNS = ["alpha_1\\b", "beta_[0-9]+ = 1", "gamma", "theta_3", "line 4\\b", "zeta_.*= 2"];

function makeWorkspace() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "knap-grep-small-"));
  const words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
  for (let d = 0; d < 4; d++) {
    fs.mkdirSync(path.join(root, `pkg${d}`));
    for (let f = 0; f < 6; f++) {
      const lines = Array.from({ length: 40 }, (_, i) => `export const ${words[(i + f + d) % words.length]}_${i} = ${i * (f + 1)}; // line ${i + 1}`);
      fs.writeFileSync(path.join(root, `pkg${d}/mod${f}.js`), lines.join("\n") + "\n");
    }
  }
  fs.writeFileSync(path.join(root, "README.md"), "# bench workspace\nalpha beta gamma\n");
  if (GIT) {
    fs.mkdirSync(path.join(root, ".git/info"), { recursive: true });
    fs.writeFileSync(path.join(root, ".git/info/exclude"), "*.tmp\n");
    fs.writeFileSync(path.join(root, ".gitignore"), "node_modules/\ndist/\n*.log\n");
    fs.writeFileSync(path.join(root, "pkg1/.gitignore"), "generated/\n");
  }
  return fs.realpathSync(root);
}

// The naive synchronous JS grep of bench/kernel.mjs (hidden entries skipped, sorted paths).
function jsGrep(root, pattern) {
  const re = new RegExp(pattern);
  const files = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (e.name.startsWith(".")) continue;
      const full = path.join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.isFile()) files.push(full);
    }
  };
  walk(root);
  files.sort();
  const out = [];
  for (const file of files) {
    const lines = fs.readFileSync(file, "utf8").split("\n");
    for (let i = 0; i < lines.length && out.length < 200; i++) {
      if (re.test(lines[i])) out.push(`./${path.relative(root, file)}:${i + 1}:${lines[i]}`);
    }
  }
  return out.length ? out.join("\n") + "\n" : "no matches";
}

function rgGrep(root, pattern) {
  const r = spawnSync("rg", ["--line-number", "--no-heading", "--color", "never", "--max-count", "200", "--regexp", pattern, "--", "."], { cwd: root, encoding: "utf8" });
  if (r.error) throw r.error;
  return r.stdout;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  if (native.kernelStats().debugBuild && !args.includes("--allow-debug")) {
    console.error("bench/grep-small.mjs: the loaded addon is a debug build; build with `npx napi build --platform --release`");
    process.exit(2);
  }
  const root = makeWorkspace();
  const [grep] = shellTools({ workspace: root, tools: ["grep"] });
  const hasRg = !spawnSync("rg", ["--version"]).error;
  // Same answer from each (rg's order is not sorted: compare sorted lines).
  const sorted = (t) => t.split("\n").filter(Boolean).sort().join("\n");
  for (const p of PATTERNS) {
    const k = await grep.execute({ pattern: p });
    if (sorted(k) !== sorted(jsGrep(root, p))) throw new Error(`knap and the JS grep disagree on ${p}`);
    if (hasRg && sorted(k) !== sorted(rgGrep(root, p) || "no matches")) {
      throw new Error(`knap and rg disagree on ${p}`);
    }
  }
  const contestants = {
    knap: async (n) => {
      for (let i = 0; i < n; i++) await grep.execute({ pattern: PATTERNS[i % PATTERNS.length] });
    },
    js: async (n) => {
      for (let i = 0; i < n; i++) jsGrep(root, PATTERNS[i % PATTERNS.length]);
    },
  };
  // rg pays a process start per call: fewer calls keep the round short.
  const rgCalls = Math.max(10, Math.round(CALLS / 10));
  if (hasRg) {
    contestants.rg = async () => {
      for (let i = 0; i < rgCalls; i++) rgGrep(root, PATTERNS[i % PATTERNS.length]);
    };
  }
  const samples = Object.fromEntries(Object.keys(contestants).map((k) => [k, []]));
  // CPU time (user + system, all threads) per call: less disturbed by other load on the machine.
  const cpu = Object.fromEntries(Object.keys(contestants).map((k) => [k, []]));
  const order = Object.keys(contestants);
  for (const k of order) await contestants[k](Math.min(CALLS, 50)); // warm-up
  for (let r = 0; r < ROUNDS; r++) {
    for (let j = 0; j < order.length; j++) {
      const k = order[(r + j) % order.length];
      const n = k === "rg" ? rgCalls : CALLS;
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await contestants[k](n);
      samples[k].push(((performance.now() - t0) * 1000) / n);
      const c = process.cpuUsage(c0);
      cpu[k].push((c.user + c.system) / n);
    }
  }
  fs.rmSync(root, { recursive: true, force: true });
  const us = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, +median(v).toFixed(1)]));
  // rg's CPU time is in its child processes (not counted by process.cpuUsage): wall time only.
  const cpuUs = Object.fromEntries(Object.entries(cpu).filter(([k]) => k !== "rg").map(([k, v]) => [k, +median(v).toFixed(1)]));
  const report = {
    calls: CALLS,
    rounds: ROUNDS,
    git: GIT,
    node: process.version,
    loadavg: os.loadavg().map((x) => +x.toFixed(2)),
    perCallUs: us,
    cpuPerCallUs: cpuUs,
    jsOverKnap: +(us.js / us.knap).toFixed(2),
    jsOverKnapCpu: +(cpuUs.js / cpuUs.knap).toFixed(2),
    rgOverKnap: us.rg ? +(us.rg / us.knap).toFixed(2) : null,
  };
  if (JSON_OUT) {
    console.log(JSON.stringify(report, null, 2));
    return;
  }
  console.log(`grep on a 25-file workspace${GIT ? " (git repo, .gitignore files)" : ""}: median µs per call of ${ROUNDS} rounds (${CALLS} calls; rg ${rgCalls}), load ${report.loadavg.join(" ")}`);
  console.log("");
  console.log("| grep | wall µs per call | ÷ knap | CPU µs per call | ÷ knap |");
  console.log("|---|---:|---:|---:|---:|");
  console.log(`| knap shellTools grep | ${us.knap} | 1.00× | ${cpuUs.knap} | 1.00× |`);
  console.log(`| naive sync JS grep | ${us.js} | ${report.jsOverKnap}× | ${cpuUs.js} | ${report.jsOverKnapCpu}× |`);
  console.log(hasRg ? `| rg (spawned per call) | ${us.rg} | ${report.rgOverKnap}× | (child processes) | |` : "| rg | not installed | | | |");
}

await main();
