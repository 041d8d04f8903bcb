// run() and stream(): the JS half of a run. The loop, admission, budget, policy evaluation and
// receipts run in Rust (`NativeRun`); this file resolves models, wires the user's callbacks to
// the run's dispatcher, and turns the kernel's events into an async generator.
import fs from "node:fs";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { native, askPolicy, codedError, deepFreeze, withHint } from "./native.mjs";
import { debugRunEvent, isDebugEnabled } from "./debug.mjs";
import { NATIVE_TOOL } from "./shell-tools.mjs";
import { PROGRAM_CELLS, watchCellStream } from "./program/speculation.mjs";
import { resolveModelCall } from "./models.mjs";
import { abortGate, callModel } from "./transport.mjs";
import { storeRef, jsStoreHook } from "./durable.mjs";
import { claimConversation } from "./conversation.mjs";
import { refuseUnactedOptions } from "./run-options.mjs";
import { rejectInternalRunOptions } from "./internal-run-options.mjs";
import { splitCompactionOptions } from "./compaction.mjs";
import { BUDGET_CONTROLLER_BIND } from "./budget-controller.mjs";
import { bindController } from "./run-controller.mjs";
import { printRunReceipt } from "./receipt.mjs";
import { serializeToolResult } from "./tool-result.mjs";
import { SandboxPool } from "./sandbox.mjs";
import { resolveRunMemory, localMemoryTools, MEMORY_SYSTEM_PROMPT } from "./memory.mjs";

const announcedHost = new Set();

/** The error `run()` rejects with: `code`, the partial `receipt`, and `message = code: original`. */
export class CavemanRunError extends Error {
  constructor(code, message, receipt) {
    super(`${code}: ${message}`, { cause: receipt });
    this.name = "CavemanRunError";
    this.code = code;
    this.receipt = receipt;
    withHint(this);
  }
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
async function buildGraph(definition, options, rootDir, registry, isRoot, sandbox, agentPath = []) {
  let modelCall;
  if (!isRoot && options.model !== undefined && definition.model?.kind === "auto") {
    modelCall = await resolveModelCall(undefined, options);
  } else {
    modelCall = await resolveModelCall(definition.model, isRoot ? options : { ...options, model: undefined });
  }
  const modelKey = registry.models.push(modelCall) - 1;
  /** Where a tool runs: natively (shell tools), as a subagent, or as a JS handle held here. */
  const toolRuntime = async (tool, composite = false) => {
    // A required level's closures run in worker processes (lib/sandbox.mjs): held here as proxies.
    const isolated = sandbox === "required" && tool.runtime?.kind !== "subagent" ? registry.sandbox?.route(tool, agentPath, composite) : undefined;
    if (isolated) return { kind: "host", key: registry.tools.push(isolated) - 1 };
    const nativeTool = tool[NATIVE_TOOL];
    if (nativeTool) {
      registry.outputs.set(nativeTool.toolset.id, nativeTool.onOutput);
      return { kind: "native", toolset: nativeTool.toolset.id, hasOnOutput: Boolean(nativeTool.onOutput) };
    }
    if (tool.runtime?.kind === "subagent") {
      const r = tool.runtime;
      return {
        kind: "subagent",
        agent: await buildGraph(r.definition, options, rootDir, registry, false, r.definition.sandbox, [...agentPath, tool.name]),
        maxInputChars: r.maxInputChars,
        maxCalls: r.maxCalls,
        maxCostUsd: r.maxCostUsd,
        maxTokens: r.maxTokens,
        maxContextTokens: r.maxContextTokens,
      };
    }
    return { kind: "host", key: registry.tools.push(tool) - 1 };
  };
  const tools = [];
  for (const tool of definition.tools) {
    const composite = tool.nestedTools?.length > 0;
    const spec = toolSpec(tool, await toolRuntime(tool, composite));
    // Only a composite carries these keys, so the definition SHA of every other agent is the
    // one it had before composites existed (durable runs resume across that upgrade).
    if (composite) {
      spec.nestedTools = [];
      for (const nested of tool.nestedTools) {
        const nestedSpec = toolSpec(nested, await toolRuntime(nested, true));
        if (nested.speculative === true) nestedSpec.speculative = true;
        spec.nestedTools.push(nestedSpec);
      }
      if (tool.speculativeTools?.length) {
        spec.speculativeTools = [...tool.speculativeTools];
        // A programmatic cell with speculation on: its literal reads may start while it
        // streams. Never in a durable run (a launch has no journal intent), so a durable
        // run's definition is the same with speculation on or off.
        if (PROGRAM_CELLS.get(tool)?.speculate && (options.durable === undefined || options.durable === null)) spec.speculationSource = "code";
      }
    }
    tools.push(spec);
  }
  return {
    ...promptSpec(definition, rootDir),
    model: modelRef(modelCall, modelKey),
    sandbox,
    reasoning: definition.reasoning,
    tools,
  };
}

/** A resolved model as the kernel sees it: the handle held here, and what the catalog needs. */
function modelRef(modelCall, key) {
  return {
    key,
    provider: String(modelCall.model?.provider ?? "unknown"),
    id: String(modelCall.model?.id ?? "unknown"),
    contextWindow: Number.isFinite(modelCall.model?.contextWindow) ? modelCall.model.contextWindow : undefined,
    maxTokens: Number.isFinite(modelCall.model?.maxTokens) ? modelCall.model.maxTokens : undefined,
  };
}

/**
 * `RunOptions.budget` for the kernel: `compaction.summarizerModel` turned into a model ref by
 * `summarizer` (the run resolves it like a pinned model, a handle held here) and `newContext`
 * replaced by the fact that it is there.
 */
async function budgetSpec(budget, summarizer) {
  const compaction = budget?.compaction;
  if (!compaction || typeof compaction !== "object") return budget;
  const { core, summarizerModel } = splitCompactionOptions(compaction);
  if (summarizerModel !== undefined) core.summarizerModel = await summarizer(summarizerModel);
  return { ...budget, compaction: core };
}

/** The summarizer's placeholder for the option check before any model is resolved (its kind is checked then, the model later). */
const EARLY_SUMMARIZER = () => ({ key: 0, provider: "", id: "" });

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
  // A definition with memory also sends the three memory tools and the <cave-memory> block.
  const memoryTools = definition.memory ? localMemoryTools({ scope: { namespace: definition.memory.namespace } }) : [];
  for (const t of memoryTools) spec.tools.push(toolSpec(t, { kind: "host", key: 0 }));
  const d = native.staticContextDiagnostics(JSON.stringify(spec));
  const memoryBytes = definition.memory ? Buffer.byteLength(`\n\n${MEMORY_SYSTEM_PROMPT}`) : 0;
  return {
    staticContextBytes: d.staticContextBytes + memoryBytes,
    availableToolCount: d.availableToolCount,
    basis: "system_prompt_plus_active_tool_definitions_json_utf8",
  };
}

