// Admission checks and stop reasons (reference §3.2, §3.9, §6.3, §7): call ceilings, deadline,
// breakers, unknown tools, fixture sandbox, argument validation, budgets, and run-option
// validation errors thrown as plain Errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";

import { agent, auto, run, schema, stream, tool, CavemanRunError } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { baseOptions, collect, countingTool, hostAgent, recordingStream, toolResultsSeen } from "./run-helpers.mjs";

const call = (name, args = {}) => ({ name, args });
const turnsOf = (n, make) => Array.from({ length: n }, (_, i) => make(i));

test("maxModelCalls: at the ceiling the run stops gracefully with call_budget_exhausted", async () => {
  const counter = { n: 0 };
  const def = hostAgent("max-model", [countingTool("read_thing", "read", counter)]);
  const { streamFn, calls } = recordingStream([
    { text: "first", toolCalls: [call("read_thing", { i: 1 })] },
    { text: "second", toolCalls: [call("read_thing", { i: 2 })] },
    { text: "never" },
  ]);
  const def2 = hostAgent("max-model-any", [tool({ name: "read_thing", description: "d", input: { type: "object" }, effect: "read", execute: () => (counter.n++, "ok") })]);
  const result = await run(def2, "go", { ensureRuntime: false, model: fauxModel(), streamFn, maxModelCalls: 2 });
  assert.equal(result.stopReason, "call_budget_exhausted");
  assert.equal(result.receipt.stopReason, "call_budget_exhausted");
  assert.equal(calls.length, 2);
  assert.equal(counter.n, 2, "the second turn's tools still ran");
  assert.equal(result.text, "second", "text is the last real assistant message");
  assert.ok(def);
});

test("maxModelCalls defaults to 64", async () => {
  const counter = { n: 0 };
  const def = hostAgent("max-model-default", [countingTool("read_thing", "read", counter, { allowRepeat: true })]);
  const turns = turnsOf(70, () => ({ toolCalls: [call("read_thing")] }));
  const result = await run(def, "go", baseOptions(turns, { maxToolCalls: 1000 }));
  assert.equal(result.stopReason, "call_budget_exhausted");
  assert.equal(result.receipt.calls.length, 64);
});

test("maxToolCalls: a call beyond the ceiling is blocked with cave_tool_call_budget_exceeded and the run continues", async () => {
  const counter = { n: 0 };
  const def = hostAgent("max-tools", [countingTool("read_thing", "read", counter, { allowRepeat: true })]);
  const { streamFn, calls } = recordingStream([
    { toolCalls: [call("read_thing"), call("read_thing")] },
    { toolCalls: [call("read_thing")] },
    { text: "done" },
  ]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, maxToolCalls: 2 });
  assert.equal(counter.n, 2);
  assert.equal(result.stopReason, "complete");
  assert.equal(result.text, "done");
  assert.deepEqual(toolResultsSeen(calls).at(-1), { name: "read_thing", isError: true, text: "cave_tool_call_budget_exceeded" });
  assert.deepEqual(result.receipt.tools, [{ name: "read_thing", calls: 3, errors: 1 }]);
  assert.deepEqual(result.toolCalls, ["read_thing", "read_thing", "read_thing"], "blocked calls are listed");
});

test("maxToolCalls defaults to 64", async () => {
  const counter = { n: 0 };
  const def = hostAgent("max-tools-default", [countingTool("read_thing", "read", counter, { allowRepeat: true })]);
  const turns = [{ toolCalls: turnsOf(66, () => call("read_thing")) }, { text: "done" }];
  const result = await run(def, "go", baseOptions(turns));
  assert.equal(counter.n, 64);
  assert.deepEqual(result.receipt.tools, [{ name: "read_thing", calls: 66, errors: 2 }]);
});

