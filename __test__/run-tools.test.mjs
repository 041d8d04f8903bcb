// Tool execution inside a run: AbortSignal kills a running bash, stream .return() cancels,
// read tools run in parallel and others in order, per-tool timeouts (reference §3.9, §3.6).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

import { agent, auto, run, schema, shellTools, stream, tool, CavemanRunError } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { groupSurvivors, liveGroupMembers, tempWorkspace, waitForFile } from "./helpers.mjs";
import { baseOptions, collect, deferred, hostAgent, recordingStream, toolResultsSeen } from "./run-helpers.mjs";

function bashAgent(ws) {
  return agent({ id: "abort-bash", instructions: "x", model: auto(), sandbox: "host", tools: shellTools({ workspace: ws.root, tools: ["bash"] }) });
}

const SLEEPER = "echo $$ > shell.pid; sleep 30; echo survived > survived.txt";

test("AbortSignal during a running bash: the process group is killed and run() rejects with cave_run_aborted", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  const controller = new AbortController();
  let modelCalls = 0;
  const inner = scriptedStream([{ toolCalls: [{ name: "bash", args: { command: SLEEPER } }] }, { text: "never" }]);
  const pending = run(bashAgent(ws), "go", {
    ensureRuntime: false,
    model: fauxModel(),
    signal: controller.signal,
    streamFn: (...a) => (modelCalls++, inner(...a)),
  });
  await waitForFile(ws.path("shell.pid"));
  const pid = Number(fs.readFileSync(ws.path("shell.pid"), "utf8"));
  assert.ok(liveGroupMembers(pid).length >= 1, "bash is running");
  controller.abort();
  const error = await pending.then(
    () => assert.fail("run should reject"),
    (e) => e,
  );
  assert.ok(error instanceof CavemanRunError);
  assert.match(error.message, /cave_run_aborted/);
  assert.deepEqual(error.receipt.tools, [{ name: "bash", calls: 1, errors: 1 }]);
  assert.deepEqual(await groupSurvivors(pid), [], "no process of the bash group survives");
  assert.equal(fs.existsSync(`/proc/${pid}`) && !fs.readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z "), false);
  assert.equal(modelCalls, 1, "no model call after the abort");
  assert.equal(fs.existsSync(ws.path("survived.txt")), false);
});

test("stream(): leaving the loop early (.return()) kills the running bash", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  const turns = [{ toolCalls: [{ name: "bash", args: { command: SLEEPER } }] }, { text: "never" }];
  let pid;
  const seen = [];
  for await (const event of stream(bashAgent(ws), "go", baseOptions(turns))) {
    seen.push(event.type === "pi" ? event.event.type : event.type);
    if (event.type === "pi" && event.event.type === "tool_execution_start") {
      await waitForFile(ws.path("shell.pid"));
      pid = Number(fs.readFileSync(ws.path("shell.pid"), "utf8"));
      assert.ok(liveGroupMembers(pid).length >= 1);
      break;
    }
  }
  assert.ok(pid > 0);
  assert.deepEqual(await groupSurvivors(pid), []);
  assert.equal(seen.includes("run_end"), false);
});

test("an already-aborted signal: the run rejects with cave_run_aborted and the model is never called", async () => {
  let modelCalls = 0;
  const def = hostAgent("pre-aborted", []);
  await assert.rejects(
    run(def, "go", {
      ensureRuntime: false,
      model: fauxModel(),
      signal: AbortSignal.abort(),
      streamFn: (...a) => (modelCalls++, scriptedStream([{ text: "x" }])(...a)),
    }),
    (error) => error instanceof CavemanRunError && /cave_run_aborted/.test(error.message),
  );
  assert.equal(modelCalls, 0);
});

test("abort during a model call: the provider call sees the abort and the run rejects", async () => {
  const controller = new AbortController();
  const started = deferred();
  let providerSignal;
  const streamFn = (_model, _context, options) => {
    providerSignal = options.signal;
    started.resolve();
    return {
      [Symbol.asyncIterator]() {
        return { next: () => new Promise(() => {}), return: async () => ({ done: true, value: undefined }) };
      },
    };
  };
  const pending = run(hostAgent("abort-model", []), "go", { ensureRuntime: false, model: fauxModel(), signal: controller.signal, streamFn });
  await started.promise;
  controller.abort();
  await assert.rejects(pending, (error) => error instanceof CavemanRunError && /cave_run_aborted/.test(error.message));
  assert.equal(providerSignal.aborted, true);
});

