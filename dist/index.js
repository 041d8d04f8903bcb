// knap shim for the reference's dist/index.js: re-exports ../lib/index.mjs.
export * from "../lib/index.mjs";
