// Interactive command sessions, run and checked in Rust (knap_core::command_session): the
// runtime behind `knap/command-session`, plus the lookup shellTools() uses to reach its native
// handle (kept out of the public entry). Options cross as JSON; an AbortSignal crosses as a
// native cancel token.
import { native, codedError, cancelTokenFor, call, rethrowNative, deepFreeze } from "./native.mjs";

const NATIVE = new WeakMap();

/** The native runtime behind a runtime `createCommandSessionRuntime()` made (else undefined). */
export function nativeSessionsFor(runtime) {
  return NATIVE.get(runtime);
}

function json(value) {
  try {
    return JSON.stringify(value === undefined ? null : value) ?? "null";
  } catch {
    throw codedError("command_session_options_invalid");
  }
}

/** The options without their `signal`, which does not cross as JSON. */
function split(options) {
  if (options === null || typeof options !== "object" || Array.isArray(options)) return [options, undefined];
  const { signal, ...rest } = options;
  return [rest, signal];
}

export function createCommandSessionRuntime(options) {
  let handle;
  try {
    handle = new native.NativeCommandSessionRuntime(json(options));
  } catch (error) {
    rethrowNative(error);
  }
  const once = async (method, options) => {
    const [rest, signal] = split(options);
    const [token, dispose] = cancelTokenFor(signal);
    try {
      return JSON.parse(await call(handle[method](json(rest), token)));
    } finally {
      dispose();
    }
  };
  const runtime = Object.freeze({
    async start(options) {
      const [rest, signal] = split(options);
      // The start signal kills the session whenever it fires, for the session's whole life.
      const [token] = cancelTokenFor(signal);
      return JSON.parse(await call(handle.start(json(rest), token)));
    },
    list() {
      return deepFreeze(JSON.parse(handle.list()));
    },
    read: (options) => once("read", options),
    write: (options) => once("write", options),
    async kill(sessionId) {
      return JSON.parse(await call(handle.kill(json(sessionId))));
    },
    async close() {
      await handle.close();
    },
  });
  NATIVE.set(runtime, handle);
  return runtime;
}
