// The Vercel AI SDK bridge: LanguageModelV3 (ai@6) and LanguageModelV2 (ai@5) as Pi StreamFns.
import { test } from "node:test";
import assert from "node:assert/strict";
import { MockLanguageModelV3, convertArrayToReadableStream } from "ai/test";
import { MockLanguageModelV2, convertArrayToReadableStream as convertArrayToReadableStreamV2 } from "ai5/test";
import { Type } from "@mariozechner/pi-ai";
import {
  aiSdkStreamFn,
  piModelFromAiSdk,
  piProviderFromAiSdk,
  toAiSdkPrompt,
  piUsageFromAiSdk,
  isAiSdkLanguageModel,
} from "../lib/ai-sdk-model.mjs";
import { callModel } from "../lib/transport.mjs";

const v3Usage = (input, output, extra = {}) => ({
  inputTokens: { total: input, noCache: input - (extra.cacheRead ?? 0), cacheRead: extra.cacheRead, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: extra.reasoning },
});

const tools = [
  {
    name: "read_file",
    description: "Read a file",
    parameters: Type.Object({ path: Type.String(), offset: Type.Optional(Type.Integer()) }),
  },
];

const conversation = {
  systemPrompt: "You are terse.",
  messages: [
    { role: "user", content: "list files", timestamp: 1 },
    {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "need ls" },
        { type: "text", text: "Looking." },
        { type: "toolCall", id: "call_1", name: "read_file", arguments: { path: "a.txt" } },
        { type: "toolCall", id: "call_2", name: "read_file", arguments: { path: "b.txt" } },
      ],
      api: "ai-sdk",
      provider: "mock-provider",
      model: "mock-model-id",
      usage: {},
      stopReason: "toolUse",
      timestamp: 2,
    },
    { role: "toolResult", toolCallId: "call_1", toolName: "read_file", content: [{ type: "text", text: "alpha" }], isError: false, timestamp: 3 },
    { role: "toolResult", toolCallId: "call_2", toolName: "read_file", content: [{ type: "text", text: "ENOENT" }], isError: true, timestamp: 4 },
    { role: "user", content: [{ type: "text", text: "and now?" }, { type: "image", data: "aGk=", mimeType: "image/png" }], timestamp: 5 },
  ],
  tools,
};

const expectedPrompt = [
  { role: "system", content: "You are terse." },
  { role: "user", content: [{ type: "text", text: "list files" }] },
  {
    role: "assistant",
    content: [
      { type: "reasoning", text: "need ls" },
      { type: "text", text: "Looking." },
      { type: "tool-call", toolCallId: "call_1", toolName: "read_file", input: { path: "a.txt" } },
      { type: "tool-call", toolCallId: "call_2", toolName: "read_file", input: { path: "b.txt" } },
    ],
  },
  {
    role: "tool",
    content: [
      { type: "tool-result", toolCallId: "call_1", toolName: "read_file", output: { type: "text", value: "alpha" } },
      { type: "tool-result", toolCallId: "call_2", toolName: "read_file", output: { type: "error-text", value: "ENOENT" } },
    ],
  },
  {
    role: "user",
    content: [
      { type: "text", text: "and now?" },
      { type: "file", data: "aGk=", mediaType: "image/png" },
    ],
  },
];

const expectedTools = [
  {
    type: "function",
    name: "read_file",
    description: "Read a file",
    inputSchema: {
      type: "object",
      properties: { path: { type: "string" }, offset: { type: "integer" } },
      required: ["path"],
    },
  },
];

const piModel = (languageModel) => piModelFromAiSdk(languageModel);

