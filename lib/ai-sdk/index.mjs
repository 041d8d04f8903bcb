// knap/ai-sdk: knap's Rust tools as a Vercel AI SDK tool set, with bashkit's API on Node.
export { createLocalSandbox } from "./sandbox.mjs";
export { createAgentTools, DEFAULT_CONFIG } from "./agent-tools.mjs";
export { createBashTool, createReadTool, createWriteTool, createEditTool, createGlobTool, createGrepTool } from "./public-tools.mjs";
export { createPatchTool } from "./public-tools.mjs";
export { createAskUserTool, createEnterPlanModeTool, createExitPlanModeTool, createTodoWriteTool, createSkillTool } from "./interactive.mjs";
export { createTaskTool } from "./task.mjs";
export { createWebSearchTool, createWebFetchTool } from "./web.mjs";
export { cached, LRUCacheStore } from "./cache.mjs";
export { createBudgetTracker, fetchOpenRouterModels, getModelContextLength, resetModelRegistryCache } from "./budget.mjs";
export { pruneMessages, pruneMessagesByTokens, estimateTokens, estimateMessageTokens, estimateMessagesTokens } from "./messages.mjs";
export { anthropicPromptCacheMiddleware, anthropicPromptCacheMiddlewareV2 } from "./middleware.mjs";
export { withContext, applyContextLayers, createExecutionPolicy, createOutputPolicy, middleTruncate } from "./context.mjs";
export { toAiSdkTools } from "./adapter.mjs";
export { discoverSkills, parseSkillMetadata, skillsToXml, loadSkillBundle, loadSkillBundles, fetchSkill, fetchSkills, setupAgentEnvironment } from "./skills.mjs";
export { createVercelSandbox, createE2BSandbox, ensureSandboxTools } from "./remote-sandboxes.mjs";
export { createRedisCacheStore } from "./redis-store.mjs";
export { isDebugEnabled, getDebugLogs, clearDebugLogs, reinitDebugMode } from "../debug.mjs";
export { getContextStatus, contextNeedsAttention, contextNeedsCompaction, MODEL_CONTEXT_LIMITS } from "./context-status.mjs";
