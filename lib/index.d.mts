// Types of knap's public surface (the `@caveman-ai/agent` names). The generated `index.d.ts`
// types the native binding underneath.
import type { Model, StreamFn, Models, AssistantMessage, Message } from "./pi-types.mjs";
import type { Auto, ModelSpec } from "./models.mjs";

export { auto, AUTO } from "./models.mjs";
export type { Auto } from "./models.mjs";

// ---------- shell tools and policy ----------

export type ToolEffect = "read" | "write" | "idempotent" | "external";
export type ToolResultPolicy = "auto" | "inline" | "page" | "compress" | "exact_ccr";
export type ShellToolName = "bash" | "read_file" | "grep" | "write_file" | "edit_file" | "read_tool_output";

import type { ExecutionBackend } from "./execution-backend.mjs";
export type { ExecRequest, ExecResult, ExecutionBackend } from "./execution-backend.mjs";
export { localExecutionBackend, httpExecutionBackend } from "./execution-backend.mjs";

export interface ShellToolsOptions {
  /** Tools refuse paths outside it (canonicalized on first use). */
  workspace: string;
  /** Where the tools run (default this host); any object with exec/readFile/writeFile. */
  executionBackend?: ExecutionBackend;
  /** Which tools, in this order; default all six. */
  tools?: readonly ShellToolName[];
  /** Raw byte caps per tool (defaults 24,000 / 16,000 / 24,000 / 2,000 / 2,000 / 24,000). */
  outputCaps?: Partial<Record<ShellToolName, number>>;
  /** Interactive bash sessions (local backend only): a runtime from createCommandSessionRuntime(). */
  commandSessions?: import("./command-session.mjs").CommandSessionRuntime;
  /** Observes capped outputs of read_file, grep and bash. */
  onOutput?: (label: string, text: string) => void;
}

export interface NestedToolDispatchOptions {
  readonly signal?: AbortSignal;
  readonly claimSpeculation?: boolean;
}

export interface ToolExecutionContext {
  readonly toolCallId: string;
  /** The container's id in a nested call; equals `toolCallId` at top level. */
  readonly parentToolCallId: string;
  readonly durable?: { readonly idempotencyKey: string; readonly resumed: boolean };
  /** A composite's nested call: admitted, policy-checked and accounted by the kernel; resolves to the nested tool's settled value. */
  dispatch(name: string, input: unknown, options?: NestedToolDispatchOptions): Promise<unknown>;
}

export interface ToolDefinition<TInput = any, TResult = unknown> {
  readonly kind: "tool";
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the input. */
  readonly input: Readonly<Record<string, unknown>>;
  readonly output?: Readonly<Record<string, unknown>>;
  readonly effect: ToolEffect;
  readonly result: ToolResultPolicy;
  readonly allowRepeat?: boolean;
  readonly speculative?: boolean;
  readonly timeoutMs: number;
  readonly runtime?: unknown;
  readonly nestedTools?: readonly ToolDefinition[];
  readonly speculativeTools?: readonly string[];
  execute(input: TInput, signal?: AbortSignal, context?: ToolExecutionContext): Promise<TResult>;
}

/** The tools, plus knap's `close()`: kills every command still running (daemons included); later calls reject with `cave_shell_tools_closed`. */
export type ShellToolSet = ToolDefinition<any, string>[] & { close(): Promise<void> };
export declare function shellTools(options: ShellToolsOptions): ShellToolSet;

export interface ToolCallPolicyInput {
  readonly runId: string;
  readonly agentId: string;
  readonly agentPath: readonly string[];
  readonly toolCallId: string;
  readonly parentToolCallId?: string;
  readonly name: string;
  readonly effect: ToolEffect;
  readonly args: unknown;
}
export type ToolCallDecision = undefined | void | { readonly allow: true } | { readonly deny: string };
export type ToolCallPolicy = (call: ToolCallPolicyInput) => ToolCallDecision | Promise<ToolCallDecision>;
export interface ToolCallDenial {
  readonly block: true;
  readonly reason: string;
}
/** 10,000 ms. */
export declare const TOOL_POLICY_TIMEOUT_MS: number;
export declare function decideToolCall(policy: ToolCallPolicy, input: ToolCallPolicyInput): Promise<ToolCallDenial | undefined>;

