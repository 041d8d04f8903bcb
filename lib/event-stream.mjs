// A dependency-free stand-in for pi-ai's `AssistantMessageEventStream`: an async-iterable queue of
// assistant-message events that ends on `done` or `error`, with `result()` resolving to the final
// message. Same semantics as pi-ai 0.73's EventStream, so code written against pi's stream works
// with ours and the other way round (`@mariozechner/pi-ai` stays an optional peer).

export class AssistantMessageEventStream {
  #queue = [];
  #waiting = [];
  #done = false;
  #resolveResult;
  #result;

  constructor() {
    this.#result = new Promise((resolve) => {
      this.#resolveResult = resolve;
    });
  }

  /** Queue one event. `done` and `error` complete the stream and settle `result()`. */
  push(event) {
    if (this.#done) return;
    if (event.type === "done" || event.type === "error") {
      this.#done = true;
      this.#resolveResult(event.type === "done" ? event.message : event.error);
    }
    const waiter = this.#waiting.shift();
    if (waiter) waiter({ value: event, done: false });
    else this.#queue.push(event);
  }

  /** Close the stream; `result` (when given) settles `result()` if no terminal event did. */
  end(result) {
    this.#done = true;
    if (result !== undefined) this.#resolveResult(result);
    while (this.#waiting.length > 0) this.#waiting.shift()({ value: undefined, done: true });
  }

  async *[Symbol.asyncIterator]() {
    while (true) {
      if (this.#queue.length > 0) {
        yield this.#queue.shift();
      } else if (this.#done) {
        return;
      } else {
        const next = await new Promise((resolve) => this.#waiting.push(resolve));
        if (next.done) return;
        yield next.value;
      }
    }
  }

  /** The final assistant message (from `done`, or the error message from `error`). */
  result() {
    return this.#result;
  }
}

/**
 * The stream of a message that is complete up front (scripted models): once `ready` settles,
 * `start` (a pending partial) then `done`; or, when `signal` has aborted by then, one `error`
 * with the message marked aborted.
 */
export function messageStream(message, signal, ready = Promise.resolve()) {
  const stream = new AssistantMessageEventStream();
  Promise.resolve(ready).then(() => {
    if (signal?.aborted) {
      const aborted = { ...message, content: [], stopReason: "aborted", errorMessage: "Request was aborted" };
      stream.push({ type: "error", reason: "aborted", error: aborted });
      stream.end(aborted);
      return;
    }
    stream.push({ type: "start", partial: { ...message, content: [], stopReason: "pending" } });
    stream.push({ type: "done", reason: message.stopReason, message });
    stream.end(message);
  });
  return stream;
}

export function createAssistantMessageEventStream() {
  return new AssistantMessageEventStream();
}

/** A pi `Usage` with every count and cost at zero. */
export function zeroUsage() {
  return {
    input: 0,
    output: 0,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: 0,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
}
