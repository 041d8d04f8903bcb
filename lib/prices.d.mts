import type { Model } from "./pi-types.mjs";

export interface ModelPrice { input: number; output: number; cacheRead: number; cacheWrite: number }
export interface PriceCatalog { version: 1; source: string; models: Record<string, ModelPrice> }
export declare function priceCatalog(): PriceCatalog;
export declare function priceOf(provider: string, id: string): ModelPrice | undefined;
export declare function estimateCostUsd(provider: string, id: string, usage: { input?: number; output?: number; cacheRead?: number; cacheWrite?: number }): number | undefined;
export declare function catalogModel(provider: string, id: string): Model | undefined;
export declare function catalogModels(provider?: string): Model[];
export declare function catalogProviders(): string[];
export declare function contextWindowOf(provider: string, id: string): number | undefined;
export declare function nearestModels(reference: string, limit?: number): string[];