test("deadlineMs: a passed deadline blocks the pending tool and stops before the next model call", async () => {
  const counter = { n: 0 };
  const def = hostAgent("deadline", [countingTool("read_thing", "read", counter)]);
  const inner = scriptedStream([{ toolCalls: [call("read_thing")] }, { text: "never" }]);
  let modelCalls = 0;
  const seen = [];
  // The first model call itself outlives the deadline (a causal wait, not a timing assertion).
  const streamFn = async (model, context, options) => {
    modelCalls += 1;
    seen.push(structuredClone(context.messages));
    await sleep(60);
    return inner(model, context, options);
  };
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, deadlineMs: 5 });
  assert.equal(result.stopReason, "deadline");
  assert.equal(modelCalls, 1);
  assert.equal(counter.n, 0);
  assert.deepEqual(result.receipt.tools, [{ name: "read_thing", calls: 1, errors: 1 }]);
  assert.equal(result.text, "");
});

test("breakers: repeatedToolCalls 2 blocks the second identical call and stops with loop_detected", async () => {
  const counter = { n: 0 };
  const lookup = tool({
    name: "lookup",
    description: "d",
    input: schema.object({ q: schema.string() }),
    effect: "read",
    execute: () => (counter.n++, "same answer"),
  });
  const def = hostAgent("loop", [lookup]);
  const { streamFn, calls } = recordingStream([
    { toolCalls: [call("lookup", { q: "x" })] },
    { toolCalls: [call("lookup", { q: "x" })] },
    { toolCalls: [call("lookup", { q: "x" })] },
    { text: "never" },
  ]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, breakers: { repeatedToolCalls: 2 } });
  assert.equal(result.stopReason, "loop_detected");
  assert.equal(counter.n, 1);
  assert.equal(calls.length, 2, "stopped before the third model call");
  const loops = result.receipt.breakers.filter((b) => b.kind === "loop_detected");
  assert.equal(loops.length, 1);
  assert.equal(loops[0].tool, "lookup");
  assert.equal(loops[0].count, 2);
  assert.match(loops[0].signature, /^[0-9a-f]{64}$/);
  assert.deepEqual(result.receipt.tools, [{ name: "lookup", calls: 2, errors: 1 }]);
});

test("breakers: the blocked repeat reads cave_tool_call_loop_detected; allowRepeat tools are exempt", async () => {
  const counter = { n: 0 };
  const def = hostAgent("loop-text", [
    countingTool("again", "read", counter),
    countingTool("repeatable", "read", counter, { allowRepeat: true }),
  ]);
  const turns = [
    { toolCalls: [call("repeatable"), call("repeatable"), call("repeatable"), call("again"), call("again")] },
    { text: "never" },
  ];
  const events = await collect(stream(def, "go", baseOptions(turns, { breakers: { repeatedToolCalls: 2 } })));
  assert.equal(counter.n, 4);
  const turnEnd = events.find((e) => e.type === "pi" && e.event.type === "turn_end").event;
  assert.deepEqual(
    turnEnd.toolResults.map((m) => m.content[0].text),
    ["repeatable:ok", "repeatable:ok", "repeatable:ok", "again:ok", "cave_tool_call_loop_detected"],
  );
  assert.equal(events.at(-1).type, "run_end");
  assert.equal(events.at(-1).result.stopReason, "loop_detected");
});

test("breakers are opt-in: without them identical calls all run", async () => {
  const counter = { n: 0 };
  const def = hostAgent("no-breakers", [countingTool("read_thing", "read", counter)]);
  const result = await run(def, "go", baseOptions([...turnsOf(5, () => ({ toolCalls: [call("read_thing")] })), { text: "done" }]));
  assert.equal(counter.n, 5);
  assert.equal(result.stopReason, "complete");
  assert.deepEqual(result.receipt.breakers, []);
});

test("breakers: fan-out beyond maxToolCallsPerTurn is blocked with cave_fan_out_cap_exceeded", async () => {
  const counter = { n: 0 };
  const def = hostAgent("fan-out", [countingTool("read_thing", "read", counter, { allowRepeat: true })]);
  const { streamFn, calls } = recordingStream([
    { toolCalls: [call("read_thing", { i: 1 }), call("read_thing", { i: 2 }), call("read_thing", { i: 3 })] },
    { text: "done" },
  ]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, breakers: { maxToolCallsPerTurn: 2 } });
  assert.equal(counter.n, 2);
  assert.deepEqual(toolResultsSeen(calls).map((r) => r.text), ["read_thing:ok", "read_thing:ok", "cave_fan_out_cap_exceeded"]);
  assert.equal(result.receipt.breakers[0].kind, "fan_out_blocked");
  assert.equal(result.text, "done");
});

