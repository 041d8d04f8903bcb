// knap shim for the reference's dist/compaction-api.js: re-exports ../lib/entry/compaction.mjs (knap/compaction).
export * from "../lib/entry/compaction.mjs";
