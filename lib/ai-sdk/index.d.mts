// Types of knap/ai-sdk. Tool objects are AI SDK `Tool`s (ai@5 and ai@6); they are typed
// structurally here so this file does not require `ai` to be installed.

export interface ExecOptions {
  timeout?: number;
  cwd?: string;
  restart?: boolean;
  /** knap: cancels the command (its process group is killed). */
  signal?: AbortSignal;
  /** knap: characters kept per stream (middle-truncated beyond); default 10,000,000. */
  maxOutputLength?: number;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  durationMs: number;
  interrupted: boolean;
}

/** bashkit's sandbox interface. Any object implementing it works with `createAgentTools`. */
export interface Sandbox {
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  readFile(path: string): Promise<string>;
  writeFile(path: string, content: string): Promise<void>;
  readDir(path: string): Promise<string[]>;
  fileExists(path: string): Promise<boolean>;
  isDirectory(path: string): Promise<boolean>;
  deleteFile?(path: string): Promise<void>;
  rename?(oldPath: string, newPath: string): Promise<void>;
  destroy(): Promise<void>;
  readonly id?: string;
  rgPath?: string;
  workingDirectory?: string;
}

export interface LocalSandboxConfig {
  /** The workspace (the seed's name); default `/tmp`, created if missing. */
  workingDirectory?: string;
  /** bashkit's name for `workingDirectory`. */
  cwd?: string;
  /** Variables added to the allow-listed environment of commands. */
  env?: Record<string, string>;
}

export interface LocalSandbox extends Sandbox {
  /** The canonical workspace directory. */
  readonly workingDirectory: string;
}

export declare function createLocalSandbox(config?: LocalSandboxConfig): LocalSandbox;

/** An AI SDK tool (structural). */
export interface AiTool<INPUT = any, OUTPUT = any> {
  description?: string;
  inputSchema: unknown;
  execute?: (input: INPUT, options: { toolCallId: string; messages: unknown[]; abortSignal?: AbortSignal; [k: string]: unknown }) => Promise<OUTPUT> | OUTPUT;
  strict?: boolean;
  needsApproval?: unknown;
  providerOptions?: unknown;
  [k: string]: unknown;
}
export type ToolSet = Record<string, AiTool>;

export interface ToolConfig {
  timeout?: number;
  /** Write/Edit/Patch: bytes; Read: lines without a limit (bashkit's reuse). */
  maxFileSize?: number;
  maxOutputLength?: number;
  maxLineLength?: number;
  /** Globs over resolved paths (relative to the workspace, or absolute). */
  allowedPaths?: string[];
  /** Bash: a command containing any of these is refused. */
  blockedCommands?: string[];
  strict?: boolean;
  needsApproval?: unknown;
  providerOptions?: unknown;
}

export interface WebSearchConfig {
  provider?: "parallel";
  apiKey?: string;
  /** Default `https://api.parallel.ai` (or `KNAP_PARALLEL_BASE_URL`). */
  baseUrl?: string;
  /** Bring your own search: returns `{title, url, snippet, metadata?}[]`. */
  search?: (query: string, options: { allowedDomains?: string[]; blockedDomains?: string[]; signal: AbortSignal }) => Promise<WebSearchResult[]>;
  maxResults?: number;
  timeout?: number;
  strict?: boolean;
  needsApproval?: unknown;
  providerOptions?: unknown;
}

export interface WebFetchConfig {
  /** `direct` (an HTTP GET; the default without `apiKey`) or `parallel` (extract API). */
  provider?: "direct" | "parallel";
  apiKey?: string;
  /** When set, the prompt is answered from the page by this model. */
  model?: unknown;
  baseUrl?: string;
  maxContentLength?: number;
  timeout?: number;
  strict?: boolean;
  needsApproval?: unknown;
  providerOptions?: unknown;
}

export interface WebSearchResult {
  title: string;
  url: string;
  snippet: string;
  metadata?: { publish_date?: string };
}

