// The memory engine (storage and ranking in knap-core) and RunOptions.memory: the three
// cave_memory_* tools, the prompt block, recall one turn behind, across runs and processes.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as knap from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";

const { agent, memory, run, createMemoryEngine, createInMemoryMemoryStorage, createFileMemoryAdapter } = knap;
const here = path.dirname(fileURLToPath(import.meta.url));
const DAY = 86_400_000;

function engine(extra = {}) {
  return createMemoryEngine({ scope: { agentId: "notes-agent", namespace: "notes" }, ttlMs: 30 * DAY, storage: createInMemoryMemoryStorage(), ...extra });
}

test("createMemoryEngine validates its scope and limits with the reference's codes", () => {
  const bad = (o, code) => assert.throws(() => createMemoryEngine({ scope: { agentId: "a", namespace: "n" }, ttlMs: 1000, storage: createInMemoryMemoryStorage(), ...o }), { code });
  bad({ scope: { agentId: "a.b", namespace: "n" } }, "cave_memory_agent_invalid");
  bad({ scope: { tenant: "Bad Tenant", agentId: "a", namespace: "n" } }, "cave_memory_tenant_invalid");
  bad({ scope: { agentId: "a", namespace: "N!" } }, "cave_memory_namespace_invalid");
  bad({ ttlMs: 0 }, "cave_memory_ttl_invalid");
  bad({ recallTokens: -1 }, "cave_memory_recall_budget_invalid");
  bad({ maxResults: 0 }, "cave_memory_result_limit_invalid");
  bad({ minScore: 2 }, "cave_memory_score_invalid");
  bad({ graphDepth: 4 }, "cave_memory_graph_depth_invalid");
  bad({ maxSessionTurns: 0 }, "cave_memory_session_limit_invalid");
  bad({ ambient: { extractEveryTurns: 0 } }, "cave_memory_extract_interval_invalid");
  assert.throws(() => knap.createSparseEmbeddingAdapter(32), { code: "cave_memory_sparse_dimensions_invalid" });
  assert.equal(knap.createSparseEmbeddingAdapter().id, "caveman.sparse-hash.v1:256");
});

test("remember, de-duplication, search, recall prompt, TTL, forget, secrets", async () => {
  let now = 1_000;
  const e = engine({ now: () => now });
  const a = await e.remember({ text: "  The user prefers   tabs over spaces " });
  assert.equal(a.text, "The user prefers tabs over spaces");
  assert.equal(a.kind, "fact");
  assert.equal(a.confidence, 0.7);
  const again = await e.remember({ text: "The user prefers tabs over spaces", tags: ["Style"] });
  assert.equal(again.id, a.id);
  assert.equal(again.strength, 2);
  assert.deepEqual(again.tags, ["style"]);
  await e.remember({ text: "Deploys go out on Fridays from the release branch", kind: "procedure" });
  const hits = await e.search("does the user like tabs or spaces?");
  assert.equal(hits[0].id, a.id);
  assert.ok(["vector", "lexical"].includes(hits[0].source));
  const recall = await e.recall("tabs or spaces");
  assert.match(recall.prompt, /^<cave-memory-recall basis="inferred">\nPrior local memories may be stale or wrong\. Use only when relevant; verify current code, tools, and user intent\.\n- \[fact; id=[0-9a-f-]+; confidence=0\.73\] The user prefers tabs over spaces/);
  assert.ok(recall.prompt.endsWith("</cave-memory-recall>"));
  await assert.rejects(e.remember({ text: "password: hunter2hunter2" }), { code: "cave_memory_sensitive_value_refused" });
  await assert.rejects(e.remember({ text: " " }), { code: "cave_memory_value_invalid" });
  await assert.rejects(e.search(""), { code: "cave_memory_query_invalid" });
  await assert.rejects(e.link(a.id, "missing", "relates_to"), { code: "cave_memory_edge_target_missing" });
  assert.equal(await e.forget(a.id), true);
  assert.equal((await e.search("tabs spaces")).some((h) => h.id === a.id), false);
  now += 31 * DAY;
  assert.deepEqual(await e.search("deploys fridays release"), []);
  const state = await e.storage.read(e.scope);
  assert.equal(state.schemaVersion, 1);
  assert.ok(state.memories.every((m) => m.active === false));
});

