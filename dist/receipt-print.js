// knap shim for the reference's dist/receipt-print.js: re-exports ../lib/receipt.mjs.
export * from "../lib/receipt.mjs";
