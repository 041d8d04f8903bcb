// knap: the public JS surface of @caveman-ai/agent, over a Rust engine.
export { TOOL_POLICY_TIMEOUT_MS, shellTools, decideToolCall } from "./shell-tools.mjs";
export { localExecutionBackend, httpExecutionBackend } from "./backends.mjs";
export {
  agent,
  tool,
  schema,
  output,
  subagent,
  context,
  file,
  memory,
  memoryTTLMilliseconds,
} from "./definition.mjs";
export { auto, AUTO } from "./models.mjs";
export { run, stream, CavemanRunError, agentStaticContextDiagnostics } from "./run.mjs";
// ObjectDurableStore is a /durable name in the reference, not a root one.
export { DiskDurableStore, SqlDurableStore, HttpDurableStore } from "./durable.mjs";
export { createConversation } from "./conversation.mjs";
export * from "./surface.mjs";
