#!/usr/bin/env node
// Coding-agent bench, both numbers measured beside their baseline in the same run:
//   1. startup to the first prompt of `caveman-code` (no provider call), beside `node -e 0`,
//      both spawned the same way, interleaved; target ≤ 150 ms.
//   2. per-turn overhead of the session layer over run(): one scripted turn (knap/testing, no
//      provider) through run() with a fresh conversation, through runCodingTurn on a fresh
//      session, and through the REPL's streamed turn (observeCodingTurn + the live view + the
//      turn bill's text); target ≤ 1 ms.
//
//   node bench/code.mjs [--starts 21] [--turns 400] [--json] [--compare <dir>]
//
// `--compare <dir>`: also starts `<dir>/bin/caveman-code.mjs` (a copy of another tree: its lib/,
// bin/, index.js, package.json, addon and a node_modules link), interleaved with the others, so a
// startup change is measured before/after in one run.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { PassThrough } from "node:stream";
import { performance } from "node:perf_hooks";
import { run, createConversation } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { createCodingAgent, startCodingSession, runCodingTurn, formatTurnBill, CODING_RUN_BREAKERS } from "../lib/code.mjs";
import { observeCodingTurn } from "../lib/code/session.mjs";
import { createTurnView } from "../lib/code/view.mjs";
import { ROOT, fmtMs, fmtUs, fmtX, median } from "./common.mjs";

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const STARTS = arg("starts", 21);
const TURNS = arg("turns", 400);
const JSON_OUT = args.includes("--json");
const COMPARE = args.includes("--compare") ? path.resolve(args[args.indexOf("--compare") + 1]) : undefined;
const BIN = path.join(ROOT, "bin", "caveman-code.mjs");

const ws = fs.mkdtempSync(path.join(os.tmpdir(), "knap-code-bench-"));
fs.writeFileSync(path.join(ws, "notes.txt"), "a\nb\nc\n");

// ---------- 1. startup ----------

/** ms from spawn until `marker` appears on stdout (or until exit without a marker). */
function timeSpawn(argv, env, marker) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, argv, { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let t;
    child.stdout.on("data", (chunk) => {
      out += chunk;
      if (marker && t === undefined && out.includes(marker)) {
        t = performance.now() - t0;
        child.stdin.end();
      }
    });
    child.on("error", reject);
    child.on("exit", () => {
      if (!marker) t = performance.now() - t0;
      if (t === undefined) reject(new Error(`no prompt; stdout: ${out}`));
      else resolve(t);
    });
  });
}

const baseline = [];
const prompt = [];
const compared = [];
const cliEnv = { ANTHROPIC_API_KEY: "sk-bench", OPENAI_API_KEY: "", GEMINI_API_KEY: "", GOOGLE_API_KEY: "", CAVE_MODEL: "" };
for (let i = 0; i < STARTS; i++) {
  baseline.push(await timeSpawn(["-e", "0"], {}));
  prompt.push(await timeSpawn([BIN, "--workspace", ws], cliEnv, "agent [observe-only] > "));
  if (COMPARE) compared.push(await timeSpawn([path.join(COMPARE, "bin", "caveman-code.mjs"), "--workspace", ws], cliEnv, "agent [observe-only] > "));
}

// ---------- 2. per-turn overhead ----------

const agent = createCodingAgent({ workspace: ws, model: "anthropic/claude-haiku-4-5" });
const model = fauxModel();
const turnScript = () => scriptedStream([{ text: "done" }]);
const sink = new PassThrough();
sink.resume();

async function viaRun() {
  const t0 = performance.now();
  await run(agent.definition, "hi", {
    model,
    streamFn: turnScript(),
    rootDir: ws,
    conversation: createConversation(),
    cacheRetention: "long",
    breakers: CODING_RUN_BREAKERS,
  });
  return performance.now() - t0;
}

async function viaTurn() {
  const session = await startCodingSession(agent, { cave: "off" });
  const t0 = performance.now();
  await runCodingTurn(session, "hi", { model, streamFn: turnScript() });
  return performance.now() - t0;
}

