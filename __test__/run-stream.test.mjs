// stream(): the reference's event objects in the reference's order (§3.6, Pi agent-core's loop).
import { test } from "node:test";
import assert from "node:assert/strict";

import { agent, auto, output, run, schema, stream, tool } from "../lib/index.mjs";
import { fauxModel } from "../lib/testing.mjs";
import { baseOptions, collect, countingTool, deferred, eventTypes, hostAgent } from "./run-helpers.mjs";

test("event order of a two-turn run with a tool call (Pi agent-core's order)", async () => {
  const counter = { n: 0 };
  const def = hostAgent("events", [countingTool("read_thing", "read", counter)]);
  const events = await collect(
    stream(def, "go", baseOptions([{ text: "looking", toolCalls: [{ name: "read_thing", args: { q: 1 } }] }, { text: "done" }])),
  );
  assert.deepEqual(eventTypes(events), [
    "run_start",
    "pi:agent_start",
    "pi:turn_start",
    "pi:message_start", // user
    "pi:message_end",
    "pi:message_start", // assistant
    "pi:message_end",
    "pi:tool_execution_start",
    "pi:tool_execution_end",
    "pi:message_start", // tool result
    "pi:message_end",
    "pi:turn_end",
    "pi:turn_start",
    "pi:message_start",
    "pi:message_end",
    "pi:turn_end",
    "pi:agent_end",
    "run_end",
  ]);
  const runId = events[0].runId;
  assert.deepEqual(events[0], { type: "run_start", runId, agentId: "events" });
  for (const e of events) assert.equal(e.runId, runId, `${e.type} carries the runId`);
  const pi = events.filter((e) => e.type === "pi").map((e) => e.event);
  assert.deepEqual(pi.filter((e) => e.type === "message_start").map((e) => e.message.role), ["user", "assistant", "toolResult", "assistant"]);

  const start = pi.find((e) => e.type === "tool_execution_start");
  assert.deepEqual(start, { type: "tool_execution_start", toolCallId: "scripted-1-0", toolName: "read_thing", args: { q: 1 } });
  const end = pi.find((e) => e.type === "tool_execution_end");
  assert.equal(end.toolCallId, "scripted-1-0");
  assert.equal(end.toolName, "read_thing");
  assert.equal(end.isError, false);
  assert.deepEqual(end.result.content, [{ type: "text", text: "read_thing:ok" }]);
  assert.deepEqual(end.result.details, { effect: "read", resultPolicy: "auto" });

  const [firstTurnEnd, lastTurnEnd] = pi.filter((e) => e.type === "turn_end");
  assert.equal(firstTurnEnd.message.role, "assistant");
  assert.equal(firstTurnEnd.message.content[0].text, "looking");
  assert.equal(firstTurnEnd.toolResults.length, 1);
  assert.equal(firstTurnEnd.toolResults[0].role, "toolResult");
  assert.equal(firstTurnEnd.toolResults[0].toolCallId, "scripted-1-0");
  assert.deepEqual(lastTurnEnd.toolResults, []);

  const last = events.at(-1);
  assert.equal(last.type, "run_end");
  assert.equal(last.result.text, "done");
  assert.equal(last.result.runId, runId);
  assert.deepEqual(last.result.receipt.tools, [{ name: "read_thing", calls: 1, errors: 0 }]);
});

test("run() returns the same result stream() ends with", async () => {
  const def = hostAgent("same-result", []);
  const events = await collect(stream(def, "go", baseOptions([{ text: "hi" }])));
  const result = await run(def, "go", baseOptions([{ text: "hi" }]));
  const strip = ({ runId, latencyMs, receipt, ...rest }) => ({ ...rest, receipt: { ...receipt, runId: "x" } });
  assert.deepEqual(strip(events.at(-1).result), strip(result));
});

