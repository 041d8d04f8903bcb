// knap/serve and knap/serve-handler: routes, bodies, status codes and error codes of the
// reference, hostile requests that must start nothing, SSE replay with Last-Event-ID, sessions
// over several runs, WebSocket, recovery of crashed, sleeping and cancelled runs, drain, the
// single-instance lease. Everything on 127.0.0.1 with a scripted model.
import test, { after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

import WebSocket from "ws";

import { run, DiskDurableStore, agent } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { createAgentServer } from "../lib/serve.mjs";
import { createAgentHandler, withMessageContext, SESSION_MESSAGE_CONTEXT_MAX_BYTES, INSTANCE_LOCK_RUN_ID } from "../lib/serve-handler.mjs";
import { scheduleDurableWake, requestDurableCancel, durableRunSummary } from "../lib/durable.mjs";
import { TOKEN, AUTH, JSON_AUTH, tempRoot, servedAgent, stepsModel, runOptionsFor, effects, readSse, post, get, waitFor } from "./serve-helpers.mjs";

const closers = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

async function startServer(options = {}) {
  const root = tempRoot();
  const effectsDir = path.join(root, "effects");
  const definition = options.definition ?? servedAgent(effectsDir);
  const store = options.store ?? new DiskDurableStore(path.join(root, "journals"));
  const server = createAgentServer({ definition, token: TOKEN, store, runOptions: runOptionsFor(2), ...options, definition });
  const port = await server.listen(0, "127.0.0.1");
  closers.push(() => server.close(2_000));
  return { server, store, root, effectsDir, base: `http://127.0.0.1:${port}`, port };
}

/** A raw HTTP request (for header forms and bodies fetch() will not send). */
function raw(port, { method = "GET", path: p = "/", headers = {}, body, chunks } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path: p, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: text ? JSON.parse(text) : undefined }));
    });
    req.on("error", reject);
    if (chunks) {
      (async () => {
        for (const chunk of chunks) {
          if (!req.write(chunk)) await new Promise((r) => req.once("drain", r));
        }
        req.end();
      })().catch(() => {});
    } else {
      req.end(body);
    }
  });
}

test("withMessageContext: the exact block, the 64 KiB limit and the codes", () => {
  assert.equal(SESSION_MESSAGE_CONTEXT_MAX_BYTES, 65_536);
  assert.equal(INSTANCE_LOCK_RUN_ID, "caveman.instance.lock");
  assert.equal(withMessageContext("hi", undefined), "hi");
  assert.equal(withMessageContext("hi", { a: 1, b: ["x"] }), 'hi\n\n<cave-message-context>\n{"a":1,"b":["x"]}\n</cave-message-context>');
  assert.equal(withMessageContext("hi", [1]), "hi\n\n<cave-message-context>\n[1]\n</cave-message-context>");
  for (const bad of [null, "text", 3, true]) {
    assert.throws(() => withMessageContext("hi", bad), (e) => e.code === "cave_session_message_context_invalid");
  }
  const cyclic = {};
  cyclic.self = cyclic;
  assert.throws(() => withMessageContext("hi", cyclic), (e) => e.code === "cave_session_message_context_invalid");
  // 65,536 bytes serialized is the most allowed: {"k":"…"} is 8 bytes of framing.
  assert.ok(withMessageContext("hi", { k: "x".repeat(65_536 - 8) }));
  assert.throws(() => withMessageContext("hi", { k: "x".repeat(65_536 - 7) }), (e) => e.code === "cave_session_message_context_too_large");
  // Bytes, not characters.
  assert.throws(() => withMessageContext("hi", { k: "é".repeat(40_000) }), (e) => e.code === "cave_session_message_context_too_large");
});

test("construction: token, concurrency, server-owned run options, build", () => {
  const definition = servedAgent(path.join(tempRoot(), "e"));
  assert.throws(
    () => createAgentHandler({ definition, token: "short" }),
    /^Error: cave_serve_token_required: set a bearer token of at least 16 characters, or pass authenticate\(\); this endpoint spends money$/,
  );
  assert.throws(() => createAgentHandler({ definition }), /cave_serve_token_required/);
  assert.throws(() => createAgentHandler({ definition, token: TOKEN, maxConcurrentRuns: 0 }), /cave_serve_concurrency_invalid/);
  assert.throws(() => createAgentHandler({ definition, token: TOKEN, maxConcurrentRuns: 1.5 }), /cave_serve_concurrency_invalid/);
  assert.throws(() => createAgentServer({ definition, token: TOKEN, runOptions: { durable: { runId: "x" } } }), /^Error: cave_serve_durable_owned: the server assigns durable options per request$/);
  for (const key of ["controller", "conversation", "signal"]) {
    assert.throws(() => createAgentServer({ definition, token: TOKEN, runOptions: { [key]: undefined } }), /^Error: cave_serve_run_option_owned: controller, conversation, and signal are server-owned$/);
  }
  assert.throws(() => createAgentHandler({ definition, token: TOKEN, build: {} }), (e) => e.code === "cave_serve_build_unsupported");
  assert.throws(() => createAgentHandler({ definition, token: TOKEN, nonsense: 1 }), (e) => e.code === "cave_serve_option_unknown");
  assert.ok(createAgentHandler({ definition, authenticate: () => ({ id: "u" }) }));
});

