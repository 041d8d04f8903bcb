// Loads the generated napi loader (CommonJS) and shares small helpers of the JS layer.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
export const native = require("../index.js");

/** A JS `Error` carrying the reference's message and a stable `code`. */
export function codedError(code, message = code, cause) {
  const error = cause === undefined ? new Error(message) : new Error(message, { cause });
  error.code = code;
  return error;
}

/** Node's own AbortError shape, for aborted tool calls. */
export function abortError(signal) {
  const error = new Error("The operation was aborted", signal?.reason === undefined ? undefined : { cause: signal.reason });
  error.name = "AbortError";
  error.code = "ABORT_ERR";
  return error;
}

/** Forwards an AbortSignal to a native CancelToken; returns [token, dispose]. */
export function cancelTokenFor(signal) {
  if (!signal) return [undefined, () => {}];
  const token = new native.CancelToken();
  if (signal.aborted) {
    token.cancel();
    return [token, () => {}];
  }
  const onAbort = () => token.cancel();
  signal.addEventListener("abort", onAbort, { once: true });
  return [token, () => signal.removeEventListener("abort", onAbort)];
}

/** Rethrows a native constructor error with its code (napi puts our code in `error.code`). */
export function rethrowNative(error) {
  if (error && typeof error === "object" && typeof error.code === "string" && error.message) {
    throw codedError(error.code, error.message);
  }
  throw error;
}

const isThenable = (v) => v !== null && (typeof v === "object" || typeof v === "function") && typeof v.then === "function";

// napi holds only the reaction callbacks of a Promise a policy returns. A never-settling promise
// that nothing else references would be garbage-collected, and the native await would end as
// cancelled instead of waiting for the policy timeout; so pending answers stay referenced here
// until they settle.
const pendingAnswers = new Set();

/**
 * Calls a user `toolPolicy` as the reference does: with the input frozen. Returns its answer
 * for Rust to judge; a thenable answer becomes a native Promise, kept referenced until it
 * settles. A synchronous throw propagates.
 */
export function askPolicy(policy, input) {
  const answer = policy(Object.freeze(input));
  if (!isThenable(answer)) return answer;
  const settled = Promise.resolve(answer);
  pendingAnswers.add(settled);
  const forget = () => pendingAnswers.delete(settled);
  settled.then(forget, forget);
  return settled;
}

export function deepFreeze(value) {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze(value[key]);
  }
  return value;
}

/**
 * Async native exports reject with `knap:{"code":…,"message":…}` (napi's async errors carry no
 * custom code); this turns that back into an Error with `.code`.
 */
export function decodeNativeError(error) {
  const text = typeof error?.message === "string" ? error.message : "";
  if (!text.startsWith("knap:{")) return error;
  try {
    const { code, message } = JSON.parse(text.slice(5));
    return codedError(code, message);
  } catch {
    return error;
  }
}

/** Awaits a native promise, decoding its rejection. */
export async function call(promise) {
  try {
    return await promise;
  } catch (error) {
    throw decodeNativeError(error);
  }
}
