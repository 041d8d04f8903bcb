// bashkit's system-context helpers: instruction files (`discoverInstructions`), the environment
// block (`collectEnvironment`, `formatEnvironment`), tool guidance (`buildToolGuidance`), the
// three joined (`buildSystemContext`), and `createPrepareStep`. The file walk, the commands and
// the texts are knap-core's (agent_tools::system_context) over the Sandbox trait, so a user's own
// sandbox object is read through its own methods; this file checks options and shapes results.
import { native, call, nativeToolsFor } from "./native.mjs";
import { codedError } from "../native.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";
import { CONTEXT_STATUS_CONFIG_KEYS, getContextStatus } from "./context-status.mjs";
import { COMPACTION_KEYS, createAutoCompaction } from "./compaction.mjs";

const INSTRUCTION_KEYS = ["cwd", "filenames", "rootMarkers", "maxBytes", "globalPath"];
const ENVIRONMENT_KEYS = ["git", "timezone", "custom"];
const ENVIRONMENT_FIELDS = ["cwd", "shell", "platform", "date", "timezone", "gitBranch", "gitStatus"];
const GUIDANCE_KEYS = ["tools", "hints", "guidelines"];
const SYSTEM_KEYS = ["instructions", "environment", "toolGuidance"];
const PREPARE_STEP_KEYS = ["compaction", "contextStatus", "planModeState", "extend"];
const CONTEXT_STATUS_KEYS = ["maxTokens", "config"];

/** The user message `createPrepareStep` adds while plan mode is active (bashkit's words). */
export const PLAN_MODE_HINT =
  "<plan_mode>PLAN MODE ACTIVE — use read-only tools (Read, Grep, Glob) to gather information. Call ExitPlanMode when your plan is ready.</plan_mode>";

const describe = (v) => (v === null ? "null" : Array.isArray(v) ? "an array" : typeof v);

function invalid(where, what, value, hint) {
  return codedError(
    "cave_context_config_invalid",
    `cave_context_config_invalid: ${where} ${what}, received ${describe(value)}${hint ? `\nhint: ${hint}` : ""}`,
  );
}

const isRecord = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** Refuses what is not a plain options object, then the keys knap does not read. */
function options(where, value, keys) {
  if (value === undefined) return {};
  if (!isRecord(value)) throw invalid(where, "takes an options object", value);
  refuseUnknownKeys(where, value, keys);
  return value;
}

function stringOption(where, name, v) {
  if (v !== undefined && typeof v !== "string") throw invalid(where, `${name} must be a string`, v);
  return v;
}

function stringsOption(where, name, v, required = false) {
  if (v === undefined && !required) return undefined;
  if (!Array.isArray(v) || v.some((s) => typeof s !== "string")) throw invalid(where, `${name} must be an array of strings`, v);
  return v.slice();
}

/** A `Record<string, string>` as ordered `{key, value}` fields (the order `Object.entries` gives). */
function fieldsOption(where, name, v) {
  if (v === undefined) return undefined;
  if (!isRecord(v)) throw invalid(where, `${name} must be an object of strings`, v);
  return Object.entries(v).map(([key, value]) => {
    if (typeof value !== "string") throw invalid(where, `${name}.${key} must be a string`, value);
    return { key, value };
  });
}

function booleanOption(where, name, v) {
  if (v !== undefined && typeof v !== "boolean") throw invalid(where, `${name} must be a boolean`, v);
  return v;
}

function positiveNumber(where, name, v) {
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) throw invalid(where, `${name} must be a positive number`, v);
  return v;
}

function instructionsOptions(where, config) {
  const c = options(where, config, INSTRUCTION_KEYS);
  const maxBytes = c.maxBytes;
  if (maxBytes !== undefined && !(Number.isInteger(maxBytes) && maxBytes >= 0)) {
    throw invalid(where, "maxBytes must be a non-negative integer", maxBytes, "the default is 32768");
  }
  return {
    cwd: stringOption(where, "cwd", c.cwd),
    filenames: stringsOption(where, "filenames", c.filenames),
    rootMarkers: stringsOption(where, "rootMarkers", c.rootMarkers),
    maxBytes,
    globalPath: stringOption(where, "globalPath", c.globalPath),
  };
}

