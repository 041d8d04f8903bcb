// knap shim for the reference's dist/durable-sql-store.js: re-exports ../lib/durable.mjs.
export * from "../lib/durable.mjs";
