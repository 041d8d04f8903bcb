// knap: the public JS surface of @caveman-ai/agent, over a Rust engine.
export { TOOL_POLICY_TIMEOUT_MS, NATIVE_TOOL, localExecutionBackend, shellTools, decideToolCall } from "./shell-tools.mjs";
export { agent, tool, schema, output, subagent, context, file } from "./definition.mjs";
export { auto, AUTO } from "./models.mjs";
export { run, stream, CavemanRunError } from "./run.mjs";
export { DiskDurableStore, SqlDurableStore } from "./durable.mjs";