/** A nested call's value as the JSON the kernel hands back to `dispatch` (`undefined` → null). */
function nestedResult(name, value) {
  let text;
  try {
    text = value === undefined ? "null" : JSON.stringify(value);
  } catch {
    throw new Error(`cave_tool_result_not_json_safe:${name}`);
  }
  if (text === undefined) throw new Error(`cave_tool_result_not_json_safe:${name}`);
  return text;
}

const CACHE_RETENTIONS = new Set(["none", "short", "long"]);

/**
 * The same run as an async generator of `CavemanRunEvent`s. As in the reference, internal
 * options, the definition, the root context's options (`maxCostUsd`, the subagent tree limits)
 * and the input are checked when `stream()` is called (a synchronous throw; `run()` turns it
 * into a rejection); the other option errors come from the first `next()`, and bad call caps
 * (`maxModelCalls`, `maxToolCalls`) are run errors.
 */
export function stream(definition, input, options = {}) {
  return startRun(definition, input, options, false);
}

export { rejectInternalRunOptions };

function startRun(definition, input, options, quiet) {
  // KNAP_DEBUG traces a run's tool calls from its events, so a traced run() builds them.
  if (quiet && isDebugEnabled()) quiet = false;
  options = options ?? {};
  rejectInternalRunOptions(options);
  if (definition?.kind !== "agent") throw new Error("caveman agent: run needs an agent() definition");
  throwRefusal(checkOptions(options, ROOT_CONTEXT_OPTIONS));
  const content = userContent(input);
  return runEvents(definition, content, options, quiet, input);
}

