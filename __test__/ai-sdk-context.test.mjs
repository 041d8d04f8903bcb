// Message pruning, the Anthropic prompt-cache middleware (as the mock model receives the
// prompt), and context layers (execution and output policies, custom layers).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { generateText, wrapLanguageModel, stepCountIs } from "ai";
import {
  createLocalSandbox,
  createAgentTools,
  pruneMessages,
  pruneMessagesByTokens,
  estimateMessagesTokens,
  anthropicPromptCacheMiddleware,
  withContext,
  applyContextLayers,
  createOutputPolicy,
} from "knap/ai-sdk";
import { call, runTool, scripted, tempWorkspace } from "./ai-sdk-helpers.mjs";

// ------------------------------------------------------------------------------------ pruning

const text = (role, chars, label) => ({ role, content: `${label}:${"x".repeat(chars)}` });
const toolTurn = (id, chars) => [
  { role: "assistant", content: [{ type: "tool-call", toolCallId: id, toolName: "Read", input: { file_path: "a" } }] },
  { role: "tool", content: [{ type: "tool-result", toolCallId: id, toolName: "Read", output: { type: "text", value: "y".repeat(chars) } }] },
];

test("pruneMessages: oldest out first; system prompt and recent user messages kept; a tool call keeps its result", () => {
  const messages = [
    { role: "system", content: "You are helpful." },
    text("user", 400, "u1"),
    ...toolTurn("c1", 4000),
    text("assistant", 400, "a1"),
    text("user", 400, "u2"),
    ...toolTurn("c2", 4000),
    text("user", 400, "u3"),
    text("assistant", 400, "a3"),
    text("user", 400, "u4"),
  ];
  const before = estimateMessagesTokens(messages);
  assert.ok(before > 2500);
  const pruned = pruneMessages(messages, { maxTokens: 1700, protectRecentUserMessages: 2 });
  const labels = pruned.map((m) => (typeof m.content === "string" ? m.content.split(":")[0] : `${m.role}:${m.content[0].toolCallId}`));
  // u1 and the first tool turn go (oldest first), which is enough; a1 goes too, so the history
  // does not restart on an assistant message; u2 and its tool turn stay; u3.. are protected.
  assert.deepEqual(labels, ["You are helpful.", "u2", "assistant:c2", "tool:c2", "u3", "a3", "u4"]);
  assert.ok(estimateMessagesTokens(pruned) <= 1700);
  // No tool-call message without its result, and vice versa.
  for (const [i, m] of pruned.entries()) {
    if (m.role === "tool") assert.equal(pruned[i - 1].role, "assistant");
  }
  assert.equal(messages.length, 11, "the input array is not modified");
});

test("pruneMessages: stops as soon as it fits; under the limit nothing changes; defaults", () => {
  const messages = [text("user", 4000, "u1"), text("assistant", 4000, "a1"), text("user", 40, "u2"), text("assistant", 40, "a2"), text("user", 40, "u3"), text("user", 40, "u4")];
  const pruned = pruneMessages(messages, { maxTokens: 1200, protectRecentUserMessages: 3 });
  assert.deepEqual(pruned.map((m) => m.content.split(":")[0]), ["u2", "a2", "u3", "u4"]);
  const fits = pruneMessages(messages, { maxTokens: 100000 });
  assert.deepEqual(fits, messages);
  assert.notEqual(fits, messages);
  assert.deepEqual(pruneMessages(messages), messages, "default maxTokens is 100,000");
  // Everything protected: nothing can go even if over the limit.
  assert.deepEqual(pruneMessages(messages.slice(0, 1), { maxTokens: 10 }), messages.slice(0, 1));
});

