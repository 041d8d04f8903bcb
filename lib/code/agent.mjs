// createCodingAgent(): the coding agent's definition — the six shell tools (with interactive
// command sessions on the local backend), the built-in coding instructions, a pinned model —
// plus its efficiency plan, recorded tool-output samples and close().
import path from "node:path";
import { native, codedError } from "../native.mjs";
import { agent, output, memory as memoryDefinition } from "../definition.mjs";
import { applyAgentDefinitionTransforms } from "../definition-extras.mjs";
import { shellTools, isLocalBackend, localExecutionBackend } from "../shell-tools.mjs";
import { createProgrammaticToolRuntime, PROGRAMMATIC_TOOL_NAME } from "../programmatic-tools.mjs";
import { codingLimits } from "../program/cell.mjs";
import { createCommandSessionRuntime } from "../command-session.mjs";

const L = codingLimits();

export const CODING_TOOL_OUTPUT_CAPS = Object.freeze({
  read_file: L.capReadFile,
  grep: L.capGrep,
  bash: L.capBash,
  write_file: L.capWriteFile,
  edit_file: L.capEditFile,
  read_tool_output: L.capReadToolOutput,
});

/** The breakers every coding turn runs with (no `retry`: retries need a declared budget). */
export const CODING_RUN_BREAKERS = Object.freeze({
  repeatedToolCalls: L.breakerRepeatedToolCalls,
  repeatedToolCallWindowTurns: L.breakerRepeatedWindowTurns,
  noProgressTurns: L.breakerNoProgressTurns,
  maxToolCallsPerTurn: L.breakerMaxToolCallsPerTurn,
});

/** Transforms whose output can be recovered exactly (`toon` is left out on purpose). */
export const RECOVERABLE_CODING_TRANSFORMS = Object.freeze(
  ["code", "diff", "json", "log", "search-result", "terminal", "text"].map((kind) => `caveman.engine.${kind}.v1`),
);

export const OBSERVE_ONLY_BANNER = [
  "cave: OBSERVE-ONLY — the Caveman engine/gateway is not available here.",
  "  Context transforms and gateway telemetry are OFF. Provider usage and local context estimates remain available.",
  "  Turn optimized mode on: npm i -g @caveman-ai/cli && caveman start",
].join("\n");

/** `capOutput(text, maxBytes)`: the first `maxBytes` bytes and the `output capped at` marker. */
export function capOutput(text, maxBytes) {
  return native.capOutput(String(text), maxBytes);
}

const OUTPUT_MAX_TOKENS = 8000;
const MAX_SAMPLES = 4;
const RETRY_CASCADE_RESERVE = 16_128;
const TOOL_SETS = Object.freeze({
  full: Object.freeze(["read_file", "grep", "bash", "write_file", "edit_file", "read_tool_output"]),
  "pebble-v1": Object.freeze(["read_file", "bash", "write_file", "edit_file"]),
});
/** The command-session limits the coding agent runs with (the runtime's own defaults differ). */
const COMMAND_SESSION_LIMITS = Object.freeze({
  maxSessions: 8,
  maxOutputBytes: 4 * 1024 * 1024,
  maxReadBytes: 64 * 1024,
  maxInputBytes: 64 * 1024,
  maxTimeoutMs: 120_000,
  maxWaitMs: 30_000,
});

// ---------- instructions ----------

