// The six sandbox tools with bashkit's names, inputs, outputs and `{error}` results. With
// knap's own sandbox they run in Rust (a streaming Read, an in-process ripgrep, a real glob, a
// head+tail capture for Bash); with any other `Sandbox` object they go through its interface.
import { posix } from "node:path";
import * as D from "./descriptions.mjs";
import { s, toolSchema } from "./schema.mjs";
import { middleTruncate } from "./context.mjs";
import { call, tokenFor } from "./native.mjs";
import { globMatcher } from "./globmatch.mjs";
import { createPathPolicy } from "./paths.mjs";

export const BASH_MAX_TIMEOUT_MS = 600_000;
export const DEFAULT_TIMEOUT_MS = 120_000;
export const BASH_MAX_OUTPUT_LENGTH = 30_000;
export const READ_MAX_LINES = 500;
export const READ_MAX_LINE_LENGTH = 2000;
export const READ_MAX_OUTPUT_LENGTH = 60_000;
const BINARY_EXTENSIONS = new Set(["pdf", "png", "jpg", "jpeg", "gif", "zip", "tar", "gz", "exe", "bin", "so", "dylib"]);

const errorMessage = (e) => (e instanceof Error ? e.message : typeof e === "string" ? e : "Unknown error");
export const shellQuote = (v) => `'${String(v).replace(/'/g, `'\\''`)}'`;

/** SDK options a ToolConfig passes through to the tool object. */
export function sdkOptions(config) {
  const out = {};
  if (config?.strict !== undefined) out.strict = config.strict;
  if (config?.needsApproval !== undefined) out.needsApproval = config.needsApproval;
  if (config?.providerOptions !== undefined) out.providerOptions = config.providerOptions;
  return out;
}

/**
 * The environment every tool of one tool set shares: the sandbox, its native handle (knap's
 * sandbox only), the workspace root, the invalidation log of the cache, and the default timeout.
 */
export function toolEnv(sandbox, knap, { defaultTimeout, log } = {}) {
  const root = knap?.root ?? (typeof sandbox?.workingDirectory === "string" ? sandbox.workingDirectory : undefined);
  /** Absolute form of a tool path (native realpath for knap's sandbox); `null` if outside. */
  const abs = (p) => {
    const path = p === null || p === undefined || p === "" ? "." : String(p);
    if (knap) {
      try {
        return knap.native.resolve(path);
      } catch {
        return null;
      }
    }
    return root ? posix.resolve(root, path) : posix.normalize(path);
  };
  return { sandbox, knap, root, log, abs, defaultTimeout: defaultTimeout ?? DEFAULT_TIMEOUT_MS, bgCounter: { n: 0 } };
}

export function timeoutFor(env, config) {
  return config?.timeout ?? env.defaultTimeout;
}

/** Runs `fn`, answering `{error}` if it takes longer than `ms`. */
export async function withTimeout(ms, name, fn) {
  if (!Number.isFinite(ms) || ms <= 0) return fn();
  let timer;
  const expired = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ error: `${name} timed out after ${ms}ms` }), ms);
  });
  try {
    return await Promise.race([fn(), expired]);
  } finally {
    clearTimeout(timer);
  }
}

function isEscape(error) {
  return error?.code === "cave_workspace_escape" || /escapes the workspace/.test(error?.message ?? "");
}

function pathError(env, error, path) {
  if (isEscape(error)) return { error: `Path is outside the working directory (${env.root}): ${path}` };
  return { error: errorMessage(error) };
}

/** `Path not allowed` unless the policy allows the resolved path. */
function checkAllowed(env, policy, path) {
  if (!policy) return null;
  const a = env.abs(path);
  if (a === null) return { error: `Path is outside the working directory (${env.root}): ${path}` };
  return policy.allows(a) ? null : { error: `Path not allowed: ${path}` };
}

function policyFor(env, config) {
  return createPathPolicy(config?.allowedPaths, env.root);
}

// -------------------------------------------------------------------------------------------
// Bash

const bashSchema = s.object(
  {
    command: s.string("The command to execute"),
    timeout: s.nullable("number", "Optional timeout in milliseconds (max 600000)"),
    description: s.nullable("string", "Clear, concise description of what this command does in 5-10 words"),
    run_in_background: s.nullable("boolean", "Set to true to run this command in the background"),
  },
  ["command"],
);

async function startInBackground(env, command) {
  const id = `bg_${process.pid}_${++env.bgCounter.n}`;
  const logFile = `/tmp/knap-bash-${id}.log`;
  const inner = `${shellQuote(command)} > ${shellQuote(logFile)} 2>&1 < /dev/null`;
  // Its own session (when setsid exists), so `destroy()` can stop the whole group.
  const launcher = `if command -v setsid >/dev/null 2>&1; then setsid sh -c ${inner} & else sh -c ${inner} & fi; echo $!`;
  const started = performance.now();
  const r = await env.sandbox.exec(launcher, { timeout: 10_000 });
  const pid = Number.parseInt(String(r.stdout).trim(), 10);
  if (r.exitCode !== 0 || !Number.isFinite(pid)) {
    return { error: `Failed to start the command in the background: ${r.stderr || r.stdout}` };
  }
  env.knap?.background.add(pid);
  return {
    stdout: `Started in the background (pid ${pid}). Its output goes to ${logFile}: read it with Bash (for example \`tail -n 50 ${logFile}\`); stop it with \`kill ${pid}\`.`,
    stderr: "",
    exit_code: 0,
    interrupted: false,
    duration_ms: Math.round(performance.now() - started),
    background: { pid, output_file: logFile },
  };
}