test("pruneMessagesByTokens (bashkit's placeholder variant) keeps every message", () => {
  const bigCall = { role: "assistant", content: [{ type: "tool-call", toolCallId: "c0", toolName: "Write", input: { content: "w".repeat(400000) } }] };
  const smallResult = { role: "tool", content: [{ type: "tool-result", toolCallId: "c0", toolName: "Write", output: { type: "text", value: "ok" } }] };
  const messages = [text("user", 40, "u0"), bigCall, smallResult, ...toolTurn("c1", 400000), text("user", 40, "u1"), text("user", 40, "u2"), text("user", 40, "u3")];
  const out = pruneMessagesByTokens(messages, { targetTokens: 1000, minSavingsThreshold: 100 });
  assert.equal(out.length, messages.length);
  assert.deepEqual(out[1].content[0].input, { _pruned: true, toolName: "Write" });
  assert.deepEqual(out[2], messages[2], "small enough once the call before it was pruned");
  assert.deepEqual(out[4].content[0].output, { type: "text", value: "pruned" });
  assert.deepEqual(out[5], messages[5]);
  assert.equal(messages[1].content[0].input.content.length, 400000, "the input is not modified");
});

test("anthropicPromptCacheMiddleware marks the system prompt, the last message and the last earlier non-assistant message", async () => {
  const model = scripted(["ok"]);
  const wrapped = wrapLanguageModel({ model, middleware: anthropicPromptCacheMiddleware });
  const messages = [
    { role: "user", content: "first question" },
    { role: "assistant", content: "first answer" },
    { role: "user", content: "second question" },
    { role: "assistant", content: "second answer" },
    { role: "user", content: [{ type: "text", text: "third" }, { type: "text", text: "question" }] },
  ];
  await generateText({ model: wrapped, system: "You are a cached system prompt.", messages });
  const prompt = model.doGenerateCalls[0].prompt;
  const cache = { anthropic: { cacheControl: { type: "ephemeral" } } };
  assert.equal(prompt[0].role, "system");
  assert.deepEqual(prompt[0].providerOptions, cache);
  assert.deepEqual(prompt.at(-1).content.at(-1).providerOptions, cache);
  assert.equal(prompt.at(-1).content[0].providerOptions, undefined, "only the last part of a message");
  assert.deepEqual(prompt[3].content.at(-1).providerOptions, cache, "the user message before the last");
  assert.equal(prompt[1].content.at(-1).providerOptions, undefined);
  assert.equal(prompt[2].content.at(-1).providerOptions, undefined, "assistant messages are skipped");
  assert.equal(prompt[4].content.at(-1).providerOptions, undefined);
  assert.equal(messages[4].content[1].providerOptions, undefined, "the caller's messages are not modified");
});

test("the middleware also marks tool results in an agent loop", async () => {
  const ws = tempWorkspace({ "a.txt": "x" });
  try {
    const { tools } = await createAgentTools(createLocalSandbox({ workingDirectory: ws.dir }));
    const model = scripted([[call("Read", { file_path: "a.txt" })], "done"]);
    const wrapped = wrapLanguageModel({ model, middleware: anthropicPromptCacheMiddleware });
    await generateText({ model: wrapped, tools, prompt: "read", stopWhen: stepCountIs(3) });
    const second = model.doGenerateCalls[1].prompt;
    assert.equal(second.at(-1).role, "tool");
    assert.deepEqual(second.at(-1).content.at(-1).providerOptions, { anthropic: { cacheControl: { type: "ephemeral" } } });
    assert.deepEqual(second[0].content.at(-1).providerOptions, { anthropic: { cacheControl: { type: "ephemeral" } } }, "the user prompt");
  } finally {
    ws.cleanup();
  }
});

// ------------------------------------------------------------------------------ context layers

