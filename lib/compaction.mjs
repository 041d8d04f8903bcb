// `@caveman-ai/agent/compaction`: `normalizeCompaction` (RunBudget.compaction's defaults and
// checks) and the summary schema version. knap's kernel does not compact yet: the summary and
// harness helpers throw `cave_compaction_unsupported`.
import { codedError } from "./native.mjs";
import { unsupported } from "./unsupported.mjs";

export const SUMMARY_SCHEMA_VERSION = 2;

const DEFAULTS = Object.freeze({
  maxCompactions: 1,
  keepRecentTokens: 8_000,
  summaryMaxTokens: 2_048,
  minYieldTokens: 20_000,
  headroomCalls: 3,
  pinnedUserTokens: 20_000,
  preserveFirstUserMessage: true,
});

/** The compaction options with their defaults; a bad value is `cave_compaction_option_invalid`. */
export function normalizeCompaction(options = {}) {
  if (options === null || typeof options !== "object") throw codedError("cave_compaction_option_invalid");
  const out = { ...DEFAULTS };
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue;
    if (key === "preserveFirstUserMessage") {
      if (typeof value !== "boolean") throw codedError("cave_compaction_option_invalid", `cave_compaction_option_invalid:${key}`);
    } else if (key === "summarizerModel") {
      // A Pi model or "provider/id"; resolved by the run.
    } else if (key in DEFAULTS) {
      if (!Number.isSafeInteger(value) || value <= 0) throw codedError("cave_compaction_option_invalid", `cave_compaction_option_invalid:${key}`);
    } else {
      throw codedError("cave_compaction_option_invalid", `cave_compaction_option_invalid:${key}`);
    }
    out[key] = value;
  }
  return Object.freeze(out);
}

const WHY = "knap's kernel compaction, which is not built yet";
export const contextSummarySources = unsupported("compaction", "contextSummarySources", WHY);
export const latestContextSummary = unsupported("compaction", "latestContextSummary", WHY);
export const parseContextSummary = unsupported("compaction", "parseContextSummary", WHY);
export const renderSummary = unsupported("compaction", "renderSummary", WHY);
export const summarizationInstruction = unsupported("compaction", "summarizationInstruction", WHY);
export const validateContextSummaryTransition = unsupported("compaction", "validateContextSummaryTransition", WHY);
export const evaluateContextSummary = unsupported("compaction", "evaluateContextSummary", WHY);
export const evaluateContextSummaryStability = unsupported("compaction", "evaluateContextSummaryStability", WHY);
export const runContextCompactionHarness = unsupported("compaction", "runContextCompactionHarness", WHY);