/** The events of one run, in order, for the generator to drain. */
class EventQueue {
  #items = [];
  #wake = null;
  push(event) {
    this.#items.push(event);
    this.#signal();
  }
  #signal() {
    if (this.#wake) {
      this.#wake();
      this.#wake = null;
    }
  }
  /** Wakes a waiting reader without an event (the run's outcome arrived). */
  poke() {
    this.#signal();
  }
  shift() {
    return this.#items.shift();
  }
  get size() {
    return this.#items.length;
  }
  wait() {
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }
}

// The reference's rootExecutionContext checks these when the run is set up (synchronously in
// stream()); the call caps are checked inside its try, after the model is resolved (run errors).
const ROOT_CONTEXT_OPTIONS = ["maxCostUsd", "maxSubagentInvocations", "maxConcurrentSubagents"];
const CALL_CAP_OPTIONS = ["maxModelCalls", "maxToolCalls"];

/**
 * Run options as the core's JSON. JSON has no NaN or Infinity (`JSON.stringify` writes null,
 * which would read as "not given"): a non-finite number goes as `{"$number": "NaN"}`, which
 * every numeric option refuses, naming the number.
 */
function specJson(spec) {
  return JSON.stringify(spec, (_, v) => (typeof v === "number" && !Number.isFinite(v) ? { $number: String(v) } : v));
}

/** The core's refusal (`{code, message}`) of just the `keys` of `options`, or null. */
function checkOptions(options, keys) {
  const only = { runId: "", input: [], history: [] };
  for (const key of keys) only[key] = options[key];
  return native.checkRunOptions(specJson(only));
}

/** Throws a refusal as the plain coded `Error` the reference throws. */
function throwRefusal(refused) {
  if (!refused) return;
  const error = new Error(refused.message);
  error.code = refused.code;
  throw withHint(error);
}

/** What a run needs besides the kernel: ids, the sandbox mode, the conversation and the store. */
function prepareRun(definition, options, input, content) {
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
  const durable = options.durable;
  if (options.conversation !== undefined && options.sessionId !== undefined && options.sessionId !== options.conversation?.sessionId) {
    throw codedError("cave_durable_session_mismatch", "cave_durable_session_mismatch: RunOptions.sessionId differs from the conversation's sessionId");
  }
  // The conversation's transcript goes ahead of the prompt; the run's messages are committed
  // to it when the run ends.
  const claim = options.conversation === undefined ? undefined : claimConversation(options.conversation);
  const sessionId = options.sessionId ?? options.conversation?.sessionId ?? `${definition.id}-${runId}`;
  // RunOptions.memory: the engine, its three tools, the prompt block and (ambient) recall.
  const memoryRun = definition.memory ? resolveRunMemory(definition, options.memory ?? {}) : undefined;
  const recallText = typeof input === "string" ? input : content.filter((p) => p.type === "text").map((p) => p.text).join("\n");
  const recall = memoryRun?.ambient && recallText.trim() ? memoryRun.engine.beginTurn({ sessionId, text: recallText }) : undefined;
  let durableSpec;
  let store;
  if (durable !== undefined && durable !== null) {
    const ref = storeRef(durable.store, rootDir);
    if (ref.kind === "js") store = jsStoreHook(durable.store);
    durableSpec = { store: ref, input: typeof input === "string" ? input : content, sessionId };
    // A bound Conversation is journaled as its base checkpoint (run_started.conversation); the
    // kernel checks it on resume and writes the terminal one in run_completed.
    if (claim) durableSpec.conversation = JSON.parse(native.durableConversationCheckpoint(sessionId, JSON.stringify(claim.history)));
  }
  return { rootDir, runId, sandbox, claim, sessionId, durableSpec, store, memoryRun, recall };
}

/**
 * Answers model turn `id` with Pi's `AssistantMessage`, taken apart into `replyModel`'s positional
 * arguments (reading them costs the binding one call, where reading the object's members cost one
 * property lookup each). `usage` / `usage.cost` of `null` are unreadable, as before; a member of
 * the wrong type is refused by the binding.
 */
function replyModel(nativeRun, id, m) {
  const u = m.usage;
  if (u === null) throw new TypeError("usage must be an object");
  const c = u?.cost;
  if (c === null) throw new TypeError("usage.cost must be an object");
  return nativeRun.replyModel(
    id, m.content, m.api, m.provider, m.model, m.responseId, m.stopReason, m.errorMessage, m.timestamp,
    u !== undefined, u?.input, u?.output, u?.cacheRead, u?.cacheWrite, u?.reasoning, u?.totalTokens,
    c !== undefined, c?.input, c?.output, c?.cacheRead, c?.cacheWrite, c?.total,
  );
}

