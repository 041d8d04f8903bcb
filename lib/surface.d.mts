// Typings of the root's smaller exports (receipts, input, canonical JSON, durable summaries,
// controllers, definition extras) and of the entry points that throw `cave_*_unsupported`.
import type { AgentDefinition, AgentOutput, RunOptions, RunReceipt, RunResult, AgentInput } from "./index.d.mts";

export declare const AGENT_RUN_RECEIPT_SCHEMA: "caveman.agent.run-receipt.v1";
export declare function defineRunReceipt(value: unknown): RunReceipt;
export declare const validateRunReceipt: typeof defineRunReceipt;
export interface ReceiptPrintCall {
  provider: string; model: string; inputTokens: number; outputTokens: number; cacheReadTokens: number;
  cacheWriteTokens: number; reasoningTokens: number; unpriced: boolean;
}
export interface ReceiptLike {
  calls: readonly ReceiptPrintCall[]; subagents?: readonly ReceiptLike[]; totalEstimatedUsd: number; unpriced: boolean;
  stopReason: string; denomination: "usd" | "tokens" | "none"; max?: number; spent?: number; capBreached?: boolean;
  resume?: RunReceipt["resume"]; mode?: "optimized" | "observe-only"; durationMs?: number; receiptPath?: string;
}
export declare function renderReceipt(receipt: ReceiptLike): string;

export type FiniteJSON = null | boolean | number | string | readonly FiniteJSON[] | { readonly [key: string]: FiniteJSON };
export interface AgentInputURLSource { readonly type: "url"; readonly url: string }
export interface AgentInputBase64Source { readonly type: "base64"; readonly data: string }
export type AgentInputSource = AgentInputURLSource | AgentInputBase64Source;
export interface AgentTextInputPart { readonly type: "text"; readonly text: string }
export interface AgentImageInputPart { readonly type: "image"; readonly mimeType: string; readonly source: AgentInputSource }
export interface AgentAudioInputPart { readonly type: "audio"; readonly mimeType: string; readonly source: AgentInputSource }
export interface AgentFileInputPart { readonly type: "file"; readonly mimeType: string; readonly source: AgentInputSource; readonly name?: string }
export interface AgentOpaqueInputPart { readonly type: "opaque"; readonly provider: string; readonly value: FiniteJSON }
export type AgentInputPart = AgentTextInputPart | AgentImageInputPart | AgentAudioInputPart | AgentFileInputPart | AgentOpaqueInputPart;
export interface NormalizedAgentInput {
  readonly parts: readonly AgentInputPart[]; readonly textBytes: number; readonly base64Bytes: number; readonly remoteReferences: number;
}
export interface AgentInputEncoder<Output = unknown> {
  readonly id: string;
  supports(part: AgentInputPart): boolean;
  encode(input: NormalizedAgentInput, signal?: AbortSignal): Output | Promise<Output>;
}
export declare const AGENT_INPUT_MAX_PARTS: 64;
export declare const AGENT_INPUT_MAX_TEXT_BYTES: number;
export declare const AGENT_INPUT_MAX_BASE64_BYTES_PER_PART: number;
export declare const AGENT_INPUT_MAX_BASE64_BYTES_TOTAL: number;
export declare const AGENT_INPUT_MAX_URL_LENGTH: 8192;
export declare const AGENT_INPUT_MAX_MIME_LENGTH: 127;
export declare const AGENT_INPUT_MAX_FILE_NAME_LENGTH: 255;
export declare function normalizeAgentInput(input: AgentInput | string | readonly AgentInputPart[]): NormalizedAgentInput;
export declare function defineAgentInputEncoder<Output>(encoder: AgentInputEncoder<Output>): AgentInputEncoder<Output>;
export declare function encodeAgentInput<Output>(input: string | readonly AgentInputPart[], encoder: AgentInputEncoder<Output>, signal?: AbortSignal): Promise<Output>;

export declare function sha256(value: Uint8Array | string): string;
export declare function stableStringify(value: unknown): string;

export type DurableRunSummary =
  | { status: "missing" }
  | { status: "pending"; runId: string; agentId: string; input: unknown; startedAt: string; attempts: number; cancelRequested?: { reason: string; at: string }; wakeAt?: string; sleepReason?: string }
  | { status: "completed"; runId: string; agentId: string; result: RunResult; settledAt: string }
  | { status: "failed"; runId: string; agentId: string; code: string; message: string; receipt: RunReceipt; settledAt: string };
export declare function durableRunSummary(lines: readonly string[]): DurableRunSummary;
export declare function durableInputIsReplayable(input: string): boolean;

export interface AgentRunControllerState { readonly queued: number; readonly heldAfterInterrupt: boolean }
export declare class AgentRunController {
  get state(): AgentRunControllerState;
  subscribe(listener: (state: AgentRunControllerState) => void): () => void;
  steer(text: string): void;
  followUp(text: string): void;
  clear(index?: number): void;
  interrupt(): void;
  resume(): void;
}

