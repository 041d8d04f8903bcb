// Shared fixtures for the serve suites: an agent with a counted side-effect tool, a stateless
// scripted model (so a resumed run in another process gets the same answers), an SSE reader.
// Not a test file.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { agent, tool, schema } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";

export const TOKEN = "serve-test-token-0123456789";
export const AUTH = { authorization: `Bearer ${TOKEN}` };
export const JSON_AUTH = { ...AUTH, "content-type": "application/json" };

export function tempRoot(prefix = "knap-serve-") {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * An agent whose `record` tool (effect `write`) appends one line per execution to
 * `<effects>/<runId>`, so a test can count how often each run's side effect really ran.
 */
export function servedAgent(effectsDir, { delayMs = 0 } = {}) {
  fs.mkdirSync(effectsDir, { recursive: true });
  return agent({
    id: "served",
    instructions: "Record what you are told.",
    model: "anthropic/claude-haiku-4-5",
    sandbox: "host",
    tools: [
      tool({
        name: "record",
        description: "Record one step",
        input: schema.object({ step: schema.number() }),
        effect: "write",
        execute: async ({ step }, _signal, context) => {
          if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
          const runId = String(context?.durable?.idempotencyKey ?? "none");
          fs.appendFileSync(path.join(effectsDir, "effects.log"), `${runId} ${step}\n`);
          return `recorded ${step}`;
        },
      }),
    ],
  });
}

/**
 * A model that, for the newest user message, calls `record` `steps` times (one per turn) and then
 * answers `text`. It reads the transcript, not a counter, so any process resuming the run
 * mid-way gets the answers the crashed one would have had.
 */
export function stepsModel(steps = 2, { text = "done", delayMs = 0 } = {}) {
  return async (model, context, options) => {
    if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
    const messages = context.messages;
    let lastUser = messages.length - 1;
    while (lastUser > 0 && messages[lastUser].role !== "user") lastUser--;
    const done = messages.slice(lastUser).filter((m) => m.role === "toolResult").length;
    const turn = done < steps ? { toolCalls: [{ name: "record", args: { step: done + 1 } }] } : { text: `${text} ${done}` };
    return scriptedStream([turn])(model, context, options);
  };
}

export const runOptionsFor = (steps, extra = {}) => () => ({ model: fauxModel(), streamFn: stepsModel(steps, extra) });

/** The lines of the effects log, as `[idempotencyKey, step]`. */
export function effects(effectsDir) {
  const file = path.join(effectsDir, "effects.log");
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => line.split(" "));
}

/**
 * Reads an SSE response: `frames` ({id, data, event}) as they arrive; resolves `done` when the
 * stream ends or `until(frame)` is true (then the reader is cancelled).
 */
export function readSse(response, until = () => false) {
  const frames = [];
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const done = (async () => {
    for (;;) {
      const { done: end, value } = await reader.read();
      if (end) return frames;
      text += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = text.indexOf("\n\n")) >= 0) {
        const block = text.slice(0, cut);
        text = text.slice(cut + 2);
        if (block.startsWith(":")) continue;
        const frame = {};
        for (const line of block.split("\n")) {
          const colon = line.indexOf(": ");
          const [k, v] = colon < 0 ? [line, ""] : [line.slice(0, colon), line.slice(colon + 2)];
          if (k === "id") frame.id = Number(v);
          else if (k === "event") frame.event = v;
          else if (k === "data") frame.data = JSON.parse(v);
        }
        frame.receivedAt = performance.now();
        frames.push(frame);
        if (until(frame)) {
          await reader.cancel().catch(() => {});
          return frames;
        }
      }
    }
  })();
  return { frames, done, cancel: () => reader.cancel().catch(() => {}) };
}

export async function post(base, route, body, headers = JSON_AUTH) {
  const response = await fetch(base + route, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

export async function get(base, route, headers = AUTH) {
  const response = await fetch(base + route, { headers });
  return { status: response.status, body: await response.json() };
}

export async function waitFor(predicate, what, timeoutMs = 60_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * The SSE load of the scale test and bench/serve.mjs: `sessions` sessions, each with its event
 * stream open, each sent one message that runs `steps` tool turns and a final answer. Every
 * `reconnectEvery`-th session drops its stream after `dropAfter` frames and reconnects with
 * `Last-Event-ID`. Resolves to per-session frame lists (as received, across reconnects) and
 * delivery latencies (ms from the frame's `ts` to its arrival).
 */
export async function sseSessionsLoad({ base, sessions, steps = 2, reconnectEvery = 4, dropAfter = 3, prefix = "load" }) {
  const framesPerRun = 3 + 3 * steps;
  const ids = Array.from({ length: sessions }, (_, i) => `${prefix}-${i}`);
  for (const id of ids) {
    const r = await post(base, "/sessions", { sessionId: id });
    if (r.status !== 201) throw new Error(`session ${id}: ${r.status}`);
  }
  const latencies = [];
  const received = new Map();
  let reconnects = 0;
  const started = performance.now();
  const follow = async (id, index) => {
    const got = [];
    received.set(id, got);
    const reconnect = reconnectEvery > 0 && index % reconnectEvery === 0;
    let lastId;
    let dropped = false;
    for (;;) {
      const headers = lastId === undefined ? AUTH : { ...AUTH, "last-event-id": String(lastId) };
      const response = await fetch(`${base}/sessions/${id}/events`, { headers });
      const sse = readSse(response, (frame) => {
        if (frame.data?.ts) latencies.push(Date.now() - Date.parse(frame.data.ts));
        got.push(frame);
        if (frame.id !== undefined) lastId = frame.id;
        if (frame.data?.kind === "turn.end") return true;
        if (reconnect && !dropped && got.length === dropAfter) {
          dropped = true;
          return true;
        }
        return false;
      });
      await sse.done;
      if (got.at(-1)?.data?.kind === "turn.end") return;
      reconnects++;
    }
  };
  // Streams first (each must see its run from the first frame), then the messages.
  const following = ids.map((id, i) => follow(id, i));
  await new Promise((resolve) => setTimeout(resolve, 50));
  for (const id of ids) {
    const r = await post(base, `/sessions/${id}/messages`, { text: `work ${id}` });
    if (r.status !== 202) throw new Error(`message ${id}: ${r.status} ${JSON.stringify(r.body)}`);
  }
  await Promise.all(following);
  const seconds = (performance.now() - started) / 1000;
  const total = [...received.values()].reduce((n, f) => n + f.length, 0);
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))];
  return { ids, received, framesPerRun, reconnects, seconds, total, eventsPerSecond: total / seconds, p50: pct(50), p99: pct(99), max: latencies.at(-1) };
}
