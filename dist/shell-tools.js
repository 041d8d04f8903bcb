// knap shim for the reference's dist/shell-tools.js: re-exports ../lib/shell-tools.mjs.
export * from "../lib/shell-tools.mjs";