export type BudgetDenomination = "usd" | "tokens";
export interface BudgetTranche { readonly amount: number; readonly reason: string; readonly atCall: number }
export interface BudgetExhaustionContext {
  readonly denomination: BudgetDenomination; readonly max: number; readonly released: number; readonly spent: number;
  readonly remaining: number; readonly releasable: number; readonly calls: number;
}
export type BudgetExhaustionHandler = (ctx: BudgetExhaustionContext) => Promise<"stop" | { release: number; reason: string }> | "stop" | { release: number; reason: string };
export declare const OUTPUT_CLAMP_FLOOR_TOKENS: 256;
export declare class BudgetController {
  releaseBudget(amount: number, reason: string): BudgetTranche;
  get spent(): number;
  get remaining(): number;
  get released(): number;
  get max(): number;
  get denomination(): BudgetDenomination;
  get tranches(): readonly BudgetTranche[];
}
export declare function createBudgetController(): BudgetController;

export interface ArtifactDefinition {
  readonly kind: "artifact"; readonly strategy: "verbatim" | "json-index" | "page"; readonly maxInlineTokens: number; readonly recovery: "exact_ccr" | "source_ref";
}
export declare function artifact(options?: { strategy?: ArtifactDefinition["strategy"]; maxInlineTokens?: number; recovery?: ArtifactDefinition["recovery"] }): ArtifactDefinition;
export type EvalSplit = "train" | "validation" | "test" | "holdout";
export interface EvalGuardrail { readonly [key: string]: unknown }
export interface EvalDefinition { readonly kind: "eval"; readonly id: string; readonly input: unknown; readonly split: EvalSplit; readonly guardrails: readonly EvalGuardrail[]; readonly [key: string]: unknown }
export declare function evalFixture(options: { id: string; input: unknown; split?: EvalSplit; guardrails?: readonly EvalGuardrail[]; [key: string]: unknown }): EvalDefinition;
export { evalFixture as eval };
export type QualityGrader = ((...args: any[]) => unknown) | { grade(...args: any[]): unknown; readonly id?: string };
export declare function assertQualityGrader<G extends QualityGrader>(grader: G): G;
export interface AgentDefinitionTransform { readonly id: string; apply(definition: AgentDefinition): AgentDefinition }
export declare function applyAgentDefinitionTransforms<D extends AgentDefinition>(definition: D, transforms: readonly AgentDefinitionTransform[]): D;
export declare function verifySandboxConformance(): Promise<boolean>;
export type AnyCaveBuildLock = Record<string, unknown>;
export declare function runLocked<D extends AgentDefinition>(definition: D, input: AgentInput, build: AnyCaveBuildLock, options?: RunOptions): Promise<RunResult<AgentOutput<D>>>;

/** These throw `cave_<area>_unsupported`: they need the Caveman gateway, engine or compiler. */
type Unsupported = (...args: unknown[]) => never;
export declare const compileProfiled: Unsupported, compileProfiledNativePi: Unsupported, executeCompiledPipeline: Unsupported,
  assertProfiledBuildTarget: Unsupported, capabilityManifestFor: Unsupported, nativePiCompilerTarget: Unsupported,
  planNativePiCandidates: Unsupported, createWorkloadProfile: Unsupported, createCompilerWorkloadProfile: Unsupported,
  parseWorkloadProfile: Unsupported, workloadSplitSHA256: Unsupported, normalizeTrajectory: Unsupported,
  parseNormalizedTrajectory: Unsupported, routine: Unsupported, routineOutcomes: Unsupported, createModelBoundary: Unsupported,
  captureModelBoundary: Unsupported, lowerContext: Unsupported, appendRuntimeContextSegment: Unsupported, contextBill: Unsupported,
  contextIRToWire: Unsupported, contextIRFromWire: Unsupported, opaquePayload: Unsupported, createConnect: Unsupported,
  connectEnvironment: Unsupported, executeConnectTool: Unsupported, resolveConnectBinary: Unsupported,
  compareConnectEfficiency: Unsupported, loadAgentDir: Unsupported, composeAgentDir: Unsupported, egressAllowed: Unsupported,
  resolveEgressPolicy: Unsupported;
/** Values of the compiler and the gateway's model boundary: any use of one throws `cave_<area>_unsupported`. */
export declare const PROFILED_COMPILER_SHA256: string, PROFILED_COMPILER_VERSION: string,
  WORKLOAD_PROFILE_SCHEMA_VERSION: number, TRAJECTORY_IR_SCHEMA_VERSION: number,
  MODEL_BOUNDARY_MAX_CONTEXT_STRING_LENGTH: number, MODEL_BOUNDARY_MAX_ID_LENGTH: number,
  MODEL_BOUNDARY_MAX_MIDDLEWARE: number;
