// toAiSdkTools: knap's own tools (shellTools(), tool()) in an AI SDK loop, governed by a
// toolPolicy through the Rust policy evaluator; and one loop on ai@5 (MockLanguageModelV2).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { generateText, stepCountIs } from "ai";
import { generateText as generateText5, stepCountIs as stepCountIs5, wrapLanguageModel as wrap5 } from "ai5";
import { MockLanguageModelV2 } from "ai5/test";
import { shellTools, tool, schema } from "knap";
import { toAiSdkTools, createLocalSandbox, createAgentTools, createBudgetTracker, anthropicPromptCacheMiddlewareV2 } from "knap/ai-sdk";
import { call, runTool, runTools, scripted, tempWorkspace } from "./ai-sdk-helpers.mjs";

test("shellTools() as AI SDK tools: the model sees their JSON Schemas and gets their text results", async () => {
  const ws = tempWorkspace({ "a.txt": "hello\n" });
  try {
    const tools = toAiSdkTools(shellTools({ workspace: ws.dir }));
    assert.deepEqual(Object.keys(tools), ["read_file", "grep", "bash", "write_file", "edit_file", "read_tool_output"]);
    const { outputs, model, result } = await runTools(tools, [call("read_file", { path: "a.txt" }), call("bash", { command: "echo hi" })]);
    assert.equal(outputs[0], "1\thello\n2\t");
    assert.equal(outputs[1], "exit 0\nhi\n");
    const sent = model.doGenerateCalls[0].tools.find((t) => t.name === "read_file");
    assert.deepEqual(sent.inputSchema.required, ["path"]);
    assert.equal(sent.inputSchema.properties.path.type, "string");
    assert.deepEqual(model.doGenerateCalls[1].prompt.at(-1).content[1].output, { type: "text", value: "exit 0\nhi\n" });
    assert.equal(result.text, "done");
  } finally {
    ws.cleanup();
  }
});

test("a knap tool error (thrown) reaches the model as error-text", async () => {
  const ws = tempWorkspace();
  try {
    const tools = toAiSdkTools(shellTools({ workspace: ws.dir }));
    const c = call("read_file", { path: "../outside.txt" });
    const { model } = await runTools(tools, [c]);
    const part = model.doGenerateCalls[1].prompt.at(-1).content[0];
    assert.equal(part.output.type, "error-text");
    assert.match(part.output.value, /escapes the workspace/);
  } finally {
    ws.cleanup();
  }
});

test("toolPolicy: a denial returns cave_tool_denied:<code> as the tool's error result and the tool does not run", async () => {
  const ws = tempWorkspace();
  try {
    const seen = [];
    const toolPolicy = (input) => {
      seen.push({ name: input.name, effect: input.effect, args: input.args, toolCallId: input.toolCallId });
      return input.effect === "write" || input.effect === "external" ? { deny: "read_only_mode" } : undefined;
    };
    const tools = toAiSdkTools(shellTools({ workspace: ws.dir }), { toolPolicy });
    const w = call("write_file", { path: "x.txt", content: "nope" });
    const r = call("grep", { pattern: "anything" });
    const { model, result } = await runTools(tools, [w, r]);
    const results = model.doGenerateCalls[1].prompt.at(-1).content;
    const denied = results.find((p) => p.toolCallId === w.toolCallId);
    assert.deepEqual(denied.output, { type: "error-text", value: "cave_tool_denied:read_only_mode" });
    assert.equal(existsSync(join(ws.dir, "x.txt")), false, "the denied write did not happen");
    const allowed = results.find((p) => p.toolCallId === r.toolCallId);
    assert.equal(allowed.output.type, "text");
    assert.deepEqual(
      seen.sort((a, b) => a.name.localeCompare(b.name)),
      [
        { name: "grep", effect: "read", args: { pattern: "anything" }, toolCallId: r.toolCallId },
        { name: "write_file", effect: "write", args: { path: "x.txt", content: "nope" }, toolCallId: w.toolCallId },
      ],
    );
    assert.equal(result.steps[0].content.filter((p) => p.type === "tool-error").length, 1);
  } finally {
    ws.cleanup();
  }
});

test("toolPolicy failures and malformed decisions fail the call with the policy's error code", async () => {
  const ws = tempWorkspace();
  try {
    const throwing = toAiSdkTools(shellTools({ workspace: ws.dir, tools: ["bash"] }), {
      toolPolicy: () => {
        throw new Error("policy crashed");
      },
    });
    const out = await runTool(throwing, "bash", { command: "echo x" });
    assert.equal(out.__toolError, "cave_tool_policy_failed");
    const malformed = toAiSdkTools(shellTools({ workspace: ws.dir, tools: ["bash"] }), { toolPolicy: () => ({ deny: "Not A Code" }) });
    assert.match((await runTool(malformed, "bash", { command: "echo x" })).__toolError, /^cave_tool_policy_reason_invalid/);
    assert.throws(() => toAiSdkTools([], { toolPolicy: "no" }), /toolPolicy must be a function/);
  } finally {
    ws.cleanup();
  }
});

