// `@caveman-ai/agent/catalog`: knap's model catalog (in the core: every `"provider/id"` with its
// Pi `Model` fields, list prices and context window) and what can be computed from it.
import { native, codedError } from "./native.mjs";

export const CATALOG_SOURCE = native.catalogSource();

function split(ref) {
  if (typeof ref === "string") {
    const i = ref.indexOf("/");
    if (i <= 0 || i === ref.length - 1) throw new Error("caveman agent: pinned model must use provider/model format");
    return [ref.slice(0, i), ref.slice(i + 1)];
  }
  if (ref && typeof ref === "object" && typeof ref.provider === "string" && typeof ref.id === "string") return [ref.provider, ref.id];
  throw codedError("cave_catalog_model_invalid", 'cave_catalog_model_invalid: a model is "provider/id" or {provider, id}');
}

/** The catalog entry (a Pi `Model`) of `"provider/id"`, or undefined. */
export function catalogModel(model) {
  const [provider, id] = split(model);
  return native.catalogModel(provider, id) ?? undefined;
}

/** Every cataloged model (optionally of one provider), sorted by `provider/id`. */
export function catalogModels(provider) {
  return native.catalogModels(provider);
}

export function catalogProviders() {
  return native.catalogProviders();
}

/** The list prices (USD per 1M tokens) of a model, or undefined when it is not priced. */
export function catalogPrice(model) {
  const [provider, id] = split(model);
  const p = native.catalogPrice(provider, id);
  return p ? Object.freeze(p) : undefined;
}

export function isCatalogPriced(model) {
  return catalogPrice(model) !== undefined;
}

/** The model's context window in tokens, or undefined. */
export function catalogContextWindow(model) {
  const [provider, id] = split(model);
  return native.catalogContextWindow(provider, id) ?? undefined;
}

/** Up to `limit` cataloged `provider/id`s close to `reference` ("did you mean"). */
export function catalogNearest(reference, limit) {
  return native.catalogNearest(String(reference), limit);
}

/**
 * `catalogCost(model, usage)`: the list-price USD of one call's usage
 * (`{inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}` or pi's `{input, output, cacheRead, cacheWrite}`),
 * or undefined for an unpriced model.
 */
export function catalogCost(model, usage = {}) {
  const [provider, id] = split(model);
  const n = (v) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return (
    native.catalogCostUsd(provider, id, {
      input: n(usage.inputTokens ?? usage.input),
      output: n(usage.outputTokens ?? usage.output),
      cacheRead: n(usage.cacheReadTokens ?? usage.cacheRead),
      cacheWrite: n(usage.cacheWriteTokens ?? usage.cacheWrite),
    }) ?? undefined
  );
}