export declare const TARGET_CAPABILITY_LATTICE: readonly string[];
export declare const AGENT_DIR_ENTRY: string;
export declare class ConnectRuntime { constructor(...args: unknown[]) }
export { PROGRAMMATIC_TOOL_NAME, programmaticToolInstructions, createProgrammaticToolRuntime } from "./programmatic-tools.mjs";
export declare class ProgrammaticSpeculationScope { constructor(...args: unknown[]) }
export declare const createProgrammaticToolErrorWrapper: Unsupported, programmaticToolMetadata: Unsupported;
export {
  MemoryEngine, createMemoryEngine, createFileMemoryAdapter, createInMemoryMemoryStorage, createSparseEmbeddingAdapter,
  openAICompatibleMemoryEmbedding, completionMemorySidecar, createMemoryWorkflow, emptyMemoryState, cosine, packVector, SqlMemoryStorage,
} from "./memory.mjs";
export type {
  CreateMemoryEngineOptions, OpenAICompatibleMemoryEmbeddingOptions, CompletionMemorySidecarOptions, MemoryAmbientOptions, MemoryDraft,
  MemoryEdge, MemoryEmbeddingAdapter, MemoryHit, MemoryKind, MemoryRecall, MemoryRecord, MemoryRelation, MemoryRememberInput,
  MemoryRuntimeConfig, MemoryScope, MemorySearchOptions, MemorySessionHit, MemorySidecarAdapter, MemorySource, MemoryState,
  MemoryStorageAdapter, MemoryTurn, MemoryTurnInput, MemoryVector,
} from "./memory.mjs";
export type {
  ProgrammaticToolRuntime, ProgrammaticToolStats, ProgrammaticToolInstructionOptions, ProgrammaticSpeculationActivation,
  ProgrammaticSpeculationDispatch, ProgrammaticSpeculationLaunch,
} from "./programmatic-tools.mjs";
export type * from "./reference-types.mjs";
import type { ModelUsage, CompleteModelUsage, ModelUsageAccountingStatus } from "./reference-types.mjs";
/** Checks and freezes one call's usage record (`cave_model_usage_invalid:<field>`). */
export declare function defineModelUsage(value: ModelUsage): Readonly<ModelUsage>;
export declare function modelUsageAccountingStatus(usage: ModelUsage | undefined): ModelUsageAccountingStatus;
/** Throws `cave_model_usage_incomplete` unless input and output tokens are reported. */
export declare function requireCompleteModelUsage(usage: ModelUsage | undefined): Readonly<CompleteModelUsage>;
export declare const SUMMARY_SCHEMA_VERSION: 2;
export interface CompactionOptions {
  maxCompactions?: number;
  keepRecentTokens?: number;
  summaryMaxTokens?: number;
  minYieldTokens?: number;
  headroomCalls?: number;
  pinnedUserTokens?: number;
  preserveFirstUserMessage?: boolean;
  /** The summarizer's model (`"provider/id"` or a model object), used when its context window holds the history; else the working model. */
  summarizerModel?: string | import("./pi-types.mjs").Model | object;
  /** `"new-context"`: roll over to a new context seeded by `newContext` before summarizing. Default `"summarize"`. */
  mode?: "summarize" | "new-context";
  /** With `mode: "new-context"`: persist the closing window, resolve to the seed (a user message) of the next context. */
  newContext?: (input: { readonly messages: readonly object[]; readonly generation: number; readonly agentPath: readonly string[] }) => string | Promise<string>;
}
export type NormalizedCompaction = Readonly<Required<Omit<CompactionOptions, "summarizerModel" | "mode" | "newContext">> & Pick<CompactionOptions, "summarizerModel" | "mode" | "newContext">>;
export declare function normalizeCompaction(options?: CompactionOptions): NormalizedCompaction;
// knap's summary document (schema_version 2; the reference's schema was not available to match).
export type ContextAnchorKind = "file" | "identifier" | "command" | "error" | "url" | "fact";
export interface ContextAnchor { readonly kind: ContextAnchorKind; readonly value: string }
export interface ContextSummary {
  readonly schema_version: 2;
  readonly goal: string;
  readonly state: string;
  readonly decisions?: readonly string[];
  readonly open_items?: readonly string[];
  readonly anchors?: readonly ContextAnchor[];
}
/** A message a summary replaces: `message.<index>`, its role and the sha256 of its JSON. */
export interface ContextSummarySource { readonly id: string; readonly role: string; readonly sha256: string }
export interface ContextSummaryValidation { readonly ok: boolean; readonly missingAnchors: readonly ContextAnchor[]; readonly errors: readonly string[] }
/** The messages (Pi's shape) a summary of `messages` would replace. */
export declare function contextSummarySources(messages: readonly object[], options?: CompactionOptions): ContextSummarySource[];
export declare function latestContextSummary(messages: readonly object[]): ContextSummary | undefined;
/** Throws `cave_context_summary_invalid`. */
export declare function parseContextSummary(text: string): ContextSummary;
export declare function renderSummary(summary: ContextSummary): string;
export declare function summarizationInstruction(previousSummary: ContextSummary | undefined, sources?: readonly ContextSummarySource[]): string;
export declare function validateContextSummaryTransition(previous: ContextSummary | undefined, next: ContextSummary): ContextSummaryValidation;
export declare const evaluateContextSummary: Unsupported, evaluateContextSummaryStability: Unsupported, runContextCompactionHarness: Unsupported;
