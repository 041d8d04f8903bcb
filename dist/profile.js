// knap shim for the reference's dist/profile.js: re-exports ../lib/entry/profile.mjs.
export * from "../lib/entry/profile.mjs";
