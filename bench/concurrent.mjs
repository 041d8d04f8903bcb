#!/usr/bin/env node
// Concurrent runs: N scripted runs of C read_file calls each (one call per turn), all started at
// once in one process, through knap's run() and through pi-agent-core's Agent with synchronous
// Node read_file tools (the faster pi baseline in bench/kernel.mjs). Compared with one run of the
// same C calls. Overhead per step = (wall time − tool execution) / steps; for knap the tool time
// is the kernel's (kernelStats), for pi the tools time themselves. Medians of --rounds.
//
//   node bench/concurrent.mjs [--runs 100] [--calls 100] [--rounds 3] [--json]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Agent } from "@mariozechner/pi-agent-core";
import { agent, run, shellTools } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { native } from "../lib/native.mjs";

const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(`--${name}`) ? Number(args[args.indexOf(`--${name}`) + 1]) : fallback);
const RUNS = arg("runs", 100);
const CALLS = arg("calls", 100);
const ROUNDS = arg("rounds", 3);

const root = fs.mkdtempSync(path.join(os.tmpdir(), "knap-concurrent-bench-"));
const files = [];
for (let f = 0; f < 24; f++) {
  const rel = `mod${f}.js`;
  fs.writeFileSync(path.join(root, rel), Array.from({ length: 40 }, (_, i) => `export const v_${i} = ${i * f}; // line ${i + 1}`).join("\n") + "\n");
  files.push(rel);
}
const turns = Array.from({ length: CALLS }, (_, i) => ({ toolCalls: [{ name: "read_file", args: { path: files[i % files.length], offset: 1 + (i % 20), limit: 20 } }] }));
turns.push({ text: "done" });

const def = agent({ id: "bench", instructions: "Read.", model: fauxModel(), sandbox: "host", reasoning: "off", tools: shellTools({ workspace: root, tools: ["read_file"] }) });
const knapRun = () =>
  run(def, "Read.", { ensureRuntime: false, model: fauxModel(), streamFn: scriptedStream(turns), maxModelCalls: CALLS + 10, maxToolCalls: CALLS + 10 }).then((r) => {
    if (r.text !== "done" || r.toolCalls.length !== CALLS) throw new Error("knap run went wrong");
  });

const realRoot = fs.realpathSync(root);
function piRun(timing) {
  const readFile = {
    name: "read_file",
    label: "read_file",
    description: "Read a UTF-8 file from the workspace. Optional offset/limit read a line range.",
    parameters: { type: "object", properties: { path: { type: "string" }, offset: { type: "integer" }, limit: { type: "integer" } }, required: ["path"] },
    executionMode: "parallel",
    execute: async (_id, { path: p, offset, limit }) => {
      const t0 = performance.now();
      try {
        const real = fs.realpathSync(path.resolve(realRoot, p));
        if (real !== realRoot && !real.startsWith(realRoot + path.sep)) throw new Error(`path escapes the workspace: ${p}`);
        const lines = fs.readFileSync(real, "utf8").split("\n");
        const start = Math.max(1, offset ?? 1);
        const text = lines.slice(start - 1, start - 1 + (limit ?? lines.length)).map((l, i) => `${start + i}\t${l}`).join("\n");
        return { content: [{ type: "text", text }], details: {} };
      } finally {
        timing.toolMs += performance.now() - t0;
      }
    },
  };
  let toolCalls = 0;
  const piAgent = new Agent({
    initialState: { systemPrompt: "Read.", model: fauxModel(), thinkingLevel: "off", tools: [readFile] },
    streamFn: scriptedStream(turns),
    beforeToolCall: async () => (++toolCalls > CALLS + 10 ? { block: true, reason: "cave_tool_call_budget_exceeded" } : undefined),
  });
  return piAgent.prompt("Read.").then(() => {
    if (toolCalls !== CALLS) throw new Error("pi run went wrong");
  });
}

async function measure(which, n) {
  const timing = { toolMs: 0 };
  const before = native.kernelStats();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: n }, () => (which === "knap" ? knapRun() : piRun(timing))));
  const ms = performance.now() - t0;
  const toolMs = which === "knap" ? (native.kernelStats().toolExecNs - before.toolExecNs) / 1e6 : timing.toolMs;
  const steps = n * CALLS;
  return { ms, toolMs, overheadUs: ((ms - toolMs) * 1000) / steps, stepsPerSec: steps / (ms / 1000) };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = {};
for (const which of ["knap", "pi"]) for (const n of [1, RUNS]) await measure(which, n); // warm-up
for (const which of ["knap", "pi"]) {
  for (const n of [1, RUNS]) {
    const samples = [];
    for (let r = 0; r < ROUNDS; r++) samples.push(await measure(which, n));
    rows[`${which}@${n}`] = {
      runs: n,
      wallMs: +median(samples.map((s) => s.ms)).toFixed(1),
      toolExecMs: +median(samples.map((s) => s.toolMs)).toFixed(1),
      overheadPerStepUs: +median(samples.map((s) => s.overheadUs)).toFixed(1),
      stepsPerSec: Math.round(median(samples.map((s) => s.stepsPerSec))),
    };
  }
}
fs.rmSync(root, { recursive: true, force: true });
const report = { calls: CALLS, runs: RUNS, rounds: ROUNDS, node: process.version, cpus: os.cpus().length, loadavg: os.loadavg().map((x) => +x.toFixed(2)), rows };
if (args.includes("--json")) console.log(JSON.stringify(report, null, 2));
else {
  console.log(`concurrent runs: ${RUNS} x ${CALLS} read_file calls vs 1 run, median of ${ROUNDS} (${process.version}, ${report.cpus} CPUs, load ${report.loadavg.join(" ")})`);
  console.log("| loop | runs | wall (ms) | tool exec (ms) | overhead per step (µs) | steps/s |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const [k, r] of Object.entries(rows)) console.log(`| ${k.split("@")[0]} | ${r.runs} | ${r.wallMs} | ${r.toolExecMs} | ${r.overheadPerStepUs} | ${r.stepsPerSec} |`);
}