// ---------- definitions ----------

export type JSONSchema = Record<string, unknown>;

declare const STATIC: unique symbol;
declare const OPTIONAL_KEY: unique symbol;
/**
 * A JSON Schema that also carries, for the type checker only, the static type of the values it
 * accepts (as TypeBox's `TSchema` does), so `result.output` is typed from an output schema.
 * A plain JSON Schema object is a `TSchema<unknown>`.
 */
export type TSchema<T = unknown> = JSONSchema & { readonly [STATIC]?: T };
/** The static type a schema accepts (`unknown` for a schema without one). */
export type Static<S> = S extends { readonly [STATIC]?: infer T } ? T : unknown;
/** `schema.optional(inner)`: an object property that may be absent. */
export type TOptional<S extends TSchema> = S & { readonly [OPTIONAL_KEY]: true };
type OptionalKeys<P> = { [K in keyof P]: P[K] extends { readonly [OPTIONAL_KEY]: true } ? K : never }[keyof P];
type Flatten<T> = { [K in keyof T]: T[K] } & {};
/** The static type of `schema.object(properties)`. */
export type StaticObject<P extends Record<string, TSchema>> = Flatten<
  { -readonly [K in Exclude<keyof P, OptionalKeys<P>>]: Static<P[K]> } & { -readonly [K in OptionalKeys<P>]?: Static<P[K]> }
>;
export interface SchemaBuilders {
  any(options?: JSONSchema): TSchema<any>;
  string(options?: JSONSchema): TSchema<string>;
  number(options?: JSONSchema): TSchema<number>;
  integer(options?: JSONSchema): TSchema<number>;
  boolean(options?: JSONSchema): TSchema<boolean>;
  null(options?: JSONSchema): TSchema<null>;
  literal<const V extends string | number | boolean | null>(value: V, options?: JSONSchema): TSchema<V>;
  array<S extends TSchema>(items: S, options?: JSONSchema): TSchema<Static<S>[]>;
  union<const S extends readonly TSchema[]>(variants: S, options?: JSONSchema): TSchema<Static<S[number]>>;
  enum<const V extends readonly unknown[]>(values: V, options?: JSONSchema): TSchema<V[number]>;
  optional<S extends TSchema>(inner: S): TOptional<S>;
  object<P extends Record<string, TSchema>>(properties: P, options?: JSONSchema): TSchema<StaticObject<P>>;
}
export declare const schema: SchemaBuilders;

export interface ToolOptions<TInput = any, TResult = unknown> {
  name: string;
  description: string;
  /** JSON Schema (e.g. from `schema.*`) or a Standard Schema (zod 4, …). */
  input: unknown;
  inputJSONSchema?: JSONSchema;
  output?: JSONSchema;
  effect: ToolEffect;
  result?: ToolResultPolicy;
  allowRepeat?: boolean;
  speculative?: boolean;
  /** Default 30,000. */
  timeoutMs?: number;
  schemaSemanticsSHA256?: string;
  runtime?: unknown;
  /** A composite tool: the tools its `execute` may call through `context.dispatch` (flat; no runtime on the composite). */
  nestedTools?: readonly ToolDefinition[];
  /** Names of nested read tools with `speculative: true` whose calls may claim a speculative launch. */
  speculativeTools?: readonly string[];
  execute: (input: TInput, signal?: AbortSignal, context?: ToolExecutionContext) => TResult | Promise<TResult>;
}
export declare function tool<TInput = any, TResult = unknown>(options: ToolOptions<TInput, TResult>): ToolDefinition<TInput, TResult>;

