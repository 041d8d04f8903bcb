// Streaming speculation of programmatic reads (caveman-code.md §3.7, §4.4 step 2): while the
// provider streams a caveman_code cell, its complete literal read calls start as nested calls
// of the kernel (full admission: events, receipt, policy with the provisional parent); the cell
// claims them instead of running them again; what it does not claim is abandoned. stats()
// counts launched / claimed / missed / abandoned across runs.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { run, stream, tool, schema, shellTools, DiskDurableStore } from "../lib/index.mjs";
import { fauxModel } from "../lib/testing.mjs";
import { createProgrammaticToolRuntime } from "../lib/programmatic-tools.mjs";
import { collect, deferred, hostAgent } from "./run-helpers.mjs";
import { tempWorkspace } from "./helpers.mjs";

const usage = () => ({ input: 100, output: 10, cacheRead: 0, cacheWrite: 0, totalTokens: 110, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } });

/**
 * A provider that streams pi events. A turn is `{ text }`, or `{ cell: [chunk | async fn] }`:
 * the cell's source arrives chunk by chunk as `toolcall_delta` events (a function is awaited
 * between chunks), then `toolcall_end` and `done`. Records each call's context messages.
 */
function streamingProvider(turns, name = "caveman_code") {
  let n = 0;
  const seen = [];
  const streamFn = (model, context) => {
    n += 1;
    seen.push(structuredClone(context.messages));
    const turn = turns[n - 1];
    const call = n;
    async function* events() {
      const partial = { role: "assistant", content: [], api: model.api, provider: model.provider, model: model.id, usage: usage(), stopReason: "stop", timestamp: Date.now() };
      yield { type: "start", partial };
      if (turn.text !== undefined) {
        partial.content.push({ type: "text", text: turn.text });
        yield { type: "text_delta", contentIndex: 0, delta: turn.text, partial };
        yield { type: "done", reason: "stop", message: partial };
        return;
      }
      partial.stopReason = "toolUse";
      const part = { type: "toolCall", id: `stream-${call}-0`, name, arguments: {} };
      partial.content.push(part);
      yield { type: "toolcall_start", contentIndex: 0, partial };
      let code = "";
      for (const chunk of turn.cell) {
        if (typeof chunk === "function") {
          await chunk();
          continue;
        }
        code += chunk;
        part.arguments = { code };
        yield { type: "toolcall_delta", contentIndex: 0, delta: chunk, partial };
      }
      yield { type: "toolcall_end", contentIndex: 0, toolCall: part, partial };
      yield { type: "done", reason: "toolUse", message: partial };
    }
    return events();
  };
  return { streamFn, seen };
}

/** The cell's result text the model saw on its last call. */
const cellResult = (seen) => seen.at(-1).find((m) => m.role === "toolResult");

/** A direct agent with a speculative read `look` (logs each execution) and a write `save`. */
function direct(log, { onLook } = {}) {
  const look = tool({
    name: "look",
    description: "look something up",
    input: schema.object({ q: schema.string() }),
    effect: "read",
    speculative: true,
    execute: async ({ q }, _signal, context) => {
      log.push({ q, toolCallId: context.toolCallId, parentToolCallId: context.parentToolCallId });
      await onLook?.(q);
      return `look:${q}`;
    },
  });
  const save = tool({ name: "save", description: "save", input: schema.object({ v: schema.number() }), effect: "write", execute: ({ v }) => `saved ${v}` });
  return hostAgent("speculating", [look, save]);
}

const within = (promise, ms) => Promise.race([promise.then(() => "in time"), new Promise((resolve) => setTimeout(resolve, ms, "too late").unref())]);

