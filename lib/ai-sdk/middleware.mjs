// Anthropic prompt caching for `wrapLanguageModel`: cache breakpoints on the system prompt, on
// the last message and on the last non-assistant message before it, so a growing conversation
// re-reads its prefix from the cache. (bashkit's version skipped the system prompt, whose
// content is a string in the provider prompt, and changed the caller's messages in place.)

const CACHE = { anthropic: { cacheControl: { type: "ephemeral" } } };

function markLastPart(message) {
  if (!message || !Array.isArray(message.content) || message.content.length === 0) return message;
  const parts = message.content.slice();
  const last = parts.at(-1);
  if (!last || typeof last !== "object") return message;
  parts[parts.length - 1] = { ...last, providerOptions: { ...last.providerOptions, ...CACHE, anthropic: { ...last.providerOptions?.anthropic, ...CACHE.anthropic } } };
  return { ...message, content: parts };
}

function markMessage(message) {
  return { ...message, providerOptions: { ...message.providerOptions, anthropic: { ...message.providerOptions?.anthropic, ...CACHE.anthropic } } };
}

export function applyCacheMarkers(params) {
  const prompt = params?.prompt;
  if (!Array.isArray(prompt) || prompt.length === 0) return params;
  const out = prompt.slice();
  const sys = out.findLastIndex((m) => m.role === "system");
  if (sys !== -1) out[sys] = typeof out[sys].content === "string" ? markMessage(out[sys]) : markLastPart(out[sys]);
  const last = out.length - 1;
  if (out[last].role !== "system") out[last] = markLastPart(out[last]);
  for (let i = last - 1; i >= 0; i--) {
    if (out[i].role !== "assistant" && out[i].role !== "system") {
      out[i] = markLastPart(out[i]);
      break;
    }
  }
  return { ...params, prompt: out };
}

/** For ai@6 (`LanguageModelV3`). */
export const anthropicPromptCacheMiddleware = {
  specificationVersion: "v3",
  transformParams: async ({ params }) => applyCacheMarkers(params),
};

/** For ai@5 (`LanguageModelV2`). */
export const anthropicPromptCacheMiddlewareV2 = {
  middlewareVersion: "v2",
  transformParams: async ({ params }) => applyCacheMarkers(params),
};
