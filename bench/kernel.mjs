#!/usr/bin/env node
// Kernel bench: one scripted run of 1,000 tool calls (read_file and grep on a small workspace)
// through knap's run() — loop, admission, receipts and the native tools in Rust — against the same
// loop in plain JS on @mariozechner/pi-agent-core with equivalent Node tools (fs read_file, a JS
// grep). Same scripted model (knap/testing's scriptedStream) for both. Prints medians, the ratio,
// and the per-step overhead: (run time − time spent executing tools) / tool calls.
//
//   node bench/kernel.mjs [--calls 1000] [--rounds 7] [--only read_file|grep] [--json]
// Use a release build: npx napi build --platform --release. KNAP_KERNEL=worker runs knap's kernel
// on a tokio worker instead of the JS thread, for comparison.
//
// The Node tools come in two flavours, both measured in the same run: fs.promises (the default
// for agent tools, what the reference's read_file does) and fs.*Sync (blocks the event loop, but
// skips the libuv thread pool).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Agent } from "@mariozechner/pi-agent-core";
import { agent, run, shellTools } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { native } from "../lib/native.mjs";

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const CALLS = arg("calls", 1000);
const ROUNDS = arg("rounds", 7);
const JSON_OUT = args.includes("--json");
const ONLY = args.includes("--only") ? args[args.indexOf("--only") + 1] : undefined;

// ---------------------------------------------------------------------------------------------
// A small workspace: 24 source files of 40 lines in 4 directories, plus a README.
function makeWorkspace() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "knap-kernel-bench-"));
  const files = [];
  const words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
  for (let d = 0; d < 4; d++) {
    fs.mkdirSync(path.join(root, `pkg${d}`));
    for (let f = 0; f < 6; f++) {
      const rel = `pkg${d}/mod${f}.js`;
      const lines = Array.from({ length: 40 }, (_, i) => `export const ${words[(i + f + d) % words.length]}_${i} = ${i * (f + 1)}; // line ${i + 1}`);
      fs.writeFileSync(path.join(root, rel), lines.join("\n") + "\n");
      files.push(rel);
    }
  }
  fs.writeFileSync(path.join(root, "README.md"), "# bench workspace\nalpha beta gamma\n");
  files.push("README.md");
  return { root, files };
}

// One tool call per turn (the worst case for per-step overhead), alternating read_file and grep.
function script(files) {
  const patterns = ["alpha_1\\b", "beta_[0-9]+ = 1", "gamma", "theta_3", "line 4\\b", "zeta_.*= 2"];
  const turns = [];
  for (let i = 0; i < CALLS; i++) {
    const read = ONLY ? ONLY === "read_file" : i % 2 === 0;
    const call = read
      ? { name: "read_file", args: { path: files[i % files.length], offset: 1 + (i % 20), limit: 20 } }
      : { name: "grep", args: { pattern: patterns[i % patterns.length] } };
    turns.push({ toolCalls: [call] });
  }
  turns.push({ text: "done" });
  return turns;
}

// ---------------------------------------------------------------------------------------------
// Equivalent Node tools (Pi AgentTool shape), with the reference's output formats and caps.
function capHead(text, max) {
  if (Buffer.byteLength(text) <= max) return text;
  return Buffer.from(text).subarray(0, max).toString("utf8") + "\n[output capped]";
}