test("V3: text stream -> pi events and final message with usage and cost", async () => {
  const languageModel = new MockLanguageModelV3({
    doStream: {
      stream: convertArrayToReadableStream([
        { type: "stream-start", warnings: [] },
        { type: "response-metadata", id: "resp-1", modelId: "mock-model-2025" },
        { type: "text-start", id: "t1" },
        { type: "text-delta", id: "t1", delta: "Hello" },
        { type: "text-delta", id: "t1", delta: ", world" },
        { type: "text-end", id: "t1" },
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: v3Usage(120, 8, { cacheRead: 20, reasoning: 3 }) },
      ]),
    },
  });
  const model = { ...piModel(languageModel), cost: { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 0 } };
  const events = [];
  const message = await callModel({
    model,
    context: conversation,
    options: { maxTokens: 321 },
    streamFn: aiSdkStreamFn(languageModel),
    onEvent: (event) => events.push(event),
  });
  assert.deepEqual(message.content, [{ type: "text", text: "Hello, world" }]);
  assert.equal(message.stopReason, "stop");
  assert.equal(message.role, "assistant");
  assert.deepEqual([message.api, message.provider, message.model], ["ai-sdk", "mock-provider", "mock-model-id"]);
  assert.equal(message.responseId, "resp-1");
  assert.equal(message.responseModel, "mock-model-2025");
  assert.equal(message.usage.input, 100, "pi input excludes cache reads");
  assert.equal(message.usage.cacheRead, 20);
  assert.equal(message.usage.output, 8);
  assert.equal(message.usage.reasoning, 3);
  assert.equal(message.usage.totalTokens, 128);
  assert.ok(Math.abs(message.usage.cost.total - (100 * 1 + 8 * 5 + 20 * 0.1) / 1e6) < 1e-15);
  const deltas = events.filter((e) => e.type === "message_update" && e.assistantMessageEvent.type === "text_delta");
  assert.deepEqual(
    deltas.map((e) => e.assistantMessageEvent.delta),
    ["Hello", ", world"],
  );
  assert.equal(events[0].type, "message_start");
  assert.equal(events.at(-1).type, "message_end");
  // What the model was asked
  assert.equal(languageModel.doStreamCalls.length, 1);
  const call = languageModel.doStreamCalls[0];
  assert.deepEqual(call.prompt, expectedPrompt);
  assert.deepEqual(call.tools, expectedTools);
  assert.deepEqual(call.toolChoice, { type: "auto" });
  assert.equal(call.maxOutputTokens, 321);
});

test("V3: streamed tool input and tool-call parts -> pi toolCall parts, stopReason toolUse", async () => {
  const languageModel = new MockLanguageModelV3({
    doStream: {
      stream: convertArrayToReadableStream([
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "Reading." },
        { type: "text-end", id: "t" },
        { type: "tool-input-start", id: "call_9", toolName: "read_file" },
        { type: "tool-input-delta", id: "call_9", delta: '{"path":' },
        { type: "tool-input-delta", id: "call_9", delta: '"x.md"}' },
        { type: "tool-input-end", id: "call_9" },
        { type: "tool-call", toolCallId: "call_9", toolName: "read_file", input: '{"path":"x.md"}' },
        { type: "tool-call", toolCallId: "call_10", toolName: "grep", input: '{"pattern":"a"}' },
        { type: "tool-call", toolCallId: "call_11", toolName: "web_search", input: "{}", providerExecuted: true },
        { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_use" }, usage: v3Usage(50, 20) },
      ]),
    },
  });
  const events = [];
  const message = await callModel({
    model: piModel(languageModel),
    context: { messages: [{ role: "user", content: "go", timestamp: 1 }], tools },
    streamFn: aiSdkStreamFn(languageModel),
    onEvent: (event) => events.push(event),
  });
  assert.deepEqual(message.content, [
    { type: "text", text: "Reading." },
    { type: "toolCall", id: "call_9", name: "read_file", arguments: { path: "x.md" } },
    { type: "toolCall", id: "call_10", name: "grep", arguments: { pattern: "a" } },
  ]);
  assert.equal(message.stopReason, "toolUse");
  const kinds = events.filter((e) => e.type === "message_update").map((e) => e.assistantMessageEvent.type);
  assert.deepEqual(kinds, [
    "text_start",
    "text_delta",
    "text_end",
    "toolcall_start",
    "toolcall_delta",
    "toolcall_delta",
    "toolcall_end",
    "toolcall_start",
    "toolcall_end",
  ]);
  const end = events.find((e) => e.type === "message_update" && e.assistantMessageEvent.type === "toolcall_end");
  assert.deepEqual(end.assistantMessageEvent.toolCall, { type: "toolCall", id: "call_9", name: "read_file", arguments: { path: "x.md" } });
});

test("V3: tool calls with finishReason stop still end as toolUse; length stays length", async () => {
  const make = (finishReason) =>
    new MockLanguageModelV3({
      doStream: {
        stream: convertArrayToReadableStream([
          { type: "tool-call", toolCallId: "c", toolName: "t", input: "" },
          { type: "finish", finishReason, usage: v3Usage(1, 1) },
        ]),
      },
    });
  const a = make({ unified: "stop", raw: undefined });
  const first = await callModel({ model: piModel(a), context: { messages: [] }, streamFn: aiSdkStreamFn(a) });
  assert.equal(first.stopReason, "toolUse");
  assert.deepEqual(first.content[0].arguments, {});
  const b = make({ unified: "length", raw: "max_tokens" });
  const second = await callModel({ model: piModel(b), context: { messages: [] }, streamFn: aiSdkStreamFn(b) });
  assert.equal(second.stopReason, "length");
});

