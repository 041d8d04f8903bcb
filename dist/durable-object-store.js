// knap shim for the reference's dist/durable-object-store.js (ObjectDurableStore): re-exports ../lib/durable.mjs.
export * from "../lib/durable.mjs";
