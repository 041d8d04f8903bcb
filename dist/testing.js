// knap shim for the reference's dist/testing.js: re-exports ../lib/testing.mjs.
export * from "../lib/testing.mjs";
