// Bridge from a Vercel AI SDK language model (LanguageModelV2 from ai@5, LanguageModelV3 from
// ai@6) to a Pi StreamFn, so `model: openai("gpt-5.4-mini")` works where a Pi Model is expected.
//
// Pi context (systemPrompt, user / assistant / toolResult messages, tools with JSON-Schema
// `parameters`) -> AI SDK call options (`prompt`, `tools`, `maxOutputTokens`, `abortSignal`, ...)
// -> `languageModel.doStream()` -> stream parts -> Pi assistant-message events and final message.
//
// The `ai` package itself is never imported: the model object carries everything we call.
import { AssistantMessageEventStream, zeroUsage } from "./event-stream.mjs";

/** The AI SDK specification versions this bridge speaks. */
export const AI_SDK_SPECIFICATION_VERSIONS = Object.freeze(["v2", "v3"]);

/** Non-enumerable link from a Pi model built by `piModelFromAiSdk` back to its language model. */
export const AI_SDK_LANGUAGE_MODEL = Symbol.for("knap.aiSdkLanguageModel");

/** True for any object shaped like an AI SDK language model (any specification version). */
export function looksLikeAiSdkLanguageModel(value) {
  return (
    value !== null &&
    typeof value === "object" &&
    typeof value.specificationVersion === "string" &&
    typeof value.doStream === "function"
  );
}

/** True for a LanguageModelV2 / LanguageModelV3 object (`specificationVersion` + `doStream`). */
export function isAiSdkLanguageModel(value) {
  return looksLikeAiSdkLanguageModel(value) && AI_SDK_SPECIFICATION_VERSIONS.includes(value.specificationVersion);
}

function assertSupported(languageModel, where) {
  if (isAiSdkLanguageModel(languageModel)) return;
  if (looksLikeAiSdkLanguageModel(languageModel)) {
    throw new Error(
      `caveman agent: unsupported AI SDK language model specification ${JSON.stringify(languageModel.specificationVersion)}; ` +
        `knap bridges LanguageModelV2 (ai@5) and LanguageModelV3 (ai@6)`,
    );
  }
  throw new TypeError(`${where}: expected an AI SDK language model (specificationVersion "v2" or "v3" with doStream)`);
}

/**
 * Map an AI SDK provider string (`"openai.responses"`, `"anthropic.messages"`,
 * `"google.generative-ai"`, `"google.vertex.chat"`, ...) to the Pi provider name used by the
 * catalogs (`openai`, `anthropic`, `google`, `google-vertex`, ...).
 */
export function piProviderFromAiSdk(provider) {
  const text = String(provider ?? "ai-sdk");
  if (text.startsWith("google.vertex")) return "google-vertex";
  if (text.startsWith("azure")) return "azure-openai-responses";
  const head = text.split(".")[0];
  return head === "" ? "ai-sdk" : head;
}

/**
 * A Pi `Model` describing an AI SDK language model: `id` = `modelId`, `provider` from
 * `piProviderFromAiSdk`, `api: "ai-sdk"`. Fields the AI SDK does not expose (name, cost,
 * context window, max tokens, reasoning, input kinds) come from `base` (e.g. the Pi catalog
 * entry for the same provider/id) when given, else conservative defaults (zero cost = unpriced,
 * 128k context, 16,384 max output tokens). The result links back to the language model through
 * the non-enumerable `AI_SDK_LANGUAGE_MODEL` symbol, which `defaultStreamFn` follows.
 */
