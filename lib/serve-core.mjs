// The serving core behind knap/serve-handler and knap/serve: an agent as a web-standard `fetch(Request) → Response` handler
// (`@caveman-ai/agent/serve-handler`): the `/runs` job API, principal-scoped `/sessions` with
// SSE and WebSocket event streams, the recovery sweep. No `node:http` here (createAgentServer in
// serve.mjs wraps it); runs go through the public `stream()` with durability always on, so the
// journal (Rust) stays the authority and these maps are only this process's view.
import { timingSafeEqual } from "node:crypto";

import { native, codedError } from "./native.mjs";
import { didYouMean } from "./config-keys.mjs";
import { readCapped } from "./http-body.mjs";
import { PEBBLE_STOP_REASONS as STOP_REASONS } from "./pebble.mjs";
import { stream } from "./run.mjs";
import { estimateCostUsd } from "./prices.mjs";
import { restoreConversation } from "./conversation.mjs";
import { AgentRunController, CONTROLLER_ENQUEUE, CONTROLLER_QUEUED } from "./run-controller.mjs";
import {
  DiskDurableStore,
  defaultDurableRoot,
  inspectDurableJournal,
  requestDurableCancel,
  durableRunIsDue,
  durableInputIsReplayable,
  nextDurableWake,
  DURABLE_CANCELLED_CODE,
} from "./durable.mjs";

const L = native.serveLimits();
/** `SESSION_MESSAGE_CONTEXT_MAX_BYTES`: 64 KiB of UTF-8 after `JSON.stringify`. */
export const SESSION_MESSAGE_CONTEXT_MAX_BYTES = L.sessionMessageContextMaxBytes;
/** `INSTANCE_LOCK_RUN_ID`: the single-instance lease's run id in the store. */
export const INSTANCE_LOCK_RUN_ID = "caveman.instance.lock";

const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const RUN_ID_MESSAGE = "cave_durable_run_id_invalid: durable.runId must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}";
const SESSION_RUN = /^(.*)\.([1-9]\d*)$/;
const HANDLER_OPTIONS = new Set([
  "definition",
  "token",
  "authenticate",
  "store",
  "rootDir",
  "build",
  "runOptions",
  "maxConcurrentRuns",
  "maxQueuedRuns",
  "maxBodyBytes",
  "singleInstance",
  "upgrade",
]);
const utf8 = new TextEncoder();
/** Set by createAgentServer when its object-form runOptions carried an `entryPath`. */
export const ENTRY_PATH_GIVEN = Symbol("knap.serve.entryPathGiven");
const decoder = new TextDecoder();

/**
 * `withMessageContext(text, context)`: `text` + a `<cave-message-context>` block holding the
 * compact JSON of `context` (an object or array, ≤ 64 KiB serialized). Nothing is escaped: the
 * block is as untrusted as the message it rides in.
 */
export function withMessageContext(text, context) {
  if (context === undefined) return text;
  const invalid = () => codedError("cave_session_message_context_invalid", "cave_session_message_context_invalid: context must be a JSON object or array");
  if (context === null || typeof context !== "object") throw invalid();
  let json;
  try {
    json = JSON.stringify(context);
  } catch {
    throw invalid();
  }
  if (typeof json !== "string") throw invalid();
  if (utf8.encode(json).byteLength > SESSION_MESSAGE_CONTEXT_MAX_BYTES) {
    throw codedError("cave_session_message_context_too_large", `cave_session_message_context_too_large: context is over ${SESSION_MESSAGE_CONTEXT_MAX_BYTES} bytes`);
  }
  return `${text}\n\n<cave-message-context>\n${json}\n</cave-message-context>`;
}

// ---------------------------------------------------------------------------------------------
// Responses.

function json(status, body, headers) {
  const text = JSON.stringify(body);
  return new Response(text, {
    status,
    headers: { "content-type": "application/json", "content-length": String(utf8.encode(text).byteLength), ...headers },
  });
}
const fail = (status, error, extra, headers) => json(status, { error, ...extra }, headers);
const notFound = () => fail(404, "cave_serve_not_found");
const badRunId = () => fail(400, "cave_durable_run_id_invalid");
const RETRY = { "retry-after": "5" };

const TOO_LARGE = Symbol("too large");
/** The body as text, counting bytes as they stream in; `TOO_LARGE` past `max`. */
async function readBody(request, max) {
  const declared = Number(request.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > max) {
    request.body?.cancel().catch(() => {});
    return TOO_LARGE;
  }
  const { bytes, truncated } = await readCapped(request, max);
  return truncated ? TOO_LARGE : decoder.decode(bytes);
}

/** The JSON object body, or the error response: 413, invalid JSON, not a plain object. */
async function readJsonObject(request, max) {
  const text = await readBody(request, max);
  if (text === TOO_LARGE) return { error: fail(413, "cave_serve_body_too_large") };
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    return { error: fail(400, "cave_serve_body_invalid_json") };
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) return { error: fail(400, "cave_serve_body_invalid") };
  return { body };
}

const clip = (text) => {
  const chars = Array.from(String(text));
  return chars.length <= L.frameTextChars ? chars.join("") : chars.slice(0, L.frameTextChars - 1).join("") + "…";
};
const isCount = (n) => Number.isSafeInteger(n) && n >= 0;

