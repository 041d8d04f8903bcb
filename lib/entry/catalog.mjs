// `@caveman-ai/agent/catalog`.
export * from "../catalog.mjs";
