// `@caveman-ai/agent/memory` (typings): the reference's 43 names, plus knap's SqlMemoryStorage.
export {
  MemoryEngine, createMemoryEngine, createFileMemoryAdapter, createInMemoryMemoryStorage, createSparseEmbeddingAdapter,
  openAICompatibleMemoryEmbedding, completionMemorySidecar, createMemoryWorkflow, emptyMemoryState, cosine, packVector, SqlMemoryStorage,
} from "../memory.mjs";
export type {
  CreateMemoryEngineOptions, OpenAICompatibleMemoryEmbeddingOptions, CompletionMemorySidecarOptions, MemoryAmbientOptions, MemoryDraft,
  MemoryEdge, MemoryEmbeddingAdapter, MemoryHit, MemoryKind, MemoryRecall, MemoryRecord, MemoryRelation, MemoryRememberInput,
  MemoryRuntimeConfig, MemoryScope, MemorySearchOptions, MemorySessionHit, MemorySidecarAdapter, MemorySource, MemoryState,
  MemoryStorageAdapter, MemoryTurn, MemoryTurnInput, MemoryVector,
} from "../memory.mjs";
export type {
  MemoryStoreConfig, MemoryCompletionRequest, MemoryConsolidationInput, MemoryExtractionInput, MemoryReviewInput, MemoryReviewResult,
} from "../reference-types.mjs";
export { memory, memoryTTLMilliseconds } from "../index.mjs";
