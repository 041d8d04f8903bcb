// HttpDurableStore and ObjectDurableStore beyond the shared store contract (durable-stores.test.mjs
// runs that against both): their options and error codes through the JS surface, a process
// SIGKILLed mid-run and resumed through each store without re-running a settled write, lock
// exclusivity across processes, and createAgentServer over each (recovery sweep, sleeping and
// cancelled runs, nextWakeAt, the single-instance lease). Everything on 127.0.0.1 or in memory.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { run, HttpDurableStore } from "../lib/index.mjs";
import { ObjectDurableStore } from "../lib/durable.mjs";
import * as durable from "../lib/durable.mjs";
import { fauxModel } from "../lib/testing.mjs";
import { createAgentServer } from "../lib/serve.mjs";
import { createAgentHandler } from "../lib/serve-handler.mjs";
import { countSide, scenarioAgent, scenarioOptions } from "./fixtures/durable-scenario.mjs";
import { startProcess } from "./fixtures/processes.mjs";
import {
  startJournalServer,
  startObjectServer,
  memoryObjectStorage,
  httpObjectStorage,
  expireObjectLease,
  JOURNAL_TOKEN,
} from "./fixtures/remote-stores.mjs";
import { TOKEN, JSON_AUTH, AUTH, tempRoot, servedAgent, stepsModel, runOptionsFor, effects, post, get, waitFor } from "./serve-helpers.mjs";

const CHILD = fileURLToPath(new URL("./fixtures/durable-child.mjs", import.meta.url));
const SERVE_CHILD = fileURLToPath(new URL("./fixtures/serve-store-child.mjs", import.meta.url));
const WATCHDOG = { timeout: 180_000 };

const closers = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

function tempDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-remote-store-"));
  closers.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const codeOf = (fn) => {
  try {
    fn();
  } catch (error) {
    assert.match(error.message, new RegExp(`^${error.code}`), error.message);
    return error.code;
  }
  return "ok";
};

async function rejectsWith(promise, code) {
  const error = await promise.then(
    () => assert.fail(`expected ${code}`),
    (e) => e,
  );
  assert.equal(error.code, code, error.message);
  return error;
}

// ---------------------------------------------------------------------------------------------
// Options and codes.

test("HttpDurableStore: options are refused with the reference's codes (and knap's for what the notes leave open)", () => {
  const ok = { url: "https://journal.example.com/v1", token: "t" };
  const make = (o) => () => new HttpDurableStore(o);
  assert.equal(codeOf(make(ok)), "ok");
  assert.equal(codeOf(make({ ...ok, url: "http://localhost:8080/" })), "ok");
  assert.equal(codeOf(make({ ...ok, url: "http://127.0.0.1:9" })), "ok");
  assert.equal(codeOf(make({ ...ok, url: new URL("https://journal.example.com") })), "ok");
  for (const url of ["http://journal.example.com", "http://10.0.0.1", "http://localhost.example.com"]) {
    assert.equal(codeOf(make({ ...ok, url })), "cave_durable_http_insecure", url);
  }
  for (const url of [undefined, "", "journal.example.com", 42, "https://h/?q=1"]) {
    assert.equal(codeOf(make({ ...ok, url })), "cave_durable_http_url_invalid", String(url));
  }
  for (const token of [undefined, "", 12]) assert.equal(codeOf(make({ ...ok, token })), "cave_durable_http_token_required", String(token));
  for (const lockTtlMs of [2_999, 0, "30000", 3_000.5]) assert.equal(codeOf(make({ ...ok, lockTtlMs })), "cave_durable_http_lock_ttl_invalid", String(lockTtlMs));
  assert.equal(codeOf(make({ ...ok, lockTtlMs: 3_000 })), "ok");
  for (const requestTimeoutMs of [0, -1, 1.5, "10"]) {
    assert.equal(codeOf(make({ ...ok, requestTimeoutMs })), "cave_durable_http_request_timeout_invalid", String(requestTimeoutMs));
  }
  assert.equal(codeOf(make({ ...ok, fetchFn: "fetch" })), "cave_durable_http_fetch_invalid");
  const unknown = assert.throws(make({ ...ok, lockTTLMs: 5_000 }), (e) => e.code === "cave_config_unknown_key" && /"lockTTLMs"/.test(e.message) && /did you mean "lockTtlMs"/.test(e.message));
  assert.equal(unknown, undefined);
});

