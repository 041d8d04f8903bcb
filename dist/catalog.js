// knap shim for the reference's dist/catalog.js: re-exports ../lib/catalog.mjs.
export * from "../lib/catalog.mjs";
