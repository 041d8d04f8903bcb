// `@caveman-ai/agent/plugins`: Agent Skills (`.agents/skills/<name>/SKILL.md`) and plugin packages
// found on disk, and applying them to a definition (the skills index in the prompt, `load_skill`).
// Discovery, parsing, containment and the texts are knap-core's (`skills/`); this is the adapter.
import os from "node:os";
import path from "node:path";
import { native, call, codedError, deepFreeze } from "./native.mjs";
import { agent, context, schema, tool } from "./definition.mjs";

export const AGENT_PLUGINS_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json";
export const AGENT_SKILLS_CONTEXT_ID = "agent.skills";
export const AGENT_PLUGIN_COMMANDS_CONTEXT_ID = "agent.plugin-commands";

const thrown = (error) => {
  const message = error?.message ?? String(error);
  return codedError(error?.code ?? message.split(/[: ]/)[0], message);
};

const paths = (list) => (list ?? []).map((p) => path.resolve(String(p)));

/** The nearest ancestor of `cwd` (itself included) holding a `.git` entry, else `cwd`. */
export async function findAgentWorkspaceRoot(cwd) {
  return call(native.agentWorkspaceRoot(path.resolve(cwd)));
}

/** `loadAgentEnvironment(options)`: skills, plugin commands and plugins, with diagnostics. */
export async function loadAgentEnvironment(options = {}) {
  const o = {
    cwd: path.resolve(options.cwd ?? process.cwd()),
    homeDir: path.resolve(options.homeDir ?? os.homedir()),
    skillRoots: paths(options.skillRoots),
    pluginRoots: paths(options.pluginRoots),
    pluginCollections: paths(options.pluginCollections),
    includeDefaultRoots: options.includeDefaultRoots ?? true,
    includeWorkspacePlugin: options.includeWorkspacePlugin ?? true,
  };
  return deepFreeze(JSON.parse(await call(native.agentEnvironmentLoad(JSON.stringify(o)))));
}

/** `loadAgentPlugin(root)` → `{plugin, diagnostics}` (`plugin` undefined without a manifest). */
export async function loadAgentPlugin(root) {
  const r = JSON.parse(await call(native.agentPluginLoad(path.resolve(root))));
  return deepFreeze({ plugin: r.plugin ?? undefined, diagnostics: r.diagnostics });
}

/** `loadAgentSkillDirectory(root, {plugin?})` → `{skills, diagnostics}`. */
export async function loadAgentSkillDirectory(root, options = {}) {
  return deepFreeze(JSON.parse(await call(native.agentSkillDirectoryLoad(path.resolve(root), options.plugin ?? undefined))));
}

/** `parseAgentSkill(raw, {file, root, id?, plugin?})`: throws the first broken rule's code. */
export function parseAgentSkill(raw, options) {
  if (typeof raw !== "string") throw codedError("cave_agent_skill_size_invalid", `cave_agent_skill_size_invalid:${options?.file}:0`);
  try {
    return deepFreeze(JSON.parse(native.agentSkillParse(raw, String(options.file), String(options.root), options.id ?? undefined, options.plugin ?? undefined)));
  } catch (error) {
    throw thrown(error);
  }
}

/** A file inside the skill's root, verbatim (`SKILL.md` by default). */
export async function readAgentSkillResource(skill, resource = "SKILL.md") {
  return call(native.agentSkillResourceRead(skill.root, skill.id, String(resource)));
}

const entries = (list) => JSON.stringify(list.map((x) => ({ id: x.id, description: x.description })));

export function renderAgentSkillsIndex(skills) {
  return native.agentSkillsIndex(entries(skills));
}

export function renderAgentPluginCommandsIndex(commands) {
  return native.agentCommandsIndex(entries(commands));
}

export function renderAgentSkillInvocation(environment, id, request = "") {
  const skill = environment.skills.find((s) => s.id === id);
  if (!skill) throw codedError("cave_agent_skill_unknown", `cave_agent_skill_unknown:${id}`);
  return native.agentSkillInvocation(id, skill.body, String(request));
}

export function renderAgentPluginCommandInvocation(environment, id, request = "") {
  const command = environment.commands.find((c) => c.id === id);
  if (!command) throw codedError("cave_agent_plugin_command_unknown", `cave_agent_plugin_command_unknown:${id}`);
  return native.agentCommandInvocation(id, command.body, String(request));
}

/** `/skill <id> …` and `/<command> …` become invocations; any other prompt is returned as is. */
export function expandAgentEnvironmentSlashCommand(prompt, environment) {
  const map = (list) => JSON.stringify(Object.fromEntries(list.map((x) => [x.id, x.body])));
  try {
    return native.agentSlashExpand(String(prompt), map(environment.skills), map(environment.commands));
  } catch (error) {
    throw thrown(error);
  }
}

/** The `load_skill` tool over an environment's skills. */
function skillTool(environment, name) {
  return tool({
    name,
    description: "Load instructions or a contained resource from an available Agent Skill.",
    input: schema.object({ name: schema.string(), resource: schema.optional(schema.string()) }),
    effect: "read",
    result: "inline",
    execute: async (input) => {
      const skill = environment.skills.find((s) => s.id === input.name);
      if (!skill) {
        return `Unknown skill ${JSON.stringify(input.name)}. Available skills: ${environment.skills.map((s) => s.id).join(", ")}`;
      }
      return readAgentSkillResource(skill, input.resource ?? "SKILL.md");
    },
  });
}

/** A new definition with the environment's skills index, commands index and `load_skill` tool. */
export function applyAgentEnvironment(definition, environment, options = {}) {
  const skillToolName = options.skillToolName ?? "load_skill";
  const contexts = [];
  if (environment.skills.length) {
    contexts.push(context({ id: AGENT_SKILLS_CONTEXT_ID, kind: "skill", source: renderAgentSkillsIndex(environment.skills), stability: "build" }));
  }
  if (environment.commands.length) {
    contexts.push(context({ id: AGENT_PLUGIN_COMMANDS_CONTEXT_ID, kind: "skill", source: renderAgentPluginCommandsIndex(environment.commands), stability: "build" }));
  }
  for (const c of contexts) {
    if (definition.contexts.some((d) => d.id === c.id)) {
      throw codedError("cave_agent_environment_context_collision", `cave_agent_environment_context_collision:${c.id}`);
    }
  }
  const tools = [...definition.tools];
  if (environment.skills.length) {
    if (tools.some((t) => t.name === skillToolName)) {
      throw codedError("cave_agent_environment_tool_collision", `cave_agent_environment_tool_collision:${skillToolName}`);
    }
    tools.push(skillTool(environment, skillToolName));
  }
  return agent({
    id: definition.id,
    instructions: definition.instructions,
    model: definition.model,
    reasoning: definition.reasoning,
    tools,
    contexts: [...definition.contexts, ...contexts],
    ...(definition.memory !== undefined ? { memory: definition.memory } : {}),
    ...(definition.output !== undefined ? { output: definition.output } : {}),
    ...(definition.sandboxDeclared ? { sandbox: definition.sandbox } : {}),
  });
}

/** `{id: "agent-environment", apply(def)}` for `applyAgentDefinitionTransforms`. */
export function createAgentEnvironmentTransform(environment, options) {
  return Object.freeze({ id: "agent-environment", apply: (definition) => applyAgentEnvironment(definition, environment, options) });
}
