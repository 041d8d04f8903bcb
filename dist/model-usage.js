// knap shim for the reference's dist/model-usage.js: re-exports ../lib/model-usage.mjs.
export * from "../lib/model-usage.mjs";
