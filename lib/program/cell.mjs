// The parent side of one programmatic cell: starts its Worker, admits each nested call with the
// native ledger (call budget, arguments, repeats; knap_core::program), dispatches it through the
// kernel as a composite call (`context.dispatch`, policy-checked with `parentToolCallId`), and
// turns the Worker's end into the cell's result or its `cave_program_*` error.
import { createRequire } from "node:module";
import { native, codedError } from "../native.mjs";

const WORKER_URL = new URL("./worker.mjs", import.meta.url);
// Loaded with the first cell: a coding session that never runs one does not pay for it.
const require = createRequire(import.meta.url);
let workerThreads;
const WORKER_ENV_KEYS = ["LANG", "LC_ALL", "TZ", "NO_COLOR"];

let limitsCache;
export function codingLimits() {
  limitsCache ??= Object.freeze(native.codingLimits());
  return limitsCache;
}

function workerEnv() {
  const env = {};
  for (const key of WORKER_ENV_KEYS) if (typeof process.env[key] === "string") env[key] = process.env[key];
  return env;
}

const failure = (code, cause) => codedError(code.split(":")[0], code, cause);

/**
 * Runs `code` as a cell. `runtime` = { nativeTools, nested (name → tool), stats }.
 * Resolves with the cell's output text; rejects with a `cave_program_*` error.
 */
export function runCell(runtime, code, signal, context) {
  const sourceError = native.checkProgramSource(typeof code === "string" ? code : undefined);
  if (sourceError) return Promise.reject(failure(sourceError));
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  const limits = codingLimits();
  const ledger = new native.NativeProgramCell(runtime.nativeTools);
  const programAbort = new AbortController();
  const inFlight = new Set();
  let sawNonRead = false;
  let settled = false;
  let worker;

  return new Promise((resolve, reject) => {
    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const succeed = (text) => {
      if (settled) return;
      settled = true;
      cleanup();
      // Success aborts nothing: a yielded bash session outlives its cell.
      worker.terminate().catch(() => {});
      resolve(text);
    };
    const fail = (error) => {
      if (settled) return;
      settled = true;
      cleanup();
      programAbort.abort(error);
      worker?.terminate().catch(() => {});
      quiesce(inFlight, limits.programSettleMs).then(
        () => reject(error),
        () => reject(failure("cave_program_nested_calls_unquiesced", error)),
      );
    };
    const onAbort = () => fail(abortReason(signal));
    signal?.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(() => fail(failure("cave_program_timeout")), limits.programTimeoutMs);

    const reply = (id, ok, text) => {
      if (!settled) worker.postMessage({ t: "settle", id, ok, text });
    };

    const call = (id, name, json) => {
      const refused = json === null ? `cave_program_tool_arguments_invalid:${name}` : ledger.admit(name, json);
      if (refused) return reply(id, false, refused);
      const tool = runtime.nested.get(name);
      if (!context || typeof context.dispatch !== "function") return reply(id, false, "cave_program_nested_dispatch_unavailable");
      // Until the cell's first non-read call, a speculative read claims the call the kernel
      // may have launched while the cell streamed (the kernel counts hits and misses).
      if (tool.effect !== "read") sawNonRead = true;
      const claim = runtime.speculate && tool.speculative === true && !sawNonRead;
      let dispatched;
      try {
        const options = claim ? { signal: programAbort.signal, claimSpeculation: true } : { signal: programAbort.signal };
        dispatched = Promise.resolve(context.dispatch(name, JSON.parse(json), options));
      } catch (error) {
        dispatched = Promise.reject(error);
      }
      const tracked = dispatched.then(
        (value) => {
          let text;
          try {
            text = value === undefined ? "null" : JSON.stringify(value);
          } catch {
            text = undefined;
          }
          if (text === undefined) reply(id, false, `cave_program_tool_result_unserializable:${name}`);
          else reply(id, true, text);
        },
        (error) => reply(id, false, error instanceof Error ? error.message : String(error)),
      );
      inFlight.add(tracked);
      tracked.finally(() => inFlight.delete(tracked));
    };

    let Worker;
    try {
      ({ Worker } = workerThreads ?? (workerThreads = require("node:worker_threads")));
      worker = new Worker(WORKER_URL, {
        workerData: { code, names: [...runtime.nested.keys()], syncTimeoutMs: limits.programSyncTimeoutMs },
        execArgv: [],
        argv: [],
        env: workerEnv(),
        stdin: false,
        resourceLimits: {
          maxOldGenerationSizeMb: limits.programWorkerOldGenerationMb,
          maxYoungGenerationSizeMb: limits.programWorkerYoungGenerationMb,
          stackSizeMb: limits.programWorkerStackMb,
        },
      });
    } catch (error) {
      fail(failure("cave_program_worker_failed", error));
      return;
    }
    worker.on("message", (message) => {
      if (settled) return;
      switch (message?.t) {
        case "call":
          if (typeof message.id === "number" && typeof message.name === "string") return call(message.id, message.name, message.json);
          break;
        case "done":
          if (Array.isArray(message.lines)) {
            return succeed(native.programCellOutput(message.lines, typeof message.value === "string" ? message.value : null));
          }
          break;
        case "fail":
          return fail(failure(`cave_program_execution_failed:${String(message.message)}`));
      }
      fail(failure("cave_program_worker_protocol_invalid"));
    });
    worker.on("error", (error) => fail(failure("cave_program_worker_failed", error)));
    worker.on("exit", (exitCode) => fail(failure(`cave_program_worker_exit:${exitCode}`)));
  });
}

function abortReason(signal) {
  return signal.reason instanceof Error ? signal.reason : failure("cave_program_aborted");
}

/** Resolves when every admitted call has settled, rejects after `ms`. */
function quiesce(inFlight, ms) {
  if (inFlight.size === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(reject, ms);
    Promise.allSettled([...inFlight]).then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
