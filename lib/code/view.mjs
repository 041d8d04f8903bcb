// The REPL's live view of a turn. On a terminal: the assistant's text as it streams, and one line
// per tool call (tool, short arguments, elapsed time, then ✓/✗ and the size of its result) that
// ticks while the call runs. Not on a terminal: the reference's output on `out` unchanged, and one
// plain line per finished tool call on `notice`.
import { resultText } from "./session.mjs";

const CLEAR_LINE = "\r\x1b[2K";
const SHORT_ARGS_CHARS = 60;
const TICK_MS = 200;

const SHORT = {
  bash: (a) => a.command ?? [a.action, a.sessionId].filter(Boolean).join(" "),
  read_file: (a) => (a.offset !== undefined || a.limit !== undefined ? `${a.path} @${a.offset ?? 1}${a.limit !== undefined ? `+${a.limit}` : ""}` : a.path),
  grep: (a) => (a.path ? `${a.pattern} in ${a.path}` : a.pattern),
  write_file: (a) => a.path,
  edit_file: (a) => a.path,
  read_tool_output: (a) => (a.query !== undefined ? `${a.handle} ${JSON.stringify(a.query)}` : a.handle),
  caveman_code: (a) => a.code,
};

/** A one-line summary of a tool call's arguments. */
export function shortArgs(name, args) {
  let text;
  try {
    text = SHORT[name]?.(args ?? {});
  } catch {
    text = undefined;
  }
  if (typeof text !== "string") text = JSON.stringify(args ?? {}) ?? "";
  text = text.replace(/\s+/g, " ").trim();
  return text.length > SHORT_ARGS_CHARS ? `${text.slice(0, SHORT_ARGS_CHARS - 1)}…` : text;
}

export function formatElapsed(ms) {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export function formatSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/**
 * One turn's view. `event(e)` takes each run event; `finish(turnText)` ends the streamed part and
 * returns whether `turnText` still has to be printed (it was not streamed as the final message).
 */
export function createTurnView({ out, notice, tty }) {
  const running = new Map(); // id -> { name, args, started, nested }
  let started = false; // anything written for this turn yet
  let atLineStart = true;
  let transient = false;
  let lastText = "";
  let ticker;

  const write = (text) => {
    if (!text) return;
    out.write(text);
    atLineStart = text.endsWith("\n");
  };
  const begin = () => {
    if (!started) {
      started = true;
      write("\n");
    }
  };
  const clearTransient = () => {
    if (transient) {
      out.write(CLEAR_LINE);
      transient = false;
      atLineStart = true;
    }
  };
  const drawTransient = () => {
    clearTransient();
    if (running.size === 0) return;
    if (!atLineStart) write("\n");
    const now = performance.now();
    const calls = [...running.values()];
    const oldest = Math.min(...calls.map((c) => c.started));
    const label = calls.map((c) => `${c.name} ${shortArgs(c.name, c.args)}`.trim()).join(", ");
    out.write(`  … ${label.length > 100 ? `${label.slice(0, 99)}…` : label} · ${formatElapsed(now - oldest)}`);
    transient = true;
  };
  const line = (call, isError, text) => {
    const elapsed = formatElapsed(performance.now() - call.started);
    const size = formatSize(Buffer.byteLength(text));
    const indent = call.nested ? "    " : "  ";
    const args = shortArgs(call.name, call.args);
    if (tty) {
      clearTransient();
      if (!atLineStart) write("\n");
      write(`${indent}${isError ? "✗" : "✓"} ${call.name}${args ? ` ${args}` : ""} · ${elapsed} · ${size}\n`);
      drawTransient();
    } else {
      notice.write(`${indent.slice(2)}tool ${call.name}${args ? ` ${args}` : ""} · ${isError ? "✗" : "✓"} ${size} · ${elapsed}\n`);
    }
  };
  const start = (id, name, args, nested) => {
    running.set(id, { name, args, started: performance.now(), nested });
    if (!tty) return;
    begin();
    drawTransient();
    if (!ticker) {
      ticker = setInterval(drawTransient, TICK_MS);
      ticker.unref?.();
    }
  };
  const end = (id, isError, result) => {
    const call = running.get(id);
    if (!call) return;
    running.delete(id);
    line(call, isError, resultText(result));
    if (running.size === 0 && ticker) {
      clearInterval(ticker);
      ticker = undefined;
    }
  };

  return {
    event(e) {
      if (e.type === "pi") {
        const pi = e.event;
        if (pi.type === "message_start" && pi.message?.role === "assistant") lastText = "";
        else if (pi.type === "message_update" && pi.assistantMessageEvent?.type === "text_delta") {
          const delta = pi.assistantMessageEvent.delta ?? "";
          lastText += delta;
          if (tty && delta) {
            begin();
            clearTransient();
            write(delta);
          }
        } else if (pi.type === "tool_execution_start") start(pi.toolCallId, pi.toolName, pi.args, false);
        else if (pi.type === "tool_execution_end") end(pi.toolCallId, pi.isError, pi.result);
      } else if (e.type === "nested_tool_start") start(e.id, e.name, e.args, true);
      else if (e.type === "nested_tool_end") end(e.id, e.isError, e.result);
    },
    /** Ends the live part; true when the caller must still print the turn's text. */
    finish(turnText) {
      if (ticker) clearInterval(ticker);
      ticker = undefined;
      clearTransient();
      running.clear();
      if (!tty || !started) return true;
      if (lastText !== turnText) {
        if (!atLineStart) write("\n");
        return true;
      }
      if (!atLineStart) write("\n");
      return false;
    },
    /** Whether the turn already wrote its leading blank line. */
    get started() {
      return started;
    },
  };
}
