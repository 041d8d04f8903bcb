// Shared fixtures for the run()/stream() tests (issue 3). Not a test file.
import { agent, auto, schema, tool } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";

/** The options every reference test passes. */
export function baseOptions(turns, extra = {}) {
  return { ensureRuntime: false, model: fauxModel(), streamFn: scriptedStream(turns), ...extra };
}

/**
 * Wraps `scriptedStream(turns)` and records, per provider call, a deep copy of
 * `context.messages`, the system prompt, the tool names and the call options.
 */
export function recordingStream(turns) {
  const inner = scriptedStream(turns);
  const calls = [];
  const streamFn = (model, context, options) => {
    calls.push({
      model,
      systemPrompt: context.systemPrompt,
      tools: (context.tools ?? []).map((t) => t.name),
      messages: structuredClone(context.messages),
      maxTokens: options?.maxTokens,
    });
    return inner(model, context, options);
  };
  return { streamFn, calls };
}

/** Every tool result the model was shown, in order, from the last recorded call. */
export function toolResultsSeen(calls) {
  const last = calls.at(-1);
  return last.messages
    .filter((m) => m.role === "toolResult")
    .map((m) => ({ name: m.toolName, isError: m.isError, text: m.content.map((c) => c.text).join("") }));
}

/** A JS tool that counts its executions in `counter.n` and returns `<name>:ok`. */
export function countingTool(name, effect, counter, extra = {}) {
  return tool({
    name,
    description: `${name} (test tool)`,
    input: schema.object({}),
    effect,
    execute: () => {
      counter.n += 1;
      counter.names?.push(name);
      return `${name}:ok`;
    },
    ...extra,
  });
}

export function hostAgent(id, tools, extra = {}) {
  return agent({ id, instructions: "test agent", model: auto(), sandbox: "host", tools, ...extra });
}

/** Drains a stream() generator into an array. */
export async function collect(generator) {
  const events = [];
  for await (const event of generator) events.push(event);
  return events;
}

/** `run_start pi:turn_start … run_end`: the event types, pi events prefixed. */
export function eventTypes(events) {
  return events.map((e) => (e.type === "pi" ? `pi:${e.event.type}` : e.type));
}

/** A promise plus its resolver. */
export function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