export interface CacheEntry<T = unknown> {
  result: T;
  timestamp: number;
  [k: string]: unknown;
}

export interface CacheStore<T = unknown> {
  get(key: string): CacheEntry<T> | undefined | Promise<CacheEntry<T> | undefined>;
  set(key: string, entry: CacheEntry<T>): void | Promise<void>;
  delete(key: string): void | Promise<void>;
  clear(): void | Promise<void>;
  size?(): number | Promise<number>;
}

export interface CacheOptions {
  /** Milliseconds; default 300,000 (5 minutes). */
  ttl?: number;
  store?: CacheStore;
  keyGenerator?: (toolName: string, params: unknown) => string;
  debug?: boolean;
  onHit?: (toolName: string, key: string) => void;
  onMiss?: (toolName: string, key: string) => void;
}

export interface CacheStats {
  hits: number;
  misses: number;
  hitRate: number;
  size: number;
}

export type CachedTool<T extends AiTool = AiTool> = T & {
  /** A plain object with a synchronous store (the default LRU), else a Promise. */
  getStats(): CacheStats | Promise<CacheStats>;
  clearCache(key?: string): Promise<void>;
};

export type CacheConfig =
  | boolean
  | CacheStore
  | ({
      store?: CacheStore;
      ttl?: number;
      debug?: boolean;
      onHit?: (toolName: string, key: string) => void;
      onMiss?: (toolName: string, key: string) => void;
      keyGenerator?: (toolName: string, params: unknown) => string;
    } & { [toolName: string]: unknown });

export declare class LRUCacheStore<T = unknown> implements CacheStore<T> {
  constructor(maxSize?: number);
  get(key: string): CacheEntry<T> | undefined;
  set(key: string, entry: CacheEntry<T>): void;
  delete(key: string): void;
  clear(): void;
  size(): number;
}

export declare function cached<T extends AiTool>(tool: T, toolName: string, options?: CacheOptions): CachedTool<T>;

export interface ModelPricing {
  inputPerToken: number;
  outputPerToken: number;
  cacheReadPerToken?: number;
  cacheWritePerToken?: number;
}

export interface ModelInfo {
  pricing: ModelPricing;
  contextLength: number;
}

export interface BudgetStatus {
  totalCostUsd: number;
  maxUsd: number;
  remainingUsd: number;
  /** 0-100. */
  usagePercent: number;
  stepsCompleted: number;
  exceeded: boolean;
  unpricedSteps: number;
}

export interface BudgetTracker {
  onStepFinish(step: unknown): void;
  stopWhen: (options: { steps: unknown[] }) => boolean;
  getStatus(): BudgetStatus;
}

export interface BudgetConfig {
  maxUsd: number;
  /** @deprecated use `modelRegistry`. */
  pricingProvider?: "openRouter";
  apiKey?: string;
  modelPricing?: Record<string, ModelPricing>;
  onUnpricedModel?: (modelId: string) => void;
}

export interface ModelRegistryConfig {
  provider: "openRouter";
  apiKey?: string;
  /** Default `https://openrouter.ai/api/v1/models` (or `KNAP_OPENROUTER_MODELS_URL`). */
  url?: string;
  timeoutMs?: number;
}

export interface ContextLayer {
  beforeExecute?(toolName: string, params: Record<string, unknown>): { error: string } | undefined | Promise<{ error: string } | undefined>;
  afterExecute?(toolName: string, params: Record<string, unknown>, result: any): any;
}

export interface ExecutionPolicyConfig {
  planModeBlockedTools?: string[];
  shouldBlock?: (toolName: string, params: Record<string, unknown>) => string | undefined;
}

export interface OutputPolicyConfig {
  maxOutputLength?: number;
  redirectionThreshold?: number;
  excludeTools?: string[];
  truncate?: (text: string, maxLength: number) => string;
  hints?: Record<string, string>;
  buildHint?: (toolName: string, params: unknown, originalLength: number, result: unknown) => string | undefined;
  stashOutput?: { sandbox: Sandbox; tools: string[]; dir?: string; pathFor?: (toolName: string, params: unknown, result: unknown) => string };
}

