// knap shim for the reference's dist/run-controller.js: re-exports ../lib/run-controller.mjs.
export * from "../lib/run-controller.mjs";