/** Pebble v1 frame payloads (without the envelope) for one run event. */
function framePayloads(event) {
  if (event.type === "run_end") return [{ kind: "turn.end", stopReason: STOP_REASONS[event.result?.stopReason] ?? "interrupted" }];
  if (event.type === "run_error") {
    return [
      { kind: "error", message: `${event.code}: ${event.message}`, retryable: false },
      { kind: "turn.end", stopReason: "error" },
    ];
  }
  if (event.type !== "pi") return [];
  const e = event.event ?? {};
  switch (e.type) {
    case "message_update": {
      const a = e.assistantMessageEvent;
      if (a?.type === "text_delta") return [{ kind: "delta.text", text: String(a.delta ?? "") }];
      if (a?.type === "thinking_delta") return [{ kind: "delta.thinking", text: String(a.delta ?? "") }];
      return [];
    }
    case "message_end": {
      const m = e.message;
      const u = m?.usage;
      if (m?.role !== "assistant" || !u || ![u.input, u.output, u.cacheRead, u.cacheWrite].every(isCount)) return [];
      const costUsd = estimateCostUsd(m.provider, m.model, u) ?? null;
      return [{ kind: "usage", usage: { in: u.input, out: u.output, cacheRead: u.cacheRead, cacheWrite: u.cacheWrite, costUsd, model: m.model } }];
    }
    case "tool_execution_start":
      return [{ kind: "tool.start", id: e.toolCallId, name: e.toolName, argsSummary: clip(JSON.stringify(e.args ?? {}) ?? "") }];
    case "tool_execution_update":
      return [{ kind: "tool.update", id: e.toolCallId, delta: clip(resultText(e.partialResult)) }];
    case "tool_execution_end": {
      const frame = { kind: "tool.end", id: e.toolCallId, status: e.isError ? "failed" : "completed" };
      const detail = e.isError ? resultText(e.result) : "";
      if (detail) frame.detail = clip(detail);
      return [frame];
    }
    default:
      return [];
  }
}

function resultText(result) {
  const parts = Array.isArray(result?.content) ? result.content.filter((p) => p?.type === "text").map((p) => p.text) : [];
  if (parts.length) return parts.join("\n");
  if (result === undefined) return "";
  return JSON.stringify(result) ?? "";
}

// ---------------------------------------------------------------------------------------------
// Event streams: one numbered log per /runs job or session (frames numbered and kept in Rust),
// fanned out to SSE and WebSocket subscribers.

class EventBuffer {
  constructor(streamId) {
    this.log = new native.NativeEventLog(streamId, L.eventBufferFrames);
    this.subscribers = new Set();
    this.turnEnds = new Set();
    this.closed = false;
    this.settledAt = undefined;
  }

  push(payload) {
    if (this.closed) return;
    const { seq, frame } = this.log.push(JSON.stringify(payload));
    const turnEnd = payload.kind === "turn.end";
    if (turnEnd) {
      this.turnEnds.add(seq);
      if (this.turnEnds.size > L.eventBufferFrames) this.turnEnds.delete(this.turnEnds.values().next().value);
    }
    for (const sub of this.subscribers) sub.frame(seq, frame, turnEnd);
  }

  /** Attaches `sub` after replaying from its resume point (both synchronous: nothing in between). */
  attach(sub, lastEventId, sessionStream) {
    const replay = this.log.replay(lastEventId ?? undefined, sessionStream);
    if (replay.gap) sub.gap({ error: "cave_serve_events_gap", requestedSeq: replay.gap.requestedSeq, earliestSeq: replay.gap.earliestSeq });
    for (let i = 0; i < replay.seqs.length && !sub.done; i++) sub.frame(replay.seqs[i], replay.frames[i], this.turnEnds.has(replay.seqs[i]));
    if (sub.done) return;
    if (this.closed) return sub.end();
    this.subscribers.add(sub);
    sub.attached?.();
  }

  close() {
    this.closed = true;
    for (const sub of this.subscribers) sub.end();
    this.subscribers.clear();
  }
}

const resumePoint = (request, url) => request.headers.get("last-event-id") ?? url.searchParams.get("lastEventId") ?? undefined;

/** An SSE response over `buffer`: replay then live, heartbeats, slow readers dropped. */
function sseResponse(buffer, lastEventId, { sessionStream, endOnTurnEnd, settled }) {
  let sub;
  const body = new ReadableStream(
    {
      start(controller) {
        let heartbeat;
        let last = -1;
        sub = {
          done: false,
          write(text) {
            if (sub.done) return;
            // The consumer's queue is full: close rather than buffer without bound.
            if (controller.desiredSize !== null && controller.desiredSize <= 0) return sub.end();
            controller.enqueue(utf8.encode(text));
          },
          gap(notice) {
            sub.write(`event: gap\ndata: ${JSON.stringify(notice)}\n\n`);
          },
          frame(seq, frame, turnEnd) {
            if (sub.done || seq <= last) return;
            last = seq;
            sub.write(`id: ${seq}\ndata: ${frame}\n\n`);
            if (turnEnd && endOnTurnEnd) sub.end();
          },
          attached() {
            if (endOnTurnEnd && settled()) return sub.end();
            heartbeat = setInterval(() => sub.write(": keepalive\n\n"), L.heartbeatMs);
            heartbeat.unref?.();
          },
          end() {
            if (sub.done) return;
            sub.done = true;
            clearInterval(heartbeat);
            buffer.subscribers.delete(sub);
            try {
              controller.close();
            } catch {
              // already closed or errored by the consumer
            }
          },
        };
        buffer.attach(sub, lastEventId, sessionStream);
      },
      cancel() {
        sub?.end();
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: L.streamHighWaterBytes }),
  );
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": "text/event-stream",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    },
  });
}

