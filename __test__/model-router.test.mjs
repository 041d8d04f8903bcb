// RunOptions.modelRouter (issue 12 item 4; caveman-serve-plugins-memory.md §5.8): asked before
// every root provider call, its decision checked in Rust against the catalog, the chosen model
// serving that call (priced for it, named in the receipt), a model_route event per decision.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { agent, run, schema, stream, subagent, tool, CavemanRunError, DiskDurableStore } from "../lib/index.mjs";
import { catalogCost } from "../lib/catalog.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { collect, recordingStream, toolResultsSeen } from "./run-helpers.mjs";

const HAIKU = "anthropic/claude-haiku-4-5";
const SONNET = "anthropic/claude-sonnet-4-5";

function readTool(name = "look", execute = () => "seen") {
  return tool({ name, description: `${name} (test tool)`, input: schema.object({}), effect: "read", allowRepeat: true, execute });
}

function def(tools = [readTool()], model = fauxModel()) {
  return agent({ id: "routed", instructions: "route me", model, sandbox: "host", tools });
}

/** A router answering `models[callIndex]` and recording every input it was given. */
function routerOf(models) {
  const inputs = [];
  const router = (input) => {
    inputs.push(input);
    return { model: models[input.callIndex] ?? input.currentModel, reason: `call ${input.callIndex}`, signals: ["test"] };
  };
  return { router, inputs };
}

test("a router picks a model per call: the call goes to it, is priced for it, and the receipt and events show it", async () => {
  const { streamFn, calls } = recordingStream([{ toolCalls: [{ name: "look" }] }, { text: "done" }]);
  const { router, inputs } = routerOf([HAIKU, SONNET]);
  const events = await collect(stream(def(), "go", { model: fauxModel(), streamFn, modelRouter: router }));
  const end = events.at(-1);
  assert.equal(end.type, "run_end");
  const result = end.result;
  assert.equal(result.text, "done");
  assert.deepEqual(calls.map((c) => `${c.model.provider}/${c.model.id}`), [HAIKU, SONNET], "each call got the chosen model's object");
  assert.deepEqual(result.receipt.calls.map((c) => `${c.provider}/${c.model}`), [HAIKU, SONNET]);
  const usage = { input: 100, output: 10 };
  assert.deepEqual(result.receipt.calls.map((c) => c.estimatedUsd), [catalogCost(HAIKU, usage), catalogCost(SONNET, usage)]);
  assert.ok(catalogCost(HAIKU, usage) > 0 && catalogCost(HAIKU, usage) !== catalogCost(SONNET, usage));
  assert.equal(result.priceBasis, "public_catalog");
  assert.equal(result.model, "claude-sonnet-4-5");
  const routes = events.filter((e) => e.type === "model_route");
  assert.deepEqual(routes, [
    { type: "model_route", runId: result.runId, decision: { model: HAIKU, reason: "call 0", signals: ["test"] } },
    { type: "model_route", runId: result.runId, decision: { model: SONNET, reason: "call 1", signals: ["test"] } },
  ]);
  // Each decision comes before its call's turn events.
  const kinds = events.map((e) => (e.type === "pi" ? e.event.type : e.type));
  assert.ok(kinds.indexOf("model_route") < kinds.indexOf("message_update") || !kinds.includes("message_update"));
  assert.equal(inputs.length, 2);
  assert.deepEqual(
    inputs.map(({ ctxTokens, ...rest }) => rest),
    [
      { callIndex: 0, role: "working", provider: "anthropic", currentModel: "anthropic/faux-1", hasImages: false, toolErrorStreak: 0 },
      {
        callIndex: 1,
        role: "working",
        provider: "anthropic",
        currentModel: HAIKU,
        hasImages: false,
        toolErrorStreak: 0,
        previousUsage: { model: HAIKU, inputTokens: 100, cacheReadTokens: 0, cacheWriteTokens: 0 },
      },
    ],
  );
  assert.ok(inputs[0].ctxTokens > 0 && inputs[1].ctxTokens > inputs[0].ctxTokens, "ctxTokens grows with the context");
  assert.ok(Object.isFrozen(inputs[1]) && Object.isFrozen(inputs[1].previousUsage), "the input is frozen");
  // Without a router the same script runs on the run's own model, and no model_route event.
  const plain = recordingStream([{ toolCalls: [{ name: "look" }] }, { text: "done" }]);
  const unrouted = await collect(stream(def(), "go", { model: fauxModel(), streamFn: plain.streamFn }));
  assert.equal(unrouted.filter((e) => e.type === "model_route").length, 0);
  assert.deepEqual(unrouted.at(-1).result.receipt.calls.map((c) => c.model), ["faux-1", "faux-1"]);
});