test("V3: a rejected doStream, an error part, or finishReason error -> error message", async () => {
  const rejecting = new MockLanguageModelV3({
    doStream: async () => {
      throw new Error("401 invalid x-api-key");
    },
  });
  const a = await callModel({ model: piModel(rejecting), context: { messages: [] }, streamFn: aiSdkStreamFn(rejecting) });
  assert.equal(a.stopReason, "error");
  assert.equal(a.errorMessage, "401 invalid x-api-key");

  const erroring = new MockLanguageModelV3({
    doStream: {
      stream: convertArrayToReadableStream([
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "par" },
        { type: "error", error: { message: "overloaded_error" } },
      ]),
    },
  });
  const b = await callModel({ model: piModel(erroring), context: { messages: [] }, streamFn: aiSdkStreamFn(erroring) });
  assert.equal(b.stopReason, "error");
  assert.match(b.errorMessage, /overloaded_error/);
  assert.deepEqual(b.content, [{ type: "text", text: "par" }], "the partial content is kept");

  const finishError = new MockLanguageModelV3({
    doStream: {
      stream: convertArrayToReadableStream([{ type: "finish", finishReason: { unified: "error", raw: "x" }, usage: v3Usage(1, 0) }]),
    },
  });
  const c = await callModel({ model: piModel(finishError), context: { messages: [] }, streamFn: aiSdkStreamFn(finishError) });
  assert.equal(c.stopReason, "error");
});

test("V3: abort cancels the stream and passes abortSignal to doStream", async () => {
  const controller = new AbortController();
  let cancelled = false;
  const languageModel = new MockLanguageModelV3({
    doStream: async () => ({
      stream: new ReadableStream({
        start(streamController) {
          streamController.enqueue({ type: "text-start", id: "t" });
          streamController.enqueue({ type: "text-delta", id: "t", delta: "slow" });
          // never closes: a provider that keeps the connection open
        },
        cancel() {
          cancelled = true;
        },
      }),
    }),
  });
  const message = await callModel({
    model: piModel(languageModel),
    context: { messages: [] },
    options: { signal: controller.signal },
    streamFn: aiSdkStreamFn(languageModel),
    onEvent: (event) => {
      if (event.type === "message_update" && event.assistantMessageEvent.type === "text_delta") controller.abort();
    },
  });
  assert.equal(message.stopReason, "aborted");
  assert.equal(languageModel.doStreamCalls[0].abortSignal, controller.signal);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(cancelled, true, "the ReadableStream was cancelled");
});

test("V2 (ai@5): string finishReason and flat usage", async () => {
  const languageModel = new MockLanguageModelV2({
    provider: "openai.responses",
    modelId: "gpt-5.4-mini",
    doStream: {
      stream: convertArrayToReadableStreamV2([
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "0" },
        { type: "text-delta", id: "0", delta: "v2 says hi" },
        { type: "text-end", id: "0" },
        { type: "tool-call", toolCallId: "c1", toolName: "read_file", input: '{"path":"z"}' },
        {
          type: "finish",
          finishReason: "tool-calls",
          usage: { inputTokens: 40, outputTokens: 6, totalTokens: 46, cachedInputTokens: 10, reasoningTokens: 2 },
        },
      ]),
    },
  });
  assert.ok(isAiSdkLanguageModel(languageModel));
  const model = piModel(languageModel);
  assert.equal(model.provider, "openai");
  const message = await callModel({ model, context: conversation, streamFn: aiSdkStreamFn(languageModel) });
  assert.deepEqual(message.content, [
    { type: "text", text: "v2 says hi" },
    { type: "toolCall", id: "c1", name: "read_file", arguments: { path: "z" } },
  ]);
  assert.equal(message.stopReason, "toolUse");
  assert.deepEqual(
    [message.usage.input, message.usage.cacheRead, message.usage.output, message.usage.reasoning, message.usage.totalTokens],
    [30, 10, 6, 2, 46],
  );
  const call = languageModel.doStreamCalls[0];
  assert.deepEqual(call.prompt, expectedPrompt);
  assert.deepEqual(call.tools, expectedTools);
});

