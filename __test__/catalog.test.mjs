// The model catalog owned by the core (crates/knap-core/catalog/models.json), read through the
// binding: every pi-ai model resolves to the same Pi Model object, prices and context windows
// come from it, and "did you mean" suggests catalog keys.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as pi from "@mariozechner/pi-ai";
import {
  catalogModel,
  catalogModels,
  catalogProviders,
  contextWindowOf,
  estimateCostUsd,
  nearestModels,
  priceCatalog,
  priceOf,
} from "../lib/prices.mjs";

const PI_FIELDS = ["id", "name", "api", "provider", "baseUrl", "reasoning", "input", "cost", "contextWindow", "maxTokens", "headers", "compat", "thinkingLevelMap"];
const pick = (m) => Object.fromEntries(PI_FIELDS.filter((k) => m[k] !== undefined).map((k) => [k, m[k]]));

test("every pi-ai model resolves from the core's catalog to the same Pi Model", () => {
  let n = 0;
  for (const provider of pi.getProviders()) {
    for (const model of pi.getModels(provider)) {
      assert.deepEqual(catalogModel(model.provider, model.id), pick(model), `${model.provider}/${model.id}`);
      n++;
    }
  }
  assert.equal(catalogModels().length, n);
  assert.deepEqual(catalogProviders(), [...new Set(pi.getProviders())].sort());
  assert.equal(catalogModel("anthropic", "faux-1"), undefined);
  assert.ok(catalogModels("openrouter").every((m) => m.provider === "openrouter"));
  // A fresh object each time: callers may mutate what they get.
  const a = catalogModel("anthropic", "claude-haiku-4-5");
  a.cost.input = 99;
  assert.notEqual(catalogModel("anthropic", "claude-haiku-4-5").cost.input, 99);
});

test("prices and context windows come from the catalog; all-zero prices are unpriced", () => {
  const haiku = pi.getModel("anthropic", "claude-haiku-4-5");
  assert.deepEqual(priceOf("anthropic", "claude-haiku-4-5"), haiku.cost);
  assert.equal(contextWindowOf("anthropic", "claude-haiku-4-5"), haiku.contextWindow);
  assert.equal(contextWindowOf("anthropic", "nope"), undefined);
  const usage = { input: 1000, output: 200, cacheRead: 300, cacheWrite: 40 };
  const c = haiku.cost;
  const expected = (c.input * 1000 + c.output * 200 + c.cacheRead * 300 + c.cacheWrite * 40) / 1e6;
  assert.ok(Math.abs(estimateCostUsd("anthropic", "claude-haiku-4-5", usage) - expected) < 1e-15);
  assert.equal(estimateCostUsd("anthropic", "claude-haiku-4-5", {}), 0);
  const free = catalogModels().find((m) => !m.cost.input && !m.cost.output && !m.cost.cacheRead && !m.cost.cacheWrite);
  assert.equal(priceOf("openrouter", "openrouter/auto"), undefined, "negative (variable) prices are unpriced");
  assert.ok(free, "the catalog keeps free models");
  assert.equal(priceOf(free.provider, free.id), undefined);
  assert.equal(estimateCostUsd(free.provider, free.id, usage), undefined);
  const table = priceCatalog();
  assert.equal(table.version, 1);
  assert.match(table.source, /@mariozechner\/pi-ai@/);
  assert.deepEqual(table.models["anthropic/claude-haiku-4-5"], haiku.cost);
  assert.equal(table.models[`${free.provider}/${free.id}`], undefined);
});

test("nearestModels suggests close catalog keys, closest first", () => {
  assert.equal(nearestModels("anthropic/claude-haiku-4.5")[0], "anthropic/claude-haiku-4-5");
  assert.ok(nearestModels("openai/gpt4o").includes("openai/gpt-4o"));
  assert.deepEqual(nearestModels("zzzzzzzzzzzzzzzzzzzzzzzzzz"), []);
  assert.equal(nearestModels("gpt-4o", 5).length, 5);
});