test("hostile requests get the reference's status and code and start nothing", async () => {
  const { base, port, store, effectsDir, server } = await startServer({ maxBodyBytes: 4096 });
  const check = async (what, response, status, code) => {
    const r = await response;
    assert.equal(r.status, status, what);
    if (code) assert.equal(r.body?.error, code, what);
    return r;
  };
  // Unknown route before and after authentication.
  await check("unknown route, no token", raw(port, { path: "/nope" }), 401, "cave_serve_unauthorized");
  await check("unknown route, token", raw(port, { path: "/nope", headers: AUTH }), 404, "cave_serve_not_found");
  await check("runs subroute", raw(port, { path: "/runs/a/b/c", headers: AUTH }), 404, "cave_serve_not_found");
  // Missing, wrong and misplaced tokens.
  const body = JSON.stringify({ runId: "hostile-1", input: "go" });
  const postRuns = (headers, b = body) => raw(port, { method: "POST", path: "/runs", headers: { "content-type": "application/json", ...headers }, body: b });
  await check("no token", postRuns({}), 401, "cave_serve_unauthorized");
  await check("wrong token", postRuns({ authorization: "Bearer not-the-token-at-all" }), 401, "cave_serve_unauthorized");
  await check("token prefix", postRuns({ authorization: `Bearer ${TOKEN.slice(0, -1)}` }), 401, "cave_serve_unauthorized");
  await check("token plus one", postRuns({ authorization: `Bearer ${TOKEN}x` }), 401, "cave_serve_unauthorized");
  for (const form of [`bearer ${TOKEN}`, `BEARER ${TOKEN}`, `Bearer  ${TOKEN}`, `Token ${TOKEN}`, TOKEN, `Basic ${Buffer.from(`u:${TOKEN}`).toString("base64")}`]) {
    await check(`header form ${JSON.stringify(form.slice(0, 8))}`, postRuns({ authorization: form }), 401, "cave_serve_unauthorized");
  }
  await check("token in another header", postRuns({ "x-api-key": TOKEN }), 401, "cave_serve_unauthorized");
  await check("token in the query", raw(port, { method: "POST", path: `/runs?token=${TOKEN}`, headers: { "content-type": "application/json" }, body }), 401, "cave_serve_unauthorized");
  await check("token as cookie", postRuns({ cookie: `token=${TOKEN}` }), 401, "cave_serve_unauthorized");
  // Bodies.
  await check("oversized (declared)", postRuns(AUTH, JSON.stringify({ runId: "hostile-2", input: "x".repeat(5000) })), 413, "cave_serve_body_too_large");
  await check(
    "oversized (chunked, no length)",
    raw(port, { method: "POST", path: "/runs", headers: { ...AUTH, "transfer-encoding": "chunked" }, chunks: ['{"runId":"hostile-3","input":"', "x".repeat(3000), "y".repeat(3000), '"}'] }),
    413,
    "cave_serve_body_too_large",
  );
  await check("invalid JSON", postRuns(AUTH, '{"runId": "hostile-4", "input": '), 400, "cave_serve_body_invalid_json");
  await check("empty body", postRuns(AUTH, ""), 400, "cave_serve_body_invalid_json");
  await check("array body", postRuns(AUTH, "[]"), 400, "cave_serve_body_invalid");
  await check("string body", postRuns(AUTH, '"x"'), 400, "cave_serve_body_invalid");
  await check("no runId", postRuns(AUTH, '{"input":"go"}'), 400, "cave_serve_run_id_required");
  const invalid = await check("bad runId", postRuns(AUTH, '{"runId":"../etc","input":"go"}'), 400, "cave_durable_run_id_invalid");
  assert.equal(invalid.body.message, "cave_durable_run_id_invalid: durable.runId must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}");
  await check("reserved runId", postRuns(AUTH, '{"runId":"job.7","input":"go"}'), 400, "cave_serve_run_id_reserved");
  await check("no input", postRuns(AUTH, '{"runId":"hostile-5"}'), 400, "cave_serve_input_must_be_text");
  await check("parts input", postRuns(AUTH, '{"runId":"hostile-6","input":[{"type":"text","text":"x"}]}'), 400, "cave_serve_input_must_be_text");
  await check("bad context", postRuns(AUTH, '{"runId":"hostile-7","input":"go","context":"str"}'), 400, "cave_session_message_context_invalid");
  await check("bad id in path", raw(port, { path: "/runs/%E0%A4%A", headers: AUTH }), 400, "cave_durable_run_id_invalid");
  await check("events of a missing run", raw(port, { path: "/runs/never/events", headers: AUTH }), 404, "cave_serve_not_found");
  await check("missing run", raw(port, { path: "/runs/never", headers: AUTH }), 404);
  await check("cancel a missing run", raw(port, { method: "DELETE", path: "/runs/never", headers: AUTH }), 404);
  // Sessions: bad ids, bodies, unknown sessions.
  const postSession = (b) => raw(port, { method: "POST", path: "/sessions", headers: { ...JSON_AUTH }, body: b });
  await check("session without id", postSession("{}"), 400, "cave_session_id_required");
  await check("session with a bad id", postSession('{"sessionId":"-x"}'), 400, "cave_durable_run_id_invalid");
  await check("session id too long", postSession(JSON.stringify({ sessionId: "a".repeat(127) })), 400, "cave_durable_run_id_invalid");
  await check("unknown session", raw(port, { path: "/sessions/ghost", headers: AUTH }), 404, "cave_serve_not_found");
  await check("message to an unknown session", raw(port, { method: "POST", path: "/sessions/ghost/messages", headers: JSON_AUTH, body: '{"text":"x"}' }), 404, "cave_serve_not_found");
  await check("session, no token", raw(port, { method: "POST", path: "/sessions", headers: { "content-type": "application/json" }, body: '{"sessionId":"s1"}' }), 401, "cave_serve_unauthorized");
  assert.equal((await postSession('{"sessionId":"s1"}')).status, 201);
  const message = (b) => raw(port, { method: "POST", path: "/sessions/s1/messages", headers: JSON_AUTH, body: b });
  await check("message without text", message("{}"), 400, "cave_session_message_text_required");
  await check("message with a bad author", message('{"text":"x","author":7}'), 400, "cave_session_message_author_invalid");
  await check("message with a bad mode", message('{"text":"x","mode":"now"}'), 400, "cave_session_message_mode_invalid");
  await check("message with a scalar context", message(JSON.stringify({ text: "x", context: "y" })), 400, "cave_session_message_context_invalid");
  await check("message with a null context", message(JSON.stringify({ text: "x", context: null })), 400, "cave_session_message_context_invalid");
  await check("oversized message", message(JSON.stringify({ text: "x".repeat(5000) })), 413, "cave_serve_body_too_large");
  // WebSocket: no bearer subprotocol, a wrong one, a path that is not a session socket.
  const wsStatus = (p, protocols, headers) =>
    new Promise((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}${p}`, protocols, { headers });
      ws.on("unexpected-response", (_req, res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode, body: text ? JSON.parse(text) : undefined }));
      });
      ws.on("open", () => {
        ws.close();
        resolve({ status: 101 });
      });
      ws.on("error", () => {});
    });
  await check("ws without bearer", wsStatus("/sessions/s1/ws", ["caveman-agent"]), 401, "cave_serve_unauthorized");
  const wrong = `cave-bearer.${Buffer.from("wrong-token-wrong-token").toString("base64url")}`;
  await check("ws with a wrong bearer", wsStatus("/sessions/s1/ws", ["caveman-agent", wrong]), 401, "cave_serve_unauthorized");
  await check("ws to an unknown session", wsStatus("/sessions/ghost/ws", [], AUTH), 404, "cave_serve_not_found");
  await check("ws elsewhere", wsStatus("/runs/x/ws", [], AUTH), 426, "cave_serve_upgrade_required");
  // Nothing started: no journal, no side effect, nothing queued.
  assert.deepEqual(await store.list(), []);
  assert.deepEqual(effects(effectsDir), []);
  const ready = await get(`http://127.0.0.1:${port}`, "/readyz", {});
  assert.deepEqual(ready.body, { status: "ready", active: 0, queued: 0 });
  assert.ok(server);
  assert.ok(base);
});

test("/runs: submit, stream, status, idempotent replay, cancel", async () => {
  const { base, effectsDir } = await startServer();
  const accepted = await post(base, "/runs", { runId: "job-1", input: "go", context: { ticket: 7 } });
  assert.deepEqual([accepted.status, accepted.body], [202, { runId: "job-1", status: "running" }]);
  const again = await post(base, "/runs", { runId: "job-1", input: "go", context: { ticket: 7 } });
  assert.equal(again.status, 202);
  const events = await fetch(`${base}/runs/job-1/events`, { headers: AUTH });
  assert.equal(events.status, 200);
  assert.equal(events.headers.get("content-type"), "text/event-stream");
  assert.equal(events.headers.get("cache-control"), "no-cache, no-transform");
  assert.equal(events.headers.get("x-accel-buffering"), "no");
  const frames = await readSse(events).done;
  const kinds = frames.map((f) => f.data.kind);
  assert.deepEqual(kinds, ["turn.start", "usage", "tool.start", "tool.end", "usage", "tool.start", "tool.end", "usage", "turn.end"]);
  assert.deepEqual(frames.map((f) => f.id), frames.map((_, i) => i));
  for (const f of frames) {
    assert.equal(f.data.v, 1);
    assert.equal(f.data.sessionId, "job-1");
    assert.equal(f.data.seq, f.id);
  }
  assert.deepEqual(frames[2].data, { ...frames[2].data, kind: "tool.start", name: "record", argsSummary: '{"step":1}' });
  assert.equal(frames.at(-1).data.stopReason, "end_turn");
  const status = await get(base, "/runs/job-1");
  assert.equal(status.body.status, "completed");
  assert.equal(status.body.result.text, "done 2");
  // The journaled input is the composed text.
  assert.equal(status.body.result.runId, "job-1");
  const replay = await post(base, "/runs", { runId: "job-1", input: "go", context: { ticket: 7 } });
  assert.deepEqual([replay.status, replay.body.status], [200, "completed"]);
  assert.equal(effects(effectsDir).length, 2);
  // Settled: the buffer replays, then the stream ends at once.
  const late = await readSse(await fetch(`${base}/runs/job-1/events`, { headers: { ...AUTH, "last-event-id": "6" } })).done;
  assert.deepEqual(late.map((f) => f.id), [7, 8]);
  const cancel = await fetch(`${base}/runs/job-1`, { method: "DELETE", headers: AUTH });
  assert.deepEqual([cancel.status, await cancel.json()], [409, { status: "already_settled", terminal: "completed" }]);
});

test("/runs: DELETE cancels a running job; the run settles as cancelled", async () => {
  const root = tempRoot();
  const effectsDir = path.join(root, "effects");
  const { base } = await startServer({ definition: servedAgent(effectsDir), runOptions: () => ({ model: fauxModel(), streamFn: stepsModel(50, { delayMs: 40 }) }) });
  await post(base, "/runs", { runId: "long-1", input: "go" });
  const stream = readSse(await fetch(`${base}/runs/long-1/events`, { headers: AUTH }));
  await waitFor(() => stream.frames.some((f) => f.data.kind === "tool.end"), "a first tool call");
  const cancel = await fetch(`${base}/runs/long-1`, { method: "DELETE", headers: AUTH });
  assert.deepEqual([cancel.status, await cancel.json()], [202, { status: "requested", reason: "cancelled by request" }]);
  const again = await fetch(`${base}/runs/long-1`, { method: "DELETE", headers: AUTH });
  assert.equal(again.status, 202);
  const frames = await stream.done;
  assert.equal(frames.at(-1).data.kind, "turn.end");
  assert.equal(frames.at(-1).data.stopReason, "error");
  const status = await waitFor(async () => {
    const s = await get(base, "/runs/long-1");
    return s.body.status === "failed" && s;
  }, "the cancelled settlement");
  assert.equal(status.body.code, "cave_durable_run_cancelled");
  assert.equal(status.body.receipt, null);
});

test("sessions: turns see earlier turns, events resume with Last-Event-ID, messages, delete", async () => {
  const { base, store } = await startServer();
  assert.deepEqual((await post(base, "/sessions", { sessionId: "chat" })).body, { sessionId: "chat" });
  assert.equal((await post(base, "/sessions", { sessionId: "chat" })).status, 201);
  const live = readSse(await fetch(`${base}/sessions/chat/events`, { headers: AUTH }));
  const first = await post(base, "/sessions/chat/messages", { text: "first", author: "ana" });
  assert.deepEqual([first.status, first.body], [202, { runId: "chat.1", queued: false }]);
  await waitFor(() => live.frames.filter((f) => f.data.kind === "turn.end").length === 1, "turn 1");
  // The turn.end frame goes out just before the session turns idle.
  await waitFor(async () => (await get(base, "/sessions/chat")).body.active === undefined, "an idle session");
  const second = await post(base, "/sessions/chat/messages", { text: "second", context: { page: 2 } });
  assert.deepEqual(second.body, { runId: "chat.2", queued: false });
  await waitFor(() => live.frames.filter((f) => f.data.kind === "turn.end").length === 2, "turn 2");
  // One stream over both runs, numbered on.
  assert.deepEqual(live.frames.map((f) => f.id), live.frames.map((_, i) => i));
  // Reconnect from the middle: exactly the frames after it.
  const cut = 5;
  const resumed = readSse(await fetch(`${base}/sessions/chat/events`, { headers: { ...AUTH, "last-event-id": String(cut) } }), (f) => f.id === live.frames.at(-1).id);
  const tail = await resumed.done;
  assert.deepEqual(tail.map((f) => f.id), live.frames.slice(cut + 1).map((f) => f.id));
  assert.deepEqual(tail.map((f) => f.data), live.frames.slice(cut + 1).map((f) => f.data));
  // The query form, and a client ahead of the server (after a restart): a gap, then everything.
  const ahead = readSse(await fetch(`${base}/sessions/chat/events?lastEventId=900`, { headers: AUTH }), (f) => f.id === live.frames.at(-1).id);
  const aheadFrames = await ahead.done;
  assert.deepEqual(aheadFrames[0], { ...aheadFrames[0], event: "gap", data: { error: "cave_serve_events_gap", requestedSeq: 901, earliestSeq: 0 } });
  assert.equal(aheadFrames.length, live.frames.length + 1);
  // Run 2 saw run 1: its base checkpoint holds turn 1.
  const journal = await store.load("chat.2");
  const started = JSON.parse(journal[0]);
  assert.equal(started.sessionId, "chat");
  assert.equal(started.input, 'second\n\n<cave-message-context>\n{"page":2}\n</cave-message-context>');
  assert.equal(started.conversation.messages[0].content[0].text, "first");
  const done = JSON.parse(journal.at(-1));
  assert.equal(done.type, "run_completed");
  assert.equal(done.conversation.messages.length, started.conversation.messages.length + 6);
  const info = await get(base, "/sessions/chat");
  assert.equal(info.body.sessionId, "chat");
  assert.deepEqual(info.body.runs.map((r) => [r.runId, r.status]), [["chat.1", "completed"], ["chat.2", "completed"]]);
  assert.equal(info.body.queued, 0);
  assert.deepEqual(info.body.messages.map(({ at, ...m }) => (assert.ok(Date.parse(at)), m)), [
    { runId: "chat.1", text: "first", author: "ana", mode: "followUp", queued: false },
    { runId: "chat.2", text: "second", mode: "followUp", queued: false },
  ]);
  // Delete ends the stream; the session is gone here (its journals remain).
  const deleted = await fetch(`${base}/sessions/chat`, { method: "DELETE", headers: AUTH });
  assert.deepEqual([deleted.status, await deleted.json()], [202, { sessionId: "chat", status: "deleted" }]);
  await live.done;
  assert.equal((await get(base, "/sessions/chat")).status, 404);
  assert.equal((await store.load("chat.1")).length > 0, true);
});

/** A model that waits on `gate` in its first call and records each call's newest user text. */
function gatedModel() {
  let release;
  const gate = new Promise((resolve) => (release = resolve));
  const seen = [];
  const streamFn = async (model, context, options) => {
    const users = context.messages.filter((m) => m.role === "user");
    const last = users.at(-1).content;
    seen.push(typeof last === "string" ? last : last.map((p) => p.text).join(""));
    if (seen.length === 1) await gate;
    return scriptedStream([{ text: `answer ${seen.length}` }])(model, context, options);
  };
  return { streamFn, seen, release };
}

test("sessions: messages during a run are queued into it through the session's controller (steer first, then the follow-up)", async () => {
  const model = gatedModel();
  const { base } = await startServer({ runOptions: () => ({ model: fauxModel(), streamFn: model.streamFn }) });
  await post(base, "/sessions", { sessionId: "busy" });
  const live = readSse(await fetch(`${base}/sessions/busy/events`, { headers: AUTH }));
  assert.deepEqual((await post(base, "/sessions/busy/messages", { text: "a" })).body, { runId: "busy.1", queued: false });
  await waitFor(() => model.seen.length === 1, "the first model call");
  assert.deepEqual((await post(base, "/sessions/busy/messages", { text: "b" })).body, { runId: "busy.1", queued: true });
  assert.deepEqual((await post(base, "/sessions/busy/messages", { text: "c", mode: "steer" })).body, { runId: "busy.1", queued: true });
  const blank = await post(base, "/sessions/busy/messages", { text: "  " });
  assert.deepEqual([blank.status, blank.body], [400, { error: "cave_agent_queue_message_required" }]);
  const during = await get(base, "/sessions/busy");
  assert.equal(during.body.queued, 2);
  assert.equal(during.body.active, "busy.1");
  model.release();
  await waitFor(() => live.frames.some((f) => f.data.kind === "turn.end"), "the run's end");
  await waitFor(async () => (await get(base, "/sessions/busy")).body.active === undefined, "an idle session");
  // One run: the steering message at the first boundary, then the follow-up.
  assert.deepEqual(model.seen, ["a", "c", "b"]);
  const info = await get(base, "/sessions/busy");
  assert.deepEqual(info.body.messages.map((m) => [m.text, m.runId, m.mode, m.queued]), [["a", "busy.1", "followUp", false], ["b", "busy.1", "followUp", true], ["c", "busy.1", "steer", true]]);
  assert.deepEqual(info.body.runs.map((r) => r.status), ["completed"]);
  assert.equal(info.body.queued, 0);
  assert.equal(live.frames.filter((f) => f.data.kind === "turn.end").length, 1);
  live.cancel();
});

test("sessions: messages a run leaves undelivered become the next runs, in arrival order", async () => {
  const model = gatedModel();
  // One model call per run: a queued message can never be delivered into it.
  const { base } = await startServer({ runOptions: () => ({ model: fauxModel(), streamFn: model.streamFn, maxModelCalls: 1 }) });
  await post(base, "/sessions", { sessionId: "left" });
  const live = readSse(await fetch(`${base}/sessions/left/events`, { headers: AUTH }));
  await post(base, "/sessions/left/messages", { text: "a" });
  await waitFor(() => model.seen.length === 1, "the first model call");
  assert.deepEqual((await post(base, "/sessions/left/messages", { text: "b" })).body, { runId: "left.1", queued: true });
  assert.deepEqual((await post(base, "/sessions/left/messages", { text: "c", mode: "steer" })).body, { runId: "left.1", queued: true });
  model.release();
  await waitFor(() => live.frames.filter((f) => f.data.kind === "turn.end").length === 3, "three runs");
  await waitFor(async () => (await get(base, "/sessions/left")).body.active === undefined, "an idle session");
  assert.deepEqual(model.seen, ["a", "b", "c"]);
  const info = await get(base, "/sessions/left");
  assert.deepEqual(info.body.messages.map((m) => [m.text, m.runId, m.mode]), [["a", "left.1", "followUp"], ["b", "left.2", "followUp"], ["c", "left.3", "steer"]]);
  assert.deepEqual(info.body.runs.map((r) => r.status), ["completed", "completed", "completed"]);
  live.cancel();
});

test("sessions under authenticate(): principals are isolated, /runs is refused, the factory sees the principal", async () => {
  const seen = [];
  const { base } = await startServer({
    token: undefined,
    authenticate: (request) => {
      const user = request.headers.get("x-user");
      if (user === "throws") throw new Error("boom");
      if (user === "empty") return { id: "" };
      return user ? { id: user, tenant: "t1" } : undefined;
    },
    runOptions: (context) => {
      seen.push(context);
      return { model: fauxModel(), streamFn: stepsModel(1) };
    },
  });
  const as = (user) => ({ "x-user": user, "content-type": "application/json" });
  for (const user of [undefined, "throws", "empty"]) {
    const r = await fetch(`${base}/sessions`, { method: "POST", headers: user ? as(user) : {}, body: '{"sessionId":"s"}' });
    assert.deepEqual([r.status, await r.json()], [401, { error: "cave_serve_unauthorized" }], String(user));
  }
  const runs = await fetch(`${base}/runs`, { method: "POST", headers: as("alice"), body: '{"runId":"x","input":"y"}' });
  assert.deepEqual([runs.status, await runs.json()], [403, { error: "cave_serve_runs_require_single_principal", message: "with authenticate() configured, use /sessions; /runs is not principal-scoped" }]);
  assert.equal((await post(base, "/sessions", { sessionId: "notes" }, as("alice"))).status, 201);
  const sent = await post(base, "/sessions/notes/messages", { text: "mine" }, as("alice"));
  assert.match(sent.body.runId, /^[0-9a-f]{16}-notes\.1$/);
  // Bob cannot see, post to, stream or delete Alice's session: 404, never 403.
  assert.equal((await get(base, "/sessions/notes", { "x-user": "bob" })).status, 404);
  assert.equal((await post(base, "/sessions/notes/messages", { text: "theirs" }, as("bob"))).status, 404);
  assert.equal((await fetch(`${base}/sessions/notes/events`, { headers: { "x-user": "bob" } })).status, 404);
  assert.equal((await fetch(`${base}/sessions/notes`, { method: "DELETE", headers: { "x-user": "bob" } })).status, 404);
  assert.equal((await fetch(`${base}/sessions/${encodeURIComponent(sent.body.runId.split(".")[0])}`, { headers: { "x-user": "bob" } })).status, 404);
  // Bob's own "notes" is another session.
  assert.equal((await post(base, "/sessions", { sessionId: "notes" }, as("bob"))).status, 201);
  assert.equal((await get(base, "/sessions/notes", { "x-user": "bob" })).body.runs.length, 0);
  await waitFor(async () => (await get(base, "/sessions/notes", { "x-user": "alice" })).body.runs[0]?.status === "completed", "alice's run");
  assert.equal(seen.length, 1);
  assert.deepEqual(seen[0].principal, { id: "alice", tenant: "t1" });
  assert.equal(seen[0].sessionId, sent.body.runId.replace(/\.1$/, ""));
});

test("WebSocket: bearer subprotocol, frames as text messages, messages in, cancel, invalid input closes 1008", async () => {
  const { port } = await startServer();
  const base = `http://127.0.0.1:${port}`;
  await post(base, "/sessions", { sessionId: "sock" });
  const protocols = ["caveman-agent", `cave-bearer.${Buffer.from(TOKEN).toString("base64url")}`];
  const ws = new WebSocket(`ws://127.0.0.1:${port}/sessions/sock/ws`, protocols);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  assert.equal(ws.protocol, "caveman-agent");
  const frames = [];
  ws.on("message", (data) => frames.push(JSON.parse(String(data))));
  ws.send(JSON.stringify({ type: "message", text: "over ws" }));
  await waitFor(() => frames.some((f) => f.kind === "turn.end"), "a run over ws");
  assert.deepEqual(frames.map((f) => f.seq), frames.map((_, i) => i));
  assert.equal(frames[0].kind, "turn.start");
  const closed = new Promise((resolve) => ws.once("close", (code, reason) => resolve([code, String(reason)])));
  ws.send("not json");
  assert.deepEqual(await closed, [1008, "cave_serve_websocket_message_invalid"]);
  // Authorization header instead of the subprotocol; a replay from Last-Event-ID.
  const ws2 = new WebSocket(`ws://127.0.0.1:${port}/sessions/sock/ws`, { headers: { ...AUTH, "last-event-id": "1" } });
  const replay = [];
  ws2.on("message", (data) => replay.push(JSON.parse(String(data))));
  await waitFor(() => replay.length === frames.length - 2, "the replay");
  assert.deepEqual(replay.map((f) => f.seq), frames.slice(2).map((f) => f.seq));
  const closed2 = new Promise((resolve) => ws2.once("close", (code, reason) => resolve([code, String(reason)])));
  ws2.send(JSON.stringify({ type: "message", text: "" }));
  assert.deepEqual(await closed2, [1008, "cave_session_message_text_required"]);
  // The handler without an upgrade hook: 501.
  const handler = createAgentHandler({ definition: servedAgent(path.join(tempRoot(), "e")), token: TOKEN, store: new DiskDurableStore(path.join(tempRoot(), "j")) });
  await handler.fetch(new Request("http://x/sessions", { method: "POST", headers: JSON_AUTH, body: '{"sessionId":"w"}' }));
  const r = await handler.fetch(new Request("http://x/sessions/w/ws", { headers: AUTH }));
  assert.deepEqual([r.status, await r.json()], [501, { error: "cave_serve_websocket_unavailable" }]);
});

test("recovery: a crashed run resumes, a sleeping one is reported with wakeAt, a cancelled one settles; readyz waits for the first sweep", async () => {
  const root = tempRoot();
  const effectsDir = path.join(root, "effects");
  const definition = servedAgent(effectsDir);
  const store = new DiskDurableStore(path.join(root, "journals"));
  // Three runs left pending: each aborted mid-way (an abort is the twin of a crash).
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
    assert.equal(durableRunSummary(await store.load(runId)).status, "pending", runId);
  }
  const wake = new Date(Date.now() + 3_600_000);
  assert.equal((await scheduleDurableWake(store, "sleepy", wake, "later")).status, "scheduled");
  assert.equal((await requestDurableCancel(store, "doomed", "no longer needed")).status, "requested");
  const handler = createAgentHandler({ definition, token: TOKEN, store, runOptions: runOptionsFor(2) });
  closers.push(() => handler.close(2_000));
  const notReady = await handler.fetch(new Request("http://x/readyz"));
  assert.deepEqual([notReady.status, await notReady.json()], [503, { status: "recovering", active: 0, queued: 0 }]);
  const report = await handler.recover();
  assert.equal(report.listable, true);
  assert.deepEqual(report.resumed, ["crashed"]);
  assert.deepEqual(report.sleeping, [{ runId: "sleepy", wakeAt: wake.toISOString() }]);
  assert.deepEqual(report.skipped, [{ runId: "doomed", reason: "cave_durable_run_cancelled" }]);
  assert.equal((await handler.fetch(new Request("http://x/readyz"))).status, 200);
  assert.deepEqual(await handler.nextWakeAt(), wake);
  await waitFor(async () => durableRunSummary(await store.load("crashed")).status === "completed", "the resumed run");
  const done = durableRunSummary(await store.load("crashed"));
  assert.equal(done.result.resumed, true);
  const doomed = durableRunSummary(await store.load("doomed"));
  assert.deepEqual([doomed.status, doomed.code, doomed.message], ["failed", "cave_durable_run_cancelled", "no longer needed"]);
  // A sleeping run is not started by a submit either.
  const sleepy = await handler.fetch(new Request("http://x/runs", { method: "POST", headers: JSON_AUTH, body: '{"runId":"sleepy","input":"go"}' }));
  assert.deepEqual(await sleepy.json(), { runId: "sleepy", status: "sleeping", wakeAt: wake.toISOString() });
  // The next sweep does not re-read settled runs and reports nothing new.
  const second = await handler.recover();
  assert.deepEqual([second.resumed, second.skipped], [[], []]);
  // A store without list(): not listable.
  const { list: _list, ...unlistable } = { load: (id) => store.load(id), append: (id, d) => store.append(id, d), acquire: (id) => store.acquire(id), close: (id) => store.close(id) };
  const h2 = createAgentHandler({ definition, token: TOKEN, store: unlistable });
  assert.deepEqual(await h2.recover(), { listable: false, resumed: [], sleeping: [], skipped: [] });
  assert.equal(await h2.nextWakeAt(), undefined);
});

