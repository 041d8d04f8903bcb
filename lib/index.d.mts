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
export type { ExecRequest, ExecResult, ExecutionBackend, HttpExecutionBackendOptions } from "./execution-backend.mjs";
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
export declare const NATIVE_TOOL: unique symbol;

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
export interface SchemaBuilders {
  any(options?: JSONSchema): JSONSchema;
  string(options?: JSONSchema): JSONSchema;
  number(options?: JSONSchema): JSONSchema;
  integer(options?: JSONSchema): JSONSchema;
  boolean(options?: JSONSchema): JSONSchema;
  null(options?: JSONSchema): JSONSchema;
  literal(value: string | number | boolean | null, options?: JSONSchema): JSONSchema;
  array(items: JSONSchema, options?: JSONSchema): JSONSchema;
  union(variants: JSONSchema[], options?: JSONSchema): JSONSchema;
  enum(values: readonly unknown[], options?: JSONSchema): JSONSchema;
  optional(inner: JSONSchema): JSONSchema;
  object(properties: Record<string, JSONSchema>, options?: JSONSchema): JSONSchema;
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

export interface OutputDefinition {
  readonly kind: "output";
  readonly maxTokens: number;
  readonly schema?: JSONSchema;
}
export declare function output(options: { maxTokens: number; schema?: JSONSchema }): OutputDefinition;

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
export declare function context(options: { id: string; kind?: string; source: unknown; stability?: string; [key: string]: unknown }): ContextDefinition;

export type SandboxMode = "required" | "fixture" | "host";
export interface AgentDefinition {
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
  readonly output?: OutputDefinition;
}
export declare function agent(options: {
  id: string;
  instructions: string | FileSource;
  model: ModelSpec;
  reasoning?: "off" | "minimal" | "low" | "medium" | "high";
  tools?: ToolDefinition[];
  contexts?: ContextDefinition[];
  memory?: MemoryDefinition;
  output?: OutputDefinition;
  sandbox?: SandboxMode;
}): AgentDefinition;

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
  modelRouter?: (input: unknown) => unknown;
  controller?: import("./surface.mjs").AgentRunController;
  budgetController?: import("./surface.mjs").BudgetController;
  onBudgetExhausted?: "stop" | import("./surface.mjs").BudgetExhaustionHandler;
  maxSubagentInvocations?: number;
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
  compactions: unknown[];
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
  | { type: "run_end"; runId: string; result: RunResult }
  | { type: "run_error"; runId: string; code: string; message: string; receipt: RunReceipt };

export declare class CavemanRunError extends Error {
  readonly name: "CavemanRunError";
  readonly code: string;
  readonly receipt: RunReceipt;
  constructor(code: string, message: string, receipt: RunReceipt);
}

export declare function run(definition: AgentDefinition, input: AgentInput, options?: RunOptions): Promise<RunResult>;
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

export type { Model, StreamFn, Models, AssistantMessage, Message };
export * from "./surface.mjs";
