// knap shim for the reference's dist/definition.js: re-exports ../lib/definition.mjs.
export * from "../lib/definition.mjs";
