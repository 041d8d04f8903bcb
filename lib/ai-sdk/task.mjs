// The `Task` tool: a sub-agent through `generateText` (or `streamText` with a `streamWriter`),
// with the parent's budget tracker added to its stop conditions and step accounting.
import * as D from "./descriptions.mjs";
import { s, toolSchema } from "./schema.mjs";
import { loadAi } from "./ai.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";

const taskSchema = s.object(
  {
    description: s.string("A short (3-5 word) description of the task"),
    prompt: s.string("The task for the agent to perform"),
    subagent_type: s.string("The type of specialized agent to use for this task"),
    system_prompt: s.nullable(
      "string",
      "Optional custom system prompt for this agent. If provided, overrides the default system prompt for the subagent type. Use this to create dynamic, specialized agents on the fly.",
    ),
    tools: s.nullableArray(
      { type: "string" },
      "Optional list of tool names this agent can use (e.g., ['Read', 'Grep', 'WebSearch']). If provided, overrides the default tools for the subagent type. Use this to restrict or expand the agent's capabilities.",
    ),
  },
  ["description", "prompt", "subagent_type"],
);

let eventCounter = 0;
const eventId = () => `subagent-${Date.now()}-${++eventCounter}`;

function pickTools(all, names, additional) {
  const out = {};
  if (names) {
    for (const n of names) if (all[n]) out[n] = all[n];
  } else {
    Object.assign(out, all);
  }
  if (additional) Object.assign(out, additional);
  return out;
}

/**
 * @param config `{ model, tools, subagentTypes?, defaultStopWhen?, defaultOnStepFinish?, streamWriter?, budget? }`
 *   `subagentTypes[name]`: `{ model?, systemPrompt?, tools?: string[], additionalTools?, stopWhen?, prepareStep?, onStepFinish? }`.
 */
const SUBAGENT_TYPE_KEYS = ["model", "systemPrompt", "tools", "additionalTools", "stopWhen", "prepareStep", "onStepFinish"];

export function createTaskTool(config) {
  refuseUnknownKeys("createTaskTool", config, ["model", "tools", "subagentTypes", "defaultStopWhen", "defaultOnStepFinish", "streamWriter", "budget"]);
  for (const [name, type] of Object.entries(config?.subagentTypes ?? {})) refuseUnknownKeys(`createTaskTool subagentTypes.${name}`, type, SUBAGENT_TYPE_KEYS);
  const { model: defaultModel, tools: allTools = {}, subagentTypes = {}, defaultStopWhen, defaultOnStepFinish, streamWriter, budget } = config ?? {};
  return {
    description: D.TASK,
    inputSchema: toolSchema(taskSchema),
    async execute({ description, prompt, subagent_type, system_prompt, tools: names }, options) {
      const started = performance.now();
      const type = subagentTypes[subagent_type] ?? {};
      try {
        const ai = await loadAi();
        const baseStop = type.stopWhen ?? defaultStopWhen ?? ai.stepCountIs(15);
        const stopWhen = budget ? [baseStop, budget.stopWhen].flat() : baseStop;
        const common = {
          model: type.model ?? defaultModel,
          tools: pickTools(allTools, names ?? type.tools, type.additionalTools),
          system: system_prompt ?? type.systemPrompt,
          prompt,
          stopWhen,
          prepareStep: type.prepareStep,
          abortSignal: options?.abortSignal,
        };
        const onStep = async (step) => {
          budget?.onStepFinish(step);
          if (streamWriter) {
            for (const call of step.toolCalls ?? []) {
              streamWriter.write({
                type: "data-subagent",
                id: eventId(),
                data: { event: "tool-call", subagent: subagent_type, description, toolName: call.toolName, args: call.input },
              });
            }
          }
          await type.onStepFinish?.(step);
          await defaultOnStepFinish?.({ subagentType: subagent_type, description, step });
        };
        let text;
        let usage;
        if (streamWriter) {
          streamWriter.write({ type: "data-subagent", id: eventId(), data: { event: "start", subagent: subagent_type, description } });
          const result = ai.streamText({ ...common, onStepFinish: onStep });
          text = await result.text;
          usage = await result.usage;
          const response = await result.response;
          streamWriter.write({ type: "data-subagent", id: eventId(), data: { event: "done", subagent: subagent_type, description } });
          streamWriter.write({
            type: "data-subagent",
            id: eventId(),
            data: { event: "complete", subagent: subagent_type, description, messages: response.messages },
          });
        } else {
          const result = await ai.generateText({ ...common, onStepFinish: onStep });
          text = result.text;
          usage = result.totalUsage ?? result.usage;
        }
        return {
          result: text,
          usage:
            usage?.inputTokens !== undefined && usage?.outputTokens !== undefined
              ? { input_tokens: usage.inputTokens, output_tokens: usage.outputTokens }
              : undefined,
          duration_ms: Math.round(performance.now() - started),
          subagent: subagent_type,
          description,
        };
      } catch (error) {
        return {
          error: error instanceof Error ? error.message : "Unknown error",
          subagent: subagent_type,
          description,
          duration_ms: Math.round(performance.now() - started),
        };
      }
    },
  };
}
