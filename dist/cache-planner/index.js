// knap shim for the reference's dist/cache-planner/index.js.
export * from "../../lib/entry/cache-engine.mjs";
