// `sandbox: "required"` with `RunOptions.entryPath`: the tool closures of a required level run
// in Node worker processes, one pool per run (child_process.fork of ./sandbox-worker.mjs). Each
// worker imports the entry module and finds the same agent definition (by id; a subagent's
// agent through its subagent tool names); a call's arguments, context, result, error and abort
// cross the IPC channel. The kernel only routes: it admits the level's tools because an entry is
// given, and calls them as host tools; what the JS side registers for them is a proxy from here.
//
// What the separation guarantees: a sandboxed closure runs in another process, so it cannot
// read or change the parent's memory (globals, module state, the run's objects, other runs),
// cannot crash or block the parent's event loop, and sees only the environment variables below
// plus `sandboxProfile.credentialEnv`; the parent is made non-dumpable first, so a worker of a
// non-root user cannot read the parent's environment or memory through /proc either (a root
// worker can: knap drops no capabilities in workers). It runs as the same OS user with the same
// file system and network: knap has no OS sandbox (verifySandboxConformance() resolves false),
// and the entry is imported from where it is, not from a staged copy.
import { fork } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { native, codedError, abortError } from "./native.mjs";
import { NATIVE_TOOL } from "./shell-tools.mjs";

const WORKER_PATH = fileURLToPath(new URL("./sandbox-worker.mjs", import.meta.url));
const WORKER_MARK = Symbol.for("knap.sandboxWorker");
// Enough for Node, the locale and temporary files; no credential unless named.
const BASE_ENV = ["PATH", "HOME", "USERPROFILE", "SystemRoot", "TMPDIR", "TEMP", "TMP", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "NO_COLOR", "NODE_OPTIONS"];
// Parent flags a worker keeps: module loaders and conditions (a TypeScript entry imports as it
// does in the parent) and language flags. Never the parent's script, -e code, inspector or test runner.
const KEPT_FLAGS = /^(--import|--loader|--experimental-loader|--require|-r|--conditions|-C|--experimental-[a-z-]+|--no-experimental-[a-z-]+|--enable-source-maps|--no-warnings|--disable-warning|--stack-size|--max-old-space-size)(=|$)/;
const FLAGS_WITH_VALUE = new Set(["--import", "--loader", "--experimental-loader", "--require", "-r", "--conditions", "-C", "--disable-warning"]);

let limitsCache;
const limits = () => (limitsCache ??= Object.freeze(native.sandboxLimits()));

// Worker process groups still alive, killed if this process exits first.
const live = new Set();
let exitHook = false;
function track(worker) {
  live.add(worker);
  if (!exitHook) {
    exitHook = true;
    process.once("exit", () => {
      for (const w of live) w.kill();
    });
  }
}

function workerExecArgv() {
  const out = [];
  const argv = process.execArgv;
  for (let i = 0; i < argv.length; i++) {
    const m = KEPT_FLAGS.exec(argv[i]);
    if (!m) continue;
    out.push(argv[i]);
    if (m[2] === "" && FLAGS_WITH_VALUE.has(m[1]) && i + 1 < argv.length) out.push(argv[++i]);
  }
  return out;
}

function workerEnv(profile) {
  const env = {};
  for (const key of [...BASE_ENV, ...(profile?.credentialEnv ?? [])]) {
    if (typeof process.env[key] === "string") env[key] = process.env[key];
  }
  return env;
}

const exitError = (name, code, signal) => {
  const how = signal ?? String(code);
  return codedError("cave_sandbox_worker_exit", `cave_sandbox_worker_exit:${how}: the worker process ${name ? `running tool ${JSON.stringify(name)} ` : ""}exited (${signal ? `signal ${signal}` : `code ${code}`})`);
};
const protocolError = () => codedError("cave_sandbox_worker_protocol_invalid", "cave_sandbox_worker_protocol_invalid: a sandbox worker sent a message knap does not understand");

/** An Error as a worker reported it: the message, `code` and `name` (what the model reads is the message). */
function rebuilt(reported) {
  const error = new Error(String(reported?.message ?? "a sandboxed tool failed"));
  if (typeof reported?.code === "string") error.code = reported.code;
  if (typeof reported?.name === "string" && reported.name !== "Error") error.name = reported.name;
  return error;
}

/** One worker process: it runs one call at a time. */
class SandboxWorker {
  #child;
  #pending;
  #onGone;
  #nextId = 0;
  #reaped = false;
  retired = false;
  gone = false;