async function viaRepl() {
  const session = await startCodingSession(agent, { cave: "off" });
  const t0 = performance.now();
  const view = createTurnView({ out: sink, notice: sink, tty: false });
  const turn = await observeCodingTurn(session, "hi", { model, streamFn: turnScript() }, (e) => view.event(e));
  view.finish(turn.text);
  sink.write(`${formatTurnBill(turn.bill, 0).join("\n")}\n`);
  return performance.now() - t0;
}

const samples = { run: [], turn: [], repl: [] };
for (let i = 0; i < 50; i++) await Promise.all([viaRun(), viaTurn(), viaRepl()].map((p) => p.catch((e) => console.error(e)))); // warm-up
for (let i = 0; i < TURNS; i++) {
  samples.run.push(await viaRun());
  samples.turn.push(await viaTurn());
  samples.repl.push(await viaRepl());
}
await agent.close();
fs.rmSync(ws, { recursive: true, force: true });

const m = {
  nodeE0: median(baseline),
  firstPrompt: median(prompt),
  run: median(samples.run),
  turn: median(samples.turn),
  repl: median(samples.repl),
};
const result = {
  node: process.version,
  starts: STARTS,
  turns: TURNS,
  startupMs: m.firstPrompt,
  nodeE0Ms: m.nodeE0,
  startupRatio: m.firstPrompt / m.nodeE0,
  runMs: m.run,
  runCodingTurnMs: m.turn,
  replTurnMs: m.repl,
  turnOverheadMs: m.turn - m.run,
  turnRatio: m.turn / m.run,
  replRatio: m.repl / m.run,
  replOverheadMs: m.repl - m.run,
};
if (COMPARE) {
  result.compareDir = COMPARE;
  result.compareStartupMs = median(compared);
  result.compareStartupRatio = median(compared) / m.nodeE0;
}
if (JSON_OUT) {
  console.log(JSON.stringify(result, null, 2));
} else {
  console.log(`Node ${process.version}, ${os.cpus().length} cores, load ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}\n`);
  console.log("| startup (median of " + STARTS + ") | ms |");
  console.log("| --- | ---: |");
  console.log(`| \`node -e 0\` | ${fmtMs(m.nodeE0)} |`);
  console.log(`| \`caveman-code\` to first prompt | ${fmtMs(m.firstPrompt)} |`);
  console.log(`| ratio | ${fmtX(m.firstPrompt / m.nodeE0)} |`);
  if (COMPARE) {
    console.log(`| \`${COMPARE}\` to first prompt | ${fmtMs(median(compared))} |`);
    console.log(`| its ratio | ${fmtX(median(compared) / m.nodeE0)} |`);
  }
  console.log("");
  console.log("| one scripted turn (median of " + TURNS + ") | per turn | over run() | ratio to run() |");
  console.log("| --- | ---: | ---: | ---: |");
  console.log(`| \`run()\` | ${fmtUs(m.run * 1000)} | | 1.00× |`);
  console.log(`| \`runCodingTurn()\` | ${fmtUs(m.turn * 1000)} | ${fmtUs((m.turn - m.run) * 1000)} | ${fmtX(m.turn / m.run)} |`);
  console.log(`| REPL turn (stream + view + bill text) | ${fmtUs(m.repl * 1000)} | ${fmtUs((m.repl - m.run) * 1000)} | ${fmtX(m.repl / m.run)} |\n`);
  const verdict = (ok) => (ok ? "PASS" : "FAIL");
  console.log(`${verdict(m.firstPrompt <= 150)} startup to first prompt ≤ 150 ms: ${fmtMs(m.firstPrompt)}`);
  console.log(`${verdict(m.turn - m.run <= 1)} runCodingTurn overhead over run() ≤ 1 ms: ${fmtUs((m.turn - m.run) * 1000)}`);
  console.log(`${verdict(m.repl - m.run <= 1)} REPL turn overhead over run() ≤ 1 ms: ${fmtUs((m.repl - m.run) * 1000)}`);
}
