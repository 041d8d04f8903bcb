import type { DurableStore } from "./index.mjs";
export { DiskDurableStore, SqlDurableStore, HttpDurableStore } from "./index.mjs";
export type { DurableStore, DurableRunOptions, SqlExecutor, HttpDurableStoreOptions } from "./index.mjs";
// ObjectDurableStore is a /durable name in the reference (not a root one).
/** The reference's object-storage adapter (S3, R2, GCS, Azure behind three methods). */
export interface ObjectStorage {
  get(key: string): Promise<Uint8Array | undefined>;
  /** `ifMatch: ""` means create only if absent; resolve `false` when the precondition failed. */
  put(key: string, data: Uint8Array, options?: { ifMatch?: string }): Promise<boolean | void>;
  list(prefix: string): Promise<readonly string[]>;
  /** The adapter's puts honour `ifMatch`: required to lock runs. */
  readonly conditionalPut?: boolean;
}
export declare class ObjectDurableStore implements DurableStore {
  constructor(options: {
    storage: ObjectStorage;
    /** Default `caveman/durable/`. */
    prefix?: string;
    /** Declares conditional puts (else the adapter's `conditionalPut`); locking needs them. */
    conditionalPut?: boolean;
    /** Default 30,000, at least 3,000 (`cave_durable_object_lease_ttl_invalid`). */
    leaseTtlMs?: number;
  });
  readonly prefix: string;
  load(runId: string): Promise<string[]>;
  append(runId: string, data: string): Promise<void>;
  acquire(runId: string): Promise<() => Promise<void>>;
  close(runId: string): Promise<void>;
  list(): Promise<string[]>;
}

export declare function defaultDurableRoot(rootDir?: string): string;

export type DurableRunSummary =
  | { readonly status: "missing" }
  | {
      readonly status: "pending";
      readonly runId: string;
      readonly agentId: string;
      readonly input: unknown;
      readonly startedAt: string;
      readonly attempts: number;
      readonly cancelRequested?: { readonly reason: string; readonly at: string };
      readonly wakeAt?: string;
      readonly sleepReason?: string;
    }
  | { readonly status: "completed"; readonly runId: string; readonly agentId: string; readonly result: unknown; readonly settledAt: string }
  | {
      readonly status: "failed";
      readonly runId: string;
      readonly agentId: string;
      readonly code: string;
      readonly message: string;
      readonly receipt: unknown | null;
      readonly settledAt: string;
    };

export type DurableCancelOutcome =
  | { readonly status: "requested"; readonly reason: string }
  | { readonly status: "already_requested"; readonly reason: string }
  | { readonly status: "already_settled"; readonly terminal: "completed" | "failed" }
  | { readonly status: "missing" };

export type DurableWakeOutcome =
  | { readonly status: "scheduled"; readonly wakeAt: string }
  | { readonly status: "cancelled" }
  | { readonly status: "already_settled"; readonly terminal: "completed" | "failed" }
  | { readonly status: "missing" };

export declare const DURABLE_CANCELLED_CODE: "cave_durable_run_cancelled";
export declare const DURABLE_JOURNAL_VERSION: 2;
export declare const MAX_DURABLE_SLEEP_MS: number;
export declare const MULTIMODAL_DURABLE_INPUT_PREFIX: string;
export declare function validateDurableRunId(runId: string): string;
export declare function durableRunSummary(lines: readonly string[]): DurableRunSummary;
export declare function durableInputIsReplayable(input: unknown): boolean;
export declare function requestDurableCancel(store: import("./index.mjs").DurableStore, runId: string, reason?: string): Promise<DurableCancelOutcome>;
export declare function durableCancelRequest(summary: DurableRunSummary): { readonly reason: string; readonly at: string } | undefined;
export declare function settleCancelledRun(store: import("./index.mjs").DurableStore, runId: string, reason?: string): Promise<DurableRunSummary>;
export declare function scheduleDurableWake(
  store: import("./index.mjs").DurableStore,
  runId: string,
  wakeAt: Date | string | number,
  reason?: string,
): Promise<DurableWakeOutcome>;
export declare function durableRunIsDue(summary: DurableRunSummary, now?: Date | number): boolean;
export declare function nextDurableWake(store: import("./index.mjs").DurableStore): Promise<Date | undefined>;
