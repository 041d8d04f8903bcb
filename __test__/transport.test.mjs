// callModel: one model call through a Pi StreamFn, relayed as agent-core message lifecycle events.
import { test } from "node:test";
import assert from "node:assert/strict";
import { callModel } from "../lib/transport.mjs";
import { AssistantMessageEventStream, zeroUsage } from "../lib/event-stream.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";

const context = { systemPrompt: "sys", messages: [{ role: "user", content: [{ type: "text", text: "hi" }], timestamp: 1 }] };

function baseMessage(model, overrides = {}) {
  return {
    role: "assistant",
    content: [],
    api: model.api,
    provider: model.provider,
    model: model.id,
    usage: zeroUsage(),
    stopReason: "stop",
    timestamp: 1,
    ...overrides,
  };
}

/** A stream that emits text deltas like pi-ai's providers: one mutated `output` object as partial. */
function textStreamFn(chunks) {
  return (model) => {
    const stream = new AssistantMessageEventStream();
    const output = baseMessage(model);
    (async () => {
      await null;
      stream.push({ type: "start", partial: output });
      output.content.push({ type: "text", text: "" });
      stream.push({ type: "text_start", contentIndex: 0, partial: output });
      for (const chunk of chunks) {
        await null;
        output.content[0].text += chunk;
        stream.push({ type: "text_delta", contentIndex: 0, delta: chunk, partial: output });
      }
      stream.push({ type: "text_end", contentIndex: 0, content: output.content[0].text, partial: output });
      output.usage = { ...zeroUsage(), input: 5, output: 2, totalTokens: 7 };
      stream.push({ type: "done", reason: "stop", message: output });
      stream.end();
    })();
    return stream;
  };
}

test("scripted turn: message_start then message_end, resolves to the done message", async () => {
  const events = [];
  const message = await callModel({
    model: fauxModel(),
    context,
    options: {},
    streamFn: scriptedStream([{ text: "hello", toolCalls: [{ name: "bash", args: { command: "ls" } }] }]),
    onEvent: (event) => events.push(event),
  });
  assert.deepEqual(
    events.map((event) => event.type),
    ["message_start", "message_end"],
  );
  assert.equal(events[0].message.stopReason, "pending");
  assert.equal(events[1].message, message);
  assert.equal(message.stopReason, "toolUse");
  assert.deepEqual(message.content[1], { type: "toolCall", id: "scripted-1-0", name: "bash", arguments: { command: "ls" } });
});

test("text deltas become message_update events with assistantMessageEvent and a snapshot message", async () => {
  const events = [];
  const message = await callModel({
    model: fauxModel(),
    context,
    streamFn: textStreamFn(["Hel", "lo", "!"]),
    onEvent: (event) => events.push({ ...event, text: event.message.content?.[0]?.text }),
  });
  assert.deepEqual(
    events.map((event) => event.type),
    ["message_start", "message_update", "message_update", "message_update", "message_update", "message_update", "message_end"],
  );
  const deltas = events.filter((e) => e.type === "message_update" && e.assistantMessageEvent.type === "text_delta");
  assert.deepEqual(
    deltas.map((e) => e.assistantMessageEvent.delta),
    ["Hel", "lo", "!"],
  );
  assert.ok(deltas[0].text.startsWith("Hel"), "message is the partial (as far as the provider got)");
  const updates = events.filter((e) => e.type === "message_update");
  assert.notEqual(updates[0].message, updates[1].message, "each update carries its own snapshot");
  assert.notEqual(updates[0].message, updates[0].assistantMessageEvent.partial, "not the provider's live object");
  assert.notEqual(updates[0].message.content, updates[0].assistantMessageEvent.partial.content);
  assert.equal(message.content[0].text, "Hello!");
  assert.equal(message.usage.totalTokens, 7);
  assert.equal(events.at(-1).message, message);
});

test("onEvent is awaited in order", async () => {
  const order = [];
  await callModel({
    model: fauxModel(),
    context,
    streamFn: textStreamFn(["a", "b"]),
    onEvent: async (event) => {
      order.push(`begin:${event.type}`);
      await new Promise((resolve) => setImmediate(resolve));
      order.push(`end:${event.type}`);
    },
  });
  for (let i = 0; i < order.length; i += 2) {
    assert.equal(order[i].replace("begin:", ""), order[i + 1].replace("end:", ""), `interleaved at ${i}: ${order}`);
  }
});

test("streamFn may return a Promise of the stream; options reach it unchanged", async () => {
  let seenOptions;
  let seenContext;
  const options = { maxTokens: 123, sessionId: "s" };
  const message = await callModel({
    model: fauxModel(),
    context,
    options,
    streamFn: async (model, ctx, opts) => {
      seenOptions = opts;
      seenContext = ctx;
      await null;
      return scriptedStream([{ text: "async" }])(model, ctx, opts);
    },
  });
  assert.equal(message.content[0].text, "async");
  assert.equal(seenOptions, options);
  assert.equal(seenContext, context);
});