  constructor(options, onGone) {
    this.#onGone = onGone;
    this.#child = fork(WORKER_PATH, [], {
      cwd: process.cwd(),
      env: options.env,
      execArgv: options.execArgv,
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      detached: process.platform !== "win32",
      serialization: "json",
    });
    // Neither an idle worker nor its channel keeps the parent alive; the run does.
    this.#child.unref();
    this.#child.channel?.unref();
    track(this);
    this.#child.on("message", (message) => this.#message(message));
    this.#child.on("exit", (code, signal) => this.#exit(exitError(this.#pending?.name, code, signal)));
    this.#child.on("error", (error) => this.#exit(codedError("cave_sandbox_worker_failed", `cave_sandbox_worker_failed: ${error.message}`, error)));
  }

  /** Imports the entry and checks the agent and tools; rejects with the worker's coded error. */
  init(message, signal) {
    const { startTimeoutMs } = limits();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.kill();
        reject(codedError("cave_sandbox_worker_start_timeout", `cave_sandbox_worker_start_timeout: the worker did not import RunOptions.entryPath ${message.entry} within ${startTimeoutMs} ms`));
      }, startTimeoutMs);
      const onAbort = () => {
        this.kill();
        settle(abortError(signal));
      };
      const settle = (error) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.#pending = undefined;
        if (error) {
          this.kill();
          reject(error);
        } else resolve(this);
      };
      this.#pending = { init: true, settle };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#send(message);
    });
  }

  /** Runs tool `index`; an abort rejects at once and retires the worker (see `#abort`). */
  call(index, name, args, context, signal) {
    return new Promise((resolve, reject) => {
      const id = ++this.#nextId;
      const onAbort = () => {
        this.#abort(id, signal.reason);
        finish();
        reject(abortError(signal));
      };
      const finish = () => signal?.removeEventListener("abort", onAbort);
      this.#pending = {
        id,
        name,
        settle: (error, text) => {
          finish();
          this.#pending = undefined;
          if (error) reject(error);
          else resolve(text);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      const { durable } = context ?? {};
      this.#send({
        type: "call",
        id,
        tool: index,
        args,
        context: { toolCallId: context?.toolCallId, parentToolCallId: context?.parentToolCallId, ...(durable ? { durable: { ...durable } } : {}) },
      });
    });
  }

  /** The tool's signal fires in the worker; after the grace (or its answer) the group dies. */
  #abort(id, reason) {
    this.retired = true;
    const reported = reason instanceof Error ? { name: reason.name, message: reason.message } : undefined;
    this.#send({ type: "abort", id, reason: reported });
    this.#pending = { id, aborted: true, settle: () => this.kill() };
    setTimeout(() => this.kill(), limits().abortGraceMs).unref();
  }

  #send(message) {
    try {
      this.#child.send(message);
    } catch (error) {
      this.#exit(codedError("cave_sandbox_worker_failed", `cave_sandbox_worker_failed: ${error.message}`, error));
    }
  }

  #message(message) {
    const pending = this.#pending;
    if (pending?.init && message?.type === "ready") return pending.settle();
    if (pending?.init && message?.type === "failed") {
      return pending.settle(codedError(String(message.code), String(message.message)));
    }
    if (pending && !pending.init && message?.id === pending.id) {
      if (message.type === "result" && typeof message.text === "string") return pending.settle(undefined, message.text);
      if (message.type === "error") return pending.settle(rebuilt(message.error));
    }
    // Anything else (a tool calling process.send, an answer to no call): the worker is not trusted further.
    this.kill();
    pending?.settle(protocolError());
  }

  #exit(error) {
    if (this.gone) return;
    this.gone = true;
    live.delete(this);
    const pending = this.#pending;
    this.#pending = undefined;
    this.kill();
    pending?.settle(error);
    this.#onGone(this);
  }

  /** SIGKILL to the worker's process group: the worker and whatever its tools started. */
  kill() {
    const pid = this.#child.pid;
    // Once the worker has exited, its group is killed one last time (what its tools left
    // behind) and never again: the pid may be reused once the group is empty.
    if (pid === undefined || this.#reaped) return;
    if (this.gone) this.#reaped = true;
    try {
      if (process.platform === "win32") this.#child.kill("SIGKILL");
      else process.kill(-pid, "SIGKILL");
    } catch {
      // ESRCH: nothing left to kill.
    }
  }
}