test("ObjectDurableStore: options are refused with their codes; conditionalPut is declared on the options or the adapter", async () => {
  const storage = memoryObjectStorage({ conditionalPut: false });
  const make = (o) => () => new ObjectDurableStore(o);
  assert.equal(codeOf(make({ storage })), "ok");
  assert.equal(codeOf(make({})), "cave_durable_object_storage_invalid");
  assert.equal(codeOf(make({ storage: { get() {}, put() {} } })), "cave_durable_object_storage_invalid");
  assert.equal(codeOf(make({ storage, leaseTtlMs: 2_999 })), "cave_durable_object_lease_ttl_invalid");
  assert.equal(codeOf(make({ storage, prefix: 7 })), "cave_durable_object_prefix_invalid");
  assert.equal(codeOf(make({ storage, prefx: "x/" })), "cave_config_unknown_key");
  // Without conditional puts a run cannot be locked: refused before anything is written.
  const e = await rejectsWith(new ObjectDurableStore({ storage }).acquire("r"), "cave_durable_object_conditional_put_required");
  assert.match(e.message, /^cave_durable_object_conditional_put_required: /);
  assert.equal(storage.objects.size, 0);
  // Declared on the options, or on the adapter; a custom prefix is used for every key.
  const viaOptions = new ObjectDurableStore({ storage, conditionalPut: true, prefix: "tenant-a/" });
  const release = await viaOptions.acquire("r");
  await viaOptions.append("r", "{}\n");
  assert.deepEqual([...storage.objects.keys()].sort(), ["tenant-a/r/journal/000000000001", "tenant-a/r/lease/000000000001"]);
  await release();
  const declared = memoryObjectStorage();
  await (await new ObjectDurableStore({ storage: declared }).acquire("r"))();
  assert.deepEqual([...declared.objects.keys()], ["caveman/durable/r/lease/000000000001"]);
  // conditionalPut: false on the options overrides the adapter's declaration.
  await rejectsWith(new ObjectDurableStore({ storage: declared, conditionalPut: false }).acquire("r"), "cave_durable_object_conditional_put_required");
  // A declared adapter whose conditional puts always fail never gets a lease.
  const refusing = { ...memoryObjectStorage(), put: async () => false };
  await rejectsWith(new ObjectDurableStore({ storage: refusing }).acquire("r"), "cave_durable_run_locked");
});

test("ObjectDurableStore: of eight contenders for a free or expired lease exactly one wins (create-if-absent decides)", async () => {
  const storage = memoryObjectStorage();
  for (const round of [1, 2, 3]) {
    const outcomes = await Promise.allSettled(Array.from({ length: 8 }, () => new ObjectDurableStore({ storage }).acquire("contended")));
    const winners = outcomes.filter((o) => o.status === "fulfilled");
    assert.equal(winners.length, 1, `round ${round}`);
    assert.ok(outcomes.filter((o) => o.status === "rejected").every((o) => o.reason.code === "cave_durable_run_locked"));
    // The winner's lease lapses: the next round takes generation round + 1.
    expireObjectLease(storage.objects, "contended");
  }
  const generations = [...storage.objects.keys()].filter((k) => k.startsWith("caveman/durable/contended/lease/"));
  assert.deepEqual(generations, [1, 2, 3].map((g) => `caveman/durable/contended/lease/${String(g).padStart(12, "0")}`));
});

test("ObjectStorage adapter failures: a bad return is cave_durable_object_storage_invalid, a throw is cave_durable_store_failed with its message", async () => {
  const base = memoryObjectStorage();
  const store = (overrides) => new ObjectDurableStore({ storage: { ...base, ...overrides } });
  await rejectsWith(store({ list: async () => "not a list" }).load("r"), "cave_durable_object_storage_invalid");
  await base.put("caveman/durable/r/journal/000000000001", Buffer.from("{}\n"));
  await rejectsWith(store({ get: async () => "text" }).load("r"), "cave_durable_object_storage_invalid");
  const e = await rejectsWith(store({ get: async () => { throw new Error("bucket unreachable"); } }).load("r"), "cave_durable_store_failed");
  assert.match(e.message, /^cave_durable_store_failed: get journal chunk: bucket unreachable$/);
  const p = await rejectsWith(store({ put: async () => { throw new Error("403 Forbidden"); } }).append("r", "{}\n"), "cave_durable_store_failed");
  assert.match(p.message, /put journal chunk: 403 Forbidden/);
  // A chunk without its newline (a foreign writer) is corrupt, not glued to the next line.
  await base.put("caveman/durable/r/journal/000000000002", Buffer.from('{"v":2'));
  await rejectsWith(new ObjectDurableStore({ storage: base }).load("r"), "cave_durable_journal_corrupt");
});

