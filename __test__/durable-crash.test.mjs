// Durable runs against real crashes: a child process runs a durable run and is killed with
// SIGKILL at a journal barrier; a fresh process resumes. What re-ran and what did not is counted
// from a side-effect file every tool execution (and every model call) appends to.
//
// The guarantees checked: no write/external tool ever runs twice (an unsettled one fails the
// resume closed with cave_durable_tool_effect_uncertain, a settled one replays); a read or
// idempotent tool re-runs at most once, with the same idempotency key and `resumed: true`; model
// calls are at-least-once and an unsettled one is counted in possibleDoubleCountCalls.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { run, stream, DiskDurableStore, CavemanRunError } from "../lib/index.mjs";
import { countSide, journalEvents, readSide, scenarioAgent, scenarioOptions } from "./fixtures/durable-scenario.mjs";
import { startProcess } from "./fixtures/processes.mjs";

const CHILD = fileURLToPath(new URL("./fixtures/durable-child.mjs", import.meta.url));
const WATCHDOG = { timeout: 120_000 };
const sha256 = (text) => createHash("sha256").update(text).digest("hex");

function workspace(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-durable-crash-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { dir, root: path.join(dir, "durable"), sideFile: path.join(dir, "side.jsonl") };
}

/** Starts the crash child; `until(pred)` resolves with the first message matching `pred`. */
const startChild = (config) => startProcess(CHILD, config);

/** Runs a child to its barrier, then SIGKILLs it. Returns the barrier message. */
async function crashAt(config) {
  const c = startChild(config);
  const stopped = await c.until((m) => m.barrier || m.done || m.error);
  assert.ok(stopped.barrier, `the child should stop at a barrier, got ${JSON.stringify(stopped).slice(0, 500)}`);
  c.child.kill("SIGKILL");
  const { signal } = await c.exited;
  assert.equal(signal, "SIGKILL");
  return stopped;
}

/** Runs a child to its end: `{done}` or `{error}`. */
async function runChild(config) {
  const c = startChild(config);
  const end = await c.until((m) => m.done || m.error || m.barrier);
  await c.exited;
  return end;
}

const modelTurnsOf = (sideFile, pid) => readSide(sideFile).filter((e) => e.model !== undefined && e.pid === pid).map((e) => e.model);
const toolRunsOf = (sideFile, name) => readSide(sideFile).filter((e) => e.tool === name);

function base(ws, extra = {}) {
  return { root: ws.root, runId: "crash-1", sideFile: ws.sideFile, store: "disk", ...extra };
}

/** A resume in a fresh process must complete; returns the RunResult. */
async function resumeOk(ws, extra = {}) {
  const end = await runChild(base(ws, extra));
  assert.ok(end.done, `resume should complete: ${JSON.stringify(end).slice(0, 800)}`);
  return end.done;
}

/** A resume in a fresh process must fail; returns `{code, message, receipt}`. */
async function resumeFails(ws, extra = {}) {
  const end = await runChild(base(ws, extra));
  assert.ok(end.error, `resume should fail: ${JSON.stringify(end).slice(0, 800)}`);
  return end.error;
}

function types(ws, runId = "crash-1") {
  return journalEvents(new DiskDurableStore(ws.root), runId).map((e) => e.type);
}

const ONCE_EACH = { lookup: 1, upsert: 1, save: 1, send: 1 };
const toolCounts = (ws) => {
  const { model: _model, ...tools } = countSide(ws.sideFile);
  return tools;
};

// ---------------------------------------------------------------------------------------------
// Kills at each barrier.

test("killed during the first model call: the call is re-driven and counted as a possible double charge", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const { pid } = await crashAt(base(ws, { crash: { at: "model", turn: 0 } }));
  assert.deepEqual(types(ws), ["run_started", "call_started"], "the intent was fsynced before the provider was reached");
  const result = await resumeOk(ws);
  assert.equal(result.resumed, true);
  assert.equal(result.text, "done");
  assert.deepEqual(result.receipt.resume, {
    attempts: 2,
    priorCalls: 0,
    priorEstimatedUsd: 0,
    priorTokens: 0,
    priorUnpriced: false,
    possibleDoubleCountCalls: 1,
    discardedPartialTurn: false,
  });
  assert.deepEqual(toolCounts(ws), ONCE_EACH);
  assert.deepEqual(modelTurnsOf(ws.sideFile, pid), [0]);
  assert.equal(result.receipt.calls.length, 5, "receipt.calls covers this attempt only");
});

