// Coding sessions: startCodingSession, runCodingTurn, streamCodingTurn. A session is one
// conversation, its turns and their bills. There is no Caveman gateway in knap, so every session
// runs observe-only (straight to the provider) and says so with OBSERVE_ONLY_BANNER.
import { codedError } from "../native.mjs";
import { rejectInternalRunOptions } from "../internal-run-options.mjs";
import { createConversation } from "../conversation.mjs";
import { AgentRunController } from "../run-controller.mjs";
import { CODING_RUN_BREAKERS, OBSERVE_ONLY_BANNER } from "./agent.mjs";
import { turnBill } from "./bill.mjs";
import { PEBBLE_PROTOCOL_VERSION, PEBBLE_STOP_REASONS as STOP_REASONS } from "../pebble.mjs";

// The run engine (run.mjs and the transport, durable, memory, sandbox and receipt modules under it)
// is loaded at the first turn, not before the first prompt; the CLI prefetches it while the user
// types (lib/code/cli.mjs).
let runModule;
const loadRun = () => (runModule ??= import("../run.mjs"));

const DEFAULT_GATEWAY_URL = "http://127.0.0.1:8787";
const UNAVAILABLE_LINE =
  "cave: observe-only — engine/gateway unavailable; transforms and gateway telemetry off; provider usage and local context estimates remain available (npm i -g @caveman-ai/cli && caveman start)";
const announcedUnavailable = new Set();
const PASSED_THROUGH = ["cave", "engineBin", "maxCostUsd", "budget", "modelRouter", "fetch", "ensureRuntime", "memory"];

/** `"degrade_to_observe_only"` for a failure only a locked plan without its gateway causes. */
export function classifyTurnFailure(error) {
  const text = error instanceof Error ? error.message : String(error);
  return text.includes("cave_gateway_required_for_locked_plan") ? "degrade_to_observe_only" : "fatal";
}

function degrade(session) {
  if (session.mode === "observe-only") return;
  session.mode = "observe-only";
  session.notices.push(OBSERVE_ONLY_BANNER);
  session.options.onNotice?.(OBSERVE_ONLY_BANNER);
}

/** `startCodingSession(agent, options = {})`: a session, already observe-only (no gateway). */
export async function startCodingSession(agent, options = {}) {
  options = options ?? {};
  const gatewayURL = String(options.gatewayURL ?? process.env.CAVE_GATEWAY_URL ?? DEFAULT_GATEWAY_URL).replace(/\/+$/, "");
  if (options.memory !== undefined && !agent.definition.memory) {
    throw codedError("cave_memory_definition_required", "cave_memory_definition_required: options.memory needs an agent created with memory");
  }
  // Where the reference would probe the gateway (cave "auto", runtime start allowed), it reports
  // the unavailable gateway on a terminal once per URL; knap has none to probe.
  if (options.cave !== "off" && options.ensureRuntime !== false && !announcedUnavailable.has(gatewayURL) && process.stderr.isTTY) {
    announcedUnavailable.add(gatewayURL);
    process.stderr.write(`${UNAVAILABLE_LINE}\n`);
  }
  const session = {
    agent,
    conversation: options.conversation ?? createConversation(),
    options,
    gatewayURL,
    route: Object.freeze({ useGateway: false }),
    mode: "optimized",
    notices: [],
    turns: [],
    proofShown: false,
  };
  for (const key of ["agent", "conversation", "options", "gatewayURL", "route", "notices", "turns"]) {
    Object.defineProperty(session, key, { writable: false });
  }
  degrade(session);
  return session;
}

/** The run options of one turn: the session's, then `overrides` over them. */
function turnRunOptions(session, overrides, extra = {}) {
  rejectInternalRunOptions(overrides);
  const { agent, options } = session;
  const runOptions = {
    rootDir: agent.workspace,
    conversation: session.conversation,
    workflow: options.workflow ?? agent.definition.id,
    gatewayURL: session.gatewayURL,
    cacheRetention: options.cacheRetention ?? "long",
    breakers: options.breakers ?? CODING_RUN_BREAKERS,
  };
  for (const key of PASSED_THROUGH) if (options[key] !== undefined) runOptions[key] = options[key];
  Object.assign(runOptions, extra, overrides);
  if (runOptions.maxCostUsd !== undefined && runOptions.budget !== undefined) {
    throw codedError("cave_budget_conflicting_cap", "cave_budget_conflicting_cap: pass maxCostUsd or budget, not both");
  }
  return runOptions;
}

function record(session, input, result) {
  const turn = {
    input,
    text: result.text,
    toolCalls: result.toolCalls,
    bill: turnBill(session.turns.length + 1, result),
    degraded: false,
    receipt: result.receipt,
  };
  session.turns.push(turn);
  return turn;
}

/** `runCodingTurn(session, input, overrides = {})`: one run on the session's conversation. */
export async function runCodingTurn(session, input, overrides = {}) {
  const runOptions = turnRunOptions(session, overrides ?? {});
  const { run } = await loadRun();
  const result = await run(session.agent.definition, input, runOptions);
  return record(session, input, result);
}

/**
 * The same turn over `stream()`, with `onEvent` seeing every run event (the REPL's live view).
 * Rejects like `run()` does (a `CavemanRunError` for a failed run).
 */
