// knap shim for the reference's dist/model-boundary.js: re-exports ../lib/entry/model-boundary.mjs.
export * from "../lib/entry/model-boundary.mjs";
