// knap shim for the reference's dist/tool-policy.js: re-exports ../lib/shell-tools.mjs.
export * from "../lib/shell-tools.mjs";