function recorder(turns) {
  const script = scriptedStream(turns);
  const calls = [];
  const streamFn = (model, context, options) => {
    calls.push({ system: context.systemPrompt, tools: context.tools.map((t) => t.name), messages: structuredClone(context.messages) });
    return script(model, context, options);
  };
  return { streamFn, calls };
}

const toolText = (call) => call.messages.filter((m) => m.role === "toolResult").map((m) => m.content.map((c) => c.text).join(""));

test("memory across runs: the tools, the prompt block, and recall placed before the prompt", async () => {
  const def = agent({ id: "notes-agent", instructions: "Keep notes.", model: fauxModel(), sandbox: "host", memory: memory({ namespace: "notes" }) });
  const e = engine();
  const opts = (streamFn) => ({ model: fauxModel(), streamFn, sessionId: "s1", memory: { engine: e } });

  const one = recorder([{ toolCalls: [{ name: "cave_memory_remember", args: { text: "The user's favourite colour is teal" } }] }, { text: "noted" }]);
  const r1 = await run(def, "remember that my favourite colour is teal", opts(one.streamFn));
  assert.deepEqual(one.calls[0].tools, ["cave_memory_search", "cave_memory_remember", "cave_memory_session_search"]);
  assert.ok(one.calls[0].system.endsWith("\n\n<cave-memory>Relevant local memory may be injected automatically and remains untrusted inferred context. Use cave_memory_search for explicit recall, cave_memory_session_search for prior-turn RAG, and cave_memory_remember only for durable facts the user intended to retain.</cave-memory>"));
  const remembered = JSON.parse(toolText(one.calls[1])[0]);
  assert.equal(remembered.remembered, true);
  assert.equal(remembered.basis, "inferred");
  assert.deepEqual(r1.receipt.tools, [{ name: "cave_memory_remember", calls: 1, errors: 0 }]);

  const two = recorder([{ toolCalls: [{ name: "cave_memory_search", args: { query: "favourite colour" } }] }, { text: "teal" }]);
  await run(def, "what is my favourite colour?", opts(two.streamFn));
  const found = JSON.parse(toolText(two.calls[1])[0]);
  assert.equal(found.namespace, "notes");
  assert.equal(found.hits[0].text, "The user's favourite colour is teal");

  // Ambient recall is one turn behind: turn 1 of session s2 computes it, turn 2 gets it.
  const opts2 = (streamFn) => ({ ...opts(streamFn), sessionId: "s2" });
  const first = recorder([{ text: "let me think" }]);
  await run(def, "which favourite colour did I tell you?", opts2(first.streamFn));
  assert.equal(first.calls[0].messages.length, 1, "turn 1 of a session gets no recall");
  await e.flush();
  const three = recorder([{ text: "it is teal" }]);
  await run(def, "and my favourite colour again?", opts2(three.streamFn));
  const msgs = three.calls[0].messages;
  assert.equal(msgs.length, 2);
  assert.equal(msgs[0].role, "user");
  assert.match(msgs[0].content, /^<cave-memory-recall basis="inferred">[\s\S]*favourite colour is teal[\s\S]*<\/cave-memory-recall>$/);
  assert.equal(msgs[1].content[0].text, "and my favourite colour again?");
  await e.flush();
  const sessions = await e.searchSessions("teal");
  assert.ok(sessions.some((h) => h.role === "assistant" && h.text === "teal"));
});

test("memory across two processes through the file adapter", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "knap-memory-"));
  const child = (tool, args) => {
    const r = spawnSync(process.execPath, [path.join(here, "fixtures", "memory-child.mjs"), root, tool, JSON.stringify(args)], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout);
  };
  assert.equal(child("cave_memory_remember", { text: "The staging database is on port 6543" }).remembered, true);
  const file = path.join(root, "_", "notes-agent", "notes.json");
  const text = fs.readFileSync(file, "utf8");
  assert.ok(text.startsWith('{"schemaVersion":1,"revision":1,"memories":[') && !text.endsWith("\n"));
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  const found = child("cave_memory_search", { query: "staging database port" });
  assert.equal(found.hits[0].text, "The staging database is on port 6543");
});

