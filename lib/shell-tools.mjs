// The six workspace tools and the tool-policy evaluator, as plain JS objects over the Rust engine.
import { traced } from "./debug.mjs";
import { native, codedError, abortError, cancelTokenFor, rethrowNative, askPolicy, deepFreeze } from "./native.mjs";
import { isLocalExecutionBackend, nativeBackendFor } from "./backends.mjs";
import { nativeSessionsFor } from "./command-session-runtime.mjs";

export const TOOL_POLICY_TIMEOUT_MS = native.TOOL_POLICY_TIMEOUT_MS;

/** Marks tool objects built by `shellTools()` so the Rust kernel can dispatch them natively. */
export const NATIVE_TOOL = Symbol.for("knap.nativeTool");

/** True for `undefined` (the default) and for what `localExecutionBackend()` returns. */
export function isLocalBackend(backend) {
  return backend === undefined || isLocalExecutionBackend(backend);
}
export { localExecutionBackend, httpExecutionBackend } from "./backends.mjs";

/** A local workspace that is a file is refused (the check is knap-core's). */
function checkWorkspace(dir) {
  try {
    native.checkWorkspaceDirectory(dir, false);
  } catch (error) {
    rethrowNative(error);
  }
}

/**
 * A tool call's input as the native tool set takes it: a plain object of JSON values, built
 * member by member so that a large string is handed over as it is (never JSON-stringified on
 * this thread). What JSON would drop (`undefined`, functions, symbols) is dropped; a number
 * JSON cannot carry (NaN, ±Infinity) reaches the tool as a value of the wrong type, so it is
 * refused, never taken as the default; nested values go through JSON.
 */
function toolArguments(input) {
  if (input === undefined || input === null) return {};
  if (typeof input !== "object" || Array.isArray(input)) throw codedError("cave_tool_arguments_invalid");
  const out = {};
  for (const key of Object.keys(input)) {
    const value = input[key];
    switch (typeof value) {
      case "string":
      case "boolean":
        out[key] = value;
        break;
      case "number":
        // JSON has no NaN/Infinity (JSON.stringify would make it `null`, silently the default):
        // it goes on as a value no tool takes, so each tool refuses it with its own code (the
        // reference's, where the reference checks the field: read_tool_output, bash sessions).
        out[key] = Number.isFinite(value) ? value : { nonFinite: String(value) };
        break;
      case "undefined":
      case "function":
      case "symbol":
        break;
      default:
        try {
          const json = JSON.stringify(value);
          if (json !== undefined) out[key] = JSON.parse(json);
        } catch {
          throw codedError("cave_tool_arguments_invalid");
        }
    }
  }
  return out;
}

/**
 * The six workspace tools: `read_file`, `grep`, `bash`, `write_file`, `edit_file`,
 * `read_tool_output` (or the ones named in `tools`, in that order).
 */