export function createBashTool(env, config = {}) {
  const maxOutputLength = config.maxOutputLength ?? BASH_MAX_OUTPUT_LENGTH;
  const blocked = config.blockedCommands ?? [];
  return {
    description: D.BASH,
    inputSchema: toolSchema(bashSchema),
    ...sdkOptions(config),
    async execute({ command, timeout, run_in_background }, options) {
      for (const b of blocked) {
        if (command.includes(b)) return { error: `Command blocked: contains '${b}'` };
      }
      try {
        if (run_in_background) return await startInBackground(env, command);
        const ms = Math.min(timeout ?? timeoutFor(env, config), BASH_MAX_TIMEOUT_MS);
        if (env.knap) {
          const [token, dispose] = tokenFor(options?.abortSignal);
          try {
            const r = await call(env.knap.native.exec(command, ms, undefined, maxOutputLength, token));
            return { stdout: r.stdout, stderr: r.stderr, exit_code: r.exitCode, interrupted: r.interrupted, duration_ms: r.durationMs };
          } finally {
            dispose();
          }
        }
        const r = await env.sandbox.exec(command, { timeout: ms });
        return {
          stdout: middleTruncate(r.stdout, maxOutputLength),
          stderr: middleTruncate(r.stderr, maxOutputLength),
          exit_code: r.exitCode,
          interrupted: r.interrupted,
          duration_ms: r.durationMs,
        };
      } catch (error) {
        return { error: errorMessage(error) };
      } finally {
        // Any command may have written anything.
        env.log?.invalidateAll();
      }
    },
  };
}

// -------------------------------------------------------------------------------------------
// Read

const readSchema = s.object(
  {
    file_path: s.string("Absolute path to file or directory"),
    offset: s.nullable("number", "Line number to start reading from (1-indexed)"),
    limit: s.nullable("number", "Maximum number of lines to read"),
  },
  ["file_path"],
);

function extensionOf(path) {
  return path.split(".").pop()?.toLowerCase() ?? "";
}

function binaryError(path, size) {
  const ext = extensionOf(path);
  return {
    error: `Cannot read binary file: ${path} (file exists, ${size} bytes). Use appropriate tools to process ${ext.toUpperCase()} files (e.g., Python scripts for PDFs).`,
  };
}

const tooLarge = (n) => ({
  error: `File is large (${n} lines). Use 'offset' and 'limit' to read in chunks. Example: offset=1, limit=100 for first 100 lines.`,
});