test("the selected model stays the working model; routing back to the run's own model is allowed", async () => {
  const { streamFn, calls } = recordingStream([{ toolCalls: [{ name: "look" }] }, { toolCalls: [{ name: "look" }] }, { text: "done" }]);
  const seen = [];
  const modelRouter = (input) => {
    seen.push(input.currentModel);
    const model = input.callIndex === 0 ? HAIKU : input.callIndex === 1 ? input.currentModel : "anthropic/faux-1";
    return { model, reason: "r", signals: [] };
  };
  const result = await run(def(), "go", { model: fauxModel(), streamFn, modelRouter });
  assert.deepEqual(seen, ["anthropic/faux-1", HAIKU, HAIKU]);
  assert.deepEqual(calls.map((c) => c.model.id), ["claude-haiku-4-5", "claude-haiku-4-5", "faux-1"]);
  assert.deepEqual(result.receipt.calls.map((c) => c.model), ["claude-haiku-4-5", "claude-haiku-4-5", "faux-1"]);
  assert.equal(result.receipt.calls[2].unpriced, true, "the run's own (uncataloged) model stays unpriced");
});

async function refused(decision, extra = {}) {
  const { streamFn, calls } = recordingStream([{ text: "never" }]);
  const options = { model: fauxModel(), streamFn, modelRouter: () => decision, ...extra };
  const error = await run(extra.definition ?? def(), extra.input ?? "go", options).then(
    () => assert.fail("the run should fail"),
    (e) => e,
  );
  assert.ok(error instanceof CavemanRunError);
  assert.equal(error.code, "cave_agent_run_failed");
  assert.equal(calls.length, 0, "no provider call is made");
  return error;
}

test("decision shape problems fail the run with cave_model_route_decision_invalid", async () => {
  for (const bad of [
    undefined,
    null,
    HAIKU,
    { model: HAIKU },
    { model: HAIKU, reason: "r" },
    { model: HAIKU, reason: 1, signals: [] },
    { model: "", reason: "r", signals: [] },
    { model: HAIKU, reason: "r", signals: ["ok", 7] },
    { model: HAIKU, reason: "r", signals: "s" },
    [HAIKU],
  ]) {
    const e = await refused(bad);
    assert.match(e.message, /^cave_agent_run_failed: cave_model_route_decision_invalid/, JSON.stringify(bad) ?? "undefined");
    assert.equal(e.receipt.calls.length, 0);
  }
});

test("a model of another provider is cave_model_route_cross_provider; one not in the catalog is cave_model_route_unknown:<m>", async () => {
  assert.match((await refused({ model: "openai/gpt-5.4-mini", reason: "r", signals: [] })).message, /cave_model_route_cross_provider/);
  const unknown = await refused({ model: "anthropic/claude-nonesuch", reason: "r", signals: [] });
  assert.match(unknown.message, /^cave_agent_run_failed: cave_model_route_unknown:anthropic\/claude-nonesuch$/);
  assert.match((await refused({ model: "claude-haiku-4-5", reason: "r", signals: [] })).message, /cave_model_route_unknown:claude-haiku-4-5$/);
});

