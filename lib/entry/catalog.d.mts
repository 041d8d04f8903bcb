// `@caveman-ai/agent/catalog` (typings): knap's catalog names (the reference's 21 are not listed
// in the notes knap was built from).
import type { Model } from "../pi-types.mjs";
export type CatalogModelRef = string | { readonly provider: string; readonly id: string };
export interface CatalogPrice { readonly input: number; readonly output: number; readonly cacheRead: number; readonly cacheWrite: number }
export interface CatalogUsage {
  readonly inputTokens?: number; readonly outputTokens?: number; readonly cacheReadTokens?: number; readonly cacheWriteTokens?: number;
  readonly input?: number; readonly output?: number; readonly cacheRead?: number; readonly cacheWrite?: number;
}
/** Where the catalog was generated from (the pi-ai version). */
export declare const CATALOG_SOURCE: string;
export declare function catalogModel(model: CatalogModelRef): Model | undefined;
export declare function catalogModels(provider?: string): Model[];
export declare function catalogProviders(): string[];
/** USD per 1M tokens; undefined for an unpriced model. */
export declare function catalogPrice(model: CatalogModelRef): CatalogPrice | undefined;
export declare function isCatalogPriced(model: CatalogModelRef): boolean;
export declare function catalogContextWindow(model: CatalogModelRef): number | undefined;
export declare function catalogNearest(reference: string, limit?: number): string[];
export declare function catalogCost(model: CatalogModelRef, usage?: CatalogUsage): number | undefined;
