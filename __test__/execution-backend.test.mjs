// Execution backends: the local backend's exec/readFile/writeFile, the HTTP client of the
// reference's protocol against a fake server, and the shell tools routed through a JS backend
// (nothing touches the host).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, test } from "node:test";

import { agent, httpExecutionBackend, localExecutionBackend, run, shellTools } from "../lib/index.mjs";
import * as subpath from "../lib/execution-backend.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { fakeBackendServer, pidsIn, survivors } from "./backend-helpers.mjs";
import { coded, tempWorkspace } from "./helpers.mjs";

const ws = tempWorkspace("knap-backend-");
after(() => ws.cleanup());

const sh = (script, extra = {}) => ({
  command: "/bin/sh",
  args: ["-c", script],
  cwd: ws.root,
  env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
  timeoutMs: 10_000,
  maxOutputBytes: 1024,
  ...extra,
});

test("the execution-backend subpath exports the two constructors", () => {
  assert.deepEqual(Object.keys(subpath).sort(), ["httpExecutionBackend", "localExecutionBackend"]);
  assert.equal(subpath.localExecutionBackend().id, "local");
});

test("local exec: exit code, both streams, one shared output budget", async () => {
  const local = localExecutionBackend();
  assert.deepEqual(await local.exec(sh("printf out; printf err >&2; exit 3")), {
    stdout: "out",
    stderr: "err",
    code: 3,
    timedOut: false,
    truncated: false,
  });
  const r = await local.exec(sh("printf 'out\\n'; sleep 0.05; printf err >&2; exit 3", { maxOutputBytes: 4 }));
  assert.deepEqual(r, { stdout: "out\n", stderr: "", code: 3, timedOut: false, truncated: true });
  // Exactly the given environment.
  const env = await local.exec(sh("env", { env: { PATH: process.env.PATH, ONLY_THIS: "1" } }));
  const names = env.stdout.split("\n").filter(Boolean).map((l) => l.split("=")[0]).filter((n) => !["PWD", "SHLVL", "_", "OLDPWD"].includes(n));
  assert.deepEqual(names.sort(), ["ONLY_THIS", "PATH"]);
});

test("local exec: a command that cannot start is code 127 with startFailed", async () => {
  const r = await localExecutionBackend().exec({ ...sh(""), command: "/definitely/not/here" });
  assert.equal(r.code, 127);
  assert.equal(r.startFailed, true);
  assert.equal(r.stdout, "");
  assert.equal(r.stderr, "spawn /definitely/not/here ENOENT");
});

test("local exec: a timeout or an abort kills the whole process group, background children too", async () => {
  const local = localExecutionBackend();
  const pidFile = path.join(ws.outside, "timeout.pids");
  const r = await local.exec(sh(`sleep 60 & echo $! > ${pidFile}; (sleep 60 & echo $! >> ${pidFile}); wait`, { timeoutMs: 300 }));
  assert.equal(r.timedOut, true);
  assert.equal(r.code, null);
  assert.deepEqual(await survivors(await pidsIn(pidFile, 2)), []);

  const abortFile = path.join(ws.outside, "abort.pids");
  const controller = new AbortController();
  const pending = local.exec(sh(`sleep 60 & echo $! > ${abortFile}; wait`, { timeoutMs: 60_000, signal: controller.signal }));
  const pids = await pidsIn(abortFile);
  controller.abort();
  const aborted = await pending;
  assert.equal(aborted.code, null);
  assert.equal(aborted.timedOut, false);
  assert.deepEqual(await survivors(pids), []);
  // Already aborted: nothing runs.
  const marker = path.join(ws.outside, "never");
  const r2 = await local.exec(sh(`touch ${marker}`, { signal: AbortSignal.abort() }));
  assert.equal(r2.code, null);
  assert.equal(fs.existsSync(marker), false);
});

test("local readFile/writeFile: bytes, maxBytes, Node's error codes", async () => {
  const local = localExecutionBackend();
  const p = ws.path("rw.bin");
  await local.writeFile(p, new Uint8Array([1, 2, 3, 4, 5]));
  assert.deepEqual([...(await local.readFile(p))], [1, 2, 3, 4, 5]);
  assert.deepEqual([...(await local.readFile(p, { maxBytes: 2 }))], [1, 2]);
  assert.ok((await local.readFile(p)) instanceof Uint8Array);
  await local.writeFile(p, "text");
  assert.equal(Buffer.from(await local.readFile(p)).toString(), "text");
  await assert.rejects(local.readFile(ws.path("missing")), coded("ENOENT", `ENOENT: no such file or directory, open '${ws.path("missing")}'`));
  await assert.rejects(local.readFile(ws.root), coded("EISDIR", "EISDIR: illegal operation on a directory, read"));
  await assert.rejects(local.writeFile(ws.path("no/dir/f"), "x"), { code: "ENOENT" });
  await assert.rejects(local.readFile(p, { maxBytes: -1 }), { code: "cave_execution_backend_read_max_bytes_invalid" });
});