test("abort during a JS tool: the tool's signal aborts", async () => {
  const controller = new AbortController();
  const started = deferred();
  let toolSignal;
  const waiter = tool({
    name: "waiter",
    description: "d",
    input: schema.object({}),
    effect: "read",
    execute: (_args, signal) =>
      new Promise((_resolve, reject) => {
        toolSignal = signal;
        started.resolve();
        signal.addEventListener("abort", () => reject(new Error("stopped")));
      }),
  });
  const pending = run(hostAgent("abort-tool", [waiter]), "go", baseOptions([{ toolCalls: [{ name: "waiter", args: {} }] }, { text: "x" }], { signal: controller.signal }));
  await started.promise;
  controller.abort();
  await assert.rejects(pending, /cave_run_aborted/);
  assert.equal(toolSignal.aborted, true);
});

/** Two read tools that each wait until the other has started: only parallel execution finishes. */
function barrierTools(log) {
  const started = { a: deferred(), b: deferred() };
  const make = (me, other) =>
    tool({
      name: `read_${me}`,
      description: "d",
      input: schema.object({}),
      effect: "read",
      timeoutMs: 10_000, // a liveness bound: sequential execution would end in cave_tool_timeout
      execute: async () => {
        log.push(`start ${me}`);
        started[me].resolve();
        await started[other].promise;
        log.push(`end ${me}`);
        return `${me} saw ${other}`;
      },
    });
  return [make("a", "b"), make("b", "a")];
}

test("effect:read tools of one turn run in parallel", async () => {
  const log = [];
  const def = hostAgent("parallel-reads", barrierTools(log));
  const { streamFn, calls } = recordingStream([
    { toolCalls: [{ name: "read_a", args: {} }, { name: "read_b", args: {} }] },
    { text: "done" },
  ]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn });
  assert.deepEqual(toolResultsSeen(calls), [
    { name: "read_a", isError: false, text: "a saw b" },
    { name: "read_b", isError: false, text: "b saw a" },
  ]);
  assert.deepEqual(log.slice(0, 2).sort(), ["start a", "start b"]);
  assert.deepEqual(result.receipt.tools, [
    { name: "read_a", calls: 1, errors: 0 },
    { name: "read_b", calls: 1, errors: 0 },
  ]);
});

test("parallel reads: admission (the policy) runs for every call before any of them executes", async () => {
  const log = [];
  const def = hostAgent("parallel-admission", barrierTools(log));
  await run(
    def,
    "go",
    baseOptions([{ toolCalls: [{ name: "read_a", args: {} }, { name: "read_b", args: {} }] }, { text: "done" }], {
      toolPolicy: ({ name }) => void log.push(`policy ${name}`),
    }),
  );
  assert.deepEqual(log.slice(0, 2), ["policy read_a", "policy read_b"]);
});

test("non-read tools run one after another, in order", async () => {
  const log = [];
  const make = (name, effect) =>
    tool({
      name,
      description: "d",
      input: schema.object({}),
      effect,
      execute: async () => {
        log.push(`start ${name}`);
        await new Promise((resolve) => setImmediate(resolve));
        log.push(`end ${name}`);
        return name;
      },
    });
  const def = hostAgent("sequential", [make("w1", "write"), make("w2", "idempotent"), make("w3", "external")]);
  await run(
    def,
    "go",
    baseOptions([{ toolCalls: [{ name: "w1", args: {} }, { name: "w2", args: {} }, { name: "w3", args: {} }] }, { text: "done" }]),
  );
  assert.deepEqual(log, ["start w1", "end w1", "start w2", "end w2", "start w3", "end w3"]);
});

