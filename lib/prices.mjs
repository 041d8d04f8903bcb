// The bundled price catalog (lib/catalog/prices.json, generated from pi-ai's model catalog by
// scripts/gen-prices.mjs). The Rust kernel embeds the same file; this is the JS view of it.
import { readFileSync } from "node:fs";

let catalog;

/** `{ version: 1, source, models: { "<provider>/<id>": { input, output, cacheRead, cacheWrite } } }` (USD per 1M tokens). */
export function priceCatalog() {
  catalog ??= JSON.parse(readFileSync(new URL("./catalog/prices.json", import.meta.url), "utf8"));
  return catalog;
}

/** The list prices of `provider/id`, or `undefined` when the model is unpriced. */
export function priceOf(provider, id) {
  const row = priceCatalog().models[`${provider}/${id}`];
  return row ? { ...row } : undefined;
}

/**
 * Estimated USD of one call from pi usage counts (`input` excludes cache reads and writes, as pi
 * reports it), or `undefined` for an unpriced model. Reasoning tokens are billed inside `output`.
 */
export function estimateCostUsd(provider, id, usage) {
  const row = priceOf(provider, id);
  if (!row) return undefined;
  const n = (value) => (typeof value === "number" && Number.isFinite(value) ? value : 0);
  return (
    (row.input * n(usage?.input) +
      row.output * n(usage?.output) +
      row.cacheRead * n(usage?.cacheRead) +
      row.cacheWrite * n(usage?.cacheWrite)) /
    1_000_000
  );
}
