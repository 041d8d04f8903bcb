// `@caveman-ai/agent/cache-engine`: the cache planner of the Caveman engine (throws `cave_cache_engine_unsupported`).
import { unsupported } from "../unsupported.mjs";
export const planCache = unsupported("cache_engine", "planCache", "the Caveman cache planner");
export const createCachePlanner = unsupported("cache_engine", "createCachePlanner", "the Caveman cache planner");