test("blocked and failed calls: tool_execution_end has isError and the reason as text", async () => {
  const boom = tool({
    name: "boom",
    description: "d",
    input: schema.object({}),
    effect: "read",
    execute: () => {
      throw new Error("kaput");
    },
  });
  const def = hostAgent("error-events", [boom]);
  const events = await collect(
    stream(
      def,
      "go",
      baseOptions([{ toolCalls: [{ name: "boom", args: {} }, { name: "ghost", args: {} }] }, { text: "ok" }], {
        toolPolicy: () => undefined,
      }),
    ),
  );
  const pi = events.filter((e) => e.type === "pi").map((e) => e.event);
  const ends = pi.filter((e) => e.type === "tool_execution_end");
  // Parallel batch (Pi): the blocked call ends during admission, before the admitted one runs.
  assert.deepEqual(
    ends.map((e) => [e.toolName, e.isError, e.result.content[0].text]),
    [
      ["ghost", true, "cave_unknown_tool"],
      ["boom", true, "kaput"],
    ],
  );
  // Pi's error results carry empty details.
  assert.deepEqual(ends.map((e) => e.result.details), [{}, {}]);
  // Result messages keep the call order.
  const turnEnd = pi.find((e) => e.type === "turn_end");
  assert.deepEqual(turnEnd.toolResults.map((m) => [m.toolName, m.isError, m.content[0].text]), [
    ["boom", true, "kaput"],
    ["ghost", true, "cave_unknown_tool"],
  ]);
});

test("parallel reads: tool_execution_end in completion order, result messages in call order", async () => {
  // "late" finishes only after the consumer has seen "early" end: completion order, causally.
  const earlyEndSeen = deferred();
  const mk = (name, execute) => tool({ name, description: "d", input: schema.object({}), effect: "read", timeoutMs: 5_000, execute });
  const def = hostAgent("completion-order", [
    mk("late", async () => {
      await earlyEndSeen.promise;
      return "late";
    }),
    mk("early", () => "early"),
  ]);
  const seq = [];
  for await (const e of stream(def, "go", baseOptions([{ toolCalls: [{ name: "late", args: {} }, { name: "early", args: {} }] }, { text: "x" }]))) {
    if (e.type !== "pi") continue;
    const ev = e.event;
    if (ev.type === "tool_execution_start") seq.push(`start ${ev.toolName}`);
    if (ev.type === "tool_execution_end") seq.push(`end ${ev.toolName}${ev.isError ? " (error)" : ""}`);
    if (ev.type === "message_start" && ev.message.role === "toolResult") seq.push(`result ${ev.message.toolName}`);
    if (ev.type === "tool_execution_end" && ev.toolName === "early") earlyEndSeen.resolve();
  }
  assert.deepEqual(seq, ["start late", "start early", "end early", "end late", "result late", "result early"]);
});

/** A stream of Pi assistant-message events with text deltas (no dependency on pi-ai). */
function deltaStreamFn(pieces) {
  return (model) => {
    const text = pieces.join("");
    const usage = { input: 5, output: 2, cacheRead: 0, cacheWrite: 0, totalTokens: 7, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
    const message = (content, stopReason) => ({
      role: "assistant",
      content,
      api: model.api,
      provider: model.provider,
      model: model.id,
      usage,
      stopReason,
      timestamp: 1,
    });
    const final = message([{ type: "text", text }], "stop");
    async function* events() {
      yield { type: "start", partial: message([], "pending") };
      yield { type: "text_start", contentIndex: 0, partial: message([{ type: "text", text: "" }], "pending") };
      let sofar = "";
      for (const delta of pieces) {
        sofar += delta;
        yield { type: "text_delta", contentIndex: 0, delta, partial: message([{ type: "text", text: sofar }], "pending") };
      }
      yield { type: "text_end", contentIndex: 0, content: text, partial: message([{ type: "text", text }], "pending") };
      yield { type: "done", reason: "stop", message: final };
    }
    const iterable = events();
    iterable.result = async () => final;
    return iterable;
  };
}

test("text deltas arrive as pi message_update events with assistantMessageEvent.text_delta", async () => {
  const def = hostAgent("deltas", []);
  const events = await collect(stream(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn: deltaStreamFn(["Hel", "lo ", "world"]) }));
  const updates = events.filter((e) => e.type === "pi" && e.event.type === "message_update").map((e) => e.event);
  assert.deepEqual(updates.map((u) => u.assistantMessageEvent.type), ["text_start", "text_delta", "text_delta", "text_delta", "text_end"]);
  const deltas = updates.filter((u) => u.assistantMessageEvent.type === "text_delta").map((u) => u.assistantMessageEvent.delta);
  assert.deepEqual(deltas, ["Hel", "lo ", "world"]);
  assert.equal(updates[3].message.role, "assistant", "message_update carries the partial message");
  // message_start (assistant) precedes the updates, message_end follows them.
  const types = eventTypes(events);
  const firstUpdate = types.indexOf("pi:message_update");
  assert.equal(types[firstUpdate - 1], "pi:message_start");
  assert.equal(types[firstUpdate + updates.length], "pi:message_end");
  assert.equal(events.at(-1).result.text, "Hello world");
  assert.equal(events.at(-1).result.inputTokens, 5);
});

