// The six sandbox tools with bashkit's names, inputs, outputs and `{error}` results, as AI SDK
// tool objects over knap-core's tool set (knap_core::agent_tools). With knap's own sandbox the
// core takes its native paths (a streaming Read, the in-process searcher, the descriptor-walking
// glob, a head+tail Bash capture); any other `Sandbox` object is driven through its interface.
// This file holds only the AI SDK side: descriptions, input schemas, the SDK options, the
// abort signal, and the cache's invalidation log.
import * as D from "./descriptions.mjs";
import { s, toolSchema } from "./schema.mjs";
import { call, tokenFor, nativeToolsFor } from "./native.mjs";

const errorMessage = (e) => (e instanceof Error ? e.message : typeof e === "string" ? e : "Unknown error");

/** The AI SDK's tool options (bashkit's `SDKToolOptions`), passed through to the tool object. */
export const SDK_TOOL_KEYS = ["strict", "needsApproval", "providerOptions"];
/** bashkit's `ToolConfig` (with knap's `maxResults`); Bash also takes `onProgress`. */
export const TOOL_CONFIG_KEYS = ["timeout", "maxFileSize", "maxOutputLength", "maxLineLength", "allowedPaths", "blockedCommands", "maxResults", ...SDK_TOOL_KEYS];

/** SDK options a ToolConfig passes through to the tool object. */
export function sdkOptions(config) {
  const out = {};
  if (config?.strict !== undefined) out.strict = config.strict;
  if (config?.needsApproval !== undefined) out.needsApproval = config.needsApproval;
  if (config?.providerOptions !== undefined) out.providerOptions = config.providerOptions;
  return out;
}

/**
 * The environment every tool of one tool set shares: the native tool set over the sandbox,
 * the invalidation log of the cache, and `abs` (a tool path resolved as the core resolves it,
 * for cache dependencies; a Promise).
 */
export function toolEnv(sandbox, { defaultTimeout, log } = {}) {
  const tools = nativeToolsFor(sandbox, defaultTimeout);
  // Resolved on the blocking pool (a deep path is many system calls), never on this thread.
  const abs = async (p) => (await tools.absolute(p === null || p === undefined || p === "" ? "." : String(p))) ?? null;
  return { sandbox, tools, log, abs };
}

/** bashkit's inputs are nullable with a `null` default ("use the default"): the core takes absent fields. */
function present(o) {
  const out = {};
  if (o && typeof o === "object") for (const [k, v] of Object.entries(o)) if (v !== null && v !== undefined) out[k] = v;
  return out;
}

/** The native tool of one config (an invalid `allowedPaths` pattern throws here, as bashkit's did when building). */
function nativeTool(env, config) {
  // Callbacks and the AI SDK's options stay on this side.
  const { onProgress, strict, needsApproval, providerOptions, ...native } = present(config);
  try {
    return env.tools.tool(native);
  } catch (error) {
    const e = new Error(error.message);
    e.code = "cave_tool_config_invalid";
    throw e;
  }
}

/** Notes a writing tool's effects in the cache's invalidation log; returns its result. */
function settle(env, r) {
  if (r.touchedAll) env.log?.invalidateAll();
  else if (r.touched.length) env.log?.invalidate(r.touched);
  return r.result;
}

/**
 * Calls the core; a thrown conversion error (a direct `execute` with input of the wrong type)
 * is an `{error}`, worded by the tool's schema check (as the AI SDK would have refused it) when
 * `schema` is given.
 */
async function run(fn, schema, input) {
  try {
    return await fn();
  } catch (error) {
    if (schema) {
      const checked = schema.validate(input ?? {});
      if (!checked.success) return { error: errorMessage(checked.error) };
    }
    return { error: errorMessage(error) };
  }
}

/**
 * A tool whose `execute` is one call of the native tool (`method`), honouring the AI SDK's
 * abort signal; a writing tool's (`writes`) effects go to the cache's invalidation log.
 */
function nativeCallTool(env, config, { description, inputSchema, method, writes = false }) {
  const t = nativeTool(env, config);
  const schema = toolSchema(inputSchema);
  const execute = writes
    ? async (input, token) => settle(env, await call(t[method](present(input), token)))
    : (input, token) => call(t[method](present(input), token));
  return { description, inputSchema: schema, ...sdkOptions(config), execute: withSignal(execute, schema) };
}

/** `execute` of a tool that honours the AI SDK's abort signal. */
function withSignal(fn, schema) {
  return async (input, options) => {
    const [token, dispose] = tokenFor(options?.abortSignal);
    try {
      return await run(() => fn(input, token), schema, input);
    } finally {
      dispose();
    }
  };
}

const bashSchema = s.object(
  {
    command: s.string("The command to execute"),
    timeout: s.nullable("number", "Optional timeout in milliseconds (max 600000)"),
    description: s.nullable("string", "Clear, concise description of what this command does in 5-10 words"),
    run_in_background: s.nullable("boolean", "Set to true to run this command in the background"),
  },
  ["command"],
);

/**
 * The native listener for Bash's `onProgress({ stream, chunk, skipped, toolCallId })`. Chunks
 * come from knap-core's progress buffer while the command runs (`skipped`: bytes dropped before
 * this chunk because the listener fell behind the 256 KiB buffer). The listener runs on the JS
 * thread between chunks; the first error it throws stops the deliveries and becomes the
 * call's result once the command has ended (an error is never swallowed).
 */
