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