/** bashkit's Read over a whole text (for sandboxes that only offer `readFile`). */
function readText(path, content, { offset, limit, maxLines, maxLineLength, maxOutputLength }) {
  const nul = content.indexOf("\0");
  if (nul !== -1 && nul < 1000 && BINARY_EXTENSIONS.has(extensionOf(path))) return binaryError(path, content.length);
  const all = content.split("\n");
  if (!limit && all.length > maxLines) return tooLarge(all.length);
  const start = offset ? offset - 1 : 0;
  const end = limit ? start + limit : all.length;
  const cut = all.slice(start, end).map((l) => (l.length > maxLineLength ? `${l.slice(0, maxLineLength)}…` : l));
  return {
    type: "text",
    content: middleTruncate(cut.join("\n"), maxOutputLength),
    lines: cut.map((content, i) => ({ line_number: start + i + 1, content })),
    total_lines: all.length,
  };
}

export function createReadTool(env, config = {}) {
  const policy = policyFor(env, config);
  const opts = {
    maxLines: config.maxFileSize || READ_MAX_LINES,
    maxLineLength: config.maxLineLength ?? READ_MAX_LINE_LENGTH,
    maxOutputLength: config.maxOutputLength ?? READ_MAX_OUTPUT_LENGTH,
  };
  return {
    description: D.READ,
    inputSchema: toolSchema(readSchema),
    ...sdkOptions(config),
    execute: ({ file_path, offset, limit }) =>
      withTimeout(timeoutFor(env, config), "Read", async () => {
        const denied = checkAllowed(env, policy, file_path);
        if (denied) return denied;
        const o = Number.isFinite(offset) && offset > 0 ? Math.floor(offset) : null;
        const l = Number.isFinite(limit) && limit > 0 ? Math.floor(limit) : null;
        try {
          if (env.knap) {
            const r = JSON.parse(
              await call(
                env.knap.native.read(file_path, {
                  offset: o ?? undefined,
                  limit: l ?? undefined,
                  maxLinesWithoutLimit: opts.maxLines,
                  maxLineLength: opts.maxLineLength,
                  maxOutputLength: opts.maxOutputLength,
                }),
              ),
            );
            if (r.kind === "missing") return { error: `Path not found: ${file_path}` };
            if (r.kind === "too_large") return tooLarge(r.total_lines);
            if (r.type === "text") {
              if (r.nul_in_head && BINARY_EXTENSIONS.has(extensionOf(file_path))) return binaryError(file_path, r.size);
              return { type: "text", content: r.content, lines: r.lines, total_lines: r.total_lines };
            }
            return r;
          }
          const sb = env.sandbox;
          if (!(await sb.fileExists(file_path))) return { error: `Path not found: ${file_path}` };
          if (await sb.isDirectory(file_path)) {
            const entries = await sb.readDir(file_path);
            return { type: "directory", entries, count: entries.length };
          }
          return readText(file_path, await sb.readFile(file_path), { ...opts, offset: o, limit: l });
        } catch (error) {
          return pathError(env, error, file_path);
        }
      }),
  };
}

// -------------------------------------------------------------------------------------------
// Write

const writeSchema = s.object(
  { file_path: s.string("Path to the file to write"), content: s.string("Content to write to the file") },
  ["file_path", "content"],
);

export function createWriteTool(env, config = {}) {
  const policy = policyFor(env, config);
  return {
    description: D.WRITE,
    inputSchema: toolSchema(writeSchema),
    ...sdkOptions(config),
    execute: ({ file_path, content }) =>
      withTimeout(timeoutFor(env, config), "Write", async () => {
        const bytes = Buffer.byteLength(content, "utf8");
        if (config.maxFileSize && bytes > config.maxFileSize) {
          return { error: `File content exceeds maximum size of ${config.maxFileSize} bytes (got ${bytes})` };
        }
        const denied = checkAllowed(env, policy, file_path);
        if (denied) return denied;
        const target = env.abs(file_path);
        try {
          await env.sandbox.writeFile(file_path, content);
          return { message: `Successfully wrote to ${file_path}`, bytes_written: bytes, file_path };
        } catch (error) {
          return pathError(env, error, file_path);
        } finally {
          if (target) env.log?.invalidate([target]);
        }
      }),
  };
}

