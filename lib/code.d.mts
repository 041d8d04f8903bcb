// Types of `knap/code` (`@caveman-ai/agent/code`, `@caveman-ai/coding-agent`): the 57 names of
// the reference's coding-agent entry.
import type {
  AgentDefinition,
  Conversation,
  ExecutionBackend,
  MemoryDefinition,
  RunBreakers,
  RunBudget,
  RunOptions,
  RunReceipt,
  AgentInput,
  Models,
} from "./index.mjs";
import type { ProgrammaticToolRuntime, ProgrammaticToolStats } from "./programmatic-tools.mjs";
import type { AgentDefinitionTransform } from "./surface.mjs";

export { PROGRAMMATIC_TOOL_NAME, createProgrammaticToolRuntime, programmaticToolInstructions } from "./programmatic-tools.mjs";
export type { ProgrammaticToolRuntime, ProgrammaticToolStats } from "./programmatic-tools.mjs";

/** What the REPL needs of its streams (a Node `Readable` / `Writable` fits). */
interface InputStream {
  on(event: string, listener: (...args: any[]) => void): unknown;
}
interface OutputStream {
  write(chunk: string): unknown;
  readonly isTTY?: boolean;
}

// ---------- constants ----------

export declare const CODING_TOOL_OUTPUT_CAPS: Readonly<{
  read_file: 24000;
  grep: 16000;
  bash: 24000;
  write_file: 2000;
  edit_file: 2000;
  read_tool_output: 24000;
}>;
export declare const CODING_RUN_BREAKERS: Readonly<{
  repeatedToolCalls: 3;
  repeatedToolCallWindowTurns: 8;
  noProgressTurns: 3;
  maxToolCallsPerTurn: 8;
}>;
export declare const RECOVERABLE_CODING_TRANSFORMS: readonly [
  "caveman.engine.code.v1",
  "caveman.engine.diff.v1",
  "caveman.engine.json.v1",
  "caveman.engine.log.v1",
  "caveman.engine.search-result.v1",
  "caveman.engine.terminal.v1",
  "caveman.engine.text.v1",
];
/** The three-line observe-only notice every session prints on stderr. */
export declare const OBSERVE_ONLY_BANNER: string;

/** The first `maxBytes` bytes and `\n[caveman-code: output capped at <max> of <total> bytes; narrow the request]`. */
export declare function capOutput(text: string, maxBytes: number): string;

// ---------- command sessions ----------

import type { CommandSessionSpillOptions } from "./command-session.mjs";
export type {
  CommandSessionState,
  CommandSessionSpillOptions,
  CommandSessionRuntimeOptions,
  CommandSessionStartOptions,
  CommandSessionStartResult,
  CommandSessionReadOptions,
  CommandSessionReadResult,
  CommandSessionWriteOptions,
  CommandSessionWriteResult,
  CommandSessionSummary,
  CommandSessionRuntime,
} from "./command-session.mjs";
export { createCommandSessionRuntime } from "./command-session.mjs";

// ---------- run controller ----------

export { AgentRunController } from "./surface.mjs";
import type { AgentRunController } from "./surface.mjs";

// ---------- the coding agent ----------

export type CodingToolSet = "full" | "pebble-v1";
export type CodingToolMode = "direct" | "programmatic";
export type SessionMode = "optimized" | "observe-only";


export interface CodingAgentOptions {
  /** Default `process.cwd()`, resolved (not realpath'd). */
  workspace?: string;
  /** `"provider/model"`; else `CAVE_MODEL`; else the one provider credential present. */
  model?: string;
  /** Default `"caveman-code"`. */
  id?: string;
  /** Appended to the built-in coding instructions. */
  instructions?: string;
  outputCaps?: Partial<Record<keyof typeof CODING_TOOL_OUTPUT_CAPS, number>>;
  /** Default `"full"`. */
  toolSet?: CodingToolSet;
  /** Default `"direct"`; `"programmatic"` collapses the tools into one code cell. */
  toolMode?: CodingToolMode;
  /** Programmatic mode only; default true. */
  speculativeToolCalls?: boolean;
  commandSessionSpill?: CommandSessionSpillOptions;
  /** Default: on for the local backend. */
  commandSessions?: boolean;
  /** Default `localExecutionBackend()`. */
  executionBackend?: ExecutionBackend;
  definitionTransforms?: readonly AgentDefinitionTransform[];
  /** Default `"caveman_code"`. */
  programmaticToolName?: string;
  /** `true` → `memory({ namespace: id })`. */
  memory?: boolean | MemoryDefinition;
}