function nodeTools(workspace, timing, sync) {
  const realRoot = fs.realpathSync(workspace);
  const io = sync
    ? { realpath: async (p) => fs.realpathSync(p), readFile: async (p, e) => fs.readFileSync(p, e), readdir: async (p, o) => fs.readdirSync(p, o) }
    : fs.promises;
  const contain = async (p) => {
    const real = await io.realpath(path.resolve(realRoot, p));
    if (real !== realRoot && !real.startsWith(realRoot + path.sep)) throw new Error(`path escapes the workspace: ${p}`);
    return real;
  };
  const timed = (fn) => async (id, params, signal) => {
    const t0 = performance.now();
    try {
      return await fn(params, signal);
    } finally {
      timing.toolMs += performance.now() - t0;
    }
  };
  const result = (text) => ({ content: [{ type: "text", text }], details: { effect: "read", resultPolicy: "inline" } });
  async function walk(dir, out) {
    for (const entry of await io.readdir(dir, { withFileTypes: true })) {
      if (entry.name.startsWith(".")) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full, out);
      else if (entry.isFile()) out.push(full);
    }
    return out;
  }
  return [
    {
      name: "read_file",
      label: "read_file",
      description: "Read a UTF-8 file from the workspace. Optional offset/limit read a line range.",
      parameters: { type: "object", properties: { path: { type: "string" }, offset: { type: "integer" }, limit: { type: "integer" } }, required: ["path"] },
      executionMode: "parallel",
      execute: timed(async ({ path: p, offset, limit }) => {
        const file = await contain(p);
        const lines = (await io.readFile(file, "utf8")).split("\n");
        const start = Math.max(1, offset ?? 1);
        const count = limit === undefined ? lines.length : Math.max(1, limit);
        const text = lines.slice(start - 1, start - 1 + count).map((l, i) => `${start + i}\t${l}`).join("\n");
        return result(capHead(text, 24_000));
      }),
    },
    {
      name: "grep",
      label: "grep",
      description: "Search the workspace for a regular expression. Returns at most 200 matches.",
      parameters: { type: "object", properties: { pattern: { type: "string" }, path: { type: "string" }, glob: { type: "string" } }, required: ["pattern"] },
      executionMode: "parallel",
      execute: timed(async ({ pattern, path: scope }) => {
        const re = new RegExp(pattern);
        const base = scope ? await contain(scope) : realRoot;
        const files = (await walk(base, [])).sort();
        const out = [];
        for (const file of files) {
          const lines = (await io.readFile(file, "utf8")).split("\n");
          for (let i = 0; i < lines.length && out.length < 200; i++) {
            if (re.test(lines[i])) out.push(`./${path.relative(realRoot, file)}:${i + 1}:${lines[i]}`);
          }
        }
        return result(out.length ? capHead(out.join("\n") + "\n", 16_000) : "no matches");
      }),
    },
  ];
}

// The same loop on pi-agent-core: admission in beforeToolCall (deadline, call ceiling, argument
// shape), a receipt tallied from the events, usage totals; the result like run()'s.
async function runPi(workspace, turns, timing, sync) {
  const maxToolCalls = CALLS + 10;
  let toolCalls = 0;
  const receiptTools = new Map();
  const calls = [];
  const toolNames = [];
  const deadline = Date.now() + 3_600_000;
  const piAgent = new Agent({
    initialState: {
      systemPrompt: "Read the workspace.",
      model: fauxModel(),
      thinkingLevel: "off",
      tools: nodeTools(workspace, timing, sync),
    },
    streamFn: scriptedStream(turns),
    beforeToolCall: async ({ toolCall, args: callArgs }) => {
      if (Date.now() >= deadline) return { block: true, reason: "cave_run_deadline_exceeded" };
      if (++toolCalls > maxToolCalls) return { block: true, reason: "cave_tool_call_budget_exceeded" };
      if (callArgs === null || typeof callArgs !== "object" || Array.isArray(callArgs)) return { block: true, reason: "cave_tool_arguments_invalid" };
      return undefined;
    },
  });
  piAgent.subscribe((event) => {
    if (event.type === "tool_execution_start") {
      toolNames.push(event.toolName);
      const entry = receiptTools.get(event.toolName) ?? { name: event.toolName, calls: 0, errors: 0 };
      entry.calls += 1;
      receiptTools.set(event.toolName, entry);
    } else if (event.type === "tool_execution_end" && event.isError) {
      receiptTools.get(event.toolName).errors += 1;
    } else if (event.type === "message_end" && event.message.role === "assistant") {
      const u = event.message.usage;
      calls.push({ provider: event.message.provider, model: event.message.model, inputTokens: u.input, outputTokens: u.output });
    }
  });
  await piAgent.prompt("Read the workspace.");
  const last = piAgent.state.messages.at(-1);
  return {
    text: last.content.filter((c) => c.type === "text").map((c) => c.text).join(""),
    toolCalls: toolNames,
    receipt: { calls, tools: [...receiptTools.values()] },
  };
}

