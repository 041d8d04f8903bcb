// knap shim for the reference's dist/memory-api.js: re-exports ../lib/entry/memory.mjs.
export * from "../lib/entry/memory.mjs";
