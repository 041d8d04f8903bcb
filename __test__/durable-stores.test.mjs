// The store contract, run against every shipped backend: the disk store, SQLite (better-sqlite3)
// and a real PostgreSQL (node-postgres), both through SqlDurableStore, HttpDurableStore against a
// journal server on 127.0.0.1 and ObjectDurableStore over an in-memory ObjectStorage. Plus the
// Postgres scale-out: several worker processes racing to drive a set of runs on one database.
//
// PostgreSQL: set KNAP_TEST_POSTGRES_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres;
// `bash .ci/postgres.sh` starts a local one and prints its URL). Without it those tests are
// skipped and say why. A URL that is set but does not answer fails them.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

import { run, DiskDurableStore, SqlDurableStore, HttpDurableStore } from "../lib/index.mjs";
import { ObjectDurableStore } from "../lib/durable.mjs";
import { countSide, readSide, scenarioAgent, scenarioOptions } from "./fixtures/durable-scenario.mjs";
import { startProcess } from "./fixtures/processes.mjs";
import { startJournalServer, memoryObjectStorage, liveObjectLeases, expireObjectLease } from "./fixtures/remote-stores.mjs";

const require = createRequire(import.meta.url);
const WORKER = fileURLToPath(new URL("./fixtures/durable-worker.mjs", import.meta.url));
const CHILD = fileURLToPath(new URL("./fixtures/durable-child.mjs", import.meta.url));
const WATCHDOG = { timeout: 120_000 };
const POSTGRES_URL = process.env.KNAP_TEST_POSTGRES_URL;
const POSTGRES_SKIP =
  "KNAP_TEST_POSTGRES_URL is not set: PostgreSQL store tests need a server on 127.0.0.1 (run `bash .ci/postgres.sh` and export the URL it prints)";

// Cleanups that must outlive single tests (the shared pool, the tables), run when the file ends.
const atEnd = [];
after(async () => {
  for (const cleanup of atEnd.reverse()) await cleanup();
});

function tempDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-durable-store-"));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A journal line as the kernel writes it (the disk store's list() reads run_started). */
const started = (runId) =>
  JSON.stringify({ v: 2, at: "2026-01-01T00:00:00.000Z", type: "run_started", runId, agentId: "a", definitionSha256: "0".repeat(64), input: "go", sessionId: "s", denomination: "none", budgetSha256: "none", pid: 1 });
const turn = (n) => JSON.stringify({ v: 2, at: "2026-01-01T00:00:00.000Z", type: "turn", messages: [{ role: "user", content: `m${n}` }] });

async function rejectsWith(promise, code) {
  const error = await Promise.resolve()
    .then(() => promise)
    .then(
      () => assert.fail(`expected ${code}`),
      (e) => e,
    );
  assert.equal(error.code, code, error.message);
  assert.match(error.message, new RegExp(`^${code}`));
  return error;
}

// ---------------------------------------------------------------------------------------------
// Backends. Each `open()` returns { store(): a new store instance on the same backing data,
// expire(runId): make the current lease/lock stale, seqs(runId)?: the stored sequence numbers,
// leaseRows(runId)?: the lease rows }.

function diskBackend() {
  const root = path.join(tempDir(), "durable");
  return {
    name: "disk",
    leases: false,
    store: () => new DiskDurableStore(root),
    /**
     * The disk lock goes stale when its owner dies: plant a new owner file (the living owner's
     * flock stays on the old one) naming a dead pid.
     */
    async expire(runId) {
      const dead = spawn(process.execPath, ["-e", ""]);
      await new Promise((resolve) => dead.on("exit", resolve));
      const owner = path.join(new DiskDurableStore(root).runDir(runId), "lock.d", "owner.json");
      fs.rmSync(owner);
      fs.writeFileSync(owner, JSON.stringify({ pid: dead.pid }));
    },
  };
}

function betterSqliteExec(db) {
  return {
    exec(q, p) {
      const statement = db.prepare(q);
      return statement.reader ? statement.all(...p) : (statement.run(...p), []);
    },
  };
}

