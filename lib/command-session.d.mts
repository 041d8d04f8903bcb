// `knap/command-session` (`@caveman-ai/agent/command-session`): interactive command sessions.

export type CommandSessionState = "running" | "exited" | "timed_out" | "killed" | "unknown_after_restart";

export interface CommandSessionSpillOptions {
  /** An existing absolute directory. */
  directory: string;
  /** Extra bytes kept per session, older than the memory ring. */
  maxBytes: number;
}

export interface CommandSessionRuntimeOptions {
  /** Default 64 (the coding agent: 8). */
  maxSessions?: number;
  /** Bytes kept in memory per session (default 4 MiB). */
  maxOutputBytes?: number;
  /** Default 64 KiB. */
  maxReadBytes?: number;
  /** Default 64 KiB. */
  maxInputBytes?: number;
  /** Default 120,000. */
  maxTimeoutMs?: number;
  /** Default 30,000. */
  maxWaitMs?: number;
  spill?: CommandSessionSpillOptions;
}

export interface CommandSessionStartOptions {
  command: string;
  args?: readonly string[];
  /** Absolute. */
  cwd: string;
  /** Exactly the environment the process sees (required). */
  env: Record<string, string>;
  stdin?: "pipe" | "closed";
  timeoutMs: number;
  /** Kills the session whenever it fires. */
  signal?: AbortSignal;
}

export interface CommandSessionStartResult {
  sessionId: string;
  state: "running";
}

export interface CommandSessionReadOptions {
  sessionId: string;
  cursor?: number;
  /** A literal byte string to find at or after the cursor. */
  query?: string;
  limit?: number;
  waitMs?: number;
  signal?: AbortSignal;
}

export interface CommandSessionWriteOptions {
  sessionId: string;
  input: string;
  closeStdin?: boolean;
  signal?: AbortSignal;
}

export interface CommandSessionWriteResult {
  sessionId: string;
  state: CommandSessionState;
  accepted: boolean;
  bytes: number;
  /** The output end before the write. */
  outputCursor: number;
}

export interface CommandSessionReadResult {
  sessionId: string;
  state: CommandSessionState;
  cursor: number;
  outputStart: number;
  nextCursor: number;
  outputEncoding: "utf8" | "base64";
  output: string;
  availableFrom: number;
  availableTo: number;
  truncatedBeforeCursor: boolean;
  hasMore: boolean;
  matchStart?: number | null;
  exitCode: number | null;
  exitSignal: string | null;
  spawnError?: string;
}

export interface CommandSessionSummary {
  sessionId: string;
  state: CommandSessionState;
  availableFrom: number;
  availableTo: number;
  stdinOpen: boolean;
  exitCode: number | null;
  exitSignal: string | null;
  spawnError?: string;
}

export interface CommandSessionRuntime {
  start(options: CommandSessionStartOptions): Promise<CommandSessionStartResult>;
  list(): readonly CommandSessionSummary[];
  read(options: CommandSessionReadOptions): Promise<CommandSessionReadResult>;
  write(options: CommandSessionWriteOptions): Promise<CommandSessionWriteResult>;
  kill(sessionId: string): Promise<CommandSessionReadResult>;
  close(): Promise<void>;
}

export declare function createCommandSessionRuntime(options?: CommandSessionRuntimeOptions): CommandSessionRuntime;
