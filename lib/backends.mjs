// Execution backends: `localExecutionBackend()` over the Rust local backend, the
// `httpExecutionBackend()` client of the reference's HTTP protocol (JS, so a user's `fetch` is
// honoured), and the bridge that hands any object with `exec`/`readFile`/`writeFile` to the
// Rust tools as a core `ExecutionBackend`.
import { randomUUID } from "node:crypto";
import { native, codedError, cancelTokenFor, call } from "./native.mjs";
import { didYouMean } from "./config-keys.mjs";
import { readCapped } from "./http-body.mjs";

/** Backend objects and the native backend each stands for. */
const NATIVE = new WeakMap();
/** The reference's local marker: only objects `localExecutionBackend()` made are local. */
const LOCAL = new WeakSet();

export function isLocalExecutionBackend(backend) {
  return LOCAL.has(backend);
}

const invalid = (field) => codedError(`cave_execution_backend_exec_request_invalid:${field}`);

/** The typed request the native backend takes; shape errors name the field. */
function execRequest(request) {
  if (request === null || typeof request !== "object") throw invalid("request");
  const { command, args = [], cwd = process.cwd(), env, timeoutMs, maxOutputBytes } = request;
  if (typeof command !== "string") throw invalid("command");
  if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) throw invalid("args");
  if (typeof cwd !== "string") throw invalid("cwd");
  if (env === null || typeof env !== "object" || Array.isArray(env)) throw invalid("env");
  const pairs = {};
  for (const [key, value] of Object.entries(env)) {
    if (typeof value !== "string") throw invalid("env");
    pairs[key] = value;
  }
  if (typeof timeoutMs !== "number") throw invalid("timeoutMs");
  if (typeof maxOutputBytes !== "number") throw invalid("maxOutputBytes");
  return { command, args: [...args], cwd, env: pairs, timeoutMs, maxOutputBytes };
}

/** The reference's `ExecResult` shape (`startFailed` only when the command could not start). */
function execResult(r) {
  const out = { stdout: r.stdout, stderr: r.stderr, code: r.code ?? null, timedOut: r.timedOut, truncated: r.truncated };
  if (r.startFailed !== undefined && r.startFailed !== null) out.startFailed = r.startFailed;
  return out;
}

function bytesOf(data) {
  if (typeof data === "string") return Buffer.from(data);
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  throw codedError("cave_execution_backend_write_data_invalid");
}

/** This host: commands, reads and writes run in Rust. */
export function localExecutionBackend() {
  const handle = new native.NativeExecutionBackend();
  const backend = Object.freeze({
    id: "local",
    async exec(request) {
      const typed = execRequest(request);
      const [token, dispose] = cancelTokenFor(request.signal);
      try {
        return execResult(await call(handle.exec(typed, token)));
      } finally {
        dispose();
      }
    },
    async readFile(path, options) {
      return call(handle.readFile(String(path), options?.maxBytes));
    },
    async writeFile(path, data) {
      await call(handle.writeFile(String(path), bytesOf(data)));
    },
    async close() {
      handle.close();
    },
  });
  NATIVE.set(backend, handle);
  LOCAL.add(backend);
  return backend;
}

/** A thrown error as the reply the native bridge reads (`ok: false`, its code and message). */
function failure(error) {
  return {
    ok: false,
    code: typeof error?.code === "string" ? error.code : undefined,
    message: error instanceof Error ? error.message : String(error),
  };
}

function validJsResult(r) {
  return (
    r !== null &&
    typeof r === "object" &&
    typeof r.stdout === "string" &&
    typeof r.stderr === "string" &&
    (r.code === null || typeof r.code === "number") &&
    typeof r.timedOut === "boolean" &&
    typeof r.truncated === "boolean" &&
    (r.startFailed === undefined || typeof r.startFailed === "boolean")
  );
}

/**
 * The native backend for `backend`: this host's for a local one, else a bridge that calls the
 * object's own `exec`/`readFile`/`writeFile` (with an `AbortSignal` Rust can fire).
 */