export function piModelFromAiSdk(languageModel, base) {
  assertSupported(languageModel, "piModelFromAiSdk(languageModel)");
  const model = {
    id: String(languageModel.modelId),
    name: base?.name ?? String(languageModel.modelId),
    api: "ai-sdk",
    provider: piProviderFromAiSdk(languageModel.provider),
    baseUrl: base?.baseUrl ?? "",
    reasoning: base?.reasoning ?? false,
    input: base?.input ? [...base.input] : ["text", "image"],
    cost: base?.cost ? { ...base.cost } : { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: base?.contextWindow ?? 128_000,
    maxTokens: base?.maxTokens ?? 16_384,
  };
  Object.defineProperty(model, AI_SDK_LANGUAGE_MODEL, { value: languageModel, enumerable: false });
  return model;
}

// ---------------------------------------------------------------------------------------------
// Pi context -> AI SDK prompt

function textOf(parts) {
  return parts
    .filter((part) => part?.type === "text")
    .map((part) => part.text)
    .join("\n");
}

function userContent(content) {
  if (typeof content === "string") return [{ type: "text", text: content }];
  const parts = [];
  for (const part of content ?? []) {
    if (part?.type === "text") parts.push({ type: "text", text: part.text });
    else if (part?.type === "image") parts.push({ type: "file", data: part.data, mediaType: part.mimeType });
  }
  return parts;
}

function toolResultOutput(message, version) {
  const content = message.content ?? [];
  const hasImage = content.some((part) => part?.type === "image");
  if (!hasImage) {
    return { type: message.isError ? "error-text" : "text", value: textOf(content) };
  }
  return {
    type: "content",
    value: content.map((part) => {
      if (part?.type === "image") {
        return version === "v2"
          ? { type: "media", data: part.data, mediaType: part.mimeType }
          : { type: "file-data", data: part.data, mediaType: part.mimeType };
      }
      return { type: "text", text: String(part?.text ?? "") };
    }),
  };
}

/**
 * Convert a Pi `Context` to an AI SDK `prompt` (LanguageModelV2/V3 message array).
 * Errored or aborted assistant turns are dropped, consecutive tool results share one `tool`
 * message, and a tool call left without a result gets a synthetic error result (as pi-ai's
 * providers do) so the provider sees a well-formed history.
 */
export function toAiSdkPrompt(context, { version = "v3" } = {}) {
  const prompt = [];
  if (context?.systemPrompt) prompt.push({ role: "system", content: context.systemPrompt });
  let pending = []; // tool calls of the last assistant message still waiting for a result
  let answered = new Set();
  const closePending = () => {
    const missing = pending.filter((call) => !answered.has(call.toolCallId));
    if (missing.length > 0) {
      const parts = missing.map((call) => ({
        type: "tool-result",
        toolCallId: call.toolCallId,
        toolName: call.toolName,
        output: { type: "error-text", value: "No result provided" },
      }));
      const last = prompt.at(-1);
      if (last?.role === "tool") last.content.push(...parts);
      else prompt.push({ role: "tool", content: parts });
    }
    pending = [];
    answered = new Set();
  };
  for (const message of context?.messages ?? []) {
    if (message?.role === "user") {
      closePending();
      prompt.push({ role: "user", content: userContent(message.content) });
    } else if (message?.role === "assistant") {
      closePending();
      if (message.stopReason === "error" || message.stopReason === "aborted") continue;
      const content = [];
      for (const part of message.content ?? []) {
        if (part?.type === "text") {
          if (part.text !== "") content.push({ type: "text", text: part.text });
        } else if (part?.type === "thinking") {
          if (part.thinking && part.thinking.trim() !== "") content.push({ type: "reasoning", text: part.thinking });
        } else if (part?.type === "toolCall") {
          const call = { type: "tool-call", toolCallId: part.id, toolName: part.name, input: part.arguments ?? {} };
          content.push(call);
          pending.push(call);
        }
      }
      if (content.length > 0) prompt.push({ role: "assistant", content });
    } else if (message?.role === "toolResult") {
      answered.add(message.toolCallId);
      const part = {
        type: "tool-result",
        toolCallId: message.toolCallId,
        toolName: message.toolName,
        output: toolResultOutput(message, version),
      };
      const last = prompt.at(-1);
      if (last?.role === "tool") last.content.push(part);
      else prompt.push({ role: "tool", content: [part] });
    }
  }
  return prompt;
}

/** Pi tools (`{name, description, parameters}`) -> AI SDK function tools with plain JSON Schema. */
export function toAiSdkTools(tools) {
  return (tools ?? []).map((tool) => ({
    type: "function",
    name: tool.name,
    description: tool.description,
    // TypeBox schemas carry symbol keys; a JSON round trip leaves the plain JSON Schema.
    inputSchema: JSON.parse(JSON.stringify(tool.parameters ?? { type: "object", properties: {} })),
  }));
}

// ---------------------------------------------------------------------------------------------
// AI SDK stream parts -> Pi events

function num(value) {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** AI SDK usage (V3 nested or V2 flat) -> Pi usage counts (input excludes cache reads/writes). */
export function piUsageFromAiSdk(usage) {
  const result = zeroUsage();
  if (!usage || typeof usage !== "object") return result;
  if (usage.inputTokens !== null && typeof usage.inputTokens === "object") {
    // LanguageModelV3: { inputTokens: {total, noCache, cacheRead, cacheWrite}, outputTokens: {total, text, reasoning} }
    const input = usage.inputTokens;
    const output = usage.outputTokens ?? {};
    result.cacheRead = num(input.cacheRead) ?? 0;
    result.cacheWrite = num(input.cacheWrite) ?? 0;
    result.input = num(input.noCache) ?? Math.max(0, (num(input.total) ?? 0) - result.cacheRead - result.cacheWrite);
    result.output = num(output.total) ?? num(output.text) ?? 0;
    const reasoning = num(output.reasoning);
    if (reasoning !== undefined) result.reasoning = reasoning;
  } else {
    // LanguageModelV2: { inputTokens, outputTokens, totalTokens, reasoningTokens?, cachedInputTokens? }
    result.cacheRead = num(usage.cachedInputTokens) ?? 0;
    result.input = Math.max(0, (num(usage.inputTokens) ?? 0) - result.cacheRead);
    result.output = num(usage.outputTokens) ?? 0;
    const reasoning = num(usage.reasoningTokens);
    if (reasoning !== undefined) result.reasoning = reasoning;
  }
  result.totalTokens = result.input + result.output + result.cacheRead + result.cacheWrite;
  return result;
}

function applyCost(model, usage) {
  const cost = model?.cost ?? {};
  const rate = (value) => (typeof value === "number" && Number.isFinite(value) ? value : 0) / 1_000_000;
  usage.cost.input = rate(cost.input) * usage.input;
  usage.cost.output = rate(cost.output) * usage.output;
  usage.cost.cacheRead = rate(cost.cacheRead) * usage.cacheRead;
  usage.cost.cacheWrite = rate(cost.cacheWrite) * usage.cacheWrite;
  usage.cost.total = usage.cost.input + usage.cost.output + usage.cost.cacheRead + usage.cost.cacheWrite;
}

function finishReasonOf(reason) {
  const unified = typeof reason === "string" ? reason : reason?.unified;
  switch (unified) {
    case "tool-calls":
      return "toolUse";
    case "length":
      return "length";
    case "error":
      return "error";
    default:
      return "stop";
  }
}

function errorText(error) {
  if (error instanceof Error) return error.message;
  if (typeof error === "string") return error;
  try {
    return JSON.stringify(error);
  } catch {
    return String(error);
  }
}

function parseToolInput(input) {
  if (input !== null && typeof input === "object") return input;
  if (typeof input !== "string" || input.trim() === "") return {};
  try {
    const parsed = JSON.parse(input);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

function abortedError() {
  return new Error("Request was aborted");
}

/** Resolves never; rejects when `signal` aborts. Returns [promise, dispose]. */
function abortRace(signal) {
  if (!signal) return [new Promise(() => {}), () => {}];
  let onAbort;
  const promise = new Promise((_, reject) => {
    onAbort = () => reject(abortedError());
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  promise.catch(() => {});
  return [promise, () => signal.removeEventListener("abort", onAbort)];
}

function callOptionsFor(context, options, version) {
  const callOptions = { prompt: toAiSdkPrompt(context, { version }) };
  const tools = toAiSdkTools(context?.tools);
  if (tools.length > 0) {
    callOptions.tools = tools;
    callOptions.toolChoice = { type: "auto" };
  }
  if (options?.maxTokens !== undefined) callOptions.maxOutputTokens = options.maxTokens;
  if (options?.temperature !== undefined) callOptions.temperature = options.temperature;
  if (options?.signal !== undefined) callOptions.abortSignal = options.signal;
  if (options?.headers !== undefined) callOptions.headers = { ...options.headers };
  if (options?.providerOptions !== undefined) callOptions.providerOptions = options.providerOptions;
  callOptions.includeRawChunks = false;
  return callOptions;
}

async function pump(languageModel, model, context, options, stream, output) {
  const version = languageModel.specificationVersion;
  const signal = options?.signal;
  const [aborted, disposeAbort] = abortRace(signal);
  let reader;
  let started = false;
  const start = () => {
    if (!started) {
      started = true;
      stream.push({ type: "start", partial: output });
    }
  };
  const byKey = new Map(); // "text:<id>" | "thinking:<id>" | "tool:<id>" -> content index
  const blockFor = (kind, id, make, startType) => {
    const key = `${kind}:${id}`;
    let index = byKey.get(key);
    if (index === undefined) {
      output.content.push(make());
      index = output.content.length - 1;
      byKey.set(key, index);
      stream.push({ type: startType, contentIndex: index, partial: output });
    }
    return index;
  };
  const toolArgsText = new Map(); // content index -> streamed JSON text
  let providerError;
  try {
    if (signal?.aborted) throw abortedError();
    const pending = Promise.resolve(languageModel.doStream(callOptionsFor(context, options, version)));
    const result = await Promise.race([pending, aborted]).catch((error) => {
      // Aborted while doStream was pending: cancel its stream whenever it arrives.
      if (signal?.aborted) pending.then((late) => late?.stream?.cancel?.().catch(() => {}), () => {});
      throw error;
    });
    if (!result || typeof result.stream?.getReader !== "function") {
      throw new Error("AI SDK doStream() returned no ReadableStream");
    }
    start();
    reader = result.stream.getReader();
    let finished = false;
    while (!finished) {
      const { value: part, done } = await Promise.race([reader.read(), aborted]);
      if (done) break;
      switch (part?.type) {
        case "text-start":
          blockFor("text", part.id, () => ({ type: "text", text: "" }), "text_start");
          break;
        case "text-delta": {
          const index = blockFor("text", part.id, () => ({ type: "text", text: "" }), "text_start");
          const delta = part.delta ?? part.textDelta ?? "";
          output.content[index].text += delta;
          stream.push({ type: "text_delta", contentIndex: index, delta, partial: output });
          break;
        }
        case "text-end": {
          const index = byKey.get(`text:${part.id}`);
          if (index !== undefined) {
            stream.push({ type: "text_end", contentIndex: index, content: output.content[index].text, partial: output });
          }
          break;
        }
        case "reasoning-start":
          blockFor("thinking", part.id, () => ({ type: "thinking", thinking: "" }), "thinking_start");
          break;
        case "reasoning-delta": {
          const index = blockFor("thinking", part.id, () => ({ type: "thinking", thinking: "" }), "thinking_start");
          const delta = part.delta ?? "";
          output.content[index].thinking += delta;
          stream.push({ type: "thinking_delta", contentIndex: index, delta, partial: output });
          break;
        }
        case "reasoning-end": {
          const index = byKey.get(`thinking:${part.id}`);
          if (index !== undefined) {
            stream.push({
              type: "thinking_end",
              contentIndex: index,
              content: output.content[index].thinking,
              partial: output,
            });
          }
          break;
        }
        case "tool-input-start":
          if (part.providerExecuted) break;
          blockFor(
            "tool",
            part.id,
            () => ({ type: "toolCall", id: part.id, name: part.toolName, arguments: {} }),
            "toolcall_start",
          );
          break;
        case "tool-input-delta": {
          const index = byKey.get(`tool:${part.id}`);
          if (index === undefined) break;
          toolArgsText.set(index, (toolArgsText.get(index) ?? "") + (part.delta ?? ""));
          stream.push({ type: "toolcall_delta", contentIndex: index, delta: part.delta ?? "", partial: output });
          break;
        }
        case "tool-call": {
          if (part.providerExecuted) break;
          const index = blockFor(
            "tool",
            part.toolCallId,
            () => ({ type: "toolCall", id: part.toolCallId, name: part.toolName, arguments: {} }),
            "toolcall_start",
          );
          const block = output.content[index];
          block.name = part.toolName;
          block.arguments = parseToolInput(part.input ?? part.args);
          toolArgsText.delete(index);
          stream.push({ type: "toolcall_end", contentIndex: index, toolCall: block, partial: output });
          break;
        }
        case "response-metadata":
          if (typeof part.id === "string") output.responseId = part.id;
          if (typeof part.modelId === "string") output.responseModel = part.modelId;
          break;
        case "finish": {
          const usage = piUsageFromAiSdk(part.usage);
          applyCost(model, usage);
          output.usage = usage;
          output.stopReason = finishReasonOf(part.finishReason);
          if (output.stopReason === "error") providerError = "the model finished with reason \"error\"";
          finished = true;
          break;
        }
        case "error":
          providerError = errorText(part.error);
          finished = true;
          break;
        default:
          // stream-start, raw, source, file, tool-result, tool-approval-request: nothing to map.
          break;
      }
    }
    if (signal?.aborted) throw abortedError();
    if (providerError !== undefined) throw new Error(providerError);
    // Tool inputs that streamed but never got a closing `tool-call` part.
    for (const [index, text] of toolArgsText) {
      const block = output.content[index];
      block.arguments = parseToolInput(text);
      stream.push({ type: "toolcall_end", contentIndex: index, toolCall: block, partial: output });
    }
    if (output.stopReason === "stop" && output.content.some((part) => part.type === "toolCall")) {
      output.stopReason = "toolUse";
    }
    stream.push({ type: "done", reason: output.stopReason, message: output });
    stream.end();
  } catch (error) {
    output.stopReason = signal?.aborted ? "aborted" : "error";
    output.errorMessage = signal?.aborted ? "Request was aborted" : errorText(error);
    stream.push({ type: "error", reason: output.stopReason, error: output });
    stream.end();
  } finally {
    disposeAbort();
    if (reader) reader.cancel().catch(() => {});
  }
}

/**
 * A Pi `StreamFn` backed by an AI SDK language model. Calling it returns a Pi
 * `AssistantMessageEventStream` at once; the `doStream` call happens on the next tick. Failures
 * (a rejected `doStream`, an `error` part, `finishReason: "error"`) end the stream with an `error`
 * event whose message has `stopReason: "error"` (or `"aborted"` after `options.signal` aborts) and
 * `errorMessage`, as pi-ai's own providers do.
 */
export function aiSdkStreamFn(languageModel) {
  assertSupported(languageModel, "aiSdkStreamFn(languageModel)");
  return function aiSdkStream(model, context, options) {
    const stream = new AssistantMessageEventStream();
    const output = {
      role: "assistant",
      content: [],
      api: model?.api ?? "ai-sdk",
      provider: model?.provider ?? piProviderFromAiSdk(languageModel.provider),
      model: model?.id ?? String(languageModel.modelId),
      usage: zeroUsage(),
      stopReason: "stop",
      timestamp: Date.now(),
    };
    queueMicrotask(() => {
      pump(languageModel, model, context, options, stream, output);
    });
    return stream;
  };
}
