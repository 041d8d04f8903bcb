// Durable stores. The journal itself (format, barriers, resume) is written and read in Rust;
// these are the places it lives. `DiskDurableStore` is the embedded default and runs natively;
// any object with `load`/`append`/`acquire`/`close` (and optionally `list`) works too.
import path from "node:path";
import { randomUUID } from "node:crypto";
import { native, codedError, call, rethrowNative } from "./native.mjs";
import { refuseUnknownKeys } from "./config-keys.mjs";
import { readCapped } from "./http-body.mjs";
import { durableRunSummary, durableInputIsReplayable } from "./durable-summary.mjs";

export { durableRunSummary, durableInputIsReplayable };

const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const TABLE = /^[a-z_][a-z0-9_]{0,54}$/;
// The one journal byte limit (256 MiB) lives in knap-core's limits.rs.
const MAX_JOURNAL_BYTES = native.DURABLE_MAX_JOURNAL_BYTES;
const DEFAULT_LEASE_TTL_MS = 30_000;
const MIN_LEASE_TTL_MS = 3_000;
const APPEND_RETRIES = 12;

let nativeOf;

/**
 * What the stores run by knap-core share (disk: `NativeDiskStore`; HTTP and object storage:
 * `NativeLeasedStore`): the store operations, and an `acquire` that resolves to a release
 * function for that lock only.
 */