export function nativeBackendFor(backend) {
  const known = NATIVE.get(backend);
  if (known) return known;
  if (backend === null || typeof backend !== "object") throw codedError("cave_execution_backend_invalid");
  for (const method of ["exec", "readFile", "writeFile"]) {
    if (typeof backend[method] !== "function") {
      throw codedError(`cave_execution_backend_invalid:${method}`, `cave_execution_backend_invalid:${method}: an execution backend needs exec, readFile and writeFile methods`);
    }
  }
  const controllers = new Map();
  const exec = async ({ callId, request }) => {
    const controller = new AbortController();
    controllers.set(callId, controller);
    try {
      const r = await backend.exec({ ...request, signal: controller.signal });
      if (!validJsResult(r)) return { ok: false, code: "cave_execution_backend_exec_result_invalid", message: "cave_execution_backend_exec_result_invalid" };
      return { ok: true, exec: { ...r, code: r.code } };
    } catch (error) {
      return failure(error);
    } finally {
      controllers.delete(callId);
    }
  };
  const readFile = async ({ path, maxBytes }) => {
    try {
      const data = await backend.readFile(path, maxBytes === undefined || maxBytes === null ? undefined : { maxBytes });
      if (!(data instanceof Uint8Array)) return { ok: false, code: "cave_execution_backend_read_result_invalid", message: "cave_execution_backend_read_result_invalid" };
      return { ok: true, data: Buffer.from(data.buffer, data.byteOffset, data.byteLength) };
    } catch (error) {
      return failure(error);
    }
  };
  const writeFile = async ({ path, data }) => {
    try {
      await backend.writeFile(path, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      return { ok: true };
    } catch (error) {
      return failure(error);
    }
  };
  const abort = (callId) => {
    try {
      controllers.get(callId)?.abort();
    } catch {
      // An abort listener's failure is the backend's; the call still ends.
    }
  };
  const handle = native.NativeExecutionBackend.fromJs(String(backend.id ?? "custom"), exec, readFile, writeFile, abort);
  NATIVE.set(backend, handle);
  return handle;
}

// ---------- the HTTP client ----------

const HTTP_OPTIONS = new Set(["url", "token", "fetch"]);
const MAX_RESPONSE = native.HTTP_BACKEND_RESPONSE_MAX_BYTES;
const SLACK = native.HTTP_BACKEND_RESPONSE_SLACK_BYTES;
const CANCEL_TIMEOUT_MS = native.HTTP_BACKEND_CANCEL_TIMEOUT_MS;

function loopback(hostname) {
  return hostname === "localhost" || hostname === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/** A response body as text, refused once it goes over `cap` bytes. */
async function readText(response, cap) {
  const { bytes, truncated } = await readCapped(response, cap);
  if (truncated) throw codedError("cave_execution_backend_http_response_too_large");
  return bytes.toString("utf8");
}

/** Cuts a string to `max` UTF-8 bytes (a cut may split a character, as the reference's does). */
function cutBytes(text, max) {
  const bytes = Buffer.from(text);
  return bytes.length <= max ? [text, bytes.length, false] : [bytes.subarray(0, max).toString("utf8"), max, true];
}

/**
 * `httpExecutionBackend({ url, token, fetch? })`: every call is a POST with a bearer token to
 * `<url>/exec`, `/read`, `/write` (and `/cancel`, `/prepare`, `/snapshot`, `/restore`).
 */
export function httpExecutionBackend(options) {
  if (options === null || typeof options !== "object") throw codedError("cave_execution_backend_http_url_required");
  for (const key of Object.keys(options)) {
    if (!HTTP_OPTIONS.has(key)) {
      const code = `cave_execution_backend_http_option_unknown:${key}`;
      throw codedError(code, `${code}\nhint: ${didYouMean(key, HTTP_OPTIONS)}the options are ${[...HTTP_OPTIONS].join(", ")}`);
    }
  }
  const base = typeof options.url === "string" ? options.url.replace(/\/+$/, "") : "";
  if (base === "") throw codedError("cave_execution_backend_http_url_required");
  const parsed = new URL(base);
  if (parsed.protocol !== "https:" && !(parsed.protocol === "http:" && loopback(parsed.hostname))) {
    throw codedError("cave_execution_backend_http_insecure_url");
  }
  if (typeof options.token !== "string" || options.token === "") throw codedError("cave_execution_backend_http_token_required");
  const token = options.token;
  const fetchImpl = options.fetch ?? globalThis.fetch;
  if (typeof fetchImpl !== "function") throw codedError("cave_execution_backend_http_fetch_invalid");

  const post = async (endpoint, body, cap, signal) => {
    const response = await fetchImpl(`${base}/${endpoint}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });
    if (!(response.status >= 200 && response.status < 300)) {
      // Error bodies are never read.
      await response.body?.cancel?.().catch(() => {});
      if (response.status === 403) throw codedError("cave_workspace_escape", "caveman-code: path escapes the workspace");
      const message = `cave_execution_backend_http_${endpoint}_failed:${response.status}`;
      const code = endpoint === "read" && response.status === 404 ? "ENOENT" : endpoint === "read" && response.status === 422 ? "EISDIR" : message;
      throw codedError(code, message);
    }
    const text = await readText(response, cap);
    return text === "" ? {} : JSON.parse(text);
  };

  return Object.freeze({
    id: "http",
    async exec(request) {
      const { signal } = request;
      const execId = randomUUID();
      const { command, args, cwd, env, timeoutMs, maxOutputBytes } = request;
      const max = Number.isSafeInteger(maxOutputBytes) && maxOutputBytes >= 0 ? maxOutputBytes : undefined;
      let value;
      try {
        value = await post("exec", { execId, command, args, cwd, env, timeoutMs, maxOutputBytes }, max === undefined ? MAX_RESPONSE : 2 * max + SLACK, signal);
      } catch (error) {
        if (error?.name !== "AbortError") throw error;
        await post("cancel", { execId }, SLACK, AbortSignal.timeout(CANCEL_TIMEOUT_MS)).catch(() => {});
        return { stdout: "", stderr: "cave_execution_backend_aborted", code: null, timedOut: false, truncated: false };
      }
      if (!validJsResult(value)) throw codedError("cave_execution_backend_http_exec_invalid");
      let [stdout, used, cutOut] = [value.stdout, 0, false];
      let [stderr, cutErr] = [value.stderr, false];
      if (max !== undefined) {
        [stdout, used, cutOut] = cutBytes(value.stdout, max);
        [stderr, , cutErr] = cutBytes(value.stderr, max - used);
      }
      const out = { stdout, stderr, code: value.code, timedOut: value.timedOut, truncated: value.truncated || cutOut || cutErr };
      if (value.startFailed !== undefined) out.startFailed = value.startFailed;
      return out;
    },
    async readFile(path, readOptions) {
      const maxBytes = readOptions?.maxBytes;
      const body = maxBytes === undefined ? { path } : { path, maxBytes };
      const cap = typeof maxBytes === "number" && maxBytes >= 0 ? Math.ceil((maxBytes * 4) / 3) + SLACK : MAX_RESPONSE;
      const value = await post("read", body, cap);
      if (typeof value?.data !== "string") throw codedError("cave_execution_backend_http_read_invalid");
      const data = Buffer.from(value.data, "base64");
      return typeof maxBytes === "number" && data.length > maxBytes ? data.subarray(0, maxBytes) : data;
    },
    async writeFile(path, data) {
      await post("write", { path, data: bytesOf(data).toString("base64") }, MAX_RESPONSE);
    },
    async prepare() {
      await post("prepare", {}, MAX_RESPONSE);
    },
    async snapshot() {
      const value = await post("snapshot", {}, MAX_RESPONSE);
      if (typeof value?.snapshotId !== "string" || value.snapshotId === "") throw codedError("cave_execution_backend_http_snapshot_invalid");
      return value.snapshotId;
    },
    async restore(snapshotId) {
      await post("restore", { snapshotId }, MAX_RESPONSE);
    },
  });
}
