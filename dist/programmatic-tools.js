// Re-export shim named like the reference's dist file (`@caveman-ai/agent/dist/programmatic-tools.js`).
export * from "../lib/programmatic-tools.mjs";
