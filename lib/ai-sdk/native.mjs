// Bridge to the native tool set: knap's own sandbox takes the native fast paths; any other
// Sandbox object is handed to the core as a set of callbacks (one per bashkit method).
import { native, call, decodeNativeError, cancelTokenFor } from "../native.mjs";

export { native, call, decodeNativeError };

/** Forwards an AbortSignal to a native CancelToken (the one helper the whole JS layer uses). */
export { cancelTokenFor as tokenFor } from "../native.mjs";

/** The AI SDK tool set's limits, from knap-core's one limits module. */
export const LIMITS = Object.freeze(native.aiSdkLimits());

/** Marks a sandbox made by `createLocalSandbox`; the value is `{ native }`. */
export const KNAP_SANDBOX = Symbol.for("knap.aiSdk.sandbox");

/** The native state of a knap sandbox, or `undefined` for any other `Sandbox` object. */
export function knapOf(sandbox) {
  return sandbox && typeof sandbox === "object" ? sandbox[KNAP_SANDBOX] : undefined;
}

const text = (v) => (v === undefined || v === null ? "" : String(v));
const number = (v) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
const bool = (v) => (typeof v === "boolean" ? v : undefined);

/**
 * A user's sandbox as the core's callbacks: each returns a Promise of a normalized value. A
 * pending Promise stays referenced here until it settles: napi holds only its reaction
 * callbacks, and a never-settling promise nothing else references would be collected, ending
 * the native await early instead of at the tool's timeout.
 */
function sandboxMethods(sandbox) {
  const pending = new Set();
  const keep = (fn) =>
    async (...args) => {
      const p = Promise.resolve().then(() => fn(...args));
      pending.add(p);
      try {
        return await p;
      } finally {
        pending.delete(p);
      }
    };
  return {
    exec: keep(async (command, options) => {
      const execOptions = { timeout: options?.timeout ?? undefined };
      const id = options?.progress;
      // Bash with onProgress: the sandbox's chunks go to knap-core's progress buffer.
      if (typeof id === "number") execOptions.onOutput = (chunk, stream) => native.pushSandboxOutput(id, stream === "stderr" ? "stderr" : "stdout", text(chunk));
      const r = (await sandbox.exec(command, execOptions)) ?? {};
      return {
        stdout: text(r.stdout),
        stderr: text(r.stderr),
        exitCode: number(r.exitCode),
        durationMs: number(r.durationMs),
        interrupted: bool(r.interrupted),
      };
    }),
    readFile: keep(async (p) => String(await sandbox.readFile(p))),
    writeFile: keep(async (p, content) => (await sandbox.writeFile(p, content), true)),
    readDir: keep(async (p) => Array.from(await sandbox.readDir(p), String)),
    fileExists: keep(async (p) => Boolean(await sandbox.fileExists(p))),
    isDirectory: keep(async (p) => Boolean(await sandbox.isDirectory(p))),
    deleteFile: typeof sandbox.deleteFile === "function" ? keep(async (p) => (await sandbox.deleteFile(p), true)) : undefined,
    rgPath: async () => (typeof sandbox.rgPath === "string" && sandbox.rgPath !== "" ? sandbox.rgPath : null),
    workingDirectory: typeof sandbox.workingDirectory === "string" ? sandbox.workingDirectory : undefined,
  };
}

/** The native tool set over `sandbox` (knap's or any other). */
export function nativeToolsFor(sandbox, defaultTimeout) {
  const knap = knapOf(sandbox);
  const ms = typeof defaultTimeout === "number" ? defaultTimeout : undefined;
  return knap ? native.NativeAgentTools.local(knap.native, ms) : native.NativeAgentTools.js(sandboxMethods(sandbox), ms);
}
