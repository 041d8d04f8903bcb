// `@caveman-ai/agent/memory`.
export * from "../memory.mjs";
export { memory, memoryTTLMilliseconds } from "../definition.mjs";
