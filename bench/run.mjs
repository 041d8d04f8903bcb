#!/usr/bin/env node
// knap's bench: `npm run bench` (needs a release build: `npm run build`).
//
// Prints, in one run, Markdown tables of medians and ratios for
//   1. grep: knap vs the `rg` binary (the reference's exact arguments) vs a plain Node.js grep,
//   2. read_file of a 1 GiB file (time, peak RSS growth) vs the reference's fs.readFile reading,
//   3. bash printing 1 GiB (peak RSS growth) vs Node capture and child_process.exec,
//   4. the policy round trip through decideToolCall (serial and 1,000 concurrent) vs plain JS,
// then PASS/FAIL per target. It never fails the process on a missed target.
//
// Options: --only grep,read_file,bash,policy   run some sections only
//          --runs N                            grep runs per tool and pattern (default 5)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { shellTools, decideToolCall } from "../lib/index.mjs";
import { ensureTree, nodeGrep, PATTERNS, TREE_DIR } from "./tree.mjs";
import { BENCH_DIR, DATA_DIR, GIB, MIB, ROOT, fmtMiB, fmtMs, fmtUs, fmtX, median } from "./common.mjs";

const argv = process.argv.slice(2);
const optionValue = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const only = optionValue("--only")?.split(",");
const GREP_RUNS = Number(optionValue("--runs") ?? 5);
const enabled = (section) => !only || only.includes(section);

const started = performance.now();
const targets = [];
const report = [];
const out = (line = "") => {
  console.log(line);
  report.push(line);
};
const target = (name, goal, measured, pass) => targets.push({ name, goal, measured, pass });
const table = (header, rows) => {
  out(`| ${header.join(" | ")} |`);
  out(`| ${header.map((_, i) => (i === 0 ? "---" : "---:")).join(" | ")} |`);
  for (const row of rows) out(`| ${row.join(" | ")} |`);
};
const progress = (text) => process.stderr.write(`  … ${text}\n`);

fs.mkdirSync(DATA_DIR, { recursive: true });

// ---------------------------------------------------------------------------------------------
// Environment

function rgVersion() {
  const r = spawnSync("rg", ["--version"], { encoding: "utf8" });
  return r.status === 0 ? r.stdout.split("\n")[0] : null;
}

/** Whether an ELF shared object still has a `.debug_info` section (a debug build). */
function hasDebugInfo(bytes) {
  if (bytes.readUInt32BE(0) !== 0x7f454c46 || bytes[4] !== 2) return false; // ELF64 only
  const shoff = Number(bytes.readBigUInt64LE(0x28));
  const shentsize = bytes.readUInt16LE(0x3a);
  const shnum = bytes.readUInt16LE(0x3c);
  const strtab = shoff + bytes.readUInt16LE(0x3e) * shentsize;
  const namesAt = Number(bytes.readBigUInt64LE(strtab + 0x18));
  for (let i = 0; i < shnum; i++) {
    const nameOff = bytes.readUInt32LE(shoff + i * shentsize);
    const end = bytes.indexOf(0, namesAt + nameOff);
    if (bytes.toString("latin1", namesAt + nameOff, end) === ".debug_info") return true;
  }
  return false;
}

function nativeBuild() {
  const file = process.env.NAPI_RS_NATIVE_LIBRARY_PATH || path.join(ROOT, "knap.linux-x64-gnu.node");
  try {
    const bytes = fs.readFileSync(file);
    const stat = fs.statSync(file);
    const kind = hasDebugInfo(bytes)
      ? "DEBUG BUILD (has .debug_info): timings are meaningless, run `npm run build` first"
      : "release";
    return `${path.relative(process.cwd(), file) || file}, ${(stat.size / MIB).toFixed(1)} MiB, built ${stat.mtime.toISOString().slice(0, 16).replace("T", " ")} UTC, ${kind}`;
  } catch (error) {
    return `${file}: cannot inspect (${error.code ?? error.message})`;
  }
}

