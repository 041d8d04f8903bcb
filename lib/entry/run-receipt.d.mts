// `@caveman-ai/agent/run-receipt` (typings).
export { AGENT_RUN_RECEIPT_SCHEMA, defineRunReceipt, validateRunReceipt } from "../surface.mjs";
