// Tools that talk to the user or track the agent's own state: AskUser (client-rendered, no
// execute), plan mode, TodoWrite and Skill.
import * as D from "./descriptions.mjs";
import { s, toolSchema } from "./schema.mjs";
import { SDK_TOOL_KEYS, sdkOptions } from "./tools.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";

const askUserSchema = s.object(
  {
    questions: s.array(
      s.object(
        {
          id: s.string("Stable identifier for mapping answers. Use snake_case, e.g. 'time_period' or 'auth_method'."),
          header: s.string("Short header label shown in the UI (12 or fewer chars). Examples: 'Auth method', 'Library', 'Approach'."),
          question: s.string("Single-sentence prompt shown to the user."),
          options: s.array(
            s.object(
              {
                label: s.string("User-facing label (1-5 words). Put the recommended option first and suffix its label with '(Recommended)'."),
                description: s.string("One short sentence explaining the impact or tradeoff if this option is selected."),
              },
              ["label", "description"],
            ),
            "2-3 mutually exclusive choices. Do not include an 'Other' option; the client adds a free-form 'Other' option automatically.",
            { min: 2, max: 3 },
          ),
          multiSelect: s.nullable("boolean", "Set to true to allow the user to select multiple options instead of just one."),
        },
        ["id", "header", "question", "options"],
      ),
      "1-4 questions to ask the user. Prefer 1, do not exceed 4.",
      { min: 1, max: 4 },
    ),
  },
  ["questions"],
);

/**
 * A client-side tool: it has no `execute`, so the AI SDK loop stops at the call and the client
 * renders the questions; the answers (`Record<id, string | string[]>`) come back as the tool
 * result in the next request.
 */
export function createAskUserTool(config = {}) {
  refuseUnknownKeys("createAskUserTool", config, SDK_TOOL_KEYS);
  return { description: D.ASK_USER, inputSchema: toolSchema(askUserSchema), ...sdkOptions(config) };
}

const enterSchema = s.object(
  {
    reason: s.string(
      "Brief explanation of why you're entering planning mode (e.g., 'Need to explore codebase architecture before implementing feature')",
    ),
  },
  ["reason"],
);
const exitSchema = s.object({ plan: s.string("The plan to present to the user for approval") }, ["plan"]);

export function createEnterPlanModeTool(state, onEnter) {
  return {
    description: D.ENTER_PLAN_MODE,
    inputSchema: toolSchema(enterSchema),
    async execute({ reason }) {
      try {
        if (state.isActive) return { error: "Already in planning mode. Use ExitPlanMode to exit." };
        state.isActive = true;
        state.enteredAt = new Date();
        state.reason = reason;
        await onEnter?.(reason);
        return {
          message: `Entered planning mode: ${reason}. Use Read, Grep, and Glob to explore. Call ExitPlanMode when ready with a plan.`,
          mode: "planning",
        };
      } catch (error) {
        return { error: error instanceof Error ? error.message : "Unknown error" };
      }
    },
  };
}

/**
 * Ends plan mode (bashkit's left `isActive` set, so blocked tools stayed blocked). With
 * `onPlanSubmit(plan)` the plan is submitted for approval: an explicit `false` keeps plan mode on
 * ("Plan rejected"); anything else ends it.
 */
export function createExitPlanModeTool(state, onPlanSubmit) {
  if (typeof state === "function" && onPlanSubmit === undefined) {
    onPlanSubmit = state;
    state = undefined;
  }
  return {
    description: D.EXIT_PLAN_MODE,
    inputSchema: toolSchema(exitSchema),
    async execute({ plan }) {
      try {
        const approved = onPlanSubmit ? await onPlanSubmit(plan) : undefined;
        if (approved === false) {
          return { message: "Plan rejected: revise it and call ExitPlanMode again", approved: false };
        }
        if (state) {
          state.isActive = false;
          state.enteredAt = undefined;
          state.reason = undefined;
        }
        return { message: approved ? "Plan approved, proceeding with execution" : "Plan submitted for review", approved };
      } catch (error) {
        return { error: error instanceof Error ? error.message : "Unknown error" };
      }
    },
  };
}

const todoSchema = s.object(
  {
    todos: {
      type: "array",
      items: s.object(
        {
          content: s.string("The task description"),
          status: { type: "string", enum: ["pending", "in_progress", "completed"], description: "The task status" },
          activeForm: s.string("Active form of the task description"),
        },
        ["content", "status", "activeForm"],
      ),
      description: "The updated todo list",
    },
  },
  ["todos"],
);

/**
 * `createTodoWriteTool(state, onUpdate?)` (bashkit's code) or `(state, config?, onUpdate?)`
 * (bashkit's README): `state.todos` receives the list on every call.
 */
export function createTodoWriteTool(state = {}, configOrOnUpdate, maybeOnUpdate) {
  const onUpdate = typeof configOrOnUpdate === "function" ? configOrOnUpdate : maybeOnUpdate;
  const config = typeof configOrOnUpdate === "object" && configOrOnUpdate !== null ? configOrOnUpdate : {};
  refuseUnknownKeys("createTodoWriteTool", config, SDK_TOOL_KEYS);
  return {
    description: D.TODO_WRITE,
    inputSchema: toolSchema(todoSchema),
    ...sdkOptions(config),
    async execute({ todos }) {
      try {
        state.todos = todos;
        await onUpdate?.(todos);
        const count = (st) => todos.filter((t) => t.status === st).length;
        return {
          message: "Todo list updated successfully",
          stats: { total: todos.length, pending: count("pending"), in_progress: count("in_progress"), completed: count("completed") },
        };
      } catch (error) {
        return { error: error instanceof Error ? error.message : "Unknown error" };
      }
    },
  };
}

const skillSchema = s.object({ name: s.string("The name of the skill to activate (from available skills list)") }, ["name"]);

/** `{ skills: Record<name, {name, path, allowedTools?}>, sandbox, onActivate? }`. */
export function createSkillTool(config = {}) {
  refuseUnknownKeys("createSkillTool", config, ["skills", "sandbox", "onActivate"]);
  const { skills = {}, sandbox, onActivate } = config;
  return {
    description: D.SKILL,
    inputSchema: toolSchema(skillSchema),
    async execute({ name }) {
      try {
        const skill = skills[name];
        if (!skill) {
          const names = Object.keys(skills);
          return { error: names.length ? `Skill '${name}' not found. Available skills: ${names.join(", ")}` : "No skills are available." };
        }
        if (!sandbox) return { error: `Cannot load skill '${name}': no sandbox provided to read ${skill.path}` };
        const text = await sandbox.readFile(skill.path);
        const end = text.startsWith("---") ? text.indexOf("\n---", 3) : -1;
        const instructions = end !== -1 ? text.slice(end + 4).trim() : text;
        await onActivate?.(skill, instructions);
        return {
          name: skill.name ?? name,
          instructions,
          allowed_tools: skill.allowedTools,
          message: skill.allowedTools
            ? `Skill '${name}' activated. Restricted to tools: ${skill.allowedTools.join(", ")}`
            : `Skill '${name}' activated. Follow the instructions below.`,
        };
      } catch (error) {
        return { error: error instanceof Error ? error.message : "Unknown error" };
      }
    },
  };
}
