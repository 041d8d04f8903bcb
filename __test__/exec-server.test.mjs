// knap-exec-server on 127.0.0.1: a whole scripted agent run through httpExecutionBackend, an
// abort that leaves no process behind, unauthenticated requests that reach nothing, and the
// server's limits and refusals.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

import { agent, httpExecutionBackend, run, shellTools } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { pidsIn, survivors } from "./backend-helpers.mjs";
import { recordingStream, toolResultsSeen } from "./run-helpers.mjs";
import { coded, tempWorkspace } from "./helpers.mjs";

const shim = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "bin", "knap-exec-server.mjs");
const TOKEN = "knap-test-token-0123456789abcdef";

/** Starts the server (through the npm bin shim) and waits for its listening line. */
async function startServer(ws, extra = [], { clientWorkspace } = {}) {
  const tokenFile = path.join(ws.outside, `token-${Math.random().toString(36).slice(2)}`);
  fs.writeFileSync(tokenFile, TOKEN + "\n");
  const args = ["--workspace", ws.root, "--listen", "127.0.0.1:0", "--token-file", tokenFile, ...extra];
  if (clientWorkspace) args.push("--client-workspace", clientWorkspace);
  const child = spawn(process.execPath, [shim, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const log = [];
  readline.createInterface({ input: child.stderr }).on("line", (l) => log.push(l));
  const url = await new Promise((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout });
    lines.once("line", (line) => {
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) resolve(m[1]);
      else reject(new Error(line));
    });
    child.once("exit", (code) => reject(new Error(`exited ${code}: ${log.join("\n")}`)));
  });
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  return { url, child, log, exited, stop: () => (child.exitCode === null ? (child.kill("SIGTERM"), exited) : exited) };
}

/** Waits (bounded) for a server log line matching `match`. */
async function logged(server, match) {
  for (let i = 0; i < 400 && !server.log.some(match); i++) await new Promise((r) => setTimeout(r, 25));
  assert.ok(server.log.some(match), server.log.join("\n"));
}

