// knap shim for the reference's dist/durable-stores.js (DiskDurableStore, HttpDurableStore): re-exports ../lib/durable.mjs.
export * from "../lib/durable.mjs";
