// bashkit's cloud sandboxes on their SDKs (optional peers, imported on first use):
// `createVercelSandbox` (@vercel/sandbox) and `createE2BSandbox` (@e2b/code-interpreter), plus
// `ensureSandboxTools`. The sandbox is created (or reconnected by `sandboxId`) on first use, as in
// bashkit. Where knap differs: every path given to a shell command is single-quoted (bashkit put
// paths in double quotes, so `$(...)` in a path ran), E2B's non-zero exits keep their stdout,
// stderr and exit code (bashkit parsed them out of the error message), and `exec` honours
// `signal` and streams `onOutput` chunks where the SDK can.
import { codedError } from "../native.mjs";
import { native } from "../native.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";

const shellQuote = (v) => native.shellQuote(String(v));

const RIPGREP_VERSION = "14.1.0";
const RIPGREP_TARGETS = { x86_64: "x86_64-unknown-linux-musl", aarch64: "aarch64-unknown-linux-gnu", arm64: "aarch64-unknown-linux-gnu" };

async function loadSdk(config, name, feature) {
  if (config.sdk !== undefined) return config.sdk;
  try {
    return await import(name);
  } catch (error) {
    throw codedError("cave_sandbox_sdk_missing", `cave_sandbox_sdk_missing: ${feature} needs ${name}\nhint: npm install ${name}`, error);
  }
}

/** Creates the SDK sandbox once, on first use; `destroy(stop)` stops it and forgets it. */
function lazy(create) {
  let pending;
  const get = () => (pending ??= create().catch((error) => ((pending = undefined), Promise.reject(error))));
  return {
    get,
    async destroy(stop) {
      try {
        await stop(await get());
      } catch {
        // already gone
      }
      pending = undefined;
    },
  };
}

const KNOWN_CONFIG = {
  vercel: ["runtime", "resources", "sandboxId", "timeout", "cwd", "teamId", "projectId", "token", "ensureTools", "sdk"],
  e2b: ["apiKey", "sandboxId", "template", "timeout", "cwd", "metadata", "ensureTools", "sdk"],
};

function refuseUnknown(kind, fn, config) {
  refuseUnknownKeys(fn, config, KNOWN_CONFIG[kind]);
}

/** The file operations every shell-backed sandbox shares, over its `exec`. */
function shellFileOps(exec) {
  const check = async (command, what) => {
    const r = await exec(command);
    if (r.exitCode !== 0) throw new Error(`${what}: ${r.stderr.trim() || `exit ${r.exitCode}`}`);
    return r.stdout;
  };
  return {
    readDir: async (path) => (await check(`ls -1A -- ${shellQuote(path)}`, "Failed to read directory")).split("\n").filter(Boolean),
    fileExists: async (path) => (await exec(`test -e ${shellQuote(path)}`)).exitCode === 0,
    isDirectory: async (path) => (await exec(`test -d ${shellQuote(path)}`)).exitCode === 0,
    check,
  };
}

function withRgPath(sandbox) {
  let rgPath;
  Object.defineProperty(sandbox, "rgPath", { get: () => rgPath, set: (p) => (rgPath = p), enumerable: true });
  return sandbox;
}

/**
 * `await createVercelSandbox({ runtime?, resources?, sandboxId?, timeout?, cwd?, teamId?,
 * projectId?, token?, ensureTools? })`: a `Sandbox` on a Vercel Sandbox microVM.
 */
