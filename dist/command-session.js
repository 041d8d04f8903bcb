export * from "../lib/command-session.mjs";