async function runKnap(workspace, turns) {
  const def = agent({
    id: "bench",
    instructions: "Read the workspace.",
    model: fauxModel(),
    sandbox: "host",
    reasoning: "off",
    tools: shellTools({ workspace, tools: ["read_file", "grep"] }),
  });
  return run(def, "Read the workspace.", {
    ensureRuntime: false,
    model: fauxModel(),
    streamFn: scriptedStream(turns),
    maxModelCalls: CALLS + 10,
    maxToolCalls: CALLS + 10,
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  if (native.kernelStats().debugBuild) {
    console.error("bench/kernel.mjs: the loaded addon is a debug build; build with `npx napi build --platform --release`");
    console.error("(or point NAPI_RS_NATIVE_LIBRARY_PATH at a release build)");
    if (!args.includes("--allow-debug")) process.exit(2);
  }
  const { root, files } = makeWorkspace();
  const turns = script(files);
  const contestants = {
    knap: { name: "knap run() (Rust kernel, native tools)", samples: [] },
    pi: { name: "pi-agent-core + Node tools (fs.promises)", samples: [] },
    piSync: { name: "pi-agent-core + Node tools (fs sync)", samples: [] },
  };
  const check = (r, who) => {
    if (r.toolCalls.length !== CALLS || r.text !== "done" || r.receipt.tools.some((t) => t.errors)) throw new Error(`${who} run went wrong`);
  };
  const once = async (which) => {
    if (which === "knap") {
      const before = native.kernelStats();
      const t0 = performance.now();
      const r = await runKnap(root, turns);
      const ms = performance.now() - t0;
      const after = native.kernelStats();
      check(r, which);
      // Tool execution as the kernel timed it around each admitted call (native tools in Rust).
      if (after.toolCalls - before.toolCalls !== CALLS) throw new Error("kernelStats did not count every tool call");
      return { ms, toolMs: (after.toolExecNs - before.toolExecNs) / 1e6 };
    }
    const timing = { toolMs: 0 };
    const t0 = performance.now();
    const r = await runPi(root, turns, timing, which === "piSync");
    const ms = performance.now() - t0;
    check(r, which);
    return { ms, toolMs: timing.toolMs };
  };
  const order = Object.keys(contestants);
  for (const which of order) await once(which); // warm-up: JIT, file cache
  for (let i = 0; i < ROUNDS; i++) {
    // Rotate the order every round so no contestant always runs first.
    for (let j = 0; j < order.length; j++) {
      const which = order[(i + j) % order.length];
      contestants[which].samples.push(await once(which));
    }
  }
  fs.rmSync(root, { recursive: true, force: true });
  const rows = {};
  for (const [key, c] of Object.entries(contestants)) {
    const runMs = median(c.samples.map((x) => x.ms));
    rows[key] = {
      name: c.name,
      runMs: +runMs.toFixed(1),
      minRunMs: +Math.min(...c.samples.map((x) => x.ms)).toFixed(1),
      perCallUs: +((runMs * 1000) / CALLS).toFixed(1),
      toolExecMs: +median(c.samples.map((x) => x.toolMs)).toFixed(1),
      // Per round: (run − tool execution) / calls; the median of those.
      overheadPerStepUs: +median(c.samples.map((x) => ((x.ms - x.toolMs) * 1000) / CALLS)).toFixed(1),
    };
  }
  const report = {
    calls: CALLS,
    modelCalls: CALLS + 1,
    tools: ONLY ?? "read_file + grep",
    rounds: ROUNDS,
    node: process.version,
    kernelThread: process.env.KNAP_KERNEL === "worker" ? "tokio worker" : "JS thread",
    loadavg: os.loadavg().map((x) => +x.toFixed(2)),
    cpus: os.cpus().length,
    ...rows,
    speedup: +(rows.pi.runMs / rows.knap.runMs).toFixed(2),
    speedupVsSync: +(rows.piSync.runMs / rows.knap.runMs).toFixed(2),
  };
  if (JSON_OUT) {
    console.log(JSON.stringify(report, null, 2));
    return;
  }
  console.log(
    `kernel bench: ${CALLS} tool calls (${report.tools}), ${CALLS + 1} scripted model calls, median of ${ROUNDS} rounds ` +
      `(${process.version}, ${report.cpus} CPUs, load ${report.loadavg.join(" ")}, kernel on the ${report.kernelThread})`,
  );
  console.log("");
  console.log("| loop | run (ms) | best (ms) | per call (µs) | tool exec (ms) | overhead per step (µs) |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of [rows.knap, rows.pi, rows.piSync]) {
    console.log(`| ${r.name} | ${r.runMs} | ${r.minRunMs} | ${r.perCallUs} | ${r.toolExecMs} | ${r.overheadPerStepUs} |`);
  }
  console.log("");
  console.log(
    `knap vs pi-agent-core: ${report.speedup}x end to end (fs.promises tools; ${report.speedupVsSync}x vs sync-fs tools), target ≥ 2x; ` +
      `knap overhead per step ${rows.knap.overheadPerStepUs} µs, target < 200 µs`,
  );
}

await main();