test("HttpDurableStore over fetch: the bearer token on every request, HTTP failures as cave_durable_http_* codes, the request timeout aborts the fetch", async () => {
  const server = await startJournalServer();
  closers.push(() => server.close());
  const store = new HttpDurableStore({ url: server.url, token: server.token });
  await store.append("a", "{}\n");
  await store.load("a");
  await store.list();
  await (await store.acquire("a"))();
  assert.ok(server.log.length >= 5);
  assert.ok(server.log.every((r) => r.authorization === `Bearer ${JOURNAL_TOKEN}`));
  assert.deepEqual(server.log.slice(-2).map((r) => [r.method, r.path, Object.keys(r.body).sort()]), [
    ["POST", "/runs/a/lock", ["ttlMs"]],
    ["DELETE", "/runs/a/lock", ["token"]],
  ]);
  // Failures by route.
  const wrong = new HttpDurableStore({ url: server.url, token: "not-the-token" });
  const unauthorized = await rejectsWith(wrong.load("a"), "cave_durable_http_load_failed");
  assert.equal(unauthorized.message, `cave_durable_http_load_failed: GET ${server.url}/runs/a/journal answered HTTP 401`);
  server.script.set("GET /runs/b/journal", { status: 500, body: "" });
  await rejectsWith(store.load("b"), "cave_durable_http_load_failed");
  server.script.set("POST /runs/b/journal", { status: 507, body: "" });
  await rejectsWith(store.append("b", "{}\n"), "cave_durable_http_append_failed");
  server.script.set("POST /runs/b/lock", { status: 500, body: "" });
  await rejectsWith(store.acquire("b"), "cave_durable_http_lock_failed");
  server.script.set("POST /runs/b/lock", { status: 200, body: { lease: "x" } });
  await rejectsWith(store.acquire("b"), "cave_durable_http_lock_response_invalid");
  server.script.set("GET /runs", { status: 200, body: { runs: [] } });
  await rejectsWith(store.list(), "cave_durable_http_list_invalid");
  server.script.set("GET /runs", { status: 503, body: "" });
  await rejectsWith(store.list(), "cave_durable_http_list_failed");
  // A journal that ends mid-line is corrupt (appending after it would glue two lines).
  server.script.set("GET /runs/c/journal", { status: 200, body: '{"v":2}\n{"v":2,"at"' });
  await rejectsWith(store.load("c"), "cave_durable_journal_corrupt");
  // A fetch that never answers: refused after requestTimeoutMs, and its signal aborted.
  let signal;
  const hanging = new HttpDurableStore({
    url: server.url,
    token: server.token,
    requestTimeoutMs: 100,
    fetchFn: (_url, init) => ((signal = init.signal), new Promise(() => {})),
  });
  const late = await rejectsWith(hanging.load("d"), "cave_durable_http_load_failed");
  assert.match(late.message, /failed: no answer within 100 ms$/);
  await waitFor(() => signal?.aborted, "the fetch's abort");
  // Nobody listening.
  const gone = await startJournalServer();
  await gone.close();
  const refused = await rejectsWith(new HttpDurableStore({ url: gone.url, token: "t" }).load("a"), "cave_durable_http_load_failed");
  assert.match(refused.message, /failed: /);
});

