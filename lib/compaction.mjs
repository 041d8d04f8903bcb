// `@caveman-ai/agent/compaction`: `normalizeCompaction` (RunBudget.compaction's defaults and
// checks) and the context-summary helpers, over knap-core's compaction engine (the one the kernel
// runs for `budget.onExhausted: "compact"`). The summary is knap's JSON document with
// `schema_version` 2 (the reference's schema was not available to match); the evaluation
// harness helpers throw `cave_compaction_unsupported`.
import { native, codedError } from "./native.mjs";
import { unsupported } from "./unsupported.mjs";

export const SUMMARY_SCHEMA_VERSION = 2;


/**
 * `summarizerModel` and `newContext` stay JS values (a model object, a callback); the core checks
 * everything else and is told a callback is there. Returns `{ core, summarizerModel, newContext }`.
 */
export function splitCompactionOptions(options) {
  if (options === null || typeof options !== "object") throw codedError("cave_compaction_option_invalid", "cave_compaction_option_invalid: budget.compaction must be an object");
  const { summarizerModel, newContext, ...core } = options;
  if (summarizerModel != null && typeof summarizerModel !== "string" && typeof summarizerModel !== "object") {
    throw codedError("cave_compaction_option_invalid", `cave_compaction_option_invalid:summarizerModel: must be a "provider/id" string or a model object, got ${typeof summarizerModel}`);
  }
  if (newContext != null && typeof newContext !== "function") {
    throw codedError("cave_compaction_option_invalid", `cave_compaction_option_invalid:newContext: must be a function ({messages, generation}) => seed string, got ${typeof newContext}`);
  }
  if (newContext != null) core.newContext = true;
  return { core, summarizerModel: summarizerModel ?? undefined, newContext: newContext ?? undefined };
}

/** The compaction options with their defaults; a bad value is `cave_compaction_option_invalid:<key>`. */
export function normalizeCompaction(options = {}) {
  const { core, summarizerModel, newContext } = splitCompactionOptions(options);
  // summarizerModel (a model object or "provider/id") and newContext are carried, not normalized.
  const out = JSON.parse(call(() => native.compactionNormalize(JSON.stringify(core))));
  if (summarizerModel !== undefined) out.summarizerModel = summarizerModel;
  if (newContext !== undefined) out.newContext = newContext;
  return Object.freeze(out);
}

function call(fn) {
  try {
    return fn();
  } catch (error) {
    throw codedError(error.code ?? String(error.message).split(":")[0], error.message);
  }
}

// A missing summary would otherwise surface as napi's argument-conversion error, which has no
// cave_* code.
function requireSummary(summary, where) {
  if (summary === null || typeof summary !== "object") {
    throw codedError("cave_context_summary_invalid", `cave_context_summary_invalid: ${where} needs a summary object (schema_version ${SUMMARY_SCHEMA_VERSION}), got ${summary === null ? "null" : typeof summary}`);
  }
}

const json = (v) => (v === undefined || v === null ? undefined : typeof v === "string" ? v : JSON.stringify(v));

/** The messages a summary of `messages` would replace: `{id, role, sha256}` each. */
export function contextSummarySources(messages, options) {
  const core = options == null ? undefined : JSON.stringify(splitCompactionOptions(options).core);
  return JSON.parse(call(() => native.compactionSources(JSON.stringify(messages), core)));
}

/** The summary in the latest `<cave-context-summary>` user message, or `undefined`. */
export function latestContextSummary(messages) {
  const found = call(() => native.compactionLatestSummary(JSON.stringify(messages)));
  return found == null ? undefined : Object.freeze(JSON.parse(found));
}

/** A summarizer's reply as a summary; throws `cave_context_summary_invalid`. */
export function parseContextSummary(text) {
  return Object.freeze(JSON.parse(call(() => native.compactionParseSummary(String(text)))));
}

/** The user message text that stands for summarized history. */
export function renderSummary(summary) {
  requireSummary(summary, "renderSummary(summary)");
  return call(() => native.compactionRenderSummary(JSON.stringify(summary)));
}

/** The final user message of a summarizer call. */
export function summarizationInstruction(previousSummary, sources = []) {
  return call(() => native.compactionInstruction(json(previousSummary), JSON.stringify(sources)));
}

/** `{ok, missingAnchors, errors}`: a later summary must keep every anchor of the previous one. */
export function validateContextSummaryTransition(previous, next) {
  requireSummary(next, "validateContextSummaryTransition(previous, next)");
  return JSON.parse(call(() => native.compactionValidateTransition(json(previous), JSON.stringify(next))));
}

const WHY = "a summary-evaluation harness, which knap does not have";
export const evaluateContextSummary = unsupported("compaction", "evaluateContextSummary", WHY);
export const evaluateContextSummaryStability = unsupported("compaction", "evaluateContextSummaryStability", WHY);
export const runContextCompactionHarness = unsupported("compaction", "runContextCompactionHarness", WHY);
