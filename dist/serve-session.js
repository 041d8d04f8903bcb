// knap shim for the reference's dist/serve-session.js (session message context): re-exports it from ../lib/serve-handler.mjs.
export { SESSION_MESSAGE_CONTEXT_MAX_BYTES, withMessageContext } from "../lib/serve-handler.mjs";