/** The output contract; `S` is the schema's type (`undefined` without one). */
export interface OutputDefinition<S extends TSchema | undefined = TSchema | undefined> {
  readonly kind: "output";
  readonly maxTokens: number;
  readonly schema?: S;
}
export declare function output<S extends TSchema | undefined = undefined>(options: { maxTokens: number; schema?: S }): OutputDefinition<S>;

export interface FileSource {
  readonly kind: "file";
  readonly path: string;
}
export declare function file(path: string): FileSource;

export interface ContextDefinition {
  readonly kind: "context";
  readonly id: string;
  readonly source: unknown;
  readonly [key: string]: unknown;
}
// The reference exports these names without listing their values; knap passes them through.
export type ContextKind = string;
export type ContextStability = string;
export type SafetyClass = string;
export type ContextPriority = string;
export type RecoveryKind = string;
export type CacheRegion = string;
export type PrivacyClass = string;
export declare function context(options: {
  id: string;
  kind?: ContextKind;
  source: unknown;
  stability?: ContextStability;
  safety?: SafetyClass;
  priority?: ContextPriority;
  recovery?: RecoveryKind;
  cacheRegion?: CacheRegion;
  privacy?: PrivacyClass;
  opaque?: boolean;
  ttlTurns?: number;
  [key: string]: unknown;
}): ContextDefinition;

export type SandboxMode = "required" | "fixture" | "host";
/** A frozen definition; `TOutput` is its output schema's type (`undefined` without one). */
export interface AgentDefinition<TOutput extends TSchema | undefined = TSchema | undefined> {
  readonly kind: "agent";
  readonly id: string;
  readonly instructions: string | FileSource;
  readonly model: ModelSpec;
  readonly reasoning: "off" | "minimal" | "low" | "medium" | "high";
  readonly tools: readonly ToolDefinition[];
  readonly contexts: readonly ContextDefinition[];
  readonly sandbox: SandboxMode;
  readonly sandboxDeclared: boolean;
  readonly memory?: MemoryDefinition;
  readonly output?: OutputDefinition<TOutput>;
}
/** The static type of `run(definition).output`: the output schema's type, or `undefined`. */
export type AgentOutput<D> = D extends AgentDefinition<infer S> ? (S extends TSchema ? Static<S> : undefined) : unknown;
export declare function agent<TOutput extends TSchema | undefined = undefined>(options: {
  id: string;
  instructions: string | FileSource;
  model: ModelSpec;
  reasoning?: "off" | "minimal" | "low" | "medium" | "high";
  tools?: ToolDefinition[];
  contexts?: ContextDefinition[];
  memory?: MemoryDefinition;
  output?: OutputDefinition<TOutput>;
  sandbox?: SandboxMode;
}): AgentDefinition<TOutput>;

export declare function subagent(options: {
  name: string;
  description: string;
  agent: AgentDefinition;
  timeoutMs?: number;
  maxInputChars?: number;
  maxCalls?: number;
  maxCostUsd?: number;
  maxTokens?: number;
  maxContextTokens?: number;
}): ToolDefinition<{ task: string }, string>;

export interface MemoryDefinition {
  readonly kind: "memory";
  readonly namespace: string;
  readonly provenance: "local";
  readonly ttl: string;
  readonly recallBudget: number;
  readonly consent: "local_only";
  readonly ambient: Readonly<Record<string, unknown>>;
}
/** A local memory declaration; a run with it gets the memory engine (`RunOptions.memory`). */
export declare function memory(options: { namespace: string; provenance?: "local"; ttl?: string; recallBudget?: number; consent?: "local_only"; ambient?: Record<string, unknown> }): MemoryDefinition;
export declare function memoryTTLMilliseconds(ttl: string): number;


