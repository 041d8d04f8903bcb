// knap shim for the reference's dist/serve.js: re-exports ../lib/serve.mjs.
export * from "../lib/serve.mjs";
