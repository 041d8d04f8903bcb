// run() and stream(): the JS half of a run. The loop, admission, budget, policy evaluation and
// receipts run in Rust (`NativeRun`); this file resolves models, wires the user's callbacks to
// the run's dispatcher, and turns the kernel's events into an async generator.
import fs from "node:fs";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { native, wrapPolicy, codedError } from "./native.mjs";
import { NATIVE_TOOL } from "./shell-tools.mjs";
import { resolveModelCall } from "./models.mjs";
import { callModel } from "./transport.mjs";
import { storeRef, jsStoreDispatcher } from "./durable.mjs";
import { claimConversation } from "./conversation.mjs";
import { refuseUnactedOptions } from "./run-options.mjs";
import { printRunReceipt } from "./receipt.mjs";

const INTERNAL_OPTIONS = ["buildIdentity", "efficiencyPlan", "lockedBuild", "candidatePlan", "caveRoute", "invocationTrace"];
const announcedHost = new Set();

/** The error `run()` rejects with: `code`, the partial `receipt`, and `message = code: original`. */
export class CavemanRunError extends Error {
  constructor(code, message, receipt) {
    super(`${code}: ${message}`, { cause: receipt });
    this.name = "CavemanRunError";
    this.code = code;
    this.receipt = receipt;
  }
}

/** The reference's coarse `errorCode()`. */
export function errorCode(message) {
  const text = String(message ?? "");
  for (const code of ["cave_cache_prefix_drift", "cave_tool_policy_failed", "cave_tool_policy_decision_invalid", "cave_tool_policy_reason_invalid"]) {
    if (text.startsWith(code)) return code;
  }
  if (text.includes("credential")) return "cave_provider_credentials";
  return "cave_agent_run_failed";
}

/** Runs `definition` to completion. */
export async function run(definition, input, options = {}) {
  // run() reads only the terminal event, so the kernel skips the `pi` events altogether.
  for await (const event of startRun(definition, input, options, true)) {
    if (event.type === "run_end") {
      if (options?.printReceipt === true) printRunReceipt(event.result, options.rootDir ?? process.cwd());
      return event.result;
    }
    if (event.type === "run_error") throw new CavemanRunError(event.code, event.message, event.receipt);
  }
  throw new Error("caveman agent: run ended without terminal evidence");
}

function userContent(input) {
  if (typeof input === "string") return [{ type: "text", text: input }];
  if (!Array.isArray(input)) throw new Error("cave_input_invalid: input must be a string or an array of parts");
  const bad = [];
  const parts = input.map((part, index) => {
    if (part?.type === "text" && typeof part.text === "string") return { type: "text", text: part.text };
    if (part?.type === "image" && part.source?.type === "base64") {
      return { type: "image", data: part.source.data, mimeType: part.mimeType ?? part.source.mimeType };
    }
    bad.push(index);
    return null;
  });
  if (bad.length) throw new Error(`cave_input_unsupported:pi:${bad.join(",")}`);
  return parts;
}

function readInstructions(instructions, rootDir) {
  if (instructions && typeof instructions === "object" && instructions.kind === "file") {
    return fs.readFileSync(path.resolve(rootDir, instructions.path), "utf8");
  }
  return String(instructions ?? "");
}

function contextText(ctx, rootDir) {
  const source = ctx.source;
  if (typeof source === "string") return source;
  if (source?.kind === "file") return fs.readFileSync(path.resolve(rootDir, source.path), "utf8");
  if (source && typeof source.text === "string") return source.text;
  return JSON.stringify(source ?? "");
}

/**
 * Builds the JSON the kernel runs: models and JS tools become numbered handles held here.
 */
async function buildGraph(definition, options, rootDir, registry, isRoot, sandbox) {
  let modelCall;
  if (!isRoot && options.model !== undefined && definition.model?.kind === "auto") {
    modelCall = await resolveModelCall(undefined, options);
  } else {
    modelCall = await resolveModelCall(definition.model, isRoot ? options : { ...options, model: undefined });
  }
  const modelKey = registry.models.push(modelCall) - 1;
  const tools = [];
  for (const tool of definition.tools) {
    const nativeTool = tool[NATIVE_TOOL];
    let runtime;
    if (nativeTool) {
      runtime = { kind: "native", toolset: nativeTool.toolset.id, hasOnOutput: Boolean(nativeTool.onOutput) };
      registry.outputs.set(nativeTool.toolset.id, nativeTool.onOutput);
    } else if (tool.runtime?.kind === "subagent") {
      const r = tool.runtime;
      runtime = {
        kind: "subagent",
        agent: await buildGraph(r.definition, options, rootDir, registry, false, r.definition.sandbox),
        maxInputChars: r.maxInputChars,
        maxCalls: r.maxCalls,
        maxCostUsd: r.maxCostUsd,
        maxTokens: r.maxTokens,
        maxContextTokens: r.maxContextTokens,
      };
    } else {
      runtime = { kind: "host", key: registry.tools.push(tool) - 1 };
    }
    tools.push(toolSpec(tool, runtime));
  }
  return {
    ...promptSpec(definition, rootDir),
    model: {
      key: modelKey,
      provider: String(modelCall.model?.provider ?? "unknown"),
      id: String(modelCall.model?.id ?? "unknown"),
      contextWindow: Number.isFinite(modelCall.model?.contextWindow) ? modelCall.model.contextWindow : undefined,
      maxTokens: Number.isFinite(modelCall.model?.maxTokens) ? modelCall.model.maxTokens : undefined,
    },
    sandbox,
    reasoning: definition.reasoning,
    tools,
  };
}