test("a session recovers after a restart from its journal: the pending run resumes, the conversation carries on", async () => {
  const root = tempRoot();
  const effectsDir = path.join(root, "effects");
  const definition = servedAgent(effectsDir);
  const store = new DiskDurableStore(path.join(root, "journals"));
  const first = createAgentHandler({ definition, token: TOKEN, store, runOptions: runOptionsFor(1) });
  await first.recover();
  await first.fetch(new Request("http://x/sessions", { method: "POST", headers: JSON_AUTH, body: '{"sessionId":"notes"}' }));
  await first.fetch(new Request("http://x/sessions/notes/messages", { method: "POST", headers: JSON_AUTH, body: '{"text":"one"}' }));
  await waitFor(async () => durableRunSummary(await store.load("notes.1")).status === "completed", "run 1");
  await first.close(0);
  // Run 2 crashed mid-way in another process: simulated by an aborted run with the session's conversation.
  const { restoreConversation } = await import("../lib/conversation.mjs");
  const terminal = JSON.parse((await store.load("notes.1")).at(-1)).conversation;
  const abort = new AbortController();
  let calls = 0;
  const model = stepsModel(2);
  await run(definition, "two", {
    durable: { runId: "notes.2", store },
    conversation: restoreConversation(terminal),
    sessionId: "notes",
    signal: abort.signal,
    model: fauxModel(),
    streamFn: (m, c, o) => {
      if (++calls === 2) abort.abort();
      return model(m, c, o);
    },
  }).catch(() => {});
  assert.equal(durableRunSummary(await store.load("notes.2")).status, "pending");
  const second = createAgentHandler({ definition, token: TOKEN, store, runOptions: runOptionsFor(2) });
  closers.push(() => second.close(2_000));
  const report = await second.recover();
  assert.deepEqual(report.resumed, ["notes.2"]);
  await waitFor(async () => durableRunSummary(await store.load("notes.2")).status === "completed", "run 2 resumed");
  // The journal settles before the handler's loop ends: wait for the session itself to be idle.
  await waitFor(async () => {
    const res = await second.fetch(new Request("http://x/sessions/notes", { headers: AUTH }));
    return (await res.json()).active === undefined;
  }, "an idle session");
  const journal = (await store.load("notes.2")).map((l) => JSON.parse(l));
  assert.equal(journal.filter((e) => e.type === "resumed").length, 1);
  const texts = journal.at(-1).conversation.messages.filter((m) => m.role === "user").map((m) => m.content[0].text);
  assert.deepEqual(texts, ["one", "two"]);
  // The next message is run 3, after both.
  const next = await second.fetch(new Request("http://x/sessions/notes/messages", { method: "POST", headers: JSON_AUTH, body: '{"text":"three"}' }));
  assert.deepEqual(await next.json(), { runId: "notes.3", queued: false });
  // No settled write ran twice.
  const keys = effects(effectsDir).map(([key]) => key);
  assert.equal(new Set(keys).size, keys.length);
});