test("the bridged model drives pi-agent-core's Agent loop (tool call, result, answer)", async () => {
  const { Agent } = await import("@mariozechner/pi-agent-core");
  const languageModel = new MockLanguageModelV3({
    doStream: [
      {
        stream: convertArrayToReadableStream([
          { type: "tool-call", toolCallId: "call_a", toolName: "read_file", input: '{"path":"notes.md"}' },
          { type: "finish", finishReason: { unified: "tool-calls", raw: undefined }, usage: v3Usage(10, 5) },
        ]),
      },
      {
        stream: convertArrayToReadableStream([
          { type: "text-start", id: "1" },
          { type: "text-delta", id: "1", delta: "The notes say hello." },
          { type: "text-end", id: "1" },
          { type: "finish", finishReason: { unified: "stop", raw: undefined }, usage: v3Usage(30, 6) },
        ]),
      },
    ],
  });
  const agent = new Agent({
    initialState: {
      systemPrompt: "sys",
      model: piModel(languageModel),
      tools: [
        {
          ...tools[0],
          label: "read",
          execute: async (_id, params) => ({ content: [{ type: "text", text: `contents of ${params.path}: hello` }], details: {} }),
        },
      ],
    },
    streamFn: aiSdkStreamFn(languageModel),
  });
  await agent.prompt("summarize notes.md");
  const last = agent.state.messages.at(-1);
  assert.equal(last.content[0].text, "The notes say hello.");
  const second = languageModel.doStreamCalls[1].prompt;
  assert.deepEqual(second.at(-2), {
    role: "assistant",
    content: [{ type: "tool-call", toolCallId: "call_a", toolName: "read_file", input: { path: "notes.md" } }],
  });
  assert.deepEqual(second.at(-1), {
    role: "tool",
    content: [
      {
        type: "tool-result",
        toolCallId: "call_a",
        toolName: "read_file",
        output: { type: "text", value: "contents of notes.md: hello" },
      },
    ],
  });
});

test("toAiSdkPrompt: errored turns dropped, orphaned tool calls answered, tool images per version", () => {
  const context = {
    messages: [
      { role: "user", content: "q", timestamp: 1 },
      { role: "assistant", content: [{ type: "text", text: "half" }], stopReason: "error", errorMessage: "x", timestamp: 2 },
      { role: "assistant", content: [{ type: "toolCall", id: "o1", name: "t", arguments: {} }], stopReason: "toolUse", timestamp: 3 },
      { role: "user", content: "continue", timestamp: 4 },
      { role: "assistant", content: [{ type: "toolCall", id: "i1", name: "shot", arguments: {} }], stopReason: "toolUse", timestamp: 5 },
      {
        role: "toolResult",
        toolCallId: "i1",
        toolName: "shot",
        content: [
          { type: "text", text: "see" },
          { type: "image", data: "AAA=", mimeType: "image/png" },
        ],
        isError: false,
        timestamp: 6,
      },
    ],
  };
  const v3 = toAiSdkPrompt(context);
  assert.deepEqual(
    v3.map((m) => m.role),
    ["user", "assistant", "tool", "user", "assistant", "tool"],
  );
  assert.deepEqual(v3[2].content, [
    { type: "tool-result", toolCallId: "o1", toolName: "t", output: { type: "error-text", value: "No result provided" } },
  ]);
  assert.deepEqual(v3[5].content[0].output, {
    type: "content",
    value: [
      { type: "text", text: "see" },
      { type: "file-data", data: "AAA=", mediaType: "image/png" },
    ],
  });
  const v2 = toAiSdkPrompt(context, { version: "v2" });
  assert.deepEqual(v2[5].content[0].output.value[1], { type: "media", data: "AAA=", mediaType: "image/png" });
});

test("provider names and usage mapping helpers", () => {
  assert.equal(piProviderFromAiSdk("openai.responses"), "openai");
  assert.equal(piProviderFromAiSdk("anthropic.messages"), "anthropic");
  assert.equal(piProviderFromAiSdk("google.generative-ai"), "google");
  assert.equal(piProviderFromAiSdk("google.vertex.chat"), "google-vertex");
  assert.equal(piProviderFromAiSdk("mock-provider"), "mock-provider");
  assert.deepEqual(piUsageFromAiSdk(undefined).totalTokens, 0);
  const v3 = piUsageFromAiSdk({ inputTokens: { total: 10 }, outputTokens: { total: undefined, text: 4 } });
  assert.deepEqual([v3.input, v3.output, v3.totalTokens], [10, 4, 14]);
  assert.throws(() => aiSdkStreamFn({}), TypeError);
  assert.throws(() => aiSdkStreamFn({ specificationVersion: "v4", doStream() {} }), /unsupported AI SDK language model specification "v4"/);
});
