// knap/testing: fauxModel and scriptedStream with the reference's semantics (§3.8).
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { fauxModel, scriptedStream, FAUX_DEFAULT_MODEL_ID } from "knap/testing";
import { priceOf, estimateCostUsd } from "../lib/prices.mjs";

const libDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "lib");

async function drain(stream) {
  const events = [];
  for await (const event of stream) events.push(event);
  return events;
}

const ZERO_COST = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };

test("fauxModel() is pi-ai's faux model with the reference's overrides", () => {
  assert.deepEqual(fauxModel(), {
    id: "faux-1",
    name: "Faux Model",
    api: "faux",
    provider: "anthropic",
    baseUrl: "http://localhost:0",
    reasoning: false,
    input: ["text", "image"],
    cost: ZERO_COST,
    contextWindow: 200_000,
    maxTokens: 4_000,
  });
  assert.equal(FAUX_DEFAULT_MODEL_ID, "faux-1");
});

test("fauxModel() matches what pi-ai's registerFauxProvider().getModel() returns, except api and limits", async () => {
  const pi = await import("@mariozechner/pi-ai");
  const registration = pi.registerFauxProvider({ provider: "anthropic" });
  try {
    const real = registration.getModel();
    const ours = fauxModel();
    for (const key of ["id", "name", "provider", "baseUrl", "reasoning", "input", "cost"]) {
      assert.deepEqual(ours[key], real[key], `field ${key}`);
    }
    assert.deepEqual(Object.keys(ours).sort(), Object.keys(real).sort());
    assert.equal(real.contextWindow, 128000); // the reference overrides these two
    assert.equal(ours.contextWindow, 200_000);
    assert.equal(ours.maxTokens, 4_000);
  } finally {
    registration.unregister();
  }
});

test("fauxModel options: provider, id, priced", () => {
  assert.equal(fauxModel({ provider: "openai" }).provider, "openai");
  assert.equal(fauxModel({ id: "m-1" }).id, "m-1");
  const priced = fauxModel({ priced: true });
  assert.equal(priced.id, "claude-haiku-4-5");
  assert.equal(priced.provider, "anthropic");
  assert.deepEqual(priced.cost, ZERO_COST, "pricing comes from the catalog, not the model object");
  assert.equal(fauxModel({ priced: true, id: "explicit" }).id, "explicit", "id wins over priced");
  assert.equal(fauxModel({ priced: false }).id, "faux-1");
  assert.notEqual(fauxModel(), fauxModel(), "a fresh object each call");
  assert.throws(() => fauxModel(null), TypeError);
});

test("priced faux model is in the bundled price catalog; the default one is not", () => {
  const priced = fauxModel({ priced: true });
  assert.ok(priceOf(priced.provider, priced.id));
  assert.equal(priceOf("anthropic", "faux-1"), undefined);
  // support-desk: five calls of 100 input / 10 output tokens cost > 0 and < 0.05 USD
  let total = 0;
  for (let i = 0; i < 5; i++) total += estimateCostUsd(priced.provider, priced.id, { input: 100, output: 10 });
  assert.ok(total > 0 && total < 0.05, `total ${total}`);
});