test("a cell's literal reads start while it streams, and its calls claim them (one execution each)", async () => {
  const log = [];
  const lookStarted = deferred();
  const runtime = createProgrammaticToolRuntime(direct(log, { onLook: () => lookStarted.resolve() }));
  let duringStream;
  const { streamFn, seen } = streamingProvider([
    {
      cell: [
        'const a = await look({"q": "a"});\n',
        // The stream goes on only once the read has started (or after 5 s, which fails below).
        async () => {
          duringStream = await within(lookStarted.promise, 5_000);
        },
        'const b = await look({"q": "b"});\n',
        "print(a, b);",
      ],
    },
    { text: "done" },
  ]);
  const policy = [];
  const events = await collect(stream(runtime.definition, "go", { model: fauxModel(), streamFn, toolPolicy: (input) => void policy.push(input) }));
  const end = events.at(-1);
  assert.equal(end.type, "run_end", JSON.stringify(end));
  assert.equal(duringStream, "in time", "the read ran before the provider finished the cell");
  assert.deepEqual(cellResult(seen).content[0].text, "look:a look:b");
  assert.deepEqual(log.map((l) => l.q), ["a", "b"], "each read executed once");
  assert.deepEqual(runtime.stats(), { launched: 2, claimed: 2, missed: 0, abandoned: 0 });

  const { runId } = end.result;
  const scope = `${runId}:spec:1:0`;
  // Full admission with the provisional parent, before the cell itself is admitted.
  assert.deepEqual(policy.map((p) => [p.name, p.toolCallId, p.parentToolCallId]), [
    ["look", `${scope}:nested:1`, scope],
    ["look", `${scope}:nested:2`, scope],
    ["caveman_code", "stream-1-0", undefined],
  ]);
  assert.deepEqual(log.map((l) => l.parentToolCallId), [scope, scope]);
  assert.deepEqual(end.result.toolCalls, ["look", "look", "caveman_code"]);
  assert.deepEqual(Object.fromEntries(end.result.receipt.tools.map((t) => [t.name, t.calls])), { look: 2, caveman_code: 1 });
  const nested = events.filter((e) => e.type === "nested_tool_start" || e.type === "nested_tool_end");
  assert.deepEqual(nested.map((e) => [e.type, e.id]).filter(([type]) => type === "nested_tool_start"), [
    ["nested_tool_start", `${scope}:nested:1`],
    ["nested_tool_start", `${scope}:nested:2`],
  ]);
  assert.equal(nested.length, 4, "a claim adds no event");
  // The first read's start precedes the cell's own tool_execution_start.
  const cellStart = events.findIndex((e) => e.type === "pi" && e.event.type === "tool_execution_start");
  assert.ok(events.indexOf(nested[0]) < cellStart);
});

test("unclaimed bets are abandoned when the cell closes; a read after a write is neither launched nor claimed; counts add up across runs", async () => {
  const log = [];
  const release = deferred();
  const runtime = createProgrammaticToolRuntime(direct(log, { onLook: (q) => (q === "slow" ? release.promise : undefined) }));
  const code = ['if (false) await look({"q": "slow"});\n', 'print(await look({"q": "b"}));\n'];
  const first = streamingProvider([{ cell: code }, { text: "done" }]);
  const events = await collect(stream(runtime.definition, "go", { model: fauxModel(), streamFn: first.streamFn }));
  release.resolve();
  const end = events.at(-1);
  assert.equal(end.type, "run_end", JSON.stringify(end));
  assert.equal(cellResult(first.seen).content[0].text, "look:b");
  assert.deepEqual(runtime.stats(), { launched: 2, claimed: 1, missed: 0, abandoned: 1 });
  // The abandoned bet stays in toolCalls and the receipt, as an error.
  const ends = events.filter((e) => e.type === "nested_tool_end");
  assert.deepEqual(ends.map((e) => [e.name, e.isError, e.result]).sort(), [
    ["look", false, "look:b"],
    ["look", true, "cave_program_speculation_abandoned"],
  ]);
  assert.deepEqual(end.result.toolCalls, ["look", "look", "caveman_code"]);
  assert.deepEqual(end.result.receipt.tools.find((t) => t.name === "look"), { name: "look", calls: 2, errors: 1 });

  // A write first: nothing after it is launched, and the read after it claims nothing.
  const second = streamingProvider([{ cell: ['await save({"v": 1});\n', 'print(await look({"q": "c"}));'] }, { text: "done" }]);
  const r2 = await run(runtime.definition, "go", { model: fauxModel(), streamFn: second.streamFn });
  assert.equal(cellResult(second.seen).content[0].text, "look:c");
  assert.deepEqual(r2.toolCalls, ["caveman_code", "save", "look"]);
  // A speculative read whose call differs from every bet misses and runs normally.
  const third = streamingProvider([{ cell: ['const x = "d";\n', 'print(await look({"q": x}));'] }, { text: "done" }]);
  await run(runtime.definition, "go", { model: fauxModel(), streamFn: third.streamFn });
  assert.equal(cellResult(third.seen).content[0].text, "look:d");
  assert.deepEqual(runtime.stats(), { launched: 2, claimed: 1, missed: 1, abandoned: 1 });
});

test("a denied launch is claimed as its denial: the policy is asked once", async () => {
  const log = [];
  const runtime = createProgrammaticToolRuntime(direct(log));
  const { streamFn, seen } = streamingProvider([
    { cell: ['const r = await look({"q": "secret"}).catch((e) => e.message);\n', "print(r);"] },
    { text: "done" },
  ]);
  const asked = [];
  const toolPolicy = (input) => {
    asked.push(input.name);
    return input.name === "look" ? { deny: "no_peeking" } : undefined;
  };
  await run(runtime.definition, "go", { model: fauxModel(), streamFn, toolPolicy });
  assert.equal(cellResult(seen).content[0].text, "cave_tool_denied:no_peeking");
  assert.deepEqual(asked, ["look", "caveman_code"]);
  assert.equal(log.length, 0);
  assert.deepEqual(runtime.stats(), { launched: 1, claimed: 1, missed: 0, abandoned: 0 });
});