const rg = rgVersion();
const cpus = os.cpus();
out(`# knap bench — ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC`);
out();
out(`Machine: ${cpus.length} cores ${os.arch()} (${cpus[0]?.model.trim()}), ${(os.totalmem() / GIB).toFixed(0)} GiB RAM, Linux ${os.release()}, Node ${process.version}`);
out(`Native addon: ${nativeBuild()}`);
out(`rg: ${rg ?? "NOT INSTALLED — the rg column is skipped (install it: apt-get install -y ripgrep)"}`);
const loadAtStart = os.loadavg()[0];
out(`Load average (1 min) at start: ${loadAtStart.toFixed(2)}${loadAtStart > 0.5 ? " — other work is running; timings are noisy" : ""}`);

// ---------------------------------------------------------------------------------------------
// 1. grep

async function benchGrep() {
  const tree = ensureTree(progress);
  out();
  out(`## 1. grep — ${tree.files.toLocaleString("en")} files, ${(tree.bytes / 1e6).toFixed(0)} MB, median of ${GREP_RUNS} warm runs`);
  out();
  out("Same files for every tool: the generated tree has no .gitignore/.ignore, no hidden and no binary files.");
  out("Matches are planted in few files (< 200 lines per pattern), so every tool reads every file in full,");
  out("knap's 200-line limit and rg's `--max-count 200` cut nothing, and the outputs can be compared line by line.");
  out("knap: `grep.execute({pattern})` on a `shellTools({workspace: tree})`, in-process, 2 walker threads.");
  out("rg: spawned as the reference does, `rg --line-number --no-heading --color never --max-count 200 --regexp <p> -- .` (process start included).");
  out("Node: one thread, `readdirSync` recursion + `readFileSync(utf8)` + `split('\\n')` + `RegExp.test`.");
  out();
  const tools = Object.fromEntries(shellTools({ workspace: TREE_DIR }).map((t) => [t.name, t]));
  const runKnap = async (pattern) => {
    const text = await tools.grep.execute({ pattern });
    return text.split("\n").filter((l) => l && !l.startsWith("[caveman-code:"));
  };
  const runRg = (pattern) =>
    new Promise((resolve, reject) => {
      const args = ["--line-number", "--no-heading", "--color", "never", "--max-count", "200", "--regexp", pattern, "--", "."];
      const child = spawn("rg", args, { cwd: TREE_DIR, env: { PATH: process.env.PATH }, stdio: ["ignore", "pipe", "pipe"] });
      const chunks = [];
      child.stdout.on("data", (c) => chunks.push(c));
      child.stderr.on("data", (c) => chunks.push(c));
      child.on("error", reject);
      child.on("close", () => resolve(Buffer.concat(chunks).toString("utf8").split("\n").filter(Boolean)));
    });
  const runNode = async (pattern) => nodeGrep(TREE_DIR, pattern);
  const contenders = [
    ["knap", runKnap],
    ...(rg ? [["rg", runRg]] : []),
    ["node", runNode],
  ];
  const rows = [];
  const cpuRows = [];
  for (const p of PATTERNS) {
    progress(`grep ${p.name}`);
    const times = Object.fromEntries(contenders.map(([name]) => [name, []]));
    const cpu = Object.fromEntries(contenders.map(([name]) => [name, []]));
    const results = {};
    for (const [name, fn] of contenders) results[name] = await fn(p.pattern); // warm-up
    for (let r = 0; r < GREP_RUNS; r++) {
      // Rotate the order so no tool always runs right after another's page-cache or GC work.
      for (let k = 0; k < contenders.length; k++) {
        const [name, fn] = contenders[(r + k) % contenders.length];
        const c0 = cpuMs();
        const t0 = performance.now();
        await fn(p.pattern);
        times[name].push(performance.now() - t0);
        cpu[name].push(cpuMs() - c0);
      }
    }
    const med = Object.fromEntries(Object.entries(times).map(([n, t]) => [n, median(t)]));
    const medCpu = Object.fromEntries(Object.entries(cpu).map(([n, t]) => [n, median(t)]));
    cpuRows.push([p.name, fmtMs(medCpu.knap), rg ? fmtMs(medCpu.rg) : "—", fmtMs(medCpu.node), (medCpu.knap / med.knap).toFixed(2)]);
    const sorted = Object.fromEntries(Object.entries(results).map(([n, lines]) => [n, [...lines].sort().join("\n")]));
    const same = Object.values(sorted).every((s) => s === sorted.knap);
    const counts = contenders.map(([n]) => results[n].length).join(" / ");
    const expected = tree.planted[p.name];
    const ok = same && results.knap.length === expected;
    rows.push([
      `${p.name} \`${p.pattern}\``,
      `${counts}${ok ? " (identical)" : ` MISMATCH (planted ${expected})`}`,
      fmtMs(med.knap),
      rg ? fmtMs(med.rg) : "skipped (no rg)",
      fmtMs(med.node),
      rg ? fmtX(med.knap / med.rg) : "—",
      fmtX(med.node / med.knap),
    ]);
    if (rg) {
      const ratio = med.knap / med.rg;
      target(`grep ${p.name}: knap ≤ 1.2× rg`, "≤ 1.20×", fmtX(ratio), ratio <= 1.2);
    } else {
      target(`grep ${p.name}: knap ≤ 1.2× rg`, "≤ 1.20×", "rg not installed", null);
    }
    const speedup = med.node / med.knap;
    target(`grep ${p.name}: ≥ 3× faster than Node`, "≥ 3.00×", fmtX(speedup), speedup >= 3);
    if (!ok) target(`grep ${p.name}: same matches`, "identical", "mismatch", false);
  }
  table(
    [
      "pattern",
      `matching lines (knap${rg ? " / rg" : ""} / node)`,
      "knap",
      "rg",
      "Node grep",
      "knap / rg (≤ 1.2)",
      "Node / knap (≥ 3)",
    ],
    rows,
  );
  out();
  out("CPU time per search (user+sys of both cores, median; rg's from the reaped child, 10 ms resolution) — less sensitive to other load than wall time.");
  out("knap's cores used = its CPU time / wall time: near 2 when both cores were free, near 1 when other work held one of them.");
  out();
  table(["pattern", "knap", "rg", "Node grep", "knap's cores used"], cpuRows);
}

