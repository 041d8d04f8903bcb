// `createAgentTools(sandbox, config)`: the tool set, wrapped (innermost first) by the timeout of
// each tool, the cache, and the context layers; plus the budget tracker and the model registry.
import { LIMITS } from "./native.mjs";
import { TOOL_CONFIG_KEYS, SDK_TOOL_KEYS, toolEnv, createBashTool, createReadTool, createWriteTool, createEditTool, createGlobTool, createGrepTool, createPatchTool } from "./tools.mjs";
import { createAskUserTool, createEnterPlanModeTool, createExitPlanModeTool, createSkillTool } from "./interactive.mjs";
import { createWebSearchTool, createWebFetchTool } from "./web.mjs";
import { cached, resolveCacheConfig, createInvalidationLog, CACHE_INTERNAL } from "./cache.mjs";
import { applyContextLayers, createExecutionPolicy, createOutputPolicy, EXECUTION_POLICY_KEYS } from "./context.mjs";
import { fetchOpenRouterModels, createBudgetTracker } from "./budget.mjs";
import { codedError } from "../native.mjs";
import { didYouMean, refuseUnknownKeys } from "../config-keys.mjs";
import { traced } from "../debug.mjs";

export const DEFAULT_CONFIG = Object.freeze({
  defaultTimeout: LIMITS.defaultTimeoutMs,
  workingDirectory: "/tmp",
  tools: Object.freeze({ Bash: Object.freeze({ maxOutputLength: LIMITS.bashMaxOutputLength }) }),
});

const REQUIRED = ["exec", "readFile", "writeFile", "readDir", "fileExists", "isDirectory"];

/** The paths a cached result depends on (for invalidation by writes), as a Promise. */
function dependencies(env, name) {
  const dep = async (p) => {
    const a = await env.abs(p);
    return a ? [a] : undefined;
  };
  if (name === "Read") return (params) => dep(params?.file_path);
  if (name === "Glob" || name === "Grep") return (params) => dep(params?.path || ".");
  if (name === "WebFetch" || name === "WebSearch") return () => [];
  return undefined; // anything else (user tools, Bash if cached): stale after any write
}

const AGENT_CONFIG_KEYS = ["tools", "askUser", "patch", "planMode", "skill", "webSearch", "webFetch", "cache", "modelRegistry", "budget", "context", "defaultTimeout", "workingDirectory"];
const TOOL_NAMES = ["Bash", "Read", "Write", "Edit", "Glob", "Grep", "Patch", "WebSearch", "WebFetch"];