export interface AgentStaticContextDiagnostics {
  staticContextBytes: number;
  availableToolCount: number;
  basis: "inferred";
}
export declare function agentStaticContextDiagnostics(definition: AgentDefinition, options?: { rootDir?: string }): AgentStaticContextDiagnostics;

export interface Conversation {
  readonly sessionId: string;
  snapshot(): { messages: Message[] };
}
/** The `Conversation` class type (the reference's name for it). */
export type ConversationState = Conversation;
export declare function createConversation(): Conversation;

// ---------- runs ----------

export type AgentInput =
  | string
  | ReadonlyArray<{ type: "text"; text: string } | { type: "image"; source: { type: "base64"; data: string }; mimeType?: string }>;

export interface RunBudget {
  maxUsd?: number;
  maxTokens?: number;
  initialUsd?: number;
  initialTokens?: number;
  outputFloorTokens?: number;
  onExhausted?: "compact" | "stop";
  /** How `onExhausted: "compact"` compacts (the root on this budget, a subagent on its wallet). */
  compaction?: import("./surface.mjs").CompactionOptions;
}

export interface RunBreakers {
  repeatedToolCalls?: number;
  repeatedToolCallWindowTurns?: number;
  noProgressTurns?: number;
  maxToolCallsPerTurn?: number;
  retry?: { maxSpend: number; backoffMs?: number };
}

export interface DurableStore {
  load(runId: string): Promise<readonly string[]>;
  append(runId: string, data: string): Promise<void>;
  acquire(runId: string): Promise<() => Promise<void>>;
  close(runId: string): Promise<void>;
  list?(): Promise<readonly string[]>;
}
export interface DurableRunOptions {
  runId: string;
  store?: DurableStore;
}

export interface RunOptions {
  /** The memory engine of a definition with `memory` (root, tenant, engine, storage, …). */
  memory?: import("./memory.mjs").MemoryRuntimeConfig;
  /** Writes the receipt under `.caveman/runs/<stamp>/` and prints it after a successful run(). */
  printReceipt?: boolean;
  sandboxProfile?: { network: boolean | Record<string, unknown>; childProcess: boolean; credentialEnv: readonly string[] };
  /** Refused (`cave_run_option_unsupported`) until knap's kernel acts on them. */
  modelRouter?: ModelCallRouter;
  controller?: import("./surface.mjs").AgentRunController;
  budgetController?: import("./surface.mjs").BudgetController;
  onBudgetExhausted?: "stop" | import("./surface.mjs").BudgetExhaustionHandler;
  /** Subagent runs the whole run tree may start, 1..65,536 (unset: no limit); past it the subagent tool errors with `cave_subagent_invocation_limit`. */
  maxSubagentInvocations?: number;
  /** Subagent runs in flight at once across the tree, 1..1,024 (unset: no limit); past it `cave_subagent_concurrency_limit`. */
  maxConcurrentSubagents?: number;
  rootDir?: string;
  sessionId?: string;
  cacheRetention?: "none" | "short" | "long";
  ensureRuntime?: boolean;
  cave?: "auto" | "off";
  maxCostUsd?: number;
  budget?: RunBudget;
  deadlineMs?: number;
  maxSubagentDepth?: number;
  maxModelCalls?: number;
  maxToolCalls?: number;
  breakers?: RunBreakers;
  durable?: DurableRunOptions;
  toolPolicy?: ToolCallPolicy;
  model?: Model | object;
  models?: Models;
  streamFn?: StreamFn;
  /**
   * The module that exports the agent (resolved against `rootDir`): with it a `sandbox: "required"`
   * agent's tool closures run in worker processes that import it.
   */
  entryPath?: string;
  signal?: AbortSignal;
  conversation?: Conversation;
}

export type RunStopReason =
  | "complete"
  | "budget_exhausted"
  | "deadline"
  | "loop_detected"
  | "no_progress"
  | "wallet_revoked"
  | "call_budget_exhausted";