test("killed during a later model call: settled calls and tools are not bought again", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { crash: { at: "model", turn: 2 } }));
  const result = await resumeOk(ws);
  assert.equal(result.resumed, true);
  assert.equal(result.receipt.resume.attempts, 2);
  assert.equal(result.receipt.resume.priorCalls, 2);
  assert.equal(result.receipt.resume.possibleDoubleCountCalls, 1);
  assert.equal(result.receipt.resume.discardedPartialTurn, false);
  assert.equal(result.receipt.resume.priorTokens, 110 + 121);
  assert.deepEqual(toolCounts(ws), ONCE_EACH);
  const resumedPid = readSide(ws.sideFile).at(-1).pid;
  assert.deepEqual(modelTurnsOf(ws.sideFile, resumedPid), [2, 3, 4], "the resume continues from the last completed turn");
  // Whole-run totals: turns 0..4 once each, plus the settled ones from the first attempt only.
  assert.equal(result.inputTokens, 100 + 110 + 120 + 130 + 140);
  assert.deepEqual(result.toolCalls, ["lookup", "upsert", "save", "send"]);
});

test("killed after a read's intent is durable (before its work): the read runs once, resumed with the journaled key", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { store: "js", crash: { at: "store", event: "tool_intent", tool: "lookup", when: "after" } }));
  assert.deepEqual(types(ws), ["run_started", "call_started", "call_settled", "tool_intent"], "call_settled rode on the intent's fsync");
  const intent = journalEvents(new DiskDurableStore(ws.root), "crash-1").at(-1);
  assert.equal(toolRunsOf(ws.sideFile, "lookup").length, 0);
  const result = await resumeOk(ws);
  const runs = toolRunsOf(ws.sideFile, "lookup");
  assert.equal(runs.length, 1);
  assert.deepEqual(runs[0].durable, { idempotencyKey: intent.idempotencyKey, resumed: true });
  assert.match(intent.idempotencyKey, /^cave-[0-9a-f]{64}$/);
  assert.deepEqual(toolCounts(ws), ONCE_EACH);
  assert.equal(result.receipt.resume.priorCalls, 1);
  assert.equal(result.receipt.resume.possibleDoubleCountCalls, 0);
  // No turn was checkpointed: the resume restarts from the prompt, with the settled spend kept.
  const settled = journalEvents(new DiskDurableStore(ws.root), "crash-1").filter((e) => e.type === "tool_settled" && e.name === "lookup");
  assert.equal(settled.length, 1);
  assert.equal(settled[0].toolCallId, intent.toolCallId, "the settlement pairs with the recorded intent");
});

test("killed inside a read after its side effect: the read re-runs at most once, same key, resumed: true", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { crash: { at: "tool", tool: "lookup", when: "after" } }));
  await resumeOk(ws);
  const runs = toolRunsOf(ws.sideFile, "lookup");
  assert.equal(runs.length, 2, "at-least-once: the unsettled read ran again, once");
  assert.equal(runs[0].durable.resumed, false);
  assert.equal(runs[1].durable.resumed, true);
  assert.equal(runs[0].durable.idempotencyKey, runs[1].durable.idempotencyKey);
  assert.deepEqual(toolCounts(ws), { ...ONCE_EACH, lookup: 2 });
});

test("killed inside an idempotent tool after its side effect: re-run with the same key and resumed: true", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { crash: { at: "tool", tool: "upsert", when: "after" } }));
  const result = await resumeOk(ws);
  const runs = toolRunsOf(ws.sideFile, "upsert");
  assert.deepEqual(
    runs.map((r) => r.durable.resumed),
    [false, true],
  );
  assert.equal(runs[0].durable.idempotencyKey, runs[1].durable.idempotencyKey);
  assert.match(runs[0].durable.idempotencyKey, /^cave-[0-9a-f]{64}$/);
  assert.deepEqual(toolCounts(ws), { ...ONCE_EACH, upsert: 2 });
  assert.equal(result.resumed, true);
});