test("a synchronous throw or a rejection from streamFn rejects with the original message", async () => {
  const exhausted = scriptedStream([]);
  await assert.rejects(callModel({ model: fauxModel(), context, streamFn: exhausted }), {
    message: "cave_testing_script_exhausted: scripted stream has 0 turn(s); call 1 asked for another",
  });
  const original = Object.assign(new Error("boom"), { code: "x_code" });
  await assert.rejects(
    callModel({
      model: fauxModel(),
      context,
      streamFn: async () => {
        throw original;
      },
    }),
    (error) => error === original,
  );
  await assert.rejects(
    callModel({
      model: fauxModel(),
      context,
      streamFn: () => {
        throw "plain string"; // eslint-disable-line no-throw-literal
      },
    }),
    (error) => error instanceof Error && error.message === "plain string",
  );
  await assert.rejects(callModel({ model: fauxModel(), context, streamFn: () => 42 }), /async-iterable/);
  await assert.rejects(callModel({ model: fauxModel(), context }), TypeError);
});

test("an error event resolves to the error message (stopReason error + errorMessage)", async () => {
  const events = [];
  const message = await callModel({
    model: fauxModel(),
    context,
    streamFn: (model) => {
      const stream = new AssistantMessageEventStream();
      queueMicrotask(() => {
        const partial = baseMessage(model);
        stream.push({ type: "start", partial });
        const failed = { ...partial, stopReason: "error", errorMessage: "429 rate limited" };
        stream.push({ type: "error", reason: "error", error: failed });
        stream.end();
      });
      return stream;
    },
    onEvent: (event) => events.push(event.type),
  });
  assert.equal(message.stopReason, "error");
  assert.equal(message.errorMessage, "429 rate limited");
  assert.deepEqual(events, ["message_start", "message_end"]);
});

test("an error thrown while iterating rejects with the original message", async () => {
  await assert.rejects(
    callModel({
      model: fauxModel(),
      context,
      streamFn: () => ({
        async *[Symbol.asyncIterator]() {
          yield { type: "start", partial: baseMessage(fauxModel()) };
          throw new Error("socket hang up");
        },
      }),
    }),
    { message: "socket hang up" },
  );
});

test("a terminal event without a preceding start still yields message_start and message_end", async () => {
  const events = [];
  const final = baseMessage(fauxModel(), { content: [{ type: "text", text: "direct" }] });
  const message = await callModel({
    model: fauxModel(),
    context,
    streamFn: () => ({
      async *[Symbol.asyncIterator]() {
        yield { type: "done", reason: "stop", message: final };
      },
    }),
    onEvent: (event) => events.push(event.type),
  });
  assert.equal(message, final);
  assert.deepEqual(events, ["message_start", "message_end"]);
});

test("a stream with no terminal event: an already-settled result() is used, otherwise incomplete evidence", async () => {
  const final = baseMessage(fauxModel(), { content: [{ type: "text", text: "via result" }] });
  const viaResult = await callModel({
    model: fauxModel(),
    context,
    streamFn: () => {
      const stream = new AssistantMessageEventStream();
      queueMicrotask(() => stream.end(final));
      return stream;
    },
  });
  assert.equal(viaResult, final);
  await assert.rejects(
    callModel({
      model: fauxModel(),
      context,
      streamFn: () => {
        const stream = new AssistantMessageEventStream();
        queueMicrotask(() => stream.end());
        return stream;
      },
    }),
    { message: "cave_incomplete_evidence: Pi emitted no final assistant message" },
  );
});

test("an already-aborted signal never calls streamFn and resolves to an aborted message", async () => {
  const controller = new AbortController();
  controller.abort();
  let called = false;
  const events = [];
  const message = await callModel({
    model: fauxModel(),
    context,
    options: { signal: controller.signal },
    streamFn: () => {
      called = true;
      return scriptedStream([{ text: "x" }])(fauxModel(), context);
    },
    onEvent: (event) => events.push(event.type),
  });
  assert.equal(called, false);
  assert.equal(message.stopReason, "aborted");
  assert.equal(message.errorMessage, "Request was aborted");
  assert.equal(message.provider, "anthropic");
  assert.deepEqual(events, ["message_start", "message_end"]);
});

