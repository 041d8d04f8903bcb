// knap shim for the reference's dist/claude.js: re-exports ../lib/entry/claude.mjs.
export * from "../lib/entry/claude.mjs";