test("local exec refuses malformed requests, naming the field; close() stops the backend", async () => {
  const local = localExecutionBackend();
  const cases = [
    [{ ...sh("true"), env: undefined }, "env"],
    [{ ...sh("true"), env: { A: 1 } }, "env"],
    [{ ...sh("true"), env: { "A=B": "x" } }, "env"],
    [{ ...sh("true"), command: "" }, "command"],
    [{ ...sh("true"), command: 5 }, "command"],
    [{ ...sh("true"), args: ["a\0b"] }, "args"],
    [{ ...sh("true"), args: "x" }, "args"],
    [{ ...sh("true"), timeoutMs: -1 }, "timeoutMs"],
    [{ ...sh("true"), timeoutMs: undefined }, "timeoutMs"],
    [{ ...sh("true"), maxOutputBytes: 1.5 }, "maxOutputBytes"],
    [{ ...sh("true"), maxOutputBytes: 2 ** 40 }, "maxOutputBytes"],
    [null, "request"],
  ];
  for (const [request, field] of cases) {
    await assert.rejects(local.exec(request), { code: `cave_execution_backend_exec_request_invalid:${field}` }, JSON.stringify(request));
  }
  const pidFile = path.join(ws.outside, "close.pids");
  const pending = local.exec(sh(`sleep 60 & echo $! > ${pidFile}; wait`, { timeoutMs: 60_000 }));
  const pids = await pidsIn(pidFile);
  await local.close();
  assert.equal((await pending).code, null);
  assert.deepEqual(await survivors(pids), []);
  await assert.rejects(local.exec(sh("true")), { code: "cave_execution_backend_closed" });
  await local.close();
});

test("httpExecutionBackend construction: the reference's checks, in order", () => {
  assert.throws(() => httpExecutionBackend({ url: "", token: "t" }), { code: "cave_execution_backend_http_url_required" });
  assert.throws(() => httpExecutionBackend({ url: "///", token: "" }), { code: "cave_execution_backend_http_url_required" });
  assert.throws(() => httpExecutionBackend({ url: "not a url", token: "t" }), TypeError);
  for (const url of ["http://example.com", "http://0.0.0.0:8080", "http://10.0.0.1", "ftp://127.0.0.1"]) {
    assert.throws(() => httpExecutionBackend({ url, token: "t" }), { code: "cave_execution_backend_http_insecure_url" }, url);
  }
  assert.throws(() => httpExecutionBackend({ url: "http://127.0.0.1:1", token: "" }), { code: "cave_execution_backend_http_token_required" });
  assert.throws(() => httpExecutionBackend({ url: "https://x.test", token: "t", timeout: 5 }), { code: "cave_execution_backend_http_option_unknown:timeout" });
  assert.throws(() => httpExecutionBackend({ url: "https://x.test", token: "t", fetch: 5 }), { code: "cave_execution_backend_http_fetch_invalid" });
  for (const url of ["https://x.test/", "http://localhost:1", "http://[::1]:1", "http://127.1.2.3:1"]) {
    assert.equal(httpExecutionBackend({ url, token: "t" }).id, "http");
  }
});

