// Model resolution (reference §3.7): RunOptions.model, model objects, "provider/id", auto().
import { test, beforeEach, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { getModel } from "@mariozechner/pi-ai";
import { MockLanguageModelV3 } from "ai/test";
import {
  AUTO,
  auto,
  isAuto,
  resolveModel,
  resolveModelCall,
  defaultStreamFn,
  builtinModels,
  piModelFromAiSdk,
  isAiSdkLanguageModel,
  resetAutoNoticeForTests,
  AI_SDK_LANGUAGE_MODEL,
} from "../lib/models.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { callModel } from "../lib/transport.mjs";

const emptyRoot = mkdtempSync(path.join(tmpdir(), "knap-models-"));
const noCreds = { env: {} };

function rootWithProviderJson(text) {
  const root = mkdtempSync(path.join(tmpdir(), "knap-provider-json-"));
  mkdirSync(path.join(root, ".caveman"));
  writeFileSync(path.join(root, ".caveman", "provider.json"), text);
  return root;
}

function missingPiAi() {
  const error = new Error("Cannot find package '@mariozechner/pi-ai' imported from /x/models.mjs");
  error.code = "ERR_MODULE_NOT_FOUND";
  return Promise.reject(error);
}

beforeEach(() => resetAutoNoticeForTests());
after(() => rmSync(emptyRoot, { recursive: true, force: true }));

test("auto() is the frozen marker { kind: 'auto', [AUTO]: true }", () => {
  assert.equal(AUTO, Symbol.for("@caveman-ai/agent:auto"));
  const marker = auto();
  assert.equal(marker.kind, "auto");
  assert.equal(marker[AUTO], true);
  assert.ok(Object.isFrozen(marker));
  assert.deepEqual(Object.keys(marker), ["kind"]);
  assert.deepEqual(Object.getOwnPropertySymbols(marker), [AUTO]);
  assert.ok(isAuto(marker) && isAuto({ kind: "auto" }));
  assert.ok(!isAuto("auto") && !isAuto(null) && !isAuto(fauxModel()));
});

test("RunOptions.model wins and is used as-is; the definition is ignored", async () => {
  const override = fauxModel({ id: "override" });
  assert.equal(await resolveModel("not a valid spec", { model: override }), override);
  assert.equal(await resolveModel(auto(), { model: override }, noCreds), override);
});

test("a definition model object with provider is used as-is", async () => {
  const model = { ...fauxModel(), id: "custom" };
  assert.equal(await resolveModel(model, {}), model);
});

test('"provider/id" strings come from the Pi catalog', async () => {
  const model = await resolveModel("anthropic/claude-haiku-4-5", { rootDir: emptyRoot }, noCreds);
  assert.deepEqual(model, getModel("anthropic", "claude-haiku-4-5"));
  assert.equal(model.api, "anthropic-messages");
  assert.ok(model.cost.input > 0);
  const catalog = await builtinModels();
  assert.equal(typeof catalog.getModel, "function");
});

test("pinned model errors: format and unknown model, with the reference's messages", async () => {
  for (const bad of ["claude-haiku-4-5", "/claude", "anthropic/", ""]) {
    await assert.rejects(resolveModel(bad, {}), { message: "caveman agent: pinned model must use provider/model format" }, bad);
  }
  // the reference's first line; knap adds a `hint: …` second line
  const firstLine = (expected) => (e) => e.message.split("\n")[0] === expected && e.message.split("\n")[1] === `hint: ${e.hint}`;
  await assert.rejects(resolveModel("anthropic/no-such-model", {}), firstLine('caveman agent: unknown model "anthropic/no-such-model"'));
  await assert.rejects(resolveModel("nope/x", {}), firstLine('caveman agent: unknown model "nope/x"'));
});

test("RunOptions.models replaces the catalog; ids may contain '/'", async () => {
  const calls = [];
  const mine = { ...fauxModel(), provider: "openrouter", id: "anthropic/claude-x" };
  const models = {
    getModel(provider, id) {
      calls.push([provider, id]);
      return provider === "openrouter" && id === "anthropic/claude-x" ? mine : undefined;
    },
  };
  assert.equal(await resolveModel("openrouter/anthropic/claude-x", { models }), mine);
  assert.deepEqual(calls, [["openrouter", "anthropic/claude-x"]]);
  await assert.rejects(resolveModel("anthropic/claude-haiku-4-5", { models }), /unknown model/);
});

test("a pinned string ignores CAVE_MODEL", async () => {
  const model = await resolveModel("openai/gpt-5.4-mini", {}, { env: { CAVE_MODEL: "anthropic/claude-haiku-4-5" } });
  assert.equal(model.id, "gpt-5.4-mini");
});

test("auto(): CAVE_MODEL comes first", async () => {
  const env = { CAVE_MODEL: "google/gemini-2.5-flash", ANTHROPIC_API_KEY: "k" };
  const root = rootWithProviderJson(JSON.stringify({ model: "openai/gpt-5.4-mini" }));
  try {
    const model = await resolveModel(auto(), { rootDir: root }, { env });
    assert.deepEqual([model.provider, model.id], ["google", "gemini-2.5-flash"]);
    await assert.rejects(resolveModel(auto(), {}, { env: { CAVE_MODEL: "bogus" } }), /provider\/model format/);
    await assert.rejects(resolveModel(auto(), {}, { env: { CAVE_MODEL: "anthropic/zzz" } }), /unknown model "anthropic\/zzz"/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("auto(): then <rootDir>/.caveman/provider.json", async () => {
  const root = rootWithProviderJson(JSON.stringify({ model: "openai/gpt-5.4-mini" }));
  try {
    const model = await resolveModel(auto(), { rootDir: root }, { env: { ANTHROPIC_API_KEY: "k" } });
    assert.deepEqual([model.provider, model.id], ["openai", "gpt-5.4-mini"]);
    const viaUndefined = await resolveModel(undefined, { rootDir: root }, { env: {} });
    assert.equal(viaUndefined.id, "gpt-5.4-mini", "a missing definition model means auto()");
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("auto(): a broken provider.json fails with the reference's message", async () => {
  for (const text of ["{not json", "[]", "{}", '{"model": 5}', '{"model": ""}', "null"]) {
    const root = rootWithProviderJson(text);
    try {
      await assert.rejects(
        resolveModel(auto(), { rootDir: root }, { env: { ANTHROPIC_API_KEY: "k" } }),
        { message: "caveman agent: invalid .caveman/provider.json" },
        text,
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }
});

test("auto(): the first credential picks the baseline, in the fixed order", async () => {
  const cases = [
    [{ ANTHROPIC_API_KEY: "a" }, "anthropic/claude-haiku-4-5"],
    [{ OPENAI_API_KEY: "o" }, "openai/gpt-5.4-mini"],
    [{ GEMINI_API_KEY: "g" }, "google/gemini-2.5-flash"],
    [{ GOOGLE_API_KEY: "g" }, "google/gemini-2.5-flash"],
    [{ ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "o" }, "openai/gpt-5.4-mini"],
  ];
  for (const [env, expected] of cases) {
    const model = await resolveModel(auto(), { rootDir: emptyRoot }, { env, warn: () => {} });
    assert.equal(`${model.provider}/${model.id}`, expected, JSON.stringify(env));
  }
});

test("auto(): several credentials -> one stderr notice per process", async () => {
  const notices = [];
  const internals = { env: { OPENAI_API_KEY: "o", GOOGLE_API_KEY: "g", ANTHROPIC_API_KEY: "a" }, warn: (text) => notices.push(text) };
  const first = await resolveModel(auto(), { rootDir: emptyRoot }, internals);
  await resolveModel(auto(), { rootDir: emptyRoot }, internals);
  assert.equal(`${first.provider}/${first.id}`, "anthropic/claude-haiku-4-5");
  assert.deepEqual(notices, [
    "cave: multiple provider credentials found — using anthropic/claude-haiku-4-5; set CAVE_MODEL to choose another\n",
  ]);
  // GEMINI_API_KEY and GOOGLE_API_KEY are one provider: no notice.
  resetAutoNoticeForTests();
  const quiet = [];
  await resolveModel(auto(), { rootDir: emptyRoot }, { env: { GEMINI_API_KEY: "g", GOOGLE_API_KEY: "g" }, warn: (t) => quiet.push(t) });
  assert.deepEqual(quiet, []);
});

test("auto(): no credential, and a baseline missing from the catalog", async () => {
  await assert.rejects(
    resolveModel(auto(), { rootDir: emptyRoot }, { env: {} }),
    (e) => e.message.split("\n")[0] === "caveman agent: no supported provider credential found" && /ANTHROPIC_API_KEY/.test(e.hint),
  );
  const models = { getModel: () => undefined };
  await assert.rejects(resolveModel(auto(), { rootDir: emptyRoot, models }, { env: { OPENAI_API_KEY: "o" } }), {
    message: "caveman agent: baseline model unavailable: openai/gpt-5.4-mini",
  });
});

test("without pi-ai: catalog lookups fail with an npm install hint; model objects still work", async () => {
  const internals = { env: { ANTHROPIC_API_KEY: "a" }, importPiAi: missingPiAi };
  await assert.rejects(resolveModel("anthropic/claude-haiku-4-5", {}, internals), (error) => {
    assert.match(error.message, /npm install @mariozechner\/pi-ai/);
    assert.doesNotMatch(error.message, /credential/, "must not be mistaken for a credential error");
    return true;
  });
  await assert.rejects(resolveModel(auto(), { rootDir: emptyRoot }, internals), /npm install @mariozechner\/pi-ai/);
  const model = fauxModel();
  assert.equal(await resolveModel(model, {}, internals), model);
  // format errors need no catalog
  await assert.rejects(resolveModel("bad", {}, internals), /provider\/model format/);
  await assert.rejects(defaultStreamFn({}, internals)(model, { messages: [] }, {}), /npm install @mariozechner\/pi-ai/);
  // other import failures are not disguised
  const broken = () => Promise.reject(new SyntaxError("boom"));
  await assert.rejects(resolveModel("anthropic/claude-haiku-4-5", {}, { importPiAi: broken }), /boom/);
});

test('with RunOptions.streamFn, "provider/id" and auto() resolve from knap\'s catalog without pi-ai: the same Pi Model, prices and context window', async () => {
  const internals = { env: { ANTHROPIC_API_KEY: "a" }, importPiAi: missingPiAi };
  const streamFn = scriptedStream([{ text: "x" }]);
  const model = await resolveModel("anthropic/claude-haiku-4-5", { streamFn }, internals);
  assert.deepEqual(model, getModel("anthropic", "claude-haiku-4-5"), "what pi-ai's catalog would have given");
  assert.ok(model.contextWindow > 0 && model.cost.input > 0);
  const call = await resolveModelCall("openai/gpt-5.4-mini", { streamFn }, internals);
  assert.equal(call.model.id, "gpt-5.4-mini");
  assert.equal(call.streamFn, streamFn);
  const viaAuto = await resolveModel(auto(), { rootDir: emptyRoot, streamFn }, internals);
  assert.equal(`${viaAuto.provider}/${viaAuto.id}`, "anthropic/claude-haiku-4-5");
  await assert.rejects(resolveModel("anthropic/no-such-model", { streamFn }, internals), /unknown model "anthropic\/no-such-model"/);
  // Without a transport of its own the lookup is pi-ai's (which is missing here).
  await assert.rejects(resolveModel("anthropic/claude-haiku-4-5", {}, internals), /npm install @mariozechner\/pi-ai/);
});

test("invalid model values are refused", async () => {
  await assert.rejects(resolveModel(42, {}), /model must be auto\(\), a "provider\/id" string or a Pi Model object/);
  await assert.rejects(resolveModel({ id: "x" }, {}), /model must be auto\(\)/);
});

test("defaultStreamFn uses RunOptions.models.streamSimple, and GOOGLE_API_KEY for google", async () => {
  const seen = [];
  const models = {
    getModel: () => undefined,
    streamSimple(model, context, options) {
      seen.push({ provider: model.provider, apiKey: options?.apiKey });
      return scriptedStream([{ text: "via models" }])(model, context, options);
    },
  };
  const fn = defaultStreamFn({ models }, { env: { GOOGLE_API_KEY: "gk" } });
  const message = await callModel({ model: fauxModel({ provider: "google" }), context: { messages: [] }, streamFn: fn });
  assert.equal(message.content[0].text, "via models");
  await callModel({ model: fauxModel(), context: { messages: [] }, streamFn: fn });
  const fnWithGemini = defaultStreamFn({ models }, { env: { GOOGLE_API_KEY: "gk", GEMINI_API_KEY: "gem" } });
  await callModel({ model: fauxModel({ provider: "google" }), context: { messages: [] }, streamFn: fnWithGemini });
  assert.deepEqual(seen, [
    { provider: "google", apiKey: "gk" },
    { provider: "anthropic", apiKey: undefined },
    { provider: "google", apiKey: undefined },
  ]);
});

test("defaultStreamFn defaults to pi-ai's streamSimple (real faux provider registered in pi-ai)", async () => {
  const pi = await import("@mariozechner/pi-ai");
  const registration = pi.registerFauxProvider({ provider: "anthropic" });
  try {
    registration.setResponses([pi.fauxAssistantMessage("from pi-ai")]);
    const events = [];
    const message = await callModel({
      model: registration.getModel(),
      context: { messages: [{ role: "user", content: "hi", timestamp: Date.now() }] },
      streamFn: defaultStreamFn(),
      onEvent: (event) => events.push(event),
    });
    assert.equal(message.content[0].text, "from pi-ai");
    assert.equal(message.stopReason, "stop");
    const deltas = events.filter((e) => e.type === "message_update" && e.assistantMessageEvent.type === "text_delta");
    assert.equal(deltas.map((e) => e.assistantMessageEvent.delta).join(""), "from pi-ai");
  } finally {
    registration.unregister();
  }
});

test("AI SDK language models are detected and become Pi models with a bound transport", async () => {
  const languageModel = new MockLanguageModelV3({
    provider: "anthropic.messages",
    modelId: "claude-haiku-4-5",
    doStream: async () => ({
      stream: new ReadableStream({
        start(controller) {
          for (const part of [
            { type: "text-start", id: "t" },
            { type: "text-delta", id: "t", delta: "bridged" },
            { type: "text-end", id: "t" },
            {
              type: "finish",
              finishReason: { unified: "stop", raw: "end_turn" },
              usage: { inputTokens: { total: 100, noCache: 100 }, outputTokens: { total: 10 } },
            },
          ])
            controller.enqueue(part);
          controller.close();
        },
      }),
    }),
  });
  assert.ok(isAiSdkLanguageModel(languageModel));
  assert.ok(!isAiSdkLanguageModel(fauxModel()));
  const { model, streamFn, source } = await resolveModelCall(auto(), { model: languageModel }, noCreds);
  assert.equal(source, "ai-sdk");
  assert.equal(model.api, "ai-sdk");
  assert.equal(model.provider, "anthropic");
  assert.equal(model.id, "claude-haiku-4-5");
  assert.deepEqual(model.cost, getModel("anthropic", "claude-haiku-4-5").cost, "catalog fields borrowed when known");
  assert.equal(model[AI_SDK_LANGUAGE_MODEL], languageModel);
  assert.ok(!Object.keys(model).includes(String(AI_SDK_LANGUAGE_MODEL)));
  const message = await callModel({ model, context: { messages: [] }, streamFn });
  assert.equal(message.content[0].text, "bridged");
  assert.equal(message.provider, "anthropic");
  assert.ok(message.usage.cost.total > 0);
  // The same pi model also works through defaultStreamFn (it follows the symbol link).
  const viaDefault = await callModel({ model, context: { messages: [] }, streamFn: defaultStreamFn() });
  assert.equal(viaDefault.content[0].text, "bridged");
  // As the definition model, too; unknown ids get defaults and stay unpriced.
  const other = new MockLanguageModelV3({ provider: "acme.chat", modelId: "m1", doStream: async () => ({ stream: new ReadableStream() }) });
  const fromDefinition = await resolveModel(other, {}, noCreds);
  assert.deepEqual(
    { ...fromDefinition },
    {
      id: "m1",
      name: "m1",
      api: "ai-sdk",
      provider: "acme",
      baseUrl: "",
      reasoning: false,
      input: ["text", "image"],
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
      contextWindow: 128_000,
      maxTokens: 16_384,
    },
  );
  assert.deepEqual({ ...piModelFromAiSdk(other) }, { ...fromDefinition });
});

test("an AI SDK model of an unsupported specification version is refused clearly", async () => {
  const v4 = { specificationVersion: "v4", provider: "x", modelId: "y", doStream: async () => ({}) };
  await assert.rejects(resolveModel(v4, {}), /unsupported AI SDK language model specification "v4"/);
});

test("resolveModelCall: RunOptions.streamFn wins; otherwise the default transport", async () => {
  const streamFn = scriptedStream([{ text: "x" }]);
  const call = await resolveModelCall("anthropic/claude-haiku-4-5", { streamFn });
  assert.equal(call.streamFn, streamFn);
  assert.equal(call.source, "pinned");
  const fallback = await resolveModelCall(fauxModel(), {});
  assert.equal(typeof fallback.streamFn, "function");
  assert.equal(fallback.source, "definition");
  const auto1 = await resolveModelCall(auto(), { rootDir: emptyRoot }, { env: { OPENAI_API_KEY: "o" } });
  assert.equal(auto1.source, "auto:credential");
});
