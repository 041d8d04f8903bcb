// knap shim for the reference's dist/serve-handler.js: re-exports ../lib/serve-handler.mjs.
export * from "../lib/serve-handler.mjs";
