// `createLocalSandbox`: bashkit's `Sandbox` interface on Node, backed by knap's Rust engine
// (knap_core::sandbox::LocalSandbox). File operations are confined to the working directory
// (the workspace boundary of `shellTools()`); commands run `/bin/sh -c` in it, in their own
// process group, killed as a group on timeout or abort, with only a head and a tail of each
// stream held in memory.
import { native, KNAP_SANDBOX, LIMITS, call, tokenFor } from "./native.mjs";
import { codedError, abortError } from "../native.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";
import { progressListener } from "./tools.mjs";

/** A file operation under the caller's AbortSignal: the native work stops between pieces. */
async function abortable(signal, start) {
  if (signal?.aborted) throw abortError(signal);
  const [token, dispose] = tokenFor(signal);
  try {
    return await call(start(token));
  } catch (error) {
    if (error?.code === "ABORT_ERR") throw abortError(signal);
    throw error;
  } finally {
    dispose();
  }
}

/** What `sandbox.exec` returns at most per stream, in characters (the rest is middle-truncated). */
export const EXEC_MAX_OUTPUT_LENGTH = LIMITS.execMaxOutputLength;

/**
 * @param {{ workingDirectory?: string, cwd?: string, env?: Record<string,string> }} [config]
 *   `workingDirectory` (the seed's name) or `cwd` (bashkit's): default `/tmp`, created if
 *   missing. `env`: variables added to the allow-listed environment (`PATH`, `HOME`, `LANG`, …;
 *   the host's API keys are never passed on).
 */
export function createLocalSandbox(config = {}) {
  refuseUnknownKeys("createLocalSandbox", config, ["workingDirectory", "cwd", "env"]);
  const dir = String(config.workingDirectory ?? config.cwd ?? "/tmp");
  // A file is refused here; a missing directory is created by the sandbox, as bashkit's is.
  try {
    native.checkWorkspaceDirectory(dir, true);
  } catch (error) {
    throw codedError(error.code, error.message);
  }
  let handle;
  try {
    handle = new native.NativeSandbox({ workspace: String(config.workingDirectory ?? config.cwd ?? "/tmp"), env: config.env ?? undefined });
  } catch (error) {
    throw codedError(error.code ?? "cave_sandbox_failed", error.message);
  }
  const root = handle.root;
  const state = { native: handle, root };
  const exists = async (path) => (await call(handle.stat(String(path)))).exists;

  const sandbox = {
    /**
     * `options`: `timeout` (ms), `cwd` (inside the workspace), and knap's `signal`
     * (AbortSignal), `maxOutputLength` (characters per stream, default 10,000,000) and
     * `onOutput(chunk, stream, { skipped })` (the output while the command runs, through
     * knap-core's 256 KiB progress buffer; `skipped`: bytes dropped before this chunk because
     * the listener fell behind).
     */
    async exec(command, options = {}) {
      const onOutput = options.onOutput ?? undefined;
      if (onOutput !== undefined && typeof onOutput !== "function") {
        throw codedError("cave_sandbox_exec_option_invalid", `cave_sandbox_exec_option_invalid: exec onOutput must be a function, received ${typeof onOutput}\nhint: onOutput: (chunk, stream) => process.stdout.write(chunk)`);
      }
      const [listener, state] = onOutput ? progressListener((c) => onOutput(c.chunk, c.stream, { skipped: c.skipped })) : [undefined, undefined];
      const [token, dispose] = tokenFor(options.signal);
      try {
        const r = await call(
          handle.exec(String(command), options.timeout ?? undefined, options.cwd ?? undefined, options.maxOutputLength ?? EXEC_MAX_OUTPUT_LENGTH, token, listener),
        );
        // The command has ended: a listener's error is the caller's to see.
        if (state?.error !== undefined) throw state.error;
        return { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, durationMs: r.durationMs, interrupted: r.interrupted };
      } finally {
        dispose();
      }
    },
    /** knap: `options.signal` (AbortSignal) stops the read; it rejects with an AbortError. */
    readFile: (path, options) => abortable(options?.signal, (token) => handle.readFile(String(path), token)),
    /** knap: `options.signal` stops the write (the file keeps its old content); AbortError. */
    writeFile: (path, content, options) => abortable(options?.signal, (token) => handle.writeFile(String(path), String(content), token)),
    readDir: (path) => call(handle.readDir(String(path))),
    fileExists: exists,
    async isDirectory(path) {
      return (await call(handle.stat(String(path)))).isDirectory;
    },
    deleteFile: (path) => call(handle.deleteFile(String(path))),
    rename: (from, to) => call(handle.rename(String(from), String(to))),
    /** Stops the commands that Bash started with `run_in_background`. */
    async destroy() {
      handle.destroy();
    },
    /** The canonical workspace directory. */
    workingDirectory: root,
    id: undefined,
  };
  Object.defineProperty(sandbox, KNAP_SANDBOX, { value: state });
  return sandbox;
}
