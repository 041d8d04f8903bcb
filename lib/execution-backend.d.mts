// `knap/execution-backend` (`@caveman-ai/agent/execution-backend`): where the shell tools run.

export interface ExecRequest {
  command: string;
  args: readonly string[];
  /** Absolute working directory (a client path under the workspace for a remote backend). */
  cwd: string;
  /** Exactly the environment the command sees; nothing is inherited. */
  env: Record<string, string>;
  timeoutMs: number;
  /** One budget shared by stdout and stderr; going over sets `truncated`. */
  maxOutputBytes: number;
  signal?: AbortSignal;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  /** `null` when the process died of a signal, timed out or was aborted. */
  code: number | null;
  timedOut: boolean;
  truncated: boolean;
  /** The command could not start (`code` is then 127). */
  startFailed?: boolean;
}

export interface ExecutionBackend {
  readonly id: string;
  exec(request: ExecRequest): Promise<ExecResult>;
  readFile(path: string, options?: { maxBytes?: number }): Promise<Uint8Array>;
  writeFile(path: string, data: Uint8Array): Promise<void>;
  prepare?(): Promise<void>;
  snapshot?(): Promise<string>;
  restore?(snapshotId: string): Promise<void>;
  close?(): Promise<void>;
}

/** This host: commands in their own process group (killed on timeout and abort), Node-style file errors. */
export declare function localExecutionBackend(): ExecutionBackend;
/** The client of the HTTP execution-backend protocol (`knap-exec-server` serves it). */
export declare function httpExecutionBackend(options: {
  /** `https:`, or `http:` on a loopback host only. */
  url: string;
  /** Sent as `Authorization: Bearer <token>`. */
  token: string;
  /** Used instead of the global `fetch`. */
  fetch?: typeof fetch;
}): ExecutionBackend;
