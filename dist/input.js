// knap shim for the reference's dist/input.js: re-exports ../lib/input.mjs.
export * from "../lib/input.mjs";
