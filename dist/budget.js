// knap shim for the reference's dist/budget.js: re-exports ../lib/budget-controller.mjs.
export * from "../lib/budget-controller.mjs";
