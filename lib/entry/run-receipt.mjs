// `@caveman-ai/agent/run-receipt`.
export { AGENT_RUN_RECEIPT_SCHEMA, defineRunReceipt, validateRunReceipt } from "../receipt.mjs";