test("leases are renewed every third of their TTL by the store itself; a renewal the server refuses poisons the run's appends (cave_durable_http_lock_lost)", async () => {
  const server = await startJournalServer();
  closers.push(() => server.close());
  const store = new HttpDurableStore({ url: server.url, token: server.token, lockTtlMs: 3_000 });
  const release = await store.acquire("renewed");
  const renewals = () => server.log.filter((r) => r.path === "/runs/renewed/lock/renew");
  await waitFor(() => renewals().length >= 2, "two renewals");
  assert.deepEqual(renewals()[0].body, { token: server.locks.get("renewed").token, ttlMs: 3_000 });
  await store.append("renewed", "{}\n");
  // The server hands the run to someone else: the next renewal is refused (409). (Its journal
  // route is scripted to accept, so only the renewal can tell this store it lost the run.)
  server.script.set("POST /runs/renewed/journal", { status: 204 });
  server.locks.set("renewed", { token: "someone-else", expiresAt: Date.now() + 60_000 });
  const e = await waitFor(() => store.append("renewed", "{}\n").then(() => false, (error) => error), "the lost lease");
  assert.equal(e.code, "cave_durable_http_lock_lost");
  assert.match(e.message, /^cave_durable_http_lock_lost: the lease of run "renewed" could not be renewed \(POST .*\/lock\/renew answered HTTP 409\)/);
  const seen = renewals().length;
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  assert.equal(renewals().length, seen, "renewals stopped");
  await release();
  // An object lease: the holder rewrites its own key with a later expiry.
  const storage = memoryObjectStorage();
  const objects = new ObjectDurableStore({ storage, leaseTtlMs: 3_000 });
  const releaseObject = await objects.acquire("renewed");
  const key = "caveman/durable/renewed/lease/000000000001";
  const first = JSON.parse(storage.objects.get(key)).expiresAt;
  await waitFor(() => JSON.parse(storage.objects.get(key)).expiresAt > first, "a renewed object lease");
  await releaseObject();
  assert.equal(JSON.parse(storage.objects.get(key)).expiresAt, 0);
});

// ---------------------------------------------------------------------------------------------
// Crash and resume across processes.