/**
 * The workers of one run. `route()` decides, while the run's graph is built, what each tool of a
 * required level is registered as; `start()` starts the first worker (so a bad entry fails the
 * run before any provider call); `close()` kills every worker when the run ends.
 */
export class SandboxPool {
  #entry;
  #agentId;
  #options;
  #tools = [];
  #workers = new Set();
  #idle = [];
  #waiters = [];
  #closed = false;

  constructor({ entryPath, rootDir, agentId, profile }) {
    this.#entry = path.resolve(rootDir, entryPath);
    this.#agentId = agentId;
    this.#options = { env: workerEnv(profile), execArgv: workerExecArgv() };
  }

  /**
   * What to register for `tool` of a required level at `agentPath` (subagent tool names):
   * `undefined` keeps its own runtime — a shellTools() tool with knap's local backend and no
   * `onOutput` runs in Rust and runs no user JS; a composite (or one of its nested tools) gets a
   * stub, since admission refuses it (`cave_nested_tool_sandbox_unsupported`) before it could
   * run; every other tool gets a proxy whose `execute` runs the tool in a worker.
   */
  route(tool, agentPath, composite) {
    const nativeTool = tool[NATIVE_TOOL];
    if (nativeTool?.local && !nativeTool.onOutput) return undefined;
    if (composite) {
      return { name: tool.name, execute: () => Promise.reject(codedError("cave_nested_tool_sandbox_unsupported")) };
    }
    const index = this.#tools.push({ path: agentPath, name: tool.name }) - 1;
    return { name: tool.name, execute: (input, signal, context) => this.#call(index, tool.name, input, signal, context) };
  }

  /** Starts one worker when a tool was routed here; rejects with its coded error. */
  async start(signal) {
    if (this.#tools.length === 0) return;
    if (globalThis[WORKER_MARK]) {
      throw codedError(
        "cave_sandbox_worker_nested",
        "cave_sandbox_worker_nested: a run inside a sandbox worker cannot start sandbox workers of its own\nhint: the entry module should export the agent, not run it; run it from another module",
      );
    }
    // As before a bash command: a worker of the same non-root user cannot read this process's
    // /proc environment or memory.
    native.sandboxProtectParent();
    this.#release(await this.#spawn(signal));
  }

  close() {
    this.#closed = true;
    for (const worker of this.#workers) worker.kill();
    this.#idle.length = 0;
    for (const waiter of this.#waiters.splice(0)) waiter.reject(codedError("cave_run_aborted", "cave_run_aborted: the run ended"));
  }

  #spawn(signal) {
    const worker = new SandboxWorker(this.#options, (gone) => this.#gone(gone));
    this.#workers.add(worker);
    return worker.init({ type: "init", entry: this.#entry, agentId: this.#agentId, tools: this.#tools, resultMaxBytes: limits().toolResultMaxBytes }, signal);
  }

  async #call(index, name, input, signal, context) {
    if (signal?.aborted) throw abortError(signal);
    const worker = await this.#acquire(signal);
    try {
      return await worker.call(index, name, input, context, signal);
    } finally {
      if (!worker.retired && !worker.gone) this.#release(worker);
    }
  }

  /** An idle worker, a new one below the limit, or the next one freed. */
  #acquire(signal) {
    const idle = this.#idle.pop();
    if (idle) return Promise.resolve(idle);
    if (this.#closed) return Promise.reject(codedError("cave_run_aborted", "cave_run_aborted: the run ended"));
    if (this.#workers.size < limits().workersPerRun) return this.#spawn(signal);
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject, signal };
      const onAbort = () => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(abortError(signal));
      };
      waiter.done = () => signal?.removeEventListener("abort", onAbort);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  #release(worker) {
    if (this.#closed) return worker.kill();
    const waiter = this.#waiters.shift();
    if (!waiter) return void this.#idle.push(worker);
    waiter.done();
    waiter.resolve(worker);
  }

  /** A worker exited (killed after an abort, crashed): a waiter gets a new one. */
  #gone(worker) {
    this.#workers.delete(worker);
    const at = this.#idle.indexOf(worker);
    if (at >= 0) this.#idle.splice(at, 1);
    const waiter = this.#closed ? undefined : this.#waiters.shift();
    if (waiter) {
      waiter.done();
      this.#spawn(waiter.signal).then(waiter.resolve, waiter.reject);
    }
  }
}