test("aborting mid-stream stops waiting, closes the iterator and returns the partial as aborted", async () => {
  const controller = new AbortController();
  let returned = false;
  let streamSignal;
  const message = await callModel({
    model: fauxModel(),
    context,
    options: { signal: controller.signal },
    streamFn: (model, _ctx, options) => {
      streamSignal = options.signal;
      const partial = baseMessage(model, { content: [{ type: "text", text: "partial text" }] });
      return {
        [Symbol.asyncIterator]() {
          let step = 0;
          return {
            next() {
              step += 1;
              if (step === 1) return Promise.resolve({ value: { type: "start", partial }, done: false });
              if (step === 2) {
                return Promise.resolve({
                  value: { type: "text_delta", contentIndex: 0, delta: "partial text", partial },
                  done: false,
                });
              }
              return new Promise(() => {}); // a provider that hangs and ignores the signal
            },
            return() {
              returned = true;
              return Promise.resolve({ value: undefined, done: true });
            },
          };
        },
      };
    },
    onEvent: (event) => {
      if (event.type === "message_update") controller.abort();
    },
  });
  assert.equal(streamSignal, controller.signal, "the signal is passed to streamFn");
  assert.equal(message.stopReason, "aborted");
  assert.equal(message.errorMessage, "Request was aborted");
  assert.equal(message.content[0].text, "partial text");
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(returned, true);
});

test("aborting while streamFn's promise is pending resolves to aborted", async () => {
  const controller = new AbortController();
  const pending = callModel({
    model: fauxModel(),
    context,
    options: { signal: controller.signal },
    streamFn: () => new Promise(() => {}),
  });
  controller.abort();
  const message = await pending;
  assert.equal(message.stopReason, "aborted");
});

test("a stream that honours the signal reports its own aborted error message", async () => {
  const controller = new AbortController();
  const message = await callModel({
    model: fauxModel(),
    context,
    options: { signal: controller.signal },
    streamFn: (model, _ctx, options) => {
      const stream = new AssistantMessageEventStream();
      const partial = baseMessage(model);
      queueMicrotask(() => stream.push({ type: "start", partial }));
      options.signal.addEventListener("abort", () => {
        const aborted = { ...partial, stopReason: "aborted", errorMessage: "provider saw abort" };
        stream.push({ type: "error", reason: "aborted", error: aborted });
        stream.end();
      });
      return stream;
    },
    onEvent: (event) => {
      if (event.type === "message_start") queueMicrotask(() => controller.abort());
    },
  });
  assert.equal(message.stopReason, "aborted");
  assert.ok(["provider saw abort", "Request was aborted"].includes(message.errorMessage));
});

/** A delta stream whose partials count their property reads (a snapshot reads every field). */
function countingTextStreamFn(chunks, reads) {
  const inner = textStreamFn(chunks);
  return (model, ctx, options) => {
    const stream = inner(model, ctx, options);
    return {
      result: () => stream.result(),
      async *[Symbol.asyncIterator]() {
        for await (const event of stream) {
          if (!event.partial) {
            yield event;
            continue;
          }
          const partial = new Proxy(event.partial, {
            get(target, key, receiver) {
              reads.count += 1;
              return Reflect.get(target, key, receiver);
            },
            ownKeys(target) {
              reads.count += 1;
              return Reflect.ownKeys(target);
            },
          });
          yield { ...event, partial };
        }
      },
    };
  };
}

test("without onEvent no lifecycle event or snapshot is built; with one, every event arrives; same message", async () => {
  const quietReads = { count: 0 };
  const quiet = await callModel({ model: fauxModel(), context, streamFn: countingTextStreamFn(["Hel", "lo"], quietReads) });
  assert.equal(quietReads.count, 0, "no snapshot of a partial without a listener");

  const loudReads = { count: 0 };
  const events = [];
  const loud = await callModel({
    model: fauxModel(),
    context,
    streamFn: countingTextStreamFn(["Hel", "lo"], loudReads),
    onEvent: (event) => events.push(event),
  });
  assert.ok(loudReads.count > 0, "snapshots are taken for the listener");
  assert.deepEqual(
    events.map((e) => e.assistantMessageEvent?.type ?? e.type),
    ["message_start", "text_start", "text_delta", "text_delta", "text_end", "message_end"],
  );
  assert.deepEqual(
    events.filter((e) => e.assistantMessageEvent?.type === "text_delta").map((e) => e.assistantMessageEvent.delta),
    ["Hel", "lo"],
  );
  assert.equal(events.at(-1).message, loud);
  assert.deepEqual(loud, quiet);
  assert.equal(quiet.content[0].text, "Hello");
});

test("model calls on one signal share one abort listener, and an abort still ends a waiting call", async () => {
  const controller = new AbortController();
  const signal = controller.signal;
  let listeners = 0;
  const add = signal.addEventListener.bind(signal);
  signal.addEventListener = (...args) => {
    listeners += 1;
    return add(...args);
  };
  const streamFn = scriptedStream(Array.from({ length: 5 }, (_, i) => ({ text: `turn ${i}` })));
  for (let i = 0; i < 5; i++) {
    const message = await callModel({ model: fauxModel(), context, options: { signal }, streamFn });
    assert.equal(message.content[0].text, `turn ${i}`);
  }
  assert.equal(listeners, 1, "one listener for the signal, not one per call");
  const pending = callModel({ model: fauxModel(), context, options: { signal }, streamFn: () => new Promise(() => {}) });
  controller.abort();
  const aborted = await pending;
  assert.equal(aborted.stopReason, "aborted");
  assert.equal(listeners, 1);
});