async function remoteBackends() {
  const journal = await startJournalServer();
  const bucket = await startObjectServer();
  closers.push(() => journal.close(), () => bucket.close());
  return [
    {
      name: "http",
      child: { store: "http", journalUrl: journal.url, journalToken: journal.token },
      store: () => new HttpDurableStore({ url: journal.url, token: journal.token }),
      expire: (runId) => journal.expire(runId),
      expireAll: () => journal.expireAll(),
    },
    {
      name: "object",
      child: { store: "object", objectUrl: bucket.url },
      store: () => new ObjectDurableStore({ storage: httpObjectStorage(bucket.url) }),
      expire: (runId) => expireObjectLease(bucket.objects, runId),
      expireAll: () => {
        const runs = new Set([...bucket.objects.keys()].map((k) => /^caveman\/durable\/([^/]+)\/lease\//.exec(k)?.[1]).filter(Boolean));
        for (const runId of runs) expireObjectLease(bucket.objects, runId);
      },
    },
  ];
}

const backends = await remoteBackends();

for (const b of backends) {
  test(`${b.name}: a process SIGKILLed mid-run holds the run while alive; another resumes it through the store without re-running a settled write`, WATCHDOG, async () => {
    const dir = tempDir();
    const sideFile = path.join(dir, "side.jsonl");
    const runId = `crash-${b.name}`;
    const child = startProcess(CHILD, { runId, sideFile, ...b.child, crash: { at: "model", turn: 3 } });
    const stopped = await child.until((m) => m.barrier || m.done || m.error);
    assert.equal(stopped.barrier, "model:3", JSON.stringify(stopped));
    const def = scenarioAgent("full", sideFile);
    // Alive, the child holds the run: this process cannot drive it.
    await rejectsWith(run(def, "go", scenarioOptions(sideFile, { runId, store: b.store() })), "cave_durable_run_locked");
    child.child.kill("SIGKILL");
    assert.equal((await child.exited).signal, "SIGKILL");
    assert.deepEqual(countSide(sideFile), { model: 4, lookup: 1, upsert: 1, save: 1, send: 0 });
    // Still locked until its lease lapses (the dead process cannot release it).
    await rejectsWith(run(def, "go", scenarioOptions(sideFile, { runId, store: b.store() })), "cave_durable_run_locked");
    b.expire(runId);
    const result = await run(def, "go", scenarioOptions(sideFile, { runId, store: b.store() }));
    assert.equal(result.resumed, true);
    assert.equal(result.text, "done");
    assert.equal(result.receipt.resume.attempts, 2);
    assert.deepEqual(countSide(sideFile), { model: 6, lookup: 1, upsert: 1, save: 1, send: 1 }, "the settled write (save) did not run again");
    const events = (await b.store().load(runId)).map((l) => JSON.parse(l));
    assert.deepEqual(events.filter((e) => e.type === "tool_settled").map((e) => e.name), ["lookup", "upsert", "save", "send"]);
    assert.equal(events.at(-1).type, "run_completed");
    // A replay through a fresh store instance makes no call at all.
    const replay = await run(def, "go", scenarioOptions(sideFile, { runId, store: b.store() }, {}, { refuse: true }));
    assert.deepEqual(replay, result);
  });

  test(`${b.name}: killed inside a write after its effect: the resume through the store refuses (effect uncertain), the write runs once`, WATCHDOG, async () => {
    const dir = tempDir();
    const sideFile = path.join(dir, "side.jsonl");
    const runId = `uncertain-${b.name}`;
    const child = startProcess(CHILD, { runId, sideFile, ...b.child, crash: { at: "tool", tool: "save", when: "after" } });
    const stopped = await child.until((m) => m.barrier || m.done || m.error);
    assert.equal(stopped.barrier, "after-work:save", JSON.stringify(stopped));
    child.child.kill("SIGKILL");
    await child.exited;
    b.expire(runId);
    const def = scenarioAgent("full", sideFile);
    const error = await rejectsWith(run(def, "go", scenarioOptions(sideFile, { runId, store: b.store() })), "cave_agent_run_failed");
    assert.match(error.message, new RegExp(`cave_durable_tool_effect_uncertain:save:call-2-0-${stopped.pid}`));
    assert.deepEqual(countSide(sideFile), { model: 3, lookup: 1, upsert: 1, save: 1, send: 0 });
    const types = (await b.store().load(runId)).map((l) => JSON.parse(l).type);
    assert.deepEqual(types.slice(-2), ["resumed", "run_failed"]);
  });
}

// ---------------------------------------------------------------------------------------------
// Serving over the remote stores.

for (const b of backends) {
  test(`${b.name}: createAgentServer over the store: one instance at a time, a killed server's runs resumed by the next one's sweep, each write once`, WATCHDOG, async () => {
    const effectsDir = path.join(tempRoot(), "effects");
    const config = { ...b.child, effectsDir, steps: 3, modelDelayMs: 250 };
    const first = startProcess(SERVE_CHILD, config);
    closers.push(() => first.child.kill("SIGKILL"));
    const { port } = await first.until((m) => m.port || m.error);
    assert.ok(port, JSON.stringify(first.messages));
    const base = `http://127.0.0.1:${port}`;
    // A second instance over the same store refuses to listen while the first holds the lease.
    const second = startProcess(SERVE_CHILD, config);
    const refused = await second.until((m) => m.port || m.error);
    assert.deepEqual([refused.error?.code, refused.error?.cause], ["cave_serve_instance_already_active", "cave_durable_run_locked"], JSON.stringify(refused));
    const runIds = ["job-a", "job-b", "job-c"].map((id) => `${id}-${b.name}`);
    for (const runId of runIds) assert.equal((await post(base, "/runs", { runId, input: `go ${runId}` })).status, 202);
    await waitFor(() => effects(effectsDir).length >= 2, "the first effects");
    first.child.kill("SIGKILL");
    await first.exited;
    const store = b.store();
    const pendingAtKill = [];
    for (const runId of runIds) if (durable.durableRunSummary(await store.load(runId)).status === "pending") pendingAtKill.push(runId);
    assert.ok(pendingAtKill.length > 0, "the kill landed mid-run");
    // The dead process's leases lapse; the next instance takes the instance lease and resumes.
    b.expireAll();
    const effectsBefore = effects(effectsDir).length;
    const handler = createAgentHandler({ definition: servedAgent(effectsDir), token: TOKEN, store, runOptions: runOptionsFor(3) });
    closers.push(() => handler.close(2_000));
    const report = await handler.recover();
    assert.equal(report.listable, true);
    assert.deepEqual([...report.resumed].sort(), [...pendingAtKill].sort());
    const settled = await waitFor(async () => {
      const all = [];
      for (const runId of runIds) {
        const s = durable.durableRunSummary(await store.load(runId));
        if (s.status !== "completed" && s.status !== "failed") return false;
        all.push([runId, s]);
      }
      return all;
    }, "every run settled");
    for (const [runId, s] of settled) {
      if (s.status === "failed") {
        // The kill fell between a write's intent and its settlement: refused, never re-run.
        assert.match(s.message, /cave_durable_tool_effect_uncertain:record:/, runId);
        assert.ok(pendingAtKill.includes(runId), runId);
      } else {
        assert.equal(s.result.text, "done 3", runId);
        assert.equal(s.result.resumed === true, pendingAtKill.includes(runId), runId);
      }
    }
    const keys = effects(effectsDir).map(([key]) => key);
    assert.equal(new Set(keys).size, keys.length, "a write ran twice");
    assert.ok(keys.length >= effectsBefore);
    // Every write a journal settled ran exactly once (the effect log is keyed by the call's
    // idempotency key): a completed run has its three, none of them repeated by the resume.
    for (const [runId, s] of settled) {
      const events = (await store.load(runId)).map((l) => JSON.parse(l));
      const written = events.filter((e) => e.type === "tool_settled" && e.name === "record").map((e) => e.idempotencyKey);
      if (s.status === "completed") assert.equal(written.length, 3, runId);
      for (const key of written) assert.equal(keys.filter((k) => k === key).length, 1, `${runId}: ${key}`);
    }
    // The status route reads the store too.
    const status = await handler.fetch(new Request(`http://x/runs/${runIds[0]}`, { headers: AUTH }));
    assert.equal(status.status, 200);
    await handler.close(2_000);
    // The killed instance's lease has lapsed: a new server takes it.
    const next = createAgentServer({ definition: servedAgent(effectsDir), token: TOKEN, store: b.store(), runOptions: runOptionsFor(3) });
    const nextPort = await next.listen(0, "127.0.0.1");
    assert.equal((await get(`http://127.0.0.1:${nextPort}`, `/runs/${runIds[0]}`)).body.status, settled[0][1].status);
    await next.close(2_000);
  });
}

test("recovery over the remote stores: a crashed run resumes, a sleeping one is reported with wakeAt (nextWakeAt), a cancelled one settles", WATCHDOG, async () => {
  const journal = await startJournalServer();
  closers.push(() => journal.close());
  const stores = [
    ["http", new HttpDurableStore({ url: journal.url, token: journal.token })],
    ["object", new ObjectDurableStore({ storage: memoryObjectStorage() })],
  ];
  for (const [name, store] of stores) {
    const effectsDir = path.join(tempRoot(), "effects");
    const definition = servedAgent(effectsDir);
    for (const runId of ["crashed", "sleepy", "doomed"]) {
      const abort = new AbortController();
      let calls = 0;
      const model = stepsModel(2);
      await run(definition, "go", {
        durable: { runId, store },
        signal: abort.signal,
        model: fauxModel(),
        streamFn: (m, c, o) => {
          if (++calls === 2) abort.abort();
          return model(m, c, o);
        },
      }).catch(() => {});
      assert.equal(durable.durableRunSummary(await store.load(runId)).status, "pending", `${name} ${runId}`);
    }
    const wake = new Date(Date.now() + 3_600_000);
    assert.equal((await durable.scheduleDurableWake(store, "sleepy", wake, "later")).status, "scheduled");
    assert.equal((await durable.requestDurableCancel(store, "doomed", "no longer needed")).status, "requested");
    assert.deepEqual(await durable.nextDurableWake(store), wake, name);
    const handler = createAgentHandler({ definition, token: TOKEN, store, runOptions: runOptionsFor(2) });
    const report = await handler.recover();
    assert.deepEqual(report, { listable: true, resumed: ["crashed"], sleeping: [{ runId: "sleepy", wakeAt: wake.toISOString() }], skipped: [{ runId: "doomed", reason: "cave_durable_run_cancelled" }] }, name);
    assert.deepEqual(await handler.nextWakeAt(), wake, name);
    await waitFor(async () => durable.durableRunSummary(await store.load("crashed")).status === "completed", `${name}: the resumed run`);
    assert.equal(durable.durableRunSummary(await store.load("crashed")).result.resumed, true);
    const doomed = durable.durableRunSummary(await store.load("doomed"));
    assert.deepEqual([doomed.status, doomed.code, doomed.message], ["failed", "cave_durable_run_cancelled", "no longer needed"], name);
    const sleepy = await handler.fetch(new Request("http://x/runs", { method: "POST", headers: JSON_AUTH, body: '{"runId":"sleepy","input":"go"}' }));
    assert.deepEqual(await sleepy.json(), { runId: "sleepy", status: "sleeping", wakeAt: wake.toISOString() }, name);
    await handler.close(2_000);
  }
});
