// bashkit's conversation compaction (`compactConversation`, `createAutoCompaction`,
// `createCompactConfig(FromModels)`, `CompactionError`): the split point and the summarizer prompt
// come from knap-core's compaction engine; the summarizer call is the AI SDK's `generateText`.
import { native } from "../native.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";
import { loadAi } from "./ai.mjs";
import { getModelContextLength } from "./budget.mjs";
import { getContextStatus, MODEL_CONTEXT_LIMITS } from "./context-status.mjs";
import { estimateMessagesTokens } from "./messages.mjs";

export class CompactionError extends Error {
  name = "CompactionError";
}

/** bashkit 0.7.1's `CompactConversationConfig`, every key of which knap reads. */
export const COMPACTION_KEYS = ["maxTokens", "compactionThreshold", "protectRecentMessages", "summarizerModel", "taskContext", "summaryInstructions"];

/** Summarizes the older messages once the conversation passes `compactionThreshold` of `maxTokens`. */
export async function compactConversation(messages, config, state = { conversationSummary: "" }) {
  refuseUnknownKeys("compactConversation", config, COMPACTION_KEYS);
  const threshold = config.compactionThreshold ?? 0.85;
  if (estimateMessagesTokens(messages) < config.maxTokens * threshold) return { messages, state, didCompact: false };
  const plan = native.bashkitCompactionPlan(
    JSON.stringify(messages),
    config.protectRecentMessages ?? 10,
    config.taskContext,
    state.conversationSummary ?? "",
    config.summaryInstructions,
  );
  if (plan.splitAt === 0) return { messages, state, didCompact: false };
  const { generateText } = await loadAi();
  const result = await generateText({ model: config.summarizerModel, messages: [{ role: "user", content: plan.prompt }] });
  const summary = result.text;
  return {
    messages: [
      { role: "user", content: `[Previous conversation summary]\n\n${summary}\n\n[Continuing from recent messages below...]` },
      { role: "assistant", content: "I understand the context from the previous conversation. Continuing from where we left off." },
      ...messages.slice(plan.splitAt),
    ],
    state: { conversationSummary: summary },
    didCompact: true,
  };
}

/** A `prepareStep` that compacts when the context is critical: two tries 1 s apart, then `CompactionError`. */
export function createAutoCompaction(config) {
  refuseUnknownKeys("createAutoCompaction", config, COMPACTION_KEYS);
  const state = { conversationSummary: "" };
  const threshold = config.compactionThreshold ?? 0.85;
  const prepareStep = async ({ messages }) => {
    if (getContextStatus(messages, config.maxTokens, { criticalThreshold: threshold }).status !== "critical") return {};
    let lastError;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const result = await compactConversation(messages, config, state);
        if (!result.didCompact) return {};
        state.conversationSummary = result.state.conversationSummary;
        return { messages: result.messages };
      } catch (error) {
        lastError = error;
        if (attempt < 1) await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
    throw new CompactionError("Conversation compaction failed after 2 attempts", { cause: lastError });
  };
  return { prepareStep, getState: () => ({ ...state }) };
}

/** @deprecated as in bashkit: `maxTokens` from `MODEL_CONTEXT_LIMITS`. */
export function createCompactConfig(modelId, summarizerModel, overrides) {
  refuseUnknownKeys("createCompactConfig overrides", overrides, COMPACTION_KEYS);
  return { maxTokens: MODEL_CONTEXT_LIMITS[modelId], summarizerModel, ...overrides };
}

export function createCompactConfigFromModels(modelId, summarizerModel, modelsMap, overrides) {
  refuseUnknownKeys("createCompactConfigFromModels overrides", overrides, COMPACTION_KEYS);
  const contextLength = getModelContextLength(modelId, modelsMap);
  if (contextLength === undefined) {
    throw new Error(`[bashkit] No context length found for model "${modelId}" in OpenRouter data. Provide maxTokens manually via overrides or use createCompactConfig() with a known model.`);
  }
  return { maxTokens: contextLength, summarizerModel, ...overrides };
}