test("killed inside a write after its side effect: the resume refuses (effect uncertain), the write never runs twice", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const { pid } = await crashAt(base(ws, { crash: { at: "tool", tool: "save", when: "after" } }));
  const before = countSide(ws.sideFile);
  const error = await resumeFails(ws);
  assert.equal(error.code, "cave_agent_run_failed");
  assert.match(error.message, new RegExp(`cave_durable_tool_effect_uncertain:save:call-2-0-${pid}`));
  assert.deepEqual(countSide(ws.sideFile), before, "no tool and no model call ran on the refused resume");
  assert.deepEqual(toolCounts(ws), { lookup: 1, upsert: 1, save: 1, send: 0 });
  assert.deepEqual(types(ws).slice(-2), ["resumed", "run_failed"], "the refusal is the run's journaled outcome");
  // The failed run now replays its error, still without running anything.
  const again = await resumeFails(ws);
  assert.equal(again.message, error.message);
  assert.deepEqual(countSide(ws.sideFile), before);
});

test("killed before an external tool's settlement is durable: never re-run blind", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { store: "js", crash: { at: "store", event: "tool_settled", tool: "send", when: "before" } }));
  assert.equal(toolRunsOf(ws.sideFile, "send").length, 1);
  const error = await resumeFails(ws);
  assert.match(error.message, /cave_durable_tool_effect_uncertain:send:call-3-0-\d+/);
  assert.equal(toolRunsOf(ws.sideFile, "send").length, 1);
});

test("killed after an external tool's intent, before its work: refused too (at most once means possibly zero)", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { store: "js", crash: { at: "store", event: "tool_intent", tool: "send", when: "after" } }));
  const error = await resumeFails(ws);
  assert.match(error.message, /cave_durable_tool_effect_uncertain:send:/);
  assert.equal(toolRunsOf(ws.sideFile, "send").length, 0);
  assert.deepEqual(toolCounts(ws), { lookup: 1, upsert: 1, save: 1, send: 0 });
});

test("killed after a write settled (before the turn checkpoint): the write replays its journaled result", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const { pid } = await crashAt(base(ws, { store: "js", crash: { at: "store", event: "tool_settled", tool: "save", when: "after" } }));
  assert.equal(types(ws).at(-1), "tool_settled");
  const result = await resumeOk(ws);
  assert.deepEqual(toolCounts(ws), ONCE_EACH, "the settled write was not executed again");
  const resumedPid = readSide(ws.sideFile).at(-1).pid;
  assert.notEqual(resumedPid, pid);
  assert.deepEqual(modelTurnsOf(ws.sideFile, resumedPid), [2, 3, 4], "the turn that asked for the write was re-driven");
  assert.equal(result.receipt.resume.priorCalls, 3);
  assert.equal(result.receipt.resume.possibleDoubleCountCalls, 0);
  // The re-driven call minted a new tool call id; the settlement kept the recorded one.
  const events = journalEvents(new DiskDurableStore(ws.root), "crash-1");
  assert.equal(events.filter((e) => e.type === "tool_intent" && e.name === "save").length, 1);
  assert.equal(events.filter((e) => e.type === "tool_settled" && e.name === "save").length, 1);
});

test("killed before run_completed: the resume re-drives the final turn only and completes", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { store: "js", crash: { at: "store", event: "run_completed", when: "before" } }));
  assert.equal(types(ws).at(-1), "turn");
  const result = await resumeOk(ws);
  assert.equal(result.resumed, true);
  assert.equal(result.text, "done");
  assert.equal(result.receipt.resume.discardedPartialTurn, true, "the answer turn was cut and asked again");
  assert.equal(result.receipt.resume.priorCalls, 5);
  assert.deepEqual(toolCounts(ws), ONCE_EACH);
  const resumedPid = readSide(ws.sideFile).at(-1).pid;
  assert.deepEqual(modelTurnsOf(ws.sideFile, resumedPid), [4]);
  assert.equal(types(ws).at(-1), "run_completed");
  // And now it is a completed run: a third process replays it without any model call.
  const before = countSide(ws.sideFile);
  const replay = await resumeOk(ws);
  assert.deepEqual(replay, result);
  assert.deepEqual(countSide(ws.sideFile), before);
});

