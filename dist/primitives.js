// knap shim for the reference's dist/primitives.js: re-exports ../lib/definition.mjs.
export * from "../lib/definition.mjs";
