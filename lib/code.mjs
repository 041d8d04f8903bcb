// knap/code (`@caveman-ai/agent/code`, `@caveman-ai/coding-agent`): the interactive coding agent.
// A session is observe-only: knap has no Caveman gateway, so turns go straight to the provider.
export {
  createCodingAgent,
  defaultCodingPlan,
  capOutput,
  CODING_RUN_BREAKERS,
  CODING_TOOL_OUTPUT_CAPS,
  OBSERVE_ONLY_BANNER,
  RECOVERABLE_CODING_TRANSFORMS,
} from "./code/agent.mjs";
export { startCodingSession, runCodingTurn, streamCodingTurn, classifyTurnFailure } from "./code/session.mjs";
export { runCodingSession } from "./code/repl.mjs";
export { sessionBill, formatTurnBill, formatSessionBill } from "./code/bill.mjs";
export { proveRecovery, formatRecoveryProof } from "./code/recovery.mjs";
export { summarizeCodingTaskAttempts } from "./code/economics.mjs";
export { codingModelsAtProviderBaseURL } from "./code/provider-base-url.mjs";
export { PROGRAMMATIC_TOOL_NAME, createProgrammaticToolRuntime, programmaticToolInstructions } from "./programmatic-tools.mjs";
export { createCommandSessionRuntime } from "./command-session.mjs";
export { AgentRunController } from "./run-controller.mjs";
