// Type names of the reference's root list (caveman-agent-api.md §1.2) that the rest of knap's
// typings do not declare: the shapes knap implements (model usage, the Standard Schema overloads
// of `tool()`, runtime definitions) and, for the parts whose behaviour needs the Caveman gateway,
// compression engine, compiler or connect runtime (their functions throw `cave_*_unsupported`),
// open records so code that names these types keeps compiling.
import type { JSONSchema, TSchema, Static, ToolEffect, ToolResultPolicy, ToolExecutionContext, ToolDefinition, AgentDefinition, RunOptions } from "./index.mjs";
import type { ContextAnchor, ContextAnchorKind, ContextSummary, NormalizedCompaction } from "./surface.mjs";
import type { MemoryRecord, MemoryTurn, MemoryScope } from "./memory.mjs";

type Open = { readonly [key: string]: unknown };

// ---------- model usage (knap implements these: `defineModelUsage`, …) ----------

export type ModelUsageTokenCount = number;
export type ModelUsageCost = number;
export interface ModelUsage {
  readonly provider?: string;
  readonly model?: string;
  readonly inputTokens?: ModelUsageTokenCount;
  readonly outputTokens?: ModelUsageTokenCount;
  readonly cacheReadTokens?: ModelUsageTokenCount;
  readonly cacheWriteTokens?: ModelUsageTokenCount;
  readonly reasoningTokens?: ModelUsageTokenCount;
  readonly costUsd?: ModelUsageCost;
}
export type CompleteModelUsage = ModelUsage & { readonly inputTokens: ModelUsageTokenCount; readonly outputTokens: ModelUsageTokenCount };
export type ModelUsageAccountingStatus = "complete" | "partial" | "unavailable";

// ---------- tool() option shapes (TypeBox / JSON Schema / Standard Schema v1) ----------

/** A Standard Schema v1 validator (zod 4, valibot, arktype, …). */
export interface StandardToolSchema<TInput = unknown, TOutput = TInput> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => unknown;
    readonly types?: { readonly input: TInput; readonly output: TOutput };
    readonly jsonSchema?: { readonly input?: (options?: unknown) => JSONSchema; readonly output?: (options?: unknown) => JSONSchema };
  };
}
type StandardOutput<S> = S extends StandardToolSchema<any, infer O> ? O : unknown;
interface ToolOptionsBase<TInput, TResult> {
  name: string;
  description: string;
  effect: ToolEffect;
  result?: ToolResultPolicy;
  allowRepeat?: boolean;
  speculative?: boolean;
  timeoutMs?: number;
  schemaSemanticsSHA256?: string;
  nestedTools?: readonly ToolDefinition[];
  speculativeTools?: readonly string[];
  execute: (input: TInput, signal?: AbortSignal, context?: ToolExecutionContext) => TResult | Promise<TResult>;
}
/** `input` a Standard Schema; its output type is the tool's input. */
export interface StandardToolOptions<S extends StandardToolSchema = StandardToolSchema, TResult = unknown> extends ToolOptionsBase<StandardOutput<S>, TResult> {
  input: S;
}
/** `input` a Standard Schema with its JSON Schema given alongside (for validators that cannot export one). */
export interface StandardJSONToolOptions<S extends StandardToolSchema = StandardToolSchema, TResult = unknown> extends StandardToolOptions<S, TResult> {
  inputJSONSchema: JSONSchema;
}
/** A Standard Schema `output` validates the tool's result. */
export interface StandardOutputToolOptions<S extends TSchema = TSchema, O extends StandardToolSchema = StandardToolSchema> extends ToolOptionsBase<Static<S>, StandardOutput<O>> {
  input: S;
  output: O;
}
export interface StandardInputOutputToolOptions<I extends StandardToolSchema = StandardToolSchema, O extends StandardToolSchema = StandardToolSchema> extends ToolOptionsBase<StandardOutput<I>, StandardOutput<O>> {
  input: I;
  output: O;
}
export interface StandardTypeBoxOutputToolOptions<I extends StandardToolSchema = StandardToolSchema, O extends TSchema = TSchema> extends ToolOptionsBase<StandardOutput<I>, Static<O>> {
  input: I;
  output: O;
}
export interface StandardJSONOutputToolOptions<S extends TSchema = TSchema, O extends StandardToolSchema = StandardToolSchema> extends StandardOutputToolOptions<S, O> {
  outputJSONSchema: JSONSchema;
}
export interface StandardJSONTypeBoxOutputToolOptions<I extends StandardToolSchema = StandardToolSchema, O extends TSchema = TSchema> extends StandardTypeBoxOutputToolOptions<I, O> {
  inputJSONSchema: JSONSchema;
}
/** TypeBox (or `schema.*`) input and output. */
export interface TypeBoxOutputToolOptions<I extends TSchema = TSchema, O extends TSchema = TSchema> extends ToolOptionsBase<Static<I>, Static<O>> {
  input: I;
  output: O;
}

