// toolPolicy in the kernel: denials continue the run, an unreadable answer ends it with a
// CavemanRunError and the partial receipt before anything executes, and subagents carry their
// agentPath (reference §6.2–6.3, §2.4).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

import { agent, auto, run, schema, shellTools, subagent, tool, CavemanRunError } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { tempWorkspace } from "./helpers.mjs";
import { baseOptions, countingTool, hostAgent, recordingStream, toolResultsSeen } from "./run-helpers.mjs";

const FAILURES = [
  ["throws", () => { throw new Error("policy crashed"); }, "cave_tool_policy_failed"],
  ["rejects", async () => { throw new Error("policy crashed"); }, "cave_tool_policy_failed"],
  ["rejects with a non-Error", () => Promise.reject("nope"), "cave_tool_policy_failed"],
  ["returns a string", () => "yes", "cave_tool_policy_decision_invalid"],
  ["returns {}", () => ({}), "cave_tool_policy_decision_invalid"],
  ["returns { allow: false }", () => ({ allow: false }), "cave_tool_policy_decision_invalid"],
  ["returns allow and deny", () => ({ allow: true, deny: "x" }), "cave_tool_policy_decision_invalid"],
  ["returns a number deny", () => ({ deny: 3 }), "cave_tool_policy_decision_invalid"],
  ["returns a bad deny code", () => ({ deny: "Bad Code!" }), "cave_tool_policy_reason_invalid"],
  ["returns a too-long deny code", () => ({ deny: "a".repeat(65) }), "cave_tool_policy_reason_invalid"],
];

for (const [label, policy, code] of FAILURES) {
  test(`a policy that ${label} ends the run with ${code}, the partial receipt, and nothing executed`, async (t) => {
    const ws = tempWorkspace();
    t.after(ws.cleanup);
    const counter = { n: 0 };
    const def = hostAgent("policy-fails", [
      ...shellTools({ workspace: ws.root, tools: ["bash"] }),
      countingTool("write_thing", "write", counter),
    ]);
    let modelCalls = 0;
    const inner = scriptedStream([
      { toolCalls: [{ name: "bash", args: { command: "touch ran.txt" } }, { name: "write_thing", args: {} }] },
      { text: "never reached" },
    ]);
    const streamFn = (...args) => {
      modelCalls += 1;
      return inner(...args);
    };
    const error = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, toolPolicy: policy }).then(
      () => assert.fail("run should reject"),
      (e) => e,
    );
    assert.ok(error instanceof CavemanRunError, String(error));
    assert.equal(error.code, code);
    assert.match(error.message, new RegExp(code));
    assert.ok(error.receipt, "partial receipt");
    assert.equal(error.receipt.calls.length, 1, "the provider call that asked for the tool");
    assert.deepEqual(error.receipt.tools[0], { name: "bash", calls: 1, errors: 1 });
    assert.equal(counter.n, 0);
    assert.equal(fs.existsSync(ws.path("ran.txt")), false, "bash never ran");
    assert.equal(modelCalls, 1, "no further model call");
  });
}

test("a policy failure in stream() is a run_error event with code, raw message and receipt", async () => {
  const { stream } = await import("../lib/index.mjs");
  const counter = { n: 0 };
  const def = hostAgent("policy-stream", [countingTool("write_thing", "write", counter)]);
  const events = [];
  for await (const event of stream(
    def,
    "go",
    baseOptions([{ toolCalls: [{ name: "write_thing", args: {} }] }, { text: "x" }], {
      toolPolicy: () => {
        throw new Error("no");
      },
    }),
  )) {
    events.push(event);
  }
  const last = events.at(-1);
  assert.equal(last.type, "run_error");
  assert.equal(last.code, "cave_tool_policy_failed");
  assert.equal(last.message, "cave_tool_policy_failed", "run_error carries the raw message, without a code prefix");
  assert.equal(last.runId, events[0].runId);
  assert.equal(last.receipt.tools[0].name, "write_thing");
  assert.equal(counter.n, 0);
  assert.equal(events.some((e) => e.type === "run_end"), false);
});

test("the policy runs after the kernel's own checks: unknown tools and fixture writes never reach it", async () => {
  const counter = { n: 0 };
  const seen = [];
  const def = agent({
    id: "policy-order",
    instructions: "x",
    model: auto(),
    sandbox: "fixture",
    tools: [countingTool("write_thing", "write", counter), countingTool("read_thing", "read", counter)],
  });
  const { streamFn, calls } = recordingStream([
    { toolCalls: [{ name: "missing_tool", args: {} }] },
    { toolCalls: [{ name: "write_thing", args: {} }] },
    { toolCalls: [{ name: "read_thing", args: {} }] },
    { text: "done" },
  ]);
  await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, toolPolicy: ({ name }) => void seen.push(name) });
  assert.deepEqual(seen, ["read_thing"]);
  assert.deepEqual(toolResultsSeen(calls), [
    { name: "missing_tool", isError: true, text: "cave_unknown_tool" },
    { name: "write_thing", isError: true, text: "cave_side_effect_blocked" },
    { name: "read_thing", isError: false, text: "read_thing:ok" },
  ]);
});