test("httpExecutionBackend: requests, bearer auth, result cuts and status mapping", async () => {
  const server = await fakeBackendServer((endpoint, body, req, res) => {
    if (endpoint === "exec") {
      if (body.command === "big") return { stdout: "é".repeat(4), stderr: "warning", code: 0, timedOut: false, truncated: false };
      if (body.command === "bad") return { stdout: 1, stderr: "", code: 0, timedOut: false, truncated: false };
      if (body.command === "huge") {
        res.writeHead(200);
        res.end(JSON.stringify({ stdout: "x".repeat(10_000), stderr: "", code: 0, timedOut: false, truncated: false }));
        return;
      }
      if (body.command === "fail") {
        res.writeHead(500);
        res.end("{}");
        return;
      }
      return { stdout: "out", stderr: "err", code: 0, timedOut: false, truncated: false, startFailed: false };
    }
    if (endpoint === "read") {
      if (body.path === "/w/missing") return res.writeHead(404).end('{"error":"not_found"}');
      if (body.path === "/w/dir") return res.writeHead(422).end('{"error":"not_a_file"}');
      if (body.path === "/w/secret") return res.writeHead(403).end('{"error":"path_escapes_workspace"}');
      if (body.path === "/w/bad") return { nope: 1 };
      return { data: Buffer.from("hello world").toString("base64") };
    }
    if (endpoint === "write") return {};
    if (endpoint === "snapshot") return { snapshotId: "snap-1" };
    return {};
  });
  after(() => server.close());
  const backend = httpExecutionBackend({ url: server.url + "/", token: "secret-token" });
  const request = { command: "sh", args: ["-c", "x"], cwd: "/w", env: { LANG: "C" }, timeoutMs: 1000, maxOutputBytes: 100 };
  assert.deepEqual(await backend.exec(request), { stdout: "out", stderr: "err", code: 0, timedOut: false, truncated: false, startFailed: false });
  const sent = server.requests[0];
  assert.equal(sent.endpoint, "exec");
  assert.equal(sent.headers.authorization, "Bearer secret-token");
  assert.equal(sent.headers["content-type"], "application/json");
  assert.match(sent.body.execId, /^[0-9a-f-]{36}$/);
  assert.deepEqual(Object.keys(sent.body), ["execId", "command", "args", "cwd", "env", "timeoutMs", "maxOutputBytes"]);
  // stdout cut to maxOutputBytes bytes (here inside a character), stderr to what is left.
  assert.deepEqual(await backend.exec({ ...request, command: "big", maxOutputBytes: 5 }), {
    stdout: "éé\uFFFD",
    stderr: "",
    code: 0,
    timedOut: false,
    truncated: true,
  });
  await assert.rejects(backend.exec({ ...request, command: "bad" }), { code: "cave_execution_backend_http_exec_invalid" });
  await assert.rejects(backend.exec({ ...request, command: "huge", maxOutputBytes: 100 }), { code: "cave_execution_backend_http_response_too_large" });
  await assert.rejects(backend.exec({ ...request, command: "fail" }), coded("cave_execution_backend_http_exec_failed:500"));

  assert.equal(Buffer.from(await backend.readFile("/w/a")).toString(), "hello world");
  assert.equal(Buffer.from(await backend.readFile("/w/a", { maxBytes: 5 })).toString(), "hello");
  assert.deepEqual(server.requests.at(-1).body, { path: "/w/a", maxBytes: 5 });
  await assert.rejects(backend.readFile("/w/missing"), coded("ENOENT", "cave_execution_backend_http_read_failed:404"));
  await assert.rejects(backend.readFile("/w/dir"), coded("EISDIR", "cave_execution_backend_http_read_failed:422"));
  await assert.rejects(backend.readFile("/w/secret"), coded("cave_workspace_escape", "caveman-code: path escapes the workspace"));
  await assert.rejects(backend.readFile("/w/bad"), { code: "cave_execution_backend_http_read_invalid" });
  await backend.writeFile("/w/n", new Uint8Array([104, 105]));
  assert.deepEqual(server.requests.at(-1).body, { path: "/w/n", data: "aGk=" });
  await backend.prepare();
  assert.equal(await backend.snapshot(), "snap-1");
  await backend.restore("snap-1");
  assert.deepEqual(server.requests.slice(-3).map((r) => [r.endpoint, r.body]), [["prepare", {}], ["snapshot", {}], ["restore", { snapshotId: "snap-1" }]]);
});

test("httpExecutionBackend: an aborted exec posts /cancel and returns the aborted result; a user fetch is honoured", async () => {
  let release;
  const held = new Promise((resolve) => (release = resolve));
  const server = await fakeBackendServer(async (endpoint) => {
    if (endpoint === "exec") {
      await held;
      return { stdout: "late", stderr: "", code: 0, timedOut: false, truncated: false };
    }
    return {};
  });
  after(() => server.close());
  const seen = [];
  const backend = httpExecutionBackend({
    url: server.url,
    token: "t",
    fetch: (url, init) => {
      seen.push(url);
      return fetch(url, init);
    },
  });
  const controller = new AbortController();
  const pending = backend.exec({ command: "sh", args: [], cwd: "/w", env: {}, timeoutMs: 1000, maxOutputBytes: 10, signal: controller.signal });
  while (!server.requests.some((r) => r.endpoint === "exec")) await new Promise((r) => setTimeout(r, 5));
  controller.abort();
  assert.deepEqual(await pending, { stdout: "", stderr: "cave_execution_backend_aborted", code: null, timedOut: false, truncated: false });
  release();
  const exec = server.requests.find((r) => r.endpoint === "exec");
  const cancel = server.requests.find((r) => r.endpoint === "cancel");
  assert.deepEqual(cancel.body, { execId: exec.body.execId });
  assert.deepEqual(seen, [`${server.url}/exec`, `${server.url}/cancel`]);
});