test("scriptedStream: one turn -> start (pending partial) then done, exact message shape", async () => {
  const model = fauxModel();
  const streamFn = scriptedStream([{ text: "hello", toolCalls: [{ name: "bash", args: { command: "ls" } }, { name: "noargs" }] }]);
  const before = Date.now();
  const stream = streamFn(model, { messages: [] }, {});
  assert.equal(typeof stream.then, "undefined", "the stream is returned synchronously");
  const events = await drain(stream);
  assert.deepEqual(
    events.map((event) => event.type),
    ["start", "done"],
  );
  const message = events[1].message;
  assert.ok(message.timestamp >= before && message.timestamp <= Date.now());
  assert.deepEqual(message, {
    role: "assistant",
    content: [
      { type: "text", text: "hello" },
      { type: "toolCall", id: "scripted-1-0", name: "bash", arguments: { command: "ls" } },
      { type: "toolCall", id: "scripted-1-1", name: "noargs", arguments: {} },
    ],
    api: "faux",
    provider: "anthropic",
    model: "faux-1",
    usage: {
      input: 100,
      output: 10,
      cacheRead: 0,
      cacheWrite: 0,
      reasoning: 0,
      totalTokens: 110,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason: "toolUse",
    timestamp: message.timestamp,
  });
  assert.equal(events[1].reason, "toolUse");
  assert.equal(events[0].partial.stopReason, "pending");
  assert.equal(events[0].partial.role, "assistant");
  assert.equal(await stream.result(), message, "result() resolves to the done message");
});

test("scriptedStream: events arrive on a microtask, not synchronously", async () => {
  const stream = scriptedStream([{ text: "x" }])(fauxModel(), { messages: [] });
  const iterator = stream[Symbol.asyncIterator]();
  let settled = false;
  const first = iterator.next().then((step) => {
    settled = true;
    return step;
  });
  assert.equal(settled, false);
  assert.equal((await first).value.type, "start");
});

test("scriptedStream: text part only when text is given; stopReason stop without tool calls", async () => {
  const streamFn = scriptedStream([{ toolCalls: [{ name: "t", args: { a: 1 } }] }, {}, { text: "" }]);
  const first = await streamFn(fauxModel(), { messages: [] }).result();
  assert.deepEqual(first.content, [{ type: "toolCall", id: "scripted-1-0", name: "t", arguments: { a: 1 } }]);
  const second = await streamFn(fauxModel(), { messages: [] }).result();
  assert.deepEqual(second.content, []);
  assert.equal(second.stopReason, "stop");
  const third = await streamFn(fauxModel(), { messages: [] }).result();
  assert.deepEqual(third.content, [{ type: "text", text: "" }]);
});

test("scriptedStream: api/provider/model come from the model argument of each call", async () => {
  const streamFn = scriptedStream([{ text: "a" }, { text: "b" }]);
  const a = await streamFn(fauxModel({ provider: "openai", id: "gpt-x" }), { messages: [] }).result();
  const b = await streamFn({ ...fauxModel(), api: "other-api", provider: "google", id: "g-1" }, { messages: [] }).result();
  assert.deepEqual([a.api, a.provider, a.model], ["faux", "openai", "gpt-x"]);
  assert.deepEqual([b.api, b.provider, b.model], ["other-api", "google", "g-1"]);
});

test("scriptedStream: tool call ids carry the 1-based call number", async () => {
  const streamFn = scriptedStream([
    { toolCalls: [{ name: "a", args: {} }] },
    { toolCalls: [{ name: "b", args: {} }, { name: "c", args: {} }] },
  ]);
  const one = await streamFn(fauxModel(), { messages: [] }).result();
  const two = await streamFn(fauxModel(), { messages: [] }).result();
  assert.deepEqual(
    [...one.content, ...two.content].map((part) => part.id),
    ["scripted-1-0", "scripted-2-0", "scripted-2-1"],
  );
});

test("scriptedStream: a usage partial merges over the defaults", async () => {
  const streamFn = scriptedStream([
    { text: "a", usage: { input: 500, cacheRead: 7 } },
    { text: "b", usage: { output: 3, cost: { input: 0.25, output: 0.5 } } },
    { text: "c", usage: { totalTokens: 9, reasoning: 4 } },
  ]);
  const a = (await streamFn(fauxModel(), { messages: [] }).result()).usage;
  assert.deepEqual(a, {
    input: 500,
    output: 10,
    cacheRead: 7,
    cacheWrite: 0,
    reasoning: 0,
    totalTokens: 517,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  });
  const b = (await streamFn(fauxModel(), { messages: [] }).result()).usage;
  assert.equal(b.output, 3);
  assert.equal(b.totalTokens, 103);
  assert.deepEqual(b.cost, { input: 0.25, output: 0.5, cacheRead: 0, cacheWrite: 0, total: 0.75 });
  const c = (await streamFn(fauxModel(), { messages: [] }).result()).usage;
  assert.equal(c.totalTokens, 9, "an explicit totalTokens is kept");
  assert.equal(c.reasoning, 4);
});

test("scriptedStream: running out of turns throws synchronously with the reference's message", async () => {
  const streamFn = scriptedStream([{ text: "one" }, { text: "two" }]);
  await streamFn(fauxModel(), { messages: [] }).result();
  await streamFn(fauxModel(), { messages: [] }).result();
  assert.throws(() => streamFn(fauxModel(), { messages: [] }), {
    message: "cave_testing_script_exhausted: scripted stream has 2 turn(s); call 3 asked for another",
  });
  assert.throws(() => streamFn(fauxModel(), { messages: [] }), /call 4 asked for another/);
  assert.throws(() => scriptedStream([])(fauxModel(), { messages: [] }), {
    message: "cave_testing_script_exhausted: scripted stream has 0 turn(s); call 1 asked for another",
  });
  assert.throws(() => scriptedStream("nope"), TypeError);
});

test("scriptedStream: an aborted signal ends the turn with an aborted error event", async () => {
  const controller = new AbortController();
  controller.abort();
  const stream = scriptedStream([{ text: "x" }])(fauxModel(), { messages: [] }, { signal: controller.signal });
  const events = await drain(stream);
  assert.deepEqual(
    events.map((event) => event.type),
    ["error"],
  );
  assert.equal(events[0].error.stopReason, "aborted");
});

test("fauxModel + scriptedStream drive pi-agent-core's real Agent loop (tool call, then answer)", async () => {
  const { Agent } = await import("@mariozechner/pi-agent-core");
  const { Type } = await import("@mariozechner/pi-ai");
  const seenContexts = [];
  const script = scriptedStream([{ text: "calling", toolCalls: [{ name: "echo", args: { text: "hi" } }] }, { text: "done" }]);
  const agent = new Agent({
    initialState: {
      systemPrompt: "be brief",
      model: fauxModel(),
      tools: [
        {
          name: "echo",
          label: "echo",
          description: "echo text",
          parameters: Type.Object({ text: Type.String() }),
          execute: async (_id, params) => ({ content: [{ type: "text", text: `echo:${params.text}` }], details: {} }),
        },
      ],
    },
    streamFn: (model, context, options) => {
      seenContexts.push(structuredClone(context.messages));
      return script(model, context, options);
    },
  });
  const types = [];
  agent.subscribe((event) => types.push(event.type));
  await agent.prompt("go");
  const messages = agent.state.messages;
  assert.deepEqual(
    messages.map((message) => message.role),
    ["user", "assistant", "toolResult", "assistant"],
  );
  assert.equal(messages[2].content[0].text, "echo:hi");
  assert.equal(messages[2].toolCallId, "scripted-1-0");
  assert.equal(messages[3].content[0].text, "done");
  assert.deepEqual(seenContexts[0][0].content, [{ type: "text", text: "go" }], "user content is an array of text parts");
  assert.ok(types.includes("tool_execution_start") && types.includes("tool_execution_end"));
});

test("knap/testing and the model layer load without @mariozechner/pi-ai installed", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "knap-no-pi-"));
  try {
    for (const file of ["testing.mjs", "event-stream.mjs", "models.mjs", "pi-ai.mjs", "ai-sdk-model.mjs", "transport.mjs", "hint.mjs"]) {
      cpSync(path.join(libDir, file), path.join(dir, file));
    }
    const testing = await import(pathToFileURL(path.join(dir, "testing.mjs")).href);
    const transport = await import(pathToFileURL(path.join(dir, "transport.mjs")).href);
    const model = testing.fauxModel();
    const message = await transport.callModel({
      model,
      context: { messages: [] },
      streamFn: testing.scriptedStream([{ text: "offline" }]),
    });
    assert.equal(message.content[0].text, "offline");
    const models = await import(pathToFileURL(path.join(dir, "models.mjs")).href);
    assert.equal(await models.resolveModel(undefined, { model }), model);
    await assert.rejects(models.resolveModel("anthropic/claude-haiku-4-5"), /npm install @mariozechner\/pi-ai/);
    await assert.rejects(models.defaultStreamFn()(model, { messages: [] }, {}), /npm install @mariozechner\/pi-ai/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