const ROLE = [
  "You are a coding agent working inside one workspace directory; every path is relative to it.",
  "Read the code before you edit it, make the smallest change that works, and verify it with a command when one exists.",
].join("\n");
const TOOL_LINES = {
  read_file: [
    "- read_file: reads a file; each returned line starts with its line number and a tab.",
    "  Strip that prefix before copying text into a file, and keep the newlines.",
  ],
  grep: ["- grep: searches the workspace for a regular expression with ripgrep (grep fallback)."],
  bash: ["- bash: runs one shell command in the workspace and returns its combined output."],
  write_file: ["- write_file: creates a file; it overwrites an existing one only with overwrite."],
  edit_file: [
    "- edit_file: replaces an exact string in a file.",
    "  Give enough surrounding context for a unique match, or set replace_all.",
  ],
  read_tool_output: ["- read_tool_output: pages or searches captured output by its handle."],
};
const CAPPED = {
  full: [
    "Large outputs are capped. A capped shell result keeps its tail, where errors usually are.",
    "When a capped result carries a handle, page or search it with read_tool_output,",
    "instead of rerunning the same command.",
  ].join("\n"),
  "pebble-v1": "Large outputs are capped; narrow the request instead of repeating it unchanged.",
};
const RECOVERY = [
  "Recovery: a <cave-compressed> marker stands for content that is reversible.",
  "Call cave_retrieve with its recovery_handle to get the original bytes back.",
  "Retrieve before guessing.",
].join("\n");
const CLOSING = ["When you finish, say what changed, and why.", "Never claim that a command passed without running it."].join("\n");

/** The built-in coding instructions of a tool set (fixed text). */
export function codingInstructions(toolSet) {
  const tools = ["Tools:", ...TOOL_SETS[toolSet].flatMap((name) => TOOL_LINES[name])].join("\n");
  return [ROLE, tools, CAPPED[toolSet], RECOVERY, CLOSING].join("\n\n");
}

// ---------- model ----------

const CREDENTIAL_MODELS = Object.freeze([
  Object.freeze({ env: ["ANTHROPIC_API_KEY"], model: "anthropic/claude-sonnet-4-6" }),
  Object.freeze({ env: ["OPENAI_API_KEY"], model: "openai/gpt-5.5" }),
  Object.freeze({ env: ["GEMINI_API_KEY", "GOOGLE_API_KEY"], model: "google/gemini-2.5-pro" }),
]);

export const NO_CREDENTIAL_MESSAGE =
  "caveman-code: no supported provider credential found; set ANTHROPIC_API_KEY, OPENAI_API_KEY, or GEMINI_API_KEY";

function codingError(code, message, hint) {
  const error = codedError(code, message);
  if (hint) error.hint = hint;
  return error;
}

/**
 * The coding agent's model id: `model`, else `CAVE_MODEL`, else the one provider credential
 * present. Unlike `auto()`, several credentials are an error and `.caveman/provider.json` is
 * never read. The id is not looked up here; an unknown one fails at the first turn.
 */
export function resolveCodingModelID(model, env = process.env) {
  const requested = model ?? env.CAVE_MODEL;
  if (requested !== undefined && requested !== "") {
    const slash = typeof requested === "string" ? requested.indexOf("/") : -1;
    if (slash <= 0 || slash === requested.length - 1) {
      throw codingError("coding_model_invalid", "caveman-code: model must use provider/model format");
    }
    return requested;
  }
  const present = (name) => typeof env[name] === "string" && env[name] !== "";
  const found = CREDENTIAL_MODELS.filter((c) => c.env.some(present));
  if (found.length === 0) {
    throw codingError(
      "coding_provider_credentials_missing",
      NO_CREDENTIAL_MESSAGE,
      "caveman-code: to run offline, point it at a local server that speaks the Anthropic Messages API: " +
        "KNAP_PROVIDER_BASE_URL=http://127.0.0.1:8080 ANTHROPIC_API_KEY=local caveman-code",
    );
  }
  if (found.length > 1) {
    throw codingError("coding_provider_credentials_ambiguous", "caveman-code: multiple provider credentials found; set CAVE_MODEL to pick one");
  }
  return found[0].model;
}

// ---------- plan ----------

/** The default efficiency plan: only routes whose output can be recovered exactly. */
export function defaultCodingPlan(modelID, namespace) {
  return {
    schema_version: 1,
    plan_id: "caveman-code.default.recoverable-live-zone",
    model: modelID,
    reasoning: "none",
    segment_routes: [
      { segment_kind: "tool_result", transform_id: "caveman.engine.terminal.v1", fallback: "original" },
      { segment_kind: "history", transform_id: "caveman.engine.text.v1", fallback: "original" },
    ],
    budgets: {
      instructions: 64_000,
      tools: 32_000,
      memory: 8_000,
      history: 4_000_000,
      results_artifacts: 4_000_000,
      reasoning: 64_000,
      output: 512_000,
      retry_cascade_reserve: RETRY_CASCADE_RESERVE,
    },
    recovery: { namespace, tools: ["cave_retrieve"] },
    fallbacks: { unknown: "original", transform_error: "original", not_smaller: "original" },
  };
}

