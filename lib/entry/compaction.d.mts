// `@caveman-ai/agent/compaction` (typings: the same declarations as the root's).
export {
  SUMMARY_SCHEMA_VERSION, normalizeCompaction, contextSummarySources, latestContextSummary, parseContextSummary, renderSummary,
  summarizationInstruction, validateContextSummaryTransition, evaluateContextSummary, evaluateContextSummaryStability, runContextCompactionHarness,
} from "../surface.mjs";
export type {
  CompactionOptions, NormalizedCompaction, ContextAnchor, ContextAnchorKind, ContextSummary, ContextSummarySource, ContextSummaryValidation,
} from "../surface.mjs";
export type {
  ContextCompactionFixture, ContextCompactionFixtureRound, ContextCompactionHarnessOptions, ContextCompactionHarnessResult,
  ContextCompactionHarnessRoundResult, ContextCompactionSummarizer, ContextCompactionSummarizerRequest, ContextSummaryEvaluation,
  ContextSummaryEvaluationInput, ContextSummaryRound, ContextSummaryStability, ExpectedContextAnchor,
} from "../reference-types.mjs";
