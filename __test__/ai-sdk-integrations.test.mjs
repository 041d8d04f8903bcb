// bashkit's integrations in knap/ai-sdk: the Vercel and E2B sandboxes against fakes of their SDK
// objects (the SDKs are optional peers), ensureSandboxTools, and createRedisCacheStore against a
// real redis-server started here on 127.0.0.1 (Debian's package; .ci/run installs it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import net from "node:net";
import { createAgentTools, createE2BSandbox, createRedisCacheStore, createVercelSandbox, ensureSandboxTools } from "../lib/ai-sdk/index.mjs";

const opts = { toolCallId: "t", messages: [] };

/** A fake of @vercel/sandbox: `Sandbox.create/get` and the sandbox methods bashkit's adapter uses. */
function fakeVercel() {
  const files = new Map();
  const calls = [];
  const sbx = {
    sandboxId: "sbx_1",
    async runCommand({ cmd, args, cwd, signal }) {
      calls.push({ cmd, args, cwd });
      const command = args[1];
      let stdout = "";
      let exitCode = 0;
      if (command === "command -v rg 2>/dev/null") stdout = "/usr/bin/rg\n";
      else if (command.startsWith("test -x /tmp/rg")) stdout = "";
      else if (command.startsWith("ls -1A -- ")) stdout = [...files.keys()].map((p) => p.split("/").pop()).join("\n") + "\n";
      else if (command.startsWith("test -e ")) exitCode = files.has(command.slice(9, -1)) ? 0 : 1;
      else if (command === "sleep 10") await new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted"))));
      else stdout = `ran: ${command}\n`;
      return { exitCode, stdout: async () => stdout, stderr: async () => "" };
    },
    async readFile({ path }) {
      if (!files.has(path)) return null;
      return (async function* () {
        yield Buffer.from(files.get(path));
      })();
    },
    async writeFiles(list) {
      for (const f of list) files.set(f.path, f.content.toString("utf8"));
    },
    stopped: false,
    async stop() {
      this.stopped = true;
    },
  };
  const created = [];
  const sdk = {
    Sandbox: {
      async create(options) {
        created.push(options);
        return sbx;
      },
      async get(options) {
        created.push({ get: options });
        return sbx;
      },
    },
  };
  return { sdk, sbx, calls, created, files };
}

test("createVercelSandbox: the SDK sandbox behind bashkit's Sandbox interface, paths single-quoted", async () => {
  const { sdk, sbx, calls, created, files } = fakeVercel();
  const sandbox = await createVercelSandbox({ sdk, teamId: "team", projectId: "proj", token: "tok" });
  assert.deepEqual(created, [{ runtime: "node22", resources: { vcpus: 2 }, timeout: 300000, teamId: "team", projectId: "proj", token: "tok" }]);
  assert.equal(sandbox.id, "sbx_1");
  assert.equal(sandbox.rgPath, "/usr/bin/rg"); // ensureSandboxTools ran (ensureTools defaults to true)
  const r = await sandbox.exec("echo hi");
  assert.deepEqual({ ...r, durationMs: 0 }, { stdout: "ran: echo hi\n", stderr: "", exitCode: 0, durationMs: 0, interrupted: false });
  assert.deepEqual(calls.at(-1), { cmd: "bash", args: ["-c", "echo hi"], cwd: "/vercel/sandbox" });
  await sandbox.writeFile("/vercel/sandbox/a.txt", "alpha");
  assert.equal(files.get("/vercel/sandbox/a.txt"), "alpha");
  assert.equal(await sandbox.readFile("/vercel/sandbox/a.txt"), "alpha");
  await assert.rejects(sandbox.readFile("/nope"), /File not found: \/nope/);
  await sandbox.fileExists("/tmp/$(reboot)");
  assert.equal(calls.at(-1).args[1], "test -e '/tmp/$(reboot)'");
  const slow = await sandbox.exec("sleep 10", { timeout: 20 });
  assert.equal(slow.interrupted, true);
  assert.equal(slow.exitCode, 124);
  // the tools run on it
  const { tools } = await createAgentTools(sandbox);
  const out = await tools.Bash.execute({ command: "echo tool" }, opts);
  assert.equal(out.stdout, "ran: echo tool\n");
  await sandbox.destroy();
  assert.equal(sbx.stopped, true);
  await assert.rejects(createVercelSandbox({ sdk, region: "x" }), (e) => e.code === "cave_config_unknown_key");
});

