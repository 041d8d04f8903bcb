// `@caveman-ai/agent/memory` (typings).
export * from "../memory.mjs";
export { memory, memoryTTLMilliseconds } from "../index.mjs";
export type { MemoryDefinition } from "../index.mjs";