test("drain: close() refuses new runs with 503 + retry-after and lets in-flight ones finish", async () => {
  const root = tempRoot();
  const store = new DiskDurableStore(path.join(root, "journals"));
  const handler = createAgentHandler({ definition: servedAgent(path.join(root, "e")), token: TOKEN, store, runOptions: () => ({ model: fauxModel(), streamFn: stepsModel(3, { delayMs: 20 }) }) });
  await handler.recover();
  const submit = (runId) => handler.fetch(new Request("http://x/runs", { method: "POST", headers: JSON_AUTH, body: JSON.stringify({ runId, input: "go" }) }));
  assert.equal((await submit("inflight")).status, 202);
  const closing = handler.close(10_000);
  const refused = await submit("late");
  assert.equal(refused.status, 503);
  assert.equal(refused.headers.get("retry-after"), "5");
  assert.deepEqual(await refused.json(), { error: "cave_serve_draining" });
  await closing;
  assert.equal(durableRunSummary(await store.load("inflight")).status, "completed");
  assert.deepEqual(await store.load("late"), []);
});

test("queue: maxQueuedRuns full → 503 cave_serve_queue_full; readyz counts", async () => {
  const root = tempRoot();
  const store = new DiskDurableStore(path.join(root, "journals"));
  const handler = createAgentHandler({
    definition: servedAgent(path.join(root, "e")),
    token: TOKEN,
    store,
    maxConcurrentRuns: 1,
    maxQueuedRuns: 1,
    runOptions: () => ({ model: fauxModel(), streamFn: stepsModel(2, { delayMs: 30 }) }),
  });
  closers.push(() => handler.close(5_000));
  await handler.recover();
  const submit = (runId) => handler.fetch(new Request("http://x/runs", { method: "POST", headers: JSON_AUTH, body: JSON.stringify({ runId, input: "go" }) }));
  assert.equal((await submit("q1")).status, 202);
  assert.equal((await submit("q2")).status, 202);
  const full = await submit("q3");
  assert.deepEqual([full.status, full.headers.get("retry-after"), await full.json()], [503, "5", { error: "cave_serve_queue_full" }]);
  assert.deepEqual(await (await handler.fetch(new Request("http://x/readyz"))).json(), { status: "ready", active: 1, queued: 1 });
  assert.deepEqual(await store.load("q3"), []);
});

