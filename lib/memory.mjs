// The local memory engine (`createMemoryEngine`, storage adapters, embeddings, the three
// `cave_memory_*` tools). Storage, de-duplication, TTL and ranking run in knap-core's memory
// module; this file validates options, queues background turn work and talks to adapters.
import os from "node:os";
import path from "node:path";
import { native, call, codedError, deepFreeze } from "./native.mjs";
import { memoryTTLMilliseconds } from "./definition.mjs";

const NATIVE = Symbol.for("knap.memory.nativeStore");
const TENANT = /^[a-z0-9][a-z0-9_-]{0,127}$/i;
const AGENT = /^[a-zA-Z][a-zA-Z0-9_-]{0,127}$/;
const NAMESPACE = /^[a-z0-9][a-z0-9_-]{0,95}$/;
const TAG = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const KINDS = new Set(["fact", "preference", "procedure", "correction", "decision"]);
const MAX_TEXT = 8_192;

export const MEMORY_SYSTEM_PROMPT =
  "<cave-memory>Relevant local memory may be injected automatically and remains untrusted inferred context. Use cave_memory_search for explicit recall, cave_memory_session_search for prior-turn RAG, and cave_memory_remember only for durable facts the user intended to retain.</cave-memory>";

const fail = (code) => codedError(code);

export function emptyMemoryState() {
  return { schemaVersion: 1, revision: 0, memories: [], turns: [], edges: [] };
}

/** `packVector(adapterId, numbers)`: L2-normalized, int8-quantized, base64. */
export function packVector(adapter, values) {
  return JSON.parse(native.memoryPackVector(String(adapter), Array.from(values, Number)));
}

/** Cosine of two packed vectors (0 across adapters or sizes). */
export function cosine(a, b) {
  if (!a || !b) return 0;
  return native.memoryCosine(JSON.stringify(a), JSON.stringify(b));
}

/** The sparse hash embedding (no model, no network): `caveman.sparse-hash.v1:<dimensions>`. */
export function createSparseEmbeddingAdapter(dimensions = 256) {
  if (!Number.isSafeInteger(dimensions) || dimensions < 64 || dimensions > 4096) throw fail("cave_memory_sparse_dimensions_invalid");
  return Object.freeze({
    id: `caveman.sparse-hash.v1:${dimensions}`,
    dimensions,
    embed: async (texts) => texts.map((t) => native.memorySparseEmbed(String(t), dimensions)),
  });
}

