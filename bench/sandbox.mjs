#!/usr/bin/env node
// sandbox: "required" with RunOptions.entryPath against the same tool in-process (sandbox: "host").
//   node bench/sandbox.mjs [--runs N] [--calls N] [--write]       (needs `npm run build`)
//
// 1. Per call: one run() of N turns, each calling a JS tool that returns its input, then an
//    answer (scripted model). (N-call run − 1-call run) / (N − 1) is the mean cost of a call: in
//    a worker, the IPC round trip, JSON both ways, the pool, and the scheduler's tail.
// 2. Per run: one run() with one call. The difference is what a required run costs to start: a
//    fork of the worker, its import of the entry module (which loads knap) and the handshake.
// 3. One call's median: through the pool alone (no kernel), and a bare fork() IPC round trip of
//    the same message, the floor any process boundary costs.
// Prints Markdown (medians); --write also saves bench/SANDBOX.md.
import { fork } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { run } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { hostAgent, requiredAgent } from "./sandbox-entry.mjs";
import { SandboxPool } from "../lib/sandbox.mjs";
import { BENCH_DIR, fmtMs, fmtUs, fmtX, median } from "./common.mjs";

if (process.argv[2] === "--echo") {
  process.on("message", (m) => process.send({ type: "result", id: m.id, text: JSON.stringify(m.args) }));
  process.send({ type: "ready" });
} else {
  await main();
}

async function main() {
  const arg = (name, fallback) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? Number(process.argv[i + 1]) : fallback;
  };
  const RUNS = arg("--runs", 7);
  const CALLS = arg("--calls", 200);
  const ENTRY = fileURLToPath(new URL("./sandbox-entry.mjs", import.meta.url));

  function turns(calls) {
    const out = [];
    for (let n = 0; n < calls; n++) out.push({ toolCalls: [{ name: "noop", args: { n } }] });
    out.push({ text: "done" });
    return out;
  }

  async function timeRun(definition, calls, extra) {
    const t0 = performance.now();
    const result = await run(definition, "go", { model: fauxModel(), streamFn: scriptedStream(turns(calls)), maxModelCalls: calls + 1, maxToolCalls: calls, ...extra });
    const ms = performance.now() - t0;
    if (result.toolCalls.length !== calls || result.receipt.tools[0]?.errors) throw new Error("bench run went wrong");
    return ms;
  }

  const cases = [
    ["in-process (sandbox: \"host\")", hostAgent, {}],
    ["worker (sandbox: \"required\", entryPath)", requiredAgent, { entryPath: ENTRY }],
  ];

  // Warm-up: modules, the addon, the page cache of the entry's imports.
  for (const [, def, extra] of cases) await timeRun(def, 5, extra);

  const perCall = cases.map(() => []);
  const perRun = cases.map(() => []);
  for (let r = 0; r < RUNS; r++) {
    // Rotating order, so neither case always runs on a warmer machine.
    for (let k = 0; k < cases.length; k++) {
      const i = (k + r) % cases.length;
      const [, def, extra] = cases[i];
      perCall[i].push(await timeRun(def, CALLS, extra));
      perRun[i].push(await timeRun(def, 1, extra));
    }
  }

  // The floor: a bare fork()ed echo child, one IPC round trip per message, same payload shape.
  // Per-message medians (the machine is shared: means carry the scheduler's tail).
  async function bareRoundTrips(count) {
    const child = fork(fileURLToPath(import.meta.url), ["--echo"], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    await new Promise((resolve) => child.once("message", resolve));
    const each = [];
    for (let n = 0; n < count; n++) {
      const t0 = performance.now();
      await new Promise((resolve) => {
        child.once("message", resolve);
        child.send({ type: "call", id: n, tool: 0, args: { n }, context: { toolCallId: `c${n}` } });
      });
      each.push(performance.now() - t0);
    }
    child.kill();
    return median(each);
  }
  // One worker's call through the pool's proxy (lib/sandbox.mjs), without the kernel around it.
  async function poolCalls(count) {
    const pool = new SandboxPool({ entryPath: ENTRY, rootDir: BENCH_DIR, agentId: requiredAgent.id });
    const proxy = pool.route(requiredAgent.tools[0], [], false);
    const keep = setInterval(() => {}, 2 ** 30);
    await pool.start();
    const each = [];
    for (let n = 0; n < count; n++) {
      const t0 = performance.now();
      await proxy.execute({ n }, new AbortController().signal, { toolCallId: `c${n}` });
      each.push(performance.now() - t0);
    }
    pool.close();
    clearInterval(keep);
    return median(each);
  }
  const bare = [];
  const pooled = [];
  for (let r = 0; r < RUNS; r++) {
    bare.push(await bareRoundTrips(CALLS));
    pooled.push(await poolCalls(CALLS));
  }
  const bareUs = median(bare) * 1000;
  const pooledUs = median(pooled) * 1000;

  const callMs = perCall.map(median);
  const runMs = perRun.map(median);
  // Per call: the N-call run less the 1-call run (which holds the start), over N - 1 calls.
  const perCallUs = callMs.map((ms, i) => ((ms - runMs[i]) * 1000) / (CALLS - 1));
  const lines = [
    `# sandbox: "required" workers vs in-process tools`,
    "",
    `${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, Node ${process.version}, load average ${os.loadavg()[0].toFixed(1)}; medians of ${RUNS} runs, rotating order.`,
    "",
    `| case | run of ${CALLS} calls | per call | run of 1 call |`,
    "|---|---|---|---|",
    ...cases.map(([name], i) => `| ${name} | ${fmtMs(callMs[i])} | ${fmtUs(perCallUs[i])} | ${fmtMs(runMs[i])} |`),
    "",
    "| one call, median of each | |",
    "|---|---|",
    `| a worker call through the pool (lib/sandbox.mjs), no kernel | ${fmtUs(pooledUs)} |`,
    `| a bare fork() IPC round trip of the same message (the floor) | ${fmtUs(bareUs)} |`,
    "",
    `- A call in a worker costs ${fmtUs(perCallUs[1] - perCallUs[0])} more than in-process on average (${fmtX(perCallUs[1] / perCallUs[0])} per call); its median is ${fmtX(pooledUs / bareUs)} a bare IPC round trip.`,
    `- Starting a required run costs ${fmtMs(runMs[1] - runMs[0])} more (${fmtX(runMs[1] / runMs[0])}): the worker's fork, its import of the entry (and of knap), the handshake.`,
    "",
  ];
  const text = lines.join("\n");
  process.stdout.write(text + "\n");
  if (process.argv.includes("--write")) fs.writeFileSync(path.join(BENCH_DIR, "SANDBOX.md"), text);
}
