// @caveman-ai/coding-agent on knap: the 57 names of knap/code (24 values, the rest types).
import { loadKnap } from "./load.mjs";

const code = await loadKnap("code.mjs", "code");

export const {
  AgentRunController,
  CODING_RUN_BREAKERS,
  CODING_TOOL_OUTPUT_CAPS,
  OBSERVE_ONLY_BANNER,
  PROGRAMMATIC_TOOL_NAME,
  RECOVERABLE_CODING_TRANSFORMS,
  capOutput,
  classifyTurnFailure,
  codingModelsAtProviderBaseURL,
  createCodingAgent,
  createCommandSessionRuntime,
  createProgrammaticToolRuntime,
  defaultCodingPlan,
  formatRecoveryProof,
  formatSessionBill,
  formatTurnBill,
  programmaticToolInstructions,
  proveRecovery,
  runCodingSession,
  runCodingTurn,
  sessionBill,
  startCodingSession,
  streamCodingTurn,
  summarizeCodingTaskAttempts,
} = code;
