// Tool-result caching: an LRU store with a TTL, `cached(tool, name, options)`, and (unlike
// bashkit) invalidation: a cache built by `createAgentTools` shares one invalidation log with the
// tools that write (Write, Edit, Patch, Bash). Every entry remembers the sequence number of the
// log when its call started and the paths its result depends on; an entry is served only if no
// write logged since then touched those paths (Bash touches everything). A result computed while
// a write was in flight is therefore never served either.

import { LIMITS, native } from "./native.mjs";
import { debugCacheHit } from "../debug.mjs";
import { didYouMean, refuseUnknownKeys } from "../config-keys.mjs";
import { codedError } from "../native.mjs";

export const DEFAULT_TTL_MS = LIMITS.cacheTtlMs;
export const DEFAULT_CACHED_TOOLS = ["Read", "Glob", "Grep", "WebFetch", "WebSearch"];

/** In-memory LRU: `get` refreshes recency, `set` evicts the least recently used when full. */
export class LRUCacheStore {
  constructor(maxSize = LIMITS.cacheMaxEntries) {
    this.maxSize = maxSize;
    this.cache = new Map();
  }
  get(key) {
    const entry = this.cache.get(key);
    if (entry !== undefined) {
      this.cache.delete(key);
      this.cache.set(key, entry);
    }
    return entry;
  }
  set(key, entry) {
    if (this.cache.has(key)) this.cache.delete(key);
    else if (this.cache.size >= this.maxSize) {
      const oldest = this.cache.keys().next();
      if (!oldest.done) this.cache.delete(oldest.value);
    }
    this.cache.set(key, entry);
  }
  delete(key) {
    this.cache.delete(key);
  }
  clear() {
    this.cache.clear();
  }
  size() {
    return this.cache.size;
  }
}

/**
 * Canonical JSON of a call's parameters (keys sorted at every level; bashkit's key dropped
 * nested keys), from the core. What JSON drops (undefined, functions) is dropped here too.
 */
export function stableStringify(value) {
  return native.canonicalJson(JSON.stringify(value) ?? "null");
}

export function defaultKeyGenerator(toolName, params) {
  return `${toolName}:${stableStringify(params)}`;
}

const MAX_EVENTS = LIMITS.cacheLogMaxEvents;

/**
 * The invalidation log shared by one tool set. `invalidate(paths)` logs a write of those
 * absolute paths, `invalidateAll()` a write of anything; `isStale(entry)` tells whether a logged
 * write overlaps an entry's dependencies since the entry's call started.
 */