test("single instance: a second server on the same store refuses to listen", async () => {
  const root = tempRoot();
  const store = new DiskDurableStore(path.join(root, "journals"));
  const definition = servedAgent(path.join(root, "e"));
  const one = createAgentServer({ definition, token: TOKEN, store });
  await one.listen(0, "127.0.0.1");
  closers.push(() => one.close(1_000));
  const two = createAgentServer({ definition, token: TOKEN, store });
  await assert.rejects(two.listen(0, "127.0.0.1"), (e) => e.code === "cave_serve_instance_already_active" && /^cave_serve_instance_already_active: another instance holds this store's instance lease\./.test(e.message) && e.cause?.code === "cave_durable_run_locked");
  const three = createAgentServer({ definition, token: TOKEN, store, singleInstance: false });
  await three.listen(0, "127.0.0.1");
  await three.close(1_000);
  assert.ok(!(await store.list()).includes("caveman.instance.lock"));
  assert.ok(fs.existsSync(store.root));
});

test("a definition without a declared sandbox warns once at construction", () => {
  const definition = agent({ id: "undeclared", instructions: "x", model: "anthropic/claude-haiku-4-5", tools: [] });
  const writes = [];
  const original = process.stderr.write;
  process.stderr.write = (chunk) => (writes.push(String(chunk)), true);
  try {
    createAgentHandler({ definition, token: TOKEN, store: new DiskDurableStore(path.join(tempRoot(), "j")) });
  } finally {
    process.stderr.write = original;
  }
  assert.deepEqual(writes, ["cave: undeclared serves with host execution — tools are not isolated\n"]);
});
