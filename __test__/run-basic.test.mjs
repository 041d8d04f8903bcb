// run(): a multi-turn run with native and JS tools, the seed's policy example, the result shape,
// output schemas, CavemanRunError, the host-execution notice and auto() (reference §2–3, §6.3).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

import { agent, auto, output, run, schema, shellTools, tool, CavemanRunError } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { tempWorkspace } from "./helpers.mjs";
import { baseOptions, recordingStream, toolResultsSeen } from "./run-helpers.mjs";

const RESULT_KEYS = [
  "runId", "agentId", "text", "usageBasis", "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens",
  "reasoningTokens", "costUsd", "priceBasis", "mode", "provider", "model", "latencyMs", "toolCalls", "stopReason",
  "capBreached", "overspent", "receipt", "claimBasis", "unlocked",
];

test("a three-turn run with bash and a custom tool: tool results reach the model, the receipt counts them", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  ws.write("notes.txt", "one\ntwo\nthree\n");
  const lookups = [];
  const lookup = tool({
    name: "lookup",
    description: "Looks a key up.",
    input: schema.object({ key: schema.string() }),
    effect: "read",
    execute: async ({ key }, signal, context) => {
      lookups.push({ key, hasSignal: signal instanceof AbortSignal, toolCallId: context?.toolCallId });
      return { key, value: key.toUpperCase() };
    },
  });
  const def = agent({
    id: "three-turns",
    instructions: "Count lines, then look something up.",
    model: auto(),
    sandbox: "host",
    tools: [...shellTools({ workspace: ws.root, tools: ["bash"] }), lookup],
  });
  const { streamFn, calls } = recordingStream([
    { text: "counting", toolCalls: [{ name: "bash", args: { command: "wc -l < notes.txt" } }] },
    { toolCalls: [{ name: "lookup", args: { key: "abc" } }] },
    { text: "There are 3 lines; abc is ABC." },
  ]);
  const result = await run(def, "count the lines in notes.txt", { ensureRuntime: false, model: fauxModel(), streamFn });

  assert.equal(result.text, "There are 3 lines; abc is ABC.");
  assert.equal(result.stopReason, "complete");
  assert.deepEqual(result.toolCalls, ["bash", "lookup"]);
  assert.deepEqual(result.receipt.tools, [
    { name: "bash", calls: 1, errors: 0 },
    { name: "lookup", calls: 1, errors: 0 },
  ]);
  assert.equal(calls.length, 3);
  assert.deepEqual(lookups, [{ key: "abc", hasSignal: true, toolCallId: "scripted-2-0" }]);
  // What the model saw: the user message as text parts, then each turn's tool results.
  assert.deepEqual(calls[0].messages.map((m) => m.role), ["user"]);
  assert.deepEqual(calls[0].messages[0].content, [{ type: "text", text: "count the lines in notes.txt" }]);
  assert.deepEqual(calls[0].tools, ["bash", "lookup"]);
  assert.deepEqual(calls[2].messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant", "toolResult"]);
  assert.deepEqual(toolResultsSeen(calls), [
    { name: "bash", isError: false, text: "exit 0\n3\n" },
    { name: "lookup", isError: false, text: '{"key":"abc","value":"ABC"}' },
  ]);
  assert.equal(calls[2].messages[2].toolCallId, "scripted-1-0");
  assert.equal(calls[1].messages[1].content[0].text, "counting");
  // Usage totals: three calls of the default 100/10.
  assert.equal(result.inputTokens, 300);
  assert.equal(result.outputTokens, 30);
  assert.equal(result.receipt.calls.length, 3);
  assert.equal(result.receipt.totalTokens, 330);
});

