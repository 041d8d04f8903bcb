// The root's smaller exports (receipts, input, canonical JSON, durable summaries, controllers,
// definition extras) and the entry points that throw `cave_*_unsupported`.
export { AGENT_RUN_RECEIPT_SCHEMA, defineRunReceipt, validateRunReceipt, renderReceipt } from "./receipt.mjs";
export {
  AGENT_INPUT_MAX_PARTS,
  AGENT_INPUT_MAX_TEXT_BYTES,
  AGENT_INPUT_MAX_BASE64_BYTES_PER_PART,
  AGENT_INPUT_MAX_BASE64_BYTES_TOTAL,
  AGENT_INPUT_MAX_URL_LENGTH,
  AGENT_INPUT_MAX_MIME_LENGTH,
  AGENT_INPUT_MAX_FILE_NAME_LENGTH,
  normalizeAgentInput,
  encodeAgentInput,
  defineAgentInputEncoder,
} from "./input.mjs";
export { sha256, stableStringify } from "./canonical.mjs";
export { durableRunSummary, durableInputIsReplayable } from "./durable-summary.mjs";
export { AgentRunController } from "./run-controller.mjs";
export { BudgetController, createBudgetController, OUTPUT_CLAMP_FLOOR_TOKENS } from "./budget-controller.mjs";
export {
  artifact,
  evalFixture,
  evalFixture as eval,
  assertQualityGrader,
  applyAgentDefinitionTransforms,
  verifySandboxConformance,
  runLocked,
} from "./definition-extras.mjs";
export * from "./unsupported.mjs";
export { PROGRAMMATIC_TOOL_NAME, programmaticToolInstructions, createProgrammaticToolRuntime } from "./programmatic-tools.mjs";
export {
  MemoryEngine,
  createMemoryEngine,
  createFileMemoryAdapter,
  createInMemoryMemoryStorage,
  createSparseEmbeddingAdapter,
  openAICompatibleMemoryEmbedding,
  completionMemorySidecar,
  createMemoryWorkflow,
  emptyMemoryState,
  cosine,
  packVector,
  SqlMemoryStorage,
} from "./memory.mjs";
export * from "./compaction.mjs";
