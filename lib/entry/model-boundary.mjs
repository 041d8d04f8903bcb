// `@caveman-ai/agent/model-boundary`: needs the Caveman gateway's model boundary (throws).
export {
  createModelBoundary,
  captureModelBoundary,
  MODEL_BOUNDARY_MAX_CONTEXT_STRING_LENGTH,
  MODEL_BOUNDARY_MAX_ID_LENGTH,
  MODEL_BOUNDARY_MAX_MIDDLEWARE,
} from "../unsupported.mjs";