/** A host error as the kernel reads it: the message, and the `code` when there is one. */
function hostError(error) {
  if (error instanceof Error) return { message: error.message, code: typeof error.code === "string" ? error.code : undefined };
  return { message: String(error) };
}

/**
 * The kernel's hooks for one run: model turns through the model transport, JS tools, the policy,
 * events, tool aborts, `onOutput`, the JS store. Answers go back through `nativeRun.reply*`.
 */
function kernelHooks({ nativeRun, registry, options, quiet, prep, events, runAbort, settle, releaseLoop }) {
  const { runId, sessionId } = prep;
  // Per conversation: the transcript the transport is sent, and the assistant message the last
  // call returned (it joins the transcript when the kernel asks for the next turn).
  const conversations = new Map();
  const toolAborts = new Map();
  const routed = new Map();
  const routedModel = (key) => {
    if (!routed.has(key)) routed.set(key, resolveModelCall(key, { ...options, model: undefined }));
    return routed.get(key);
  };

  const startModel = async (req) => {
    let conv = conversations.get(req.conversation);
    if (!conv) {
      const memoryBlock = prep.memoryRun && req.conversation === 1 ? `\n\n${MEMORY_SYSTEM_PROMPT}` : "";
      conv = { systemPrompt: (req.systemPrompt ?? "") + memoryBlock, tools: req.tools ?? [], messages: [], last: undefined };
      conversations.set(req.conversation, conv);
    }
    // conv.messages is the full, append-only transcript (a Conversation commits it); after a
    // compaction conv.view is what the provider sees, and later messages join both.
    if (conv.last) {
      conv.messages.push(conv.last);
      conv.view?.push(conv.last);
    }
    for (const m of req.append) {
      conv.messages.push(m);
      conv.view?.push(m);
    }
    if (req.context) conv.view = req.context.slice();
    conv.last = undefined;
    // A routed call names its model ("provider/id", checked by the kernel): resolved as a
    // pinned model of the run, once per model.
    const { model, streamFn } = req.model === undefined ? registry.models[req.modelKey] : await routedModel(req.model);
    const callOptions = { signal: runAbort.signal, sessionId };
    if (req.maxTokens != null) callOptions.maxTokens = req.maxTokens;
    if (req.reasoning && req.reasoning !== "off") callOptions.reasoning = req.reasoning;
    if (options.cacheRetention !== undefined) callOptions.cacheRetention = options.cacheRetention;
    const context = { systemPrompt: conv.systemPrompt, messages: (conv.view ?? conv.messages).slice(), tools: conv.tools };
    // The previous turn's recall goes just before the current prompt, on every root call; it is
    // never written into the conversation or the journal.
    if (prep.recall?.prompt && req.conversation === 1 && !conv.view) {
      context.messages.splice(prep.claim?.history?.length ?? 0, 0, { role: "user", content: prep.recall.prompt, timestamp: Date.now() });
    }
    const onEvent = !quiet && req.conversation === 1 ? (event) => events.push({ type: "pi", runId, event }) : undefined;
    // A speculation scope: the stream's first cell call is shown to the kernel as it grows.
    const stream = req.speculate ? watchCellStream(streamFn, req.speculate, (index, name, code, endId) => settle(nativeRun.speculate(req.reply, index, name, code, endId))) : streamFn;
    const message = await callModel({ model, context, options: callOptions, streamFn: stream, onEvent });
    conv.last = message;
    return message;
  };

  // `context.dispatch` calls waiting for the kernel's answer (the `nested` hook), by reply id.
  const dispatches = new Map();
  let nextDispatch = 0;

  /**
   * `context.dispatch` of composite container `req` (caveman-code.md §4.2): the kernel admits
   * the call (events, receipt, maxToolCalls, policy with parentToolCallId) and runs it; this
   * only carries the request and the abort of `options.signal`. `open()` is false once the
   * container's `execute` has returned.
   */
  const dispatcher = (req, open) => (name, input, dispatchOptions) => {
    if (!open()) return Promise.reject(codedError("cave_nested_tool_parent_inactive"));
    const signal = dispatchOptions?.signal;
    const reasonOf = () => (signal.reason instanceof Error ? signal.reason.message : undefined);
    const reply = nextDispatch++;
    return new Promise((resolve, reject) => {
      const onAbort = () => settle(nativeRun.abortNested(reply, reasonOf()));
      dispatches.set(reply, {
        resolve,
        reject,
        done: () => signal?.removeEventListener("abort", onAbort),
      });
      // A value JSON cannot carry reaches the kernel as null, which its schema check refuses
      // (`cave_tool_input_schema_mismatch:<name>`), after the name check.
      let args = null;
      try {
        const text = JSON.stringify(input);
        if (text !== undefined) args = JSON.parse(text);
      } catch {}
      const aborted = Boolean(signal?.aborted);
      if (signal && !aborted) signal.addEventListener("abort", onAbort, { once: true });
      settle(nativeRun.dispatchNested(reply, req.callId, String(name), args, dispatchOptions?.claimSpeculation === true, aborted, aborted ? reasonOf() : undefined));
    });
  };

  const runTool = async (req) => {
    const tool = registry.tools[req.key];
    const controller = new AbortController();
    const onRunAbort = () => controller.abort(runAbort.signal.reason);
    runAbort.signal.addEventListener("abort", onRunAbort, { once: true });
    toolAborts.set(req.callId, controller);
    let open = true;
    // One level only: a nested call, or a tool without nestedTools, cannot dispatch.
    const dispatch = req.composite && !req.nested ? dispatcher(req, () => open) : () => Promise.reject(codedError("cave_nested_tool_dispatch_unavailable"));
    try {
      const value = await tool.execute(req.args, controller.signal, {
        toolCallId: req.toolCallId,
        parentToolCallId: req.parentToolCallId,
        ...(req.durable ? { durable: Object.freeze({ ...req.durable }) } : {}),
        dispatch,
      });
      // A nested call answers with its settled value (as JSON): `dispatch` resolves to it.
      if (req.nested) return nestedResult(tool.name, value);
      return serializeToolResult(tool.name, value);
    } finally {
      open = false;
      toolAborts.delete(req.callId);
      runAbort.signal.removeEventListener("abort", onRunAbort);
    }
  };

  const policy = options.toolPolicy;
  const router = options.modelRouter;
  const newContext = options.budget?.compaction?.newContext;
  /** `budget.compaction.newContext`: the seed of the new context, a string; a throw fails the run. */
  const askNewContext = (req) => {
    Promise.resolve()
      .then(() => newContext(Object.freeze({ messages: req.messages, generation: req.generation, agentPath: Object.freeze(req.agentPath) })))
      .then((seed) => {
        if (typeof seed !== "string") {
          const got = seed === null ? "null" : Array.isArray(seed) ? "an array" : typeof seed;
          throw codedError("cave_compaction_new_context_invalid", `cave_compaction_new_context_invalid: newContext must resolve to the seed of the new context (a string), got ${got}`);
        }
        return seed;
      })
      .then(
        (seed) => settle(nativeRun.replyTool(req.reply, seed)),
        (error) => settle(nativeRun.replyError(req.reply, hostError(error))),
      );
  };
  const model = (req) => {
    startModel(req).then(
      (message) => {
        let outcome;
        try {
          outcome = replyModel(nativeRun, req.reply, message);
        } catch (error) {
          outcome = nativeRun.replyError(req.reply, { message: `cave_provider_terminal_error: unreadable assistant message: ${error.message}` });
        }
        settle(outcome);
      },
      (error) => settle(nativeRun.replyError(req.reply, hostError(error))),
    );
  };
  return {
    hooks: {
      model,
      // The common step, positional (see the binding): the tool result is built here, in the
      // shape the kernel's messages have.
      modelStep(reply, conversation, modelKey, maxTokens, reasoning, toolCallId, toolName, text, isError, timestamp, effect, resultPolicy) {
        const details = effect === null ? {} : { effect, resultPolicy };
        const message = { role: "toolResult", toolCallId, toolName, content: [{ type: "text", text }], details, isError, timestamp };
        model({ reply, conversation, modelKey, maxTokens, reasoning, append: [message] });
      },
      tool(req) {
        runTool(req).then(
          (text) => settle(nativeRun.replyTool(req.reply, text)),
          (error) => settle(nativeRun.replyError(req.reply, hostError(error))),
        );
      },
      nested(answer) {
        const pending = dispatches.get(answer.reply);
        if (!pending) return;
        dispatches.delete(answer.reply);
        pending.done();
        if (answer.ok) pending.resolve(answer.value ?? null);
        else pending.reject(codedError(answer.code ?? String(answer.message).split(":")[0], answer.message));
      },
      policy: typeof policy === "function" ? (input) => askPolicy(policy, input) : undefined,
      // onBudgetExhausted: called (and awaited) like the policy; the kernel judges the answer.
      budget: typeof options.onBudgetExhausted === "function" ? (ctx) => askPolicy(options.onBudgetExhausted, ctx) : undefined,
      // The router goes through the policy's call path: a frozen input, a sync answer judged at
      // once, a thenable kept referenced until it settles; a throw fails the run.
      route: typeof router === "function" ? (input) => askPolicy(router, deepFreeze(input)) : undefined,
      newContext: typeof newContext === "function" ? askNewContext : undefined,
      events(batch) {
        for (const event of batch) {
          if (event.type === "run_end" || event.type === "run_error") releaseLoop();
          debugRunEvent(event);
          events.push(event);
        }
      },
      abortTool(callId) {
        toolAborts.get(callId)?.abort(new Error("cave_tool_timeout"));
      },
      // A programmatic runtime's stats(): launched / claimed / missed / abandoned.
      speculation(key, count) {
        const stats = PROGRAM_CELLS.get(registry.tools[key])?.stats;
        if (stats && count in stats) stats[count] += 1;
      },
      output(toolset, label, text) {
        try {
          registry.outputs.get(toolset)?.(label, text);
        } catch {
          // onOutput observes; its failure must not end the run.
        }
      },
      store: prep.store,
      pump() {
        try {
          settle(nativeRun.pump());
        } catch (error) {
          settle({ phase: "run", code: "cave_internal", message: `cave_internal: ${error.message}` });
        }
      },
    },
    /** The root conversation's transcript and its last assistant message. */
    root: () => conversations.get(1),
  };
}

