// Budget tracking: a cost per step from the step's token usage and the model's prices, summed
// until `maxUsd`. Prices come from `modelPricing` (highest priority), else OpenRouter's models
// endpoint (fetched once, kept 24 h), else, when that endpoint cannot be reached, the price
// catalog of knap's core (so a budget works offline; bashkit's fails without the network).
// Model-id matching and the cost of a step are the core's (knap_core::catalog), through the binding.
import { native } from "../native.mjs";

import { LIMITS } from "./native.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";

export const OPENROUTER_MODELS_URL = "https://openrouter.ai/api/v1/models";
export const OPENROUTER_CACHE_TTL_MS = LIMITS.openrouterCacheTtlMs;
const FETCH_TIMEOUT_MS = LIMITS.openrouterFetchTimeoutMs;
/** After a failed fetch, the bundled catalog is used without retrying for this long. */
const RETRY_AFTER_FAILURE_MS = LIMITS.openrouterRetryAfterMs;

let cache = null; // { url, models, at }
let inflight = null;
let lastFailure = null; // { url, at, error }
let bundled = null;

/** Turns the endpoint's JSON (`{data:[{id, pricing:{prompt, completion, …}, context_length}]}`) into a map. */
export function parseModels(json) {
  const list = json?.data;
  if (!Array.isArray(list)) throw new Error("OpenRouter models response has no data array");
  const models = new Map();
  for (const m of list.slice(0, LIMITS.openrouterMaxModels)) {
    if (!m?.id || !m.pricing) continue;
    const prompt = Number.parseFloat(m.pricing.prompt ?? "");
    const completion = Number.parseFloat(m.pricing.completion ?? "");
    if (!Number.isFinite(prompt) || !Number.isFinite(completion) || prompt < 0 || completion < 0) continue;
    const pricing = { inputPerToken: prompt, outputPerToken: completion };
    const read = Number.parseFloat(m.pricing.input_cache_read ?? "");
    if (Number.isFinite(read) && read >= 0) pricing.cacheReadPerToken = read;
    const write = Number.parseFloat(m.pricing.input_cache_write ?? "");
    if (Number.isFinite(write) && write >= 0) pricing.cacheWritePerToken = write;
    const ctx = m.context_length;
    const contextLength = typeof ctx === "number" && Number.isFinite(ctx) && ctx > 0 && ctx <= LIMITS.openrouterMaxContext ? ctx : 0;
    models.set(String(m.id).toLowerCase(), { pricing, contextLength });
  }
  return models;
}

/**
 * The catalog of knap's core in the OpenRouter endpoint's shape: its `openrouter/*` models
 * (generated from pi-ai's model catalog by `scripts/gen-catalog.mjs`), with their prices and
 * context lengths, so budgets work offline.
 */
export function bundledModels() {
  if (!bundled) {
    const perToken = (usdPerMillion) => String((usdPerMillion ?? 0) / 1_000_000);
    const data = native
      .catalogModels("openrouter")
      .filter((m) => native.catalogPrice(m.provider, m.id))
      .map((m) => ({
        id: m.id,
        context_length: m.contextWindow,
        pricing: {
          prompt: perToken(m.cost.input),
          completion: perToken(m.cost.output),
          input_cache_read: perToken(m.cost.cacheRead),
          input_cache_write: perToken(m.cost.cacheWrite),
        },
      }));
    bundled = parseModels({ data });
  }
  return tag(new Map(bundled), "bundled");
}

function tag(map, source) {
  Object.defineProperty(map, "source", { value: source, enumerable: false, configurable: true });
  return map;
}

/**
 * OpenRouter's model registry as `Map<id, {pricing, contextLength}>`, with a non-enumerable
 * `source`: `"openrouter"` (fetched or cached) or `"bundled"` (the endpoint could not be reached;
 * `fallback: false` makes that an error instead). The URL can be changed with `url` or
 * `KNAP_OPENROUTER_MODELS_URL`.
 */
export async function fetchOpenRouterModels(apiKey, options = {}) {
  refuseUnknownKeys("fetchOpenRouterModels", options, ["url", "fallback", "timeoutMs"]);
  const url = options.url ?? process.env.KNAP_OPENROUTER_MODELS_URL ?? OPENROUTER_MODELS_URL;
  const fallback = options.fallback !== false;
  if (cache && cache.url === url && Date.now() - cache.at < OPENROUTER_CACHE_TTL_MS) return tag(new Map(cache.models), "openrouter");
  if (lastFailure && lastFailure.url === url && Date.now() - lastFailure.at < RETRY_AFTER_FAILURE_MS) {
    if (fallback) return bundledModels();
    throw lastFailure.error;
  }
  if (!inflight) {
    inflight = (async () => {
      try {
        const headers = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
        const res = await fetch(url, { headers, signal: AbortSignal.timeout(options.timeoutMs ?? FETCH_TIMEOUT_MS) });
        if (!res.ok) throw new Error(`OpenRouter models fetch failed: HTTP ${res.status} ${res.statusText}`);
        const models = parseModels(await res.json());
        cache = { url, models, at: Date.now() };
        lastFailure = null;
        return models;
      } catch (error) {
        lastFailure = { url, at: Date.now(), error: error instanceof Error ? error : new Error(String(error)) };
        throw lastFailure.error;
      } finally {
        inflight = null;
      }
    })();
  }
  try {
    return tag(new Map(await inflight), "openrouter");
  } catch (error) {
    if (fallback) return bundledModels();
    throw error;
  }
}

