// Budget tracking: a cost per step from the step's token usage and the model's prices, summed
// until `maxUsd`. Prices come from `modelPricing` (highest priority), else OpenRouter's models
// endpoint (fetched once, kept 24 h), else, when that endpoint cannot be reached, the price
// catalog bundled with knap (so a budget works offline; bashkit's fails without the network).
import { readFileSync } from "node:fs";

export const OPENROUTER_MODELS_URL = "https://openrouter.ai/api/v1/models";
export const OPENROUTER_CACHE_TTL_MS = 24 * 60 * 60 * 1000;
const FETCH_TIMEOUT_MS = 10_000;
/** After a failed fetch, the bundled catalog is used without retrying for this long. */
const RETRY_AFTER_FAILURE_MS = 5 * 60 * 1000;

let cache = null; // { url, models, at }
let inflight = null;
let lastFailure = null; // { url, at, error }
let bundled = null;

/** Turns the endpoint's JSON (`{data:[{id, pricing:{prompt, completion, …}, context_length}]}`) into a map. */
export function parseModels(json) {
  const list = json?.data;
  if (!Array.isArray(list)) throw new Error("OpenRouter models response has no data array");
  const models = new Map();
  for (const m of list.slice(0, 10_000)) {
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
    const contextLength = typeof ctx === "number" && Number.isFinite(ctx) && ctx > 0 && ctx <= 10_000_000 ? ctx : 0;
    models.set(String(m.id).toLowerCase(), { pricing, contextLength });
  }
  return models;
}

/**
 * The price catalog bundled with knap, in the OpenRouter endpoint's shape: the `openrouter/*`
 * entries of `lib/catalog/prices.json` (generated from pi-ai's model catalog by
 * `scripts/gen-prices.mjs`, USD per million tokens), so budgets work offline.
 */
export function bundledModels() {
  if (!bundled) {
    const catalog = JSON.parse(readFileSync(new URL("../catalog/prices.json", import.meta.url), "utf8"));
    const perToken = (usdPerMillion) => String((usdPerMillion ?? 0) / 1_000_000);
    const data = Object.entries(catalog.models)
      .filter(([key]) => key.startsWith("openrouter/"))
      .map(([key, price]) => ({
        id: key.slice("openrouter/".length),
        pricing: {
          prompt: perToken(price.input),
          completion: perToken(price.output),
          input_cache_read: perToken(price.cacheRead),
          input_cache_write: perToken(price.cacheWrite),
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

function variants(model) {
  const lower = model.toLowerCase();
  const kebab = lower.replace(/[^a-z0-9]+/g, "-");
  const bare = lower.includes("/") ? lower.slice(lower.lastIndexOf("/") + 1) : lower;
  const bareKebab = bare.replace(/[^a-z0-9]+/g, "-");
  return [...new Set([lower, kebab, bare, bareKebab])];
}

/**
 * PostHog's three-tier model-id matching: (1) exact (case-insensitive, also as kebab-case and
 * without the provider prefix); (2) the longest catalog id contained in the model id
 * (`claude-sonnet-4-5-20250929` → `claude-sonnet-4.5`); (3) the shortest catalog id that contains
 * the model id.
 */
export function findModel(model, map, filter) {
  if (!map || map.size === 0) return undefined;
  const mine = variants(model);
  for (const v of mine) {
    const hit = map.get(v);
    if (hit !== undefined && (!filter || filter(hit))) return hit;
  }
  const entries = [];
  for (const [key, value] of map) if (!filter || filter(value)) entries.push([variants(key), value]);
  let best;
  let bestLen = 0;
  for (const [theirs, value] of entries) {
    for (const m of mine) for (const t of theirs) if (t.length > bestLen && m.includes(t)) [best, bestLen] = [value, t.length];
  }
  if (best !== undefined) return best;
  let reverse;
  let reverseLen = Infinity;
  for (const [theirs, value] of entries) {
    for (const m of mine) for (const t of theirs) if (t.length < reverseLen && t.includes(m)) [reverse, reverseLen] = [value, t.length];
  }
  return reverse;
}

export function getModelContextLength(model, models) {
  return findModel(model, models, (v) => v.contextLength > 0)?.contextLength;
}

/** The cost of one step: ai@6 usage (with cache details) or ai@5 usage (flat). */
export function stepCost(usage, pricing) {
  if (!usage) return 0;
  const d = usage.inputTokenDetails;
  let input;
  if (d && (d.noCacheTokens != null || d.cacheReadTokens != null || d.cacheWriteTokens != null)) {
    input =
      (d.noCacheTokens ?? 0) * pricing.inputPerToken +
      (d.cacheReadTokens ?? 0) * (pricing.cacheReadPerToken ?? pricing.inputPerToken) +
      (d.cacheWriteTokens ?? 0) * (pricing.cacheWritePerToken ?? pricing.inputPerToken);
  } else if (usage.cachedInputTokens != null) {
    const cachedTokens = usage.cachedInputTokens;
    input = Math.max(0, (usage.inputTokens ?? 0) - cachedTokens) * pricing.inputPerToken + cachedTokens * (pricing.cacheReadPerToken ?? pricing.inputPerToken);
  } else {
    input = (usage.inputTokens ?? 0) * pricing.inputPerToken;
  }
  return input + (usage.outputTokens ?? 0) * pricing.outputPerToken;
}

/**
 * `{ onStepFinish(step), stopWhen, getStatus() }`. Wire it into a loop with
 * `stopWhen: [stepCountIs(n), budget.stopWhen]` and `onStepFinish: (s) => budget.onStepFinish(s)`.
 * `getStatus()` → `{ totalCostUsd, maxUsd, remainingUsd, usagePercent (0-100), stepsCompleted, exceeded, unpricedSteps }`.
 */
export function createBudgetTracker(maxUsd, options = {}) {
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