test("killed after run_completed is durable: the next process replays the journaled result with no model call", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { store: "js", crash: { at: "store", event: "run_completed", when: "after" } }));
  const events = journalEvents(new DiskDurableStore(ws.root), "crash-1");
  assert.equal(events.at(-1).type, "run_completed");
  const before = countSide(ws.sideFile);
  const replay = await resumeOk(ws);
  assert.deepEqual(replay, events.at(-1).result);
  assert.equal(replay.resumed, undefined, "the first attempt completed it");
  assert.deepEqual(countSide(ws.sideFile), before);
});

test("killed mid-append (torn tool_settled of a read): the torn tail is cut and the read re-runs once", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { store: "js", crash: { at: "store", event: "tool_settled", tool: "lookup", when: "torn" } }));
  const file = path.join(new DiskDurableStore(ws.root).runDir("crash-1"), "journal.jsonl");
  const torn = fs.readFileSync(file, "utf8");
  assert.notEqual(torn.at(-1), "\n", "the crash left a partial line");
  await resumeOk(ws);
  assert.equal(toolRunsOf(ws.sideFile, "lookup").length, 2);
  assert.deepEqual(toolCounts(ws), { ...ONCE_EACH, lookup: 2 });
  const healed = fs.readFileSync(file, "utf8");
  assert.equal(healed.at(-1), "\n");
  for (const line of healed.split("\n").filter(Boolean)) JSON.parse(line);
  assert.ok(healed.startsWith(torn.slice(0, torn.lastIndexOf("\n") + 1)), "everything before the torn line is untouched");
});

test("parallel reads: one settled, one killed mid-work; the settled one replays, the other re-runs", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { script: "parallel", crash: { at: "tool", tool: "lookup", args: { q: "y" }, when: "after" } }));
  const result = await resumeOk(ws, { script: "parallel" });
  const runs = toolRunsOf(ws.sideFile, "lookup");
  assert.equal(runs.filter((r) => r.args.q === "y").length, 2);
  const xRuns = runs.filter((r) => r.args.q === "x").length;
  assert.ok(xRuns === 1 || xRuns === 2, "x re-ran only if it had not settled before the kill");
  assert.equal(toolRunsOf(ws.sideFile, "save").length, 1);
  assert.equal(result.text, "done");
  const events = journalEvents(new DiskDurableStore(ws.root), "crash-1");
  const xSettled = events.filter((e) => e.type === "tool_settled" && e.name === "lookup");
  assert.equal(xSettled.length, 2, "both reads settled exactly once in the journal");
});

// ---------------------------------------------------------------------------------------------
// Locks.

test("two processes race to resume one run: exactly one drives it, the other gets cave_durable_run_locked; the dead winner's lock is taken over", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { crash: { at: "model", turn: 2 } }));
  // Both contenders stop in the re-driven call if they win, so the winner holds the lock.
  const config = base(ws, { crash: { at: "model", turn: 2 } });
  const a = startChild(config);
  const b = startChild(config);
  const outcomes = await Promise.all([a, b].map((c) => c.until((m) => m.barrier || m.error || m.done)));
  const winners = outcomes.filter((o) => o.barrier);
  const losers = outcomes.filter((o) => o.error);
  assert.equal(winners.length, 1, JSON.stringify(outcomes));
  assert.equal(losers.length, 1);
  assert.equal(losers[0].error.code, "cave_durable_run_locked");
  assert.match(losers[0].error.message, /^cave_durable_run_locked: /);
  const winner = outcomes[0].barrier ? a : b;
  const loser = outcomes[0].barrier ? b : a;
  await loser.exited;
  assert.equal(types(ws).filter((x) => x === "resumed").length, 1, "the loser wrote nothing");
  // The winner dies holding the lock: its lock.d names a dead pid, which the next process takes over.
  winner.child.kill("SIGKILL");
  await winner.exited;
  const lock = path.join(new DiskDurableStore(ws.root).runDir("crash-1"), "lock.d", "owner.json");
  assert.equal(JSON.parse(fs.readFileSync(lock, "utf8")).pid, winners[0].pid);
  const result = await resumeOk(ws);
  assert.equal(result.receipt.resume.attempts, 3);
  assert.equal(result.receipt.resume.possibleDoubleCountCalls, 2, "one unsettled call per crashed attempt");
  assert.deepEqual(toolCounts(ws), ONCE_EACH);
  assert.equal(fs.existsSync(lock), false, "released after the run");
  // The journal now ends in run_completed after two attempts that each left an unsettled call
  // intent: it replays cleanly (the reference would read its own journal as corrupt here).
  const before = countSide(ws.sideFile);
  const replay = await resumeOk(ws);
  assert.deepEqual(replay, result);
  assert.deepEqual(countSide(ws.sideFile), before);
});

