// knap shim for the reference's dist/connect.js: re-exports ../lib/entry/connect.mjs.
export * from "../lib/entry/connect.mjs";