export interface ReceiptCall {
  provider: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
  estimatedUsd: number;
  unpriced: boolean;
  usageBasis: "provider_reported" | "unavailable";
  clampedOutputTokens?: number;
}
export interface ReceiptTool {
  name: string;
  calls: number;
  errors: number;
  denied?: number;
}
export interface BreakerEvent {
  kind: "loop_detected" | "no_progress" | "fan_out_blocked" | "retry_attempted" | "retry_exhausted";
  tool?: string;
  count: number;
  signature?: string;
}
export interface ReceiptResume {
  attempts: number;
  priorCalls: number;
  priorEstimatedUsd: number;
  priorTokens: number;
  priorUnpriced: boolean;
  priorSettled?: number;
  possibleDoubleCountCalls: number;
  discardedPartialTurn: boolean;
}
/** One entry of `receipt.compactions` (`budget.onExhausted: "compact"`). */
export interface ReceiptCompaction {
  index: number;
  tier: "evicted" | "summarized" | "new-context";
  preTokens: number;
  postTokens: number;
  pinnedSegmentIds: string[];
  elidedSegmentDigests: string[];
  /** Summarized compactions only. */
  summarySchemaVersion?: number;
  cacheState: "warm" | "cold" | "unknown";
  meteredCost: number;
  meteredBasis: "measured";
  modeledNetTokens: number;
  modeledBasis: "modeled";
  workingCallsAfter: number;
}

/** `RunOptions.modelRouter`: called before every root provider call (working calls and paid compaction summarizers); not passed to subagents. */
export type ModelCallRouter = (input: ModelCallRouteInput) => ModelCallRouteDecision | Promise<ModelCallRouteDecision>;
export interface ModelCallRouteInput {
  readonly callIndex: number;
  readonly role: "working" | "compaction";
  readonly provider: string;
  readonly currentModel: string;
  readonly ctxTokens: number;
  readonly hasImages: boolean;
  readonly toolErrorStreak: number;
  readonly previousUsage?: { readonly model: string; readonly inputTokens?: number; readonly cacheReadTokens: number; readonly cacheWriteTokens: number };
}
export interface ModelCallRouteDecision {
  readonly model: string;
  readonly reason: string;
  readonly signals: readonly string[];
}

export interface RunReceipt {
  schema: "caveman.agent.run-receipt.v1";
  runId: string;
  agentId: string;
  basis: "estimated_list_price_subtotal";
  claimBasis: "inferred";
  stopReason: RunStopReason;
  denomination: "usd" | "tokens" | "none";
  max?: number;
  released?: number;
  spent?: number;
  capBreached: boolean;
  overspent: number;
  totalEstimatedUsd: number;
  totalTokens: number;
  unpriced: boolean;
  calls: ReceiptCall[];
  tools: ReceiptTool[];
  subagents: RunReceipt[];
  tranches: { amount: number; reason: string; atCall: number }[];
  breakers: BreakerEvent[];
  compactions: ReceiptCompaction[];
  resume?: ReceiptResume;
}

export interface RunResult<TOutput = unknown> {
  runId: string;
  agentId: string;
  text: string;
  output?: TOutput;
  contextBill: Record<string, number>;
  usageBasis: "provider_reported" | "unavailable";
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
  reasoningUsageBasis: "provider_reported" | "unavailable";
  costUsd: number;
  priceBasis: "public_catalog" | "unpriced";
  mode: "optimized" | "observe-only";
  provider: string;
  model: string;
  latencyMs: number;
  toolCalls: string[];
  evaluatedTransformIDs: string[];
  transformIDs: string[];
  transformFailures: unknown[];
  transformTrace: unknown[];
  recoveryResolved: boolean;
  stopReason: RunStopReason;
  capBreached: boolean;
  overspent: number;
  receipt: RunReceipt;
  claimBasis: "inferred";
  unlocked: boolean;
  resumed?: true;
}

