// Bridge to the native sandbox: error decoding and the marker that lets the tools take the
// native fast paths when the sandbox is knap's own.
import { native, codedError } from "../native.mjs";

export { native };

/** Marks a sandbox made by `createLocalSandbox`; the value is `{ native, background }`. */
export const KNAP_SANDBOX = Symbol.for("knap.aiSdk.sandbox");

/** The native state of a knap sandbox, or `undefined` for any other `Sandbox` object. */
export function knapOf(sandbox) {
  return sandbox && typeof sandbox === "object" ? sandbox[KNAP_SANDBOX] : undefined;
}

/**
 * Async native methods reject with `knap:<code>:<message>` (napi's async errors carry no custom
 * code); this turns that back into an Error with `.code`.
 */
export function decodeNativeError(error) {
  const m = typeof error?.message === "string" ? /^knap:([^:]*):([\s\S]*)$/.exec(error.message) : null;
  if (!m) return error;
  return codedError(m[1], m[2]);
}

export async function call(promise) {
  try {
    return await promise;
  } catch (error) {
    throw decodeNativeError(error);
  }
}

/** Forwards an AbortSignal to a native CancelToken (the one helper the whole JS layer uses). */
export { cancelTokenFor as tokenFor } from "../native.mjs";