// -------------------------------------------------------------------------------------------
// Edit

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
  const policy = policyFor(env, config);
  return {
    description: D.EDIT,
    inputSchema: toolSchema(editSchema),
    ...sdkOptions(config),
    execute: ({ file_path, old_string, new_string, replace_all }) =>
      withTimeout(timeoutFor(env, config), "Edit", async () => {
        if (old_string === new_string) return { error: "old_string and new_string must be different" };
        if (old_string === "") return { error: "old_string must not be empty" };
        const denied = checkAllowed(env, policy, file_path);
        if (denied) return denied;
        const target = env.abs(file_path);
        let wrote = false;
        try {
          if (!(await env.sandbox.fileExists(file_path))) return { error: `File not found: ${file_path}` };
          const content = await env.sandbox.readFile(file_path);
          const parts = content.split(old_string);
          const occurrences = parts.length - 1;
          if (occurrences === 0) return { error: `String not found in file: "${old_string}"` };
          if (!replace_all && occurrences > 1) {
            return {
              error: `String appears ${occurrences} times in file. Use replace_all=true to replace all, or provide a more unique string.`,
            };
          }
          // Literal replacement: `new_string` is never read as a `$&`/`$1` pattern.
          const updated = parts.join(new_string);
          if (config.maxFileSize && Buffer.byteLength(updated, "utf8") > config.maxFileSize) {
            return { error: `File content exceeds maximum size of ${config.maxFileSize} bytes (got ${Buffer.byteLength(updated, "utf8")})` };
          }
          wrote = true;
          await env.sandbox.writeFile(file_path, updated);
          return { message: `Successfully edited ${file_path}`, file_path, replacements: occurrences };
        } catch (error) {
          return pathError(env, error, file_path);
        } finally {
          if (wrote && target) env.log?.invalidate([target]);
        }
      }),
  };
}

// -------------------------------------------------------------------------------------------
// Glob

const globSchema = s.object(
  {
    pattern: s.string('Glob pattern to match files (e.g., "**/*.ts", "src/**/*.js", "*.md")'),
    path: s.nullable("string", "Directory to search in (defaults to working directory)"),
  },
  ["pattern"],
);

function searchError(env, error, searchPath, name) {
  if (isEscape(error)) return { error: `Path is outside the working directory (${env.root}): ${searchPath}` };
  if (error?.code === "ENOENT") return { error: `Path not found: ${searchPath}` };
  if (error?.code === "ENOTDIR") return { error: `Not a directory: ${searchPath}` };
  if (error?.code === "ABORT_ERR") return { error: `${name} was aborted` };
  return { error: errorMessage(error) };
}

/** Keeps the output paths whose resolved form the policy allows. */
function filterAllowed(env, policy, searchPath, display, paths) {
  if (!policy) return paths;
  const base = env.abs(searchPath);
  const prefix = display.endsWith("/") ? display : `${display}/`;
  return paths.filter((p) => {
    if (!base) return false;
    const rel = p.startsWith(prefix) ? p.slice(prefix.length) : p === display ? "" : p;
    return policy.allows(rel ? posix.join(base, rel) : base);
  });
}

function displayOf(path) {
  const t = path.replace(/\/+$/, "");
  return path === "" ? "." : t === "" ? "/" : t;
}

export function createGlobTool(env, config = {}) {
  const policy = policyFor(env, config);
  return {
    description: D.GLOB,
    inputSchema: toolSchema(globSchema),
    ...sdkOptions(config),
    async execute({ pattern, path }, options) {
      const searchPath = path || ".";
      const ms = timeoutFor(env, config);
      if (policy) {
        const a = env.abs(searchPath);
        if (a === null || !policy.reaches(a)) return { error: `Path not allowed: ${searchPath}` };
      }
      const display = displayOf(searchPath);
      try {
        let matches;
        if (env.knap) {
          const [token, dispose] = tokenFor(options?.abortSignal);
          try {
            const r = JSON.parse(await call(env.knap.native.glob(pattern, searchPath, ms, token)));
            if (r.stopped) return { error: `Glob timed out after ${ms}ms` };
            matches = r.matches;
          } finally {
            dispose();
          }
        } else {
          let match;
          try {
            match = globMatcher(pattern);
          } catch (e) {
            return { error: `Invalid glob pattern: ${errorMessage(e)}` };
          }
          // Every file with its mtime (GNU find), else plain `find` (then in find's order).
          const cmd = `find ${shellQuote(searchPath)} -type f -printf '%T@\\t%p\\n' 2>/dev/null || find ${shellQuote(searchPath)} -type f 2>/dev/null`;
          const r = await env.sandbox.exec(cmd, { timeout: ms });
          if (r.interrupted) return { error: `Glob timed out after ${ms}ms` };
          const prefix = display.endsWith("/") ? display : `${display}/`;
          const rows = r.stdout
            .split("\n")
            .filter(Boolean)
            .map((line) => {
              const tab = line.indexOf("\t");
              const t = tab > 0 ? Number(line.slice(0, tab)) : Number.NaN;
              return Number.isFinite(t) ? { t, p: line.slice(tab + 1) } : { t: 0, p: line };
            });
          matches = rows
            .filter(({ p }) => match(p.startsWith(prefix) ? p.slice(prefix.length) : p))
            .sort((a, b) => b.t - a.t || (a.p < b.p ? -1 : a.p > b.p ? 1 : 0))
            .map(({ p }) => p);
        }
        matches = filterAllowed(env, policy, searchPath, display, matches);
        return { matches, count: matches.length, search_path: searchPath };
      } catch (error) {
        if (error?.code === "cave_glob_pattern") return { error: `Invalid glob pattern: ${error.message}` };
        return searchError(env, error, searchPath, "Glob");
      }
    },
  };
}