test("a stale lock planted by a dead pid is taken over", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const dead = spawn(process.execPath, ["-e", ""]);
  const deadPid = dead.pid;
  await new Promise((resolve) => dead.on("exit", resolve));
  const store = new DiskDurableStore(ws.root);
  const lockDir = path.join(store.runDir("stale-1"), "lock.d");
  fs.mkdirSync(lockDir, { recursive: true });
  fs.writeFileSync(path.join(lockDir, "owner.json"), JSON.stringify({ pid: deadPid }));
  const result = await run(scenarioAgent("short", ws.sideFile), "go", scenarioOptions(ws.sideFile, { runId: "stale-1", store }));
  assert.equal(result.text, "done");
  assert.equal(fs.existsSync(lockDir), false);
  // A live owner (this process) is not taken over.
  fs.mkdirSync(lockDir, { recursive: true });
  fs.writeFileSync(path.join(lockDir, "owner.json"), JSON.stringify({ pid: process.pid }));
  await assert.rejects(store.acquire("stale-1"), (e) => e.code === "cave_durable_run_locked");
});

// ---------------------------------------------------------------------------------------------
// Journal integrity.

async function completedRun(ws, runId = "done-1", script = "short") {
  const store = new DiskDurableStore(ws.root);
  const result = await run(scenarioAgent(script, ws.sideFile), "go", scenarioOptions(ws.sideFile, { runId, store }));
  return { store, result, file: path.join(store.runDir(runId), "journal.jsonl") };
}

const refusing = (ws, runId, store, extra = {}) => scenarioOptions(ws.sideFile, { runId, store }, extra, { refuse: true });

test("a torn last line is recovered, not reported as corruption", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const { store, result, file } = await completedRun(ws);
  const original = fs.readFileSync(file);
  fs.appendFileSync(file, '{"v":2,"at":"2026-01-01T00:00:00.000Z","type":"tu');
  const replay = await run(scenarioAgent("short", ws.sideFile), "go", refusing(ws, "done-1", store));
  assert.deepEqual(replay, result);
  assert.deepEqual(fs.readFileSync(file), original, "the torn tail was cut back to the last newline");
});

test("a corrupted middle line is a clear cave_durable_journal_corrupt error and the file is left byte-identical", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const { store, file } = await completedRun(ws);
  const lines = fs.readFileSync(file, "utf8").split("\n");
  for (const [label, bad, detail] of [
    ["unparseable", lines[2].slice(0, 40) + "#garbage", /cave_durable_journal_corrupt: unparseable journal line/],
    ["extra key", lines[2].replace(/}$/, ',"extra":1}'), /cave_durable_journal_corrupt: malformed call_settled fields/],
    ["bad timestamp", lines[2].replace(/"at":"[^"]+"/, '"at":"yesterday"'), /cave_durable_journal_corrupt: malformed event timestamp/],
  ]) {
    const corrupted = [...lines];
    corrupted[2] = bad;
    fs.writeFileSync(file, corrupted.join("\n"));
    const bytes = fs.readFileSync(file);
    const error = await run(scenarioAgent("short", ws.sideFile), "go", refusing(ws, "done-1", store)).then(
      () => assert.fail(`${label}: should reject`),
      (e) => e,
    );
    assert.equal(error.code, "cave_durable_journal_corrupt", label);
    assert.match(error.message, detail, label);
    assert.ok(!(error instanceof CavemanRunError), "refused before the run started: a plain error");
    assert.deepEqual(fs.readFileSync(file), bytes, `${label}: nothing was overwritten`);
    assert.equal(fs.existsSync(path.join(store.runDir("done-1"), "lock.d")), false, "the lock was released");
  }
  // Unknown event types and versions have their own codes.
  const unknown = [...lines];
  unknown[2] = lines[2].replace('"type":"call_settled"', '"type":"call_mystery"');
  fs.writeFileSync(file, unknown.join("\n"));
  await assert.rejects(run(scenarioAgent("short", ws.sideFile), "go", refusing(ws, "done-1", store)), (e) => e.code === "cave_durable_journal_event_unknown");
  const v3 = [...lines];
  v3[2] = lines[2].replace('"v":2', '"v":3');
  fs.writeFileSync(file, v3.join("\n"));
  await assert.rejects(
    run(scenarioAgent("short", ws.sideFile), "go", refusing(ws, "done-1", store)),
    (e) => e.code === "cave_durable_journal_version_unsupported" && /journal v3, this runtime reads v2/.test(e.message),
  );
});