test("a run without a listener (run()) ends with the result and receipt of the same run streamed with deltas", async () => {
  const counter = { n: 0 };
  const def = hostAgent("quiet-same", [countingTool("read_thing", "read", counter)]);
  const turns = [{ toolCalls: [{ name: "read_thing", args: { q: 1 } }] }];
  // First turn a tool call (scripted), then a streamed text answer with deltas.
  const mixed = () => {
    const scripted = baseOptions(turns).streamFn;
    const deltas = deltaStreamFn(["Hel", "lo"]);
    let call = 0;
    return (model, ctx, options) => (++call === 1 ? scripted(model, ctx, options) : deltas(model, ctx, options));
  };
  const events = await collect(stream(def, "go", { ...baseOptions([]), streamFn: mixed() }));
  assert.ok(events.some((e) => e.type === "pi" && e.event.type === "message_update"), "the streamed run gets the deltas");
  const result = await run(def, "go", { ...baseOptions([]), streamFn: mixed() });
  const strip = ({ runId, latencyMs, receipt, ...rest }) => ({ ...rest, receipt: { ...receipt, runId: "x" } });
  assert.deepEqual(strip(result), strip(events.at(-1).result));
  assert.equal(result.text, "Hello");
  assert.equal(counter.n, 2);
});

test("run_error: the last event, with code, the raw message and the partial receipt; no run_end", async () => {
  const def = agent({
    id: "stream-error",
    instructions: "x",
    model: auto(),
    sandbox: "host",
    output: output({ maxTokens: 100, schema: schema.object({ n: schema.number() }) }),
  });
  const events = await collect(stream(def, "go", baseOptions([{ text: "not json" }])));
  const last = events.at(-1);
  assert.deepEqual(Object.keys(last).sort(), ["code", "message", "receipt", "runId", "type"]);
  assert.equal(last.type, "run_error");
  assert.equal(last.code, "cave_agent_run_failed");
  assert.equal(last.message, "cave_output_schema_invalid_json");
  assert.equal(last.runId, events[0].runId);
  assert.equal(last.receipt.calls.length, 1);
  assert.equal(events[0].type, "run_start");
  assert.equal(events.filter((e) => e.type === "run_end").length, 0);
});

test("a model resolution failure is a run_start + run_error pair", async () => {
  const def = agent({ id: "bad-model", instructions: "x", model: "no-slash", sandbox: "host" });
  const events = await collect(stream(def, "go", { ensureRuntime: false }));
  assert.deepEqual(eventTypes(events), ["run_start", "run_error"]);
  assert.equal(events[1].message, "caveman agent: pinned model must use provider/model format");
  assert.equal(events[1].code, "cave_agent_run_failed");
});

test("events of a subagent's own turns stay inside the child; the parent sees the delegate call", async () => {
  const { subagent } = await import("../lib/index.mjs");
  const counter = { n: 0 };
  const child = hostAgent("quiet-child", [countingTool("read_thing", "read", counter)]);
  const parent = hostAgent("loud-parent", [subagent({ name: "delegate", description: "d", agent: child })]);
  const events = await collect(
    stream(
      parent,
      "go",
      baseOptions([
        { toolCalls: [{ name: "delegate", args: { task: "t" } }] },
        { toolCalls: [{ name: "read_thing", args: {} }] },
        { text: "child" },
        { text: "parent" },
      ]),
    ),
  );
  const starts = events.filter((e) => e.type === "pi" && e.event.type === "tool_execution_start").map((e) => e.event.toolName);
  assert.deepEqual(starts, ["delegate"]);
  assert.equal(counter.n, 1);
  assert.equal(events.filter((e) => e.type === "pi" && e.event.type === "turn_start").length, 2);
});
