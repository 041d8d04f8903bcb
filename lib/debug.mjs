// Debug tracing for tool calls: `KNAP_DEBUG` (or bashkit's `BASHKIT_DEBUG`, read by the same code)
//   1 | stderr   one human-readable line per tool start / end / error / cache hit, on stderr
//   json       one JSON event per line on stderr
//   memory     events kept in memory, read with getDebugLogs()
//   file:PATH  one JSON event per line appended to PATH
// Events are bashkit's `DebugEvent` ({id, ts, tool, event, input?, output?, summary?,
// duration_ms?, parent?, error?}); inputs and outputs are summarised (strings cut at 4,000
// characters, arrays at 20 items, nesting at 5 levels) so a trace never holds a whole file.
import { appendFileSync } from "node:fs";
import { AsyncLocalStorage } from "node:async_hooks";

const MAX_STRING = 4000;
const MAX_ITEMS = 20;
const MAX_DEPTH = 5;

const state = { mode: "off", file: undefined, logs: [], counters: new Map() };
const parents = new AsyncLocalStorage();

function readMode() {
  const value = process.env.KNAP_DEBUG || process.env.BASHKIT_DEBUG || "";
  state.file = undefined;
  if (value === "" || value === "0" || value === "false") state.mode = "off";
  else if (value === "json" || value === "memory") state.mode = value;
  else if (value.startsWith("file:")) {
    state.mode = "file";
    state.file = value.slice(5);
  } else state.mode = "stderr";
}
readMode();

export const isDebugEnabled = () => state.mode !== "off";
export const getDebugLogs = () => [...state.logs];
export function clearDebugLogs() {
  state.logs = [];
  state.counters.clear();
}
/** Reads `KNAP_DEBUG` / `BASHKIT_DEBUG` again. */
export function reinitDebugMode() {
  clearDebugLogs();
  readMode();
}

export function summarize(value, depth = 0) {
  if (depth > MAX_DEPTH) return "[nested object]";
  if (value === null || value === undefined || typeof value === "number" || typeof value === "boolean") return value;
  if (typeof value === "string") {
    return value.length <= MAX_STRING ? value : `${value.slice(0, MAX_STRING)}... [truncated, ${value.length - MAX_STRING} more chars]`;
  }
  if (Array.isArray(value)) {
    const items = value.slice(0, MAX_ITEMS).map((v) => summarize(v, depth + 1));
    return value.length > MAX_ITEMS ? [...items, `[${value.length - MAX_ITEMS} more items]`] : items;
  }
  if (typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = summarize(v, depth + 1);
    return out;
  }
  return String(value);
}

const pairs = (obj, limit) =>
  Object.entries(obj ?? {})
    .slice(0, limit)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(" ");

function emit(event) {
  if (state.mode === "memory") state.logs.push(event);
  else if (state.mode === "json") process.stderr.write(`${JSON.stringify(event)}\n`);
  else if (state.mode === "file") {
    try {
      appendFileSync(state.file, `${JSON.stringify(event)}\n`);
    } catch {
      // tracing must never fail the tool call it observes
    }
  } else if (state.mode === "stderr") {
    const indent = "  ".repeat(parents.getStore()?.depth ?? 0);
    const head = `${indent}[knap:${event.tool}]`;
    if (event.event === "start") process.stderr.write(`${head} → ${pairs(event.input, 3)}\n`);
    else if (event.event === "end") process.stderr.write(`${head} ← ${event.duration_ms}ms ${pairs(event.summary)}\n`);
    else process.stderr.write(`${head} ✗ ${event.error}\n`);
  }
}

function nextId(tool) {
  const n = (state.counters.get(tool) ?? 0) + 1;
  state.counters.set(tool, n);
  return `${tool}-${n}`;
}

/** Starts a traced call; returns its id ("" when tracing is off). */
export function debugStart(tool, input) {
  if (state.mode === "off") return "";
  const id = nextId(tool);
  emit({ id, ts: Date.now(), tool, event: "start", input: input === undefined ? undefined : summarize(input), parent: parents.getStore()?.parentId });
  return id;
}

export function debugEnd(id, tool, { output, summary, duration_ms }) {
  if (state.mode === "off" || !id) return;
  emit({ id, ts: Date.now(), tool, event: "end", output: output === undefined ? undefined : summarize(output), summary, duration_ms });
}

export function debugError(id, tool, error) {
  if (state.mode === "off" || !id) return;
  emit({ id, ts: Date.now(), tool, event: "error", error: error instanceof Error ? error.message : String(error) });
}

/** Runs `fn` with `parentId` as the parent of the calls it traces (sub-agents nest). */
export function runWithDebugParent(parentId, fn) {
  if (state.mode === "off" || !parentId) return fn();
  const depth = (parents.getStore()?.depth ?? 0) + 1;
  return parents.run({ parentId, depth }, fn);
}

/** A cache hit: one `end` event with `summary.cache = "hit"` (a miss shows as the call itself). */
export function debugCacheHit(tool, key) {
  if (state.mode === "off") return;
  const id = nextId(tool);
  emit({ id, ts: Date.now(), tool, event: "end", summary: { cache: "hit", key }, duration_ms: 0 });
}

/** What the end line shows of a result: its size, an error, an exit code, a match count. */
function summaryOf(result) {
  if (typeof result === "string") return { chars: result.length };
  if (!result || typeof result !== "object") return undefined;
  const s = {};
  if (typeof result.error === "string") s.error = result.error.slice(0, 200);
  for (const k of ["exit_code", "count", "total", "total_matches", "total_lines", "bytes_written", "replacements"]) {
    if (typeof result[k] === "number") s[k] = result[k];
  }
  return s;
}

/**
 * Wraps an `execute(input, ...rest)` so each call is traced when tracing is on (checked per call,
 * so `reinitDebugMode()` takes effect on existing tools). Returns `execute` unchanged when it is
 * not a function.
 */
export function traced(tool, execute) {
  if (typeof execute !== "function") return execute;
  return async function tracedExecute(input, ...rest) {
    if (state.mode === "off") return execute.call(this, input, ...rest);
    const id = debugStart(tool, input);
    const started = performance.now();
    try {
      const result = await runWithDebugParent(id, () => execute.call(this, input, ...rest));
      debugEnd(id, tool, { summary: summaryOf(result), duration_ms: Math.round(performance.now() - started) });
      return result;
    } catch (error) {
      debugError(id, tool, error);
      throw error;
    }
  };
}

const runCalls = new Map();

function runResultText(result) {
  if (!Array.isArray(result?.content)) return result;
  return result.content
    .filter((part) => part?.type === "text" && typeof part.text === "string")
    .map((part) => part.text)
    .join("");
}

/** Traces the tool calls of a knap run from its event stream (`pi` tool_execution_start/end). */
export function debugRunEvent(event) {
  if (state.mode === "off" || event?.type !== "pi") return;
  const e = event.event;
  if (e?.type === "tool_execution_start") {
    runCalls.set(e.toolCallId, { id: debugStart(e.toolName, e.args), started: performance.now() });
  } else if (e?.type === "tool_execution_end") {
    const call = runCalls.get(e.toolCallId);
    runCalls.delete(e.toolCallId);
    if (!call) return;
    // A run's tool result is Pi's `{ content: [{ type: "text", text }], details }`: trace its text.
    const text = runResultText(e.result);
    if (e.isError) debugError(call.id, e.toolName, typeof text === "string" ? text : JSON.stringify(text));
    else debugEnd(call.id, e.toolName, { summary: summaryOf(text), duration_ms: Math.round(performance.now() - call.started) });
  }
}
