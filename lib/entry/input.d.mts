// `@caveman-ai/agent/input` (typings: the same declarations as the root's).
export {
  AGENT_INPUT_MAX_PARTS, AGENT_INPUT_MAX_TEXT_BYTES, AGENT_INPUT_MAX_BASE64_BYTES_PER_PART, AGENT_INPUT_MAX_BASE64_BYTES_TOTAL,
  AGENT_INPUT_MAX_URL_LENGTH, AGENT_INPUT_MAX_MIME_LENGTH, AGENT_INPUT_MAX_FILE_NAME_LENGTH, normalizeAgentInput, encodeAgentInput,
  defineAgentInputEncoder,
} from "../surface.mjs";
export type {
  AgentInputPart, AgentTextInputPart, AgentImageInputPart, AgentAudioInputPart, AgentFileInputPart, AgentOpaqueInputPart, AgentInputSource,
  AgentInputURLSource, AgentInputBase64Source, NormalizedAgentInput, AgentInputEncoder, FiniteJSON,
} from "../surface.mjs";
export type { AgentInput } from "../index.mjs";