export function progressListener(deliver) {
  const state = { error: undefined };
  const listener = (c) => {
    if (state.error !== undefined) return undefined;
    try {
      deliver(c);
    } catch (error) {
      state.error = error;
    }
    return undefined;
  };
  return [listener, state];
}

function checkProgress(name, onProgress) {
  if (onProgress !== undefined && onProgress !== null && typeof onProgress !== "function") {
    const e = new Error(`cave_tool_config_invalid: ${name} onProgress must be a function, received ${typeof onProgress}\nhint: onProgress: ({ stream, chunk, skipped, toolCallId }) => process.stderr.write(chunk)`);
    e.code = "cave_tool_config_invalid";
    throw e;
  }
}

export function createBashTool(env, config = {}) {
  checkProgress("Bash", config?.onProgress);
  const t = nativeTool(env, config);
  const onProgress = config?.onProgress ?? undefined;
  const schema = toolSchema(bashSchema);
  return {
    description: D.BASH,
    inputSchema: schema,
    ...sdkOptions(config),
    async execute(input, options) {
      const toolCallId = options?.toolCallId;
      const [listener, state] = onProgress
        ? progressListener((c) => onProgress({ stream: c.stream, chunk: c.chunk, skipped: c.skipped, toolCallId }))
        : [undefined, undefined];
      const [token, dispose] = tokenFor(options?.abortSignal);
      try {
        const result = await run(async () => settle(env, await call(t.bash(present(input), token, listener))), schema, input);
        if (state?.error !== undefined) return { error: `onProgress threw: ${errorMessage(state.error)}` };
        return result;
      } finally {
        dispose();
      }
    },
  };
}

const readSchema = s.object(
  {
    file_path: s.string("Absolute path to file or directory"),
    offset: s.nullable("number", "Line number to start reading from (1-indexed)"),
    limit: s.nullable("number", "Maximum number of lines to read"),
  },
  ["file_path"],
);

export function createReadTool(env, config = {}) {
  return nativeCallTool(env, config, { description: D.READ, inputSchema: readSchema, method: "read" });
}

const writeSchema = s.object(
  { file_path: s.string("Path to the file to write"), content: s.string("Content to write to the file") },
  ["file_path", "content"],
);

export function createWriteTool(env, config = {}) {
  return nativeCallTool(env, config, { description: D.WRITE, inputSchema: writeSchema, method: "write", writes: true });
}

const editSchema = s.object(
  {
    file_path: s.string("The absolute path to the file to modify"),
    old_string: s.string("The text to replace"),
    new_string: s.string("The text to replace it with (must be different from old_string)"),
    replace_all: s.nullable("boolean", "Replace all occurrences of old_string (default false)"),
  },
  ["file_path", "old_string", "new_string"],
);

export function createEditTool(env, config = {}) {
  return nativeCallTool(env, config, { description: D.EDIT, inputSchema: editSchema, method: "edit", writes: true });
}

const globSchema = s.object(
  {
    pattern: s.string('Glob pattern to match files (e.g., "**/*.ts", "src/**/*.js", "*.md")'),
    path: s.nullable("string", "Directory to search in (defaults to working directory)"),
  },
  ["pattern"],
);

export function createGlobTool(env, config = {}) {
  return nativeCallTool(env, config, { description: D.GLOB, inputSchema: globSchema, method: "glob" });
}

const grepSchema = s.object(
  {
    pattern: s.string("The regular expression pattern to search for in file contents"),
    path: s.nullable("string", "File or directory to search in (defaults to cwd)"),
    glob: s.nullable("string", 'Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}")'),
    type: s.nullable("string", 'File type to search (e.g. "js", "py", "rust")'),
    output_mode: s.nullableEnum(
      ["content", "files_with_matches", "count"],
      'Output mode: "content" shows matching lines, "files_with_matches" shows file paths (default), "count" shows match counts',
    ),
    "-i": s.nullable("boolean", "Case insensitive search"),
    "-n": s.nullable("boolean", "Show line numbers in output. Requires output_mode: 'content'. Defaults to true."),
    "-B": s.nullable("number", "Number of lines to show before each match. Requires output_mode: 'content'."),
    "-A": s.nullable("number", "Number of lines to show after each match. Requires output_mode: 'content'."),
    "-C": s.nullable("number", "Number of lines to show before and after each match. Requires output_mode: 'content'."),
    head_limit: s.nullable("number", "Limit output to first N lines/entries. Works across all output modes. Defaults to 0 (unlimited)."),
    offset: s.nullable("number", "Skip first N lines/entries before applying head_limit. Works across all output modes. Defaults to 0."),
    multiline: s.nullable("boolean", "Enable multiline mode where patterns can span lines. Default: false."),
  },
  ["pattern"],
);

export function createGrepTool(env, config = {}) {
  return nativeCallTool(env, config, { description: D.GREP, inputSchema: grepSchema, method: "grep" });
}

const patchSchema = s.object({ patch: s.string(D.PATCH_FIELD) }, ["patch"]);

export function createPatchTool(env, config = {}) {
  const t = nativeTool(env, config);
  return {
    description: D.PATCH,
    inputSchema: toolSchema(patchSchema),
    ...sdkOptions(config),
    execute: (input) => run(async () => settle(env, await call(t.patch(String(input?.patch ?? ""))))),
  };
}
