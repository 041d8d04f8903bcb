// bashkit's system-context helpers over the user's Sandbox: instruction files (AGENTS.md /
// CLAUDE.md from the working directory up to the project root), the environment block, tool
// guidance, their assembly into one system-prompt section, and the AI SDK `prepareStep` that
// compacts and injects context-status and plan-mode notes. Every file and command goes through
// the sandbox (`fileExists`, `readFile`, `exec`); the texts are bashkit 0.7.1's, so a prompt
// built on knap reads as one built on bashkit.
import { createAutoCompaction } from "./compaction.mjs";
import { getContextStatus } from "./context-status.mjs";

const DEFAULT_FILENAMES = ["AGENTS.md", "CLAUDE.md"];
const DEFAULT_ROOT_MARKERS = [".git"];
const DEFAULT_MAX_BYTES = 32_768;
const SECTION_SEPARATOR = "\n\n--- project-doc ---\n\n";
const ENV_TIMEOUT_MS = 5_000;

/** The directory above `dir` as bashkit walks it: the last `/segment` dropped. */
const parentOf = (dir) => dir.replace(/\/[^/]+$/, "");

/**
 * `discoverInstructions(sandbox, config?)`: from `cwd` (default: the sandbox's working
 * directory) up to the first directory holding a root marker (or the top), the first of
 * `filenames` found in each directory, outermost first, joined with `--- project-doc ---`
 * and cut at `maxBytes` characters (the last source is then marked `truncated`); a
 * `globalPath` file goes first. `null` when nothing was found.
 */
export async function discoverInstructions(sandbox, config = {}) {
  const filenames = config.filenames ?? DEFAULT_FILENAMES;
  const markers = config.rootMarkers ?? DEFAULT_ROOT_MARKERS;
  const maxBytes = config.maxBytes ?? DEFAULT_MAX_BYTES;
  const cwd = config.cwd ?? sandbox.workingDirectory ?? "/tmp";
  const walked = [];
  let root = null;
  for (let dir = cwd; ; dir = parentOf(dir)) {
    let beyond = false;
    for (const marker of markers) {
      try {
        if (await sandbox.fileExists(`${dir}/${marker}`)) root = dir;
      } catch {
        // knap: a contained sandbox refuses paths outside its workspace (bashkit's walk would
        // reject with that error); the walk ends at what the sandbox can see.
        beyond = true;
      }
    }
    if (beyond) break;
    walked.push(dir);
    if (root !== null || parentOf(dir) === dir) break;
  }
  const texts = [];
  const sources = [];
  for (const dir of walked.reverse()) {
    for (const name of filenames) {
      const file = `${dir}/${name}`;
      try {
        if (!(await sandbox.fileExists(file))) continue;
        const text = await sandbox.readFile(file);
        texts.push(text);
        sources.push({ path: file, scope: dir !== cwd && dir === root ? "project" : "local", bytes: text.length, truncated: false });
        break;
      } catch {
        // An unreadable candidate is skipped, as bashkit does; the next name is tried.
      }
    }
  }
  if (config.globalPath) {
    try {
      if (await sandbox.fileExists(config.globalPath)) {
        const text = await sandbox.readFile(config.globalPath);
        texts.unshift(text);
        sources.unshift({ path: config.globalPath, scope: "global", bytes: text.length, truncated: false });
      }
    } catch {
      // An unreadable global file is left out.
    }
  }
  if (texts.length === 0) return null;
  let text = texts.join(SECTION_SEPARATOR);
  if (text.length > maxBytes) {
    text = text.slice(0, maxBytes);
    sources[sources.length - 1].truncated = true;
  }
  return { text, sources };
}

/** One command's trimmed stdout through the sandbox, or `undefined` when it fails. */
async function probe(sandbox, command) {
  try {
    const r = await sandbox.exec(command, { timeout: ENV_TIMEOUT_MS });
    return r?.stdout?.trim();
  } catch {
    return undefined;
  }
}

/**
 * `collectEnvironment(sandbox, config?)`: the working directory, `$SHELL`, the platform, today's
 * date (UTC), and unless turned off the time zone and the git branch and changed-file count, each
 * probed through the sandbox with a 5 s timeout (a failed probe leaves its field out).
 */
export async function collectEnvironment(sandbox, config = {}) {
  const git = config.git !== false;
  const [shell, gitBranch, gitStatus, timezone] = await Promise.all([
    probe(sandbox, "echo $SHELL"),
    git ? probe(sandbox, "git branch --show-current 2>/dev/null") : undefined,
    git ? probe(sandbox, "git status --porcelain 2>/dev/null | wc -l") : undefined,
    config.timezone !== false ? probe(sandbox, "date +%Z 2>/dev/null") : undefined,
  ]);
  return {
    cwd: sandbox.workingDirectory ?? "/tmp",
    shell: shell ?? "unknown",
    platform: process.platform,
    date: new Date().toISOString().slice(0, 10),
    timezone: timezone || undefined,
    gitBranch: gitBranch || undefined,
    gitStatus: gitStatus || undefined,
  };
}

