// `@caveman-ai/agent/compaction`.
export * from "../compaction.mjs";
