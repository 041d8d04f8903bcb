// `@caveman-ai/agent/model-usage`.
export * from "../model-usage.mjs";