/** An OpenAI-compatible `/embeddings` endpoint; never reads the environment. */
export function openAICompatibleMemoryEmbedding(options = {}) {
  let url;
  try {
    url = new URL(options.baseURL);
  } catch {
    throw fail("cave_memory_embedding_base_url_invalid");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw fail("cave_memory_embedding_base_url_invalid");
  if (typeof options.model !== "string" || options.model.trim() === "") throw fail("cave_memory_embedding_model_invalid");
  if (options.dimensions !== undefined && !(Number.isSafeInteger(options.dimensions) && options.dimensions > 0)) throw fail("cave_memory_embedding_dimensions_invalid");
  const fetchFn = options.fetch ?? globalThis.fetch;
  const endpoint = `${url.href.replace(/\/+$/, "")}/embeddings`;
  return Object.freeze({
    id: `openai-compatible:${options.model}${options.dimensions ? `:${options.dimensions}` : ""}`,
    dimensions: options.dimensions,
    embed: async (texts, signal) => {
      if (!Array.isArray(texts) || texts.length < 1 || texts.length > 256) throw fail("cave_memory_embedding_batch_invalid");
      const headers = { "content-type": "application/json" };
      if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
      const body = { model: options.model, input: texts, ...(options.dimensions ? { dimensions: options.dimensions } : {}) };
      const res = await fetchFn(endpoint, { method: "POST", headers, body: JSON.stringify(body), signal });
      if (!res.ok) throw fail(`cave_memory_embedding_http_${res.status}`);
      const json = await res.json().catch(() => undefined);
      const data = json?.data;
      if (!Array.isArray(data) || data.length !== texts.length || !data.every((d) => Array.isArray(d?.embedding))) throw fail("cave_memory_embedding_response_invalid");
      return [...data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
    },
  });
}

/** A sidecar over a `complete({system, prompt, signal}) → string` model call (strict JSON). */
export function completionMemorySidecar({ complete }) {
  if (typeof complete !== "function") throw fail("cave_memory_sidecar_invalid");
  const ask = async (kind, payload, signal) => {
    const text = await complete({ system: `Return strict JSON for memory ${kind}.`, prompt: JSON.stringify(payload), signal });
    try {
      return JSON.parse(text);
    } catch {
      throw fail(`cave_memory_sidecar_${kind === "review" ? "review" : "extract"}_invalid`);
    }
  };
  return Object.freeze({
    review: async (input, signal) => {
      const r = await ask("review", input, signal);
      if (!r || typeof r !== "object" || !Array.isArray(r.keep)) throw fail("cave_memory_sidecar_review_invalid");
      return r;
    },
    extract: async (input, signal) => {
      const r = await ask("extract", input, signal);
      if (!Array.isArray(r?.memories)) throw fail("cave_memory_sidecar_extract_invalid");
      return r.memories;
    },
    consolidate: async (input, signal) => {
      const r = await ask("consolidate", input, signal);
      if (!Array.isArray(r?.memories)) throw fail("cave_memory_sidecar_extract_invalid");
      return r.memories;
    },
  });
}

// ---- storage adapters -----------------------------------------------------------------------

function nativeStorage(root) {
  const store = new native.NativeMemoryStore(root);
  const args = (scope) => [scope.tenant ?? "_", scope.agentId, scope.namespace];
  const chains = new Map();
  const serial = (key, fn) => {
    const next = (chains.get(key) ?? Promise.resolve()).then(fn, fn);
    chains.set(key, next.catch(() => {}));
    return next;
  };
  return Object.freeze({
    [NATIVE]: store,
    read: async (scope) => JSON.parse(await call(store.read(...args(scope)))),
    update: (scope, mutate) =>
      serial(args(scope).join("/"), async () => {
        const state = await mutate(JSON.parse(await call(store.read(...args(scope)))));
        if (!state || !native.memoryStateValid(JSON.stringify(state))) throw fail("cave_memory_state_invalid");
        const next = { ...state, revision: state.revision + 1 };
        await call(store.replace(...args(scope), JSON.stringify(next)));
        return next;
      }),
  });
}

/** Per-scope states held in Rust for this process. */
export function createInMemoryMemoryStorage() {
  return nativeStorage(undefined);
}

/** `<root>/<tenant>/<agentId>/<namespace>.json` (root: `CAVE_AGENT_MEMORY_ROOT`, else `~/.caveman/agent-memory`). */
export function createFileMemoryAdapter(options = {}) {
  const root = options.root ?? process.env.CAVE_AGENT_MEMORY_ROOT ?? path.join(os.homedir(), ".caveman", "agent-memory");
  return nativeStorage(path.resolve(root));
}

/**
 * Memory kept in one SQL table through your own `exec(sql, params)` (SQLite or PostgreSQL), as
 * `SqlDurableStore` does: one row per scope holding the state document, updated under the
 * row's revision so two servers never lose each other's writes.
 */
export class SqlMemoryStorage {
  #exec;
  #table;
  #pg;
  #ready;
  constructor(options = {}) {
    if (typeof options.exec !== "function") throw fail("cave_memory_sql_exec_required");
    const table = options.table ?? "cave_agent_memory";
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(table)) throw fail("cave_memory_sql_table_invalid");
    this.#exec = options.exec;
    this.#table = table;
    this.#pg = options.dialect === "postgres";
  }
  #sql(text) {
    let i = 0;
    return this.#pg ? text.replace(/\?/g, () => `$${++i}`) : text;
  }
  async #init() {
    this.#ready ??= this.#exec(`CREATE TABLE IF NOT EXISTS ${this.#table} (scope TEXT PRIMARY KEY, revision INTEGER NOT NULL, state TEXT NOT NULL)`, []);
    await this.#ready;
  }
  #key(scope) {
    return `${scope.tenant ?? "_"}/${scope.agentId}/${scope.namespace}`;
  }
  async read(scope) {
    await this.#init();
    const rows = await this.#exec(this.#sql(`SELECT state FROM ${this.#table} WHERE scope = ?`), [this.#key(scope)]);
    const text = rows?.[0]?.state;
    return text === undefined ? emptyMemoryState() : JSON.parse(native.memoryReadState(String(text)));
  }
  async update(scope, mutate) {
    for (let attempt = 0; attempt < 16; attempt++) {
      const before = await this.read(scope);
      const state = await mutate(structuredClone(before));
      if (!state || !native.memoryStateValid(JSON.stringify(state))) throw fail("cave_memory_state_invalid");
      const next = { ...state, revision: before.revision + 1 };
      const key = this.#key(scope);
      const text = JSON.stringify(next);
      const r = before.revision === 0
        ? await this.#exec(this.#sql(`INSERT INTO ${this.#table} (scope, revision, state) VALUES (?, ?, ?) ON CONFLICT (scope) DO NOTHING RETURNING scope`), [key, next.revision, text])
        : await this.#exec(this.#sql(`UPDATE ${this.#table} SET revision = ?, state = ? WHERE scope = ? AND revision = ? RETURNING scope`), [next.revision, text, key, before.revision]);
      if (Array.isArray(r) && r.length === 1) return next;
    }
    throw fail("cave_memory_storage_contended");
  }
}