function sqliteBackend() {
  const Database = require("better-sqlite3");
  const db = new Database(path.join(tempDir(), "journal.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec(SqlDurableStore.schema("sqlite"));
  after(() => db.close());
  const sql = betterSqliteExec(db);
  return {
    name: "sqlite",
    leases: true,
    store: (wrap = (x) => x) => new SqlDurableStore({ sql: wrap(sql), dialect: "sqlite" }),
    expire: (runId) => db.prepare("UPDATE caveman_durable_journal_leases SET expires_at = 0 WHERE run_id = ?").run(runId),
    seqs: (runId) => db.prepare("SELECT seq FROM caveman_durable_journal WHERE run_id = ? ORDER BY seq").all(runId).map((r) => Number(r.seq)),
    leaseRows: (runId) => db.prepare("SELECT owner FROM caveman_durable_journal_leases WHERE run_id = ?").all(runId),
  };
}

let pgPool;
let pgTables = 0;
async function postgresPool() {
  if (!pgPool) {
    const { default: pg } = await import("pg");
    pgPool = new pg.Pool({ connectionString: POSTGRES_URL, max: 8 });
    atEnd.push(() => pgPool.end());
  }
  return pgPool;
}

/** A fresh table pair per backend instance, dropped when the file ends. */
async function postgresTable() {
  const pool = await postgresPool();
  const table = `knap_t${process.pid}_${pgTables++}_${randomBytes(3).toString("hex")}`;
  await pool.query(SqlDurableStore.schema("postgres", table));
  atEnd.push(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.query(`DROP TABLE IF EXISTS ${table}_leases`);
  });
  return table;
}

async function postgresBackend() {
  const pool = await postgresPool();
  const table = await postgresTable();
  const sql = { exec: async (q, p) => (await pool.query(q, [...p])).rows };
  return {
    name: "postgres",
    leases: true,
    table,
    store: (wrap = (x) => x) => new SqlDurableStore({ sql: wrap(sql), dialect: "postgres", table }),
    expire: (runId) => pool.query(`UPDATE ${table}_leases SET expires_at = 0 WHERE run_id = $1`, [runId]),
    seqs: async (runId) => (await pool.query(`SELECT seq FROM ${table} WHERE run_id = $1 ORDER BY seq`, [runId])).rows.map((r) => Number(r.seq)),
    leaseRows: async (runId) => (await pool.query(`SELECT owner FROM ${table}_leases WHERE run_id = $1`, [runId])).rows,
  };
}

async function httpBackend() {
  const server = await startJournalServer();
  atEnd.push(() => server.close());
  return {
    name: "http",
    leases: true,
    store: () => new HttpDurableStore({ url: server.url, token: server.token }),
    expire: (runId) => server.expire(runId),
    leaseRows: async (runId) => server.liveLeases(runId),
  };
}

function objectBackend() {
  const storage = memoryObjectStorage();
  return {
    name: "object",
    leases: true,
    storage,
    store: () => new ObjectDurableStore({ storage }),
    expire: (runId) => expireObjectLease(storage.objects, runId),
    leaseRows: async (runId) => liveObjectLeases(storage.objects, runId),
  };
}

const BACKENDS = [
  ["disk", async () => diskBackend()],
  ["sqlite", async () => sqliteBackend()],
  ["postgres", postgresBackend, POSTGRES_URL ? null : POSTGRES_SKIP],
  ["http", httpBackend],
  ["object", async () => objectBackend()],
];

// ---------------------------------------------------------------------------------------------
// The contract.

const CONTRACT = {
  async "round trip keeps order; an unknown run loads as []; list() names every journal"(b) {
    const s = b.store();
    assert.deepEqual(await s.load("never-written"), []);
    await s.append("rt-1", `${started("rt-1")}\n${turn(1)}\n`);
    await s.append("rt-2", `${started("rt-2")}\n`);
    await s.append("rt-1", `${turn(2)}\n`);
    await s.append("rt-1", `${turn(3)}\n${turn(4)}\n`);
    assert.deepEqual(await s.load("rt-1"), [started("rt-1"), turn(1), turn(2), turn(3), turn(4)]);
    assert.deepEqual(await b.store().load("rt-1"), await s.load("rt-1"), "another instance reads the same journal");
    assert.deepEqual(await s.load("rt-2"), [started("rt-2")]);
    const listed = await s.list();
    assert.ok(listed.includes("rt-1") && listed.includes("rt-2"), JSON.stringify(listed));
    assert.ok(!listed.includes("never-written"));
    if (b.seqs) assert.deepEqual(await b.seqs("rt-1"), [1, 2, 3, 4, 5]);
    await s.close("rt-1");
    await s.close("rt-1"); // idempotent
  },

  async "acquire is exclusive: a second acquirer gets cave_durable_run_locked until release"(b) {
    const [s1, s2] = [b.store(), b.store()];
    const release = await s1.acquire("lock-1");
    assert.equal(typeof release, "function");
    await rejectsWith(s2.acquire("lock-1"), "cave_durable_run_locked");
    await rejectsWith(b.store().acquire("lock-1"), "cave_durable_run_locked");
    // Another run is independent.
    const other = await s2.acquire("lock-2");
    await release();
    const again = await s2.acquire("lock-1");
    await rejectsWith(s1.acquire("lock-1"), "cave_durable_run_locked");
    await again();
    await other();
    await s1.close("lock-1");
    await s2.close("lock-1");
  },

  async "a scripted durable run crashes after its first turn and resumes through the store"(b) {
    const side = path.join(tempDir(), "side.jsonl");
    const def = scenarioAgent("short", side);
    const controller = new AbortController();
    // The first attempt stops in its second provider call (an abort: the run stays pending).
    const crash = run(
      def,
      "go",
      scenarioOptions(side, { runId: "resume-1", store: b.store() }, { signal: controller.signal }, {
        onCall: ({ turn: n }) => (n === 1 ? (controller.abort(), new Promise(() => {})) : undefined),
      }),
    );
    await assert.rejects(crash, /cave_run_aborted/);
    const lines = (await b.store().load("resume-1")).map((l) => JSON.parse(l));
    const types = lines.map((e) => e.type);
    assert.equal(types.includes("run_completed") || types.includes("run_failed"), false);
    assert.equal(types.filter((x) => x === "turn").length, 1);
    assert.equal(types.filter((x) => x === "call_settled").length, 1);
    assert.equal(types.filter((x) => x === "call_started").length, 2);
    // The resume: one provider call, shown one user message and ending in the tool result.
    const seen = [];
    const options = scenarioOptions(side, { runId: "resume-1", store: b.store() });
    const inner = options.streamFn;
    options.streamFn = (model, context, opts) => (seen.push(structuredClone(context.messages)), inner(model, context, opts));
    const result = await run(def, "go", options);
    assert.equal(seen.length, 1);
    assert.equal(seen[0].filter((m) => m.role === "user").length, 1);
    assert.equal(seen[0].at(-1).role, "toolResult");
    assert.equal(result.resumed, true);
    assert.equal(result.inputTokens, 100 + 110);
    assert.equal(result.outputTokens, 10 + 11);
    assert.deepEqual(result.receipt.resume, {
      attempts: 2,
      priorCalls: 1,
      priorEstimatedUsd: 0,
      priorTokens: 110,
      priorUnpriced: true,
      possibleDoubleCountCalls: 1,
      discardedPartialTurn: false,
    });
    assert.equal(countSide(side).lookup, 1);
    // Completed: a replay through a fresh store instance makes no call.
    const replay = await run(def, "go", scenarioOptions(side, { runId: "resume-1", store: b.store() }, {}, { refuse: true }));
    assert.deepEqual(replay, result);
  },

  async "a stale lock or expired lease is reaped by the next acquirer"(b) {
    const [s1, s2] = [b.store(), b.store()];
    await s1.append("reap-1", `${started("reap-1")}\n`);
    await s1.acquire("reap-1");
    await rejectsWith(s2.acquire("reap-1"), "cave_durable_run_locked");
    await b.expire("reap-1");
    const release = await s2.acquire("reap-1");
    if (b.leaseRows) assert.equal((await b.leaseRows("reap-1")).length, 1, "exactly one lease row survives");
    await rejectsWith(b.store().acquire("reap-1"), "cave_durable_run_locked");
    await release();
    await s1.close("reap-1");
  },

  async "concurrent appends all survive, as dense whole lines"(b) {
    const s = b.store();
    await s.append("dense-1", `${started("dense-1")}\n`);
    const n = 24;
    await Promise.all(Array.from({ length: n }, (_, i) => (i % 2 ? b.store() : s).append("dense-1", `${turn(i)}\n`)));
    const lines = await s.load("dense-1");
    assert.equal(lines.length, n + 1);
    assert.deepEqual(
      lines
        .slice(1)
        .map((l) => JSON.parse(l).messages[0].content)
        .sort(),
      Array.from({ length: n }, (_, i) => `m${i}`).sort(),
    );
    if (b.seqs) assert.deepEqual(await b.seqs("dense-1"), Array.from({ length: n + 1 }, (_, i) => i + 1));
  },
};

const LEASE_CONTRACT = {
  async "an append after a takeover fails with cave_durable_run_lock_lost and leaves the journal unchanged"(b) {
    const [s1, s2] = [b.store(), b.store()];
    await s1.acquire("lost-1");
    await s1.append("lost-1", `${started("lost-1")}\n`);
    await b.expire("lost-1");
    const release = await s2.acquire("lost-1");
    const before = await s2.load("lost-1");
    const error = await rejectsWith(s1.append("lost-1", `${turn(1)}\n`), "cave_durable_run_lock_lost");
    assert.match(error.message, /run "lost-1" is no longer held by this process/);
    await rejectsWith(s1.append("lost-1", `${turn(2)}\n`), "cave_durable_run_lock_lost");
    assert.deepEqual(await s2.load("lost-1"), before);
    await s2.append("lost-1", `${turn(3)}\n`);
    assert.equal((await s2.load("lost-1")).length, 2);
    await release();
    await s1.close("lost-1");
  },

  async "a takeover between the lease check and the insert still refuses the append (the lease is proven by the insert itself)"(b) {
    const s2 = b.store();
    let armed = false;
    // The executor of s1 lets another acquirer take the run over just before s1's journal insert.
    const s1 = b.store((sql) => ({
      async exec(q, p) {
        if (armed && /^INSERT INTO \w+ \(run_id, seq, line\)/.test(q)) {
          armed = false;
          await b.expire("race-1");
          await s2.acquire("race-1");
        }
        return sql.exec(q, p);
      },
    }));
    await s1.acquire("race-1");
    await s1.append("race-1", `${started("race-1")}\n`);
    armed = true;
    await rejectsWith(s1.append("race-1", `${turn(1)}\n`), "cave_durable_run_lock_lost");
    assert.equal(armed, false, "the takeover happened inside the append");
    assert.deepEqual(await s2.load("race-1"), [started("race-1")], "nothing was written by the lost holder");
    await s2.close("race-1");
    await s1.close("race-1");
  },

  async "close releases the lease this instance holds"(b) {
    const [s1, s2] = [b.store(), b.store()];
    await s1.acquire("close-1");
    await rejectsWith(s2.acquire("close-1"), "cave_durable_run_locked");
    await s1.close("close-1");
    await s1.close("close-1");
    const release = await s2.acquire("close-1");
    assert.equal((await b.leaseRows("close-1")).length, 1);
    await release();
    assert.equal((await b.leaseRows("close-1")).length, 0);
    // A release function kept past a later acquire of the same instance releases nothing.
    const stale = await s1.acquire("close-1");
    await stale();
    const fresh = await s1.acquire("close-1");
    await stale();
    await rejectsWith(s2.acquire("close-1"), "cave_durable_run_locked");
    await fresh();
    assert.equal((await b.leaseRows("close-1")).length, 0);
  },
};

// Only where a database arbitrates (the insert proves the lease): an object store has no
// transaction to prove it in, and a journal server checks the lease itself.
const SQL_ONLY = new Set(["a takeover between the lease check and the insert still refuses the append (the lease is proven by the insert itself)"]);

const OBJECT_CONTRACT = {
  // The reference's object-store case in place of 24 racing writers: each append is one
  // immutable chunk created if absent, so an interleaved writer never overwrites one.
  async "an interleaved lock-free writer never overwrites a chunk"(b) {
    const [holder, canceller] = [b.store(), b.store()];
    const release = await holder.acquire("chunks-1");
    await holder.append("chunks-1", `${started("chunks-1")}\n`);
    await canceller.append("chunks-1", `${turn(1)}\n`);
    await holder.append("chunks-1", `${turn(2)}\n`);
    const chunks = [...b.storage.objects.keys()].filter((k) => k.startsWith("caveman/durable/chunks-1/journal/"));
    assert.deepEqual(chunks, ["000000000001", "000000000002", "000000000003"].map((n) => `caveman/durable/chunks-1/journal/${n}`));
    assert.deepEqual(await b.store().load("chunks-1"), [started("chunks-1"), turn(1), turn(2)]);
    await release();
  },
};

for (const [name, open, skip] of BACKENDS) {
  const cases = { ...CONTRACT };
  if (name !== "disk") Object.assign(cases, LEASE_CONTRACT);
  if (name === "http" || name === "object") for (const title of SQL_ONLY) delete cases[title];
  if (name === "object") {
    delete cases["concurrent appends all survive, as dense whole lines"];
    Object.assign(cases, OBJECT_CONTRACT);
  }
  for (const [title, body] of Object.entries(cases)) {
    test(`${name}: ${title}`, WATCHDOG, async (t) => {
      if (skip) return t.skip(skip);
      await body(await open());
    });
  }
}

// ---------------------------------------------------------------------------------------------
// SqlDurableStore options.

test("SqlDurableStore: schema names both tables; bad dialect, table and lease TTL are refused", () => {
  // One string of DDL, passed straight to pool.query(...) / db.exec(...), as the reference's.
  const ddl = SqlDurableStore.schema("postgres", "my_journal");
  assert.equal(typeof ddl, "string");
  assert.match(ddl, /CREATE TABLE IF NOT EXISTS my_journal \(run_id TEXT NOT NULL, seq BIGINT NOT NULL, line TEXT NOT NULL, PRIMARY KEY \(run_id, seq\)\);/);
  assert.match(ddl, /CREATE TABLE IF NOT EXISTS my_journal_leases \(run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at BIGINT NOT NULL\);/);
  assert.match(SqlDurableStore.schema("sqlite"), /caveman_durable_journal /);
  const sql = { exec: () => [] };
  assert.throws(() => new SqlDurableStore({ sql, dialect: "mysql" }), (e) => e.code === "cave_durable_sql_dialect_unsupported");
  assert.throws(() => new SqlDurableStore({ sql, dialect: "sqlite", table: "Robert'); DROP TABLE x;--" }), (e) => e.code === "cave_durable_sql_table_invalid");
  assert.throws(() => new SqlDurableStore({ sql, dialect: "sqlite", leaseTtlMs: 2_999 }), (e) => e.code === "cave_durable_sql_lease_ttl_invalid");
  assert.throws(() => SqlDurableStore.schema("mysql"), (e) => e.code === "cave_durable_sql_dialect_unsupported");
  assert.throws(() => SqlDurableStore.schema("sqlite", "bad-name"), (e) => e.code === "cave_durable_sql_table_invalid");
});

test("SqlDurableStore: postgres placeholders are $1..$n, sqlite's are ?", async () => {
  const seen = [];
  const recorder = (dialect) => new SqlDurableStore({ dialect, sql: { exec: (q, p) => (seen.push({ dialect, q, p }), []) } });
  await recorder("postgres").load("ph-1");
  await recorder("sqlite").load("ph-1");
  assert.match(seen[0].q, /WHERE run_id = \$1 ORDER BY seq/);
  assert.match(seen[1].q, /WHERE run_id = \? ORDER BY seq/);
  assert.deepEqual(seen[0].p, ["ph-1"]);
});

// ---------------------------------------------------------------------------------------------
// Scale-out on PostgreSQL.


test("postgres scale-out: three worker processes race over a set of runs; each run is driven by exactly one worker, none twice", WATCHDOG, async (t) => {
  if (!POSTGRES_URL) return t.skip(POSTGRES_SKIP);
  const dir = tempDir();
  const table = await postgresTable();
  const pool = await postgresPool();
  const runIds = Array.from({ length: 9 }, (_, i) => `scale-${i}`);
  const sideOf = (runId) => path.join(dir, `${runId}.jsonl`);

  // One run crashed earlier (killed in its third model call); its lease has since expired.
  const crashed = startProcess(CHILD, {
    root: dir,
    runId: "scale-0",
    sideFile: sideOf("scale-0"),
    store: "postgres",
    postgresUrl: POSTGRES_URL,
    table,
    crash: { at: "model", turn: 2 },
  });
  const barrier = await crashed.until((m) => m.barrier || m.error || m.done);
  assert.ok(barrier.barrier, JSON.stringify(barrier));
  crashed.child.kill("SIGKILL");
  await crashed.exited;
  await pool.query(`UPDATE ${table}_leases SET expires_at = 0 WHERE run_id = $1`, ["scale-0"]);

  const workers = [0, 1, 2].map((w) =>
    startProcess(WORKER, { postgresUrl: POSTGRES_URL, table, dir, runIds: [...runIds.slice(w * 3), ...runIds.slice(0, w * 3)] }, "pipe"),
  );
  await Promise.all(workers.map((w) => w.until((m) => m.ready)));
  for (const w of workers) w.child.stdin.end("go\n");
  const reports = await Promise.all(workers.map((w) => w.until((m) => m.report)));
  await Promise.all(workers.map((w) => w.exited));
  const workerPids = new Set(reports.map((r) => r.pid));

  for (const runId of runIds) {
    const side = readSide(sideOf(runId));
    const drivers = new Set(side.filter((e) => e.model !== undefined && workerPids.has(e.pid)).map((e) => e.pid));
    assert.equal(drivers.size, 1, `${runId}: driven by ${[...drivers]}`);
    const counts = countSide(sideOf(runId));
    assert.deepEqual({ lookup: counts.lookup, upsert: counts.upsert, save: counts.save, send: counts.send }, { lookup: 1, upsert: 1, save: 1, send: 1 }, runId);
    const outcomes = reports.map((r) => r.runs[runId]);
    assert.ok(outcomes.every((o) => o === "driven" || o === "replayed" || o === "locked"), `${runId}: ${outcomes}`);
    assert.equal(outcomes.filter((o) => o === "driven").length, 1, `${runId}: ${outcomes}`);
    const { rows } = await pool.query(`SELECT line FROM ${table} WHERE run_id = $1 ORDER BY seq DESC LIMIT 1`, [runId]);
    assert.equal(JSON.parse(rows[0].line).type, "run_completed", runId);
    const seqs = (await pool.query(`SELECT seq FROM ${table} WHERE run_id = $1 ORDER BY seq`, [runId])).rows.map((r) => Number(r.seq));
    assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), `${runId}: dense sequence`);
  }
  const resumedRun = reports.map((r) => r.results["scale-0"]).find((x) => x?.resumed);
  assert.ok(resumedRun, "the crashed run was resumed by one worker");
  assert.equal(resumedRun.receipt.resume.priorCalls, 2);
  const { rows: leases } = await pool.query(`SELECT run_id FROM ${table}_leases`);
  assert.deepEqual(leases, [], "every lease was released");
});