// `input` is the caller's input as given: a durable run journals it literally (`run_started.input`).
async function* runEvents(definition, content, options, quiet, input) {
  const prep = prepareRun(definition, options, input, content);
  const { runId, claim } = prep;
  const events = new EventQueue();
  const nativeRun = new native.NativeRun();
  const runAbort = new AbortController();
  abortGate(runAbort.signal);
  const onAbort = () => {
    runAbort.abort(options.signal?.reason);
    nativeRun.cancel();
  };
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener("abort", onAbort, { once: true });

  const registry = { models: [], tools: [], outputs: new Map() };
  if (options.entryPath !== undefined) {
    registry.sandbox = new SandboxPool({ entryPath: options.entryPath, rootDir: prep.rootDir, agentId: definition.id, profile: options.sandboxProfile });
  }
  // The dispatcher of wakes is a weak threadsafe function: keep the event loop alive until the
  // kernel's last event (run_end / run_error) has come.
  let keepAlive;
  const releaseLoop = () => clearInterval(keepAlive);
  let outcome;
  const settle = (result) => {
    if (result && !outcome) {
      outcome = result;
      if (result.phase === "options") releaseLoop();
      events.poke();
    }
  };
  const kernel = kernelHooks({ nativeRun, registry, options, quiet, prep, events, runAbort, settle, releaseLoop });
  const commitConversation = (result) => {
    if (!claim) return;
    const root = kernel.root();
    if (result && root) claim.finish(result.stopReason === "complete" && root.last ? [...root.messages, root.last] : root.messages);
    else claim.finish();
  };

  const runSpec = {
    runId,
    maxModelCalls: options.maxModelCalls,
    maxToolCalls: options.maxToolCalls,
    deadlineMs: options.deadlineMs,
    maxSubagentDepth: options.maxSubagentDepth,
    maxSubagentInvocations: options.maxSubagentInvocations,
    maxConcurrentSubagents: options.maxConcurrentSubagents,
    budget: options.budget,
    breakers: options.breakers,
    maxCostUsd: options.maxCostUsd,
    quiet,
    input: content,
    history: claim?.history ?? [],
    durable: prep.durableSpec,
    entryPath: options.entryPath,
  };

  // Options first, as the reference does (plain Errors before the model is resolved): a bad
  // `deadlineMs` is reported before a missing credential. The transcript is not needed for it;
  // the call caps are the reference's run errors (checked inside its try, after the model). The
  // compaction's model and callback are checked for their kind here and resolved below.
  const early = { ...runSpec, input: [], history: [], maxModelCalls: undefined, maxToolCalls: undefined };
  try {
    early.budget = await budgetSpec(options.budget, EARLY_SUMMARIZER);
    throwRefusal(native.checkRunOptions(specJson(early)));
  } catch (error) {
    options.signal?.removeEventListener("abort", onAbort);
    commitConversation();
    throw error;
  }

  let graph;
  try {
    graph = await buildGraph(definition, options, prep.rootDir, registry, true, prep.sandbox);
    const caps = checkOptions(options, CALL_CAP_OPTIONS);
    if (caps) throw new Error(caps.message);
    runSpec.budget = await budgetSpec(options.budget, async (model) => {
      const call = await resolveModelCall(model, { ...options, model: undefined });
      return modelRef(call, registry.models.push(call) - 1);
    });
    const input = registry.models[graph.model.key].model?.input;
    if (Array.isArray(input)) runSpec.modelInput = input.map(String);
    if (prep.memoryRun) {
      for (const t of localMemoryTools(prep.memoryRun.engine)) graph.tools.push(toolSpec(t, { kind: "host", key: registry.tools.push(t) - 1 }));
    }
    // A bad entry fails the run here, before any provider call.
    await registry.sandbox?.start(runAbort.signal);
  } catch (setupError) {
    registry.sandbox?.close();
    options.signal?.removeEventListener("abort", onAbort);
    yield { type: "run_start", runId, agentId: definition.id };
    const message = setupError instanceof Error ? setupError.message : String(setupError);
    commitConversation();
    yield { type: "run_error", runId, code: native.runErrorCode(message), message, receipt: emptyReceipt(runId, definition.id) };
    return;
  }

  // A BudgetController reads and releases the run's own meter while the run is live.
  let unbindBudget;
  try {
    unbindBudget = options.budgetController?.[BUDGET_CONTROLLER_BIND]({
      release: (amount, reason) => nativeRun.releaseBudget(typeof amount === "number" ? amount : NaN, typeof reason === "string" ? reason : undefined),
      snapshot: () => {
        const snapshot = nativeRun.budgetSnapshot();
        if (!snapshot) throw codedError("cave_budget_controller_unbound");
        return snapshot;
      },
    });
  } catch (error) {
    options.signal?.removeEventListener("abort", onAbort);
    throw error;
  }
  // RunOptions.controller: its queue (retained messages included) goes into the kernel's;
  // interrupt() aborts the run as the signal would.
  let controlled;
  if (options.controller !== undefined) {
    try {
      controlled = bindController(options.controller, nativeRun, () => {
        runAbort.abort(new Error("cave_run_aborted: AgentRunController.interrupt()"));
        nativeRun.cancel();
      });
    } catch (error) {
      options.signal?.removeEventListener("abort", onAbort);
      commitConversation();
      throw error;
    }
    kernel.hooks.delivered = controlled.delivered;
  }
  keepAlive = setInterval(() => {}, 2 ** 30);
  let completed = false;
  try {
    settle(nativeRun.start(JSON.stringify(graph), specJson(runSpec), kernel.hooks));
    while (true) {
      while (events.size) {
        const event = events.shift();
        if (event.type === "run_error") {
          completed = true;
          yield event;
          return;
        }
        if (event.type === "run_end") {
          completed = true;
          commitConversation(event.result);
          if (prep.memoryRun?.ambient && event.result.text?.trim()) prep.memoryRun.engine.endTurn({ sessionId: prep.sessionId, text: event.result.text });
        }
        yield event;
        if (completed) return;
      }
      if (outcome?.phase === "options") {
        const error = new Error(outcome.message);
        error.code = outcome.code;
        throw withHint(error);
      }
      // Otherwise the terminal event comes with (or before) the outcome.
      await events.wait();
    }
  } finally {
    registry.sandbox?.close();
    unbindBudget?.();
    controlled?.detach();
    commitConversation();
    options.signal?.removeEventListener("abort", onAbort);
    if (!completed && !outcome) {
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
