// Types of knap/ai-sdk. The tools are the AI SDK's own `Tool` type, taken from the `ai` package the
// application installs (5 or 6), as bashkit's typings do: `tools` then goes into `generateText` /
// `streamText` of that major with no cast. At run time knap never needs `ai` for the tools (their
// schema objects carry the AI SDK's registry symbols); for TypeScript, install `ai`.
import type {
  LanguageModel,
  LanguageModelMiddleware,
  ModelMessage,
  Output,
  PrepareStepFunction,
  StepResult,
  StopCondition,
  StreamTextResult,
  Tool,
  ToolSet,
  UIMessageStreamWriter,
} from "ai";

export type { LanguageModel, LanguageModelMiddleware, Output, StreamTextResult, Tool, ToolSet, UIMessageStreamWriter };

/** What the AI SDK passes a tool's `execute` as its second argument (ai@5 and ai@6). */
export type ToolExecuteOptions = Parameters<NonNullable<Tool<unknown, unknown>["execute"]>>[1];

// ---------------------------------------------------------------------------------------------
// Sandboxes

export interface ExecOptions {
  timeout?: number;
  cwd?: string;
  restart?: boolean;
  /** knap: cancels the command (its process group is killed). */
  signal?: AbortSignal;
  /** knap: characters kept per stream (middle-truncated beyond); default 10,000,000. */
  maxOutputLength?: number;
  /**
   * knap: receives the command's output in chunks while it runs, where the sandbox can (knap's
   * local sandbox and createE2BSandbox stream; createVercelSandbox passes the output once it
   * ends). knap's local sandbox delivers through a 256 KiB buffer that never slows the command:
   * `skipped` counts the bytes dropped before this chunk because the listener fell behind. An
   * error the listener throws stops the deliveries and rejects `exec` once the command ended.
   */
  onOutput?: (chunk: string, stream: "stdout" | "stderr", info?: { skipped: number }) => void;
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
  readonly id?: string | undefined;
  rgPath?: string | undefined;
  workingDirectory?: string | undefined;
}

export interface LocalSandboxConfig {
  /** The workspace (the seed's name); default `/tmp`, created if missing. An existing non-directory is refused (`cave_workspace_not_directory`). */
  workingDirectory?: string;
  /** bashkit's name for `workingDirectory`. */
  cwd?: string;
  /** Variables added to the allow-listed environment of commands. */
  env?: Record<string, string>;
}

export interface LocalSandbox extends Sandbox {
  /** The canonical workspace directory. */
  readonly workingDirectory: string;
  /** knap: `signal` stops the read between 1 MiB pieces (rejects with an AbortError). */
  readFile(path: string, options?: { signal?: AbortSignal }): Promise<string>;
  /** knap: `signal` stops the write (the file keeps its old content; rejects with an AbortError). */
  writeFile(path: string, content: string, options?: { signal?: AbortSignal }): Promise<void>;
}

export declare function createLocalSandbox(config?: LocalSandboxConfig): LocalSandbox;

export interface VercelSandboxConfig {
  runtime?: "node22" | "python3.13";
  resources?: { vcpus: number };
  /** Reconnect to an existing sandbox instead of creating one. */
  sandboxId?: string;
  /** Milliseconds; default 300,000. */
  timeout?: number;
  /** Default `/vercel/sandbox`. */
  cwd?: string;
  teamId?: string;
  projectId?: string;
  token?: string;
  /** Default true: `ensureSandboxTools()` once the sandbox is up. */
  ensureTools?: boolean;
  /** knap: the `@vercel/sandbox` module to use instead of importing it (tests, bundlers). */
  sdk?: unknown;
}

export interface E2BSandboxConfig {
  apiKey?: string;
  sandboxId?: string;
  template?: string;
  /** Milliseconds; default 300,000. */
  timeout?: number;
  /** Default `/home/user`. */
  cwd?: string;
  metadata?: Record<string, string>;
  /** Default true: `ensureSandboxTools()` once the sandbox is up. */
  ensureTools?: boolean;
  /** knap: the `@e2b/code-interpreter` module to use instead of importing it (tests, bundlers). */
  sdk?: unknown;
}