export async function createVercelSandbox(config = {}) {
  refuseUnknown("vercel", "createVercelSandbox", config);
  const cwd = config.cwd ?? "/vercel/sandbox";
  let sandboxId = config.sandboxId;
  const credentials = {};
  for (const k of ["teamId", "projectId", "token"]) if (config[k] !== undefined) credentials[k] = config[k];
  const remote = lazy(async () => {
    const { Sandbox } = await loadSdk(config, "@vercel/sandbox", "createVercelSandbox");
    const sbx = config.sandboxId
      ? await Sandbox.get({ sandboxId: config.sandboxId, ...credentials })
      : await Sandbox.create({ runtime: config.runtime ?? "node22", resources: config.resources ?? { vcpus: 2 }, timeout: config.timeout ?? 300000, ...credentials });
    sandboxId = sbx.sandboxId;
    return sbx;
  });

  async function exec(command, options = {}) {
    const sbx = await remote.get();
    const started = performance.now();
    const ac = new AbortController();
    let interrupted = false;
    const onAbort = () => ((interrupted = true), ac.abort());
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener("abort", onAbort, { once: true });
    const timer = options.timeout ? setTimeout(onAbort, options.timeout) : undefined;
    try {
      const done = await sbx.runCommand({ cmd: "bash", args: ["-c", String(command)], cwd: options.cwd ?? cwd, signal: ac.signal });
      const [stdout, stderr] = await Promise.all([done.stdout(), done.stderr()]);
      if (options.onOutput) {
        if (stdout) options.onOutput(stdout, "stdout");
        if (stderr) options.onOutput(stderr, "stderr");
      }
      return { stdout, stderr, exitCode: done.exitCode, durationMs: Math.round(performance.now() - started), interrupted };
    } catch (error) {
      if (interrupted) return { stdout: "", stderr: "Command timed out", exitCode: 124, durationMs: Math.round(performance.now() - started), interrupted: true };
      throw error;
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
    }
  }
  const ops = shellFileOps(exec);
  const sandbox = withRgPath({
    exec,
    get id() {
      return sandboxId;
    },
    workingDirectory: cwd,
    async readFile(path) {
      const sbx = await remote.get();
      const stream = await sbx.readFile({ path });
      if (!stream) throw new Error(`File not found: ${path}`);
      const chunks = [];
      for await (const chunk of stream) chunks.push(Buffer.from(chunk));
      return Buffer.concat(chunks).toString("utf8");
    },
    async writeFile(path, content) {
      const sbx = await remote.get();
      await sbx.writeFiles([{ path, content: Buffer.from(String(content), "utf8") }]);
    },
    readDir: ops.readDir,
    fileExists: ops.fileExists,
    isDirectory: ops.isDirectory,
    deleteFile: async (path) => void (await ops.check(`rm -f -- ${shellQuote(path)}`, "Failed to delete file")),
    rename: async (from, to) => void (await ops.check(`mv -- ${shellQuote(from)} ${shellQuote(to)}`, "Failed to rename")),
    destroy: () => remote.destroy((sbx) => sbx.stop()),
  });
  if (config.ensureTools !== false) await ensureSandboxTools(sandbox);
  return sandbox;
}

/**
 * `await createE2BSandbox({ apiKey?, sandboxId?, template?, timeout?, cwd?, metadata?,
 * ensureTools? })`: a `Sandbox` on an E2B sandbox.
 */
