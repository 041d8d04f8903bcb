// knap shim for the reference's dist/durable.js: re-exports ../lib/durable.mjs.
export * from "../lib/durable.mjs";