/** A tool as the kernel sees it. */
function toolSpec(tool, runtime) {
  return {
    name: tool.name,
    description: tool.description,
    input: tool.input,
    effect: tool.effect,
    timeoutMs: tool.timeoutMs,
    result: typeof tool.result === "string" ? tool.result : "auto",
    allowRepeat: Boolean(tool.allowRepeat),
    output: tool.output,
    runtime,
  };
}

/** What the system prompt is made of: instructions, contexts, the output contract. */
function promptSpec(definition, rootDir) {
  const out = definition.output;
  return {
    id: definition.id,
    instructions: readInstructions(definition.instructions, rootDir),
    contexts: (definition.contexts ?? []).map((c) => ({ id: c.id, text: contextText(c, rootDir) })),
    output: out ? { maxTokens: out.maxTokens, schema: out.schema === undefined ? undefined : JSON.parse(JSON.stringify(out.schema)) } : undefined,
  };
}

/**
 * `agentStaticContextDiagnostics(definition)`: the bytes of the system prompt plus the tool
 * schemas a model is sent (assembled by the kernel, as for a run), without calling a model.
 */
export function agentStaticContextDiagnostics(definition, options = {}) {
  const spec = {
    ...promptSpec(definition, options.rootDir ?? process.cwd()),
    model: { key: 0, provider: "", id: "" },
    sandbox: definition.sandbox,
    tools: definition.tools.map((tool) => toolSpec(tool, { kind: "host", key: 0 })),
  };
  const d = native.staticContextDiagnostics(JSON.stringify(spec));
  return { staticContextBytes: d.staticContextBytes, availableToolCount: d.availableToolCount, basis: "inferred" };
}

function serializeToolResult(name, value) {
  if (typeof value === "string") return value;
  if (value === undefined) return "null";
  let text;
  try {
    text = JSON.stringify(value);
  } catch {
    throw new Error(`cave_tool_result_not_json_safe:${name}`);
  }
  if (text === undefined) throw new Error(`cave_tool_result_not_json_safe:${name}`);
  return text;
}

const CACHE_RETENTIONS = new Set(["none", "short", "long"]);
// The kernel future is polled on the JS thread (`startLocal`): a model turn answered here resumes
// the kernel at once, with no hand-off to a runtime worker and back. KNAP_KERNEL=worker runs it
// on a tokio worker instead (`start`), for comparison.
const LOCAL = process.env.KNAP_KERNEL !== "worker";
const PUMP = '{"k":"pump"}';

/**
 * The same run as an async generator of `CavemanRunEvent`s. As in the reference, internal
 * options, the definition and the input are checked when `stream()` is called (a synchronous
 * throw; `run()` turns it into a rejection); the other option errors come from the first `next()`.
 */
export function stream(definition, input, options = {}) {
  return startRun(definition, input, options, false);
}

/** Throws `cave_internal_run_option` when `options` carries an option only Cave Build may set. */
export function rejectInternalRunOptions(options) {
  for (const key of INTERNAL_OPTIONS) {
    if (options && key in options) {
      throw new Error("cave_internal_run_option: Cave Build execution is available through caveman-agent dev/build after lock validation");
    }
  }
}

function startRun(definition, input, options, quiet) {
  options = options ?? {};
  rejectInternalRunOptions(options);
  if (definition?.kind !== "agent") throw new Error("caveman agent: run needs an agent() definition");
  const content = userContent(input);
  return runEvents(definition, content, options, quiet, input);
}

