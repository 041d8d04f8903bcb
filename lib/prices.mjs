// The model catalog of knap's core (crates/knap-core/catalog/models.json, generated from pi-ai's
// catalog by scripts/gen-catalog.mjs), read through the binding: the Rust kernel's budgets and
// these helpers price from the same table.
import { native } from "./native.mjs";

let catalog;

/** `{ version: 1, source, models: { "<provider>/<id>": { input, output, cacheRead, cacheWrite } } }` (USD per 1M tokens, priced models only). */
export function priceCatalog() {
  if (!catalog) {
    const models = {};
    for (const m of native.catalogModels()) {
      const price = native.catalogPrice(m.provider, m.id);
      if (price) models[`${m.provider}/${m.id}`] = price;
    }
    catalog = { version: 1, source: native.catalogSource(), models };
  }
  return catalog;
}

/** The list prices of `provider/id`, or `undefined` when the model is unpriced. */
export function priceOf(provider, id) {
  return native.catalogPrice(String(provider), String(id)) ?? undefined;
}

/**
 * Estimated USD of one call from pi usage counts (`input` excludes cache reads and writes, as pi
 * reports it), or `undefined` for an unpriced model. Reasoning tokens are billed inside `output`.
 */
export function estimateCostUsd(provider, id, usage) {
  const n = (value) => (typeof value === "number" && Number.isFinite(value) ? value : undefined);
  return (
    native.catalogCostUsd(String(provider), String(id), {
      input: n(usage?.input),
      output: n(usage?.output),
      cacheRead: n(usage?.cacheRead),
      cacheWrite: n(usage?.cacheWrite),
    }) ?? undefined
  );
}

/** The catalog's Pi `Model` for `provider/id` (a fresh object), or `undefined`. */
export function catalogModel(provider, id) {
  return native.catalogModel(String(provider), String(id)) ?? undefined;
}

/** Every catalog model (of one provider when given), as Pi `Model` objects. */
export function catalogModels(provider) {
  return native.catalogModels(provider === undefined ? undefined : String(provider));
}

/** The providers of the catalog, sorted. */
export function catalogProviders() {
  return native.catalogProviders();
}

/** The context window of `provider/id` in tokens, or `undefined`. */
export function contextWindowOf(provider, id) {
  return native.catalogContextWindow(String(provider), String(id)) ?? undefined;
}

/** Up to `limit` (default 3) catalog `provider/id` keys close to `reference`, for "did you mean". */
export function nearestModels(reference, limit = 3) {
  return native.catalogNearest(String(reference), limit);
}
