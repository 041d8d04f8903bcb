// A `CacheStore` on Redis, for `cache: createRedisCacheStore(client)` (the client package is an
// optional peer: the application passes a connected client in).
import { codedError } from "../native.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";

/**
 * `createRedisCacheStore(client, { prefix = "bashkit:" })`: a `CacheStore` on any Redis client
 * with `get`, `set`, `del`, `keys` (node-redis v4+, ioredis). Entries are JSON; staleness is
 * judged by each entry's timestamp (no Redis TTL), as in bashkit.
 */
export function createRedisCacheStore(client, options = {}) {
  for (const m of ["get", "set", "del", "keys"]) {
    if (typeof client?.[m] !== "function") {
      throw codedError(
        "cave_redis_client_invalid",
        `cave_redis_client_invalid: createRedisCacheStore needs a connected Redis client with get, set, del and keys (missing ${m})\nhint: npm install redis; const client = await createClient({ url }).connect()`,
      );
    }
  }
  refuseUnknownKeys("createRedisCacheStore", options, ["prefix"]);
  const prefix = options.prefix ?? "bashkit:";
  const all = () => client.keys(`${prefix}*`);
  return {
    async get(key) {
      const data = await client.get(prefix + key);
      return data ? JSON.parse(data) : undefined;
    },
    async set(key, entry) {
      await client.set(prefix + key, JSON.stringify(entry));
    },
    async delete(key) {
      await client.del(prefix + key);
    },
    async clear() {
      const keys = await all();
      if (keys.length) await client.del(keys);
    },
    size: async () => (await all()).length,
  };
}