export type CavemanRunEvent =
  | { type: "run_start"; runId: string; agentId: string }
  | { type: "pi"; runId: string; event: { type: string; [key: string]: any } }
  | { type: "nested_tool_start"; runId: string; id: string; name: string; args: unknown }
  | { type: "nested_tool_end"; runId: string; id: string; name: string; isError: boolean; result: unknown }
  | { type: "model_route"; runId: string; decision: ModelCallRouteDecision }
  | { type: "run_end"; runId: string; result: RunResult }
  | { type: "run_error"; runId: string; code: string; message: string; receipt: RunReceipt };

export declare class CavemanRunError extends Error {
  readonly name: "CavemanRunError";
  readonly code: string;
  readonly receipt: RunReceipt;
  constructor(code: string, message: string, receipt: RunReceipt);
}

export declare function run<D extends AgentDefinition>(definition: D, input: AgentInput, options?: RunOptions): Promise<RunResult<AgentOutput<D>>>;
export declare function stream(definition: AgentDefinition, input: AgentInput, options?: RunOptions): AsyncGenerator<CavemanRunEvent, void, unknown>;

// ---------- durable stores ----------

export declare class DiskDurableStore implements DurableStore {
  constructor(root: string);
  readonly root: string;
  runDir(runId: string): string;
  load(runId: string): Promise<string[]>;
  append(runId: string, data: string): Promise<void>;
  acquire(runId: string): Promise<() => Promise<void>>;
  close(runId: string): Promise<void>;
  list(): Promise<string[]>;
  /**
   * Manual override for a lock knap cannot prove stale (a garbage `owner.json` that keeps
   * changing, `{"pid":1}`, a foreign owner whose pid is in use): removes `lock.d` unless a live
   * knap process holds it (then `cave_durable_run_locked`). Resolves to whether a lock was
   * removed. Use it only when you know no process drives the run.
   */
  breakLock(runId: string): Promise<boolean>;
}

export interface SqlExecutor {
  exec(sql: string, params: readonly unknown[]): unknown[] | Promise<unknown[]>;
}
export declare class SqlDurableStore implements DurableStore {
  constructor(options: { sql: SqlExecutor; dialect: "sqlite" | "postgres"; table?: string; leaseTtlMs?: number });
  static schema(dialect: "sqlite" | "postgres", table?: string): string;
  load(runId: string): Promise<string[]>;
  append(runId: string, data: string): Promise<void>;
  acquire(runId: string): Promise<() => Promise<void>>;
  close(runId: string): Promise<void>;
  list(): Promise<string[]>;
}

/** `HttpDurableStoreOptions`: the journal kept by a server speaking the reference's wire contract. */
export interface HttpDurableStoreOptions {
  /** `https:` unless the host is `localhost` or `127.0.0.1` (`cave_durable_http_insecure`). */
  url: string | URL;
  /** Sent as `Authorization: Bearer <token>` on every request (`cave_durable_http_token_required`). */
  token: string;
  /** The transport; default `globalThis.fetch`. */
  fetchFn?: (url: string, init: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal }) => Promise<Response>;
  /** Lease TTL, default 30,000, at least 3,000 (`cave_durable_http_lock_ttl_invalid`); renewed every ttl/3. */
  lockTtlMs?: number;
  /** Per request, default 10,000 (`cave_durable_http_request_timeout_invalid`). */
  requestTimeoutMs?: number;
}
export declare class HttpDurableStore implements DurableStore {
  constructor(options: HttpDurableStoreOptions);
  load(runId: string): Promise<string[]>;
  append(runId: string, data: string): Promise<void>;
  acquire(runId: string): Promise<() => Promise<void>>;
  close(runId: string): Promise<void>;
  list(): Promise<string[]>;
}

export type { Model, StreamFn, Models, AssistantMessage, Message };
export * from "./surface.mjs";