export interface ContextConfig {
  executionPolicy?: ExecutionPolicyConfig;
  outputPolicy?: OutputPolicyConfig | false;
  extraTools?: ToolSet;
  layers?: ContextLayer[];
}

export interface PlanModeState {
  isActive: boolean;
  enteredAt?: Date;
  reason?: string;
}

export interface SkillMetadata {
  name: string;
  path: string;
  description?: string;
  allowedTools?: string[];
}

export interface AgentConfig {
  tools?: Partial<Record<"Bash" | "Read" | "Write" | "Edit" | "Glob" | "Grep" | "Patch" | "WebSearch" | "WebFetch", ToolConfig>>;
  askUser?: true | { strict?: boolean; needsApproval?: unknown; providerOptions?: unknown };
  patch?: true | ToolConfig;
  planMode?: boolean | { onEnter?: (reason: string) => void | Promise<void>; onPlanSubmit?: (plan: string) => boolean | undefined | Promise<boolean | undefined> };
  skill?: { skills: Record<string, SkillMetadata>; onActivate?: (skill: SkillMetadata, instructions: string) => void | Promise<void> };
  /** Enables WebSearch and WebFetch. */
  webSearch?: WebSearchConfig;
  webFetch?: WebFetchConfig;
  cache?: CacheConfig;
  modelRegistry?: ModelRegistryConfig;
  budget?: BudgetConfig;
  context?: ContextConfig;
  /** Default timeout of every tool, in milliseconds (default 120,000). */
  defaultTimeout?: number;
  workingDirectory?: string;
}

export interface AgentToolsResult {
  tools: ToolSet;
  planModeState?: PlanModeState;
  budget?: BudgetTracker;
  openRouterModels?: Map<string, ModelInfo> & { readonly source?: "openrouter" | "bundled" };
  contextLayers: ContextLayer[];
}

export declare const DEFAULT_CONFIG: Readonly<AgentConfig>;
export declare function createAgentTools(sandbox: Sandbox, config?: AgentConfig): Promise<AgentToolsResult>;

export declare function createBashTool(sandbox: Sandbox, config?: ToolConfig): AiTool;
export declare function createReadTool(sandbox: Sandbox, config?: ToolConfig): AiTool;
export declare function createWriteTool(sandbox: Sandbox, config?: ToolConfig): AiTool;
export declare function createEditTool(sandbox: Sandbox, config?: ToolConfig): AiTool;
export declare function createGlobTool(sandbox: Sandbox, config?: ToolConfig): AiTool;
export declare function createGrepTool(sandbox: Sandbox, config?: ToolConfig): AiTool;
export declare function createPatchTool(sandbox: Sandbox, config?: ToolConfig): AiTool;
export declare function createAskUserTool(config?: { strict?: boolean; needsApproval?: unknown; providerOptions?: unknown }): AiTool;
export declare function createEnterPlanModeTool(state: PlanModeState, onEnter?: (reason: string) => void | Promise<void>): AiTool;
export declare function createExitPlanModeTool(
  state?: PlanModeState,
  onPlanSubmit?: (plan: string) => boolean | undefined | Promise<boolean | undefined>,
): AiTool;
export interface TodoItem {
  content: string;
  status: "pending" | "in_progress" | "completed";
  activeForm: string;
}
export declare function createTodoWriteTool(state: { todos?: TodoItem[] }, onUpdate?: (todos: TodoItem[]) => void): AiTool;
export declare function createTodoWriteTool(state: { todos?: TodoItem[] }, config?: ToolConfig, onUpdate?: (todos: TodoItem[]) => void): AiTool;
export declare function createSkillTool(config: { skills: Record<string, SkillMetadata>; sandbox?: Sandbox; onActivate?: (skill: SkillMetadata, instructions: string) => void | Promise<void> }): AiTool;