// -------------------------------------------------------------------------------------------
// Grep

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

const byPath = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

function page(list, offset, headLimit) {
  const from = Math.max(0, Math.floor(offset ?? 0));
  const h = Number.isFinite(headLimit) && headLimit > 0 ? Math.floor(headLimit) : undefined;
  return h === undefined ? list.slice(from) : list.slice(from, from + h);
}

/** Grep through `rg` in a sandbox that is not knap's (needs `sandbox.rgPath`). */
async function grepWithRg(env, input, mode, searchPath, ms, maxLineLength) {
  const rg = env.sandbox.rgPath;
  if (!rg) return { error: "Ripgrep not available. Call ensureSandboxTools(sandbox) before using Grep with remote sandboxes." };
  const flags = [];
  if (input["-i"]) flags.push("-i");
  if (input.multiline) flags.push("-U", "--multiline-dotall");
  if (input.glob) flags.push("-g", shellQuote(input.glob));
  if (input.type) flags.push("-t", shellQuote(input.type));
  const ctx = (v) => (Number.isFinite(v) && v > 0 ? Math.floor(v) : 0);
  if (mode === "content") {
    const c = ctx(input["-C"]);
    const b = c || ctx(input["-B"]);
    const a = c || ctx(input["-A"]);
    if (b) flags.push("-B", String(b));
    if (a) flags.push("-A", String(a));
  }
  const modeFlags = mode === "files_with_matches" ? ["-l"] : ["--json"];
  const cmd = `${shellQuote(rg)} ${[...modeFlags, ...flags].join(" ")} -e ${shellQuote(input.pattern)} -- ${shellQuote(searchPath)}`;
  const r = await env.sandbox.exec(cmd, { timeout: ms });
  if (r.interrupted) return { error: `Grep timed out after ${ms}ms` };
  if (r.exitCode === 2 && !r.stdout) return { error: r.stderr.trim() || "rg failed" };
  const cut = (t) => (t.length > maxLineLength ? `${t.slice(0, maxLineLength)}…` : t);
  const strip = (t) => t.replace(/\r?\n$/, "");
  if (mode === "files_with_matches") {
    const files = r.stdout.split("\n").filter(Boolean).sort(byPath);
    return { files };
  }
  const events = r.stdout
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return null;
      }
    })
    .filter(Boolean);
  if (mode === "count") {
    const counts = events.filter((e) => e.type === "end").map((e) => ({ file: e.data.path.text, count: e.data.stats.matches }));
    counts.sort((a, b) => byPath(a.file, b.file));
    return { counts };
  }
  const byFile = new Map();
  for (const e of events) {
    if (e.type !== "match" && e.type !== "context") continue;
    const file = e.data.path.text;
    if (!byFile.has(file)) byFile.set(file, []);
    byFile.get(file).push({ kind: e.type, n: e.data.line_number, text: cut(strip(e.data.lines.text)) });
  }
  const ctxOf = (v) => (Number.isFinite(v) && v > 0 ? Math.floor(v) : 0);
  const after = ctxOf(input["-C"]) || ctxOf(input["-A"]);
  const matches = [];
  for (const file of [...byFile.keys()].sort(byPath)) {
    const rows = byFile.get(file).sort((a, b) => a.n - b.n);
    let pending = [];
    let last = null;
    let lastEnd = 0;
    for (const row of rows) {
      if (row.kind === "match") {
        last = { file, line_number: row.n, line: row.text, before_context: pending, after_context: [] };
        lastEnd = row.n + (row.text.match(/\n/g)?.length ?? 0);
        pending = [];
        matches.push(last);
      } else if (last && row.n > lastEnd && row.n - lastEnd <= after) {
        // rg's grouping: a line within -A of the previous match is its after-context.
        last.after_context.push(row.text);
      } else {
        pending.push(row.text);
      }
    }
  }
  return {
    matches: matches.map((m) => {
      const out = { file: m.file, line_number: m.line_number, line: m.line };
      if (m.before_context.length) out.before_context = m.before_context;
      if (m.after_context.length) out.after_context = m.after_context;
      return out;
    }),
  };
}