class NativeDurableStore {
  #native;
  constructor(makeNative) {
    try {
      this.#native = makeNative();
    } catch (error) {
      rethrowNative(error);
    }
  }
  load(runId) {
    return call(this.#native.load(runId));
  }
  append(runId, data) {
    return call(this.#native.append(runId, data));
  }
  async acquire(runId) {
    const id = await call(this.#native.acquire(runId));
    let released = false;
    // Once; a lease store gives back this lease only (kept past a later acquire, a no-op).
    return async () => {
      if (released) return;
      released = true;
      await call(this.#native.release(runId, id));
    };
  }
  close(runId) {
    return call(this.#native.close(runId));
  }
  list() {
    return call(this.#native.list());
  }
  static {
    nativeOf = (store) => store.#native;
  }
}

/** The embedded default: `<root>/<runId>-<sha256(runId)[..10]>/journal.jsonl`, fsynced appends. */
export class DiskDurableStore extends NativeDurableStore {
  constructor(root) {
    if (typeof root !== "string" || root === "") throw codedError("cave_durable_store_root_required", "DiskDurableStore needs a root directory");
    super(() => new native.NativeDiskStore(path.resolve(root)));
  }
  get root() {
    return nativeOf(this).root;
  }
  runDir(runId) {
    return nativeOf(this).runDir(runId);
  }
  /** Manual override for a lock whose owner cannot be proven dead (see docs/durable.md). */
  breakLock(runId) {
    return call(nativeOf(this).breakLock(runId));
  }
}

/** The default store of a run: `<rootDir>/.caveman/runs/durable`. */
export function defaultDurableRoot(rootDir) {
  return path.resolve(rootDir ?? process.cwd(), ".caveman", "runs", "durable");
}

const isDuplicateKey = (error) =>
  error?.code === "23505" ||
  /SQLITE_CONSTRAINT_(PRIMARYKEY|UNIQUE)/.test(String(error?.code ?? "")) ||
  /UNIQUE constraint failed|duplicate key/i.test(String(error?.message ?? ""));

/**
 * A journal in SQL, reached only through the caller's `sql.exec(sql, params)` (sync or async,
 * returning rows): better-sqlite3, `node:sqlite`, node-postgres all work. Leases of 30 s,
 * renewed every 10 s; a lost lease poisons appends.
 */
export class SqlDurableStore {
  #exec;
  #dialect;
  #table;
  #ttl;
  #leases = new Map();
  #lost = new Map();

  constructor(options) {
    const { sql, dialect, table = "caveman_durable_journal", leaseTtlMs = DEFAULT_LEASE_TTL_MS } = options ?? {};
    if (dialect !== "sqlite" && dialect !== "postgres") {
      throw codedError("cave_durable_sql_dialect_unsupported", `cave_durable_sql_dialect_unsupported: ${JSON.stringify(dialect)}`);
    }
    if (typeof table !== "string" || !TABLE.test(table)) throw codedError("cave_durable_sql_table_invalid", `cave_durable_sql_table_invalid: ${JSON.stringify(table)}`);
    if (!Number.isSafeInteger(leaseTtlMs) || leaseTtlMs < MIN_LEASE_TTL_MS) {
      throw codedError("cave_durable_sql_lease_ttl_invalid", `cave_durable_sql_lease_ttl_invalid: leaseTtlMs must be an integer ≥ ${MIN_LEASE_TTL_MS}`);
    }
    if (!sql || typeof sql.exec !== "function") throw codedError("cave_durable_sql_executor_required", "SqlDurableStore needs sql.exec(sql, params)");
    this.#exec = sql.exec.bind(sql);
    this.#dialect = dialect;
    this.#table = table;
    this.#ttl = leaseTtlMs;
  }

  /**
   * The DDL to run once, as ONE string of statements (the store never issues DDL itself):
   * `pool.query(SqlDurableStore.schema("postgres"))`, `db.exec(SqlDurableStore.schema("sqlite"))`.
   */
  static schema(dialect, table = "caveman_durable_journal") {
    if (dialect !== "sqlite" && dialect !== "postgres") throw codedError("cave_durable_sql_dialect_unsupported", `cave_durable_sql_dialect_unsupported: ${JSON.stringify(dialect)}`);
    if (typeof table !== "string" || !TABLE.test(table)) throw codedError("cave_durable_sql_table_invalid", `cave_durable_sql_table_invalid: ${JSON.stringify(table)}`);
    return (
      `CREATE TABLE IF NOT EXISTS ${table} (run_id TEXT NOT NULL, seq BIGINT NOT NULL, line TEXT NOT NULL, PRIMARY KEY (run_id, seq));\n` +
      `CREATE TABLE IF NOT EXISTS ${table}_leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at BIGINT NOT NULL);\n`
    );
  }

  #sql(text) {
    if (this.#dialect === "sqlite") return text;
    let n = 0;
    return text.replace(/\?/g, () => `$${++n}`);
  }

  async #query(text, params = []) {
    const rows = await this.#exec(this.#sql(text), params);
    return Array.isArray(rows) ? rows : (rows?.rows ?? []);
  }

  async load(runId) {
    const rows = await this.#query(`SELECT line FROM ${this.#table} WHERE run_id = ? ORDER BY seq`, [runId]);
    let bytes = 0;
    return rows.map((row) => {
      bytes += String(row.line).length + 1;
      if (bytes > MAX_JOURNAL_BYTES) throw codedError("cave_durable_journal_limit", "cave_durable_journal_limit");
      return String(row.line);
    });
  }

  #lockLost(runId) {
    const error = codedError("cave_durable_run_lock_lost", `cave_durable_run_lock_lost: run "${runId}" is no longer held by this process`);
    this.#lost.set(runId, error);
    return error;
  }

  async append(runId, data) {
    const lost = this.#lost.get(runId);
    if (lost) throw lost;
    const lease = this.#leases.get(runId);
    const lines = String(data).split("\n").filter((line) => line !== "");
    const [{ total = 0 } = {}] = await this.#query(`SELECT COALESCE(SUM(LENGTH(line)), 0) AS total FROM ${this.#table} WHERE run_id = ?`, [runId]);
    if (Number(total) + data.length > MAX_JOURNAL_BYTES) throw codedError("cave_durable_journal_limit", "cave_durable_journal_limit");
    // The lease is proven by the insert itself (a row is written only while this instance's lease
    // row exists; Postgres share-locks it, so a takeover waits for the insert), not by an earlier
    // read that a takeover could slip past.
    const next = `(SELECT COALESCE(MAX(seq), 0) + 1 FROM ${this.#table} WHERE run_id = ?)`;
    const held = lease
      ? ` WHERE EXISTS (SELECT 1 FROM ${this.#table}_leases WHERE run_id = ? AND owner = ?${this.#dialect === "postgres" ? " FOR SHARE" : ""})`
      : "";
    const insert = `INSERT INTO ${this.#table} (run_id, seq, line) SELECT ?, ${next}, ?${held} RETURNING seq`;
    for (const line of lines) {
      for (let attempt = 0; ; attempt++) {
        let rows;
        try {
          rows = await this.#query(insert, lease ? [runId, runId, line, runId, lease.owner] : [runId, runId, line]);
        } catch (error) {
          if (!isDuplicateKey(error) || attempt + 1 >= APPEND_RETRIES) throw error;
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 4 * (attempt + 1)));
          continue;
        }
        if (rows.length === 0) throw this.#lockLost(runId);
        break;
      }
    }
  }

  async acquire(runId) {
    const now = Date.now();
    await this.#query(`DELETE FROM ${this.#table}_leases WHERE run_id = ? AND expires_at < ?`, [runId, now]);
    const owner = `${runId}:${randomUUID()}`;
    const rows = await this.#query(
      `INSERT INTO ${this.#table}_leases (run_id, owner, expires_at) VALUES (?, ?, ?) ON CONFLICT (run_id) DO NOTHING RETURNING run_id`,
      [runId, owner, now + this.#ttl],
    );
    if (rows.length === 0) throw codedError("cave_durable_run_locked", `cave_durable_run_locked: run "${runId}" is held by another live process`);
    this.#lost.delete(runId);
    const timer = setInterval(() => {
      this.#query(`UPDATE ${this.#table}_leases SET expires_at = ? WHERE run_id = ? AND owner = ?`, [Date.now() + this.#ttl, runId, owner])
        .then(async () => {
          const held = await this.#query(`SELECT owner FROM ${this.#table}_leases WHERE run_id = ? AND owner = ?`, [runId, owner]);
          if (held.length === 0) throw new Error("lease gone");
        })
        .catch(() => {
          this.#lost.set(runId, codedError("cave_durable_sql_lock_lost", `cave_durable_sql_lock_lost: lease renewal for "${runId}" failed`));
          clearInterval(timer);
        });
    }, Math.floor(this.#ttl / 3));
    timer.unref?.();
    const lease = { owner, timer };
    this.#leases.set(runId, lease);
    // Releases this lease only: a release function kept past a later acquire is a no-op.
    return async () => {
      if (this.#leases.get(runId) === lease) await this.close(runId);
    };
  }

  async close(runId) {
    const lease = this.#leases.get(runId);
    if (!lease) return;
    clearInterval(lease.timer);
    this.#leases.delete(runId);
    await this.#query(`DELETE FROM ${this.#table}_leases WHERE run_id = ? AND owner = ?`, [runId, lease.owner]);
  }

  async list() {
    const rows = await this.#query(`SELECT DISTINCT run_id FROM ${this.#table}`);
    return rows.map((row) => String(row.run_id)).filter((id) => RUN_ID.test(id)).sort();
  }
}

// ---------------------------------------------------------------------------------------------
// Remote stores. The store logic (wire contract, leases and their renewal, chunk sequences,
// limits, the journal text) is knap-core's (durable/http_store.rs, durable/object_store.rs);
// this layer only hands it the transport: the host's fetch, or an ObjectStorage adapter.

const adapterFailure = (error) => ({
  ok: false,
  code: typeof error?.code === "string" ? error.code : undefined,
  message: error instanceof Error ? error.message : String(error),
});

const bytes = (data) => new Uint8Array(data.buffer, data.byteOffset, data.byteLength);

const HTTP_STORE_OPTIONS = ["url", "token", "fetchFn", "lockTtlMs", "requestTimeoutMs"];
const numberOption = (v) => (v === undefined ? undefined : typeof v === "number" ? v : Number.NaN);

/**
 * `new HttpDurableStore({ url, token, fetchFn?, lockTtlMs?, requestTimeoutMs? })`: the journal
 * kept by a server speaking the reference's wire contract (docs/durable.md). `https:` unless
 * the host is localhost or 127.0.0.1; leases of `lockTtlMs` (30 s) renewed every third of it.
 */
export class HttpDurableStore extends NativeDurableStore {
  constructor(options) {
    const o = options ?? {};
    if (typeof o !== "object") throw codedError("cave_durable_http_url_invalid", "cave_durable_http_url_invalid: HttpDurableStore(options) needs an options object");
    refuseUnknownKeys("HttpDurableStore", o, HTTP_STORE_OPTIONS);
    const fetchFn = o.fetchFn ?? globalThis.fetch;
    if (typeof fetchFn !== "function") throw codedError("cave_durable_http_fetch_invalid", "cave_durable_http_fetch_invalid: fetchFn must be a function like fetch");
    const controllers = new Map();
    // One request for the core: never rejects (no answer is `ok: false` with why).
    const request = async ({ callId, method, url, headers, body, maxBytes }) => {
      const controller = new AbortController();
      controllers.set(callId, controller);
      try {
        const response = await fetchFn(url, { method, headers, body, signal: controller.signal });
        // Only a 200 carries a body the store reads; others are never read.
        if (response.status !== 200) {
          await response.body?.cancel?.().catch(() => {});
          return { ok: true, status: response.status };
        }
        const read = await readCapped(response, maxBytes);
        return { ok: true, status: response.status, body: read.bytes, truncated: read.truncated };
      } catch (error) {
        return adapterFailure(error);
      } finally {
        controllers.delete(callId);
      }
    };
    const abort = (callId) => {
      try {
        controllers.get(callId)?.abort();
      } catch {
        // An abort listener's failure is the fetch's; the request still ends.
      }
    };
    const url = o.url instanceof URL ? o.url.href : typeof o.url === "string" ? o.url : undefined;
    const token = typeof o.token === "string" ? o.token : undefined;
    super(() => native.NativeLeasedStore.http({ url, token, lockTtlMs: numberOption(o.lockTtlMs), requestTimeoutMs: numberOption(o.requestTimeoutMs) }, request, abort));
  }
}

const OBJECT_STORE_OPTIONS = ["storage", "prefix", "conditionalPut", "leaseTtlMs"];

/**
 * `new ObjectDurableStore({ storage, prefix?, conditionalPut?, leaseTtlMs? })`: the journal in
 * an object store through an `ObjectStorage` adapter (`get(key)` → `Uint8Array | undefined`,
 * `put(key, data, { ifMatch })` → `false` when the precondition failed, `list(prefix)` → keys).
 * Locking needs conditional puts, declared by `conditionalPut: true` on the options or on the
 * adapter.
 */
export class ObjectDurableStore extends NativeDurableStore {
  constructor(options) {
    const o = options ?? {};
    if (typeof o !== "object") throw codedError("cave_durable_object_storage_invalid", "cave_durable_object_storage_invalid: ObjectDurableStore(options) needs { storage }");
    refuseUnknownKeys("ObjectDurableStore", o, OBJECT_STORE_OPTIONS);
    const storage = o.storage;
    for (const method of ["get", "put", "list"]) {
      if (typeof storage?.[method] !== "function") {
        throw codedError("cave_durable_object_storage_invalid", `cave_durable_object_storage_invalid: ObjectDurableStore needs an ObjectStorage with ${method}()`);
      }
    }
    if (o.prefix !== undefined && typeof o.prefix !== "string") {
      throw codedError("cave_durable_object_prefix_invalid", "cave_durable_object_prefix_invalid: prefix must be a string");
    }
    const invalid = (method, what) => ({ ok: false, code: "cave_durable_object_storage_invalid", message: `cave_durable_object_storage_invalid: ObjectStorage.${method}() must ${what}` });
    const get = async ({ key }) => {
      try {
        const value = await storage.get(key);
        if (value === undefined || value === null) return { ok: true };
        if (!(value instanceof Uint8Array)) return invalid("get", "resolve to a Uint8Array or undefined");
        return { ok: true, data: Buffer.from(value.buffer, value.byteOffset, value.byteLength) };
      } catch (error) {
        return adapterFailure(error);
      }
    };
    const put = async ({ key, data, ifMatch }) => {
      try {
        const result = await storage.put(key, bytes(data), ifMatch === undefined || ifMatch === null ? undefined : { ifMatch });
        return { ok: true, written: result !== false };
      } catch (error) {
        return adapterFailure(error);
      }
    };
    const list = async ({ prefix }) => {
      try {
        const keys = await storage.list(prefix);
        if (!Array.isArray(keys) || !keys.every((k) => typeof k === "string")) return invalid("list", "resolve to an array of key strings");
        return { ok: true, keys };
      } catch (error) {
        return adapterFailure(error);
      }
    };
    const conditionalPut = o.conditionalPut === true || (o.conditionalPut === undefined && storage.conditionalPut === true);
    super(() => native.NativeLeasedStore.object({ prefix: o.prefix, conditionalPut, leaseTtlMs: numberOption(o.leaseTtlMs) }, get, put, list));
  }
  get prefix() {
    return nativeOf(this).prefix;
  }
}

/** The store reference the kernel gets: the disk store natively, anything else through JS. */
export function storeRef(store, rootDir) {
  if (store === undefined) return { kind: "disk", root: defaultDurableRoot(rootDir) };
  if (store instanceof DiskDurableStore) return { kind: "disk", root: store.root };
  for (const method of ["load", "append", "acquire", "close"]) {
    if (typeof store?.[method] !== "function") throw codedError("cave_durable_store_invalid", `cave_durable_store_invalid: durable.store needs a ${method}() method`);
  }
  return { kind: "js" };
}

/**
 * The kernel's `store` hook over a JS store: each operation resolves to `{ lines }` (load) or
 * `{}`, or `{ error: { message, code } }` with what the store threw; it never rejects.
 */
export function jsStoreHook(store) {
  const releases = new Map();
  const ops = {
    async load(req) {
      return { lines: Array.from(await store.load(req.runId), String) };
    },
    async append(req) {
      await store.append(req.runId, req.data);
    },
    async acquire(req) {
      releases.set(req.runId, await store.acquire(req.runId));
    },
    async release(req) {
      const release = releases.get(req.runId);
      releases.delete(req.runId);
      if (typeof release === "function") await release();
    },
    async close(req) {
      await store.close(req.runId);
    },
  };
  return async (req) => {
    try {
      return (await ops[req.op](req)) ?? {};
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      return { error: { message, code: typeof error?.code === "string" ? error.code : undefined } };
    }
  };
}

// ---------------------------------------------------------------------------------------------
// Summaries and control requests (`durable-control.ts`). The journal is read and the lines are
// built in Rust; these functions only move lines between the store and the core.

/** `DURABLE_CANCELLED_CODE`. */
export const DURABLE_CANCELLED_CODE = "cave_durable_run_cancelled";
/** `MAX_DURABLE_SLEEP_MS`: 30 days. */
export const MAX_DURABLE_SLEEP_MS = native.MAX_DURABLE_SLEEP_MS;
export const DURABLE_JOURNAL_VERSION = 2;
export const MULTIMODAL_DURABLE_INPUT_PREFIX = "\u0000cave.multimodal.v1:";

const nativeSync = (fn) => {
  try {
    return fn();
  } catch (error) {
    throw codedError(error?.code ?? "cave_durable_journal_corrupt", error?.message ?? String(error));
  }
};

/** `validateDurableRunId(runId)`: throws `cave_durable_run_id_invalid`. */
export function validateDurableRunId(runId) {
  if (typeof runId !== "string" || !RUN_ID.test(runId)) {
    throw codedError("cave_durable_run_id_invalid", "cave_durable_run_id_invalid: durable.runId must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}");
  }
  return runId;
}

/** The summary and the session facts of a journal, parsed on a worker (the serve sweep's view). */
export async function inspectDurableJournal(lines) {
  return JSON.parse(await call(native.durableInspect(Array.from(lines, String))));
}

const settledOutcome = (summary) => ({ status: "already_settled", terminal: summary.status });

/**
 * `requestDurableCancel(store, runId, reason?)`: appends `cancel_requested` without the run's
 * lock. `requested`, `already_requested`, `already_settled` (with `terminal`) or `missing`.
 */
export async function requestDurableCancel(store, runId, reason = "cancelled by request") {
  validateDurableRunId(runId);
  const line = nativeSync(() => native.durableCancelRequestedLine(String(reason)));
  const summary = durableRunSummary(await store.load(runId));
  if (summary.status === "missing") return { status: "missing" };
  if (summary.status !== "pending") return settledOutcome(summary);
  if (summary.cancelRequested) return { status: "already_requested", reason: summary.cancelRequested.reason };
  await store.append(runId, line);
  return { status: "requested", reason };
}

/** `durableCancelRequest(summary)`: the pending cancel request `{reason, at}`, if any. */
export function durableCancelRequest(summary) {
  return summary?.status === "pending" ? summary.cancelRequested : undefined;
}

/**
 * `settleCancelledRun(store, runId, reason?)`: under the run's lock, a pending run is settled as
 * failed with `cave_durable_run_cancelled` (`receipt: null`). Resolves to the run's summary.
 */
export async function settleCancelledRun(store, runId, reason) {
  validateDurableRunId(runId);
  const release = await store.acquire(runId);
  try {
    const summary = durableRunSummary(await store.load(runId));
    if (summary.status !== "pending") return summary;
    const why = reason ?? summary.cancelRequested?.reason ?? "cancelled by request";
    await store.append(runId, native.durableCancelledLine(String(why)));
    return durableRunSummary(await store.load(runId));
  } finally {
    await release();
    await store.close(runId);
  }
}

/**
 * `scheduleDurableWake(store, runId, wakeAt, reason?)`: appends `sleep_scheduled` (last write
 * wins). A pending cancel outranks it (`{status: "cancelled"}`).
 */
export async function scheduleDurableWake(store, runId, wakeAt, reason = "durable sleep") {
  validateDurableRunId(runId);
  const ms = wakeAt instanceof Date ? wakeAt.getTime() : typeof wakeAt === "number" ? wakeAt : Date.parse(String(wakeAt));
  if (!Number.isFinite(ms)) throw codedError("cave_durable_sleep_wake_invalid", "cave_durable_sleep_wake_invalid: wakeAt must be a valid date at most 30 days ahead");
  const line = nativeSync(() => native.durableSleepLine(ms, Date.now(), String(reason)));
  const summary = durableRunSummary(await store.load(runId));
  if (summary.status === "missing") return { status: "missing" };
  if (summary.status !== "pending") return settledOutcome(summary);
  if (summary.cancelRequested) return { status: "cancelled" };
  await store.append(runId, line);
  return { status: "scheduled", wakeAt: new Date(ms).toISOString() };
}

/** `durableRunIsDue(summary, now?)`: a pending run with no `wakeAt`, or one at or before `now`. */
export function durableRunIsDue(summary, now = new Date()) {
  if (summary?.status !== "pending") return false;
  if (summary.wakeAt === undefined) return true;
  return Date.parse(summary.wakeAt) <= (now instanceof Date ? now.getTime() : Number(now));
}

/**
 * `nextDurableWake(store)`: the earliest `wakeAt` of pending, uncancelled, sleeping runs
 * (overdue ones included); `undefined` when there is none or the store cannot list.
 */
export async function nextDurableWake(store) {
  if (typeof store?.list !== "function") return undefined;
  let earliest;
  for (const runId of await store.list()) {
    let summary;
    try {
      summary = (await inspectDurableJournal(await store.load(runId))).summary;
    } catch {
      continue;
    }
    if (summary.status !== "pending" || summary.cancelRequested || summary.wakeAt === undefined) continue;
    const at = Date.parse(summary.wakeAt);
    if (earliest === undefined || at < earliest) earliest = at;
  }
  return earliest === undefined ? undefined : new Date(earliest);
}