test("the seed's policy example: inputs, receipt tools, and the denied call's text as the model reads it", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  ws.write("notes.txt", "a\nb\n");
  const reviewer = agent({
    id: "reviewer",
    instructions: "Read the workspace and explain what changed.",
    model: auto(),
    sandbox: "host",
    tools: shellTools({ workspace: ws.root, tools: ["bash", "read_file", "write_file", "read_tool_output"] }),
  });
  const inputs = [];
  const { streamFn, calls } = recordingStream([
    { toolCalls: [{ name: "bash", args: { command: "wc -l notes.txt" } }] },
    { toolCalls: [{ name: "write_file", args: { path: "out.txt", content: "tampered" } }] },
    { text: "notes.txt has 2 lines." },
  ]);
  const result = await run(reviewer, "count the lines", {
    ensureRuntime: false,
    model: fauxModel(),
    streamFn,
    toolPolicy: (input) => {
      inputs.push(input);
      return input.effect === "write" ? { deny: "read_only_review" } : undefined;
    },
  });

  assert.deepEqual(
    inputs.map(({ name, effect, agentPath }) => JSON.stringify({ name, effect, agentPath })),
    ['{"name":"bash","effect":"external","agentPath":[]}', '{"name":"write_file","effect":"write","agentPath":[]}'],
  );
  assert.deepEqual(result.receipt.tools, [
    { name: "bash", calls: 1, errors: 0 },
    { name: "write_file", calls: 1, errors: 1, denied: 1 },
  ]);
  assert.equal(result.stopReason, "complete", "a denial does not end the run");
  assert.equal(result.text, "notes.txt has 2 lines.");
  assert.equal(fs.existsSync(ws.path("out.txt")), false, "the denied write never ran");
  assert.deepEqual(toolResultsSeen(calls).at(-1), { name: "write_file", isError: true, text: "cave_tool_denied:read_only_review" });

  // The full policy input: run and agent ids, call id, validated args; frozen; no parentToolCallId.
  const [first] = inputs;
  assert.equal(first.runId, result.runId);
  assert.equal(first.agentId, "reviewer");
  assert.equal(first.toolCallId, "scripted-1-0");
  assert.deepEqual(first.args, { command: "wc -l notes.txt" });
  assert.equal(first.parentToolCallId, undefined);
  assert.ok(Object.isFrozen(first));
  assert.deepEqual(result.toolCalls, ["bash", "write_file"], "denied calls are listed in toolCalls");
});

test("{ allow: true } and undefined both admit; an async policy is awaited", async () => {
  const ran = [];
  const mk = (name) =>
    tool({ name, description: "d", input: schema.object({}), effect: "write", execute: () => (ran.push(name), "ok") });
  const def = agent({ id: "allow-forms", instructions: "x", model: auto(), sandbox: "host", tools: [mk("one"), mk("two"), mk("three")] });
  const result = await run(
    def,
    "go",
    baseOptions(
      [
        { toolCalls: [{ name: "one", args: {} }, { name: "two", args: {} }, { name: "three", args: {} }] },
        { text: "done" },
      ],
      {
        toolPolicy: async ({ name }) => {
          await new Promise((resolve) => setImmediate(resolve));
          return name === "one" ? { allow: true } : name === "two" ? undefined : { deny: "no_three" };
        },
      },
    ),
  );
  assert.deepEqual(ran, ["one", "two"]);
  assert.deepEqual(result.receipt.tools.at(-1), { name: "three", calls: 1, errors: 1, denied: 1 });
});

test("RunResult shape: observe-only, usage basis, runId, unpriced faux model, no output key without a schema", async () => {
  const def = agent({ id: "shape", instructions: "x", model: auto(), sandbox: "host" });
  const result = await run(def, "hello", baseOptions([{ text: "hi there" }]));
  for (const key of RESULT_KEYS) assert.ok(key in result, `result.${key}`);
  assert.equal("output" in result, false);
  assert.equal(result.mode, "observe-only");
  assert.equal(result.agentId, "shape");
  assert.match(result.runId, /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/);
  assert.equal(result.receipt.runId, result.runId);
  assert.equal(result.provider, "anthropic");
  assert.equal(result.model, fauxModel().id);
  assert.equal(result.priceBasis, "unpriced");
  assert.equal(result.usageBasis, "provider_reported");
  assert.equal(result.costUsd, 0);
  assert.equal(result.claimBasis, "inferred");
  assert.deepEqual(result.toolCalls, []);
  const r = result.receipt;
  assert.equal(r.schema, "caveman.agent.run-receipt.v1");
  assert.equal(r.basis, "estimated_list_price_subtotal");
  assert.equal(r.denomination, "none");
  assert.equal("max" in r, false, "max only with a budget");
  assert.equal(r.unpriced, true);
  assert.deepEqual(r.calls, [
    {
      provider: "anthropic",
      model: fauxModel().id,
      inputTokens: 100,
      outputTokens: 10,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
      estimatedUsd: 0,
      unpriced: true,
      usageBasis: "provider_reported",
    },
  ]);
  assert.deepEqual([r.tools, r.subagents, r.breakers], [[], [], []]);
  // A second run gets a new runId.
  const again = await run(def, "hello", baseOptions([{ text: "hi" }]));
  assert.notEqual(again.runId, result.runId);
});