export interface SubagentTypeConfig {
  model?: unknown;
  systemPrompt?: string;
  tools?: string[];
  additionalTools?: ToolSet;
  stopWhen?: unknown;
  prepareStep?: unknown;
  onStepFinish?: (step: unknown) => void | Promise<void>;
}
export interface TaskToolConfig {
  model: unknown;
  tools: ToolSet;
  subagentTypes?: Record<string, SubagentTypeConfig>;
  defaultStopWhen?: unknown;
  defaultOnStepFinish?: (event: { subagentType: string; description: string; step: unknown }) => void | Promise<void>;
  streamWriter?: { write(part: unknown): void };
  budget?: BudgetTracker;
}
export declare function createTaskTool(config: TaskToolConfig): AiTool;
export declare function createWebSearchTool(config: WebSearchConfig): AiTool;
export declare function createWebFetchTool(config: WebFetchConfig): AiTool;

export declare function createBudgetTracker(
  maxUsd: number,
  options?: { modelPricing?: Record<string, ModelPricing>; openRouterPricing?: Map<string, ModelPricing | ModelInfo>; onUnpricedModel?: (modelId: string) => void },
): BudgetTracker;
export declare function fetchOpenRouterModels(
  apiKey?: string,
  options?: { url?: string; timeoutMs?: number; fallback?: boolean },
): Promise<Map<string, ModelInfo> & { readonly source?: "openrouter" | "bundled" }>;
export declare function getModelContextLength(model: string, models: Map<string, ModelInfo>): number | undefined;
export declare function resetModelRegistryCache(): void;

export declare function pruneMessages<M extends { role: string }>(messages: M[], options?: { maxTokens?: number; protectRecentUserMessages?: number }): M[];
export declare function pruneMessagesByTokens<M extends { role: string }>(
  messages: M[],
  config?: { targetTokens?: number; minSavingsThreshold?: number; protectLastNUserMessages?: number },
): M[];
export declare function estimateTokens(text: string): number;
export declare function estimateMessageTokens(message: unknown): number;
export declare function estimateMessagesTokens(messages: unknown[]): number;

export interface LanguageModelMiddlewareLike {
  specificationVersion?: "v3";
  middlewareVersion?: "v2";
  transformParams: (options: { params: any; type?: string; model?: unknown }) => Promise<any>;
}
export declare const anthropicPromptCacheMiddleware: LanguageModelMiddlewareLike;
export declare const anthropicPromptCacheMiddlewareV2: LanguageModelMiddlewareLike;

export declare function withContext<T extends AiTool>(tool: T, toolName: string, layers: ContextLayer[]): T;
export declare function applyContextLayers<T extends ToolSet>(tools: T, layers: ContextLayer[]): T;
export declare function createExecutionPolicy(planModeState?: PlanModeState, config?: ExecutionPolicyConfig): ContextLayer;
export declare function createOutputPolicy(config?: OutputPolicyConfig): ContextLayer;
export declare function middleTruncate(text: string, maxLength: number): string;

/** A knap tool object (`shellTools()` entries, `tool()`). */
export interface KnapTool {
  name: string;
  description: string;
  input: object;
  effect?: "read" | "write" | "idempotent" | "external";
  timeoutMs?: number;
  execute(input: any, signal?: AbortSignal, context?: unknown): Promise<unknown> | unknown;
}
export declare function toAiSdkTools(
  tools: readonly KnapTool[] | Record<string, KnapTool>,
  options?: { toolPolicy?: (input: any) => unknown; runId?: string; agentId?: string; agentPath?: string[] },
): ToolSet;
export { discoverSkills, parseSkillMetadata, skillsToXml, loadSkillBundle, loadSkillBundles, fetchSkill, fetchSkills, setupAgentEnvironment } from "./skills.mjs";
export type { DiscoverSkillsOptions, SkillBundle, SkillContent, AgentEnvironmentConfig, SetupResult } from "./skills.mjs";