test("a turn that mixes reads with a write runs sequentially (Pi: one sequential tool makes the batch sequential)", async () => {
  const log = [];
  const make = (name, effect) =>
    tool({
      name,
      description: "d",
      input: schema.object({}),
      effect,
      execute: async () => {
        log.push(`start ${name}`);
        await new Promise((resolve) => setImmediate(resolve));
        log.push(`end ${name}`);
        return name;
      },
    });
  const def = hostAgent("mixed", [make("r1", "read"), make("r2", "read"), make("w", "write")]);
  await run(
    def,
    "go",
    baseOptions([{ toolCalls: [{ name: "r1", args: {} }, { name: "r2", args: {} }, { name: "w", args: {} }] }, { text: "done" }]),
  );
  assert.deepEqual(log, ["start r1", "end r1", "start r2", "end r2", "start w", "end w"]);
});

test("per-tool timeoutMs: the call ends with cave_tool_timeout, its signal aborts, the run goes on", async () => {
  let toolSignal;
  const slow = tool({
    name: "slow",
    description: "d",
    input: schema.object({}),
    effect: "read",
    timeoutMs: 20,
    execute: (_args, signal) =>
      new Promise((_resolve, reject) => {
        toolSignal = signal;
        signal.addEventListener("abort", () => reject(new Error("aborted by timeout")));
      }),
  });
  const def = hostAgent("timeouts", [slow]);
  const { streamFn, calls } = recordingStream([{ toolCalls: [{ name: "slow", args: {} }] }, { text: "moved on" }]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn });
  assert.deepEqual(toolResultsSeen(calls), [{ name: "slow", isError: true, text: "cave_tool_timeout" }]);
  assert.equal(result.text, "moved on");
  assert.deepEqual(result.receipt.tools, [{ name: "slow", calls: 1, errors: 1 }]);
  assert.equal(toolSignal.aborted, true);
});

test("tool results: strings as-is, values as JSON, undefined as null, unserializable as an error", async () => {
  const values = { str: "plain", obj: { a: [1, 2] }, undef: undefined, num: 4 };
  const tools = Object.entries(values).map(([name, value]) =>
    tool({ name, description: "d", input: schema.object({}), effect: "read", execute: () => value }),
  );
  const cyclic = {};
  cyclic.self = cyclic;
  tools.push(tool({ name: "cyclic", description: "d", input: schema.object({}), effect: "read", execute: () => cyclic }));
  tools.push(tool({ name: "big", description: "d", input: schema.object({}), effect: "read", result: "inline", execute: () => "x".repeat(40_000) }));
  const def = hostAgent("serialize", tools);
  const { streamFn, calls } = recordingStream([
    { toolCalls: ["str", "obj", "undef", "num", "cyclic", "big"].map((name) => ({ name, args: {} })) },
    { text: "done" },
  ]);
  await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn });
  assert.deepEqual(toolResultsSeen(calls), [
    { name: "str", isError: false, text: "plain" },
    { name: "obj", isError: false, text: '{"a":[1,2]}' },
    { name: "undef", isError: false, text: "null" },
    { name: "num", isError: false, text: "4" },
    { name: "cyclic", isError: true, text: "cave_tool_result_not_json_safe:cyclic" },
    { name: "big", isError: true, text: "cave_tool_result_inline_limit" },
  ]);
});

test("native read tools (read_file, grep) run in parallel with each other inside Rust", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  ws.write("a.txt", "alpha\nbeta\n");
  const def = agent({ id: "native-reads", instructions: "x", model: auto(), sandbox: "host", tools: shellTools({ workspace: ws.root, tools: ["read_file", "grep"] }) });
  const events = await collect(
    stream(
      def,
      "go",
      baseOptions([{ toolCalls: [{ name: "read_file", args: { path: "a.txt" } }, { name: "grep", args: { pattern: "beta" } }] }, { text: "done" }]),
    ),
  );
  const ends = events.filter((e) => e.type === "pi" && e.event.type === "tool_execution_end").map((e) => [e.event.toolName, e.event.isError]);
  assert.deepEqual(ends.sort(), [
    ["grep", false],
    ["read_file", false],
  ]);
  assert.equal(events.at(-1).result.text, "done");
});
