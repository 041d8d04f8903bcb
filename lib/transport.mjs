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

/**
 * The model calls waiting on `signal`, with one abort listener per signal (a run's signal is
 * shared by all its model calls), instead of a listener added and removed per call and every
 * stream event raced against an abort promise. `aborted` follows the signal (set by the same
 * listener): the calls read it instead of `signal.aborted`, whose getter sees a new object shape
 * with every AbortSignal and so kept the transport's optimized code deoptimizing run after run.
 */
class AbortGate {
  calls = new Set();
  aborted = false;
}

const abortGates = new WeakMap();

/**
 * Watches `signal` for the model calls that will wait on it. `run()` calls this once per run,
 * so the per-call path only looks the gate up (a new AbortSignal never reaches its code).
 */
export function abortGate(signal) {
  let gate = abortGates.get(signal);
  if (!gate) {
    gate = new AbortGate();
    abortGates.set(signal, gate);
    if (signal.aborted) {
      gate.aborted = true;
    } else {
      signal.addEventListener(
        "abort",
        () => {
          gate.aborted = true;
          for (const call of [...gate.calls]) call.abort();
          gate.calls.clear();
        },
        { once: true },
      );
    }
  }
  return gate;
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

/** Runs `next` once `value` (an `onEvent` result) settles; at once when it is not a promise. */
function after(value, next, fail) {
  if (value !== null && typeof value === "object" && typeof value.then === "function") value.then(next, fail);
  else next();
}

/**
 * One call, driven by the stream's own promises: each `iterator.next()` settles into `#step`, and
 * an abort settles the call directly (`abort()`, from the signal's gate) while it waits on the
 * provider. Without a listener no lifecycle event or snapshot is built.
 */
class ModelCall {
  #model;
  #signal;
  #onEvent;
  #resolve;
  #reject;
  #gate;
  #started = false;
  #partial;
  #stream;
  #iterator;
  #over = false;
  /** Waiting on the provider (streamFn's promise, `next()`, a result()): an abort ends the call. */
  #waiting = false;

  constructor(model, signal, onEvent, resolve, reject) {
    this.#model = model;
    this.#signal = signal;
    this.#onEvent = typeof onEvent === "function" ? onEvent : undefined;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  start(streamFn, context, options) {
    if (this.#signal) {
      this.#gate = abortGate(this.#signal);
      if (this.#gate.aborted) return this.#finish(abortedMessage(this.#model, undefined));
      this.#gate.calls.add(this);
    }
    let stream;
    try {
      stream = streamFn(this.#model, context, options);
    } catch (error) {
      return this.#fail(asError(error));
    }
    this.#waiting = true;
    Promise.resolve(stream).then(
      (value) => this.#onStream(value),
      (error) => this.#failWaiting(asError(error)),
    );
  }

  /** The signal aborted: stop waiting, cancel the iterator, resolve to the partial as aborted. */
  abort() {
    if (this.#over || !this.#waiting) return; // not waiting: the next wait sees `gate.aborted`
    this.#waiting = false;
    this.#finish(abortedMessage(this.#model, this.#partial));
  }

  #onStream(stream) {
    if (this.#over) return;
    this.#waiting = false;
    if (stream === null || stream === undefined || typeof stream[Symbol.asyncIterator] !== "function") {
      return this.#fail(new Error("caveman agent: streamFn must return an async-iterable assistant message event stream"));
    }
    this.#stream = stream;
    try {
      this.#iterator = stream[Symbol.asyncIterator]();
    } catch (error) {
      return this.#fail(error);
    }
    this.#pull();
  }

  #pull = () => {
    if (this.#over) return;
    if (this.#gate?.aborted) return this.#finish(abortedMessage(this.#model, this.#partial));
    let next;
    try {
      next = this.#iterator.next();
    } catch (error) {
      return this.#fail(asError(error));
    }
    this.#waiting = true;
    Promise.resolve(next).then(this.#step, (error) => this.#failWaiting(asError(error)));
  };

  #step = (step) => {
    if (this.#over) return;
    this.#waiting = false;
    if (step.done) return this.#noTerminal();
    const event = step.value;
    if (!event || typeof event !== "object") return this.#pull();
    if (event.type === "start") {
      this.#partial = event.partial;
      if (this.#onEvent && !this.#started) {
        this.#started = true;
        return this.#emit({ type: "message_start", message: snapshot(this.#partial) }, this.#pull);
      }
      return this.#pull();
    }
    if (DELTA_EVENTS.has(event.type)) {
      if (event.partial) this.#partial = event.partial;
      if (!this.#onEvent) return this.#pull();
      const update = () => this.#emit({ type: "message_update", message: snapshot(this.#partial ?? {}), assistantMessageEvent: event }, this.#pull);
      if (!this.#started && this.#partial) {
        this.#started = true;
        return this.#emit({ type: "message_start", message: snapshot(this.#partial) }, update);
      }
      return update();
    }
    if (event.type === "done" || event.type === "error") {
      const final = event.type === "done" ? event.message : event.error;
      if (final) return this.#terminal(final);
      if (typeof this.#stream.result !== "function") return this.#noTerminal();
      // As before: this result() is awaited without racing the signal.
      let result;
      try {
        result = this.#stream.result();
      } catch (error) {
        return this.#fail(error);
      }
      return Promise.resolve(result).then(
        (value) => (value ? this.#terminal(value) : this.#noTerminal()),
        (error) => this.#fail(error),
      );
    }
    return this.#pull();
  };

  #terminal(final) {
    this.#iterator = undefined; // consumed to its terminal event
    this.#finish(final);
  }

  /** The stream ended without a terminal event: accept a result() that is already settled. */
  #noTerminal() {
    if (this.#over) return;
    this.#iterator = undefined;
    if (typeof this.#stream.result !== "function") return this.#incomplete();
    let result;
    try {
      result = this.#stream.result();
    } catch (error) {
      return this.#fail(error);
    }
    this.#waiting = true;
    Promise.race([Promise.resolve(result), nextMacrotask().then(() => undefined)]).then(
      (final) => {
        if (this.#over) return;
        this.#waiting = false;
        if (final) this.#finish(final);
        else this.#incomplete();
      },
      (error) => this.#failWaiting(error),
    );
  }

  #incomplete() {
    this.#fail(new Error("cave_incomplete_evidence: Pi emitted no final assistant message"));
  }

  /** Calls `onEvent` (when listening), then `next`; a throw or rejection fails the call. */
  #emit(event, next) {
    let value;
    try {
      value = this.#onEvent(event);
    } catch (error) {
      return this.#fail(error);
    }
    after(value, next, (error) => this.#fail(error));
  }

  #end() {
    this.#over = true;
    this.#gate?.calls.delete(this);
    const it = this.#iterator;
    this.#iterator = undefined;
    if (it) {
      Promise.resolve()
        .then(() => it.return?.())
        .catch(() => {});
    }
  }

  #finish(message) {
    if (this.#over) return;
    this.#end();
    if (!this.#onEvent) return this.#resolve(message);
    const end = () => {
      let value;
      try {
        value = this.#onEvent({ type: "message_end", message });
      } catch (error) {
        return this.#reject(error);
      }
      after(value, () => this.#resolve(message), this.#reject);
    };
    if (this.#started) return end();
    this.#started = true;
    let value;
    try {
      value = this.#onEvent({ type: "message_start", message: snapshot(message) });
    } catch (error) {
      return this.#reject(error);
    }
    after(value, end, this.#reject);
  }

  #failWaiting(error) {
    if (this.#over) return;
    this.#waiting = false;
    this.#fail(error);
  }

  #fail(error) {
    if (this.#over) return;
    this.#end();
    this.#reject(error);
  }
}

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
 * Without `onEvent`, no lifecycle event object or snapshot is built (`run()` has no listener).
 * A stream that ends with no final message rejects with
 * `cave_incomplete_evidence: Pi emitted no final assistant message`.
 */
export async function callModel({ model, context, options = {}, streamFn, onEvent } = {}) {
  if (typeof streamFn !== "function") throw new TypeError("callModel: streamFn must be a function");
  return new Promise((resolve, reject) => new ModelCall(model, options?.signal, onEvent, resolve, reject).start(streamFn, context, options));
}