// ---------------------------------------------------------------------------------------------
// Terminal replays.

test("a completed run replays its result with a model that throws if called", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const { store, result } = await completedRun(ws, "done-2", "full");
  const before = countSide(ws.sideFile);
  const events = [];
  for await (const e of stream(scenarioAgent("full", ws.sideFile), "go", refusing(ws, "done-2", store))) events.push(e);
  assert.deepEqual(
    events.map((e) => e.type),
    ["run_start", "run_end"],
  );
  assert.deepEqual(events[1].result, result);
  assert.deepEqual(countSide(ws.sideFile), before, "no model call, no tool");
});

test("a failed run replays its error with a model that throws if called", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const store = new DiskDurableStore(ws.root);
  const def = scenarioAgent("short", ws.sideFile);
  // The provider fails on the first attempt: the run's journaled outcome is run_failed.
  const first = await run(def, "go", refusing(ws, "fail-1", store)).then(
    () => assert.fail("should fail"),
    (e) => e,
  );
  assert.ok(first instanceof CavemanRunError);
  assert.equal(journalEvents(store, "fail-1").at(-1).type, "run_failed");
  const again = await run(def, "go", refusing(ws, "fail-1", store)).then(
    () => assert.fail("should fail"),
    (e) => e,
  );
  assert.ok(again instanceof CavemanRunError);
  assert.equal(again.code, first.code);
  assert.equal(again.message, first.message);
  assert.deepEqual(again.receipt, first.receipt);
  assert.equal(countSide(ws.sideFile).model, 0);
});

// ---------------------------------------------------------------------------------------------
// Identity drift and option refusals.

test("resume with a changed definition, input or budget fails closed before any work", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { crash: { at: "model", turn: 1 } }));
  const store = new DiskDurableStore(ws.root);
  const file = path.join(store.runDir("crash-1"), "journal.jsonl");
  const bytes = fs.readFileSync(file);
  const before = countSide(ws.sideFile);
  const cases = [
    ["cave_durable_definition_changed", scenarioAgent("full", ws.sideFile, {}, ":v2"), "go", {}],
    ["cave_durable_input_mismatch", scenarioAgent("full", ws.sideFile), "another task", {}],
    ["cave_durable_budget_changed", scenarioAgent("full", ws.sideFile), "go", { budget: { maxTokens: 100_000 } }],
  ];
  for (const [code, def, input, extra] of cases) {
    const error = await run(def, input, refusing(ws, "crash-1", store, extra)).then(
      () => assert.fail(`${code}: should reject`),
      (e) => e,
    );
    assert.equal(error.code, code);
    assert.match(error.message, new RegExp(`^${code}: `));
  }
  assert.deepEqual(fs.readFileSync(file), bytes, "refusals are not journaled");
  assert.deepEqual(countSide(ws.sideFile), before);
  // The original identity still resumes.
  const result = await resumeOk(ws);
  assert.equal(result.resumed, true);
});

test("invalid runId and maxCostUsd are refused before any journal write", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const store = new DiskDurableStore(ws.root);
  const def = scenarioAgent("short", ws.sideFile);
  const bad = await run(def, "go", refusing(ws, "bad id with spaces", store)).then(
    () => assert.fail("should reject"),
    (e) => e,
  );
  assert.equal(bad.code, "cave_durable_run_id_invalid");
  assert.equal(bad.message, "cave_durable_run_id_invalid: durable.runId must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}");
  const cost = await run(def, "go", refusing(ws, "cost-1", store, { maxCostUsd: 1 })).then(
    () => assert.fail("should reject"),
    (e) => e,
  );
  assert.equal(cost.code, "cave_durable_max_cost_usd_unsupported");
  assert.match(cost.message, /^cave_durable_max_cost_usd_unsupported: use RunOptions.budget with durable runs/);
  assert.equal(fs.existsSync(ws.root), false, "nothing was written");
  assert.equal(countSide(ws.sideFile).model, 0);
});

