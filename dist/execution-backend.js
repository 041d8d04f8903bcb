export * from "../lib/execution-backend.mjs";