test("context: the output policy cuts big results and adds a hint; contextLayers lists the layers", async () => {
  const ws = tempWorkspace({ "big.txt": `${"word ".repeat(5000)}\n`, "lines.txt": `${"a".repeat(79)}\n`.repeat(400) });
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    const { tools, contextLayers } = await createAgentTools(sandbox, { context: { outputPolicy: { maxOutputLength: 1000 } } });
    assert.equal(contextLayers.length, 1);
    const out = await runTool(tools, "Bash", { command: "cat big.txt" });
    const full = `${"word ".repeat(5000)}\n`;
    assert.equal(out.stdout, `[Total output lines: 2]\n\n${full.slice(0, 500)}\n\n…24001 chars truncated…\n\n${full.slice(-500)}`);
    assert.equal(out._hint, "Output truncated (25001 chars, ~313 lines). To see specific parts, re-run with | head, | tail, or | grep, or use Read to examine any output files.");
    const read = await runTool(tools, "Read", { file_path: "lines.txt" });
    assert.equal(read._hint, "File content truncated (32000 chars, ~400 lines). Use offset and limit parameters to read specific sections.");
    assert.match(read.content, /^\[Total output lines: 401\]/);
    const grep = await runTool(tools, "Grep", { pattern: "aaa", output_mode: "content" });
    assert.match(grep._hint, /^Results truncated \(\d+ chars\)\. Use head_limit and offset parameters to paginate/);
    assert.equal(typeof grep._truncated, "string");
    const small = await runTool(tools, "Bash", { command: "echo small" });
    assert.deepEqual(Object.keys(small).includes("_hint"), false);
    const none = await createAgentTools(sandbox);
    assert.deepEqual(none.contextLayers, []);
    assert.equal((await runTool(none.tools, "Bash", { command: "cat big.txt" })).stdout, full);
  } finally {
    ws.cleanup();
  }
});

test("context: executionPolicy.shouldBlock, custom layers (before/after), extraTools get the layers too", async () => {
  const ws = tempWorkspace({ "a.txt": "a" });
  try {
    const seen = [];
    const layer = {
      beforeExecute: (name, params) => (name === "Read" && params.file_path === "secret" ? { error: "no secrets" } : undefined),
      afterExecute: (name, _params, result) => {
        seen.push(name);
        return { ...result, layered: true };
      },
    };
    const extra = { Echo: { description: "echo", inputSchema: undefined, execute: async ({ v }) => ({ v }) } };
    const { tools, contextLayers } = await createAgentTools(createLocalSandbox({ workingDirectory: ws.dir }), {
      context: {
        outputPolicy: false,
        executionPolicy: { shouldBlock: (name, params) => (name === "Bash" && params.command.includes("sudo") ? "sudo is not allowed" : undefined) },
        layers: [layer],
        extraTools: extra,
      },
    });
    assert.equal(contextLayers.length, 2);
    assert.deepEqual(await runTool(tools, "Bash", { command: "sudo ls" }), { error: "sudo is not allowed" });
    assert.deepEqual(await runTool(tools, "Read", { file_path: "secret" }), { error: "no secrets" });
    assert.equal((await runTool(tools, "Read", { file_path: "a.txt" })).layered, true);
    assert.deepEqual(await tools.Echo.execute({ v: 1 }, {}), { v: 1, layered: true });
    assert.deepEqual(seen, ["Read", "Echo"]);
  } finally {
    ws.cleanup();
  }
});

test("withContext / applyContextLayers on late-added tools; stashOutput saves the full text", async () => {
  const ws = tempWorkspace();
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    const policy = createOutputPolicy({ maxOutputLength: 100, redirectionThreshold: 50, stashOutput: { sandbox, tools: ["Big"], pathFor: () => "stash/big.txt" } });
    const big = { execute: async () => ({ content: "z".repeat(500) }) };
    const wrapped = withContext(big, "Big", [policy]);
    const out = await wrapped.execute({}, {});
    assert.equal(out._hint, "Full output saved to stash/big.txt. Output truncated (500 chars). Use Read, Grep, or Bash with targeted commands to access specific parts.");
    assert.equal(readFileSync(join(ws.dir, "stash/big.txt"), "utf8"), "z".repeat(500));
    const set = applyContextLayers({ A: big, B: { description: "no execute" } }, [policy]);
    assert.notEqual(set.A, big);
    assert.equal(set.B.execute, undefined);
    const structured = await withContext({ execute: async () => ({ list: Array(40).fill("item") }) }, "List", [policy]).execute({}, {});
    assert.equal(typeof structured._truncated, "string");
    assert.ok(existsSync(join(ws.dir, "stash")));
  } finally {
    ws.cleanup();
  }
});
