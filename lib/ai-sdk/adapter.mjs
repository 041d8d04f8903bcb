// `toAiSdkTools`: knap's own tool objects (`shellTools(...)`, or any `tool()`-style object
// `{name, description, input (JSON Schema), effect, execute(input, signal, context)}`) as an AI
// SDK tool set. With `toolPolicy`, every call is first judged by knap's Rust policy evaluator
// (`decideToolCall`, the same one a knap run uses): a denial becomes the tool's error result
// (`cave_tool_denied:<code>`), which the AI SDK hands back to the model as `error-text`.
import { decideToolCall } from "../shell-tools.mjs";
import { passThroughSchema } from "./schema.mjs";
import { codedError } from "../native.mjs";
import { traced } from "../debug.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";

/**
 * @param tools an array of knap tools, or a record of them
 * @param options `{ toolPolicy?, runId?, agentId?, agentPath? }`
 */
export function toAiSdkTools(tools, options = {}) {
  const list = Array.isArray(tools) ? tools : Object.entries(tools ?? {}).map(([name, t]) => (t.name ? t : { ...t, name }));
  refuseUnknownKeys("toAiSdkTools", options, ["toolPolicy", "runId", "agentId", "agentPath"]);
  const policy = options.toolPolicy;
  if (policy !== undefined && typeof policy !== "function") {
    throw codedError("cave_tool_policy_invalid", "cave_tool_policy_invalid: toolPolicy must be a function");
  }
  const runId = options.runId ?? `ai-sdk-${Date.now().toString(36)}`;
  const out = {};
  for (const t of list) {
    if (!t || typeof t.name !== "string" || typeof t.execute !== "function") {
      throw codedError("cave_tool_invalid", `cave_tool_invalid: expected a knap tool object with a name and execute (got ${typeof t})`);
    }
    if (Object.prototype.hasOwnProperty.call(out, t.name)) throw codedError("cave_tool_duplicate", `cave_tool_duplicate:${t.name}`);
    const schema = t.input && typeof t.input === "object" ? t.input : { type: "object", properties: {} };
    out[t.name] = {
      description: t.description,
      inputSchema: passThroughSchema(schema),
      execute: traced(t.name, async (input, execOptions = {}) => {
        const signal = execOptions.abortSignal;
        if (policy) {
          const decision = await decideToolCall(policy, {
            runId,
            agentId: options.agentId ?? "ai-sdk",
            agentPath: options.agentPath ?? [options.agentId ?? "ai-sdk"],
            toolCallId: execOptions.toolCallId ?? "",
            name: t.name,
            effect: t.effect ?? "external",
            args: input ?? {},
          });
          if (decision?.block) throw codedError("cave_tool_denied", decision.reason);
        }
        // The tool's own timeoutMs is enforced as a knap run enforces it: the tool's signal is
        // aborted and the call fails with `cave_tool_timeout`.
        const ac = new AbortController();
        const onOuter = () => ac.abort(signal.reason);
        if (signal?.aborted) ac.abort(signal.reason);
        else signal?.addEventListener("abort", onOuter, { once: true });
        let timer;
        const limit = Number.isSafeInteger(t.timeoutMs) && t.timeoutMs > 0 ? t.timeoutMs : undefined;
        const expired = new Promise((_, reject) => {
          if (limit === undefined) return;
          timer = setTimeout(() => {
            ac.abort(codedError("cave_tool_timeout"));
            reject(codedError("cave_tool_timeout"));
          }, limit);
        });
        try {
          const context = { toolCallId: execOptions.toolCallId, messages: execOptions.messages };
          return await Promise.race([t.execute(input ?? {}, ac.signal, context), expired]);
        } finally {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onOuter);
        }
      }),
    };
  }
  return out;
}
