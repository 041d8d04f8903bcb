// knap/serve-handler (`@caveman-ai/agent/serve-handler`): the web-standard handler.
export { createAgentHandler, INSTANCE_LOCK_RUN_ID, SESSION_MESSAGE_CONTEXT_MAX_BYTES, withMessageContext } from "./serve-core.mjs";
