// Bridge to the native sandbox: error decoding and the marker that lets the tools take the
// native fast paths when the sandbox is knap's own.
import { native } from "../native.mjs";

export { native };

/** Marks a sandbox made by `createLocalSandbox`; the value is `{ native, background }`. */
export const KNAP_SANDBOX = Symbol.for("knap.aiSdk.sandbox");

/** The native state of a knap sandbox, or `undefined` for any other `Sandbox` object. */
export function knapOf(sandbox) {
  return sandbox && typeof sandbox === "object" ? sandbox[KNAP_SANDBOX] : undefined;
}

export { call, decodeNativeError } from "../native.mjs";

/** Forwards an AbortSignal to a native CancelToken (the one helper the whole JS layer uses). */
export { cancelTokenFor as tokenFor } from "../native.mjs";