export interface ToolOutputSample {
  label: string;
  text: string;
}

/** An efficiency plan (`CavePlan`). */
interface CavePlan {
  schema_version: 1;
  plan_id: string;
  model: string;
  reasoning: "none";
  segment_routes: Array<{ segment_kind: string; transform_id: string; fallback: "original" }>;
  budgets: Record<string, number>;
  recovery: { namespace: string; tools: string[] };
  fallbacks: { unknown: "original"; transform_error: "original"; not_smaller: "original" };
}

export interface CodingAgent {
  readonly definition: AgentDefinition;
  readonly plan: CavePlan;
  readonly workspace: string;
  readonly modelID: string;
  readonly toolMode: CodingToolMode;
  /** Programmatic mode only. */
  readonly programmaticTools?: ProgrammaticToolRuntime;
  /** The four largest outputs of read_file, grep and bash so far (live). */
  readonly samples: ToolOutputSample[];
  /** Kills live command sessions (memoized). */
  close(): Promise<void>;
}

/** Throws `caveman-code: …` model/credential errors, `coding_tool_set_invalid:<v>`, `coding_tool_mode_invalid:<v>`. */
export declare function createCodingAgent(options?: CodingAgentOptions): CodingAgent;
export declare function defaultCodingPlan(modelID: string, namespace: string): CavePlan;

// ---------- sessions and turns ----------

export interface CodingSessionOptions {
  conversation?: Conversation;
  cave?: "auto" | "off";
  gatewayURL?: string;
  engineBin?: string;
  workflow?: string;
  cacheRetention?: "none" | "short" | "long";
  maxCostUsd?: number;
  budget?: RunBudget;
  modelRouter?: (input: any) => unknown;
  breakers?: RunBreakers;
  onNotice?: (line: string) => void;
  fetch?: typeof fetch;
  ensureRuntime?: boolean;
  memory?: Record<string, unknown>;
}

/** What turn and session bills both carry. */
interface BillCounts {
  mode: SessionMode;
  transformedTokensBefore: number;
  transformedTokensAfter: number;
  tokensSavedInferred: number;
  tokensBasis: string;
  transformIDs: string[];
  transformFailures: string[];
  usageBasis: "provider_reported" | "unavailable";
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  cacheInputTokenHitRatio: number | null;
  cacheHitTarget: number;
  cacheHitTargetMet: boolean | null;
  costUsd: number;
  priceBasis: "public_catalog" | "unpriced";
}

export interface TurnBill extends BillCounts {
  turn: number;
  provider: string;
  model: string;
  contextBill: Record<string, number>;
  recoveryResolved: boolean;
  latencyMs: number;
}

export interface SessionBill extends BillCounts {
  turns: number;
}

export interface TurnRecord {
  input: AgentInput;
  text: string;
  toolCalls: string[];
  bill: TurnBill;
  degraded: boolean;
  receipt: RunReceipt;
}

export interface CodingSession {
  readonly agent: CodingAgent;
  readonly conversation: Conversation;
  readonly options: CodingSessionOptions;
  readonly gatewayURL: string;
  readonly route: { readonly useGateway: boolean; readonly providerBilling?: "managed" | "byok" | "unknown" };
  mode: SessionMode;
  readonly notices: string[];
  readonly turns: TurnRecord[];
  proofShown: boolean;
}

export declare function startCodingSession(agent: CodingAgent, options?: CodingSessionOptions): Promise<CodingSession>;
export declare function runCodingTurn(session: CodingSession, input: AgentInput, overrides?: RunOptions): Promise<TurnRecord>;
export declare function classifyTurnFailure(error: unknown): "degrade_to_observe_only" | "fatal";