function environmentOptions(where, config) {
  const c = options(where, config, ENVIRONMENT_KEYS);
  return {
    git: booleanOption(where, "git", c.git),
    timezone: booleanOption(where, "timezone", c.timezone),
    custom: fieldsOption(where, "custom", c.custom),
  };
}

function guidanceOptions(where, config) {
  if (!isRecord(config)) throw invalid(where, "takes { tools, hints?, guidelines? }", config);
  refuseUnknownKeys(where, config, GUIDANCE_KEYS);
  return {
    tools: stringsOption(where, "tools", config.tools, true),
    hints: fieldsOption(where, "hints", config.hints),
    guidelines: stringsOption(where, "guidelines", config.guidelines),
  };
}

/** Refuses a sandbox without the methods the helper calls. */
function requireSandbox(where, sandbox, methods) {
  if (sandbox !== null && typeof sandbox === "object" && methods.every((m) => typeof sandbox[m] === "function")) return;
  throw codedError(
    "cave_sandbox_invalid",
    `cave_sandbox_invalid: ${where} needs a Sandbox with ${methods.join(", ")}\nhint: use createLocalSandbox({ workingDirectory }) or your own object implementing bashkit's Sandbox`,
  );
}

const sources = (list) => list.map((s) => ({ path: s.path, scope: s.scope, bytes: s.bytes, truncated: s.truncated }));

/** bashkit's `EnvironmentContext`: every key present, the missing ones `undefined`. */
const environmentContext = (e) => ({
  cwd: e.cwd,
  shell: e.shell,
  platform: e.platform,
  date: e.date,
  timezone: e.timezone ?? undefined,
  gitBranch: e.gitBranch ?? undefined,
  gitStatus: e.gitStatus ?? undefined,
});

/**
 * AGENTS.md (else CLAUDE.md) of each directory from the sandbox's working directory (or `cwd`)
 * up to the one holding `.git`, outermost first, joined and cut at `maxBytes` (32,768) — or
 * `null` when there is none.
 */
export async function discoverInstructions(sandbox, config) {
  const where = "discoverInstructions";
  const opts = instructionsOptions(where, config);
  requireSandbox(where, sandbox, ["fileExists", "readFile"]);
  const found = await call(nativeToolsFor(sandbox).discoverInstructions(opts));
  return found ? { text: found.text, sources: sources(found.sources) } : null;
}

/** The shell, platform, date, timezone and git state, through `sandbox.exec` (5 s per command). */
export async function collectEnvironment(sandbox, config) {
  const where = "collectEnvironment";
  // `custom` is checked but, as in bashkit, only formatEnvironment / buildSystemContext print it.
  const opts = environmentOptions(where, config);
  requireSandbox(where, sandbox, ["exec"]);
  return environmentContext(await call(nativeToolsFor(sandbox).collectEnvironment(opts)));
}

/** `<environment_context>` with a tag per field, then the `custom` fields. */
export function formatEnvironment(env, custom) {
  const where = "formatEnvironment";
  if (!isRecord(env)) throw invalid(where, "takes an EnvironmentContext", env, "use collectEnvironment(sandbox)");
  refuseUnknownKeys(`${where} env`, env, ENVIRONMENT_FIELDS);
  for (const name of ENVIRONMENT_FIELDS) {
    const required = name === "cwd" || name === "shell" || name === "platform" || name === "date";
    if (required ? typeof env[name] !== "string" : env[name] !== undefined && typeof env[name] !== "string") {
      throw invalid(where, `env.${name} must be a string`, env[name]);
    }
  }
  return native.bashkitFormatEnvironment(environmentContext(env), fieldsOption(where, "custom", custom));
}

/** `## Available Tools` with a one-line hint per registered tool, then `## Guidelines`. */
export function buildToolGuidance(config) {
  return native.bashkitToolGuidance(guidanceOptions("buildToolGuidance", config));
}

/** `true` or an options object turns a section on; `undefined` or `false` leaves it out. */
function section(where, name, value, parse) {
  if (value === undefined || value === false) return undefined;
  if (value === true) return parse(`${where} ${name}`, undefined);
  if (isRecord(value)) return parse(`${where} ${name}`, value);
  throw invalid(where, `${name} must be true, false or an options object`, value);
}