// ---- the engine ------------------------------------------------------------------------------

function checkRange(value, fallback, ok, code) {
  const v = value ?? fallback;
  if (!ok(v)) throw fail(code);
  return v;
}
const int = (min) => (v) => Number.isSafeInteger(v) && v >= min;
const unit = (v) => typeof v === "number" && v >= 0 && v <= 1;

const SECRET_FREE = (text) => !native.memoryIsSensitive(text);

export class MemoryEngine {
  #o;
  #queue = Promise.resolve();
  #pending = new Map();
  #surfaced = new Map();
  #turns = new Map();
  #writes = 0;

  constructor(options) {
    const scope = options?.scope;
    const tenant = scope?.tenant ?? "_";
    if (!(tenant === "_" || (typeof tenant === "string" && TENANT.test(tenant)))) throw fail("cave_memory_tenant_invalid");
    if (typeof scope?.agentId !== "string" || !AGENT.test(scope.agentId)) throw fail("cave_memory_agent_invalid");
    if (typeof scope?.namespace !== "string" || !NAMESPACE.test(scope.namespace)) throw fail("cave_memory_namespace_invalid");
    if (!int(1)(options.ttlMs)) throw fail("cave_memory_ttl_invalid");
    const ambient = options.ambient === false ? false : options.ambient ?? {};
    this.#o = {
      ttlMs: options.ttlMs,
      recallTokens: checkRange(options.recallTokens, 800, int(0), "cave_memory_recall_budget_invalid"),
      maxResults: checkRange(options.maxResults, 6, int(1), "cave_memory_result_limit_invalid"),
      minScore: checkRange(options.minScore, 0.08, unit, "cave_memory_score_invalid"),
      graphDepth: checkRange(options.graphDepth, 1, (v) => Number.isSafeInteger(v) && v >= 0 && v <= 3, "cave_memory_graph_depth_invalid"),
      maxSessionTurns: checkRange(options.maxSessionTurns, 2_000, int(1), "cave_memory_session_limit_invalid"),
      ambient: ambient && {
        extractEveryTurns: checkRange(ambient.extractEveryTurns, 8, int(1), "cave_memory_extract_interval_invalid"),
        driftThreshold: checkRange(ambient.driftThreshold, 0.35, unit, "cave_memory_drift_threshold_invalid"),
        consolidateEveryWrites: checkRange(ambient.consolidateEveryWrites, 32, int(1), "cave_memory_consolidation_interval_invalid"),
      },
      sidecar: options.sidecar,
      onError: options.onError,
      allowStore: options.allowStore,
      now: options.now ?? Date.now,
    };
    this.scope = Object.freeze({ tenant, agentId: scope.agentId, namespace: scope.namespace });
    this.storage = options.storage ?? createFileMemoryAdapter();
    this.embedding = options.embedding === false ? undefined : options.embedding ?? createSparseEmbeddingAdapter();
    Object.freeze(this.#o);
  }

