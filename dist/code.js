// Re-export shim named like the reference's dist file (`@caveman-ai/agent/dist/code.js`).
export * from "../lib/code.mjs";