test("images on a text-only model are cave_model_route_incompatible:<m>:images; a context over its window is …:context", async () => {
  const openai = fauxModel({ provider: "openai" });
  const image = [{ type: "text", text: "look" }, { type: "image", source: { type: "base64", data: "iVBORw0KGgo=" }, mimeType: "image/png" }];
  const decision = { model: "openai/gpt-4", reason: "r", signals: [] };
  const images = await refused(decision, { model: openai, definition: def([], openai), input: image });
  assert.match(images.message, /cave_model_route_incompatible:openai\/gpt-4:images$/);
  // gpt-4's window is 8,192 tokens; 40,000 bytes of prompt is about 10,000.
  const long = await refused(decision, { model: openai, definition: def([], openai), input: "x".repeat(40_000) });
  assert.match(long.message, /cave_model_route_incompatible:openai\/gpt-4:context$/);
  // The same decision on a small text-only context is fine.
  const ok = await run(def([], openai), "hi", { model: openai, streamFn: scriptedStream([{ text: "fine" }]), modelRouter: () => decision });
  assert.equal(ok.receipt.calls[0].model, "gpt-4");
  // hasImages reaches the router.
  const seen = [];
  await run(def([], openai), image, { model: openai, streamFn: scriptedStream([{ text: "x" }]), modelRouter: (i) => (seen.push(i.hasImages), { model: "openai/gpt-4o-mini", reason: "", signals: [] }) });
  assert.deepEqual(seen, [true]);
});

test("without a router, images on a model without image input fail with cave_model_input_unsupported:<p>/<id>:images", async () => {
  const textOnly = { ...fauxModel(), input: ["text"] };
  const image = [{ type: "text", text: "look" }, { type: "image", source: { type: "base64", data: "iVBORw0KGgo=" }, mimeType: "image/png" }];
  const { streamFn, calls } = recordingStream([{ text: "never" }]);
  await assert.rejects(run(def([], textOnly), image, { model: textOnly, streamFn }), (e) => {
    assert.equal(e.code, "cave_agent_run_failed");
    assert.equal(e.message, "cave_agent_run_failed: cave_model_input_unsupported:anthropic/faux-1:images");
    return true;
  });
  assert.equal(calls.length, 0);
  // Text on that model, and images on one that takes them, run.
  assert.equal((await run(def([], textOnly), "hi", { model: textOnly, streamFn: scriptedStream([{ text: "a" }]) })).text, "a");
  assert.equal((await run(def([], fauxModel()), image, { model: fauxModel(), streamFn: scriptedStream([{ text: "b" }]) })).text, "b");
});

test("an async router works; a throwing or rejecting router fails the run with its error", async () => {
  const { streamFn, calls } = recordingStream([{ text: "async ok" }]);
  const asyncRouter = async (input) => {
    await new Promise((resolve) => setImmediate(resolve));
    return { model: HAIKU, reason: `async ${input.callIndex}`, signals: [] };
  };
  const events = await collect(stream(def(), "go", { model: fauxModel(), streamFn, modelRouter: asyncRouter }));
  assert.equal(events.at(-1).result.text, "async ok");
  assert.equal(calls[0].model.id, "claude-haiku-4-5");
  assert.deepEqual(events.find((e) => e.type === "model_route").decision, { model: HAIKU, reason: "async 0", signals: [] });

  for (const modelRouter of [
    () => {
      throw new Error("router exploded");
    },
    async () => {
      throw new Error("router exploded");
    },
  ]) {
    const recorded = recordingStream([{ text: "never" }]);
    await assert.rejects(run(def(), "go", { model: fauxModel(), streamFn: recorded.streamFn, modelRouter }), (e) => {
      assert.ok(e instanceof CavemanRunError);
      assert.equal(e.code, "cave_agent_run_failed");
      assert.match(e.message, /^cave_agent_run_failed: .*router exploded/);
      return true;
    });
    assert.equal(recorded.calls.length, 0);
  }
  // An async invalid decision is judged like a sync one.
  const e = await refused(Promise.resolve({ model: "anthropic/nope", reason: "", signals: [] }));
  assert.match(e.message, /cave_model_route_unknown:anthropic\/nope$/);
});