export function shellTools(options) {
  if (!options || typeof options !== "object" || typeof options.workspace !== "string" || options.workspace === "") {
    throw codedError("cave_shell_tools_workspace_required", "cave_shell_tools_workspace_required: shellTools needs options.workspace (a directory path)");
  }
  const backend = options.executionBackend;
  const local = isLocalBackend(backend);
  // A local workspace that is a file can never work: refused now. A missing one may still be
  // created later (reference §5.1), so it fails at first use, with a hint. A remote backend's
  // workspace is the backend's to check.
  if (local) checkWorkspace(options.workspace);
  let sessions;
  if (options.commandSessions !== undefined) {
    if (!local) throw codedError("cave_execution_backend_command_sessions_local_only");
    sessions = nativeSessionsFor(options.commandSessions);
    if (!sessions) {
      throw codedError(
        "cave_command_sessions_invalid",
        "cave_command_sessions_invalid: commandSessions must be a runtime from createCommandSessionRuntime()",
      );
    }
  }
  const nativeBackend = backend === undefined ? undefined : nativeBackendFor(backend);
  const onOutput = typeof options.onOutput === "function" ? options.onOutput : undefined;
  let toolset;
  try {
    toolset = new native.NativeShellTools({
      workspace: options.workspace,
      tools: options.tools === undefined ? undefined : Array.from(options.tools, String),
      outputCaps: options.outputCaps ?? undefined,
    }, nativeBackend, sessions);
  } catch (error) {
    rethrowNative(error);
  }
  const tools = toolset.specs().map((spec) => {
    const name = spec.name;
    const execute = async (input, signal, _context) => {
      if (signal?.aborted) throw abortError(signal);
      const args = toolArguments(input);
      const [token, dispose] = cancelTokenFor(signal);
      let result;
      try {
        result = await toolset.execute(name, args, token);
      } finally {
        // A bash session started by this call dies when the call's signal fires, however late.
        if (!(sessions && name === "bash")) dispose();
      }
      if (!result.ok) {
        if (result.code === "ABORT_ERR") throw abortError(signal);
        // A missing workspace's hint line comes from the core (knap_core::workspace).
        throw codedError(result.code, result.message);
      }
      if (onOutput && result.label !== undefined) onOutput(result.label, result.text);
      return result.text;
    };
    const tool = {
      kind: "tool",
      name,
      description: spec.description,
      input: deepFreeze(JSON.parse(spec.inputJson)),
      effect: spec.effect,
      result: "inline",
      speculative: spec.speculative,
      timeoutMs: spec.timeoutMs,
      // Direct calls are traced here; inside a run the kernel dispatches natively and the run's
      // events are traced instead (lib/debug.mjs debugRunEvent).
      execute: traced(name, execute),
    };
    Object.defineProperty(tool, NATIVE_TOOL, { value: Object.freeze({ toolset, name, onOutput, local }) });
    return Object.freeze(tool);
  });
  // knap: `close()` kills every command the tool set still runs (with the daemons they
  // started); later calls reject with cave_shell_tools_closed. Not enumerable: the array is
  // the reference's ToolDefinition[].
  Object.defineProperty(tools, "close", { value: async () => toolset.close() });
  return tools;
}

/**
 * Evaluates a `toolPolicy` once, exactly as a run does: `undefined` allows, `{deny:"code"}`
 * returns `{ block: true, reason: "cave_tool_denied:code" }`; a throw, rejection or a
 * 10,000 ms timeout rejects with `cave_tool_policy_failed`, a malformed decision with
 * `cave_tool_policy_decision_invalid`, a bad code with `cave_tool_policy_reason_invalid`.
 */
export async function decideToolCall(policy, input) {
  if (typeof policy !== "function") throw codedError("cave_tool_policy_failed", "cave_tool_policy_failed", new TypeError("toolPolicy must be a function"));
  const failed = (cause) => codedError("cave_tool_policy_failed", "cave_tool_policy_failed", cause);
  // As the reference does, the policy is called on this thread with a frozen copy of the input;
  // its answer is judged in Rust (a Promise answer there under the 10,000 ms timeout).
  let answer;
  try {
    answer = askPolicy(policy, { ...input });
  } catch (error) {
    throw failed(error);
  }
  let decision;
  if (answer instanceof Promise) {
    let rejection;
    let rejected = false;
    const observed = answer.then(undefined, (error) => {
      rejected = true;
      rejection = error;
      throw error instanceof Error ? error : new Error(String(error));
    });
    decision = await native.awaitPolicyAnswer(observed, decideToolCall.timeoutMs);
    if (decision.code === "cave_tool_policy_failed") {
      throw failed(rejected ? rejection : codedError(decision.cause ?? "cave_tool_policy_timeout"));
    }
  } else {
    decision = native.judgePolicyAnswer(answer);
  }
  if (decision.outcome === "allow") return undefined;
  if (decision.outcome === "deny") return { block: true, reason: decision.reason };
  throw codedError(decision.code);
}

