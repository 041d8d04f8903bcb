// knap shim for the reference's dist/agent-environment.js: re-exports ../lib/plugins.mjs.
export * from "../lib/plugins.mjs";