test("subagent: agentPath is the subagent tool names, one scripted stream serves parent and child", async () => {
  const counter = { n: 0 };
  const child = hostAgent("policy-child", [countingTool("read_thing", "read", counter)]);
  const parent = hostAgent("policy-parent", [subagent({ name: "delegate", description: "Delegate a task.", agent: child })]);
  const seen = [];
  const { streamFn, calls } = recordingStream([
    { toolCalls: [{ name: "delegate", args: { task: "read the thing" } }] }, // parent
    { toolCalls: [{ name: "read_thing", args: {} }] }, // child
    { text: "child found it" }, // child
    { text: "parent done" }, // parent
  ]);
  const result = await run(parent, "go", {
    ensureRuntime: false,
    model: fauxModel(),
    streamFn,
    toolPolicy: ({ agentId, agentPath, name, runId }) => {
      seen.push({ entry: [agentId, agentPath, name], runId });
    },
  });
  assert.deepEqual(
    seen.map((s) => s.entry),
    [
      ["policy-parent", [], "delegate"],
      ["policy-child", ["delegate"], "read_thing"],
    ],
  );
  assert.equal(seen[0].runId, result.runId);
  assert.notEqual(seen[1].runId, result.runId, "the child has its own run id");
  assert.equal(counter.n, 1);
  assert.equal(result.text, "parent done");

  // The child's conversation: its own system prompt and the task as the user message.
  assert.equal(calls[1].systemPrompt, "test agent");
  assert.deepEqual(calls[1].messages, [{ role: "user", content: [{ type: "text", text: "read the thing" }], timestamp: calls[1].messages[0].timestamp }]);
  assert.deepEqual(calls[1].tools, ["read_thing"]);

  // The parent model reads the child's result as JSON.
  const [delegated] = toolResultsSeen(calls);
  assert.equal(delegated.name, "delegate");
  assert.equal(delegated.isError, false);
  const body = JSON.parse(delegated.text);
  assert.deepEqual(Object.keys(body).sort(), [
    "agent_id", "claim_basis", "cost_usd", "input_tokens", "output_tokens", "stop_reason", "text", "usage_basis",
  ]);
  assert.deepEqual(body, {
    text: "child found it",
    agent_id: "policy-child",
    usage_basis: "provider_reported",
    input_tokens: 200,
    output_tokens: 20,
    cost_usd: 0,
    stop_reason: "complete",
    claim_basis: "inferred",
  });

  // Receipts: the child's under subagents; usage totals include it.
  assert.equal(result.receipt.subagents.length, 1);
  const sub = result.receipt.subagents[0];
  assert.equal(sub.agentId, "policy-child");
  assert.equal(sub.calls.length, 2);
  assert.deepEqual(sub.tools, [{ name: "read_thing", calls: 1, errors: 0 }]);
  assert.deepEqual(result.receipt.tools, [{ name: "delegate", calls: 1, errors: 0 }]);
  assert.equal(result.receipt.calls.length, 2, "own calls only");
  assert.equal(result.inputTokens, 400);
  assert.equal(result.receipt.totalTokens, 440);
});

test("a policy denial inside a subagent reaches the child model and is counted in the child's receipt", async () => {
  const counter = { n: 0 };
  const child = hostAgent("deny-child", [countingTool("write_thing", "write", counter)]);
  const parent = hostAgent("deny-parent", [subagent({ name: "delegate", description: "d", agent: child })]);
  const { streamFn, calls } = recordingStream([
    { toolCalls: [{ name: "delegate", args: { task: "write" } }] },
    { toolCalls: [{ name: "write_thing", args: {} }] },
    { text: "could not" },
    { text: "ok" },
  ]);
  const result = await run(parent, "go", {
    ensureRuntime: false,
    model: fauxModel(),
    streamFn,
    toolPolicy: ({ agentPath }) => (agentPath.length ? { deny: "child_scope" } : undefined),
  });
  assert.equal(counter.n, 0);
  assert.equal(calls[2].messages.at(-1).content[0].text, "cave_tool_denied:child_scope");
  assert.deepEqual(result.receipt.subagents[0].tools, [{ name: "write_thing", calls: 1, errors: 1, denied: 1 }]);
});

test("subagent limits: maxCalls and maxInputChars become error tool results", async () => {
  const counter = { n: 0 };
  const child = hostAgent("limit-child", [countingTool("read_thing", "read", counter)]);
  const parent = hostAgent("limit-parent", [subagent({ name: "delegate", description: "d", agent: child, maxInputChars: 5 })]);
  const { streamFn, calls } = recordingStream([
    { toolCalls: [{ name: "delegate", args: { task: "too long a task" } }] },
    { toolCalls: [{ name: "delegate", args: { task: "short" } }] },
    { text: "child" },
    { toolCalls: [{ name: "delegate", args: { task: "again" } }] },
    { text: "parent" },
  ]);
  const result = await run(parent, "go", { ensureRuntime: false, model: fauxModel(), streamFn });
  const seen = toolResultsSeen(calls);
  assert.deepEqual(
    seen.map((r) => [r.isError, r.isError ? r.text : JSON.parse(r.text).text]),
    [
      [true, "cave_subagent_input_limit"],
      [false, "child"],
      [true, "cave_subagent_call_budget"],
    ],
  );
  assert.equal(result.receipt.subagents.length, 1);
});

test("a tool that throws is an error result the model reads; the run goes on", async () => {
  const boom = tool({
    name: "boom",
    description: "d",
    input: schema.object({}),
    effect: "read",
    execute: () => {
      throw new Error("it exploded");
    },
  });
  const def = hostAgent("throwing-tool", [boom]);
  const { streamFn, calls } = recordingStream([{ toolCalls: [{ name: "boom", args: {} }] }, { text: "recovered" }]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn });
  assert.equal(result.text, "recovered");
  assert.deepEqual(toolResultsSeen(calls), [{ name: "boom", isError: true, text: "it exploded" }]);
  assert.deepEqual(result.receipt.tools, [{ name: "boom", calls: 1, errors: 1 }]);
});