// ---------------------------------------------------------------------------------------------
// Tool identity, subagents, policy.

test("tools get context.durable {idempotencyKey, resumed} bound to runId, path, call id, name and args digest", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const { store } = await completedRun(ws, "ctx-1", "full");
  const intents = journalEvents(store, "ctx-1").filter((e) => e.type === "tool_intent");
  const runs = readSide(ws.sideFile).filter((e) => e.tool);
  assert.equal(intents.length, 4);
  for (const [i, intent] of intents.entries()) {
    assert.equal(runs[i].tool, intent.name);
    assert.deepEqual(runs[i].durable, { idempotencyKey: intent.idempotencyKey, resumed: false });
    assert.match(intent.idempotencyKey, /^cave-[0-9a-f]{64}$/);
    assert.equal(intent.argsSha256, sha256(JSON.stringify(runs[i].args)), "digest of the canonical arguments");
    assert.equal(intent.idempotencyKey, `cave-${sha256(JSON.stringify(["ctx-1", "", intent.toolCallId, intent.name, intent.argsSha256]))}`);
  }
  // run_started journals the caller's input literally.
  assert.equal(journalEvents(store, "ctx-1")[0].input, "go");
  // Without durable, the context has no durable member.
  const side2 = path.join(ws.dir, "side2.jsonl");
  await run(scenarioAgent("short", side2), "go", scenarioOptions(side2, undefined));
  assert.equal(readSide(side2).find((e) => e.tool).durable, null);
});

test("a subagent's calls are journaled through the root under delegate:<sha256(parent call id)> and restored on resume", WATCHDOG, async (t) => {
  const ws = workspace(t);
  await crashAt(base(ws, { script: "delegate", crash: { at: "model", script: "delegate", turn: 1 } }));
  const events = journalEvents(new DiskDurableStore(ws.root), "crash-1");
  const delegateIntent = events.find((e) => e.type === "tool_intent" && e.name === "delegate");
  const childPath = `delegate:${sha256(delegateIntent.toolCallId)}`;
  assert.match(childPath, /^delegate:[0-9a-f]{64}$/);
  const settled = events.filter((e) => e.type === "call_settled");
  assert.deepEqual(
    settled.map((e) => e.path),
    ["", childPath, childPath],
  );
  const childIntent = events.find((e) => e.type === "tool_intent" && e.name === "lookup");
  assert.equal(childIntent.path, childPath);
  assert.equal(childIntent.idempotencyKey, `cave-${sha256(JSON.stringify(["crash-1", childPath, childIntent.toolCallId, "lookup", childIntent.argsSha256]))}`);
  const result = await resumeOk(ws, { script: "delegate" });
  assert.equal(result.text, "parent done");
  assert.equal(result.receipt.resume.priorCalls, 3, "the root's call and the child's two");
  assert.equal(result.inputTokens, 100 + 100 + 110 + 110, "prior root + child calls, plus the re-driven root call");
  assert.equal(toolRunsOf(ws.sideFile, "lookup").length, 1, "the settled delegation was not run again");
});

test("the tool policy is evaluated again on resume: a now-denied settled call ends with cave_durable_tool_replay_incomplete", WATCHDOG, async (t) => {
  const ws = workspace(t);
  const { pid } = await crashAt(base(ws, { script: "short", store: "js", crash: { at: "store", event: "tool_settled", tool: "lookup", when: "after" } }));
  const error = await resumeFails(ws, { script: "short", deny: ["lookup"] });
  assert.equal(error.code, "cave_agent_run_failed");
  assert.match(error.message, new RegExp(`cave_durable_tool_replay_incomplete:lookup:call-0-0-${pid}`));
  assert.equal(toolRunsOf(ws.sideFile, "lookup").length, 1, "the denied call was neither run nor replayed");
  assert.equal(error.receipt.tools.find((x) => x.name === "lookup").denied, 1);
  assert.equal(types(ws).at(-1), "run_failed");
  // Journaled: replaying it (even with the grant back) reports the same failure.
  const again = await resumeFails(ws, { script: "short" });
  assert.equal(again.message, error.message);
});
