// knap shim for the reference's dist/compaction-api.js: re-exports ../lib/compaction.mjs.
export * from "../lib/compaction.mjs";