/** This process's CPU time plus that of its reaped children, in ms. */
function cpuMs() {
  const own = process.cpuUsage();
  const stat = fs.readFileSync("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const children = (Number(fields[13]) + Number(fields[14])) * 10; // cutime + cstime, at 100 ticks/s
  return (own.user + own.system) / 1000 + children;
}

// ---------------------------------------------------------------------------------------------
// Child-process cases (memory)

function child(kind, arg) {
  const r = spawnSync(process.execPath, ["--expose-gc", path.join(BENCH_DIR, "child.mjs"), kind, String(arg)], {
    encoding: "utf8",
    maxBuffer: 16 * MIB,
  });
  const line = r.stdout.trim().split("\n").pop();
  try {
    return JSON.parse(line);
  } catch {
    return { kind, ms: NaN, growth: NaN, detail: `child failed (status ${r.status}): ${(r.stderr || r.stdout).trim().slice(0, 300)}` };
  }
}

function repeatChild(kind, arg, runs) {
  const results = [];
  for (let i = 0; i < runs; i++) results.push(child(kind, arg));
  return {
    ms: median(results.map((r) => r.ms)),
    growth: Math.max(...results.map((r) => r.growth)),
    base: median(results.map((r) => r.baseRss)),
    detail: results[0].detail,
    peakReset: results.every((r) => r.peakReset),
    runs,
  };
}

/** A text file of `bytes` bytes, written as a repeated 1 MiB block of numbered lines. */
function writeTextFile(file, bytes) {
  let block = "";
  for (let n = 0; block.length < MIB; n++) block += `line ${String(n).padStart(7, "0")} the quick brown fox jumps over the lazy dog, numbered by read_file\n`;
  const buf = Buffer.from(block).subarray(0, MIB);
  const fd = fs.openSync(file, "w");
  try {
    for (let written = 0; written < bytes; written += MIB) fs.writeSync(fd, buf, 0, Math.min(MIB, bytes - written));
  } finally {
    fs.closeSync(fd);
  }
}

// ---------------------------------------------------------------------------------------------
// 2. read_file

async function benchReadFile() {
  const dir = path.join(DATA_DIR, "read_file");
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const big = path.join(dir, "1gib.txt");
  const mid = path.join(dir, "256mib.txt");
  try {
    progress("writing 1 GiB and 256 MiB text files");
    writeTextFile(big, GIB);
    writeTextFile(mid, 256 * MIB);
    progress("read_file 1 GiB");
    const rows = [];
    const knapBig = repeatChild("read_file:knap", big, 3);
    const nodeBig = repeatChild("read_file:node", big, 1);
    const knapMid = repeatChild("read_file:knap", mid, 3);
    const nodeMid = repeatChild("read_file:node", mid, 3);
    const row = (label, r) => [label, fmtMs(r.ms), fmtMiB(r.growth), String(r.runs), r.detail];
    rows.push(row("knap `read_file` 1 GiB", knapBig));
    rows.push(row("Node reference (`fs.readFile` utf8 + split + number + join) 1 GiB", nodeBig));
    rows.push(row("knap `read_file` 256 MiB", knapMid));
    rows.push(row("Node reference 256 MiB", nodeMid));
    out();
    out("## 2. read_file of a large file — one fresh process per run, peak RSS growth = VmHWM after − VmRSS before (VmHWM reset via /proc/self/clear_refs)");
    out();
    out("The file is 80-byte text lines (13.4 M lines per GiB), warm in the page cache. knap streams it, numbers every line to count the");
    out("capped-from total, and keeps at most the 8 MiB the output store could take; the reference reads the whole file into one string,");
    out("which V8 cannot hold for 1 GiB (max string length 2^29−24), so it is also timed on 256 MiB.");
    out();
    table(["case", "time (median)", "peak RSS growth (max)", "runs", "result"], rows);
    out();
    out(`256 MiB: knap is ${fmtX(nodeMid.ms / knapMid.ms)} faster than the reference and uses ${fmtX(nodeMid.growth / knapMid.growth)} less peak memory.`);
    target("read_file 1 GiB peak RSS growth", "< 16 MiB", fmtMiB(knapBig.growth), knapBig.growth < 16 * MIB);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// 3. bash

async function benchBash() {
  progress("bash 1 GiB");
  const knap = repeatChild("bash:knap", GIB, 3);
  const capped = repeatChild("bash:node-capped", GIB, 3);
  const execAll = repeatChild("bash:node-exec", 256 * MIB, 1);
  out();
  out("## 3. bash with runaway output — `yes | head -c N`, one fresh process per run");
  out();
  out("knap captures at most 4 MiB of stdout+stderr and drains the rest. The Node rows are for contrast: a spawn that keeps the");
  out("first 4 MiB like the reference's capture, and `child_process.exec` keeping everything, capped at 256 MiB so it cannot OOM.");
  out();
  const row = (label, r) => [label, fmtMs(r.ms), fmtMiB(r.growth), fmtMiB(r.growth - 4 * MIB), String(r.runs), r.detail];
  table(
    ["case", "time (median)", "peak RSS growth (max)", "growth over the 4 MiB capture", "runs", "result"],
    [
      row("knap `bash` printing 1 GiB", knap),
      row("Node spawn keeping the first 4 MiB, 1 GiB", capped),
      row("Node `child_process.exec` (maxBuffer 257 MiB), 256 MiB", execAll),
    ],
  );
  target("bash 1 GiB output: peak RSS growth over the 4 MiB capture", "< 16 MiB", fmtMiB(knap.growth - 4 * MIB), knap.growth - 4 * MIB < 16 * MIB);
}

// ---------------------------------------------------------------------------------------------
// 4. policy

async function benchPolicy() {
  progress("policy");
  const input = Object.freeze({
    runId: "run_1",
    agentId: "main",
    agentPath: ["main"],
    toolCallId: "call_1",
    name: "bash",
    effect: "process",
    args: { command: "ls -la" },
  });
  const allowSync = () => undefined;
  const allowAsync = async () => undefined;
  const denyAsync = async (i) => (i.name === "bash" ? { deny: "no_shell" } : undefined);
  const DECISION_RE = /^[a-z][a-z0-9_]{0,63}$/;
  // The reference's shape in plain JS: await the policy against a 10 s timer, then validate.
  const jsDecide = async (policy, i) => {
    let timer;
    try {
      const decision = await Promise.race([
        Promise.resolve().then(() => policy(i)),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error("cave_tool_policy_failed")), 10_000);
        }),
      ]);
      if (decision === undefined) return undefined;
      if (typeof decision?.deny === "string" && DECISION_RE.test(decision.deny)) return { block: true, reason: `cave_tool_denied:${decision.deny}` };
      throw new Error("cave_tool_policy_decision_invalid");
    } finally {
      clearTimeout(timer);
    }
  };
  const SERIAL = 2_000;
  const CONCURRENT = 1_000;
  const ROUNDS = 5;
  const serial = async (call) => {
    for (let i = 0; i < 200; i++) await call();
    const perCall = [];
    for (let r = 0; r < ROUNDS; r++) {
      const t0 = performance.now();
      for (let i = 0; i < SERIAL; i++) await call();
      perCall.push(((performance.now() - t0) * 1000) / SERIAL);
    }
    return median(perCall);
  };
  const concurrent = async (call) => {
    await Promise.all(Array.from({ length: 100 }, call));
    const totals = [];
    for (let r = 0; r < ROUNDS; r++) {
      const t0 = performance.now();
      await Promise.all(Array.from({ length: CONCURRENT }, call));
      totals.push(performance.now() - t0);
    }
    return median(totals);
  };
  const check = await decideToolCall(denyAsync, input);
  const cases = [
    ["knap `decideToolCall`, sync policy (allow)", () => decideToolCall(allowSync, input)],
    ["knap `decideToolCall`, async policy (allow)", () => decideToolCall(allowAsync, input)],
    ["knap `decideToolCall`, async policy (deny)", () => decideToolCall(denyAsync, input)],
    ["plain JS `await policy(input)` (async policy)", () => allowAsync(input)],
    ["JS reference shape (await + 10 s timer race + validation)", () => jsDecide(allowAsync, input)],
  ];
  const rows = [];
  let knapSerial;
  for (const [label, call] of cases) {
    const s = await serial(call);
    const c = await concurrent(call);
    knapSerial ??= s;
    rows.push([label, fmtUs(s), fmtMs(c), fmtUs((c * 1000) / CONCURRENT)]);
  }
  out();
  out(`## 4. policy round trip — serial: median over ${ROUNDS} rounds of ${SERIAL.toLocaleString("en")} awaited calls; concurrent: ${CONCURRENT.toLocaleString("en")} calls in one \`Promise.all\`, median of ${ROUNDS}`);
  out();
  out(`Each knap call crosses JS → Rust → (threadsafe function) JS policy → Rust (judging, 10 s timeout) → JS. Deny check: ${JSON.stringify(check)}.`);
  out();
  table(["case", "serial, per call", `${CONCURRENT.toLocaleString("en")} concurrent, total`, "concurrent, per call"], rows);
  target("policy round trip, serial (sync policy)", "< 100 µs", fmtUs(knapSerial), knapSerial < 100);
}

// ---------------------------------------------------------------------------------------------

const sections = [
  ["grep", benchGrep],
  ["read_file", benchReadFile],
  ["bash", benchBash],
  ["policy", benchPolicy],
];
for (const [name, fn] of sections) {
  if (!enabled(name)) continue;
  try {
    await fn();
  } catch (error) {
    out();
    out(`## ${name}: bench error — ${error?.stack ?? error}`);
    target(`${name} section`, "runs", "error", false);
  }
}

out();
out("## Targets");
out();
table(
  ["target", "goal", "measured", "result"],
  targets.map((t) => [t.name, t.goal, t.measured, t.pass === null ? "SKIPPED" : t.pass ? "PASS" : "FAIL"]),
);
out();
out(`Whole bench: ${((performance.now() - started) / 1000).toFixed(0)} s. Load average (1 min) at the end: ${os.loadavg()[0].toFixed(2)}.`);
fs.writeFileSync(path.join(DATA_DIR, "last-run.md"), report.join("\n") + "\n");
process.stderr.write(`  … table also written to ${path.relative(process.cwd(), path.join(DATA_DIR, "last-run.md"))}\n`);