// `input` is the caller's input as given: a durable run journals it literally (`run_started.input`).
async function* runEvents(definition, content, options, quiet, input) {
  refuseUnactedOptions(definition, options);
  if (options.cacheRetention !== undefined && !CACHE_RETENTIONS.has(options.cacheRetention)) {
    throw new Error(`cave_cache_retention_invalid: cacheRetention must be "none", "short" or "long", got ${JSON.stringify(options.cacheRetention)}`);
  }
  const rootDir = options.rootDir ?? process.cwd();
  const runId = options.durable?.runId ?? randomUUID();
  let sandbox = definition.sandbox;
  if (!definition.sandboxDeclared && !options.entryPath) {
    sandbox = "host";
    if (!announcedHost.has(definition.id)) {
      announcedHost.add(definition.id);
      process.stderr.write(`cave: ${definition.id} host execution — tools are not isolated\n`);
    }
  }

  const queue = [];
  let wake = null;
  let finished = false;
  const push = (event) => {
    queue.push(event);
    if (wake) {
      wake();
      wake = null;
    }
  };

  const nativeRun = new native.NativeRun();
  const runAbort = new AbortController();
  const onAbort = () => {
    runAbort.abort(options.signal?.reason);
    nativeRun.cancel();
  };
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener("abort", onAbort, { once: true });

  const registry = { models: [], tools: [], outputs: new Map() };
  const conversations = new Map();
  const toolAborts = new Map();
  const policy = typeof options.toolPolicy === "function" ? wrapPolicy(options.toolPolicy) : undefined;
  const durable = options.durable;
  if (options.conversation !== undefined && durable !== undefined && durable !== null) {
    throw codedError(
      "cave_durable_conversation_unsupported",
      "cave_durable_conversation_unsupported: knap does not bind a Conversation to a durable run yet",
    );
  }
  // The conversation's transcript goes ahead of the prompt; the run's messages are committed
  // to it when the run ends.
  const claim = options.conversation === undefined ? undefined : claimConversation(options.conversation);
  const sessionId = options.sessionId ?? options.conversation?.sessionId ?? `${definition.id}-${runId}`;
  let rootLast;
  const commitConversation = (result) => {
    if (!claim) return;
    const mirror = conversations.get(1)?.messages;
    if (result && mirror) claim.finish(result.stopReason === "complete" && rootLast ? [...mirror, rootLast] : mirror);
    else claim.finish();
  };
  let durableSpec;
  let storeDispatch;
  if (durable !== undefined && durable !== null) {
    const ref = storeRef(durable.store, rootDir);
    if (ref.kind === "js") storeDispatch = jsStoreDispatcher(durable.store);
    durableSpec = { store: ref, input: typeof input === "string" ? input : content, sessionId };
  }

  let keepAlive;
  const releaseLoop = () => clearInterval(keepAlive);

  const dispatch = (json) => {
    if (json === PUMP) {
      settleLocal(nativeRun.pump());
      return "";
    }
    const msg = JSON.parse(json);
    switch (msg.k) {
      case "event":
        if (msg.event.type === "run_end" || msg.event.type === "run_error") releaseLoop();
        push(msg.event);
        return "";
      case "output": {
        try {
          registry.outputs.get(msg.toolset)?.(msg.label, msg.text);
        } catch {
          // onOutput observes; its failure must not end the run.
        }
        return "";
      }
      case "abortTool":
        toolAborts.get(msg.callId)?.abort(new Error("cave_tool_timeout"));
        return "";
      case "policy":
        return policy(JSON.stringify(msg.input));
      case "model":
        return answer(msg.reply, callKernelModel(msg));
      case "tool":
        return answer(msg.reply, callKernelTool(msg));
      case "store":
        return storeDispatch(msg);
      default:
        return "";
    }
  };

  // A request with a `reply` id is answered through nativeRun.reply() (one hop back to Rust);
  // without one, the returned Promise is the answer.
  let resolveLocal;
  const localOutcome = new Promise((resolve) => {
    resolveLocal = resolve;
  });
  const settleLocal = (result) => {
    if (result) resolveLocal(result);
  };

  const answer = (id, promise) => {
    if (id === undefined) return promise;
    promise.then(
      (text) => settleLocal(nativeRun.reply(id, true, text)),
      (error) => settleLocal(nativeRun.reply(id, false, error instanceof Error ? error.message : String(error))),
    );
    return "";
  };

  const callKernelModel = async (msg) => {
    let conv = conversations.get(msg.conversation);
    if (!conv) {
      conv = { systemPrompt: msg.systemPrompt ?? "", tools: msg.tools ?? [], messages: [] };
      conversations.set(msg.conversation, conv);
    }
    for (const m of msg.append) conv.messages.push(m);
    const { model, streamFn } = registry.models[msg.modelKey];
    const callOptions = { signal: runAbort.signal, sessionId };
    if (msg.maxTokens != null) callOptions.maxTokens = msg.maxTokens;
    if (msg.reasoning && msg.reasoning !== "off") callOptions.reasoning = msg.reasoning;
    if (options.cacheRetention !== undefined) callOptions.cacheRetention = options.cacheRetention;
    const context = { systemPrompt: conv.systemPrompt, messages: conv.messages.slice(), tools: conv.tools };
    const onEvent = !quiet && msg.conversation === 1 ? (event) => push({ type: "pi", runId, event }) : undefined;
    const message = await callModel({ model, context, options: callOptions, streamFn, onEvent });
    if (msg.conversation === 1) rootLast = message;
    return JSON.stringify(message);
  };

  const callKernelTool = async (msg) => {
    const tool = registry.tools[msg.key];
    const controller = new AbortController();
    const onRunAbort = () => controller.abort(runAbort.signal.reason);
    runAbort.signal.addEventListener("abort", onRunAbort, { once: true });
    toolAborts.set(msg.callId, controller);
    try {
      const value = await tool.execute(msg.args, controller.signal, {
        toolCallId: msg.toolCallId,
        parentToolCallId: msg.parentToolCallId ?? undefined,
        ...(msg.durable ? { durable: Object.freeze({ ...msg.durable }) } : {}),
        dispatch: () => {
          throw new Error("cave_nested_tool_dispatch_unsupported");
        },
      });
      return serializeToolResult(tool.name, value);
    } catch (error) {
      throw error instanceof Error ? error : new Error(String(error));
    } finally {
      toolAborts.delete(msg.callId);
      runAbort.signal.removeEventListener("abort", onRunAbort);
    }
  };

  const runSpec = {
    runId,
    maxModelCalls: options.maxModelCalls,
    maxToolCalls: options.maxToolCalls,
    deadlineMs: options.deadlineMs,
    maxSubagentDepth: options.maxSubagentDepth,
    budget: options.budget,
    breakers: options.breakers,
    maxCostUsd: options.maxCostUsd,
    hasPolicy: Boolean(policy),
    quiet,
    input: content,
    history: claim?.history ?? [],
    durable: durableSpec,
  };

  let graph;
  let setupError;
  try {
    graph = await buildGraph(definition, options, rootDir, registry, true, sandbox);
  } catch (error) {
    setupError = error;
  }
  if (setupError) {
    options.signal?.removeEventListener("abort", onAbort);
    yield { type: "run_start", runId, agentId: definition.id };
    const message = setupError instanceof Error ? setupError.message : String(setupError);
    commitConversation();
    yield { type: "run_error", runId, code: errorCode(message), message, receipt: emptyReceipt(runId, definition.id) };
    return;
  }

  // The dispatcher is a weak threadsafe function: keep the event loop alive until the kernel's
  // last event (run_end / run_error) has come through it.
  keepAlive = setInterval(() => {}, 2 ** 30);
  let started;
  // A durable run reads and checks its journal before the first turn (tens of ms for a long
  // journal): that stays on a runtime worker, off the event loop.
  if (LOCAL && durableSpec === undefined) {
    started = localOutcome;
    settleLocal(nativeRun.startLocal(JSON.stringify(graph), JSON.stringify(runSpec), dispatch));
  } else {
    started = nativeRun.start(JSON.stringify(graph), JSON.stringify(runSpec), dispatch);
  }
  const outcome = started.then(
    (result) => {
      if (result.phase === "options") releaseLoop();
      finished = true;
      if (wake) {
        wake();
        wake = null;
      }
      return result;
    },
  );

  let completed = false;
  let outcomeRead = false;
  try {
    while (true) {
      while (queue.length) {
        const event = queue.shift();
        if (event.type === "run_error") {
          const message = event.message;
          completed = true;
          yield { type: "run_error", runId, code: event.code ?? errorCode(message), message, receipt: event.receipt };
          return;
        }
        if (event.type === "run_end") {
          completed = true;
          commitConversation(event.result);
        }
        yield event;
        if (completed) return;
      }
      if (finished && !outcomeRead) {
        outcomeRead = true;
        const result = await outcome;
        if (result.phase === "options") {
          const error = new Error(result.message);
          error.code = result.code;
          throw error;
        }
        // Otherwise the terminal event is queued behind the outcome (ours or the dispatcher's).
        continue;
      }
      await new Promise((resolve) => {
        wake = resolve;
      });
    }
  } finally {
    commitConversation();
    options.signal?.removeEventListener("abort", onAbort);
    if (!completed && !finished) {
      // The consumer stopped early (`.return()`): cancel provider, tool and subagent work.
      runAbort.abort(new Error("cave_stream_cancelled"));
      nativeRun.cancel();
    }
  }
}

function emptyReceipt(runId, agentId) {
  return {
    schema: "caveman.agent.run-receipt.v1",
    runId,
    agentId,
    basis: "estimated_list_price_subtotal",
    claimBasis: "inferred",
    stopReason: "complete",
    denomination: "none",
    capBreached: false,
    overspent: 0,
    totalEstimatedUsd: 0,
    totalTokens: 0,
    unpriced: false,
    calls: [],
    tools: [],
    subagents: [],
    tranches: [],
    breakers: [],
    compactions: [],
  };
}
