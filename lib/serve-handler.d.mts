import type { AgentDefinition, DurableStore, RunOptions } from "./index.mjs";

export interface Principal {
  readonly id: string;
  readonly tenant?: string;
}

export interface RecoveryReport {
  readonly listable: boolean;
  readonly resumed: readonly string[];
  readonly sleeping: ReadonlyArray<{ readonly runId: string; readonly wakeAt: string }>;
  readonly skipped: ReadonlyArray<{ readonly runId: string; readonly reason: string }>;
}

export interface WebSocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "message" | "close" | "error", fn: (event: { data?: unknown }) => void): void;
}

export type PerRunOptionsFactory = (context: {
  sessionId: string;
  runId: string;
  principal?: Principal;
}) => Omit<RunOptions, "durable" | "controller" | "signal" | "conversation">;

export interface AgentHandlerOptions {
  definition: AgentDefinition;
  /** Single-principal bearer token, at least 16 characters. */
  token?: string;
  authenticate?: (request: Request) => Promise<Principal | undefined> | Principal | undefined;
  store?: DurableStore;
  rootDir?: string;
  /** Refused: knap does not run locked Cave builds (`cave_serve_build_unsupported`). */
  build?: never;
  runOptions?: PerRunOptionsFactory;
  /** Default 2. */
  maxConcurrentRuns?: number;
  /** Default 64. */
  maxQueuedRuns?: number;
  /** Default 1 MiB (1_048_576). */
  maxBodyBytes?: number;
  singleInstance?: boolean;
  upgrade?: (request: Request) => { response: Response; socket: WebSocketLike } | undefined;
}

export interface AgentHandler {
  fetch(request: Request): Promise<Response>;
  recover(): Promise<RecoveryReport>;
  nextWakeAt(): Promise<Date | undefined>;
  /** Default 30_000 ms. */
  close(graceMs?: number): Promise<void>;
}

export declare function createAgentHandler(options: AgentHandlerOptions): AgentHandler;
export declare const INSTANCE_LOCK_RUN_ID: "caveman.instance.lock";
/** 65,536 bytes of UTF-8 after `JSON.stringify`. */
export declare const SESSION_MESSAGE_CONTEXT_MAX_BYTES: number;
/** `text` + `\n\n<cave-message-context>\n` + compact JSON of `context` + `\n</cave-message-context>`. */
export declare function withMessageContext(text: string, context: unknown): string;
