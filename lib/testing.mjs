// knap/testing: network-free test doubles with the semantics of `@caveman-ai/agent/testing`.
//
//   run(def, "go", { model: fauxModel(), streamFn: scriptedStream([{ text: "hi" }]) })
//
// Neither function needs `@mariozechner/pi-ai`: the model object mirrors what pi-ai's faux
// provider returns from `getModel()`, and the stream is knap's own pi-compatible event stream.
import { messageStream } from "./event-stream.mjs";

/** The id pi-ai's faux provider gives its default model. */
export const FAUX_DEFAULT_MODEL_ID = "faux-1";
/** The id `fauxModel({ priced: true })` uses: a model the bundled price catalog knows. */
export const FAUX_PRICED_MODEL_ID = "claude-haiku-4-5";

/**
 * A Pi `Model` for tests: pi-ai's faux provider model (`name: "Faux Model"`, base URL
 * `http://localhost:0`, text and image input, zero cost) with `contextWindow: 200_000` and
 * `maxTokens: 4_000`. Unpriced by default (a USD budget fails closed); `priced: true` switches the
 * id to `claude-haiku-4-5`, which the price catalog prices under provider `anthropic`.
 */
export function fauxModel(options = {}) {
  if (options === null || typeof options !== "object") {
    throw new TypeError("fauxModel(options): options must be an object");
  }
  const provider = options.provider ?? "anthropic";
  const id = options.id ?? (options.priced ? FAUX_PRICED_MODEL_ID : FAUX_DEFAULT_MODEL_ID);
  if (typeof provider !== "string" || provider === "") throw new TypeError("fauxModel: provider must be a non-empty string");
  if (typeof id !== "string" || id === "") throw new TypeError("fauxModel: id must be a non-empty string");
  return {
    id,
    name: "Faux Model",
    api: "faux",
    provider,
    baseUrl: "http://localhost:0",
    reasoning: false,
    input: ["text", "image"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: 200_000,
    maxTokens: 4_000,
  };
}

/** Default usage of one scripted turn, with a `usage` partial merged over it. */
function scriptedUsage(partial) {
  const merged = { input: 100, output: 10, cacheRead: 0, cacheWrite: 0, reasoning: 0, ...(partial ?? {}) };
  const cost = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0, ...(partial?.cost ?? {}) };
  if (partial?.cost && partial.cost.total === undefined) {
    cost.total = cost.input + cost.output + cost.cacheRead + cost.cacheWrite;
  }
  const { input, output, cacheRead, cacheWrite, reasoning, totalTokens, cost: _cost, ...rest } = merged;
  return {
    input,
    output,
    cacheRead,
    cacheWrite,
    reasoning,
    totalTokens: totalTokens ?? input + output + cacheRead + cacheWrite,
    cost,
    ...rest,
  };
}

/**
 * A Pi `StreamFn` that answers the n-th provider call with the n-th turn. Each call returns a
 * pi-style `AssistantMessageEventStream` that emits `start` (a partial with `stopReason:
 * "pending"`) and then `done`, on a microtask. A call after the last turn throws (synchronously)
 * `cave_testing_script_exhausted: scripted stream has <N> turn(s); call <M> asked for another`.
 * Calls are numbered from 1, and tool call ids are `scripted-<call>-<index>`.
 */
export function scriptedStream(turns) {
  if (!Array.isArray(turns)) throw new TypeError("scriptedStream(turns): turns must be an array of scripted turns");
  let calls = 0;
  return function scriptedStreamFn(model, _context, options) {
    calls += 1;
    const call = calls;
    if (call > turns.length) {
      const error = new Error(
        `cave_testing_script_exhausted: scripted stream has ${turns.length} turn(s); call ${call} asked for another`,
      );
      throw error;
    }
    const turn = turns[call - 1] ?? {};
    const toolCalls = turn.toolCalls ?? [];
    const content = [];
    if (turn.text !== undefined) content.push({ type: "text", text: turn.text });
    toolCalls.forEach((toolCall, i) => {
      content.push({ type: "toolCall", id: `scripted-${call}-${i}`, name: toolCall.name, arguments: toolCall.args ?? {} });
    });
    const message = {
      role: "assistant",
      content,
      api: model?.api,
      provider: model?.provider,
      model: model?.id,
      usage: scriptedUsage(turn.usage),
      stopReason: toolCalls.length > 0 ? "toolUse" : "stop",
      timestamp: Date.now(),
    };
    return messageStream(message, options?.signal);
  };
}
