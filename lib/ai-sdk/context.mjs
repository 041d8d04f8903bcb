// Context layers: wrappers around a tool's execute that may refuse a call before it runs
// (`beforeExecute`) or rewrite its result after (`afterExecute`), plus the two built-in layers
// (the execution policy of plan mode and the output policy that cuts big results).
import { native } from "../native.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";

/**
 * bashkit's middle truncation (knap-core's one truncation helper): unchanged when it fits, else
 * the first half and the last half of `maxLength` characters around `…K chars truncated…`,
 * after `[Total output lines: N]`.
 */
export function middleTruncate(text, maxLength) {
  if (typeof text !== "string" || !Number.isFinite(maxLength) || maxLength < 0) return text;
  if (text.length <= maxLength) return text;
  return native.middleTruncate(text, maxLength);
}

/** Wraps one tool with context layers; a tool without `execute` is returned as is. */
export function withContext(tool, toolName, layers) {
  const inner = tool.execute;
  if (!inner || !layers?.length) return tool;
  return {
    ...tool,
    execute: async (params, options) => {
      for (const layer of layers) {
        if (layer.beforeExecute) {
          const refusal = await layer.beforeExecute(toolName, params);
          if (refusal) return refusal;
        }
      }
      let result = await inner(params, options);
      for (const layer of layers) {
        if (layer.afterExecute) result = await layer.afterExecute(toolName, params, result);
      }
      return result;
    },
  };
}

/** Wraps every tool of a tool set. */
export function applyContextLayers(tools, layers) {
  if (!layers?.length) return tools;
  const out = {};
  for (const [name, tool] of Object.entries(tools)) out[name] = withContext(tool, name, layers);
  return out;
}

const PLAN_MODE_BLOCKED = ["Bash", "Write", "Edit", "Patch"];

/**
 * While plan mode is active, refuses the tools that change things (`Bash`, `Write`, `Edit`,
 * `Patch` unless `planModeBlockedTools` says otherwise); `shouldBlock(name, params)` may refuse
 * any call with a reason.
 */
export const EXECUTION_POLICY_KEYS = ["planModeBlockedTools", "shouldBlock"];

export function createExecutionPolicy(planModeState, config = {}) {
  refuseUnknownKeys("createExecutionPolicy", config, EXECUTION_POLICY_KEYS);
  const blocked = new Set(config.planModeBlockedTools ?? PLAN_MODE_BLOCKED);
  return {
    beforeExecute(toolName, params) {
      if (planModeState?.isActive && blocked.has(toolName)) {
        return {
          error: `${toolName} is not available in plan mode. Use read-only tools (Read, Grep, Glob) to gather information, then call ExitPlanMode when your plan is ready.`,
        };
      }
      const reason = config.shouldBlock?.(toolName, params);
      if (reason) return { error: reason };
      return undefined;
    },
  };
}

const lineEstimate = (chars) => Math.max(1, Math.round(chars / 80));
const HINTS = {
  Bash: (n) =>
    `Output truncated (${n} chars, ~${lineEstimate(n)} lines). To see specific parts, re-run with | head, | tail, or | grep, or use Read to examine any output files.`,
  Grep: (n) => `Results truncated (${n} chars). Use head_limit and offset parameters to paginate, or narrow your pattern/glob to reduce results.`,
  Read: (n) => `File content truncated (${n} chars, ~${lineEstimate(n)} lines). Use offset and limit parameters to read specific sections.`,
};
const defaultHint = (n) => `Output truncated (${n} chars). Use Read, Grep, or Bash with targeted commands to access specific parts.`;

let stashCounter = 0;

/**
 * Cuts results longer than `redirectionThreshold` characters (default 20,000) to
 * `maxOutputLength` (default 30,000) and adds a `_hint` saying how to get the rest. The measured
 * text is `stdout`, else `content`, else the whole result as JSON (then `_truncated` holds the
 * cut JSON). `stashOutput: { sandbox, tools, dir?, pathFor? }` first saves the full text through
 * the sandbox and names the file in the hint.
 */
export function createOutputPolicy(config = {}) {
  refuseUnknownKeys("createOutputPolicy", config, ["maxOutputLength", "redirectionThreshold", "excludeTools", "truncate", "hints", "buildHint", "stashOutput"]);
  refuseUnknownKeys("createOutputPolicy stashOutput", config?.stashOutput, ["sandbox", "dir", "tools", "pathFor"]);
  const maxLength = config.maxOutputLength ?? 30000;
  const threshold = config.redirectionThreshold ?? 20000;
  const exclude = new Set(config.excludeTools ?? []);
  const truncate = config.truncate ?? middleTruncate;
  const stash = config.stashOutput;
  const stashDir = stash?.dir ?? "/tmp/.bashkit/tool-output";
  const stashTools = new Set(stash?.tools ?? []);
  const hintFor = (toolName, params, length, result, stashed) => {
    let hint = config.buildHint?.(toolName, params, length, result);
    if (hint === undefined) hint = config.hints?.[toolName];
    if (hint === undefined) hint = (HINTS[toolName] ?? defaultHint)(length);
    return stashed ? `Full output saved to ${stashed}. ${hint}` : hint;
  };
  return {
    async afterExecute(toolName, params, result) {
      if (exclude.has(toolName) || result === null || typeof result !== "object") return result;
      const text = typeof result.stdout === "string" ? result.stdout : typeof result.content === "string" ? result.content : JSON.stringify(result);
      if (!text || text.length <= threshold) return result;
      let stashed;
      if (stash && stashTools.has(toolName)) {
        try {
          stashed = stash.pathFor?.(toolName, params, result) ?? `${stashDir}/${toolName}-${Date.now()}-${stashCounter++}.txt`;
          const dir = stashed.replace(/\/[^/]+$/, "");
          await stash.sandbox.exec(`mkdir -p '${dir.replace(/'/g, "'\\''")}'`);
          await stash.sandbox.writeFile(stashed, text);
        } catch (error) {
          console.warn(`[knap] stashOutput failed: ${error?.message ?? error}`);
          stashed = undefined;
        }
      }
      const cut = truncate(text, maxLength);
      const hint = hintFor(toolName, params, text.length, result, stashed);
      if (typeof result.stdout === "string") return { ...result, stdout: cut, _hint: hint };
      if (typeof result.content === "string") return { ...result, content: cut, _hint: hint };
      return { ...result, _truncated: cut, _hint: hint };
    },
  };
}