/** `subagent()`'s tool runtime. */
export interface SubagentRuntimeDefinition {
  readonly kind: "subagent";
  readonly definition: AgentDefinition;
  readonly maxInputChars: number;
  readonly maxCalls: number;
  readonly maxCostUsd: number;
  readonly maxTokens?: number;
  readonly maxContextTokens: number;
}
/** A tool's `runtime`: a subagent, or a connect tool (which needs the connect runtime). */
export type ToolRuntimeDefinition = SubagentRuntimeDefinition | ConnectToolRuntimeDefinition;

// ---------- compaction evaluation harness (its functions throw cave_compaction_unsupported) ----------

export interface ExpectedContextAnchor { readonly kind: ContextAnchorKind; readonly value: string; readonly required?: boolean }
export interface ContextSummaryRound { readonly round: number; readonly summary: ContextSummary }
export interface ContextSummaryEvaluationInput { readonly summary: ContextSummary; readonly expected: readonly ExpectedContextAnchor[]; readonly previous?: ContextSummary }
export interface ContextSummaryEvaluation { readonly ok: boolean; readonly missing: readonly ExpectedContextAnchor[]; readonly kept: readonly ContextAnchor[]; readonly score: number }
export interface ContextSummaryStability { readonly rounds: readonly ContextSummaryRound[]; readonly lostAnchors: readonly ContextAnchor[]; readonly stable: boolean }
export interface ContextCompactionFixtureRound { readonly messages: readonly object[]; readonly expected: readonly ExpectedContextAnchor[] }
export interface ContextCompactionFixture { readonly id: string; readonly rounds: readonly ContextCompactionFixtureRound[] }
export interface ContextCompactionSummarizerRequest { readonly messages: readonly object[]; readonly instruction: string; readonly previous?: ContextSummary; readonly maxTokens: number }
export type ContextCompactionSummarizer = (request: ContextCompactionSummarizerRequest) => string | Promise<string>;
export interface ContextCompactionHarnessOptions { readonly fixtures: readonly ContextCompactionFixture[]; readonly summarizer: ContextCompactionSummarizer; readonly compaction?: NormalizedCompaction }
export interface ContextCompactionHarnessRoundResult { readonly round: number; readonly evaluation: ContextSummaryEvaluation }
export interface ContextCompactionHarnessResult { readonly fixtures: readonly { readonly id: string; readonly rounds: readonly ContextCompactionHarnessRoundResult[]; readonly stability: ContextSummaryStability }[] }

// ---------- context IR (the compression engine's; its functions throw cave_context_ir_unsupported) ----------

export interface ContextSegment extends Open { readonly id: string; readonly kind: string; readonly text?: string }
export interface RuntimeContextSegment extends ContextSegment {}
export interface ContextIR extends Open { readonly segments: readonly ContextSegment[] }
export interface ContextSegmentWire extends Open { readonly id: string; readonly kind: string }
export interface ContextIRWire extends Open { readonly segments: readonly ContextSegmentWire[] }
export interface LoweredContext extends Open { readonly systemPrompt: string; readonly messages: readonly object[] }

// ---------- compiler, profile, trajectory (the Cave Build lane; cave_compiler_unsupported, …) ----------

export type CompilerTarget = string;
export type ProfiledCompileStatus = string;
export type ProfileToolEffect = ToolEffect;
export interface CompileProfiledInput extends Open {}
export interface CompileProfiledNativePiInput extends CompileProfiledInput {}
export interface CompileProfiledResult extends Open { readonly status: ProfiledCompileStatus }
export interface CompiledPipelineResult extends Open {}
export interface ExecuteCompiledPipelineInput extends Open {}
export interface NativePiCandidatePlanningInput extends Open {}
export interface WorkloadPartition extends Open {}
export interface WorkloadSplit extends Open {}
export interface WorkloadProfile extends Open { readonly schemaVersion: number }
export type TrajectorySource = string;
export interface NormalizeTrajectoryOptions extends Open {}
export interface NormalizedToolActivity extends Open { readonly name: string; readonly effect: ProfileToolEffect }
export interface NormalizedTrajectory extends Open { readonly schemaVersion: number; readonly activities: readonly NormalizedToolActivity[] }

// ---------- model boundary (the gateway's call capture; cave_model_boundary_unsupported) ----------

