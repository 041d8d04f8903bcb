// knap shim for the reference's dist/wire.js: re-exports ../lib/entry/wire.mjs.
export * from "../lib/entry/wire.mjs";