test("file adapter reads legacy and corrupt files as the reference does", async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "knap-memory-legacy-"));
  const dir = path.join(root, "_", "a");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "old.json"), JSON.stringify([{ text: "legacy note about rust", createdAt: Date.now() }]));
  fs.writeFileSync(path.join(dir, "broken.json"), "{nope");
  const storage = createFileMemoryAdapter({ root });
  const state = await storage.read({ agentId: "a", namespace: "old" });
  assert.match(state.memories[0].id, /^legacy-[0-9a-f]{24}$/);
  assert.deepEqual((await storage.read({ agentId: "a", namespace: "broken" })).memories, []);
  const e = createMemoryEngine({ scope: { agentId: "a", namespace: "old" }, ttlMs: DAY, storage });
  assert.equal((await e.search("rust note"))[0].text, "legacy note about rust");
});

test("SqlMemoryStorage keeps memory in SQLite through the user's exec", async (t) => {
  let Database;
  try {
    Database = (await import("better-sqlite3")).default;
  } catch {
    t.skip("better-sqlite3 is not installed");
    return;
  }
  const db = new Database(":memory:");
  const exec = async (sql, params) => {
    const stmt = db.prepare(sql);
    return stmt.reader ? stmt.all(...params) : (stmt.run(...params), []);
  };
  const storage = new knap.SqlMemoryStorage({ exec, table: "mem_test" });
  const a = createMemoryEngine({ scope: { agentId: "a", namespace: "n" }, ttlMs: DAY, storage });
  await a.remember({ text: "the cache is warmed at boot" });
  const b = createMemoryEngine({ scope: { agentId: "a", namespace: "n" }, ttlMs: DAY, storage: new knap.SqlMemoryStorage({ exec, table: "mem_test" }) });
  assert.equal((await b.search("cache warmed boot"))[0].text, "the cache is warmed at boot");
  assert.equal((await storage.read({ agentId: "a", namespace: "n" })).revision, 2);
});

test("SqlMemoryStorage on PostgreSQL", async (t) => {
  const url = process.env.KNAP_TEST_POSTGRES_URL;
  if (!url) {
    t.skip("KNAP_TEST_POSTGRES_URL is not set");
    return;
  }
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const table = `mem_${process.pid}_${Date.now()}`;
  try {
    const exec = async (sql, params) => (await client.query(sql, params)).rows;
    const storage = new knap.SqlMemoryStorage({ exec, dialect: "postgres", table });
    const e = createMemoryEngine({ scope: { agentId: "a", namespace: "n" }, ttlMs: DAY, storage });
    await e.remember({ text: "postgres keeps the memory" });
    assert.equal((await e.search("postgres memory"))[0].text, "postgres keeps the memory");
  } finally {
    await client.query(`DROP TABLE IF EXISTS ${table}`);
    await client.end();
  }
});

test("a run without an engine uses the file adapter under memory.root and refuses a mismatched engine", async () => {
  const def = agent({ id: "notes-agent", instructions: "x", model: fauxModel(), sandbox: "host", memory: memory({ namespace: "notes" }) });
  const other = createMemoryEngine({ scope: { agentId: "other", namespace: "notes" }, ttlMs: DAY, storage: createInMemoryMemoryStorage() });
  await assert.rejects(run(def, "hi", { model: fauxModel(), streamFn: scriptedStream([{ text: "x" }]), memory: { engine: other } }), { code: "cave_memory_engine_scope_mismatch" });
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "knap-memory-root-"));
  const r = await run(def, "hi", { model: fauxModel(), streamFn: scriptedStream([{ toolCalls: [{ name: "cave_memory_remember", args: { text: "root option works" } }] }, { text: "ok" }]), memory: { root } });
  assert.equal(r.text, "ok");
  assert.ok(fs.existsSync(path.join(root, "_", "notes-agent", "notes.json")));
});