export type ModelBoundaryRole = "working" | "compaction" | string;
export interface ModelBoundaryContext extends Open { readonly role: ModelBoundaryRole }
export interface PreparedModelBoundaryCall extends Open {}
export type ModelBoundaryPrepare = (context: ModelBoundaryContext) => PreparedModelBoundaryCall | Promise<PreparedModelBoundaryCall>;
export interface ModelBoundarySettled extends Open { readonly usage?: ModelUsage }
export interface ModelBoundaryFailed extends Open { readonly error: unknown }
export interface ModelBoundaryMiddleware extends Open { readonly id: string }
export interface ModelBoundary extends Open {}
export interface CapturedModelBoundaryCall extends Open {}
export interface CapturedModelBoundary extends Open { readonly calls: readonly CapturedModelBoundaryCall[] }

// ---------- connect (the caveman-connect runtime; cave_connect_unsupported) ----------

export interface ConnectSource extends Open {}
export interface NormalizedConnectSource extends ConnectSource {}
export interface ConnectQualityPolicy extends Open {}
export interface NormalizedConnectQualityPolicy extends ConnectQualityPolicy {}
export type ConnectActionBindValue = string | number | boolean | null;
export interface ConnectAction extends Open { readonly name: string }
export interface NormalizedConnectAction extends ConnectAction {}
export interface ConnectConnection extends Open {}
export interface ConnectIntegration extends Open {}
export interface ConnectOptions extends Open {}
export interface ConnectRuntimeOptions extends Open {}
export interface ConnectExecuteOptions extends Open {}
export interface ConnectProcessResult extends Open { readonly exitCode: number; readonly stdout: string; readonly stderr: string }
export type ConnectExecutor = (command: string, args: readonly string[], options?: ConnectExecuteOptions) => Promise<ConnectProcessResult>;
export interface ConnectMcpToolAnnotations extends Open {}
export interface ConnectMcpToolExecution extends Open {}
export interface ConnectMcpToolIcon extends Open {}
export interface ConnectMcpTool extends Open { readonly name: string; readonly description?: string; readonly inputSchema?: JSONSchema; readonly annotations?: ConnectMcpToolAnnotations; readonly icons?: readonly ConnectMcpToolIcon[]; readonly execution?: ConnectMcpToolExecution }
export interface ConnectMcpCallResult extends Open {}
export interface ConnectEfficiencyRun extends Open {}
export interface ConnectEfficiencyComparison extends Open {}
export interface ConnectToolRuntimeDefinition extends Open { readonly kind: "connect" }

// ---------- agent directories and sandbox egress (cave_agent_dir_unsupported, cave_sandbox_egress_unsupported) ----------

export interface AgentDirRunDefaults extends Partial<Pick<RunOptions, "budget" | "breakers" | "rootDir" | "entryPath">> {}
export type AgentDirContextValue = string | { readonly kind: "file"; readonly path: string };
export interface AgentDirModules extends Open {}
export interface AgentDirConfig extends Open { readonly id?: string; readonly run?: AgentDirRunDefaults }
export interface SandboxEgressPolicy { readonly allow: readonly string[] }
export type SandboxEgress = boolean | SandboxEgressPolicy;
export interface ResolvedEgressPolicy { readonly allow: readonly string[]; readonly unbounded: boolean }

// ---------- routines (the build lane's guarded tool substitution; cave_routine_unsupported) ----------

export type RoutineOutcome = "hit" | "miss" | "deopt" | string;
export interface RoutineOutcomeCount { readonly outcome: RoutineOutcome; readonly count: number }

// ---------- durable and memory shapes not declared elsewhere ----------

/** `new HttpDurableStore(options)` (throws cave_durable_store_unsupported in knap). */
export interface HttpDurableStoreOptions { readonly url: string; readonly token?: string; readonly fetch?: typeof fetch; readonly leaseTtlMs?: number }
/** `createFileMemoryAdapter(config)`. */
export interface MemoryStoreConfig { readonly root?: string }
/** What a completion sidecar is sent. */
export interface MemoryCompletionRequest { readonly system: string; readonly prompt: string; readonly signal?: AbortSignal }
/** A sidecar's review of recalled memories for a turn. */
export interface MemoryReviewInput { readonly scope: MemoryScope; readonly query: string; readonly memories: readonly MemoryRecord[] }
export interface MemoryReviewResult { readonly keep: readonly string[]; readonly context?: string }
/** A sidecar's extraction of memories from recent turns. */
export interface MemoryExtractionInput { readonly scope: MemoryScope; readonly turns: readonly MemoryTurn[]; readonly existing: readonly MemoryRecord[] }
/** A sidecar's consolidation of stored memories into drafts. */
export interface MemoryConsolidationInput { readonly scope: MemoryScope; readonly memories: readonly MemoryRecord[] }
export {};