export async function createE2BSandbox(config = {}) {
  refuseUnknown("e2b", "createE2BSandbox", config);
  const cwd = config.cwd ?? "/home/user";
  let sandboxId = config.sandboxId;
  const remote = lazy(async () => {
    const { Sandbox } = await loadSdk(config, "@e2b/code-interpreter", "createE2BSandbox");
    const options = { timeoutMs: config.timeout ?? 300000 };
    if (config.apiKey !== undefined) options.apiKey = config.apiKey;
    if (config.metadata !== undefined) options.metadata = config.metadata;
    let sbx;
    if (config.sandboxId) sbx = await Sandbox.connect(config.sandboxId, config.apiKey !== undefined ? { apiKey: config.apiKey } : undefined);
    else if (config.template !== undefined) sbx = await Sandbox.create(config.template, options);
    else sbx = await Sandbox.create(options);
    sandboxId = sbx.sandboxId;
    return sbx;
  });

  async function exec(command, options = {}) {
    const sbx = await remote.get();
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const runOptions = { cwd: options.cwd ?? cwd };
    if (options.timeout) runOptions.timeoutMs = options.timeout;
    if (options.onOutput) {
      runOptions.onStdout = (data) => options.onOutput(String(data), "stdout");
      runOptions.onStderr = (data) => options.onOutput(String(data), "stderr");
    }
    try {
      if (options.signal?.aborted) return { stdout: "", stderr: "Command aborted", exitCode: 130, durationMs: 0, interrupted: true };
      const r = await sbx.commands.run(String(command), runOptions);
      return { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, durationMs: elapsed(), interrupted: false };
    } catch (error) {
      // The SDK throws CommandExitError for a non-zero exit; it carries the command's result.
      if (error && typeof error.exitCode === "number") {
        return { stdout: error.stdout ?? "", stderr: error.stderr ?? "", exitCode: error.exitCode, durationMs: elapsed(), interrupted: false };
      }
      const message = error instanceof Error ? error.message : String(error);
      if (/timeout|timed out|deadline/i.test(message)) return { stdout: "", stderr: "Command timed out", exitCode: 124, durationMs: elapsed(), interrupted: true };
      throw error;
    }
  }
  const ops = shellFileOps(exec);
  const sandbox = withRgPath({
    exec,
    get id() {
      return sandboxId;
    },
    workingDirectory: cwd,
    readFile: async (path) => ops.check(`cat -- ${shellQuote(path)}`, "Failed to read file"),
    async writeFile(path, content) {
      await (await remote.get()).files.write(path, String(content));
    },
    readDir: ops.readDir,
    fileExists: ops.fileExists,
    isDirectory: ops.isDirectory,
    async deleteFile(path) {
      await (await remote.get()).files.remove(path);
    },
    async rename(from, to) {
      await (await remote.get()).files.rename(from, to);
    },
    destroy: () => remote.destroy((sbx) => sbx.kill()),
  });
  if (config.ensureTools !== false) await ensureSandboxTools(sandbox);
  return sandbox;
}

/**
 * Sets `sandbox.rgPath` for Grep on a sandbox that is not knap's own: `/tmp/rg` if present, else
 * `rg` on the sandbox's PATH, else ripgrep 14.1.0 fetched inside the sandbox into /tmp/rg (as
 * bashkit does). knap's local sandbox needs no ripgrep (its Grep runs in process): a no-op there.
 */
export async function ensureSandboxTools(sandbox) {
  if (!sandbox || typeof sandbox.exec !== "function") {
    throw codedError("cave_sandbox_invalid", "cave_sandbox_invalid: ensureSandboxTools needs a Sandbox with exec()");
  }
  if (sandbox[Symbol.for("knap.aiSdk.sandbox")]) return;
  if ((await sandbox.exec("test -x /tmp/rg && echo found")).stdout.includes("found")) {
    sandbox.rgPath = "/tmp/rg";
    return;
  }
  const which = await sandbox.exec("command -v rg 2>/dev/null");
  if (which.exitCode === 0 && which.stdout.trim()) {
    sandbox.rgPath = which.stdout.trim();
    return;
  }
  const arch = (await sandbox.exec("uname -m")).stdout.trim();
  const target = RIPGREP_TARGETS[arch];
  if (!target) {
    throw codedError(
      "cave_sandbox_tools_unsupported",
      `cave_sandbox_tools_unsupported: no ripgrep build for architecture ${JSON.stringify(arch)}\nhint: install rg in the sandbox image (supported here: ${Object.keys(RIPGREP_TARGETS).join(", ")})`,
    );
  }
  const dir = `ripgrep-${RIPGREP_VERSION}-${target}`;
  const url = `https://github.com/BurntSushi/ripgrep/releases/download/${RIPGREP_VERSION}/${dir}.tar.gz`;
  const r = await sandbox.exec(`curl -sL ${shellQuote(url)} | tar xzf - -C /tmp --strip-components=1 ${shellQuote(`${dir}/rg`)} && chmod +x /tmp/rg`);
  if (r.exitCode !== 0) {
    throw codedError("cave_sandbox_tools_failed", `cave_sandbox_tools_failed: could not install ripgrep in the sandbox: ${r.stderr.trim()}\nhint: install rg in the sandbox image, or set sandbox.rgPath`);
  }
  sandbox.rgPath = "/tmp/rg";
}
