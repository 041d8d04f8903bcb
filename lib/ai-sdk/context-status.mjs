// bashkit's context-window status helpers (`getContextStatus`, `contextNeedsAttention`,
// `contextNeedsCompaction`) and `MODEL_CONTEXT_LIMITS`, the latter read from knap's model catalog.
import { native } from "../native.mjs";
import { estimateMessagesTokens } from "./messages.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";

/** bashkit 0.7.1's `ContextStatusConfig`. */
export const CONTEXT_STATUS_CONFIG_KEYS = ["elevatedThreshold", "highThreshold", "criticalThreshold", "highGuidance", "criticalGuidance", "knownTokenCount"];

const STATIC_LIMITS = {
  "claude-opus-4-5": 200_000,
  "claude-sonnet-4-5": 200_000,
  "claude-haiku-4": 200_000,
  "gpt-4o": 128_000,
  "gpt-4-turbo": 128_000,
  "gpt-4": 8_192,
  "gpt-3.5-turbo": 16_385,
  "gemini-2.5-pro": 1_000_000,
  "gemini-2.5-flash": 1_000_000,
};

/** Context windows by model id: the catalog's where it has the model, else bashkit's table. */
export const MODEL_CONTEXT_LIMITS = Object.freeze(
  Object.fromEntries(
    Object.entries(STATIC_LIMITS).map(([id, fallback]) => {
      for (const provider of ["anthropic", "openai", "google"]) {
        const w = native.catalogContextWindow(provider, id);
        if (w) return [id, w];
      }
      return [id, fallback];
    }),
  ),
);

const text = (g, status) => (typeof g === "function" ? g(status) : g);

/** `{usedTokens, maxTokens, usagePercent, status, guidance?}` of a message list. */
export function getContextStatus(messages, maxTokens, config = {}) {
  refuseUnknownKeys("getContextStatus", config, CONTEXT_STATUS_CONFIG_KEYS);
  const { elevatedThreshold = 0.5, highThreshold = 0.7, criticalThreshold = 0.85 } = config;
  const usedTokens = config.knownTokenCount ?? estimateMessagesTokens(messages);
  const usagePercent = maxTokens > 0 ? usedTokens / maxTokens : 1;
  const status = usagePercent >= criticalThreshold ? "critical" : usagePercent >= highThreshold ? "high" : usagePercent >= elevatedThreshold ? "elevated" : "comfortable";
  const out = { usedTokens, maxTokens, usagePercent, status };
  const pct = Math.round(usagePercent * 100);
  if (status === "high") {
    out.guidance = text(config.highGuidance, out) ?? `Context usage: ${pct}%. You still have ${100 - pct}% remaining—no need to rush. Continue working thoroughly.`;
  } else if (status === "critical") {
    out.guidance = text(config.criticalGuidance, out) ?? `Context usage: ${pct}%. Consider wrapping up the current task or summarizing progress before continuing.`;
  }
  return out;
}

export const contextNeedsAttention = (status) => status.status === "high" || status.status === "critical";
export const contextNeedsCompaction = (status) => status.status === "critical";