/** Forgets the fetched registry and any remembered failure (for tests and long-lived hosts). */
export function resetModelRegistryCache() {
  cache = null;
  lastFailure = null;
}

/**
 * PostHog's three-tier model-id matching (knap_core::catalog::match_model_id): (1) exact
 * (case-insensitive, also as kebab-case and without the provider prefix); (2) the longest id in
 * `map` contained in the model id (`claude-sonnet-4-5-20250929` → `claude-sonnet-4.5`); (3) the
 * shortest id in `map` that contains the model id. `filter` narrows the candidates first.
 */
export function findModel(model, map, filter) {
  if (!map || map.size === 0) return undefined;
  const keys = [];
  const values = [];
  for (const [key, value] of map) {
    if (filter && !filter(value)) continue;
    keys.push(String(key));
    values.push(value);
  }
  if (keys.length === 0) return undefined;
  const i = native.matchModelId(String(model), keys);
  return i === null || i === undefined ? undefined : values[i];
}

export function getModelContextLength(model, models) {
  return findModel(model, models, (v) => v.contextLength > 0)?.contextLength;
}

const count = (v) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
const rate = (v) => (typeof v === "number" ? v : undefined);

/** The cost of one step: ai@6 usage (with cache details) or ai@5 usage (flat). */
export function stepCost(usage, pricing) {
  if (!usage) return 0;
  const d = usage.inputTokenDetails;
  return native.stepCostUsd(
    {
      inputTokens: count(usage.inputTokens),
      outputTokens: count(usage.outputTokens),
      noCacheTokens: d?.noCacheTokens == null ? undefined : count(d.noCacheTokens) ?? 0,
      cacheReadTokens: d?.cacheReadTokens == null ? undefined : count(d.cacheReadTokens) ?? 0,
      cacheWriteTokens: d?.cacheWriteTokens == null ? undefined : count(d.cacheWriteTokens) ?? 0,
      cachedInputTokens: usage.cachedInputTokens == null ? undefined : count(usage.cachedInputTokens) ?? 0,
    },
    {
      inputPerToken: rate(pricing.inputPerToken) ?? 0,
      outputPerToken: rate(pricing.outputPerToken) ?? 0,
      cacheReadPerToken: rate(pricing.cacheReadPerToken),
      cacheWritePerToken: rate(pricing.cacheWritePerToken),
    },
  );
}

/**
 * `{ onStepFinish(step), stopWhen, getStatus() }`. Wire it into a loop with
 * `stopWhen: [stepCountIs(n), budget.stopWhen]` and `onStepFinish: (s) => budget.onStepFinish(s)`.
 * `getStatus()` → `{ totalCostUsd, maxUsd, remainingUsd, usagePercent (0-100), stepsCompleted, exceeded, unpricedSteps }`.
 */
export function createBudgetTracker(maxUsd, options = {}) {
  refuseUnknownKeys("createBudgetTracker", options, ["modelPricing", "openRouterPricing", "onUnpricedModel"]);
  if (!(typeof maxUsd === "number" && maxUsd > 0)) throw new Error(`[knap] maxUsd must be a positive number, got ${maxUsd}`);
  const overrides = options.modelPricing ? new Map(Object.entries(options.modelPricing).map(([k, v]) => [k.toLowerCase(), v])) : undefined;
  const registry = options.openRouterPricing;
  const warned = new Set();
  const memo = new Map();
  let total = 0;
  let steps = 0;
  let unpriced = 0;
  const priceOf = (modelId) => {
    if (memo.has(modelId)) return memo.get(modelId);
    let p = overrides ? findModel(modelId, overrides) : undefined;
    if (!p && registry) p = findModel(modelId, registry);
    if (p && p.pricing) p = p.pricing;
    if (!p && !warned.has(modelId.toLowerCase())) {
      warned.add(modelId.toLowerCase());
      if (!options.onUnpricedModel) console.warn(`[knap] No pricing found for model "${modelId}". Cost will not be tracked for this step.`);
    }
    memo.set(modelId, p);
    return p;
  };
  const tracker = {
    onStepFinish(step) {
      steps++;
      const modelId = step?.response?.modelId ?? step?.model?.modelId;
      const pricing = modelId ? priceOf(modelId) : undefined;
      if (!pricing) {
        unpriced++;
        if (modelId) options.onUnpricedModel?.(modelId);
        return;
      }
      total += stepCost(step.usage, pricing);
    },
    stopWhen() {
      return total >= maxUsd;
    },
    getStatus() {
      return {
        totalCostUsd: total,
        maxUsd,
        remainingUsd: Math.max(0, maxUsd - total),
        usagePercent: (total / maxUsd) * 100,
        stepsCompleted: steps,
        exceeded: total >= maxUsd,
        unpricedSteps: unpriced,
      };
    },
  };
  return tracker;
}