test("breakers: identical turns stop the run with no_progress", async () => {
  const counter = { n: 0 };
  const def = hostAgent("no-progress", [countingTool("read_thing", "read", counter, { allowRepeat: true })]);
  const same = { text: "still looking", toolCalls: [call("read_thing")] };
  const { streamFn, calls } = recordingStream([same, same, same, { text: "never" }]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, breakers: { noProgressTurns: 2 } });
  assert.equal(result.stopReason, "no_progress");
  assert.equal(calls.length, 2);
  assert.deepEqual(result.receipt.breakers.map((b) => b.kind), ["no_progress"]);
});

test("an undeclared tool is blocked with cave_unknown_tool and the run continues", async () => {
  const def = hostAgent("unknown", []);
  const { streamFn, calls } = recordingStream([{ toolCalls: [call("rm_rf")] }, { text: "ok" }]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn });
  assert.deepEqual(toolResultsSeen(calls), [{ name: "rm_rf", isError: true, text: "cave_unknown_tool" }]);
  assert.deepEqual(result.receipt.tools, [{ name: "rm_rf", calls: 1, errors: 1 }]);
  assert.equal(result.stopReason, "complete");
});

test("fixture sandbox: write tools are blocked with cave_side_effect_blocked, read tools run", async () => {
  const counter = { n: 0, names: [] };
  const def = agent({
    id: "fixture",
    instructions: "x",
    model: auto(),
    sandbox: "fixture",
    tools: [countingTool("write_thing", "write", counter), countingTool("read_thing", "read", counter), countingTool("ext_thing", "external", counter)],
  });
  const { streamFn, calls } = recordingStream([
    { toolCalls: [call("write_thing")] },
    { toolCalls: [call("read_thing"), call("ext_thing")] },
    { text: "ok" },
  ]);
  await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn });
  assert.deepEqual(counter.names, ["read_thing", "ext_thing"]);
  assert.deepEqual(toolResultsSeen(calls)[0], { name: "write_thing", isError: true, text: "cave_side_effect_blocked" });
});

test("argument validation: invalid arguments never reach the policy or the tool; the model reads why", async () => {
  const counter = { n: 0 };
  const seen = [];
  const typed = tool({
    name: "typed",
    description: "d",
    input: schema.object({ n: schema.integer(), mode: schema.enum(["a", "b"]) }),
    effect: "read",
    execute: () => (counter.n++, "ran"),
  });
  const def = hostAgent("validation", [typed]);
  const { streamFn, calls } = recordingStream([
    { toolCalls: [call("typed", { n: 1.5, mode: "c" })] },
    { toolCalls: [call("typed", { mode: "a" })] },
    { toolCalls: [call("typed", { n: 2, mode: "a" })] },
    { text: "ok" },
  ]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, toolPolicy: ({ args }) => void seen.push(args) });
  assert.equal(counter.n, 1);
  assert.deepEqual(seen, [{ n: 2, mode: "a" }]);
  const [bad, missing, good] = toolResultsSeen(calls);
  assert.equal(bad.isError, true);
  assert.match(bad.text, /^Validation failed for tool "typed":\n/);
  assert.match(bad.text, /Received arguments:\n\{\n {2}"n": 1\.5,\n {2}"mode": "c"\n\}$/);
  assert.equal(missing.isError, true);
  assert.match(missing.text, /^Validation failed for tool "typed":\n.*\bn\b/s);
  assert.deepEqual(good, { name: "typed", isError: false, text: "ran" });
  assert.deepEqual(result.receipt.tools, [{ name: "typed", calls: 3, errors: 2 }]);
});

