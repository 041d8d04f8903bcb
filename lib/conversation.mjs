// createConversation(): multi-turn state carried between run() calls. The transcript lives here;
// each run sends it to the kernel ahead of its prompt and commits the run's messages after it.
import { randomUUID } from "node:crypto";
import { codedError } from "./native.mjs";

const STATE = Symbol("knap.conversation");

class Conversation {
  constructor(sessionId = `conversation-${randomUUID()}`, messages = []) {
    this.sessionId = sessionId;
    Object.defineProperty(this, STATE, { value: { messages, inUse: false } });
  }

  /** The messages so far (a copy). */
  snapshot() {
    return { messages: structuredClone(this[STATE].messages) };
  }
}

export function createConversation() {
  return new Conversation();
}

/**
 * `restoreConversation(checkpoint)`: a Conversation at a journaled checkpoint
 * (`{sessionId, messages}`, e.g. `run_completed.conversation`), as serve sessions rebuild theirs.
 */
export function restoreConversation(checkpoint) {
  const { sessionId, messages } = checkpoint ?? {};
  if (typeof sessionId !== "string" || sessionId === "" || !Array.isArray(messages)) {
    throw codedError("cave_durable_conversation_invalid", "cave_durable_conversation_invalid: a checkpoint needs a sessionId and a messages array");
  }
  return new Conversation(sessionId, structuredClone(messages));
}

/** Takes the conversation for one run; returns its history and a `finish(messages?)` to release it. */
export function claimConversation(conversation) {
  if (!(conversation instanceof Conversation)) {
    throw codedError("cave_conversation_invalid", "cave_conversation_invalid: RunOptions.conversation must come from createConversation()");
  }
  const state = conversation[STATE];
  if (state.inUse) throw codedError("cave_conversation_in_use", "cave_conversation_in_use: this conversation is already driving a run");
  state.inUse = true;
  return {
    history: state.messages.slice(),
    finish(messages) {
      if (messages) state.messages = messages;
      state.inUse = false;
    },
  };
}
