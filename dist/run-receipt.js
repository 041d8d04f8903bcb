// knap shim for the reference's dist/run-receipt.js: re-exports ../lib/entry/run-receipt.mjs.
export * from "../lib/entry/run-receipt.mjs";