test("httpExecutionBackend: a bad snapshot id, an over-cap /read, an empty or non-JSON body, a timeout that is rethrown without /cancel", async () => {
  let snapshot = {};
  const server = await fakeBackendServer(async (endpoint, body, _req, res) => {
    if (endpoint === "snapshot") return snapshot;
    if (endpoint === "read") return { data: Buffer.alloc(body.maxBytes * 2, 120).toString("base64") };
    if (endpoint === "prepare") return res.writeHead(200).end("");
    if (endpoint === "restore") return res.writeHead(200).end("not json");
    if (endpoint === "exec") return new Promise(() => {}); // never answers
    return {};
  });
  after(() => server.close());
  const backend = httpExecutionBackend({ url: server.url, token: "t" });
  for (const answer of [{}, { snapshotId: "" }, { snapshotId: 7 }]) {
    snapshot = answer;
    await assert.rejects(backend.snapshot(), { code: "cave_execution_backend_http_snapshot_invalid" }, JSON.stringify(answer));
  }
  // The body of a capped /read may hold at most ceil(maxBytes*4/3) + 4096 bytes.
  await assert.rejects(backend.readFile("/w/a", { maxBytes: 10_000 }), { code: "cave_execution_backend_http_response_too_large" });
  await backend.prepare();
  await assert.rejects(backend.restore("s"), SyntaxError);
  const request = { command: "sleep", args: [], cwd: "/w", env: {}, timeoutMs: 1000, maxOutputBytes: 10 };
  await assert.rejects(backend.exec({ ...request, signal: AbortSignal.timeout(50) }), { name: "TimeoutError" });
  assert.equal(server.requests.filter((r) => r.endpoint === "cancel").length, 0, "a timeout is not an abort: no /cancel");
});

/** A backend that lives in memory: files in a Map, commands answered by `answer`. */
function memoryBackend(answer) {
  const files = new Map();
  const calls = [];
  const enoent = (p) => Object.assign(new Error(`ENOENT: no such file or directory, open '${p}'`), { code: "ENOENT" });
  return {
    files,
    calls,
    backend: {
      id: "memory",
      async exec(request) {
        calls.push(["exec", request]);
        return answer(request);
      },
      async readFile(p, options) {
        calls.push(["readFile", p, options]);
        if (!files.has(p)) throw enoent(p);
        const data = files.get(p);
        return options?.maxBytes === undefined ? data : data.subarray(0, options.maxBytes);
      },
      async writeFile(p, data) {
        calls.push(["writeFile", p]);
        files.set(p, Buffer.from(data));
      },
    },
  };
}