export function createInvalidationLog() {
  const id = `${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  let seq = 0;
  let watermark = 0; // entries started before this are stale (log overflow, or clear)
  const events = []; // { seq, paths: string[] | null (everything), at }
  let maxTtl = DEFAULT_TTL_MS;

  const prune = () => {
    const horizon = Date.now() - maxTtl;
    while (events.length && events[0].at < horizon) events.shift();
    while (events.length > MAX_EVENTS) watermark = Math.max(watermark, events.shift().seq);
  };
  const overlaps = (deps, written) => {
    for (const d of deps) {
      for (const w of written) {
        if (d === w || w.startsWith(d === "/" ? "/" : `${d}/`) || d.startsWith(`${w}/`)) return true;
      }
    }
    return false;
  };
  return {
    id,
    noteTtl(ttl) {
      if (Number.isFinite(ttl) && ttl > maxTtl) maxTtl = ttl;
    },
    /** The sequence number a call starting now records. */
    begin: () => seq,
    invalidate(paths) {
      seq += 1;
      events.push({ seq, paths: paths.filter(Boolean), at: Date.now() });
      prune();
    },
    invalidateAll() {
      seq += 1;
      events.push({ seq, paths: null, at: Date.now() });
      prune();
    },
    isStale(entry) {
      if (events.length === 0 && watermark === 0) return false;
      // A result that depends on no file (WebFetch, WebSearch) is not made stale by writes.
      if (entry.log === id && Array.isArray(entry.deps) && entry.deps.length === 0) return false;
      const started = entry.log === id && typeof entry.seq === "number" ? entry.seq : -1;
      if (started < watermark) return true;
      for (let i = events.length - 1; i >= 0; i--) {
        const e = events[i];
        if (e.seq <= started) break;
        if (e.paths === null) return true;
        if (!entry.deps || overlaps(entry.deps, e.paths)) return true;
      }
      return false;
    },
  };
}

const INTERNAL = Symbol.for("knap.aiSdk.cacheInternal");

/**
 * Wraps a tool so identical calls within `ttl` (default 5 minutes) return the stored result.
 * Results with an `error` property are not stored. The wrapped tool gains `getStats()`
 * (`{ hits, misses, hitRate, size }`; a plain object with a synchronous store such as the
 * default LRU, else a Promise) and `clearCache(key?)`.
 *
 * @param options `{ ttl, store, keyGenerator, debug, onHit, onMiss }`
 */
const CACHE_OPTIONS = ["store", "ttl", "debug", "onHit", "onMiss", "keyGenerator"];

export function cached(tool, toolName, options = {}) {
  refuseUnknownKeys("cached", options, CACHE_OPTIONS);
  const ttl = options.ttl ?? DEFAULT_TTL_MS;
  const store = options.store ?? new LRUCacheStore();
  const keyOf = options.keyGenerator ?? defaultKeyGenerator;
  const log = options.debug ? (...a) => console.log(...a) : null;
  const { onHit, onMiss } = options;
  const internal = options[INTERNAL];
  const invalidation = internal?.log;
  const depsOf = internal?.deps;
  invalidation?.noteTtl(ttl);
  let hits = 0;
  let misses = 0;
  const inner = tool.execute;
  const wrapped = {
    ...tool,
    async execute(params, execOptions) {
      const key = keyOf(toolName, params);
      let entry = store.get(key);
      if (entry !== undefined && typeof entry.then === "function") entry = await entry;
      if (entry && Date.now() - entry.timestamp < ttl && !(invalidation && invalidation.isStale(entry))) {
        hits++;
        log?.(`[Cache] HIT ${toolName}:${key.slice(-8)}`);
        onHit?.(toolName, key);
        debugCacheHit(toolName, key);
        return entry.result;
      }
      misses++;
      log?.(`[Cache] MISS ${toolName}:${key.slice(-8)}`);
      onMiss?.(toolName, key);
      if (!inner) throw new Error(`Tool ${toolName} has no execute function`);
      const started = invalidation ? invalidation.begin() : 0;
      const timestamp = Date.now();
      const result = await inner(params, execOptions);
      if (result && typeof result === "object" && !("error" in result)) {
        const stored = { result, timestamp };
        if (invalidation) {
          stored.log = invalidation.id;
          stored.seq = started;
          const deps = await depsOf?.(params, result);
          if (deps) stored.deps = deps;
        }
        await store.set(key, stored);
        log?.(`[Cache] STORED ${toolName}:${key.slice(-8)}`);
      }
      return result;
    },
    getStats() {
      const total = hits + misses;
      const make = (size) => ({ hits, misses, hitRate: total > 0 ? hits / total : 0, size: size ?? 0 });
      const size = store.size?.();
      return size !== null && typeof size === "object" && typeof size.then === "function" ? size.then(make) : make(size);
    },
    async clearCache(key) {
      if (key) await store.delete(key);
      else await store.clear();
    },
  };
  return wrapped;
}

export { INTERNAL as CACHE_INTERNAL };

/** `cache: true | CacheStore | CacheConfig` → `{ store, ttl, debug, onHit, onMiss, keyGenerator, enabled }`. */
export function resolveCacheConfig(config) {
  if (!config) return null;
  const base = { ttl: DEFAULT_TTL_MS, debug: false, enabled: new Set(DEFAULT_CACHED_TOOLS) };
  if (config === true) return { ...base, store: new LRUCacheStore() };
  const isStore = ["get", "set", "delete", "clear"].every((m) => typeof config[m] === "function");
  if (isStore) return { ...base, store: config };
  const enabled = new Set(DEFAULT_CACHED_TOOLS);
  for (const [key, value] of Object.entries(config)) {
    if (CACHE_OPTIONS.includes(key)) continue;
    // Any other key names a tool, turned on or off; a key with another value is a misspelled option.
    if (value === true) enabled.add(key);
    else if (value === false) enabled.delete(key);
    else if (value !== undefined) {
      throw codedError(
        "cave_config_unknown_key",
        `cave_config_unknown_key: createAgentTools cache does not know the option ${JSON.stringify(key)}\nhint: ${didYouMean(key, CACHE_OPTIONS)}the options are ${CACHE_OPTIONS.join(", ")}, and a tool name set to true or false`,
      );
    }
  }
  return {
    store: config.store ?? new LRUCacheStore(),
    ttl: config.ttl ?? DEFAULT_TTL_MS,
    debug: config.debug ?? false,
    onHit: config.onHit,
    onMiss: config.onMiss,
    keyGenerator: config.keyGenerator,
    enabled,
  };
}
