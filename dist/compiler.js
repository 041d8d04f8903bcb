// knap shim for the reference's dist/compiler.js: re-exports ../lib/entry/compiler.mjs.
export * from "../lib/entry/compiler.mjs";