test("shellTools over a JS backend: every tool goes through it and nothing touches the host", async () => {
  const remoteRoot = "/remote/knap-nowhere/ws";
  const mem = memoryBackend((r) => {
    if (r.command === "rg") return { stdout: "", stderr: "", code: 127, timedOut: false, truncated: false, startFailed: true };
    if (r.command === "grep") return { stdout: "./a.txt:1:hello", stderr: "", code: 0, timedOut: false, truncated: false };
    return { stdout: "match", stderr: "warning", code: 0, timedOut: false, truncated: false };
  });
  const seen = [];
  const tools = Object.fromEntries(
    shellTools({ workspace: remoteRoot, executionBackend: mem.backend, onOutput: (label) => seen.push(label) }).map((t) => [t.name, t]),
  );
  assert.equal(await tools.write_file.execute({ path: "a.txt", content: "hello\nthere" }), "wrote a.txt: 11 bytes");
  await assert.rejects(tools.write_file.execute({ path: "a.txt", content: "x" }), coded("EEXIST", `EEXIST: file already exists, open '${remoteRoot}/a.txt'`));
  assert.equal(await tools.read_file.execute({ path: "a.txt" }), "1\thello\n2\tthere");
  assert.equal(await tools.edit_file.execute({ path: "a.txt", old_string: "there", new_string: "world" }), "edited a.txt: 1 replacement");
  assert.equal(mem.files.get(`${remoteRoot}/a.txt`).toString(), "hello\nworld");
  assert.equal(await tools.grep.execute({ pattern: "hello" }), "./a.txt:1:hello");
  assert.equal(await tools.bash.execute({ command: "echo hi" }), "exit 0\nmatch\nwarning");
  const bash = mem.calls.filter((c) => c[0] === "exec").at(-1)[1];
  assert.equal(bash.command, "sh");
  assert.deepEqual(bash.args, ["-c", "echo hi"]);
  assert.equal(bash.cwd, remoteRoot);
  assert.ok(bash.signal instanceof AbortSignal);
  for (const key of Object.keys(bash.env)) assert.ok(["LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"].includes(key), key);
  await assert.rejects(tools.read_file.execute({ path: "../escape" }), coded("cave_workspace_escape", "caveman-code: path escapes the workspace: ../escape"));
  await assert.rejects(tools.bash.execute({ command: "x", yieldTimeMs: 10 }), { code: "cave_execution_backend_command_sessions_local_only" });
  assert.deepEqual(seen, ["read_file:a.txt", "grep:hello", "bash:echo hi"]);
  assert.equal(fs.existsSync("/remote/knap-nowhere"), false);
});

test("a spread copy of the local backend is not local; a backend that throws passes its error through", async () => {
  const copy = { ...localExecutionBackend() };
  const tools = Object.fromEntries(shellTools({ workspace: ws.root, executionBackend: copy }).map((t) => [t.name, t]));
  const out = await tools.bash.execute({ command: "env" });
  assert.ok(out.startsWith("exit 0\n"));
  assert.ok(!/^(PATH|HOME|PWD)=/m.test(out.replace(/^PWD=.*$/m, "")), out);
  assert.throws(() => shellTools({ workspace: ws.root, executionBackend: { exec() {} } }), { code: "cave_execution_backend_invalid:readFile" });
  const failing = {
    exec: async () => {
      throw Object.assign(new Error("backend down"), { code: "E_DOWN" });
    },
    readFile: async () => "not bytes",
    writeFile: async () => {},
  };
  const t = Object.fromEntries(shellTools({ workspace: "/nowhere", executionBackend: failing }).map((x) => [x.name, x]));
  await assert.rejects(t.bash.execute({ command: "x" }), coded("E_DOWN", "backend down"));
  await assert.rejects(t.read_file.execute({ path: "x" }), { code: "cave_execution_backend_read_result_invalid" });
});

test("run(): a scripted agent drives the shell tools through an HTTP backend", async () => {
  const files = new Map([["/srv/ws/notes.txt", Buffer.from("one\ntwo\nthree\n")]]);
  const server = await fakeBackendServer((endpoint, body, req, res) => {
    if (endpoint === "read") {
      const data = files.get(body.path);
      if (!data) return void res.writeHead(404).end();
      return { data: data.toString("base64") };
    }
    if (endpoint === "write") {
      files.set(body.path, Buffer.from(body.data, "base64"));
      return {};
    }
    if (endpoint === "exec") return { stdout: `ran ${body.args[1]}\n`, stderr: "", code: 0, timedOut: false, truncated: false };
    return {};
  });
  after(() => server.close());
  const backend = httpExecutionBackend({ url: server.url, token: "t" });
  const reviewer = agent({
    id: "remote-reviewer",
    instructions: "Work remotely.",
    model: fauxModel(),
    sandbox: "host",
    tools: shellTools({ workspace: "/srv/ws", executionBackend: backend }),
  });
  const result = await run(reviewer, "go", {
    model: fauxModel(),
    streamFn: scriptedStream([
      { toolCalls: [{ name: "read_file", args: { path: "notes.txt" } }, { name: "bash", args: { command: "wc -l notes.txt" } }] },
      { toolCalls: [{ name: "write_file", args: { path: "out.txt", content: "done" } }] },
      { text: "3 lines" },
    ]),
  });
  assert.equal(result.text, "3 lines");
  assert.equal(files.get("/srv/ws/out.txt").toString(), "done");
  const endpoints = server.requests.map((r) => r.endpoint);
  assert.deepEqual(endpoints.sort(), ["exec", "read", "read", "write"]);
});