// ---------- createCodingAgent ----------

/** `createCodingAgent(options = {})`: see `CodingAgentOptions` in code.d.mts. */
export function createCodingAgent(options = {}) {
  options = options ?? {};
  const workspace = path.resolve(options.workspace ?? process.cwd());
  const backend = options.executionBackend;
  const id = options.id ?? "caveman-code";
  const modelID = resolveCodingModelID(options.model);
  const toolSet = options.toolSet ?? "full";
  if (!Object.hasOwn(TOOL_SETS, toolSet)) throw codedError("coding_tool_set_invalid", `coding_tool_set_invalid:${toolSet}`);
  const toolMode = options.toolMode ?? "direct";
  if (toolMode !== "direct" && toolMode !== "programmatic") throw codedError("coding_tool_mode_invalid", `coding_tool_mode_invalid:${toolMode}`);

  const local = isLocalBackend(backend);
  const spill = options.commandSessionSpill;
  if (!local && (options.commandSessions === true || spill !== undefined)) {
    throw codedError("cave_execution_backend_command_sessions_local_only");
  }
  if (options.commandSessions === false && spill !== undefined) throw codedError("cave_execution_backend_command_sessions_disabled");
  // Sessions are on by default on the local backend (reference §1.3); the runtime's own limits are
  // looser, so the coding agent passes its values. A bad spill is refused here by the runtime.
  const sessions =
    local && options.commandSessions !== false
      ? createCommandSessionRuntime({ ...COMMAND_SESSION_LIMITS, ...(spill !== undefined ? { spill } : {}) })
      : undefined;

  const samples = [];
  const record = (label, text) => {
    samples.push({ label, text });
    samples.sort((a, b) => b.text.length - a.text.length);
    samples.length = Math.min(samples.length, MAX_SAMPLES);
  };
  const memory = options.memory === true ? memoryDefinition({ namespace: id }) : options.memory || undefined;
  let instructions = codingInstructions(toolSet);
  if (options.instructions) instructions += `\n\n${options.instructions}`;
  let direct;
  try {
    direct = agent({
      id,
      instructions,
      model: modelID,
      reasoning: "off",
      sandbox: "host",
      output: output({ maxTokens: OUTPUT_MAX_TOKENS }),
      ...(memory ? { memory } : {}),
      tools: shellTools({
        workspace,
        executionBackend: backend ?? localExecutionBackend(),
        tools: TOOL_SETS[toolSet],
        ...(options.outputCaps ? { outputCaps: options.outputCaps } : {}),
        ...(sessions ? { commandSessions: sessions } : {}),
        onOutput: record,
      }),
    });
    direct = applyAgentDefinitionTransforms(direct, options.definitionTransforms ?? []);
  } catch (error) {
    sessions?.close().catch(() => {});
    throw error;
  }
  const programmaticTools =
    toolMode === "programmatic"
      ? createProgrammaticToolRuntime(direct, {
          speculate: options.speculativeToolCalls ?? true,
          ...(options.programmaticToolName !== undefined ? { toolName: options.programmaticToolName } : {}),
        })
      : undefined;
  let closing;
  return Object.freeze({
    definition: programmaticTools?.definition ?? direct,
    plan: defaultCodingPlan(modelID, id),
    workspace,
    modelID,
    toolMode,
    ...(programmaticTools ? { programmaticTools } : {}),
    samples,
    close() {
      closing ??= (async () => {
        await programmaticTools?.close();
        await sessions?.close();
      })();
      return closing;
    },
  });
}

export { PROGRAMMATIC_TOOL_NAME };