test("createVercelSandbox without @vercel/sandbox says what to install", async () => {
  await assert.rejects(createVercelSandbox({ ensureTools: false }).then((s) => s.exec("true")), (e) => {
    assert.equal(e.code, "cave_sandbox_sdk_missing");
    assert.equal(e.hint, "npm install @vercel/sandbox");
    return true;
  });
});

/** A fake of @e2b/code-interpreter: commands.run throws on a non-zero exit, as the SDK does. */
function fakeE2B() {
  const calls = [];
  const files = new Map();
  const sbx = {
    sandboxId: "e2b_1",
    commands: {
      async run(command, options) {
        calls.push({ command, options });
        if (command === "exit 3") {
          const e = new Error("exit status 3");
          Object.assign(e, { exitCode: 3, stdout: "partial\n", stderr: "boom\n" });
          throw e;
        }
        if (command.startsWith("cat -- ")) {
          const p = command.slice(8, -1);
          if (!files.has(p)) {
            const e = new Error("exit status 1");
            Object.assign(e, { exitCode: 1, stdout: "", stderr: `cat: ${p}: No such file or directory\n` });
            throw e;
          }
          return { stdout: files.get(p), stderr: "", exitCode: 0 };
        }
        options.onStdout?.("chunk 1\n");
        options.onStdout?.("chunk 2\n");
        return { stdout: "chunk 1\nchunk 2\n", stderr: "", exitCode: 0 };
      },
    },
    files: {
      async write(p, content) {
        files.set(p, content);
      },
      async remove(p) {
        files.delete(p);
      },
      async rename(a, b) {
        files.set(b, files.get(a));
        files.delete(a);
      },
    },
    killed: false,
    async kill() {
      this.killed = true;
    },
  };
  const created = [];
  const sdk = {
    Sandbox: {
      async create(...args) {
        created.push(args);
        return sbx;
      },
      async connect(id) {
        created.push(["connect", id]);
        return sbx;
      },
    },
  };
  return { sdk, sbx, calls, created, files };
}

test("createE2BSandbox: non-zero exits keep their output, output streams in chunks, files through the SDK", async () => {
  const { sdk, sbx, calls, created, files } = fakeE2B();
  const sandbox = await createE2BSandbox({ sdk, apiKey: "k", template: "base", ensureTools: false });
  await sandbox.exec("true");
  assert.deepEqual(created, [["base", { timeoutMs: 300000, apiKey: "k" }]]);
  const failed = await sandbox.exec("exit 3");
  assert.deepEqual({ ...failed, durationMs: 0 }, { stdout: "partial\n", stderr: "boom\n", exitCode: 3, durationMs: 0, interrupted: false });
  const chunks = [];
  await sandbox.exec("make", { onOutput: (chunk, stream) => chunks.push([stream, chunk]) });
  assert.deepEqual(chunks, [["stdout", "chunk 1\n"], ["stdout", "chunk 2\n"]]);
  assert.equal(calls.at(-1).options.cwd, "/home/user");
  await sandbox.writeFile("/home/user/a.txt", "alpha");
  assert.equal(await sandbox.readFile("/home/user/a.txt"), "alpha");
  await assert.rejects(sandbox.readFile("/home/user/none"), /Failed to read file: cat: \/home\/user\/none: No such file or directory/);
  await sandbox.rename("/home/user/a.txt", "/home/user/b.txt");
  assert.deepEqual([...files.keys()], ["/home/user/b.txt"]);
  await sandbox.destroy();
  assert.equal(sbx.killed, true);
  const again = await createE2BSandbox({ sdk, sandboxId: "e2b_1", ensureTools: false });
  await again.exec("true");
  assert.deepEqual(created.at(-1), ["connect", "e2b_1"]);
});

test("ensureSandboxTools: /tmp/rg, then rg on PATH; an unknown architecture names the fix", async () => {
  const sandbox = (answers) => ({
    rgPath: undefined,
    async exec(command) {
      const stdout = answers[command] ?? "";
      return { stdout, stderr: "", exitCode: stdout || command === "uname -m" ? 0 : 1, durationMs: 0, interrupted: false };
    },
  });
  const a = sandbox({ "test -x /tmp/rg && echo found": "found\n" });
  await ensureSandboxTools(a);
  assert.equal(a.rgPath, "/tmp/rg");
  const b = sandbox({ "command -v rg 2>/dev/null": "/opt/bin/rg\n" });
  await ensureSandboxTools(b);
  assert.equal(b.rgPath, "/opt/bin/rg");
  const c = sandbox({ "uname -m": "riscv64\n" });
  await assert.rejects(ensureSandboxTools(c), (e) => e.code === "cave_sandbox_tools_unsupported" && /install rg in the sandbox image/.test(e.hint));
});

