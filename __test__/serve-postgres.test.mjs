// Scale-out on PostgreSQL: three server processes share one database (SqlDurableStore, 5 s
// leases). 50 runs are submitted across them, one process is SIGKILLed in the middle: every run
// completes, no write tool executes twice (the side-effect log counts each call by its
// idempotency key), and the survivors' RecoveryReports resume exactly the runs the dead process
// left pending (each once; the others are skipped as locked while their driver lives).
import test, { after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";

import { SqlDurableStore } from "../lib/index.mjs";
import { durableRunSummary } from "../lib/durable.mjs";
import { startProcess } from "./fixtures/processes.mjs";
import { tempRoot, effects, post, get, waitFor } from "./serve-helpers.mjs";

const POSTGRES_URL = process.env.KNAP_TEST_POSTGRES_URL;
const SKIP = POSTGRES_URL
  ? false
  : "KNAP_TEST_POSTGRES_URL is not set: the PostgreSQL serve tests need a server on 127.0.0.1 (run `bash .ci/postgres.sh` and export the URL it prints)";
const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "serve-pg-child.mjs");
const RUNS = 50;

test("three servers on one PostgreSQL: SIGKILL one mid-way; every run completes once, reports account for every run", { skip: SKIP, timeout: 300_000 }, async () => {
  const { default: pg } = await import("pg");
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
  const table = `knap_serve_${process.pid}_${randomBytes(3).toString("hex")}`;
  await pool.query(SqlDurableStore.schema("postgres", table));
  const children = [];
  after(async () => {
    for (const c of children) c.child.kill("SIGKILL");
    await pool.query(`DROP TABLE IF EXISTS ${table}; DROP TABLE IF EXISTS ${table}_leases`);
    await pool.end();
  });
  const effectsDir = path.join(tempRoot(), "effects");
  for (let i = 0; i < 3; i++) {
    children.push(startProcess(CHILD, { url: POSTGRES_URL, table, effectsDir, steps: 3, modelDelayMs: 200 }));
  }
  const bases = [];
  for (const c of children) bases.push(`http://127.0.0.1:${(await c.until((m) => m.port)).port}`);
  const store = new SqlDurableStore({ sql: { exec: async (q, p) => (await pool.query(q, [...p])).rows }, dialect: "postgres", table });
  const owner = new Map();
  for (let i = 0; i < RUNS; i++) {
    const runId = `pg-run-${i}`;
    owner.set(runId, i % 3);
    const r = await post(bases[i % 3], "/runs", { runId, input: `job ${i}` });
    assert.equal(r.status, 202, JSON.stringify(r.body));
  }
  // Kill process 0 while its runs are mid-way: after some tool effects, before its runs end.
  await waitFor(() => effects(effectsDir).length >= 20, "first effects");
  children[0].child.kill("SIGKILL");
  await children[0].exited;
  const killedAt = Date.now();
  const victims = [...owner].filter(([, p]) => p === 0).map(([id]) => id);
  const pendingAtKill = [];
  const missingAtKill = [];
  for (const runId of victims) {
    const s = durableRunSummary(await store.load(runId));
    if (s.status === "pending") pendingAtKill.push(runId);
    if (s.status === "missing") missingAtKill.push(runId);
  }
  assert.ok(pendingAtKill.length > 0, "the kill landed while process 0 was driving runs");
  // A submit whose run never started (no journal yet) is lost with its process: the client's
  // idempotent resubmit covers it (refused as locked until the dead process's lease lapses).
  const summaries = await waitFor(async () => {
    const all = [];
    for (const runId of owner.keys()) {
      const s = (await get(bases[1 + (all.length % 2)], `/runs/${runId}`)).body;
      if (s.status === "missing") await post(bases[1], "/runs", { runId, input: `job ${runId.split("-").at(-1)}` });
      if (s.status !== "completed" && s.status !== "failed") return false;
      all.push([runId, s]);
    }
    return all;
  }, "every run settled", 240_000).catch(async (error) => {
    const states = [];
    for (const runId of owner.keys()) states.push(`${runId}:${durableRunSummary(await store.load(runId)).status}`);
    const leases = (await pool.query(`SELECT * FROM ${table}_leases`)).rows;
    throw new Error(`${error.message}\n${states.join(" ")}\nleases ${JSON.stringify(leases)}\n${JSON.stringify(children.map((c) => c.messages.slice(-5)))}`);
  });
  // Every run reached its outcome. It completed, unless the kill fell between a write's journaled
  // intent and its settlement: then the effect may or may not have happened, and the resume
  // fails it closed (cave_durable_tool_effect_uncertain) rather than run the write again; only a
  // run the dead process was driving can end that way.
  const uncertain = [];
  for (const [runId, s] of summaries) {
    if (s.status === "failed") {
      assert.match(s.message, /cave_durable_tool_effect_uncertain:record:/, runId);
      assert.ok(pendingAtKill.includes(runId), `${runId} failed but was not the dead process's`);
      uncertain.push(runId);
    } else assert.equal(s.result.text, "done 3", runId);
  }
  // No write executed twice: each tool call (idempotency key) has one line.
  const keys = effects(effectsDir).map(([key]) => key);
  assert.equal(new Set(keys).size, keys.length, "a write ran twice");
  // Resumed runs carry the mark of their resume.
  const resumedRuns = summaries.filter(([, s]) => s.status === "completed" && s.result.resumed).map(([id]) => id);
  // The survivors' reports: the runs the dead process left pending, each resumed exactly once,
  // and nothing else; a run another survivor is driving is only ever skipped as locked.
  const reports = [children[1], children[2]].flatMap((c) => c.messages.filter((m) => m.report).map((m) => m.report));
  const resumed = reports.flatMap((r) => r.resumed);
  // Each run the dead process left pending was resumed by a survivor, and each report entry is
  // a real resume (a \`resumed\` event in the journal). A survivor whose own lease lapsed under
  // load would show up here too, resumed by the other: allowed, and still never a double write.
  const sweepErrors = [children[1], children[2]].flatMap((c) => c.messages.filter((m) => m.error));
  assert.deepEqual(sweepErrors, []);
  for (const runId of pendingAtKill) {
    const journal = (await store.load(runId)).map((l) => JSON.parse(l));
    assert.ok(resumed.includes(runId), `${runId} was pending at the kill and no survivor resumed it: ${JSON.stringify(journal.map((e) => [e.type, e.at, e.pid]))} killed ${children[0].child.pid} at ${new Date(killedAt).toISOString()}`);
  }
  for (const runId of new Set(resumed)) {
    const attempts = (await store.load(runId)).filter((l) => JSON.parse(l).type === "resumed").length;
    assert.ok(attempts >= resumed.filter((id) => id === runId).length, `${runId}: reported resumed without a resume`);
  }
  for (const runId of pendingAtKill.filter((id) => !uncertain.includes(id))) assert.ok(resumedRuns.includes(runId), `${runId} completed without its resume mark`);
  for (const skip of reports.flatMap((r) => r.skipped)) assert.equal(skip.reason, "cave_durable_run_locked", JSON.stringify(skip));
  assert.ok(killedAt > 0);
  process.stdout.write(`${pendingAtKill.length} runs pending at the kill, ${missingAtKill.length} resubmitted, ${uncertain.length} failed closed (effect uncertain), ${keys.length} effects, ${resumed.length} resumes reported\n`);
});