/** A Vercel Sandbox (`@vercel/sandbox`, an optional peer: `npm install @vercel/sandbox`). */
export declare function createVercelSandbox(config?: VercelSandboxConfig): Promise<Sandbox>;
/** An E2B sandbox (`@e2b/code-interpreter`, an optional peer: `npm install @e2b/code-interpreter`). */
export declare function createE2BSandbox(config?: E2BSandboxConfig): Promise<Sandbox>;
/** Sets `sandbox.rgPath` to a ripgrep the sandbox can run (`/tmp/rg`, `rg` on its PATH, else ripgrep 14.1.0 fetched inside the sandbox, as bashkit does); a no-op for knap's local sandbox. */
export declare function ensureSandboxTools(sandbox: Sandbox): Promise<void>;

// ---------------------------------------------------------------------------------------------
// Tool inputs and outputs (bashkit's names and fields; `null` means "the default")

export interface BashInput {
  command: string;
  timeout?: number | null;
  description?: string | null;
  run_in_background?: boolean | null;
}
export interface BashOutput {
  stdout: string;
  stderr: string;
  exit_code: number;
  interrupted: boolean;
  duration_ms: number;
  /** knap: set when `run_in_background` started the command. */
  background?: { pid: number; output_file: string };
}
export interface BashError {
  error: string;
}

export interface ReadInput {
  file_path: string;
  offset?: number | null;
  limit?: number | null;
}
export interface ReadTextOutput {
  type: "text";
  content: string;
  lines: Array<{ line_number: number; content: string }>;
  total_lines: number;
}
export interface ReadDirectoryOutput {
  type: "directory";
  entries: string[];
  count: number;
}
export interface ReadError {
  error: string;
}
export type ReadOutput = ReadTextOutput | ReadDirectoryOutput | ReadError;

export interface WriteInput {
  file_path: string;
  content: string;
}
export interface WriteOutput {
  message: string;
  bytes_written: number;
  file_path: string;
}
export interface WriteError {
  error: string;
}

export interface EditInput {
  file_path: string;
  old_string: string;
  new_string: string;
  replace_all?: boolean | null;
}
export interface EditOutput {
  message: string;
  file_path: string;
  replacements: number;
}
export interface EditError {
  error: string;
}

export interface GlobInput {
  pattern: string;
  path?: string | null;
}
export interface GlobOutput {
  /** Newest first; at most `maxResults` (default 1,000). */
  matches: string[];
  /** How many paths are in `matches`. */
  count: number;
  search_path: string;
  /** knap: present when more paths matched than were returned. */
  truncated?: SearchTruncation;
  /** knap: the last thing the model reads when the list was cut: how many more matched and how to narrow. */
  note?: string;
}
export interface GlobError {
  error: string;
}

export interface GrepInput {
  pattern: string;
  path?: string | null;
  glob?: string | null;
  type?: string | null;
  output_mode?: "content" | "files_with_matches" | "count" | null;
  "-i"?: boolean | null;
  "-n"?: boolean | null;
  "-B"?: number | null;
  "-A"?: number | null;
  "-C"?: number | null;
  head_limit?: number | null;
  offset?: number | null;
  multiline?: boolean | null;
}
export interface GrepMatch {
  file: string;
  line_number?: number;
  line: string;
  before_context?: string[];
  after_context?: string[];
}
export interface GrepContentOutput {
  matches: GrepMatch[];
  total_matches: number;
  truncated?: SearchTruncation;
  note?: string;
}
/** knap: present on a Grep or Glob result cut at `maxResults`: how many entries matched, how many were left out. */
export interface SearchTruncation {
  total: number;
  omitted: number;
}
export interface GrepFilesOutput {
  files: string[];
  count: number;
  /** knap: present when more files matched than `maxResults` (default 1,000) lets through. */
  truncated?: SearchTruncation;
  /** knap: with `truncated`, the last thing the model reads: how many more matched and how to narrow. */
  note?: string;
}
export interface GrepCountOutput {
  counts: Array<{ file: string; count: number }>;
  total: number;
  truncated?: SearchTruncation;
  note?: string;
}
export interface GrepError {
  error: string;
}
export type GrepOutput = GrepContentOutput | GrepFilesOutput | GrepCountOutput | GrepError;