// ------------------------------------------------------------------------------------- Redis

/** A minimal RESP client (GET/SET/DEL/KEYS): what createRedisCacheStore needs, no package. */
function respClient(port) {
  const socket = net.connect(port, "127.0.0.1");
  let buffer = Buffer.alloc(0);
  const waiting = [];
  const parse = (buf, at) => {
    const end = buf.indexOf("\r\n", at);
    if (end < 0) return undefined;
    const line = buf.toString("utf8", at + 1, end);
    const type = String.fromCharCode(buf[at]);
    if (type === "+" || type === "-") return [type === "-" ? new Error(line) : line, end + 2];
    if (type === ":") return [Number(line), end + 2];
    if (type === "$") {
      const n = Number(line);
      if (n < 0) return [null, end + 2];
      if (buf.length < end + 2 + n + 2) return undefined;
      return [buf.toString("utf8", end + 2, end + 2 + n), end + 2 + n + 2];
    }
    if (type === "*") {
      const n = Number(line);
      const out = [];
      let pos = end + 2;
      for (let i = 0; i < n; i++) {
        const r = parse(buf, pos);
        if (!r) return undefined;
        out.push(r[0]);
        pos = r[1];
      }
      return [out, pos];
    }
    throw new Error(`unexpected RESP type ${type}`);
  };
  socket.on("data", (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const r = buffer.length ? parse(buffer, 0) : undefined;
      if (!r) break;
      buffer = buffer.subarray(r[1]);
      const w = waiting.shift();
      if (r[0] instanceof Error) w.reject(r[0]);
      else w.resolve(r[0]);
    }
  });
  const command = (...args) =>
    new Promise((resolve, reject) => {
      waiting.push({ resolve, reject });
      socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join("")}`);
    });
  return {
    ready: new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject)),
    get: (k) => command("GET", k),
    set: (k, v) => command("SET", k, v),
    del: (k) => command("DEL", ...(Array.isArray(k) ? k : [k])),
    keys: (p) => command("KEYS", p),
    close: () => socket.end(),
  };
}

async function startRedis(t) {
  if (spawnSync("redis-server", ["--version"]).error) return undefined;
  const port = await new Promise((resolve) => {
    const probe = net.createServer().listen(0, "127.0.0.1", () => {
      const p = probe.address().port;
      probe.close(() => resolve(p));
    });
  });
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: ["ignore", "pipe", "pipe"] });
  t.after(() => child.kill("SIGKILL"));
  await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      if (/Ready to accept connections/.test(out)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`redis-server exited ${code}: ${out}`)));
  });
  return port;
}

test("createRedisCacheStore against a real redis-server: Read results cached across tool sets", async (t) => {
  const port = await startRedis(t);
  if (port === undefined) {
    t.skip("redis-server is not installed (apt-get install -y redis-server; .ci/run does)");
    return;
  }
  const client = respClient(port);
  await client.ready;
  t.after(() => client.close());
  const store = createRedisCacheStore(client, { prefix: "knap-test:" });
  await store.set("k1", { result: { ok: true }, timestamp: 1 });
  assert.deepEqual(await store.get("k1"), { result: { ok: true }, timestamp: 1 });
  assert.equal(await client.get("knap-test:k1"), JSON.stringify({ result: { ok: true }, timestamp: 1 }));
  assert.equal(await store.size(), 1);
  await store.delete("k1");
  assert.equal(await store.get("k1"), undefined);

  // through createAgentTools: the second Read is a hit served from Redis
  const fs = await import("node:fs");
  const os = await import("node:os");
  const path = await import("node:path");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-redis-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, "a.txt"), "alpha\n");
  const { createLocalSandbox } = await import("../lib/ai-sdk/index.mjs");
  const hits = [];
  const { tools } = await createAgentTools(createLocalSandbox({ workingDirectory: dir }), { cache: { store, onHit: (name) => hits.push(name) } });
  const first = await tools.Read.execute({ file_path: "a.txt" }, opts);
  const second = await tools.Read.execute({ file_path: "a.txt" }, opts);
  assert.deepEqual(second, first);
  assert.deepEqual(hits, ["Read"]);
  assert.equal((await client.keys("knap-test:*")).length, 1);
  await store.clear();
  assert.equal(await store.size(), 0);
  assert.throws(() => createRedisCacheStore({ get() {} }), (e) => e.code === "cave_redis_client_invalid" && /npm install redis/.test(e.hint));
});
