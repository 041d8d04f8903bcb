// `@caveman-ai/agent/memory`.
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
} from "../memory.mjs";
export { memory, memoryTTLMilliseconds } from "../definition.mjs";
