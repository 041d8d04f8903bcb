// knap shim for the reference's dist/build.js: re-exports ../lib/entry/build.mjs.
export * from "../lib/entry/build.mjs";
