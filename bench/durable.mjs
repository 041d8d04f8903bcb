#!/usr/bin/env node
// knap's durable-journal bench: `node bench/durable.mjs` (needs a release build:
// `npx napi build --platform --release`). Prints Markdown tables; see bench/DURABLE.md.
//
//   1. the disk's fsync rate: write ~250 B + fdatasync from Node (the ceiling for any journal),
//   2. DiskDurableStore.append, one event per append (one fdatasync each),
//   3. batches: k events of one step in one append (one fdatasync for all k),
//   4. four runs appending concurrently (fsyncs of different files overlap),
//   5. a real durable run: turns with one tool each, durable vs not,
//   6. resume of a 10,000-event journal: native load + analyze (the example
//      crates/knap-core/examples/durable_resume.rs, through cargo; target < 100 ms), and from JS:
//      load, resume to the first model call, replay of the completed run.
//
// Options: --events N (appends per measurement, default 2000), --runs N (resume repetitions,
// default 7), --turns N (turns of the journal built for section 6, default 2000 → 10,001 events).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { run, DiskDurableStore } from "../lib/index.mjs";
import { agent, auto, schema, tool } from "../lib/index.mjs";
import { messageStream } from "../lib/event-stream.mjs";
import { fauxModel } from "../lib/testing.mjs";

const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};
const EVENTS = opt("--events", 2000);
const RUNS = opt("--runs", 7);
const TURNS = opt("--turns", 2000);

const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (n, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const ms = (n) => `${fmt(n, n < 10 ? 2 : 1)} ms`;

const work = fs.mkdtempSync(path.join(os.tmpdir(), "knap-bench-durable-"));
process.on("exit", () => fs.rmSync(work, { recursive: true, force: true }));

let fsName = "?";
try {
  fsName = execFileSync("df", ["-T", work], { encoding: "utf8" }).trim().split("\n").at(-1).split(/\s+/).slice(0, 2).join(" ");
} catch {}
console.log(`# knap durable bench\n`);
console.log(`node ${process.version}, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), journal dir on ${fsName}\n`);

// A realistic event line (~250 bytes, like a tool_intent).
const line = (i) =>
  JSON.stringify({
    v: 2,
    at: new Date(1_764_700_000_000 + i).toISOString(),
    type: "tool_intent",
    path: "",
    toolCallId: `call-${i}`,
    name: "lookup",
    effect: "read",
    argsSha256: "29a9829b3c03948275ca3be1cb7b633c0207849d2c0bd3215060f2ac05abce64",
    idempotencyKey: "cave-e65c1fb4c3b758faefe1c9b31b66fb2b49529324454add6073332cfceccd52ae",
  });
const LINE_BYTES = Buffer.byteLength(line(0)) + 1;

// ---------------------------------------------------------------------------------------------
// 1. The disk's fsync rate.
{
  const file = path.join(work, "raw.jsonl");
  const fd = fs.openSync(file, "a", 0o600);
  const n = EVENTS;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    fs.writeSync(fd, line(i) + "\n");
    fs.fdatasyncSync(fd);
  }
  const dt = performance.now() - t0;
  fs.closeSync(fd);
  console.log(`## 1. The disk's fsync rate (Node: write + fdatasync, ${LINE_BYTES} B lines)\n`);
  console.log(`| writes | time | fdatasyncs/s | per fdatasync |\n|---:|---:|---:|---:|`);
  console.log(`| ${fmt(n)} | ${ms(dt)} | ${fmt((n / dt) * 1000)} | ${fmt((dt / n) * 1000, 1)} µs |\n`);
}

// ---------------------------------------------------------------------------------------------
// 2–3. DiskDurableStore.append: single events and batches.
const appendRows = [];
for (const k of [1, 2, 4, 8, 16]) {
  const store = new DiskDurableStore(path.join(work, `append-${k}`));
  const runId = `bench-${k}`;
  const appends = Math.max(1, Math.round(EVENTS / k));
  await store.append(runId, line(-1) + "\n"); // create the file and cache its handle
  const t0 = performance.now();
  for (let a = 0; a < appends; a++) {
    let data = "";
    for (let j = 0; j < k; j++) data += line(a * k + j) + "\n";
    await store.append(runId, data);
  }
  const dt = performance.now() - t0;
  const loaded = await store.load(runId);
  if (loaded.length !== appends * k + 1) throw new Error(`lost events: ${loaded.length}`);
  appendRows.push({ k, appends, events: appends * k, dt });
}
console.log(`## 2–3. DiskDurableStore.append (native; each append resolves after its fdatasync)\n`);
console.log(`| events per append | appends | events | time | appends/s | events/s | per append |\n|---:|---:|---:|---:|---:|---:|---:|`);
for (const r of appendRows) {
  console.log(
    `| ${r.k} | ${fmt(r.appends)} | ${fmt(r.events)} | ${ms(r.dt)} | ${fmt((r.appends / r.dt) * 1000)} | ${fmt((r.events / r.dt) * 1000)} | ${fmt((r.dt / r.appends) * 1000, 1)} µs |`,
  );
}
console.log("");