// ---------------------------------------------------------------------------------------------
// The handler.

/** `createAgentHandler(options)`: `{ fetch, recover, nextWakeAt, close }`. */
export function createAgentHandler(options) {
  if (options === null || typeof options !== "object") throw new TypeError("createAgentHandler(options): options must be an object");
  for (const key of Object.keys(options)) {
    if (!HANDLER_OPTIONS.has(key)) {
      const hint = `${didYouMean(key, HANDLER_OPTIONS)}the options are ${[...HANDLER_OPTIONS].join(", ")}`;
      throw codedError("cave_serve_option_unknown", `cave_serve_option_unknown: createAgentHandler does not take ${JSON.stringify(key)}\nhint: ${hint}`);
    }
  }
  const { definition, token, authenticate, runOptions, upgrade } = options;
  if (definition?.kind !== "agent") throw new TypeError("createAgentHandler: definition must be an agent() definition");
  if (options.build !== undefined) {
    throw codedError("cave_serve_build_unsupported", "cave_serve_build_unsupported: knap does not run locked Cave builds; serve the definition without build");
  }
  if (typeof authenticate !== "function" && (typeof token !== "string" || token.length < L.minTokenChars)) {
    throw new Error("cave_serve_token_required: set a bearer token of at least 16 characters, or pass authenticate(); this endpoint spends money");
  }
  const maxConcurrentRuns = options.maxConcurrentRuns ?? L.maxConcurrentRuns;
  if (!Number.isSafeInteger(maxConcurrentRuns) || maxConcurrentRuns < 1) throw codedError("cave_serve_concurrency_invalid", "cave_serve_concurrency_invalid");
  const maxQueuedRuns = options.maxQueuedRuns ?? L.maxQueuedRuns;
  const maxBodyBytes = options.maxBodyBytes ?? L.maxBodyBytes;
  if (runOptions !== undefined && typeof runOptions !== "function") {
    throw codedError("cave_serve_run_options_factory_required", "cave_serve_run_options_factory_required: createAgentHandler takes runOptions as a function ({ sessionId, runId, principal }) => options");
  }
  const rootDir = String(options.rootDir ?? (typeof process === "undefined" ? "." : process.cwd())).replace(/[\\/]+$/, "") || "/";
  const store = options.store ?? new DiskDurableStore(defaultDurableRoot(rootDir));
  if (definition.sandboxDeclared === false && !options[ENTRY_PATH_GIVEN]) {
    process.stderr.write(`cave: ${definition.id} serves with host execution — tools are not isolated\n`);
  }
  const tokenBytes = typeof token === "string" ? utf8.encode(token) : undefined;

  // --- state
  let ready = false;
  let draining = false;
  let sweeping = false;
  const queue = [];
  /** runId → job, queued or active in this process. */
  const jobs = new Map();
  let activeCount = 0;
  /** runId → EventBuffer of `/runs` jobs. */
  const runBuffers = new Map();
  /** key → Session. */
  const sessions = new Map();
  const tombstones = new Set();
  const settledMemo = new Set();
  /** runId → release of a lock taken at admission, handed to the run's own acquire. */
  const held = new Map();

  // The store runs see: the user's, except that acquiring a run admitted here returns the lock
  // admission already holds (so admission and the run are one lease, never two contenders).
  const runStore = {
    load: (runId) => store.load(runId),
    append: (runId, data) => store.append(runId, data),
    acquire: async (runId) => {
      const release = held.get(runId);
      if (release) {
        held.delete(runId);
        return release;
      }
      return store.acquire(runId);
    },
    close: (runId) => store.close(runId),
  };
  if (typeof store.list === "function") runStore.list = () => store.list();

  const remember = (set, value, max) => {
    set.delete(value);
    set.add(value);
    if (set.size > max) set.delete(set.values().next().value);
  };

  async function inspect(runId) {
    return inspectDurableJournal(await store.load(runId));
  }

  /** Takes the run's lock for a job about to be driven here; throws the store's error. */
  async function admit(runId) {
    if (held.has(runId)) return;
    held.set(runId, await store.acquire(runId));
  }

  async function releaseHeld(runId) {
    const release = held.get(runId);
    if (!release) return;
    held.delete(runId);
    try {
      await release();
      await store.close(runId);
    } catch {
      // the lease lapses on its own
    }
  }

  // --- queue and driver

  function enqueue(job) {
    jobs.set(job.runId, job);
    queue.push(job);
    pump();
  }

  function pump() {
    while (!draining && activeCount < maxConcurrentRuns && queue.length > 0) {
      const job = queue.shift();
      activeCount++;
      job.active = true;
      drive(job).finally(() => {
        activeCount--;
        jobs.delete(job.runId);
        pump();
      });
    }
  }

  function runOptionsFor(job) {
    const context = { sessionId: job.session ? job.session.key : job.runId, runId: job.runId };
    if (job.principal) context.principal = job.principal;
    const base = runOptions ? runOptions(context) : {};
    if (base !== undefined && (base === null || typeof base !== "object")) {
      throw codedError("cave_serve_run_options_invalid", "cave_serve_run_options_invalid: runOptions() must return an object");
    }
    const out = { ...(base ?? {}) };
    out.durable = { runId: job.runId, store: runStore };
    out.signal = job.abort.signal;
    out.rootDir ??= rootDir;
    delete out.controller;
    if (job.session) {
      out.sessionId = job.session.key;
      out.conversation = job.session.conversation;
      out.controller = job.session.controller;
    } else {
      delete out.conversation;
    }
    return out;
  }

  /** Settles a pending run as cancelled, under the lock this process holds or takes. */
  async function settleCancelled(runId, reason) {
    const mine = held.get(runId);
    const release = mine ?? (await store.acquire(runId));
    held.delete(runId);
    try {
      const { summary } = await inspect(runId);
      if (summary.status === "pending") await store.append(runId, native.durableCancelledLine(String(reason ?? summary.cancelRequested?.reason ?? "cancelled by request")));
    } finally {
      await release();
      await store.close(runId);
    }
  }

  async function drive(job) {
    const emit = (payload) => job.buffer.push(payload);
    let sawTurnEnd = false;
    const frame = (payload) => {
      if (payload.kind === "turn.end") sawTurnEnd = true;
      emit(payload);
    };
    const errorFrames = (message) => {
      frame({ kind: "error", message, retryable: false });
      frame({ kind: "turn.end", stopReason: "error" });
    };
    try {
      if (job.removed) return;
      await admit(job.runId);
      job.admitted?.resolve({ admitted: true });
      const { summary } = await inspect(job.runId);
      if (summary.status === "pending" && summary.cancelRequested) {
        await settleCancelled(job.runId, summary.cancelRequested.reason);
        errorFrames(DURABLE_CANCELLED_CODE);
        return;
      }
      const runOpts = runOptionsFor(job);
      frame({ kind: "turn.start" });
      for await (const event of stream(definition, job.input, runOpts)) {
        for (const payload of framePayloads(event)) frame(payload);
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      job.admitted?.resolve({ admitted: false, reason: error?.code ?? message });
      if (typeof process !== "undefined") process.stderr.write(`caveman-agent serve: run ${job.runId} failed: ${message}\n`);
      if (!sawTurnEnd) errorFrames(message);
    } finally {
      job.admitted?.resolve({ admitted: false, reason: "cave_serve_draining" });
      if (!sawTurnEnd && !job.removed) errorFrames("cave_serve_run_ended_without_terminal_event");
      // The session is idle as soon as its run is (the next run has its own id and lock).
      job.session?.runSettled(job);
      await releaseHeld(job.runId);
      // A DELETE aborts the run, which leaves it pending: settle it as cancelled now.
      try {
        const { summary } = await inspect(job.runId);
        if (summary.status === "pending" && summary.cancelRequested) await settleCancelled(job.runId, summary.cancelRequested.reason);
        if (summary.status !== "pending") remember(settledMemo, job.runId, L.settledMemo);
      } catch {
        // the sweep retries
      }
      if (!job.session) job.buffer.settledAt = Date.now();
    }
  }

  function evictRunBuffers() {
    const now = Date.now();
    const settled = [...runBuffers].filter(([, b]) => b.settledAt !== undefined);
    let excess = settled.length - L.settledBuffers;
    for (const [runId, b] of settled) {
      if (excess > 0 || now - b.settledAt > L.settledBufferMs) {
        b.close();
        runBuffers.delete(runId);
        excess--;
      }
    }
  }

  function newRunJob(runId, input) {
    evictRunBuffers();
    const buffer = new EventBuffer(runId);
    runBuffers.set(runId, buffer);
    return { runId, input, buffer, abort: new AbortController() };
  }

  // --- sessions

  class Session {
    constructor(key, publicId) {
      this.key = key;
      this.publicId = publicId;
      this.buffer = new EventBuffer(key);
      this.conversation = restoreConversation({ sessionId: key, messages: [] });
      // One controller per session: messages during a run are queued into it (§1.6).
      this.controller = new AgentRunController();
      this.nextRun = 1;
      this.activeJob = undefined;
      /** `{ input, principal, entry, message }` queued into the controller, in arrival order. */
      this.pending = [];
      this.messages = [];
      this.error = undefined;
      this.busyElsewhere = false;
      this.lastUsedAt = Date.now();
      this.settledAt = 0;
    }

    touch() {
      this.lastUsedAt = Date.now();
    }

    record(entry) {
      this.messages.push(entry);
      if (this.messages.length > L.sessionMessages) this.messages.shift();
      return entry;
    }

    idle() {
      return !this.activeJob && this.buffer.subscribers.size === 0 && Date.now() - this.settledAt >= L.sessionIdleMs;
    }

    /** Starts run `runId` with `input`; resolves once admitted (or not). */
    launch(runId, input, principal) {
      const job = { runId, input, buffer: this.buffer, abort: new AbortController(), session: this, principal };
      let resolve;
      job.admission = new Promise((r) => (resolve = r));
      let done = false;
      job.admitted = { resolve: (v) => !done && ((done = true), resolve(v)) };
      this.activeJob = job;
      enqueue(job);
      return job;
    }

    /** Queues `input` into the session's controller for the active (or starting) run. */
    queue(mode, input, principal, entry) {
      const message = this.controller[CONTROLLER_ENQUEUE](mode, input);
      this.pending.push({ input, principal, entry, message });
    }

    runSettled(job) {
      if (this.activeJob !== job) return;
      this.activeJob = undefined;
      this.settledAt = Date.now();
      // Leftovers (queued, never delivered) become the next run: the first is its input and
      // keeps its mode; the rest are re-queued as follow-ups.
      const undelivered = new Set(this.controller[CONTROLLER_QUEUED]());
      const left = this.pending.filter((p) => undelivered.has(p.message));
      this.pending = [];
      this.controller.clear();
      const next = left.shift();
      if (!next || tombstones.has(this.key) || sessions.get(this.key) !== this) return;
      const runId = `${this.key}.${this.nextRun++}`;
      next.entry.runId = runId;
      next.entry.queued = false;
      for (const p of left) {
        p.entry.runId = runId;
        this.queue("followUp", p.input, p.principal, p.entry);
      }
      this.launch(runId, next.input, next.principal);
    }

    close() {
      this.pending = [];
      this.controller.clear();
      this.buffer.close();
    }
  }

  function sessionKey(ns, sessionId) {
    return ns ? `${ns}-${sessionId}` : sessionId;
  }

  const validSessionId = (ns, id) => typeof id === "string" && id !== "" && RUN_ID.test(`${id}.1`) && RUN_ID.test(`${sessionKey(ns, id)}.1`);

  /**
   * The session's journals `<key>.<n>` from `from` on, as `{n, runId, inspection}`. Session runs
   * are numbered without holes, so this probes n, n+1, … until a run is missing: a few loads per
   * message rather than a listing of the whole store. Only journals that name the session and
   * carry a valid base checkpoint count (corrupt ones are passed over).
   */
  async function sessionRuns(key, from = 1) {
    const out = [];
    for (let n = Math.max(1, from); ; n++) {
      const runId = `${key}.${n}`;
      const lines = await store.load(runId);
      if (lines.length === 0) break;
      let inspection;
      try {
        inspection = await inspectDurableJournal(lines);
      } catch {
        continue;
      }
      if (inspection.sessionId !== key || !inspection.baseValid) continue;
      out.push({ n, runId, inspection });
    }
    return out;
  }

  /** Rebuilds a session from its newest journal; `undefined` when the store has none. */
  async function adopt(key, publicId, runs) {
    runs ??= await sessionRuns(key);
    if (runs.length === 0) return undefined;
    const session = new Session(key, publicId);
    restoreFrom(session, runs);
    addSession(session);
    return session;
  }

  function restoreFrom(session, runs) {
    const newest = runs[runs.length - 1];
    session.nextRun = Math.max(session.nextRun, newest.n + 1);
    const checkpoint = newest.inspection.checkpoint;
    if (!checkpoint) session.error = "cave_session_conversation_unrecoverable";
    else session.conversation = restoreConversation(checkpoint);
    return newest;
  }

  function addSession(session) {
    sessions.set(session.key, session);
    if (sessions.size <= L.maxSessions) return;
    const idle = [...sessions.values()].filter((s) => s !== session && s.idle()).sort((a, b) => a.lastUsedAt - b.lastUsedAt);
    for (const s of idle) {
      if (sessions.size <= L.maxSessions) break;
      s.close();
      sessions.delete(s.key);
    }
  }

  async function findSession(ns, id) {
    const key = sessionKey(ns, id);
    const live = sessions.get(key);
    if (live) return live;
    if (tombstones.has(key)) return undefined;
    return adopt(key, id);
  }

  /** Re-drives the session's unfinished newest run and waits for its lock. */
  async function adoptPending(session, run) {
    const input = run.inspection.summary.input;
    if (!durableInputIsReplayable(input)) return { admitted: false, reason: "cave_serve_resume_needs_original_input" };
    const job = session.launch(run.runId, input, undefined);
    const admission = await job.admission;
    if (!admission.admitted) {
      if (session.activeJob === job) session.activeJob = undefined;
      session.busyElsewhere = admission.reason === "cave_durable_run_locked";
    } else {
      session.busyElsewhere = false;
    }
    return admission;
  }

  async function acceptMessage(session, body, principal) {
    session.touch();
    if (session.error) return fail(409, session.error);
    const { text, author, mode = "followUp", context } = body;
    if (typeof text !== "string" || text === "") return fail(400, "cave_session_message_text_required");
    if (author !== undefined && (typeof author !== "string" || author === "" || author.length > 256)) return fail(400, "cave_session_message_author_invalid");
    if (mode !== "followUp" && mode !== "steer") return fail(400, "cave_session_message_mode_invalid");
    let input;
    try {
      input = withMessageContext(text, context);
    } catch (error) {
      return fail(400, error.code);
    }
    const entry = { runId: "", text, ...(author === undefined ? {} : { author }), mode, queued: true, at: new Date().toISOString() };
    // Queued behind the active run (checked again after the sweep below, which may adopt one).
    const queueBehindActive = () => {
      entry.runId = session.activeJob.runId;
      try {
        session.queue(mode, input, principal, entry);
      } catch (error) {
        // A blank message: the controller refuses it (cave_agent_queue_message_required).
        return fail(400, error.code);
      }
      session.record(entry);
      return json(202, { runId: entry.runId, queued: true });
    };
    if (session.activeJob) return queueBehindActive();
    // Idle here: a run left unfinished (a crash, another instance) goes first.
    const runs = await sessionRuns(session.key, session.nextRun - 1);
    if (runs && runs.length > 0) {
      const newest = runs[runs.length - 1];
      session.nextRun = Math.max(session.nextRun, newest.n + 1);
      if (newest.inspection.summary.status === "pending" && !session.activeJob) {
        if (newest.inspection.checkpoint) session.conversation = restoreConversation(newest.inspection.checkpoint);
        const admission = await adoptPending(session, newest);
        if (!admission.admitted) return fail(409, admission.reason === "cave_durable_run_locked" ? "cave_session_busy_elsewhere" : admission.reason);
      }
    }
    if (session.activeJob) return queueBehindActive();
    const runId = `${session.key}.${session.nextRun++}`;
    entry.runId = runId;
    entry.queued = false;
    session.record(entry);
    session.launch(runId, input, principal);
    return json(202, { runId, queued: false });
  }

  function deleteSession(session) {
    const job = session.activeJob;
    session.pending = [];
    session.controller.clear();
    if (job) {
      if (!job.active) {
        // Still queued here: it never starts.
        job.removed = true;
        const i = queue.indexOf(job);
        if (i >= 0) queue.splice(i, 1);
        jobs.delete(job.runId);
        releaseHeld(job.runId);
      } else {
        requestDurableCancel(store, job.runId).catch(() => {});
        job.abort.abort(new Error(DURABLE_CANCELLED_CODE));
      }
    }
    session.close();
    sessions.delete(session.key);
    remember(tombstones, session.key, L.sessionTombstones);
  }

  // --- WebSocket

  function attachSocket(session, socket, request, url, principal) {
    let closed = false;
    const close = (code, reason) => {
      if (closed) return;
      closed = true;
      session.buffer.subscribers.delete(sub);
      try {
        socket.close(code, reason);
      } catch {
        // already closing
      }
    };
    const sub = {
      done: false,
      gap(notice) {
        socket.send(JSON.stringify(notice));
      },
      frame(_seq, frame) {
        if (!closed) socket.send(frame);
      },
      end() {
        sub.done = true;
        close(1000, "session closed");
      },
    };
    socket.addEventListener("message", async (event) => {
      let msg;
      try {
        const data = event.data;
        const text = typeof data === "string" ? data : decoder.decode(data instanceof ArrayBuffer ? new Uint8Array(data) : ArrayBuffer.isView(data) ? data : utf8.encode(String(data)));
        msg = JSON.parse(text);
      } catch {
        return close(1008, "cave_serve_websocket_message_invalid");
      }
      if (msg?.type === "cancel") {
        session.pending = [];
        const job = session.activeJob;
        if (job?.active) {
          requestDurableCancel(store, job.runId).catch(() => {});
          job.abort.abort(new Error(DURABLE_CANCELLED_CODE));
        }
        return;
      }
      if (msg?.type !== "message") return close(1008, "cave_serve_websocket_message_invalid");
      const { type: _type, ...body } = msg;
      const response = await acceptMessage(session, body, principal);
      if (response.status < 200 || response.status >= 300) {
        const { error } = await response.json();
        close(1008, String(error));
      }
    });
    socket.addEventListener("close", () => {
      closed = true;
      session.buffer.subscribers.delete(sub);
    });
    session.buffer.attach(sub, resumePoint(request, url), true);
  }

  // --- auth

  function bearerOf(request) {
    const header = request.headers.get("authorization");
    const m = header === null ? null : /^Bearer (.+)$/.exec(header);
    if (m) return m[1];
    const protocols = request.headers.get("sec-websocket-protocol");
    if (!protocols) return undefined;
    const entry = protocols
      .split(",")
      .map((p) => p.trim())
      .find((p) => p.startsWith("cave-bearer."));
    if (!entry) return undefined;
    let b64 = entry.slice("cave-bearer.".length).replace(/-/g, "+").replace(/_/g, "/");
    while (b64.length % 4) b64 += "=";
    try {
      return decoder.decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
    } catch {
      return undefined;
    }
  }

  /** `{ ns, principal }`, or `undefined` (401). Fails closed on any surprise. */
  async function authenticateRequest(request) {
    if (typeof authenticate !== "function") {
      const bearer = bearerOf(request);
      if (bearer === undefined) return undefined;
      const given = utf8.encode(bearer);
      const same = given.byteLength === tokenBytes.byteLength && timingSafeEqual(given, tokenBytes);
      return same ? { ns: "", principal: undefined } : undefined;
    }
    let principal;
    try {
      principal = await authenticate(request);
    } catch {
      return undefined;
    }
    if (!principal || typeof principal.id !== "string" || principal.id === "") return undefined;
    const tag = native.sha256Hex(principal.id).slice(0, 16);
    const p = { id: principal.id };
    if (principal.tenant !== undefined) p.tenant = principal.tenant;
    return { ns: tag, principal: Object.freeze(p) };
  }

  // --- routes

  async function postRun(request) {
    if (draining) return fail(503, "cave_serve_draining", undefined, RETRY);
    const { body, error } = await readJsonObject(request, maxBodyBytes);
    if (error) return error;
    const { runId, input, context } = body;
    if (typeof runId !== "string") return fail(400, "cave_serve_run_id_required");
    if (!RUN_ID.test(runId)) return fail(400, "cave_durable_run_id_invalid", { message: RUN_ID_MESSAGE });
    if (/\.\d+$/.test(runId)) return fail(400, "cave_serve_run_id_reserved");
    if (typeof input !== "string" || input === "") return fail(400, "cave_serve_input_must_be_text");
    let text;
    try {
      text = withMessageContext(input, context);
    } catch (e) {
      return fail(400, e.code);
    }
    const { summary } = await inspect(runId);
    if (summary.status === "completed" || summary.status === "failed") return json(200, summary);
    if (jobs.has(runId)) return json(202, { runId, status: "running" });
    if (summary.status === "pending" && !summary.cancelRequested && !durableRunIsDue(summary)) {
      return json(202, { runId, status: "sleeping", wakeAt: summary.wakeAt });
    }
    if (queue.length >= maxQueuedRuns) return fail(503, "cave_serve_queue_full", undefined, RETRY);
    enqueue(newRunJob(runId, text));
    return json(202, { runId, status: summary.status === "pending" ? "resuming" : "running" });
  }

  async function runRoute(request, url, id, rest) {
    let runId;
    try {
      runId = decodeURIComponent(id);
    } catch {
      return badRunId();
    }
    if (!RUN_ID.test(runId)) return badRunId();
    if (rest === "events" && request.method === "GET") {
      const buffer = runBuffers.get(runId);
      if (!buffer) {
        const { summary } = await inspect(runId);
        if (summary.status === "missing") return fail(404, "cave_serve_not_found", { status: "missing" });
        return fail(409, "cave_serve_events_not_retained", {
          message: "events are held in memory for a limited window; read GET /runs/:id for the outcome",
          status: summary.status,
        });
      }
      return sseResponse(buffer, resumePoint(request, url), { sessionStream: false, endOnTurnEnd: true, settled: () => buffer.settledAt !== undefined });
    }
    if (rest !== undefined) return notFound();
    if (request.method === "GET") {
      const { summary } = await inspect(runId);
      if (summary.status === "missing") return json(404, { status: "missing" });
      if (summary.status === "pending") summary.driving = jobs.get(runId)?.active === true;
      return json(200, summary);
    }
    if (request.method === "DELETE") {
      const outcome = await requestDurableCancel(store, runId);
      if (outcome.status === "requested") jobs.get(runId)?.abort.abort(new Error(DURABLE_CANCELLED_CODE));
      const status = { requested: 202, already_requested: 202, already_settled: 409, missing: 404 }[outcome.status];
      return json(status, outcome);
    }
    return notFound();
  }

  async function postSession(request, ns) {
    const { body, error } = await readJsonObject(request, maxBodyBytes);
    if (error) return error;
    const { sessionId } = body;
    if (typeof sessionId !== "string" || sessionId === "") return fail(400, "cave_session_id_required");
    if (!validSessionId(ns, sessionId)) return badRunId();
    const key = sessionKey(ns, sessionId);
    tombstones.delete(key);
    if (!sessions.has(key) && !(await adopt(key, sessionId))) addSession(new Session(key, sessionId));
    sessions.get(key)?.touch();
    return json(201, { sessionId });
  }

  async function sessionRoute(request, url, id, rest, auth) {
    let sessionId;
    try {
      sessionId = decodeURIComponent(id);
    } catch {
      return badRunId();
    }
    if (!validSessionId(auth.ns, sessionId)) return badRunId();
    const route = `${request.method} ${rest ?? ""}`;
    if (!["POST messages", "GET ", "DELETE ", "GET events", "GET ws"].includes(route)) return notFound();
    // Another principal's session is not here: 404, never 403 (the key carries the tag).
    const session = await findSession(auth.ns, sessionId);
    if (!session) return notFound();
    switch (route) {
      case "POST messages": {
        const { body, error } = await readJsonObject(request, maxBodyBytes);
        if (error) return error;
        return acceptMessage(session, body, auth.principal);
      }
      case "GET ": {
        session.touch();
        if (session.error) return fail(409, session.error);
        const runs = [];
        for (let n = 1; n < session.nextRun; n++) {
          const { summary } = await inspect(`${session.key}.${n}`);
          if (summary.status !== "missing") runs.push(summary);
        }
        const out = { sessionId, runs };
        if (session.activeJob) out.active = session.activeJob.runId;
        out.queued = session.controller.state.queued;
        out.messages = session.messages.map((m) => ({ ...m }));
        return json(200, out);
      }
      case "DELETE ":
        deleteSession(session);
        return json(202, { sessionId, status: "deleted" });
      case "GET events":
        session.touch();
        return sseResponse(session.buffer, resumePoint(request, url), { sessionStream: true, endOnTurnEnd: false, settled: () => false });
      case "GET ws": {
        const upgraded = typeof upgrade === "function" ? upgrade(request) : undefined;
        if (!upgraded) return fail(501, "cave_serve_websocket_unavailable");
        attachSocket(session, upgraded.socket, request, url, auth.principal);
        return upgraded.response;
      }
    }
    return notFound();
  }

  async function fetch(request) {
    const url = new URL(request.url);
    const path = url.pathname;
    if (path === "/healthz") return json(200, { status: "ok" });
    if (path === "/readyz") {
      return json(ready ? 200 : 503, { status: ready ? "ready" : "recovering", active: activeCount, queued: queue.length });
    }
    const auth = await authenticateRequest(request);
    if (!auth) return fail(401, "cave_serve_unauthorized");
    if (typeof authenticate === "function" && path.startsWith("/runs")) {
      return fail(403, "cave_serve_runs_require_single_principal", { message: "with authenticate() configured, use /sessions; /runs is not principal-scoped" });
    }
    const parts = path.split("/").slice(1);
    if (parts[0] === "runs") {
      if (parts.length === 1 && request.method === "POST") return postRun(request);
      if ((parts.length === 2 || parts.length === 3) && parts[1] !== "") return runRoute(request, url, parts[1], parts[2]);
    }
    if (parts[0] === "sessions") {
      if (parts.length === 1 && request.method === "POST") return postSession(request, auth.ns);
      if ((parts.length === 2 || parts.length === 3) && parts[1] !== "") return sessionRoute(request, url, parts[1], parts[2], auth);
    }
    return notFound();
  }

  // --- recovery

  async function recover() {
    const empty = (listable) => ({ listable, resumed: [], sleeping: [], skipped: [] });
    if (typeof store.list !== "function") {
      ready = true;
      return empty(false);
    }
    if (sweeping || draining) {
      ready = true;
      return empty(true);
    }
    sweeping = true;
    const sessionResumed = [];
    const resumed = [];
    const sleeping = [];
    const skipped = [];
    try {
      const ids = (await store.list()).filter((id) => id !== INSTANCE_LOCK_RUN_ID && !settledMemo.has(id));
      const cache = new Map();
      const load = async (runId) => {
        if (!cache.has(runId)) {
          cache.set(
            runId,
            inspect(runId).then(
              (inspection) => ({ inspection }),
              (error) => ({ error }),
            ),
          );
        }
        return cache.get(runId);
      };
      const claimed = new Set();
      // Sessions first: run ids <key>.<n> whose run_started names the same session.
      const groups = new Map();
      for (const runId of ids) {
        const m = SESSION_RUN.exec(runId);
        if (!m) continue;
        const { inspection } = await load(runId);
        if (!inspection || inspection.sessionId !== m[1]) continue;
        claimed.add(runId);
        if (!groups.has(m[1])) groups.set(m[1], []);
        groups.get(m[1]).push({ n: Number(m[2]), runId, inspection });
      }
      for (const [key, list] of groups) {
        list.sort((a, b) => a.n - b.n);
        const newest = list[list.length - 1];
        for (const run of list) {
          const status = run.inspection.summary.status;
          if (status !== "pending") {
            remember(settledMemo, run.runId, L.settledMemo);
            continue;
          }
          if (!run.inspection.baseValid) skipped.push({ runId: run.runId, reason: "cave_session_conversation_unrecoverable" });
          else if (run !== newest) skipped.push({ runId: run.runId, reason: "cave_session_not_last_run" });
        }
        if (newest.inspection.summary.status !== "pending" || !newest.inspection.baseValid) continue;
        if (tombstones.has(key) || jobs.has(newest.runId)) continue;
        const live = sessions.get(key);
        if (live && !live.busyElsewhere && live.activeJob) continue;
        let session = live;
        if (!session) {
          session = new Session(key, key);
          addSession(session);
        }
        restoreFrom(session, list.filter((r) => r.inspection.baseValid));
        if (session.error) {
          skipped.push({ runId: newest.runId, reason: session.error });
          continue;
        }
        const admission = await adoptPending(session, newest);
        if (admission.admitted) sessionResumed.push(newest.runId);
        else skipped.push({ runId: newest.runId, reason: admission.reason });
      }
      // Everything else: /runs jobs and runs started by other callers.
      let free = Math.max(0, maxQueuedRuns - queue.length);
      // One run's trouble (a store error mid-pass) is that run's skip reason, never a lost report.
      const sweepOne = async (runId) => {
        const { inspection, error } = await load(runId);
        if (error) {
          skipped.push({ runId, reason: error.message ?? String(error) });
          return;
        }
        const summary = inspection.summary;
        if (summary.status !== "pending") {
          if (summary.status !== "missing") remember(settledMemo, runId, L.settledMemo);
          return;
        }
        if (summary.cancelRequested) {
          try {
            await settleCancelled(runId, summary.cancelRequested.reason);
            remember(settledMemo, runId, L.settledMemo);
            skipped.push({ runId, reason: DURABLE_CANCELLED_CODE });
          } catch (e) {
            skipped.push({ runId, reason: e?.code ?? e?.message ?? String(e) });
          }
          return;
        }
        if (!durableRunIsDue(summary)) {
          sleeping.push({ runId, wakeAt: summary.wakeAt ?? "" });
          return;
        }
        if (!durableInputIsReplayable(summary.input)) {
          skipped.push({ runId, reason: "cave_serve_resume_needs_original_input" });
          return;
        }
        if (free === 0) {
          skipped.push({ runId, reason: "cave_serve_queue_full" });
          return;
        }
        // Admission before the report: a run another process is driving is reported as skipped
        // with the store's reason, so the reports of several instances account for each run once.
        try {
          await admit(runId);
        } catch (e) {
          skipped.push({ runId, reason: e?.code ?? e?.message ?? String(e) });
          return;
        }
        // Another process may have finished it between the read above and the lock.
        const now = await inspect(runId).catch(() => undefined);
        if (now?.summary.status !== "pending") {
          await releaseHeld(runId);
          if (now) remember(settledMemo, runId, L.settledMemo);
          return;
        }
        free--;
        enqueue(newRunJob(runId, summary.input));
        resumed.push(runId);
      };
      for (const runId of ids) {
        if (claimed.has(runId) || jobs.has(runId)) continue;
        try {
          await sweepOne(runId);
        } catch (e) {
          skipped.push({ runId, reason: e?.code ?? e?.message ?? String(e) });
        }
      }
    } finally {
      sweeping = false;
      ready = true;
    }
    return { listable: true, resumed: [...sessionResumed, ...resumed], sleeping, skipped };
  }

  async function close(graceMs = L.closeGraceMs) {
    draining = true;
    const deadline = Date.now() + graceMs;
    while (activeCount > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(L.drainPollMs, Math.max(1, deadline - Date.now()))));
    }
    for (const session of sessions.values()) session.close();
    for (const buffer of runBuffers.values()) buffer.close();
    // Queued jobs never start here: give their leases back for the next instance.
    for (const job of queue) {
      job.admitted?.resolve({ admitted: false, reason: "cave_serve_draining" });
      await releaseHeld(job.runId);
    }
  }

  return {
    fetch,
    recover,
    nextWakeAt: () => nextDurableWake(store),
    close,
  };
}