test("a knap tool() object: effect reaches the policy, its timeoutMs is enforced", async () => {
  const lookup = tool({
    name: "lookup",
    description: "Looks a key up",
    input: schema.object({ key: schema.string() }),
    effect: "read",
    execute: async ({ key }) => ({ value: key.toUpperCase() }),
  });
  const slow = tool({
    name: "slow",
    description: "Never finishes",
    input: schema.object({}),
    effect: "read",
    timeoutMs: 100,
    execute: (_input, signal) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted")))),
  });
  const effects = [];
  const tools = toAiSdkTools([lookup, slow], { toolPolicy: (i) => void effects.push(i.effect) });
  assert.deepEqual(await runTool(tools, "lookup", { key: "abc" }), { value: "ABC" });
  assert.deepEqual(effects, ["read"]);
  assert.equal((await runTool(tools, "slow", {})).__toolError, "cave_tool_timeout");
  assert.throws(() => toAiSdkTools([lookup, lookup]), /cave_tool_duplicate:lookup/);
});

test("bashkit-style tools and knap's own tools in one tool set, one policy over the knap ones", async () => {
  const ws = tempWorkspace({ "a.txt": "x" });
  try {
    const { tools: agentTools } = await createAgentTools(createLocalSandbox({ workingDirectory: ws.dir }));
    const knapTools = toAiSdkTools(shellTools({ workspace: ws.dir, tools: ["bash"] }), { toolPolicy: () => ({ deny: "no_shell" }) });
    const tools = { ...agentTools, ...knapTools };
    const { outputs } = await runTools(tools, [call("Read", { file_path: "a.txt" }), call("bash", { command: "echo x" })]);
    assert.equal(outputs[0].content, "x");
    assert.equal(outputs[1].__toolError, "cave_tool_denied:no_shell");
  } finally {
    ws.cleanup();
  }
});

// ------------------------------------------------------------------------------------ ai@5

test("ai@5: a generateText loop with MockLanguageModelV2, knap's tools, budget (flat usage), V2 middleware", async () => {
  const ws = tempWorkspace({ "a.txt": "alpha\n" });
  try {
    const { tools } = await createAgentTools(createLocalSandbox({ workingDirectory: ws.dir }), { patch: true, cache: true });
    const turns = [
      {
        content: [
          { type: "tool-call", toolCallId: "v1", toolName: "Edit", input: JSON.stringify({ file_path: "a.txt", old_string: "alpha", new_string: "[$&]" }) },
        ],
        finishReason: "tool-calls",
        usage: { inputTokens: 1000, outputTokens: 10, totalTokens: 1010 },
        warnings: [],
      },
      {
        content: [{ type: "tool-call", toolCallId: "v2", toolName: "Read", input: JSON.stringify({ file_path: "a.txt" }) }],
        finishReason: "tool-calls",
        usage: { inputTokens: 1000, outputTokens: 10, totalTokens: 1010 },
        warnings: [],
      },
      { content: [{ type: "text", text: "edited" }], finishReason: "stop", usage: { inputTokens: 1000, outputTokens: 10, totalTokens: 1010 }, warnings: [] },
    ];
    let i = 0;
    const model = new MockLanguageModelV2({ modelId: "gpt-4o-mini", doGenerate: async () => turns[i++] });
    const budget = createBudgetTracker(1, { modelPricing: { "gpt-4o-mini": { inputPerToken: 0.15e-6, outputPerToken: 0.6e-6 } } });
    const wrapped = wrap5({ model, middleware: anthropicPromptCacheMiddlewareV2 });
    const r = await generateText5({
      model: wrapped,
      tools,
      prompt: "edit it",
      stopWhen: [stepCountIs5(10), budget.stopWhen],
      onStepFinish: (s) => budget.onStepFinish(s),
    });
    assert.equal(r.text, "edited");
    assert.equal(readFileSync(join(ws.dir, "a.txt"), "utf8"), "[$&]\n");
    assert.equal(r.steps[1].toolResults[0].output.content, "[$&]\n");
    assert.deepEqual(r.steps[0].toolResults[0].output, { message: "Successfully edited a.txt", file_path: "a.txt", replacements: 1 });
    const s = budget.getStatus();
    assert.equal(s.stepsCompleted, 3);
    assert.ok(Math.abs(s.totalCostUsd - 3 * (1000 * 0.15e-6 + 10 * 0.6e-6)) < 1e-15);
    const lastPrompt = model.doGenerateCalls[2].prompt;
    assert.deepEqual(lastPrompt.at(-1).content.at(-1).providerOptions, { anthropic: { cacheControl: { type: "ephemeral" } } });
    const invalid = await generateText5({
      model: new MockLanguageModelV2({
        doGenerate: async () =>
          i++ === 3
            ? { content: [{ type: "tool-call", toolCallId: "bad", toolName: "Bash", input: '{"command":1}' }], finishReason: "tool-calls", usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, warnings: [] }
            : { content: [{ type: "text", text: "ok" }], finishReason: "stop", usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, warnings: [] },
      }),
      tools,
      prompt: "x",
      stopWhen: stepCountIs5(3),
    });
    const err = invalid.steps[0].content.find((p) => p.type === "tool-error");
    assert.match(String(err.error?.message ?? err.error), /Invalid input/);
  } finally {
    ws.cleanup();
  }
});

test("ai@6 and ai@5 both accept the same tool objects (no ai import needed to build them)", async () => {
  const ws = tempWorkspace({ "a.txt": "x" });
  try {
    const { tools } = await createAgentTools(createLocalSandbox({ workingDirectory: ws.dir }));
    const model6 = scripted([[call("Read", { file_path: "a.txt" })], "ok"]);
    const r6 = await generateText({ model: model6, tools, prompt: "p", stopWhen: stepCountIs(3) });
    assert.equal(r6.steps[0].toolResults[0].output.content, "x");
  } finally {
    ws.cleanup();
  }
});
