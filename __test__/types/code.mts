// Compiled by types.test.mjs: the seed's coding-agent example and every one of the 57 names of
// knap/code type-check.
import { createCodingAgent, runCodingSession } from "knap/code";
import type * as Code from "knap/code";
import {
  AgentRunController,
  CODING_RUN_BREAKERS,
  CODING_TOOL_OUTPUT_CAPS,
  OBSERVE_ONLY_BANNER,
  PROGRAMMATIC_TOOL_NAME,
  RECOVERABLE_CODING_TRANSFORMS,
  capOutput,
  classifyTurnFailure,
  codingModelsAtProviderBaseURL,
  createCommandSessionRuntime,
  createProgrammaticToolRuntime,
  defaultCodingPlan,
  formatRecoveryProof,
  formatSessionBill,
  formatTurnBill,
  programmaticToolInstructions,
  proveRecovery,
  runCodingTurn,
  sessionBill,
  startCodingSession,
  streamCodingTurn,
  summarizeCodingTaskAttempts,
} from "knap/code";
import { CODING_AGENT_HELP, parseCodingAgentCLIArgs, main as cliMain } from "knap/code/cli";
import type { CodingAgentCLIOptions } from "knap/code/cli";

declare const process: { cwd(): string };

export async function main(options: { workspace?: string } = {}) {
  const agent = createCodingAgent({ workspace: options.workspace ?? process.cwd() });
  return runCodingSession({ agent, ...options });
}

type Names = [
  Code.CodingAgent,
  Code.CodingAgentOptions,
  Code.CodingRecoveryProof,
  Code.CodingSession,
  Code.CodingSessionOptions,
  Code.CodingSessionRunOptions,
  Code.CodingTaskAttemptEvidence,
  Code.CodingTaskEconomics,
  Code.CodingTaskEconomicsOptions,
  Code.CommandSessionReadOptions,
  Code.CommandSessionReadResult,
  Code.CommandSessionRuntime,
  Code.CommandSessionRuntimeOptions,
  Code.CommandSessionSpillOptions,
  Code.CommandSessionStartOptions,
  Code.CommandSessionStartResult,
  Code.CommandSessionSummary,
  Code.CommandSessionWriteOptions,
  Code.CommandSessionWriteResult,
  Code.FailedStreamingTurn,
  Code.ProgrammaticToolRuntime,
  Code.ProgrammaticToolStats,
  Code.SessionBill,
  Code.StreamingCodingTurnOptions,
  Code.ToolOutputSample,
  Code.TurnBill,
  Code.TurnRecord,
  Code.CodingTaskPriceBasis,
  Code.CodingToolMode,
  Code.CodingToolSet,
  Code.CommandSessionState,
  Code.SessionMode,
  Code.StreamingCodingTurnResult,
];
export type { Names };

export async function everything(): Promise<void> {
  const agent = createCodingAgent({ model: "anthropic/claude-sonnet-4-6", toolMode: "programmatic", outputCaps: { bash: 1000 } });
  const session = await startCodingSession(agent, { cave: "off", onNotice: (line: string) => void line });
  const turn = await runCodingTurn(session, "hi");
  const lines: string[] = formatTurnBill(turn.bill, 0).concat(formatSessionBill(sessionBill(session)));
  for await (const event of streamCodingTurn(session, "again")) void event.kind;
  const proof = await proveRecovery(session);
  const text: string = formatRecoveryProof(proof) + capOutput("x", 1) + OBSERVE_ONLY_BANNER + PROGRAMMATIC_TOOL_NAME;
  const caps: number = CODING_TOOL_OUTPUT_CAPS.bash + CODING_RUN_BREAKERS.maxToolCallsPerTurn;
  const plan = defaultCodingPlan(agent.modelID, "ns");
  const kind: "degrade_to_observe_only" | "fatal" = classifyTurnFailure(new Error("x"));
  const models = codingModelsAtProviderBaseURL(agent.modelID, "http://127.0.0.1:1");
  const runtime = createProgrammaticToolRuntime(agent.definition);
  const stats: Code.ProgrammaticToolStats = runtime.stats();
  const guidance: string = programmaticToolInstructions("extra", { toolName: "js" });
  const economics = summarizeCodingTaskAttempts([], { expectedAttempts: 0 });
  const sessions = createCommandSessionRuntime({ maxSessions: 2 });
  const controller = new AgentRunController();
  const options: CodingAgentCLIOptions = parseCodingAgentCLIArgs(["--help"]);
  const bill = await cliMain(["--help"]);
  void [lines, text, caps, plan, kind, models, stats, guidance, economics.status, sessions.list(), controller.state.queued, RECOVERABLE_CODING_TRANSFORMS[0], options.help, bill?.turns, CODING_AGENT_HELP];
  await agent.close();
}
