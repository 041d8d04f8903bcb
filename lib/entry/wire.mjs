// `@caveman-ai/agent/wire`: the engine's context IR wire form (throws `cave_context_ir_unsupported`).
export { contextIRToWire, contextIRFromWire, opaquePayload, sha256, stableStringify } from "../index.mjs";
