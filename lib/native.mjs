// Loads the generated napi loader (CommonJS) and shares small helpers of the JS layer.
import { createRequire } from "node:module";
import { withHint } from "./hint.mjs";

export { withHint };

const require = createRequire(import.meta.url);

/** The targets knap publishes a binary for (npm/<target>/, .github/workflows/release.yml). */
export const SUPPORTED_TARGETS = Object.freeze([
  "linux-x64-gnu",
  "linux-arm64-gnu",
  "linux-x64-musl",
  "linux-arm64-musl",
  "darwin-x64",
  "darwin-arm64",
  "win32-x64-msvc",
]);

/** This machine as napi-rs names its targets (`linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`). */
export function currentTarget() {
  const { platform, arch } = process;
  if (platform === "linux") {
    let musl = false;
    try {
      musl = !process.report?.getReport?.()?.header?.glibcVersionRuntime;
    } catch {
      musl = false;
    }
    return `linux-${arch}-${musl ? "musl" : "gnu"}`;
  }
  if (platform === "win32") return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

function loadNative() {
  try {
    return require("../index.js");
  } catch (error) {
    // napi's loader blames "a bug related to optional dependencies" whenever no binary loads;
    // say instead which platform this is and the two ways out.
    if (!/Cannot find native binding|Failed to load native binding/.test(String(error?.message))) throw error;
    const target = currentTarget();
    const supported = SUPPORTED_TARGETS.includes(target);
    const first = supported
      ? `knap: the native binary for ${target} is not installed or did not load (Node ${process.version})`
      : `knap: no native binary for ${target} (Node ${process.version}); knap ships binaries for ${SUPPORTED_TARGETS.join(", ")}`;
    const hint = supported
      ? `reinstall so npm fetches the optional package knap-${target} (npm install; with --omit=optional or --no-optional it is skipped), or build from source with Rust ≥ 1.88: npm run build in the knap package`
      : `run on one of those platforms, or build from source with Rust ≥ 1.88 (https://rustup.rs): clone knap, npm ci && npm run build, and depend on that directory`;
    const e = withHint(new Error(`${first}\nhint: ${hint}`));
    e.code = "cave_native_binding_missing";
    e.cause = error;
    throw e;
  }
}

export const native = loadNative();

/** A JS `Error` carrying the reference's message and a stable `code` (and `hint`, see withHint). */
export function codedError(code, message = code, cause) {
  const error = cause === undefined ? new Error(message) : new Error(message, { cause });
  error.code = code;
  return withHint(error);
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