export function createGrepTool(env, config = {}) {
  const policy = policyFor(env, config);
  const maxLineLength = config.maxLineLength ?? READ_MAX_LINE_LENGTH;
  return {
    description: D.GREP,
    inputSchema: toolSchema(grepSchema),
    ...sdkOptions(config),
    async execute(input, options) {
      const mode = input.output_mode ?? "files_with_matches";
      const searchPath = input.path || ".";
      const ms = timeoutFor(env, config);
      if (policy) {
        const a = env.abs(searchPath);
        if (a === null || !policy.reaches(a)) return { error: `Path not allowed: ${searchPath}` };
      }
      const display = displayOf(searchPath);
      // With allowedPaths, page after filtering (the native pager would count hidden entries).
      const pageNatively = !policy;
      try {
        let r;
        if (env.knap) {
          const [token, dispose] = tokenFor(options?.abortSignal);
          const opts = {
            pattern: input.pattern,
            path: searchPath,
            glob: input.glob ?? undefined,
            type: input.type ?? undefined,
            output_mode: mode,
            i: input["-i"] === true,
            multiline: input.multiline === true,
            before: input["-B"] ?? undefined,
            after: input["-A"] ?? undefined,
            context: input["-C"] ?? undefined,
            offset: pageNatively ? input.offset ?? undefined : undefined,
            head_limit: pageNatively ? input.head_limit ?? undefined : undefined,
            max_line_length: maxLineLength,
            timeout_ms: ms,
          };
          try {
            r = JSON.parse(await call(env.knap.native.grep(JSON.stringify(opts), token)));
          } finally {
            dispose();
          }
          if (r.stopped) return { error: `Grep timed out after ${ms}ms` };
        } else {
          r = await grepWithRg(env, input, mode, searchPath, ms, maxLineLength);
          if (r.error) return r;
        }
        const paged = !env.knap || !pageNatively;
        const keep = (p) => filterAllowed(env, policy, searchPath, display, [p]).length === 1;
        if (mode === "files_with_matches") {
          let files = policy ? r.files.filter(keep) : r.files;
          if (paged) files = page(files, input.offset, input.head_limit);
          return { files, count: files.length };
        }
        if (mode === "count") {
          let counts = policy ? r.counts.filter((c) => keep(c.file)) : r.counts;
          if (paged) counts = page(counts, input.offset, input.head_limit);
          return { counts, total: counts.reduce((sum, c) => sum + c.count, 0) };
        }
        let matches = policy ? r.matches.filter((m) => keep(m.file)) : r.matches;
        if (paged) matches = page(matches, input.offset, input.head_limit);
        return { matches, total_matches: matches.length };
      } catch (error) {
        if (error?.code === "cave_grep_regex") return { error: `Invalid regex: ${error.message.replace(/^invalid regex: /, "")}` };
        if (error?.code === "cave_grep_glob") return { error: `Invalid glob: ${error.message.replace(/^invalid glob: /, "")}` };
        if (error?.code === "cave_grep_type") return { error: error.message };
        return searchError(env, error, searchPath, "Grep");
      }
    },
  };
}