export interface PatchInput {
  patch: string;
}
export interface PatchFileResult {
  status: "added" | "modified" | "deleted";
  path: string;
}
export interface PatchOutput {
  message: string;
  files: PatchFileResult[];
}
export interface PatchError {
  error: string;
}

export interface AskUserQuestionOption {
  label: string;
  description: string;
}
export interface AskUserQuestion {
  id: string;
  header: string;
  question: string;
  options: AskUserQuestionOption[];
  multiSelect?: boolean | null;
}
export interface AskUserInput {
  questions: AskUserQuestion[];
}
export type AskUserAnswers = Record<string, string | string[]>;
export type AskUserOutput = AskUserAnswers;

export interface PlanModeState {
  isActive: boolean;
  enteredAt?: Date;
  reason?: string;
}
export interface EnterPlanModeOutput {
  message: string;
  mode: "planning";
}
export interface EnterPlanModeError {
  error: string;
}
export interface ExitPlanModeOutput {
  message: string;
  approved?: boolean;
}
export interface ExitPlanModeError {
  error: string;
}

export interface SkillMetadata {
  name: string;
  path: string;
  description?: string;
  license?: string;
  compatibility?: string;
  metadata?: Record<string, string>;
  allowedTools?: string[];
}
export interface SkillOutput {
  name: string;
  instructions: string;
  allowed_tools?: string[];
  message: string;
}
export interface SkillError {
  error: string;
}
export interface SkillToolConfig {
  skills: Record<string, SkillMetadata>;
  sandbox?: Sandbox;
  onActivate?: (skill: SkillMetadata, instructions: string) => void | Promise<void>;
}

export interface TodoItem {
  content: string;
  status: "pending" | "in_progress" | "completed";
  activeForm: string;
}
export interface TodoState {
  todos: TodoItem[];
}
export interface TodoWriteInput {
  todos: TodoItem[];
}
export interface TodoWriteOutput {
  message: string;
  stats: { total: number; pending: number; in_progress: number; completed: number };
}
export interface TodoWriteError {
  error: string;
}

export interface WebSearchResult {
  title: string;
  url: string;
  snippet: string;
  metadata?: Record<string, unknown>;
}
export interface WebSearchInput {
  query: string;
  allowed_domains?: string[] | null;
  blocked_domains?: string[] | null;
}
export interface WebSearchOutput {
  results: WebSearchResult[];
  total_results: number;
  query: string;
}
export interface WebSearchError {
  error: string;
  status_code?: number;
  retryable?: boolean;
}
export interface WebFetchInput {
  url: string;
  prompt: string;
}
export interface WebFetchOutput {
  response: string;
  url: string;
  final_url?: string;
  status_code?: number;
}
export interface WebFetchError {
  error: string;
  status_code?: number;
  retryable?: boolean;
}

export interface TaskInput {
  description: string;
  prompt: string;
  subagent_type: string;
  system_prompt?: string | null;
  tools?: string[] | null;
}
export interface TaskOutput {
  result: string;
  usage?: { input_tokens: number; output_tokens: number };
  duration_ms?: number;
  subagent?: string;
  description?: string;
}
export interface TaskError {
  error: string;
  subagent?: string;
  description?: string;
  duration_ms?: number;
}
export interface SubagentStepEvent {
  subagentType: string;
  description: string;
  step: StepResult<ToolSet>;
}
export interface SubagentEventData {
  event: "start" | "tool-call" | "done" | "complete";
  subagent: string;
  description: string;
  toolName?: string;
  args?: Record<string, unknown>;
  messages?: ModelMessage[];
}

/**
 * An AI SDK `Tool` whose `execute` is there (knap's tools always have one) and returns a
 * Promise, so `await tools.Bash.execute(input, options)` type-checks under `strict` with no `?.`.
 * Still assignable to `Tool` and `ToolSet`.
 */
export type ExecutableTool<I, O> = { execute: (input: I, options: ToolExecuteOptions) => Promise<O> } & Tool<I, O>;

