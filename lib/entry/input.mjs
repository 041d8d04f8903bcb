// `@caveman-ai/agent/input`.
export * from "../input.mjs";