// ---------------------------------------------------------------------------------------------
// 4. Four runs appending at once (one event per append).
{
  const store = new DiskDurableStore(path.join(work, "parallel"));
  const runs = 4;
  const per = Math.round(EVENTS / runs);
  for (let r = 0; r < runs; r++) await store.append(`par-${r}`, line(-1) + "\n");
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: runs }, async (_, r) => {
      for (let i = 0; i < per; i++) await store.append(`par-${r}`, line(i) + "\n");
    }),
  );
  const dt = performance.now() - t0;
  console.log(`## 4. ${runs} runs appending concurrently (1 event per append)\n`);
  console.log(`| runs | events | time | events/s (all runs) |\n|---:|---:|---:|---:|`);
  console.log(`| ${runs} | ${fmt(runs * per)} | ${ms(dt)} | ${fmt(((runs * per) / dt) * 1000)} |\n`);
}

// ---------------------------------------------------------------------------------------------
// 5–6. Real runs: a model that calls one read tool per turn, `turns` times, then answers.
function turnModel(turns, hooks = {}, perTurn = 1) {
  let calls = 0;
  return (model, context, options) => {
    calls += 1;
    const turn = context.messages.filter((m) => m.role === "assistant").length;
    const content =
      turn < turns
        ? Array.from({ length: perTurn }, (_, k) => ({ type: "toolCall", id: `c${turn}-${k}-${process.pid}-${calls}`, name: "lookup", arguments: { q: `question ${turn}.${k}` } }))
        : [{ type: "text", text: "done" }];
    const message = {
      role: "assistant",
      content,
      api: model.api,
      provider: model.provider,
      model: model.id,
      usage: { input: 100, output: 10, cacheRead: 0, cacheWrite: 0, reasoning: 0, totalTokens: 110, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
      stopReason: turn < turns ? "toolUse" : "stop",
      timestamp: 1_764_700_000_000,
    };
    return messageStream(message, options?.signal, hooks.onCall?.(turn));
  };
}

const lookup = tool({
  name: "lookup",
  description: "Looks a question up.",
  input: schema.object({ q: schema.string() }),
  effect: "read",
  execute: ({ q }) => `the answer to ${q} is 42 (a short tool result of a few dozen bytes)`,
});
const benchAgent = agent({ id: "durable-bench", instructions: "bench", model: auto(), sandbox: "host", tools: [lookup] });
const runOptions = (turns, durable, hooks, extra = {}, perTurn = 1) => ({
  ensureRuntime: false,
  model: fauxModel(),
  streamFn: turnModel(turns, hooks, perTurn),
  maxModelCalls: turns + 10,
  maxToolCalls: turns * perTurn + 10,
  ...(durable ? { durable } : {}),
  ...extra,
});

/** A JS store over the disk store that counts appends (= fdatasyncs). */
function countingStore(root) {
  const disk = new DiskDurableStore(root);
  const counter = { appends: 0 };
  return {
    counter,
    load: (id) => disk.load(id),
    append: (id, data) => (counter.appends++, disk.append(id, data)),
    acquire: (id) => disk.acquire(id),
    close: (id) => disk.close(id),
  };
}

{
  console.log(`## 5. Durable runs (faux model, a read tool that returns at once; median of 3)\n`);
  console.log(`| run | turns × tools | time | per turn | journal events | appends (fdatasyncs) | events per fdatasync |\n|---|---|---:|---:|---:|---:|---:|`);
  for (const [turns, perTurn] of [
    [200, 1],
    [50, 8],
  ]) {
    const plain = [];
    const native = [];
    const counted = [];
    let events = 0;
    let appends = 0;
    for (let i = 0; i < 3; i++) {
      let t0 = performance.now();
      await run(benchAgent, "go", runOptions(turns, undefined, {}, {}, perTurn));
      plain.push(performance.now() - t0);
      const store = new DiskDurableStore(path.join(work, "runs"));
      t0 = performance.now();
      await run(benchAgent, "go", runOptions(turns, { runId: `t${turns}x${perTurn}-${i}`, store }, {}, {}, perTurn));
      native.push(performance.now() - t0);
      events = (await store.load(`t${turns}x${perTurn}-${i}`)).length;
      const counting = countingStore(path.join(work, "runs"));
      t0 = performance.now();
      await run(benchAgent, "go", runOptions(turns, { runId: `c${turns}x${perTurn}-${i}`, store: counting }, {}, {}, perTurn));
      counted.push(performance.now() - t0);
      appends = counting.counter.appends;
    }
    const shape = `${turns} × ${perTurn}${perTurn > 1 ? " (parallel)" : ""}`;
    const row = (label, times, ev, ap) =>
      console.log(`| ${label} | ${shape} | ${ms(median(times))} | ${fmt((median(times) / turns) * 1000)} µs | ${ev} | ${ap} | ${ap === "–" ? "–" : fmt(events / appends, 2)} |`);
    row("not durable", plain, "–", "–");
    row("durable, DiskDurableStore (native)", native, fmt(events), fmt(appends));
    row("durable, a JS store over the disk store", counted, fmt(events), fmt(appends));
  }
  console.log(
    `\nPer tool turn: call_started (its own fsync, before the provider), call_settled + the intents (one fsync), each settlement (one fsync, settlements finishing together share one), turn (one fsync).\n`,
  );
}

{
  // A pending journal of TURNS tool turns: the run is aborted inside its next model call.
  const store = new DiskDurableStore(path.join(work, "resume"));
  const runId = "resume-10k";
  const controller = new AbortController();
  const t0 = performance.now();
  await run(
    benchAgent,
    "go",
    runOptions(TURNS, { runId, store }, { onCall: (turn) => (turn === TURNS ? (controller.abort(), new Promise(() => {})) : undefined) }, { signal: controller.signal }),
  ).catch((e) => {
    if (!/cave_run_aborted/.test(e.message)) throw e;
  });
  const built = performance.now() - t0;
  const file = path.join(store.runDir(runId), "journal.jsonl");
  const bytes = fs.statSync(file).size;
  const baseEvents = (await store.load(runId)).length;

  const loads = [];
  for (let i = 0; i < RUNS; i++) {
    const s = performance.now();
    await store.load(runId);
    loads.push(performance.now() - s);
  }
  // Resume to the first model call: acquire + load + analyze + `resumed` (fsynced) + restore.
  const resumes = [];
  for (let i = 0; i < RUNS; i++) {
    const abort = new AbortController();
    let reached;
    const s = performance.now();
    await run(
      benchAgent,
      "go",
      runOptions(
        TURNS,
        { runId, store },
        {
          onCall: () => {
            reached = performance.now();
            abort.abort();
            return new Promise(() => {});
          },
        },
        { signal: abort.signal },
      ),
    ).catch((e) => {
      if (!/cave_run_aborted/.test(e.message)) throw e;
    });
    resumes.push(reached - s);
  }
  // Complete it, then time the replay of the completed journal (no model call).
  await run(benchAgent, "go", runOptions(TURNS, { runId, store }));
  const finalEvents = (await store.load(runId)).length;
  const replays = [];
  for (let i = 0; i < RUNS; i++) {
    const s = performance.now();
    const result = await run(benchAgent, "go", runOptions(TURNS, { runId, store }, { onCall: () => { throw new Error("no model call on replay"); } }));
    replays.push(performance.now() - s);
    if (result.text !== "done") throw new Error("bad replay");
  }
  // The native half alone (no JS, no lock, no run): crates/knap-core/examples/durable_resume.rs.
  let native;
  try {
    const out = execFileSync("cargo", ["run", "--quiet", "--release", "-p", "knap-core", "--example", "durable_resume", "--", store.root, runId, String(RUNS)], {
      cwd: path.dirname(path.dirname(new URL(import.meta.url).pathname)),
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
    native = JSON.parse(out.trim().split("\n").at(-1));
  } catch {
    native = undefined;
  }
  const target = (v) => (v < 100 ? "PASS (< 100 ms)" : "FAIL (≥ 100 ms)");
  console.log(`## 6. Resume of a ${fmt(baseEvents)}-event journal (${fmt(bytes / 1024 / 1024, 1)} MiB, ${fmt(TURNS)} tool turns; built in ${ms(built)}; median of ${RUNS})\n`);
  console.log(`| what | median | min | max | target |\n|---|---:|---:|---:|---|`);
  if (native) {
    console.log(`| native load (read, torn-tail check, split; ${fmt(native.events)} lines) | ${ms(native.loadMs)} | | | |`);
    console.log(`| native analyze, completed journal (validate every event, identity, terminal result) | ${ms(native.analyzeCompletedMs)} | | | |`);
    console.log(`| native analyze, same journal pending (+ rebuild ${fmt(native.pendingMessages)} transcript messages) | ${ms(native.analyzePendingMs)} | | | |`);
    console.log(`| **native load + analyze (pending)** | **${ms(native.loadMs + native.analyzePendingMs)}** | | | ${target(native.loadMs + native.analyzePendingMs)} |`);
  } else {
    console.log(`| native load + analyze | (cargo not available: skipped) | | | |`);
  }
  console.log(`| store.load() into JS (read, torn-tail check, ${fmt(baseEvents)} strings) | ${ms(median(loads))} | ${ms(Math.min(...loads))} | ${ms(Math.max(...loads))} | |`);
  console.log(
    `| resume from JS: run() → first model call (lock, load, analyze, \`resumed\` fsync, ${fmt(TURNS * 2 + 1)} messages handed to the model) | ${ms(median(resumes))} | ${ms(Math.min(...resumes))} | ${ms(Math.max(...resumes))} | |`,
  );
  console.log(`| replay from JS: run() on the completed run (${fmt(finalEvents)} events) → result, no model call | ${ms(median(replays))} | ${ms(Math.min(...replays))} | ${ms(Math.max(...replays))} | ${target(median(replays))} |`);
  console.log("");
}