test("scripted usage flows into totals and the receipt", async () => {
  const def = agent({ id: "usage", instructions: "x", model: auto(), sandbox: "host" });
  const result = await run(def, "go", baseOptions([{ text: "x", usage: { input: 7, output: 3, cacheRead: 5, cacheWrite: 2, reasoning: 4 } }]));
  assert.deepEqual(
    [result.inputTokens, result.outputTokens, result.cacheReadTokens, result.cacheWriteTokens, result.reasoningTokens],
    [7, 3, 5, 2, 4],
  );
  assert.equal(result.receipt.totalTokens, 17, "reasoning is not part of totalTokens");
});

test("output schema: rendered into the system prompt, caps maxTokens, parsed into result.output", async () => {
  const def = agent({
    id: "structured",
    instructions: "Answer in JSON.",
    model: auto(),
    sandbox: "host",
    output: output({ maxTokens: 300, schema: schema.object({ count: schema.integer(), note: schema.optional(schema.string()) }) }),
  });
  const { streamFn, calls } = recordingStream([{ text: '{"count":3}' }]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn });
  assert.deepEqual(result.output, { count: 3 });
  assert.equal(result.text, '{"count":3}');
  assert.equal(calls[0].maxTokens, 300);
  assert.equal(
    calls[0].systemPrompt,
    'Answer in JSON.\n\n<cave-output max_tokens=300>Return exactly one JSON document matching this JSON Schema and no other prose:\n{"properties":{"count":{"type":"integer"},"note":{"type":"string"}},"required":["count"],"type":"object"}</cave-output>',
  );
});

test("output without a schema: the prompt blurb, and no output key", async () => {
  const def = agent({ id: "unstructured", instructions: "Be brief.", model: auto(), sandbox: "host", output: output({ maxTokens: 50 }) });
  const { streamFn, calls } = recordingStream([{ text: "ok" }]);
  const result = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn });
  assert.equal("output" in result, false);
  assert.equal(calls[0].systemPrompt, "Be brief.\n\n<cave-output max_tokens=50>Return output matching declared schema when present.</cave-output>");
});

for (const [label, text, pattern] of [
  ["not JSON", "three", /cave_output_schema_invalid_json/],
  ["the wrong shape", '{"count":"three"}', /cave_output_schema_mismatch/],
]) {
  test(`output schema failure: ${label} ends the run with CavemanRunError`, async () => {
    const def = agent({
      id: "structured-fail",
      instructions: "x",
      model: auto(),
      sandbox: "host",
      output: output({ maxTokens: 100, schema: schema.object({ count: schema.integer() }) }),
    });
    await assert.rejects(run(def, "go", baseOptions([{ text }])), (error) => {
      assert.ok(error instanceof CavemanRunError);
      assert.match(error.message, pattern);
      assert.equal(error.code, "cave_agent_run_failed");
      assert.equal(error.receipt.calls.length, 1, "the partial receipt has the call");
      return true;
    });
  });
}

test("CavemanRunError: name, code, message = `code: original`, receipt as cause; instanceof Error", async () => {
  const def = agent({ id: "exhausted", instructions: "x", model: auto(), sandbox: "host" });
  const error = await run(def, "go", baseOptions([])).then(
    () => assert.fail("should reject"),
    (e) => e,
  );
  assert.ok(error instanceof CavemanRunError);
  assert.ok(error instanceof Error);
  assert.equal(error.name, "CavemanRunError");
  assert.equal(error.code, "cave_agent_run_failed");
  assert.equal(
    error.message,
    "cave_agent_run_failed: cave_testing_script_exhausted: scripted stream has 0 turn(s); call 1 asked for another",
  );
  assert.equal(error.cause, error.receipt);
  assert.equal(error.receipt.schema, "caveman.agent.run-receipt.v1");
  assert.equal(error.receipt.agentId, "exhausted");
  const direct = new CavemanRunError("cave_x", "boom", { schema: "r" });
  assert.deepEqual([direct.code, direct.message, direct.receipt, direct.name], ["cave_x", "cave_x: boom", { schema: "r" }, "CavemanRunError"]);
});

