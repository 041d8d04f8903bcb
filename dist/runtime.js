// knap shim for the reference's dist/runtime.js: re-exports ../lib/run.mjs.
export * from "../lib/run.mjs";
