// `@caveman-ai/agent/model-usage`: one provider call's usage record and whether it is complete
// enough to meter (the receipt's `usageBasis`).
import { codedError } from "./native.mjs";

const TOKEN_KEYS = ["inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "reasoningTokens"];

/** Validates and freezes `{provider, model, inputTokens?, …, costUsd?}`. */
export function defineModelUsage(value) {
  if (!value || typeof value !== "object") throw codedError("cave_model_usage_invalid");
  const out = {};
  for (const key of ["provider", "model"]) {
    if (value[key] !== undefined) {
      if (typeof value[key] !== "string" || value[key] === "") throw codedError("cave_model_usage_invalid", `cave_model_usage_invalid:${key}`);
      out[key] = value[key];
    }
  }
  for (const key of TOKEN_KEYS) {
    const n = value[key];
    if (n === undefined) continue;
    if (!Number.isSafeInteger(n) || n < 0) throw codedError("cave_model_usage_invalid", `cave_model_usage_invalid:${key}`);
    out[key] = n;
  }
  if (out.reasoningTokens !== undefined && out.outputTokens !== undefined && out.reasoningTokens > out.outputTokens) {
    throw codedError("cave_model_usage_invalid", "cave_model_usage_invalid:reasoningTokens");
  }
  if (value.costUsd !== undefined) {
    if (typeof value.costUsd !== "number" || !Number.isFinite(value.costUsd) || value.costUsd < 0) throw codedError("cave_model_usage_invalid", "cave_model_usage_invalid:costUsd");
    out.costUsd = value.costUsd;
  }
  return Object.freeze(out);
}

/** `"complete"` (input and output reported), `"partial"` or `"unavailable"`. */
export function modelUsageAccountingStatus(usage) {
  const u = defineModelUsage(usage ?? {});
  const have = TOKEN_KEYS.filter((k) => u[k] !== undefined);
  if (u.inputTokens !== undefined && u.outputTokens !== undefined) return "complete";
  return have.length ? "partial" : "unavailable";
}

/** Throws `cave_model_usage_incomplete` unless input and output tokens are reported. */
export function requireCompleteModelUsage(usage) {
  const u = defineModelUsage(usage ?? {});
  if (modelUsageAccountingStatus(u) !== "complete") throw codedError("cave_model_usage_incomplete");
  return u;
}