/** A Pebble v1 turn event (`{ v, seq, ts, sessionId, kind, … }`), frozen. */
interface TurnEvent {
  readonly v: number;
  readonly seq: number;
  readonly ts: string;
  readonly sessionId: string;
  readonly kind: "turn.start" | "queue.changed" | "delta.text" | "delta.thinking" | "usage" | "tool.start" | "tool.update" | "tool.end" | "turn.end" | "error";
  readonly [key: string]: unknown;
}
export interface FailedStreamingTurn {
  failed: true;
  receipt: RunReceipt;
}
export type StreamingCodingTurnResult = TurnRecord | FailedStreamingTurn | undefined;
export interface StreamingCodingTurnOptions {
  overrides?: RunOptions;
  controller?: AgentRunController;
}
export declare function streamCodingTurn(
  session: CodingSession,
  input: AgentInput,
  options?: StreamingCodingTurnOptions,
): AsyncGenerator<TurnEvent, StreamingCodingTurnResult, unknown>;

export interface CodingSessionRunOptions extends CodingSessionOptions {
  /** A given agent is not closed by the session. */
  agent?: CodingAgent;
  /** Builds an agent the session owns (and closes). */
  agentOptions?: CodingAgentOptions;
  input?: InputStream;
  output?: OutputStream;
  notice?: OutputStream;
  runOverrides?: RunOptions;
}
/** The interactive prompt loop; resolves with the session bill. */
export declare function runCodingSession(options?: CodingSessionRunOptions): Promise<SessionBill>;

// ---------- bills ----------

export declare function sessionBill(session: CodingSession): SessionBill;
export declare function formatTurnBill(bill: TurnBill, sessionSaved: number): string[];
export declare function formatSessionBill(bill: SessionBill): string[];

// ---------- recovery ----------

export interface CodingRecoveryProof {
  transformID: string;
  outcome: "recovered" | "not_smaller" | "mismatch";
  handle?: string;
  originalSHA256: string;
  recoveredSHA256?: string;
  originalBytes: number;
  compressedBytes?: number;
  tokensBefore?: number;
  tokensAfter?: number;
  segment: string;
}
export declare function proveRecovery(session: CodingSession): Promise<CodingRecoveryProof>;
export declare function formatRecoveryProof(proof: CodingRecoveryProof): string;

// ---------- other ----------

/** A catalog whose models of `modelID`'s provider use `rawBaseURL`. */
export declare function codingModelsAtProviderBaseURL(modelID: string, rawBaseURL: string, source?: Models): Models;

export type CodingTaskPriceBasis = "provider_invoice" | "public_catalog" | "unpriced";
export interface CodingTaskAttemptEvidence {
  taskId: string;
  attemptId: string;
  provider: string;
  model: string;
  completed: boolean;
  completionBasis: "external_verifier" | "missing";
  costUsd: number | null;
  priceBasis: CodingTaskPriceBasis;
  tokens: number | null;
  usageBasis: "provider_reported" | "unavailable";
}
export interface CodingTaskEconomicsOptions {
  expectedAttempts?: number;
}
export interface CodingTaskEconomics {
  readonly status: "incomplete_evidence" | "no_completed_tasks" | "complete";
  readonly attempts: number;
  readonly expectedAttempts?: number;
  readonly completedTasks: number;
  readonly totalCostUsd: number;
  readonly totalTokens: number;
  readonly priceBasis: CodingTaskPriceBasis | "mixed";
  readonly costPerCompletedTaskUsd: number | null;
  readonly issues: readonly (
    | "no_attempts"
    | "attempt_cardinality_mismatch"
    | "attempt_identity_missing"
    | "attempt_identity_duplicate"
    | "runtime_identity_missing"
    | "runtime_identity_drift"
    | "completion_evidence_missing"
    | "cost_evidence_missing"
    | "usage_evidence_missing"
    | "price_basis_mixed"
  )[];
}
export declare function summarizeCodingTaskAttempts(
  attempts: readonly CodingTaskAttemptEvidence[],
  options?: CodingTaskEconomicsOptions,
): CodingTaskEconomics;