const post = (url, endpoint, body, token = TOKEN, headers = {}) =>
  fetch(`${url}/${endpoint}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

test("a scripted agent run through httpExecutionBackend against knap-exec-server", async () => {
  const ws = tempWorkspace("knap-exec-server-");
  after(() => ws.cleanup());
  ws.write("notes.txt", "one\ntwo\nthree\n");
  ws.write("src/lib.rs", "fn needle() {}\n");
  // The client sees the workspace at another path, as a container mount would.
  const clientRoot = "/client/project";
  const server = await startServer(ws, [], { clientWorkspace: clientRoot });
  after(() => server.stop());
  const backend = httpExecutionBackend({ url: server.url, token: TOKEN });
  const outputs = [];
  const worker = agent({
    id: "remote-worker",
    instructions: "Work in the remote workspace.",
    model: fauxModel(),
    sandbox: "host",
    tools: shellTools({ workspace: clientRoot, executionBackend: backend, onOutput: (label, text) => outputs.push([label, text]) }),
  });
  const { streamFn, calls } = recordingStream([
      {
        toolCalls: [
          { name: "read_file", args: { path: "notes.txt", offset: 2, limit: 1 } },
          { name: "grep", args: { pattern: "needle" } },
          { name: "bash", args: { command: "wc -l < notes.txt; pwd; test -z \"$ANTHROPIC_API_KEY\" && echo clean" } },
        ],
      },
      { toolCalls: [{ name: "write_file", args: { path: "out.txt", content: "draft" } }] },
      { toolCalls: [{ name: "edit_file", args: { path: "out.txt", old_string: "draft", new_string: "final" } }] },
      { toolCalls: [{ name: "read_file", args: { path: "../outside.txt" } }] },
      { text: "done" },
  ]);
  const result = await run(worker, "go", { model: fauxModel(), streamFn });
  assert.equal(result.text, "done");
  assert.equal(ws.read("out.txt"), "final");
  const seen = Object.fromEntries(outputs.map(([label, text]) => [label.split(":")[0], text]));
  assert.equal(seen.read_file, "2\ttwo");
  assert.match(seen.grep, /src\/lib\.rs:1:fn needle\(\) \{\}/);
  assert.equal(seen.bash, `exit 0\n3\n${fs.realpathSync(ws.root)}\nclean\n`);
  assert.deepEqual(toolResultsSeen(calls).at(-1), { name: "read_file", isError: true, text: "caveman-code: path escapes the workspace: ../outside.txt" });
  await logged(server, (l) => /POST \/exec 200 \d+ms exec=\S+ code=0/.test(l));
  // `../outside.txt` was refused by the client's lexical check: no request for it.
  assert.equal(server.log.filter((l) => l.includes("POST /read")).length, 3, server.log.join("\n"));
});

test("aborting a run cancels the remote command: no process is left behind", async () => {
  const ws = tempWorkspace("knap-exec-server-abort-");
  after(() => ws.cleanup());
  const server = await startServer(ws);
  after(() => server.stop());
  const pidFile = path.join(ws.outside, "remote.pids");
  const controller = new AbortController();
  const worker = agent({
    id: "remote-abort",
    instructions: "x",
    model: fauxModel(),
    sandbox: "host",
    tools: shellTools({ workspace: ws.root, executionBackend: httpExecutionBackend({ url: server.url, token: TOKEN }) }),
  });
  const pending = run(worker, "go", {
    model: fauxModel(),
    signal: controller.signal,
    streamFn: scriptedStream([
      { toolCalls: [{ name: "bash", args: { command: `sleep 600 & echo $! >> ${pidFile}; (sleep 600 & echo $! >> ${pidFile}); wait` } }] },
      { text: "never" },
    ]),
  }).then(
    (r) => r,
    (e) => e,
  );
  const pids = await pidsIn(pidFile, 2);
  controller.abort();
  const outcome = await pending;
  assert.ok(outcome instanceof Error, "the run was aborted");
  assert.deepEqual(await survivors(pids), []);
  // Cancelled by /cancel, or (when the aborted request's connection closed first) by the
  // server noticing the client left; either way the process group is gone.
  await logged(server, (l) => (l.includes("POST /cancel 200") && l.endsWith(" cancelled")) || l.endsWith("client gone, cancelled"));
});

test("an unauthenticated request reaches no process and no file", async () => {
  const ws = tempWorkspace("knap-exec-server-auth-");
  after(() => ws.cleanup());
  const server = await startServer(ws);
  after(() => server.stop());
  const marker = path.join(ws.root, "ran");
  const exec = { execId: "e1", command: "touch", args: [marker], cwd: ws.root, env: {}, timeoutMs: 1000, maxOutputBytes: 10 };
  const write = { path: ws.path("w.txt"), data: Buffer.from("x").toString("base64") };
  for (const token of [null, "", "wrong", TOKEN.slice(0, -1), TOKEN + "x", TOKEN.toUpperCase()]) {
    for (const [endpoint, body] of [["exec", exec], ["write", write], ["read", { path: ws.path("w.txt") }], ["cancel", { execId: "e1" }]]) {
      const r = await post(server.url, endpoint, body, token);
      assert.equal(r.status, 401, `${endpoint} with ${JSON.stringify(token)}`);
      assert.deepEqual(await r.json(), { error: "cave_exec_server_unauthorized" });
    }
  }
  const basic = await post(server.url, "exec", exec, null, { authorization: `Basic ${TOKEN}` });
  assert.equal(basic.status, 401);
  assert.equal(fs.existsSync(marker), false);
  assert.equal(fs.existsSync(ws.path("w.txt")), false);
  // The client says the same for a wrong token.
  const wrong = httpExecutionBackend({ url: server.url, token: "not-the-token" });
  await assert.rejects(wrong.exec({ ...exec, signal: undefined }), coded("cave_execution_backend_http_exec_failed:401"));
  assert.equal(fs.existsSync(marker), false);
});

test("malformed requests, paths, limits and a 1 GiB read get codes and change nothing", async () => {
  const ws = tempWorkspace("knap-exec-server-bad-");
  after(() => ws.cleanup());
  ws.write("a.txt", "hello");
  fs.mkdirSync(ws.path("dir"));
  const big = ws.path("big.bin");
  fs.writeFileSync(big, "");
  fs.truncateSync(big, 1024 ** 3); // sparse: 1 GiB without the disk space
  fs.symlinkSync(ws.outside, ws.path("escape"));
  const server = await startServer(ws, ["--max-concurrency", "1", "--max-request-bytes", "4096"]);
  after(() => server.stop());
  const exec = (extra = {}) => ({ execId: `e-${Math.random().toString(36).slice(2)}`, command: "true", args: [], cwd: ws.root, env: {}, timeoutMs: 1000, maxOutputBytes: 10, ...extra });
  const cases = [
    ["exec", "{not json", 400, "cave_exec_server_request_invalid:json"],
    ["exec", "[1]", 400, "cave_exec_server_request_invalid:json"],
    ["exec", exec({ shell: true }), 400, "cave_exec_server_request_invalid:shell"],
    ["exec", exec({ execId: "bad id!" }), 400, "cave_exec_server_request_invalid:execId"],
    ["exec", exec({ args: "x" }), 400, "cave_exec_server_request_invalid:args"],
    ["exec", exec({ env: { A: 1 } }), 400, "cave_exec_server_request_invalid:env"],
    ["exec", exec({ env: { "A=B": "1" } }), 400, "cave_exec_server_request_invalid:env"],
    ["exec", exec({ timeoutMs: -1 }), 400, "cave_exec_server_request_invalid:timeoutMs"],
    ["exec", exec({ timeoutMs: 10_000_000 }), 400, "cave_exec_server_timeout_too_long"],
    ["exec", exec({ maxOutputBytes: 100_000_000 }), 400, "cave_exec_server_max_output_bytes_too_large"],
    ["exec", exec({ cwd: "relative" }), 400, "cave_exec_server_request_invalid:cwd"],
    ["exec", exec({ cwd: ws.outside }), 403, "path_escapes_workspace"],
    ["exec", exec({ cwd: ws.path("escape") }), 403, "path_escapes_workspace"],
    ["read", { path: ws.path("missing") }, 404, "not_found"],
    ["read", { path: ws.path("dir") }, 422, "not_a_file"],
    ["read", { path: ws.path("escape/x") }, 403, "path_escapes_workspace"],
    ["read", { path: ws.path("a.txt"), maxBytes: -1 }, 400, "cave_exec_server_request_invalid:maxBytes"],
    ["read", { path: big }, 413, "cave_exec_server_read_too_large"],
    ["write", { path: ws.path("n.txt"), data: "***" }, 400, "cave_exec_server_request_invalid:data"],
    ["write", { path: ws.path("escape/n.txt"), data: "eA==" }, 403, "path_escapes_workspace"],
    ["write", { path: ws.path("n.txt"), data: "eA".repeat(3000) }, 413, "cave_exec_server_request_too_large"],
    ["cancel", { execId: "x".repeat(70_000) }, 413, "cave_exec_server_request_too_large"],
    ["prepare", { extra: 1 }, 400, "cave_exec_server_request_invalid:extra"],
    ["snapshot", {}, 501, "cave_exec_server_snapshot_unsupported"],
    ["nope", {}, 404, "cave_exec_server_endpoint_unknown"],
  ];
  for (const [endpoint, body, status, code] of cases) {
    const r = await post(server.url, endpoint, body);
    assert.equal(r.status, status, `${endpoint} ${JSON.stringify(body).slice(0, 80)}`);
    assert.deepEqual(await r.json(), { error: code });
  }
  assert.equal(fs.existsSync(ws.path("n.txt")), false);
  assert.equal(fs.existsSync(path.join(ws.outside, "n.txt")), false);
  const get = await fetch(`${server.url}/exec`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.deepEqual([get.status, await get.json()], [405, { error: "cave_exec_server_method_not_allowed" }]);
  assert.equal((await post(server.url, "prepare", "", null, { authorization: `bearer ${TOKEN}` })).status, 200, "the scheme is case-insensitive");
  assert.deepEqual(await (await post(server.url, "cancel", { execId: "unknown" })).json(), {});

  // The client's view of the same refusals.
  const backend = httpExecutionBackend({ url: server.url, token: TOKEN });
  await assert.rejects(backend.readFile(big), coded("cave_execution_backend_http_read_failed:413"));
  const head = await backend.readFile(big, { maxBytes: 100_000 });
  assert.equal(head.length, 100_000);
  await assert.rejects(backend.readFile(ws.path("missing")), { code: "ENOENT" });
  await assert.rejects(backend.readFile(ws.path("dir")), { code: "EISDIR" });
  await assert.rejects(backend.readFile(ws.path("escape/x")), coded("cave_workspace_escape", "caveman-code: path escapes the workspace"));

  // One /exec at a time: a second one is refused while the first runs.
  const slow = backend.exec({ command: "sleep", args: ["1"], cwd: ws.root, env: {}, timeoutMs: 10_000, maxOutputBytes: 10 });
  while (!server.log.length || !(await isBusy(server.url, exec()))) await new Promise((r) => setTimeout(r, 10));
  assert.equal((await slow).code, 0);
  assert.equal((await backend.exec({ command: "true", args: [], cwd: ws.root, env: {}, timeoutMs: 1000, maxOutputBytes: 10 })).code, 0);
  const missing = await backend.exec({ command: "definitely-not-a-command", args: [], cwd: ws.root, env: {}, timeoutMs: 1000, maxOutputBytes: 10 });
  assert.deepEqual([missing.code, missing.startFailed, missing.stdout], [127, true, ""]);
});

async function isBusy(url, body) {
  const r = await post(url, "exec", body);
  await r.body?.cancel();
  return r.status === 429;
}

test("SIGTERM shuts down gracefully: running commands are killed and the server exits 0", async () => {
  const ws = tempWorkspace("knap-exec-server-term-");
  after(() => ws.cleanup());
  const server = await startServer(ws);
  const pidFile = path.join(ws.outside, "term.pids");
  const backend = httpExecutionBackend({ url: server.url, token: TOKEN });
  const pending = backend
    .exec({ command: "sh", args: ["-c", `sleep 600 & echo $! > ${pidFile}; wait`], cwd: ws.root, env: {}, timeoutMs: 60_000, maxOutputBytes: 100 })
    .then((r) => r, (e) => e);
  const pids = await pidsIn(pidFile);
  server.child.kill("SIGTERM");
  const { code } = await server.exited;
  assert.equal(code, 0);
  assert.deepEqual(await survivors(pids), []);
  await pending;
  assert.ok(server.log.includes("knap-exec-server: shutting down"), server.log.join("\n"));
});