test("budget.maxTokens: reserve before each call, clamp, then stop with budget_exhausted", async () => {
  const counter = { n: 0 };
  const def = hostAgent("token-budget", [countingTool("read_thing", "read", counter, { allowRepeat: true })]);
  const turns = turnsOf(20, () => ({ toolCalls: [call("read_thing")] }));
  const { streamFn, calls } = recordingStream(turns);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, budget: { maxTokens: 1000 } });
  assert.equal(result.stopReason, "budget_exhausted");
  const r = result.receipt;
  assert.equal(r.denomination, "tokens");
  assert.equal(r.max, 1000);
  assert.ok(r.calls.length >= 1 && r.calls.length < 20, `${r.calls.length} calls`);
  assert.equal(r.spent, r.calls.length * 110);
  assert.ok(r.spent <= r.max);
  assert.equal(r.capBreached, false);
  // Each call's output allowance was clamped below the model's 4,000 and passed to the provider.
  for (const [i, c] of calls.entries()) {
    assert.ok(c.maxTokens >= 256 && c.maxTokens < 4000, `call ${i} maxTokens ${c.maxTokens}`);
    assert.equal(r.calls[i].clampedOutputTokens, c.maxTokens);
  }
});

test("budget.maxTokens smaller than one call: budget_exhausted before any provider call, text empty", async () => {
  let modelCalls = 0;
  const def = hostAgent("tiny-budget", []);
  const result = await run(def, "go", {
    ensureRuntime: false,
    model: fauxModel(),
    streamFn: (...a) => (modelCalls++, scriptedStream([{ text: "x" }])(...a)),
    budget: { maxTokens: 100 },
  });
  assert.equal(result.stopReason, "budget_exhausted");
  assert.equal(modelCalls, 0);
  assert.equal(result.text, "");
  assert.equal(result.usageBasis, "unavailable");
});

test("budget.maxUsd on an unpriced model fails closed before any streamFn call", async () => {
  let modelCalls = 0;
  const def = hostAgent("usd-unpriced", []);
  await assert.rejects(
    run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn: (...a) => (modelCalls++, scriptedStream([{ text: "x" }])(...a)), budget: { maxUsd: 1 } }),
    (error) => {
      assert.ok(error instanceof CavemanRunError);
      assert.match(error.message, /cave_budget/);
      assert.match(error.message, /cave_budget_denomination_unavailable: anthropic\/faux-1 is not in the public catalog/);
      assert.equal(error.receipt.calls.length, 0);
      return true;
    },
  );
  assert.equal(modelCalls, 0);
});

test("budget.maxUsd with fauxModel({priced:true}): five calls of 100/10 are priced from the catalog", async () => {
  const counter = { n: 0 };
  const def = hostAgent("usd-priced", [countingTool("read_thing", "read", counter, { allowRepeat: true })]);
  const turns = [...turnsOf(4, () => ({ toolCalls: [call("read_thing")] })), { text: "done" }];
  const result = await run(def, "go", baseOptions(turns, { model: fauxModel({ priced: true }), budget: { maxUsd: 1 } }));
  const r = result.receipt;
  assert.equal(r.calls.length, 5);
  assert.ok(r.totalEstimatedUsd > 0 && r.totalEstimatedUsd < 0.05, String(r.totalEstimatedUsd));
  assert.equal(result.priceBasis, "public_catalog");
  assert.equal(r.denomination, "usd");
  assert.equal(r.max, 1);
  assert.equal(r.unpriced, false);
  assert.equal(result.costUsd, r.totalEstimatedUsd);
  assert.ok(r.calls.every((c) => c.estimatedUsd > 0 && c.unpriced === false && c.model === "claude-haiku-4-5"));
  assert.equal(result.stopReason, "complete");
});

test("a priced run without a budget still reports public_catalog prices", async () => {
  const def = hostAgent("priced-no-budget", []);
  const result = await run(def, "go", baseOptions([{ text: "x" }], { model: fauxModel({ priced: true }) }));
  assert.equal(result.priceBasis, "public_catalog");
  assert.ok(result.costUsd > 0);
  assert.equal(result.receipt.denomination, "none");
});