export async function observeCodingTurn(session, input, overrides, onEvent, signal) {
  const runOptions = turnRunOptions(session, overrides ?? {});
  if (signal) runOptions.signal = runOptions.signal ? AbortSignal.any([runOptions.signal, signal]) : signal;
  const { stream, CavemanRunError } = await loadRun();
  let result;
  for await (const event of stream(session.agent.definition, input, runOptions)) {
    onEvent(event);
    if (event.type === "run_end") result = event.result;
    if (event.type === "run_error") throw new CavemanRunError(event.code, event.message, event.receipt);
  }
  if (!result) throw new Error("caveman agent: run ended without terminal evidence");
  return record(session, input, result);
}

// ---------- Pebble v1 events ----------

export { PEBBLE_PROTOCOL_VERSION };
const sequences = new WeakMap();

/** JSON of the arguments, at most 240 characters (`…` when cut). */
export function argsSummary(args) {
  let text;
  try {
    text = JSON.stringify(args) ?? "";
  } catch {
    text = String(args);
  }
  return text.length > 240 ? `${text.slice(0, 239)}…` : text;
}

function resultText(result) {
  if (typeof result === "string") return result;
  const parts = result?.content;
  if (Array.isArray(parts)) return parts.map((p) => (p?.type === "text" ? p.text : "")).join("");
  return result === undefined ? "" : JSON.stringify(result);
}

/**
 * `streamCodingTurn(session, input, { overrides?, controller? })`: the turn as frozen Pebble v1
 * events (`turn.start`, `delta.text`, `usage`, `tool.start`, `tool.end`, `turn.end`, `error`, …).
 * Returns the `TurnRecord`, `{ failed: true, receipt }` after a run error, or `undefined` when
 * the run itself threw.
 */
export async function* streamCodingTurn(session, input, options = {}) {
  // As in the reference: a new controller per turn when none is given.
  const { overrides = {}, controller = new AgentRunController() } = options ?? {};
  const runOptions = turnRunOptions(session, overrides, { controller });
  if (overrides.durable !== undefined) delete runOptions.conversation;
  let seq = sequences.get(session) ?? 0;
  const event = (kind, fields = {}) => {
    const e = Object.freeze({ v: PEBBLE_PROTOCOL_VERSION, seq: seq++, ts: new Date().toISOString(), sessionId: session.conversation.sessionId, kind, ...fields });
    sequences.set(session, seq);
    return e;
  };
  const queue = [];
  let unsubscribe;
  if (typeof controller?.subscribe === "function") {
    // subscribe() reports the current state at once; only changes become events.
    let initial = true;
    unsubscribe = controller.subscribe((state) => {
      if (!initial) queue.push({ queued: state.queued, heldAfterInterrupt: state.heldAfterInterrupt });
      initial = false;
    });
  }
  try {
    yield event("turn.start", { turn: session.turns.length + 1 });
    const { stream } = await loadRun();
    let iterator;
    try {
      iterator = stream(session.agent.definition, input, runOptions);
    } catch (error) {
      yield event("error", { message: error instanceof Error ? error.message : String(error), retryable: false });
      yield event("turn.end", { stopReason: "error" });
      return undefined;
    }
    try {
      for await (const e of iterator) {
        while (queue.length) yield event("queue.changed", queue.shift());
        for (const out of translate(e)) yield event(out.kind, out.fields);
        if (e.type === "run_end") {
          const turn = record(session, input, e.result);
          yield event("turn.end", { stopReason: STOP_REASONS[e.result.stopReason] ?? "end_turn" });
          return turn;
        }
        if (e.type === "run_error") {
          yield event("error", { message: `${e.code}: ${e.message}`, retryable: false });
          yield event("turn.end", { stopReason: "error" });
          return { failed: true, receipt: e.receipt };
        }
      }
    } catch (error) {
      yield event("error", { message: error instanceof Error ? error.message : String(error), retryable: false });
      yield event("turn.end", { stopReason: "error" });
      return undefined;
    }
    throw new Error("cave_pebble_runtime_ended_without_terminal_event");
  } finally {
    unsubscribe?.();
  }
}

function* translate(e) {
  if (e.type === "pi") {
    const pi = e.event;
    if (pi.type === "message_update") {
      const a = pi.assistantMessageEvent;
      if (a?.type === "text_delta") yield { kind: "delta.text", fields: { text: a.delta } };
      else if (a?.type === "thinking_delta") yield { kind: "delta.thinking", fields: { text: a.delta } };
    } else if (pi.type === "message_end" && pi.message?.role === "assistant") {
      const u = pi.message.usage ?? {};
      yield {
        kind: "usage",
        fields: {
          usage: {
            in: u.input ?? 0,
            out: u.output ?? 0,
            cacheRead: u.cacheRead ?? 0,
            cacheWrite: u.cacheWrite ?? 0,
            costUsd: typeof u.cost?.total === "number" ? u.cost.total : null,
            model: pi.message.model,
          },
        },
      };
    } else if (pi.type === "tool_execution_start") {
      yield { kind: "tool.start", fields: { id: pi.toolCallId, name: pi.toolName, argsSummary: argsSummary(pi.args) } };
    } else if (pi.type === "tool_execution_update") {
      yield { kind: "tool.update", fields: { id: pi.toolCallId } };
    } else if (pi.type === "tool_execution_end") {
      yield { kind: "tool.end", fields: toolEnd(pi.toolCallId, pi.isError, resultText(pi.result)) };
    }
  } else if (e.type === "nested_tool_start") {
    yield { kind: "tool.start", fields: { id: e.id, name: e.name, argsSummary: argsSummary(e.args) } };
  } else if (e.type === "nested_tool_end") {
    yield { kind: "tool.end", fields: toolEnd(e.id, e.isError, resultText(e.result)) };
  }
}

function toolEnd(id, isError, text) {
  return isError ? { id, status: "failed", detail: text } : { id, status: "completed" };
}

export { resultText };