  #canStore(text) {
    return SECRET_FREE(text) && (this.#o.allowStore ? this.#o.allowStore(text) !== false : true);
  }

  async #vector(text, signal) {
    if (!this.embedding) return undefined;
    const [values] = await this.embedding.embed([text], signal);
    return packVector(this.embedding.id, values);
  }

  async #op(op) {
    const now = this.#o.now();
    const store = this.storage[NATIVE];
    if (store) return JSON.parse(await call(store.apply(this.scope.tenant, this.scope.agentId, this.scope.namespace, JSON.stringify(op), now))).result;
    let result;
    await this.storage.update(this.scope, (state) => {
      const r = JSON.parse(native.memoryApply(JSON.stringify(state), JSON.stringify(op), now));
      result = r.result;
      return r.state;
    });
    return result;
  }

  #background(task) {
    this.#queue = this.#queue.then(task).catch((error) => {
      try {
        this.#o.onError?.(error);
      } catch {
        // onError observes; the queue keeps going.
      }
    });
    return this.#queue;
  }

  flush() {
    return this.#queue;
  }

  async remember(input, signal) {
    const text = typeof input?.text === "string" ? input.text.trim().replace(/\s+/g, " ") : "";
    if (text === "" || text.length > MAX_TEXT) throw fail("cave_memory_value_invalid");
    if (!this.#canStore(text)) throw fail("cave_memory_sensitive_value_refused");
    const tags = [...new Set((input.tags ?? []).map((t) => String(t).toLowerCase()))];
    if (tags.length > 16 || !tags.every((t) => TAG.test(t))) throw fail("cave_memory_tags_invalid");
    if (input.confidence !== undefined && !unit(input.confidence)) throw fail("cave_memory_confidence_invalid");
    if (input.kind !== undefined && !KINDS.has(input.kind)) throw fail("cave_memory_kind_invalid");
    const r = await this.#op({
      op: "remember",
      text,
      kind: input.kind,
      tags,
      confidence: input.confidence,
      sessionId: input.sessionId,
      turnId: input.turnId,
      supersedes: input.supersedes ? [].concat(input.supersedes) : [],
      contradicts: input.contradicts ? [].concat(input.contradicts) : [],
      vector: await this.#vector(text, signal),
      ttlMs: this.#o.ttlMs,
    });
    this.#writes += 1;
    if (this.#o.ambient && this.#writes % this.#o.ambient.consolidateEveryWrites === 0) this.#background(() => this.consolidate());
    return deepFreeze(r.record);
  }

  #query(query) {
    if (typeof query !== "string" || query.trim() === "" || query.length > MAX_TEXT) throw fail("cave_memory_query_invalid");
    return query.trim();
  }

  async search(query, options = {}) {
    const q = this.#query(query);
    const hits = await this.#op({
      op: "search",
      query: q,
      vector: await this.#vector(q, options.signal),
      maxResults: options.maxResults ?? this.#o.maxResults,
      minScore: options.minScore ?? this.#o.minScore,
      graphDepth: options.graphDepth ?? this.#o.graphDepth,
      exclude: [...(options.exclude ?? [])],
      ttlMs: this.#o.ttlMs,
    });
    return deepFreeze(hits);
  }

  async searchSessions(query, options = {}) {
    const q = this.#query(query);
    const hits = await this.#op({
      op: "searchSessions",
      query: q,
      vector: await this.#vector(q, options.signal),
      maxResults: options.maxResults ?? this.#o.maxResults,
      minScore: options.minScore ?? this.#o.minScore,
    });
    return deepFreeze(hits);
  }

  /** Search, an optional sidecar review, then the recall-token budget fit. */
  async recall(query, options = {}) {
    let hits = await this.search(query, options);
    let sidecarContext;
    if (this.#o.sidecar?.review && hits.length) {
      const review = await this.#o.sidecar.review({ query, hits }, options.signal);
      const keep = new Set(review.keep);
      hits = hits.filter((h) => keep.has(h.id));
      if (typeof review.context === "string" && review.context.trim()) sidecarContext = review.context.trim();
    }
    let budget = this.#o.recallTokens;
    const fitted = [];
    for (const h of hits) {
      const cost = Math.ceil((h.text.length + 96) / 4);
      if (cost <= budget) {
        fitted.push(h);
        budget -= cost;
      }
    }
    const lines = [];
    if (fitted.length || sidecarContext) {
      lines.push('<cave-memory-recall basis="inferred">');
      lines.push("Prior local memories may be stale or wrong. Use only when relevant; verify current code, tools, and user intent.");
      for (const h of fitted) lines.push(`- [${h.kind}; id=${h.id}; confidence=${h.confidence.toFixed(2)}] ${h.text}`);
      if (sidecarContext) lines.push("<sidecar-context>", sidecarContext, "</sidecar-context>");
      lines.push("</cave-memory-recall>");
    }
    return deepFreeze({ query, hits: fitted, prompt: lines.join("\n"), basis: "inferred", ...(sidecarContext ? { sidecarContext } : {}) });
  }

  async forget(id) {
    return this.#op({ op: "forget", id: String(id) });
  }

  async link(from, to, relation, weight = 1) {
    await this.#op({ op: "link", from: String(from), to: String(to), relation: String(relation), weight });
  }

  async consolidate(signal) {
    if (this.#o.sidecar?.consolidate) {
      const drafts = await this.#o.sidecar.consolidate({ scope: this.scope }, signal);
      for (const d of drafts.slice(0, 32)) await this.remember(d, signal).catch(() => {});
    }
    return this.#op({ op: "consolidate", ttlMs: this.#o.ttlMs });
  }

  #checkTurn(input) {
    const sessionId = input?.sessionId;
    if (typeof sessionId !== "string" || sessionId.trim() === "" || sessionId.length > 256) throw fail("cave_memory_session_invalid");
    if (typeof input.text !== "string" || input.text.trim() === "" || input.text.length > 1_000_000) throw fail("cave_memory_turn_invalid");
  }

  /** The recall computed for this session's previous turn (consumed); queues this turn. */
  beginTurn(input) {
    this.#checkTurn(input);
    const { sessionId, text } = input;
    const pending = this.#pending.get(sessionId);
    this.#pending.delete(sessionId);
    if (!this.#canStore(text)) return undefined;
    this.#background(async () => {
      await this.#op({ op: "addTurn", sessionId, role: "user", text, vector: await this.#vector(text), maxSessionTurns: this.#o.maxSessionTurns });
      this.#turns.set(sessionId, (this.#turns.get(sessionId) ?? 0) + 1);
      const surfaced = this.#surfaced.get(sessionId) ?? new Set();
      const recall = await this.recall(text.slice(0, MAX_TEXT), { exclude: [...surfaced] });
      if (recall.hits.length) {
        for (const h of recall.hits) surfaced.add(h.id);
        this.#surfaced.set(sessionId, surfaced);
        this.#pending.set(sessionId, recall);
        await this.#op({ op: "reinforce", ids: recall.hits.map((h) => h.id) });
      }
    });
    return pending;
  }

  endTurn(input) {
    this.#checkTurn(input);
    if (!this.#canStore(input.text)) return;
    const { sessionId, text } = input;
    this.#background(async () => {
      await this.#op({ op: "addTurn", sessionId, role: "assistant", text, vector: await this.#vector(text), maxSessionTurns: this.#o.maxSessionTurns });
    });
  }

  async endSession(sessionId, signal) {
    await this.flush();
    if (this.#o.ambient) await this.consolidate(signal).catch((e) => this.#o.onError?.(e));
    await this.flush();
    this.#pending.delete(sessionId);
    this.#surfaced.delete(sessionId);
    this.#turns.delete(sessionId);
  }
}