export type BashTool = ExecutableTool<BashInput, BashOutput | BashError>;
export type ReadTool = ExecutableTool<ReadInput, ReadOutput>;
export type WriteTool = ExecutableTool<WriteInput, WriteOutput | WriteError>;
export type EditTool = ExecutableTool<EditInput, EditOutput | EditError>;
export type GlobTool = ExecutableTool<GlobInput, GlobOutput | GlobError>;
export type GrepTool = ExecutableTool<GrepInput, GrepOutput>;
export type PatchTool = ExecutableTool<PatchInput, PatchOutput | PatchError>;

// ---------------------------------------------------------------------------------------------
// Configuration

/** The AI SDK's per-tool options, passed through to the tool object. */
export type SDKToolOptions = Partial<Pick<Tool<any, any>, "strict" | "needsApproval" | "providerOptions">>;

export type ToolConfig = {
  timeout?: number;
  /** Write/Edit/Patch: bytes; Read: lines without a limit (bashkit's reuse). */
  maxFileSize?: number;
  maxOutputLength?: number;
  maxLineLength?: number;
  /** Globs over resolved paths (relative to the workspace, or absolute). */
  allowedPaths?: string[];
  /** Bash: a command containing any of these is refused. */
  blockedCommands?: string[];
  /** knap, Glob: paths returned at most (newest first); Grep: files, counts or matching lines returned at most (after `offset`/`head_limit`). Default 1,000, 0 for all. A cut list ends with `note`. */
  maxResults?: number;
} & SDKToolOptions;

/** What Bash's `onProgress` receives while a command runs. */
export interface BashProgress {
  stream: "stdout" | "stderr";
  chunk: string;
  /** Bytes of this stream dropped just before this chunk: the listener fell behind knap's 256 KiB buffer (the command is never slowed down). */
  skipped: number;
  /** The AI SDK's id of the tool call, when the SDK gave one. */
  toolCallId: string | undefined;
}

export type BashToolConfig = ToolConfig & {
  /** knap: the command's output in chunks while it runs; the tool's result comes after the last chunk. An error it throws becomes the call's `{error}`. */
  onProgress?: (progress: BashProgress) => void;
};

export type AskUserConfig = SDKToolOptions;
export type AskUserToolConfig = SDKToolOptions;

export type SkillConfig = {
  skills: Record<string, SkillMetadata>;
  onActivate?: (skill: SkillMetadata, instructions: string) => void | Promise<void>;
};

export type WebSearchConfig = {
  provider?: "parallel";
  apiKey?: string | undefined;
  /** Default `https://api.parallel.ai` (or `KNAP_PARALLEL_BASE_URL`). */
  baseUrl?: string;
  /** Bring your own search: returns `{title, url, snippet, metadata?}[]`. */
  search?: (query: string, options: { allowedDomains?: string[]; blockedDomains?: string[]; signal: AbortSignal }) => Promise<WebSearchResult[]>;
  maxResults?: number;
  timeout?: number;
} & SDKToolOptions;

export type WebFetchConfig = {
  /** `direct` (an HTTP GET; the default without `apiKey`) or `parallel` (extract API). */
  provider?: "direct" | "parallel";
  apiKey?: string | undefined;
  /** When set, the prompt is answered from the page by this model. */
  model?: LanguageModel;
  baseUrl?: string;
  maxContentLength?: number;
  timeout?: number;
} & SDKToolOptions;

