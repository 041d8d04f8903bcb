// `@caveman-ai/agent/compaction`.
export {
  SUMMARY_SCHEMA_VERSION,
  normalizeCompaction,
  contextSummarySources,
  latestContextSummary,
  parseContextSummary,
  renderSummary,
  summarizationInstruction,
  validateContextSummaryTransition,
  evaluateContextSummary,
  evaluateContextSummaryStability,
  runContextCompactionHarness,
} from "../compaction.mjs";
