// One model call: run a Pi StreamFn, relay its events as pi agent-core message lifecycle events,
// and hand back the final assistant message. This is the JS half of the kernel's model transport.
import { zeroUsage } from "./event-stream.mjs";

const DELTA_EVENTS = new Set([
  "text_start",
  "text_delta",
  "text_end",
  "thinking_start",
  "thinking_delta",
  "thinking_end",
  "toolcall_start",
  "toolcall_delta",
  "toolcall_end",
]);

function asError(value) {
  if (value instanceof Error) return value;
  if (value !== null && typeof value === "object" && typeof value.message === "string") {
    const error = new Error(value.message);
    if (typeof value.code === "string") error.code = value.code;
    return error;
  }
  return new Error(String(value));
}


function abortedMessage(model, partial) {
  const base = partial ?? {
    role: "assistant",
    content: [],
    api: model?.api,
    provider: model?.provider,
    model: model?.id,
    usage: zeroUsage(),
  };
  return { ...base, stopReason: "aborted", errorMessage: "Request was aborted", timestamp: Date.now() };
}

const ABORTED = Symbol("aborted");

/** [promise resolving to ABORTED when `signal` aborts (never otherwise), dispose]. */
function abortWatch(signal) {
  if (!signal) return [new Promise(() => {}), () => {}];
  let onAbort;
  const promise = new Promise((resolve) => {
    onAbort = () => resolve(ABORTED);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  return [promise, () => signal.removeEventListener("abort", onAbort)];
}

/**
 * A snapshot of a partial message: pi providers mutate one `output` object as they stream, so
 * the envelope, the content parts and the usage are copied (strings are immutable; tool-call
 * `arguments` objects are replaced, not mutated, by pi's providers).
 */
function snapshot(message) {
  if (!message || typeof message !== "object") return message;
  const copy = { ...message };
  if (Array.isArray(message.content)) copy.content = message.content.map((part) => (part && typeof part === "object" ? { ...part } : part));
  if (message.usage && typeof message.usage === "object") {
    copy.usage = { ...message.usage };
    if (message.usage.cost && typeof message.usage.cost === "object") copy.usage.cost = { ...message.usage.cost };
  }
  return copy;
}

const nextMacrotask = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Call the model once.
 *
 * `streamFn(model, context, options)` may return the stream or a Promise of it. A synchronous throw
 * or a rejection is rethrown as an `Error` with the original message (Error objects are rethrown
 * unchanged). The stream's events become `onEvent` calls, each awaited, in pi agent-core's shapes:
 *
 *   { type: "message_start",  message }                          on `start` (or before the first event)
 *   { type: "message_update", message, assistantMessageEvent }   for every text/thinking/toolcall event
 *   { type: "message_end",    message }                          with the final message
 *
 * `message` in start/update events is a snapshot (envelope, content parts and usage copied) of the
 * partial at that event; `assistantMessageEvent` is the stream's event object itself. Resolves to the final pi
 * `AssistantMessage`: from `done`, or from `error` (then `stopReason` is `"error"` or `"aborted"` and
 * `errorMessage` is set). When `options.signal` aborts, the call stops waiting at once, cancels the
 * stream's iterator and resolves to the last partial with `stopReason: "aborted"` and
 * `errorMessage: "Request was aborted"` (an already-aborted signal means `streamFn` is never called).
 * A stream that ends with no final message rejects with
 * `cave_incomplete_evidence: Pi emitted no final assistant message`.
 */
export async function callModel({ model, context, options = {}, streamFn, onEvent } = {}) {
  if (typeof streamFn !== "function") throw new TypeError("callModel: streamFn must be a function");
  const emit = typeof onEvent === "function" ? onEvent : () => {};
  const signal = options?.signal;
  let started = false;
  let partial;

  const finish = async (message) => {
    if (!started) {
      started = true;
      await emit({ type: "message_start", message: snapshot(message) });
    }
    await emit({ type: "message_end", message });
    return message;
  };

  if (signal?.aborted) return finish(abortedMessage(model, undefined));

  const [aborted, disposeAbort] = abortWatch(signal);
  let iterator;
  try {
    let stream;
    try {
      stream = await Promise.race([streamFn(model, context, options), aborted]);
    } catch (error) {
      throw asError(error);
    }
    if (stream === ABORTED) return await finish(abortedMessage(model, undefined));
    if (stream === null || stream === undefined || typeof stream[Symbol.asyncIterator] !== "function") {
      throw new Error("caveman agent: streamFn must return an async-iterable assistant message event stream");
    }
    iterator = stream[Symbol.asyncIterator]();
    while (true) {
      let step;
      try {
        step = await Promise.race([iterator.next(), aborted]);
      } catch (error) {
        throw asError(error);
      }
      if (step === ABORTED) {
        const it = iterator;
        iterator = undefined;
        Promise.resolve()
          .then(() => it.return?.())
          .catch(() => {});
        return await finish(abortedMessage(model, partial));
      }
      if (step.done) break;
      const event = step.value;
      if (!event || typeof event !== "object") continue;
      if (event.type === "start") {
        partial = event.partial;
        if (!started) {
          started = true;
          await emit({ type: "message_start", message: snapshot(partial) });
        }
      } else if (DELTA_EVENTS.has(event.type)) {
        if (event.partial) partial = event.partial;
        if (!started && partial) {
          started = true;
          await emit({ type: "message_start", message: snapshot(partial) });
        }
        await emit({ type: "message_update", message: snapshot(partial ?? {}), assistantMessageEvent: event });
      } else if (event.type === "done" || event.type === "error") {
        let final = event.type === "done" ? event.message : event.error;
        if (!final && typeof stream.result === "function") final = await stream.result();
        if (!final) break;
        iterator = undefined; // consumed to its terminal event
        return await finish(final);
      }
    }
    iterator = undefined;
    // The stream ended without a terminal event: accept a result() that is already settled.
    if (typeof stream.result === "function") {
      const final = await Promise.race([Promise.resolve(stream.result()), nextMacrotask().then(() => undefined), aborted]);
      if (final === ABORTED) return await finish(abortedMessage(model, partial));
      if (final) return await finish(final);
    }
    throw new Error("cave_incomplete_evidence: Pi emitted no final assistant message");
  } finally {
    disposeAbort();
    if (iterator) {
      Promise.resolve()
        .then(() => iterator.return?.())
        .catch(() => {});
    }
  }
}