test("subagents are not routed: only root calls reach the router, and children use their own model", async () => {
  const child = agent({ id: "child", instructions: "c", model: fauxModel(), sandbox: "host" });
  const helper = subagent({ name: "helper", description: "d", agent: child, maxCalls: 2 });
  const parent = agent({ id: "parent", instructions: "p", model: fauxModel(), sandbox: "host", tools: [helper] });
  const { streamFn, calls } = recordingStream([{ toolCalls: [{ name: "helper", args: { task: "t" } }] }, { text: "child done" }, { text: "parent done" }]);
  const { router, inputs } = routerOf([HAIKU, HAIKU]);
  const result = await run(parent, "go", { model: fauxModel(), streamFn, modelRouter: router });
  assert.equal(result.text, "parent done");
  assert.deepEqual(inputs.map((i) => i.callIndex), [0, 1], "two root calls routed, the child's call not");
  assert.deepEqual(calls.map((c) => c.model.id), ["claude-haiku-4-5", "faux-1", "claude-haiku-4-5"]);
  assert.deepEqual(result.receipt.subagents[0].calls.map((c) => c.model), ["faux-1"]);
});

test("toolErrorStreak counts consecutive failed tool results and a success resets it", async () => {
  const bad = readTool("bad", () => {
    throw new Error("nope");
  });
  const good = readTool("good");
  const { streamFn, calls } = recordingStream([
    { toolCalls: [{ name: "bad" }] },
    { toolCalls: [{ name: "bad" }, { name: "missing_tool" }] },
    { toolCalls: [{ name: "good" }] },
    { toolCalls: [{ name: "bad" }] },
    { text: "done" },
  ]);
  const { router, inputs } = routerOf([]);
  const result = await run(def([bad, good]), "go", { model: fauxModel(), streamFn, modelRouter: router });
  assert.equal(result.text, "done");
  assert.deepEqual(inputs.map((i) => i.toolErrorStreak), [0, 1, 3, 0, 1]);
  assert.deepEqual(toolResultsSeen(calls).map((r) => r.isError), [true, true, true, false, true]);
});

test("a non-function modelRouter is refused before the run", async () => {
  await assert.rejects(run(def(), "go", { model: fauxModel(), streamFn: scriptedStream([{ text: "x" }]), modelRouter: "anthropic/claude-haiku-4-5" }), {
    code: "cave_run_options_invalid",
    message: /modelRouter must be a function/,
  });
});

test("a resumed durable run's callIndex continues from its journaled root model calls", async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "knap-router-"));
  const durable = { runId: "routed-resume-1", store: new DiskDurableStore(root) };
  const controller = new AbortController();
  const first = scriptedStream([{ toolCalls: [{ name: "look" }] }]);
  let n = 0;
  const crashing = (model, context, options) => {
    n += 1;
    if (n === 1) return first(model, context, options);
    controller.abort();
    return new Promise(() => {});
  };
  const a = routerOf([HAIKU, HAIKU, HAIKU]);
  await assert.rejects(run(def(), "go", { model: fauxModel(), streamFn: crashing, modelRouter: a.router, durable, signal: controller.signal }), /cave_run_aborted/);
  assert.deepEqual(a.inputs.map((i) => i.callIndex), [0, 1]);
  const b = routerOf([HAIKU, HAIKU, HAIKU]);
  const { streamFn, calls } = recordingStream([{ text: "resumed" }]);
  const result = await run(def(), "go", { model: fauxModel(), streamFn, modelRouter: b.router, durable: { ...durable, store: new DiskDurableStore(root) } });
  assert.equal(result.text, "resumed");
  assert.equal(result.resumed, true);
  assert.deepEqual(b.inputs.map((i) => i.callIndex), [2], "both journaled root calls (the settled and the interrupted one) count");
  assert.equal(calls[0].model.id, "claude-haiku-4-5");
});