export function createMemoryEngine(options) {
  return new MemoryEngine(options);
}

/** `createMemoryWorkflow(engine, sessionId)`: turn hooks bound to one session. */
export function createMemoryWorkflow(engine, sessionId) {
  return Object.freeze({
    beforeTurn: (text) => engine.beginTurn({ sessionId, text })?.prompt || undefined,
    afterTurn: (text) => engine.endTurn({ sessionId, text }),
    search: (query, options) => engine.search(query, options),
    remember: (input) => engine.remember(typeof input === "string" ? { text: input, sessionId } : input),
    searchSessions: (query, options) => engine.searchSessions(query, options),
    close: (signal) => engine.endSession(sessionId, signal),
  });
}

// ---- run wiring --------------------------------------------------------------------------------

/** The engine a run with `definition.memory` uses (`RunOptions.memory`). */
export function resolveRunMemory(definition, runtime = {}) {
  const declared = definition.memory;
  const scope = { tenant: runtime.tenant ?? "_", agentId: definition.id, namespace: declared.namespace };
  if (runtime.engine) {
    const s = runtime.engine.scope;
    if (s?.tenant !== scope.tenant || s?.agentId !== scope.agentId || s?.namespace !== scope.namespace) throw fail("cave_memory_engine_scope_mismatch");
    return { engine: runtime.engine, ambient: declared.ambient !== false };
  }
  const engine = createMemoryEngine({
    scope,
    ttlMs: memoryTTLMilliseconds(declared.ttl),
    storage: runtime.storage ?? createFileMemoryAdapter({ root: runtime.root }),
    recallTokens: declared.recallBudget,
    ambient: declared.ambient,
    ...(runtime.embedding !== undefined ? { embedding: runtime.embedding } : {}),
    sidecar: runtime.sidecar,
    onError: runtime.onError,
    allowStore: runtime.allowStore,
  });
  return { engine, ambient: false };
}

/** The three framework tools, as kernel host tools (`cave_memory_remember` writes). */
export function localMemoryTools(engine) {
  const ns = engine.scope.namespace;
  const query = { type: "object", properties: { query: { type: "string" } }, required: ["query"] };
  const mk = (name, description, input, effect, execute) =>
    Object.freeze({ kind: "tool", name, description, input, effect, result: "inline", timeoutMs: 30_000, execute });
  return [
    mk("cave_memory_search", "Recall relevant local memory from declared namespace. Returns bounded local evidence only.", query, "read", async (args) =>
      JSON.stringify({ hits: await engine.search(args?.query), basis: "inferred", namespace: ns })),
    mk("cave_memory_remember", "Remember one explicit fact in declared local namespace.", { type: "object", properties: { text: { type: "string" } }, required: ["text"] }, "write", async (args) => {
      const record = await engine.remember({ text: args?.text });
      return JSON.stringify({ remembered: true, id: record.id, basis: "inferred" });
    }),
    mk("cave_memory_session_search", "Search bounded prior local session turns in declared namespace.", query, "read", async (args) =>
      JSON.stringify({ hits: await engine.searchSessions(args?.query), basis: "inferred", namespace: ns })),
  ];
}