// The call caps are not here: the reference checks them inside its try (run errors, below).
const OPTION_ERRORS = [
  [{ deadlineMs: 0 }, /^cave_run_deadline_invalid/],
  [{ deadlineMs: Infinity }, /^cave_run_deadline_invalid: deadlineMs must be a positive integer of milliseconds, received number Infinity/],
  [{ deadlineMs: 2 ** 60 }, /^cave_run_deadline_invalid/],
  [{ maxSubagentDepth: 9 }, /^cave_subagent_depth_limit_invalid/],
  [{ budget: {} }, /^cave_budget_denomination_ambiguous/],
  [{ budget: { maxUsd: 1, maxTokens: 10 } }, /^cave_budget_denomination_ambiguous/],
  [{ budget: { maxUsd: 1, initialTokens: 10 } }, /^cave_budget_denomination_ambiguous/],
  [{ budget: { maxTokens: 0 } }, /^cave_budget_max_invalid/],
  [{ budget: { maxTokens: 10.5 } }, /^cave_budget_max_invalid/],
  [{ budget: { maxUsd: 1, initialUsd: 2 } }, /^cave_budget_initial_invalid/],
  [{ budget: { maxTokens: 1000, outputFloorTokens: 0 } }, /^cave_budget_output_floor_invalid/],
  [{ budget: { maxTokens: 1000, onExhausted: "panic" } }, /^cave_budget_on_exhausted_invalid/],
  [{ budget: { maxUsd: 1 }, maxCostUsd: 1 }, /^cave_budget_conflicting_cap/],
  [{ breakers: { repeatedToolCalls: 0 } }, /^cave_breaker_threshold_invalid/],
  [{ breakers: { noProgressTurns: 1.5 } }, /^cave_breaker_threshold_invalid/],
  [{ breakers: { retry: { maxSpend: 1 } } }, /^cave_breaker_retry_requires_budget/],
  [{ cacheRetention: "forever" }, /^cave_cache_retention_invalid/],
  [{ buildIdentity: "x" }, /^cave_internal_run_option: Cave Build execution is available through caveman-agent dev\/build after lock validation$/],
  [{ lockedBuild: {} }, /^cave_internal_run_option/],
];

for (const [options, pattern] of OPTION_ERRORS) {
  test(`run option ${JSON.stringify(options)} is refused with a plain Error before any model call`, async () => {
    let modelCalls = 0;
    const def = hostAgent("options", []);
    const opts = { ensureRuntime: false, model: fauxModel(), streamFn: (...a) => (modelCalls++, scriptedStream([{ text: "x" }])(...a)), ...options };
    await assert.rejects(run(def, "go", opts), (error) => {
      assert.equal(error instanceof CavemanRunError, false, `${error.name}: ${error.message}`);
      assert.ok(error instanceof Error);
      assert.match(error.message, pattern);
      return true;
    });
    // stream(): the same error from the generator, with no events before it.
    const events = [];
    await assert.rejects(
      async () => {
        for await (const event of stream(def, "go", opts)) events.push(event);
      },
      { message: pattern },
    );
    assert.deepEqual(events, []);
    assert.equal(modelCalls, 0);
  });
}

test("maxCostUsd: non-positive or not a number is refused with the reference's first line and a hint", async () => {
  const def = hostAgent("max-cost", []);
  for (const [maxCostUsd, hint] of [
    [0, "maxCostUsd is a number of US dollars above 0, got 0: maxCostUsd: 0.5"],
    [-2, "maxCostUsd is a number of US dollars above 0, got -2: maxCostUsd: 0.5"],
    ["1", 'maxCostUsd takes a positive number of US dollars, received string "1": maxCostUsd: 0.5'],
  ]) {
    await assert.rejects(run(def, "go", baseOptions([{ text: "x" }], { maxCostUsd })), (error) => {
      assert.equal(error.message, `caveman agent: run maxCostUsd must be positive\nhint: ${hint}`);
      assert.equal(error.hint, hint);
      return true;
    });
  }
});