/** `formatEnvironment(env, custom?)`: the `<environment_context>` block (Codex's shape). */
export function formatEnvironment(env, custom) {
  const field = (tag, value) => `  <${tag}>${value}</${tag}>`;
  const lines = ["<environment_context>", field("cwd", env.cwd), field("shell", env.shell), field("platform", env.platform), field("date", env.date)];
  if (env.timezone) lines.push(field("timezone", env.timezone));
  if (env.gitBranch) lines.push(field("git_branch", env.gitBranch));
  if (env.gitStatus) lines.push(field("git_changed_files", env.gitStatus));
  for (const [tag, value] of Object.entries(custom ?? {})) lines.push(field(tag, value));
  lines.push("</environment_context>");
  return lines.join("\n");
}

// bashkit 0.7.1's one-line hints per tool (MIT), verbatim: a drop-in's prompt keeps them.
const TOOL_HINTS = {
  Bash: "Execute shell commands. Prefer Read/Grep/Glob over bash for file exploration.",
  Read: "Read files or list directories. Use offset/limit for large files.",
  Write: "Create or overwrite files. Read first before overwriting.",
  Edit: "Replace exact strings in files. Prefer over Write for modifications.",
  Patch: "Apply multi-hunk, multi-file edits in apply-patch format. Use for bulk edits, file additions/deletions, and renames.",
  Glob: "Find files by pattern. Faster than bash find.",
  Grep: "Search file contents with regex. Faster than bash grep.",
  WebSearch: "Search the web. Use for current information.",
  WebFetch: "Fetch and analyze a URL.",
  Task: "Spawn sub-agents for complex parallel work.",
  TodoWrite: "Track multi-step task progress.",
};

/** `buildToolGuidance({tools, hints?, guidelines?})`: `## Available Tools` (tools with a hint only), then `## Guidelines`. */
export function buildToolGuidance(config) {
  const hints = { ...TOOL_HINTS, ...config.hints };
  const lines = ["## Available Tools"];
  for (const name of config.tools) {
    if (hints[name]) lines.push(`- **${name}**: ${hints[name]}`);
  }
  if (config.guidelines?.length) {
    lines.push("", "## Guidelines", ...config.guidelines.map((g) => `- ${g}`));
  }
  return lines.join("\n");
}

const enabled = (option) => option !== undefined && option !== false;

/**
 * `buildSystemContext(sandbox, config?)`: each section only when asked for — the instructions
 * (`# Project Instructions` around `<INSTRUCTIONS>`), the environment block, the tool guidance —
 * and `combined`, the present ones joined by a blank line. Meant to run once per session, so the
 * system prompt (and the provider's prompt cache) stays put.
 */
export async function buildSystemContext(sandbox, config = {}) {
  const own = (option) => (typeof option === "object" ? option : undefined);
  const [found, env] = await Promise.all([
    enabled(config.instructions) ? discoverInstructions(sandbox, own(config.instructions)) : null,
    enabled(config.environment) ? collectEnvironment(sandbox, own(config.environment)) : null,
  ]);
  const instructions = found ? `# Project Instructions\n<INSTRUCTIONS>\n${found.text}\n</INSTRUCTIONS>` : null;
  const environment = env ? formatEnvironment(env, own(config.environment)?.custom) : null;
  const toolGuidance = config.toolGuidance ? buildToolGuidance(config.toolGuidance) : null;
  return {
    instructions,
    environment,
    toolGuidance,
    combined: [instructions, environment, toolGuidance].filter(Boolean).join("\n\n"),
    meta: { instructionSources: found?.sources, environmentContext: env ?? undefined },
  };
}

const PLAN_MODE_NOTE = "<plan_mode>PLAN MODE ACTIVE — use read-only tools (Read, Grep, Glob) to gather information. Call ExitPlanMode when your plan is ready.</plan_mode>";

/**
 * `createPrepareStep({compaction?, contextStatus?, planModeState?, extend?})`: an AI SDK
 * `prepareStep` that compacts the messages (`createAutoCompaction`), then appends the context
 * status guidance and the plan-mode note as user messages, then runs `extend` on the result.
 * It never sets `system`: the system prompt stays static for prompt caching.
 */
export function createPrepareStep(config) {
  const compaction = config.compaction ? createAutoCompaction(config.compaction) : null;
  return async (args) => {
    let messages = args.messages;
    if (compaction) {
      const compacted = await compaction.prepareStep(args);
      if (compacted?.messages) messages = compacted.messages;
    }
    const notes = [];
    if (config.contextStatus) {
      const status = getContextStatus(messages, config.contextStatus.maxTokens, config.contextStatus.config);
      if (status.guidance) notes.push({ role: "user", content: `<context_status>${status.guidance}</context_status>` });
    }
    if (config.planModeState?.isActive) notes.push({ role: "user", content: PLAN_MODE_NOTE });
    const changed = messages !== args.messages || notes.length > 0 ? [...messages, ...notes] : undefined;
    const extended = config.extend ? await config.extend({ ...args, messages: changed ?? args.messages }) : undefined;
    const out = { ...extended };
    if (changed && !extended?.messages) out.messages = changed;
    return out;
  };
}