export async function createAgentTools(sandbox, config = {}) {
  if (!sandbox || typeof sandbox !== "object" || REQUIRED.some((m) => typeof sandbox[m] !== "function")) {
    throw codedError(
      "cave_sandbox_invalid",
      `cave_sandbox_invalid: createAgentTools needs a Sandbox (${REQUIRED.join(", ")}); use createLocalSandbox({ workingDirectory })`,
    );
  }
  refuseUnknownKeys("createAgentTools", config, AGENT_CONFIG_KEYS);
  for (const [name, toolConfig] of Object.entries(config.tools ?? {})) {
    if (!TOOL_NAMES.includes(name)) refuseUnknownKeys("createAgentTools tools", { [name]: true }, TOOL_NAMES);
    if (toolConfig && typeof toolConfig === "object") refuseUnknownKeys(`createAgentTools tools.${name}`, toolConfig, name === "Bash" ? [...TOOL_CONFIG_KEYS, "onProgress"] : TOOL_CONFIG_KEYS);
  }
  // The nested options (webSearch and webFetch are checked by their factories, cache by resolveCacheConfig).
  const nested = (key, known) => {
    const value = config[key];
    if (value && typeof value === "object") refuseUnknownKeys(`createAgentTools ${key}`, value, known);
  };
  nested("askUser", SDK_TOOL_KEYS);
  nested("patch", TOOL_CONFIG_KEYS);
  nested("planMode", ["onEnter", "onPlanSubmit"]);
  nested("skill", ["skills", "onActivate"]);
  nested("modelRegistry", ["provider", "apiKey", "url", "timeoutMs"]);
  nested("budget", ["maxUsd", "pricingProvider", "apiKey", "modelPricing", "onUnpricedModel"]);
  nested("context", ["executionPolicy", "outputPolicy", "extraTools", "layers"]);
  // Built only when plan mode or a rule needs it, so its keys are checked here too.
  if (config.context?.executionPolicy) refuseUnknownKeys("createAgentTools context.executionPolicy", config.context.executionPolicy, EXECUTION_POLICY_KEYS);
  const cacheConfig = resolveCacheConfig(config.cache);
  const log = cacheConfig ? createInvalidationLog() : undefined;
  const env = toolEnv(sandbox, { defaultTimeout: config.defaultTimeout, log });
  const toolsConfig = { ...DEFAULT_CONFIG.tools, ...config.tools };
  const tools = {
    Bash: createBashTool(env, toolsConfig.Bash),
    Read: createReadTool(env, toolsConfig.Read),
    Write: createWriteTool(env, toolsConfig.Write),
    Edit: createEditTool(env, toolsConfig.Edit),
    Glob: createGlobTool(env, toolsConfig.Glob),
    Grep: createGrepTool(env, toolsConfig.Grep),
  };
  let planModeState;
  if (config.askUser) tools.AskUser = createAskUserTool(config.askUser === true ? undefined : config.askUser);
  if (config.patch) tools.Patch = createPatchTool(env, config.patch === true ? { ...toolsConfig.Patch } : config.patch);
  if (config.planMode) {
    const opts = typeof config.planMode === "object" ? config.planMode : {};
    planModeState = { isActive: false };
    tools.EnterPlanMode = createEnterPlanModeTool(planModeState, opts.onEnter);
    tools.ExitPlanMode = createExitPlanModeTool(planModeState, opts.onPlanSubmit);
  }
  if (config.skill) tools.Skill = createSkillTool({ skills: config.skill.skills, sandbox, onActivate: config.skill.onActivate });
  // The seed: "webSearch: presence enables WebSearch and WebFetch".
  if (config.webSearch) tools.WebSearch = createWebSearchTool({ timeout: toolsConfig.WebSearch?.timeout ?? config.defaultTimeout, ...config.webSearch });
  if (config.webFetch || config.webSearch) {
    const fetchConfig = config.webFetch ?? {};
    // bashkit's `webFetch: { apiKey, model }` meant Parallel's extract API; without a key, a direct GET.
    const provider = fetchConfig.provider ?? (fetchConfig.apiKey ? "parallel" : "direct");
    tools.WebFetch = createWebFetchTool({ timeout: toolsConfig.WebFetch?.timeout ?? config.defaultTimeout, ...fetchConfig, provider });
  }
  for (const [name, extra] of Object.entries(config.context?.extraTools ?? {})) tools[name] = extra;

  if (cacheConfig) {
    for (const [name, tool] of Object.entries(tools)) {
      if (!cacheConfig.enabled.has(name) || typeof tool.execute !== "function") continue;
      tools[name] = cached(tool, name, {
        store: cacheConfig.store,
        ttl: cacheConfig.ttl,
        debug: cacheConfig.debug,
        onHit: cacheConfig.onHit,
        onMiss: cacheConfig.onMiss,
        keyGenerator: cacheConfig.keyGenerator,
        [CACHE_INTERNAL]: { log, deps: dependencies(env, name) },
      });
    }
  }

  const contextLayers = [];
  if (config.context) {
    const ctx = config.context;
    if (planModeState || ctx.executionPolicy?.shouldBlock || ctx.executionPolicy?.planModeBlockedTools) {
      contextLayers.push(createExecutionPolicy(planModeState, ctx.executionPolicy));
    }
    if (ctx.outputPolicy !== false) contextLayers.push(createOutputPolicy(ctx.outputPolicy ?? undefined));
    if (ctx.layers) contextLayers.push(...ctx.layers);
    Object.assign(tools, applyContextLayers(tools, contextLayers));
  }

  // KNAP_DEBUG / BASHKIT_DEBUG: every call traced with its timing (outermost, so a cache hit shows too).
  for (const [name, tool] of Object.entries(tools)) {
    if (typeof tool.execute === "function") tools[name] = { ...tool, execute: traced(name, tool.execute) };
  }

  let openRouterModels;
  const registry = config.modelRegistry?.provider === "openRouter" || config.budget?.pricingProvider === "openRouter";
  if (config.modelRegistry && config.modelRegistry.provider !== "openRouter") {
    const provider = config.modelRegistry.provider;
    throw codedError(
      "cave_model_registry_unknown",
      `cave_model_registry_unknown: unknown model registry provider ${JSON.stringify(provider)}\nhint: ${didYouMean(String(provider), ["openRouter"])}the providers are openRouter`,
    );
  }
  if (registry) {
    openRouterModels = await fetchOpenRouterModels(config.modelRegistry?.apiKey ?? config.budget?.apiKey, {
      url: config.modelRegistry?.url,
      timeoutMs: config.modelRegistry?.timeoutMs,
    });
  }
  let budget;
  if (config.budget) {
    const { maxUsd, modelPricing } = config.budget;
    if (!openRouterModels && !modelPricing) {
      throw codedError("cave_budget_pricing_missing", "[knap] Budget requires either modelRegistry, pricingProvider, or modelPricing.");
    }
    budget = createBudgetTracker(maxUsd, { modelPricing, openRouterPricing: openRouterModels, onUnpricedModel: config.budget.onUnpricedModel });
  }
  const result = { tools, budget, openRouterModels, contextLayers };
  if (planModeState) result.planModeState = planModeState;
  return result;
}