test("range errors of run options name the option, the range and the way out (reference codes first)", async () => {
  const def = hostAgent("ranges", []);
  const cases = [
    [{ maxSubagentDepth: 9 }, "cave_subagent_depth_limit_invalid: maxSubagentDepth must be an integer from 1 to 8, got 9", "leave maxSubagentDepth out for the default (2), or pass an integer from 1 to 8"],
    [{ maxSubagentDepth: 0 }, "cave_subagent_depth_limit_invalid: maxSubagentDepth must be an integer from 1 to 8, got 0", "leave maxSubagentDepth out for the default (2), or pass an integer from 1 to 8"],
    [{ maxModelCalls: 0 }, "cave_agent_run_failed: cave_max_model_calls_invalid: maxModelCalls must be a positive integer, got 0", "leave maxModelCalls out for the default (64), or pass a positive integer"],
    [{ budget: { maxUsd: 1, initialUsd: 2 } }, "cave_budget_initial_invalid: budget.initialUsd must be positive and at most budget.maxUsd (1), got 2", /^it is above budget\.maxUsd \(1\); /],
    [{ budget: { maxUsd: 1, initialUsd: 0 } }, "cave_budget_initial_invalid: budget.initialUsd must be positive and at most budget.maxUsd (1), got 0", /^it must be positive; /],
    [{ budget: { maxTokens: 100, initialTokens: 2.5 } }, "cave_budget_initial_invalid: budget.initialTokens must be positive and at most budget.maxTokens (100), got 2.5", /^it must be a whole number of tokens; /],
  ];
  for (const [options, first, hint] of cases) {
    await assert.rejects(run(def, "go", baseOptions([{ text: "x" }], options)), (error) => {
      assert.equal(error.message.split("\n")[0], first);
      if (typeof hint === "string") assert.equal(error.hint, hint);
      else assert.match(error.hint, hint);
      return true;
    });
  }
});

test("call caps: a bad maxModelCalls or maxToolCalls is a run error (the reference checks them inside its try), before any model call", async () => {
  for (const [caps, first] of [
    [{ maxModelCalls: 0 }, "cave_max_model_calls_invalid: maxModelCalls must be a positive integer, got 0"],
    [{ maxModelCalls: 1.5 }, "cave_max_model_calls_invalid: maxModelCalls must be a positive integer, got 1.5"],
    [{ maxModelCalls: NaN }, "cave_max_model_calls_invalid: maxModelCalls must be a positive integer, received number NaN"],
    [{ maxToolCalls: -1 }, "cave_max_tool_calls_invalid: maxToolCalls must be a positive integer, got -1"],
    [{ maxToolCalls: "8" }, 'cave_max_tool_calls_invalid: maxToolCalls must be a positive integer, received string "8"'],
  ]) {
    let modelCalls = 0;
    const def = hostAgent("caps", []);
    const opts = { ensureRuntime: false, model: fauxModel(), streamFn: (...a) => (modelCalls++, scriptedStream([{ text: "x" }])(...a)), ...caps };
    await assert.rejects(run(def, "go", opts), (error) => {
      assert.ok(error instanceof CavemanRunError, `${error.name}: ${error.message}`);
      // The reference's errorCode(): a message without a mapped prefix is cave_agent_run_failed.
      assert.equal(error.code, "cave_agent_run_failed");
      assert.equal(error.message.split("\n")[0], `cave_agent_run_failed: ${first}`);
      assert.equal(error.receipt.runId.length > 0, true);
      return true;
    });
    const events = await collect(stream(def, "go", opts));
    assert.deepEqual(events.map((e) => e.type), ["run_start", "run_error"], JSON.stringify(caps));
    assert.equal(events[1].code, "cave_agent_run_failed");
    assert.equal(events[1].message.split("\n")[0], first, "the raw message, without the code prefix");
    assert.equal(modelCalls, 0);
  }
});