test("an undeclared sandbox runs on the host with one stderr notice per definition id", async (t) => {
  const written = [];
  const original = process.stderr.write;
  process.stderr.write = function (chunk, ...rest) {
    if (String(chunk).startsWith("cave:")) {
      written.push(String(chunk));
      return true;
    }
    return original.call(this, chunk, ...rest);
  };
  t.after(() => {
    process.stderr.write = original;
  });
  const counter = { n: 0 };
  const echo = tool({ name: "echo", description: "d", input: schema.object({}), effect: "write", execute: () => (counter.n++, "ok") });
  const undeclared = agent({ id: "notice-undeclared", instructions: "x", model: auto(), tools: [echo] });
  assert.equal(undeclared.sandbox, "required");
  assert.equal(undeclared.sandboxDeclared, false);
  const turns = () => [{ toolCalls: [{ name: "echo", args: {} }] }, { text: "done" }];
  await run(undeclared, "go", baseOptions(turns()));
  await run(undeclared, "go", baseOptions(turns()));
  const other = agent({ id: "notice-other", instructions: "x", model: auto() });
  await run(other, "go", baseOptions([{ text: "x" }]));
  const declaredHost = agent({ id: "notice-declared", instructions: "x", model: auto(), sandbox: "host" });
  await run(declaredHost, "go", baseOptions([{ text: "x" }]));
  assert.equal(counter.n, 2, "the write tool executed: host mode");
  assert.deepEqual(written, [
    "cave: notice-undeclared host execution — tools are not isolated\n",
    "cave: notice-other host execution — tools are not isolated\n",
  ]);
});

test("a declared required sandbox without entryPath fails with cave_tool_sandbox_entry_required", async () => {
  const counter = { n: 0 };
  const t1 = tool({ name: "t1", description: "d", input: schema.object({}), effect: "read", execute: () => (counter.n++, "x") });
  const def = agent({ id: "required-sandbox", instructions: "x", model: auto(), sandbox: "required", tools: [t1] });
  let called = 0;
  await assert.rejects(
    run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn: (...a) => (called++, scriptedStream([{ text: "x" }])(...a)) }),
    (error) => error instanceof CavemanRunError && /cave_tool_sandbox_entry_required/.test(error.message),
  );
  assert.equal(called, 0);
  assert.equal(counter.n, 0);
});

test("auto() with no credentials: CavemanRunError code cave_provider_credentials", async (t) => {
  const keys = ["CAVE_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"];
  const saved = Object.fromEntries(keys.map((k) => [k, process.env[k]]));
  for (const k of keys) delete process.env[k];
  t.after(() => {
    for (const k of keys) if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  });
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  const def = agent({ id: "no-creds", instructions: "x", model: auto(), sandbox: "host" });
  await assert.rejects(run(def, "go", { ensureRuntime: false, rootDir: ws.root }), (error) => {
    assert.ok(error instanceof CavemanRunError);
    assert.equal(error.code, "cave_provider_credentials");
    assert.equal(error.message.split("\n")[0], "cave_provider_credentials: caveman agent: no supported provider credential found");
    assert.match(error.hint, /ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY or GOOGLE_API_KEY.*fauxModel\(\).*streamFn/);
    assert.equal(error.receipt.calls.length, 0);
    return true;
  });
});

test("RunOptions.model overrides the definition's model and streamFn replaces the transport", async () => {
  const def = agent({ id: "override", instructions: "x", model: "nope/not-a-model", sandbox: "host" });
  const result = await run(def, "go", baseOptions([{ text: "x" }], { model: fauxModel({ provider: "openai", id: "m-1" }) }));
  assert.deepEqual([result.provider, result.model], ["openai", "m-1"]);
});