/**
 * The instructions, environment and tool guidance sections (each `null` unless asked for), all
 * of them joined in `combined`, and what was found in `meta`. Call it once at start-up: the
 * system prompt stays the same for every step, so a provider's prompt cache keeps working.
 */
export async function buildSystemContext(sandbox, config) {
  const where = "buildSystemContext";
  const c = options(where, config, SYSTEM_KEYS);
  const opts = {
    instructions: section(where, "instructions", c.instructions, instructionsOptions),
    environment: section(where, "environment", c.environment, environmentOptions),
    toolGuidance: c.toolGuidance === undefined || c.toolGuidance === null || c.toolGuidance === false ? undefined : guidanceOptions(`${where} toolGuidance`, c.toolGuidance),
  };
  const methods = [...(opts.instructions ? ["fileExists", "readFile"] : []), ...(opts.environment ? ["exec"] : [])];
  let built;
  if (methods.length) {
    requireSandbox(where, sandbox, methods);
    built = await call(nativeToolsFor(sandbox).buildSystemContext(opts));
  } else {
    // Tool guidance alone reads nothing from the sandbox.
    const toolGuidance = opts.toolGuidance ? native.bashkitToolGuidance(opts.toolGuidance) : undefined;
    built = { toolGuidance, combined: toolGuidance ?? "" };
  }
  return {
    instructions: built.instructions ?? null,
    environment: built.environment ?? null,
    toolGuidance: built.toolGuidance ?? null,
    combined: built.combined,
    meta: {
      instructionSources: built.instructionSources ? sources(built.instructionSources) : undefined,
      environmentContext: built.environmentContext ? environmentContext(built.environmentContext) : undefined,
    },
  };
}

function prepareStepOptions(config) {
  const where = "createPrepareStep";
  const c = options(where, config, PREPARE_STEP_KEYS);
  if (c.compaction !== undefined) {
    const k = options(`${where} compaction`, c.compaction, COMPACTION_KEYS);
    positiveNumber(`${where} compaction`, "maxTokens", k.maxTokens);
    if (!k.summarizerModel) throw invalid(`${where} compaction`, "needs a summarizerModel", k.summarizerModel, "the model that writes the summary, e.g. a small fast one");
  }
  if (c.contextStatus !== undefined) {
    const s = options(`${where} contextStatus`, c.contextStatus, CONTEXT_STATUS_KEYS);
    positiveNumber(`${where} contextStatus`, "maxTokens", s.maxTokens);
    options(`${where} contextStatus.config`, s.config, CONTEXT_STATUS_CONFIG_KEYS);
  }
  if (c.planModeState !== undefined && !isRecord(c.planModeState)) {
    throw invalid(where, "planModeState must be the state object of createAgentTools({ planMode: true })", c.planModeState);
  }
  if (c.extend !== undefined && typeof c.extend !== "function") throw invalid(where, "extend must be a function", c.extend);
  return c;
}

/**
 * An AI SDK `prepareStep`: compacts the messages when `compaction` says so, then appends a
 * `<context_status>` user message when the context is high or critical, and a `<plan_mode>` one
 * while plan mode is active; `extend` runs last, on those messages. It never sets `system`.
 */
export function createPrepareStep(config) {
  const c = prepareStepOptions(config);
  const compaction = c.compaction ? createAutoCompaction(c.compaction) : undefined;
  return async (args) => {
    let messages = args.messages;
    if (compaction) {
      const compacted = await compaction.prepareStep(args);
      if (compacted?.messages) messages = compacted.messages;
    }
    const added = [];
    if (c.contextStatus) {
      const status = getContextStatus(messages, c.contextStatus.maxTokens, c.contextStatus.config);
      if (status.guidance) added.push({ role: "user", content: `<context_status>${status.guidance}</context_status>` });
    }
    if (c.planModeState?.isActive) added.push({ role: "user", content: PLAN_MODE_HINT });
    const changed = messages !== args.messages || added.length > 0 ? [...messages, ...added] : undefined;
    const extended = c.extend ? await c.extend({ ...args, messages: changed ?? args.messages }) : undefined;
    const result = { ...extended };
    // extend saw our messages: what it returns replaces them.
    if (changed && !extended?.messages) result.messages = changed;
    return result;
  };
}
