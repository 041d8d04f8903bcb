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

export function encodeDecision(value) {
  if (value === undefined) return "u";
  try {
    const json = JSON.stringify(value);
    return json === undefined ? "x" : "j" + json;
  } catch {
    return "x";
  }
}

/**
 * Wraps a user `toolPolicy` for the native evaluator: the policy receives a frozen input and
 * may answer with a value or a Promise; the answer travels to Rust as an encoded string and
 * Rust judges it. `onError` sees what a throwing or rejecting policy threw (kept as `cause`).
 */
export function wrapPolicy(policy, onError) {
  // napi holds only the reaction callbacks of a returned promise. A never-settling promise that
  // nothing else references would be garbage-collected, and the native await would end as
  // cancelled instead of waiting for the policy timeout; so pending answers stay referenced here
  // until they settle (or this wrapper is released with its evaluation).
  const pending = new Set();
  return (inputJson) => {
    const input = JSON.parse(inputJson);
    Object.freeze(input);
    let answer;
    try {
      answer = policy(input);
    } catch (error) {
      onError?.(error);
      throw error;
    }
    if (answer !== null && (typeof answer === "object" || typeof answer === "function") && typeof answer.then === "function") {
      const settled = Promise.resolve(answer).then(encodeDecision, (error) => {
        onError?.(error);
        throw error instanceof Error ? error : new Error(String(error));
      });
      pending.add(settled);
      const forget = () => pending.delete(settled);
      settled.then(forget, forget);
      return settled;
    }
    return encodeDecision(answer);
  };
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