test("stream(): the root context's options (maxCostUsd, the subagent tree limits) throw when stream() is called; the others from the first next()", async () => {
  const def = hostAgent("root-context", []);
  const opts = baseOptions([{ text: "x" }]);
  for (const [bad, code, first] of [
    [{ maxCostUsd: -1 }, "cave_agent_definition_invalid", "caveman agent: run maxCostUsd must be positive"],
    [{ maxCostUsd: 0 }, "cave_agent_definition_invalid", "caveman agent: run maxCostUsd must be positive"],
    [{ maxCostUsd: NaN }, "cave_agent_definition_invalid", "caveman agent: run maxCostUsd must be positive"],
    [{ maxCostUsd: "1" }, "cave_agent_definition_invalid", "caveman agent: run maxCostUsd must be positive"],
    [{ maxSubagentInvocations: 0 }, "cave_subagent_invocation_limit_invalid", "cave_subagent_invocation_limit_invalid: maxSubagentInvocations must be an integer from 1 to 65536, got 0"],
    [{ maxConcurrentSubagents: 2000 }, "cave_subagent_concurrency_limit_invalid", "cave_subagent_concurrency_limit_invalid: maxConcurrentSubagents must be an integer from 1 to 1024, got 2000"],
  ]) {
    assert.throws(() => stream(def, "go", { ...opts, ...bad }), (error) => {
      assert.equal(error instanceof CavemanRunError, false);
      assert.equal(error.code, code, error.message);
      assert.equal(error.message.split("\n")[0], first);
      return true;
    });
    // run() rejects with the same plain Error.
    await assert.rejects(run(def, "go", { ...opts, ...bad }), (error) => error.code === code && !(error instanceof CavemanRunError));
  }
  // Checked before the input, as the reference's rootExecutionContext runs first.
  assert.throws(() => stream(def, 42, { ...opts, maxCostUsd: -1 }), /maxCostUsd must be positive/);
  // The other option errors: stream() returns its generator; the first next() throws.
  for (const [bad, code] of [
    [{ maxSubagentDepth: 9 }, "cave_subagent_depth_limit_invalid"],
    [{ deadlineMs: 0 }, "cave_run_deadline_invalid"],
    [{ budget: { maxUsd: 1 }, maxCostUsd: 1 }, "cave_budget_conflicting_cap"],
    [{ cacheRetention: "forever" }, "cave_cache_retention_invalid"],
  ]) {
    const events = stream(def, "go", { ...opts, ...bad });
    await assert.rejects(events.next(), (error) => String(error.message).startsWith(code), JSON.stringify(bad));
  }
});

test("stream(): input errors throw synchronously when stream() is called; run() rejects", async () => {
  const def = hostAgent("bad-input", []);
  const opts = baseOptions([{ text: "x" }]);
  assert.throws(() => stream(def, 42, opts), /^Error: cave_input/);
  assert.throws(() => stream(def, [{ type: "audio", data: "x" }], opts), /cave_input_unsupported:pi:0/);
  assert.throws(() => stream(def, "go", { ...opts, caveRoute: {} }), /cave_internal_run_option/);
  await assert.rejects(run(def, [{ type: "text", text: "ok" }, { type: "file" }], opts), /cave_input_unsupported:pi:1/);
});

test("array input: text parts reach the model as the user message", async () => {
  const def = hostAgent("array-input", []);
  const { streamFn, calls } = recordingStream([{ text: "x" }]);
  await run(def, [{ type: "text", text: "a" }, { type: "text", text: "b" }], { ensureRuntime: false, model: fauxModel(), streamFn });
  assert.deepEqual(calls[0].messages[0].content, [
    { type: "text", text: "a" },
    { type: "text", text: "b" },
  ]);
});

test("arguments are converted the way Pi does before validation: numeric strings, booleans, numbers as strings", async () => {
  const seen = [];
  const typed = tool({
    name: "typed",
    description: "d",
    input: schema.object({
      n: schema.integer(),
      x: schema.number(),
      flag: schema.boolean(),
      label: schema.string(),
      list: schema.array(schema.integer()),
      nested: schema.object({ k: schema.number() }),
    }),
    effect: "read",
    execute: (args) => (seen.push(args), "ran"),
  });
  const policyArgs = [];
  const def = hostAgent("coercion", [typed]);
  const { streamFn, calls } = recordingStream([
    { toolCalls: [call("typed", { n: "20", x: " 1.5 ", flag: "true", label: 7, list: ["1", 2], nested: { k: "3" } })] },
    { toolCalls: [call("typed", { n: "1.5", x: 1, flag: false, label: "a", list: [], nested: { k: 1 } })] },
    { text: "ok" },
  ]);
  await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, toolPolicy: ({ args }) => void policyArgs.push(args) });
  assert.deepEqual(seen, [{ n: 20, x: 1.5, flag: true, label: "7", list: [1, 2], nested: { k: 3 } }]);
  assert.deepEqual(policyArgs, seen, "the policy sees the converted arguments");
  const [, second] = toolResultsSeen(calls);
  assert.equal(second.isError, true, '"1.5" is not an integer');
  assert.match(second.text, /^Validation failed for tool "typed":/);
  assert.match(second.text, /"n": "1\.5"/, "the error shows the arguments as received");
});