export interface CacheEntry<T = unknown> {
  result: T;
  timestamp: number;
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

export type CachedTool<T extends Tool = Tool> = T & {
  /** A plain object with a synchronous store (the default LRU), else a Promise. */
  getStats(): CacheStats | Promise<CacheStats>;
  clearCache(key?: string): Promise<void>;
};

export type CacheConfig =
  | boolean
  | CacheStore
  | {
      store?: CacheStore;
      ttl?: number;
      debug?: boolean;
      onHit?: (toolName: string, key: string) => void;
      onMiss?: (toolName: string, key: string) => void;
      keyGenerator?: (toolName: string, params: unknown) => string;
      [toolName: string]:
        | boolean
        | CacheStore
        | number
        | ((toolName: string, key: string) => void)
        | ((toolName: string, params: unknown) => string)
        | undefined;
    };

export declare class LRUCacheStore<T = unknown> implements CacheStore<T> {
  constructor(maxSize?: number);
  get(key: string): CacheEntry<T> | undefined;
  set(key: string, entry: CacheEntry<T>): void;
  delete(key: string): void;
  clear(): void;
  size(): number;
}

export declare function cached<T extends Tool>(tool: T, toolName: string, options?: CacheOptions): CachedTool<T>;

/** The subset of a Redis client the store uses (node-redis v4+ and ioredis both have it). */
export interface RedisClient {
  get(key: string): Promise<string | null>;
  set(key: string, value: string): Promise<unknown>;
  del(key: string | string[]): Promise<unknown>;
  keys(pattern: string): Promise<string[]>;
}
export interface RedisCacheStoreOptions {
  /** Key prefix; default `"bashkit:"` (bashkit's, so both can share a cache). */
  prefix?: string;
}
export declare function createRedisCacheStore(client: RedisClient, options?: RedisCacheStoreOptions): CacheStore;

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

/** Generic over the tool set, so `budget.stopWhen` / `budget.onStepFinish` fit `generateText` with any tools. */
export interface BudgetTracker {
  onStepFinish: <TOOLS extends ToolSet>(step: StepResult<TOOLS>) => void;
  stopWhen: <TOOLS extends ToolSet>(options: { steps: Array<StepResult<TOOLS>> }) => boolean;
  getStatus: () => BudgetStatus;
}

export type PricingProvider = "openRouter";
export type ModelRegistryProvider = "openRouter";

export interface BudgetConfig {
  maxUsd: number;
  /** @deprecated use `modelRegistry`. */
  pricingProvider?: PricingProvider;
  apiKey?: string | undefined;
  modelPricing?: Record<string, ModelPricing>;
  onUnpricedModel?: (modelId: string) => void;
}

export interface ModelRegistryConfig {
  provider: ModelRegistryProvider;
  apiKey?: string | undefined;
  /** Default `https://openrouter.ai/api/v1/models` (or `KNAP_OPENROUTER_MODELS_URL`). */
  url?: string;
  timeoutMs?: number;
}

export interface ContextLayer {
  beforeExecute?: (toolName: string, params: Record<string, unknown>) => { error: string } | undefined | Promise<{ error: string } | undefined>;
  afterExecute?: (
    toolName: string,
    params: Record<string, unknown>,
    result: Record<string, unknown>,
  ) => Record<string, unknown> | Promise<Record<string, unknown>>;
}

export interface ExecutionPolicyConfig {
  planModeBlockedTools?: string[];
  shouldBlock?: (toolName: string, params: Record<string, unknown>) => string | undefined;
}

export interface StashOutputConfig {
  sandbox: Sandbox;
  tools: string[];
  dir?: string;
  pathFor?: (toolName: string, params: Record<string, unknown>, result: Record<string, unknown>) => string | undefined;
}

export interface OutputPolicyConfig {
  maxOutputLength?: number;
  redirectionThreshold?: number;
  excludeTools?: string[];
  truncate?: (text: string, maxLength: number) => string;
  hints?: Record<string, string>;
  buildHint?: (toolName: string, params: Record<string, unknown>, originalLength: number, result: Record<string, unknown>) => string | undefined;
  stashOutput?: StashOutputConfig;
}

export interface ContextConfig {
  executionPolicy?: ExecutionPolicyConfig;
  outputPolicy?: OutputPolicyConfig | false;
  extraTools?: ToolSet;
  layers?: ContextLayer[];
}

export interface AgentConfig {
  tools?: {
    Bash?: BashToolConfig;
    Read?: ToolConfig;
    Write?: ToolConfig;
    Edit?: ToolConfig;
    Glob?: ToolConfig;
    Grep?: ToolConfig;
    Patch?: ToolConfig;
    WebSearch?: ToolConfig;
    WebFetch?: ToolConfig;
  };
  askUser?: true | AskUserConfig;
  patch?: true | ToolConfig;
  planMode?:
    | boolean
    | { onEnter?: (reason: string) => void | Promise<void>; onPlanSubmit?: (plan: string) => boolean | undefined | Promise<boolean | undefined> };
  skill?: SkillConfig;
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

/** The tool set of `createAgentTools`: an AI SDK `ToolSet` with the six default tools typed. */
export type AgentTools = ToolSet & {
  Bash: BashTool;
  Read: ReadTool;
  Write: WriteTool;
  Edit: EditTool;
  Glob: GlobTool;
  Grep: GrepTool;
};

export interface AgentToolsResult {
  tools: AgentTools;
  planModeState?: PlanModeState;
  budget?: BudgetTracker;
  openRouterModels?: Map<string, ModelInfo> & { readonly source?: "openrouter" | "bundled" };
  contextLayers: ContextLayer[];
}

/** `createAgentTools`'s result for a given config: `budget`, `planModeState` and `openRouterModels` are there when the config asks for them. */
export type AgentToolsResultFor<C> = AgentToolsResult &
  (C extends { budget: BudgetConfig } ? { budget: BudgetTracker } : unknown) &
  (C extends { planMode: true | object } ? { planModeState: PlanModeState } : unknown) &
  (C extends { modelRegistry: ModelRegistryConfig } ? { openRouterModels: Map<string, ModelInfo> & { readonly source?: "openrouter" | "bundled" } } : unknown);

export declare const DEFAULT_CONFIG: Readonly<AgentConfig>;
export declare function createAgentTools<C extends AgentConfig = AgentConfig>(sandbox: Sandbox, config?: C): Promise<AgentToolsResultFor<C>>;

export declare function createBashTool(sandbox: Sandbox, config?: BashToolConfig): BashTool;
export declare function createReadTool(sandbox: Sandbox, config?: ToolConfig): ReadTool;
export declare function createWriteTool(sandbox: Sandbox, config?: ToolConfig): WriteTool;
export declare function createEditTool(sandbox: Sandbox, config?: ToolConfig): EditTool;
export declare function createGlobTool(sandbox: Sandbox, config?: ToolConfig): GlobTool;
export declare function createGrepTool(sandbox: Sandbox, config?: ToolConfig): GrepTool;
export declare function createPatchTool(sandbox: Sandbox, config?: ToolConfig): PatchTool;
export declare function createAskUserTool(config?: AskUserToolConfig): Tool<AskUserInput, never>;
export declare function createEnterPlanModeTool(
  state: PlanModeState,
  onEnter?: (reason: string) => void | Promise<void>,
): Tool<{ reason: string }, EnterPlanModeOutput | EnterPlanModeError>;
export declare function createExitPlanModeTool(
  state?: PlanModeState,
  onPlanSubmit?: (plan: string) => boolean | undefined | Promise<boolean | undefined>,
): Tool<{ plan: string }, ExitPlanModeOutput | ExitPlanModeError>;
export declare function createTodoWriteTool(state: { todos?: TodoItem[] }, onUpdate?: (todos: TodoItem[]) => void): Tool<TodoWriteInput, TodoWriteOutput | TodoWriteError>;
export declare function createTodoWriteTool(
  state: { todos?: TodoItem[] },
  config?: ToolConfig,
  onUpdate?: (todos: TodoItem[]) => void,
): Tool<TodoWriteInput, TodoWriteOutput | TodoWriteError>;
export declare function createSkillTool(config: SkillToolConfig): Tool<{ name: string }, SkillOutput | SkillError>;

export interface SubagentTypeConfig {
  model?: LanguageModel;
  systemPrompt?: string;
  tools?: string[];
  additionalTools?: ToolSet;
  stopWhen?: StopCondition<ToolSet> | StopCondition<ToolSet>[];
  prepareStep?: PrepareStepFunction;
  onStepFinish?: (step: StepResult<ToolSet>) => void | Promise<void>;
}
export interface TaskToolConfig {
  model: LanguageModel;
  tools: ToolSet;
  subagentTypes?: Record<string, SubagentTypeConfig>;
  defaultStopWhen?: StopCondition<ToolSet> | StopCondition<ToolSet>[];
  defaultOnStepFinish?: (event: SubagentStepEvent) => void | Promise<void>;
  streamWriter?: UIMessageStreamWriter;
  budget?: BudgetTracker;
}
export declare function createTaskTool(config: TaskToolConfig): Tool<TaskInput, TaskOutput | TaskError>;
export declare function createWebSearchTool(config: WebSearchConfig): Tool<WebSearchInput, WebSearchOutput | WebSearchError>;
export declare function createWebFetchTool(config: WebFetchConfig): Tool<WebFetchInput, WebFetchOutput | WebFetchError>;

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

// ---------------------------------------------------------------------------------------------
// Messages, context windows, middleware

export interface PruneMessagesConfig {
  targetTokens?: number;
  minSavingsThreshold?: number;
  protectLastNUserMessages?: number;
}
export declare function pruneMessages<M extends { role: string }>(messages: M[], options?: { maxTokens?: number; protectRecentUserMessages?: number }): M[];
export declare function pruneMessagesByTokens<M extends { role: string }>(messages: M[], config?: PruneMessagesConfig): M[];
export declare function estimateTokens(text: string): number;
export declare function estimateMessageTokens(message: unknown): number;
export declare function estimateMessagesTokens(messages: unknown[]): number;

export declare const anthropicPromptCacheMiddleware: LanguageModelMiddleware;
export declare const anthropicPromptCacheMiddlewareV2: LanguageModelMiddleware;

export declare function withContext<T extends Tool>(tool: T, toolName: string, layers: ContextLayer[]): T;
export declare function applyContextLayers<T extends ToolSet>(tools: T, layers: ContextLayer[]): T;
export declare function createExecutionPolicy(planModeState?: PlanModeState, config?: ExecutionPolicyConfig): ContextLayer;
export declare function createOutputPolicy(config?: OutputPolicyConfig): ContextLayer;
export declare function middleTruncate(text: string, maxLength: number): string;

// bashkit's types for compaction, context status and system context assembly (the functions are
// exported below and from system-context.d.mts).
export interface CompactConversationConfig {
  maxTokens: number;
  compactionThreshold?: number;
  protectRecentMessages?: number;
  summarizerModel: LanguageModel;
  taskContext?: string;
  summaryInstructions?: string;
}
export interface CompactConversationState {
  conversationSummary: string;
}
export interface CompactConversationResult {
  messages: ModelMessage[];
  state: CompactConversationState;
  didCompact: boolean;
}
export type ContextStatusLevel = "comfortable" | "elevated" | "high" | "critical";
export interface ContextMetrics {
  usedTokens: number;
  maxTokens: number;
  usagePercent: number;
}
export interface ContextStatus extends ContextMetrics {
  status: ContextStatusLevel;
  guidance?: string;
}
export interface ContextStatusConfig {
  elevatedThreshold?: number;
  highThreshold?: number;
  criticalThreshold?: number;
  highGuidance?: string | ((metrics: ContextMetrics) => string);
  criticalGuidance?: string | ((metrics: ContextMetrics) => string);
  knownTokenCount?: number;
}
export type ModelContextLimit =
  | "claude-opus-4-5"
  | "claude-sonnet-4-5"
  | "claude-haiku-4"
  | "gpt-4o"
  | "gpt-4-turbo"
  | "gpt-4"
  | "gpt-3.5-turbo"
  | "gemini-2.5-pro"
  | "gemini-2.5-flash";
export interface InstructionDiscoveryConfig {
  cwd?: string;
  filenames?: string[];
  rootMarkers?: string[];
  maxBytes?: number;
  globalPath?: string;
}
export interface DiscoveredInstructions {
  text: string;
  sources: Array<{ path: string; scope: "global" | "project" | "local"; bytes: number; truncated: boolean }>;
}
export interface EnvironmentContext {
  cwd: string;
  shell: string;
  platform: string;
  date: string;
  timezone?: string;
  gitBranch?: string;
  gitStatus?: string;
}
export interface EnvironmentContextConfig {
  git?: boolean;
  timezone?: boolean;
  custom?: Record<string, string>;
}
export interface ToolGuidanceConfig {
  tools: string[];
  hints?: Record<string, string>;
  guidelines?: string[];
}
export interface SystemContextConfig {
  instructions?: boolean | InstructionDiscoveryConfig;
  environment?: boolean | EnvironmentContextConfig;
  toolGuidance?: ToolGuidanceConfig;
}
export interface SystemContext {
  instructions: string | null;
  environment: string | null;
  toolGuidance: string | null;
  combined: string;
  meta: { instructionSources?: DiscoveredInstructions["sources"]; environmentContext?: EnvironmentContext };
}
export interface PrepareStepConfig {
  compaction?: CompactConversationConfig;
  contextStatus?: { maxTokens: number; config?: ContextStatusConfig };
  planModeState?: PlanModeState;
  extend?: PrepareStepFunction;
}

// ---------------------------------------------------------------------------------------------
// Debug tracing (`KNAP_DEBUG`, or bashkit's `BASHKIT_DEBUG`: `1`/`stderr`, `json`, `memory`, `file:<path>`)

export interface DebugEvent {
  id: string;
  ts: number;
  tool: string;
  event: "start" | "end" | "error";
  input?: unknown;
  output?: unknown;
  summary?: Record<string, unknown>;
  duration_ms?: number;
  parent?: string;
  error?: string;
}
export declare function isDebugEnabled(): boolean;
/** The events recorded in `memory` mode. */
export declare function getDebugLogs(): DebugEvent[];
export declare function clearDebugLogs(): void;
/** Reads `KNAP_DEBUG` / `BASHKIT_DEBUG` again (after a test changes it). */
export declare function reinitDebugMode(): void;

// ---------------------------------------------------------------------------------------------
// knap's own tools in the AI SDK

/** A knap tool object (`shellTools()` entries, `tool()`). */
export interface KnapTool {
  readonly name: string;
  readonly description: string;
  readonly input: object;
  readonly effect?: "read" | "write" | "idempotent" | "external";
  readonly timeoutMs?: number;
  execute(input: any, signal?: AbortSignal, context?: unknown): Promise<unknown> | unknown;
}

export interface ToAiSdkToolsOptions {
  /** knap's tool policy, judged in Rust before each call (a denial is the tool's error). */
  toolPolicy?: (input: {
    runId: string;
    agentId: string;
    agentPath: readonly string[];
    toolCallId: string;
    name: string;
    effect: "read" | "write" | "idempotent" | "external";
    args: Record<string, unknown>;
  }) => { deny: string } | undefined | void | Promise<{ deny: string } | undefined | void>;
  runId?: string;
  agentId?: string;
  agentPath?: string[];
}

/** knap's tools as AI SDK tools, keyed by name. */
export declare function toAiSdkTools(
  tools: readonly KnapTool[] | Readonly<Record<string, KnapTool>>,
  options?: ToAiSdkToolsOptions,
): Record<string, Tool<Record<string, unknown>, unknown>>;
export { discoverSkills, parseSkillMetadata, skillsToXml, loadSkillBundle, loadSkillBundles, fetchSkill, fetchSkills, setupAgentEnvironment } from "./skills.mjs";
export type { DiscoverSkillsOptions, SkillBundle, SkillContent, AgentEnvironmentConfig, SetupResult } from "./skills.mjs";
export { getContextStatus, contextNeedsAttention, contextNeedsCompaction, MODEL_CONTEXT_LIMITS } from "./context-status.mjs";
export declare class CompactionError extends Error {
  readonly name: "CompactionError";
}
export declare function compactConversation(messages: ModelMessage[], config: CompactConversationConfig, state?: CompactConversationState): Promise<CompactConversationResult>;
export declare function createAutoCompaction(config: CompactConversationConfig): {
  prepareStep: (args: { messages: ModelMessage[] }) => Promise<{ messages?: ModelMessage[] }>;
  getState: () => Readonly<CompactConversationState>;
};
export declare function createCompactConfig(modelId: string, summarizerModel: LanguageModel, overrides?: Partial<Omit<CompactConversationConfig, "summarizerModel">>): CompactConversationConfig;
export declare function createCompactConfigFromModels(modelId: string, summarizerModel: LanguageModel, modelsMap: Map<string, { contextLength?: number }>, overrides?: Partial<Omit<CompactConversationConfig, "summarizerModel">>): CompactConversationConfig;
export { discoverInstructions, collectEnvironment, formatEnvironment, buildToolGuidance, buildSystemContext, createPrepareStep } from "./system-context.mjs";