test("no speculation with speculate: false or in a durable run", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-speculation-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cell = ['print(await look({"q": "a"}));'];
  for (const [speculate, durable] of [[false, undefined], [true, { runId: "spec-durable-1", store: new DiskDurableStore(dir) }]]) {
    const log = [];
    const runtime = createProgrammaticToolRuntime(direct(log), { speculate });
    const { streamFn, seen } = streamingProvider([{ cell }, { text: "done" }]);
    const result = await run(runtime.definition, "go", { model: fauxModel(), streamFn, durable });
    assert.equal(cellResult(seen).content[0].text, "look:a");
    assert.deepEqual(result.toolCalls, ["caveman_code", "look"], `speculate ${speculate}`);
    assert.deepEqual(runtime.stats(), { launched: 0, claimed: 0, missed: speculate ? 1 : 0, abandoned: 0 });
    assert.equal(log[0].parentToolCallId, "stream-1-0");
  }
});

test("a cell that fails while its claimed read still runs: the claim is aborted with the cell and the read is stopped", async () => {
  const log = [];
  let lookSignal;
  const look = tool({
    name: "look",
    description: "look",
    input: schema.object({ q: schema.string() }),
    effect: "read",
    speculative: true,
    execute: ({ q }, signal) => {
      log.push(q);
      lookSignal = signal;
      return new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(new Error("stopped")), { once: true }));
    },
  });
  const runtime = createProgrammaticToolRuntime(hostAgent("failing-cell", [look]));
  const { streamFn, seen } = streamingProvider([
    { cell: ['const pending = look({"q": "slow"});\n', 'pending.catch(() => {});\nthrow new Error("boom");'] },
    { text: "done" },
  ]);
  await run(runtime.definition, "go", { model: fauxModel(), streamFn });
  const result = cellResult(seen);
  assert.deepEqual([result.isError, result.content[0].text], [true, "cave_program_execution_failed:boom"]);
  assert.deepEqual(log, ["slow"], "the read ran once, as the bet");
  assert.equal(lookSignal.aborted, true, "the claimed read was stopped");
  assert.deepEqual(runtime.stats(), { launched: 1, claimed: 1, missed: 0, abandoned: 0 });
});

test("the shell tools' read_file and grep are launched natively while the cell streams; bash stops the scan", async (t) => {
  const ws = tempWorkspace();
  const shell = shellTools({ workspace: ws.root });
  t.after(async () => {
    await shell.close();
    ws.cleanup();
  });
  ws.write("notes.txt", "alpha\nbeta\n");
  const runtime = createProgrammaticToolRuntime(hostAgent("native-cells", shell));
  const { streamFn, seen } = streamingProvider([
    {
      cell: [
        'const [text, hits] = await Promise.all([read_file({"path": "notes.txt"}), grep({"pattern": "beta"})]);\n',
        'const listing = await bash({"command": "ls"});\n',
        'const again = await read_file({"path": "notes.txt", "offset": 2});\n',
        "print(text.includes(\"alpha\"), hits.includes(\"notes.txt:2:beta\"), listing.includes(\"notes.txt\"), again.startsWith(\"2\\tbeta\"));",
      ],
    },
    { text: "done" },
  ]);
  const result = await run(runtime.definition, "go", { model: fauxModel(), streamFn });
  assert.equal(cellResult(seen).content[0].text, "true true true true");
  assert.deepEqual(runtime.stats(), { launched: 2, claimed: 2, missed: 0, abandoned: 0 });
  assert.deepEqual(result.toolCalls, ["read_file", "grep", "caveman_code", "bash", "read_file"]);
});

test("a later turn's cell speculates too: its request goes with the cell's watch, not as a bare step", async () => {
  const log = [];
  const started = { a: deferred(), b: deferred() };
  const runtime = createProgrammaticToolRuntime(direct(log, { onLook: (q) => started[q]?.resolve() }));
  const during = [];
  const { streamFn, seen } = streamingProvider([
    { cell: ['const a = await look({"q": "a"});\n', async () => during.push(await within(started.a.promise, 5_000)), "print(a);"] },
    { cell: ['const b = await look({"q": "b"});\n', async () => during.push(await within(started.b.promise, 5_000)), "print(b);"] },
    { text: "done" },
  ]);
  const result = await run(runtime.definition, "go", { model: fauxModel(), streamFn });
  assert.equal(result.stopReason, "complete");
  assert.deepEqual(during, ["in time", "in time"], "each cell's read started while that cell streamed");
  assert.deepEqual(seen.at(-1).filter((m) => m.role === "toolResult").map((m) => m.content[0].text), ["look:a", "look:b"]);
  assert.deepEqual(log.map((l) => l.q), ["a", "b"], "each read executed once");
  assert.deepEqual(runtime.stats(), { launched: 2, claimed: 2, missed: 0, abandoned: 0 });
});
