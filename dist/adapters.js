// knap shim for the reference's dist/adapters.js: re-exports ../lib/entry/adapters.mjs.
export * from "../lib/entry/adapters.mjs";
