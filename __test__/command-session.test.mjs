// Interactive command sessions from JS: the runtime's API and codes, the bash tool's five input
// shapes through shellTools, and no surviving process after kill, close or a run abort.
import assert from "node:assert/strict";
import path from "node:path";
import { after, test } from "node:test";

import { agent, httpExecutionBackend, run, shellTools } from "../lib/index.mjs";
import * as subpath from "../lib/command-session.mjs";
import { createCommandSessionRuntime } from "../lib/command-session.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { pidsIn, survivors } from "./backend-helpers.mjs";
import { tempWorkspace } from "./helpers.mjs";

const ws = tempWorkspace("knap-sessions-");
after(() => ws.cleanup());

const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
const sh = (script, extra = {}) => ({ command: "/bin/sh", args: ["-c", script], cwd: ws.root, env, timeoutMs: 60_000, ...extra });
const ID = /^cmd_[a-f0-9]{32}$/;

test("the command-session subpath and the runtime's option checks", () => {
  assert.deepEqual(Object.keys(subpath), ["createCommandSessionRuntime"]);
  for (const [options, code] of [
    [{ maxSessions: 0 }, "command_session_maxSessions_invalid"],
    [{ maxReadBytes: "1" }, "command_session_maxReadBytes_invalid"],
    [{ spill: { directory: "relative", maxBytes: 10 } }, "command_session_spill_directory_invalid"],
    [{ spill: { directory: ws.root, maxBytes: 0 } }, "command_session_spill_maxBytes_invalid"],
    [{ nope: 1 }, "command_session_option_unknown:nope"],
  ]) {
    assert.throws(() => createCommandSessionRuntime(options), { code }, JSON.stringify(options));
  }
  createCommandSessionRuntime().close();
});

test("start, read with cursors and queries, write with closeStdin, list, kill", async () => {
  const rt = createCommandSessionRuntime({ maxSessions: 8 });
  after(() => rt.close());
  const started = await rt.start(sh('echo ready; while read line; do echo "> $line"; done; echo bye', { stdin: "pipe" }));
  assert.match(started.sessionId, ID);
  assert.equal(started.state, "running");
  const { sessionId } = started;
  const ready = await rt.read({ sessionId, query: "ready", waitMs: 10_000 });
  assert.deepEqual(ready, {
    sessionId, state: "running", cursor: 0, outputStart: 0, nextCursor: 6, outputEncoding: "utf8", output: "ready\n",
    availableFrom: 0, availableTo: 6, truncatedBeforeCursor: false, hasMore: false, matchStart: 0, exitCode: null, exitSignal: null,
  });
  assert.equal("matchStart" in (await rt.read({ sessionId })), false);
  const w = await rt.write({ sessionId, input: "hi\n" });
  assert.deepEqual(w, { sessionId, state: "running", accepted: true, bytes: 3, outputCursor: 6 });
  const echoed = await rt.read({ sessionId, cursor: 6, query: "> hi", waitMs: 10_000 });
  assert.equal(echoed.output, "> hi\n");
  assert.deepEqual(rt.list().map((s) => [s.sessionId, s.state, s.stdinOpen]), [[sessionId, "running", true]]);
  assert.ok(Object.isFrozen(rt.list()[0]));
  await rt.write({ sessionId, input: "", closeStdin: true });
  const done = await rt.read({ sessionId, cursor: 11, query: "bye", waitMs: 10_000 });
  assert.equal(done.output, "bye\n");
  await assert.rejects(rt.read({ sessionId, cursor: 999 }), { code: "command_session_cursor_beyond_output" });
  await assert.rejects(rt.read({ sessionId: "cmd_1" }), { code: "command_session_id_invalid" });
  await assert.rejects(rt.read({ sessionId, signal: AbortSignal.abort() }), { code: "command_session_operation_aborted" });
  await assert.rejects(rt.write({ sessionId, input: 1 }), { code: "command_session_input_must_be_string" });
  await assert.rejects(rt.start({ ...sh("true"), env: undefined }), { code: "command_session_explicit_env_required" });
  await assert.rejects(rt.start({ ...sh("true"), cwd: "rel" }), { code: "command_session_cwd_must_be_absolute" });

  const pidFile = path.join(ws.outside, "kill.pids");
  const k = await rt.start(sh(`sleep 600 & echo $! >> ${pidFile}; (sleep 600 & echo $! >> ${pidFile}); setsid sleep 600 & echo $! >> ${pidFile}; wait`));
  const pids = await pidsIn(pidFile, 3);
  const killed = await rt.kill(k.sessionId);
  assert.equal(killed.state, "killed");
  assert.equal(killed.exitSignal, "SIGKILL");
  assert.deepEqual(await survivors(pids), []);
  const unknown = await rt.kill("cmd_00000000000000000000000000000000");
  assert.equal(unknown.state, "unknown_after_restart");
});

test("close() kills every live session and forgets them; later starts are refused", async () => {
  const rt = createCommandSessionRuntime();
  const pidFile = path.join(ws.outside, "close.pids");
  for (let i = 0; i < 3; i++) await rt.start(sh(`sleep 600 & echo $! >> ${pidFile}; wait`));
  const pids = await pidsIn(pidFile, 3);
  await rt.close();
  await rt.close();
  assert.deepEqual(rt.list(), []);
  assert.deepEqual(await survivors(pids), []);
  await assert.rejects(rt.start(sh("true")), { code: "command_session_runtime_closed" });
});

test("the bash tool's five shapes, through shellTools, with onOutput labels", async () => {
  const rt = createCommandSessionRuntime({ maxSessions: 8 });
  after(() => rt.close());
  const labels = [];
  const tools = Object.fromEntries(
    shellTools({ workspace: ws.root, commandSessions: rt, onOutput: (label) => labels.push(label) }).map((t) => [t.name, t]),
  );
  const { bash } = tools;
  assert.equal(bash.input.anyOf.length, 5);
  assert.equal(await bash.execute({ action: "list" }), "command sessions: none");
  assert.equal(await bash.execute({ command: "echo hi" }), "exit 0\nhi\n");
  const page = await bash.execute({ command: "echo up; cat", yieldTimeMs: 300 });
  const id = page.split(" ")[1];
  assert.match(id, ID);
  assert.equal(page, `session ${id} · running\nbytes 0-3 of 3 · next cursor 3\nup\n\n[still running; read again at cursor 3]`);
  const wrote = await bash.execute({ sessionId: id, action: "write", input: "x\n", closeStdin: true, waitMs: 5000 });
  assert.equal(wrote, `session ${id} · exited · exit 0\nstdin accepted 2 bytes · stdin closed\nbytes 3-5 of 5 · next cursor 5\nx\n`);
  assert.equal(await bash.execute({ sessionId: id, action: "read", limit: 2 }), `session ${id} · exited · exit 0\nbytes 0-2 of 5 · next cursor 2\nup\n[continue at cursor 2]`);
  const list = await bash.execute({ action: "list" });
  assert.ok(list.includes(`\n${id} · exited · exit 0 · stdin closed · retained bytes 0-5`), list);
  await assert.rejects(bash.execute({ sessionId: id, action: "read", waitMs: 30_001 }), { message: "caveman-code: waitMs must be an integer from 0 to 30000" });
  assert.deepEqual(labels, ["bash:list", "bash:echo hi", "bash:echo up; cat", `bash:write:${id}`, `bash:read:${id}`, "bash:list"]);

  assert.throws(() => shellTools({ workspace: ws.root, commandSessions: {} }), { code: "cave_command_sessions_invalid" });
  assert.throws(
    () => shellTools({ workspace: "/w", commandSessions: rt, executionBackend: httpExecutionBackend({ url: "http://127.0.0.1:1", token: "t" }) }),
    { code: "cave_execution_backend_command_sessions_local_only" },
  );
  const plain = Object.fromEntries(shellTools({ workspace: ws.root }).map((t) => [t.name, t]));
  await assert.rejects(plain.bash.execute({ command: "x", yieldTimeMs: 5 }), { code: "cave_execution_backend_command_sessions_disabled" });
  await assert.rejects(plain.bash.execute({ action: "list" }), { code: "cave_execution_backend_command_sessions_local_only" });
});

test("aborting a run kills the sessions its bash calls started, background children included", async () => {
  const rt = createCommandSessionRuntime({ maxSessions: 8 });
  after(() => rt.close());
  const pidFile = path.join(ws.outside, "run.pids");
  const controller = new AbortController();
  const worker = agent({
    id: "session-worker",
    instructions: "Start a server.",
    model: fauxModel(),
    sandbox: "host",
    tools: shellTools({ workspace: ws.root, commandSessions: rt }),
  });
  const turns = [
    { toolCalls: [{ name: "bash", args: { command: `sleep 600 & echo $! >> ${pidFile}; (sleep 600 & echo $! >> ${pidFile}); echo serving; wait`, yieldTimeMs: 200 } }] },
    { toolCalls: [{ name: "bash", args: { action: "list" } }] },
    { text: "never reached" },
  ];
  const inner = scriptedStream(turns);
  let calls = 0;
  const streamFn = (model, context, options) => {
    calls += 1;
    if (calls === 2) {
      // The session is running now; abort the run while the model "thinks".
      controller.abort();
    }
    return inner(model, context, options);
  };
  const outcome = run(worker, "go", { model: fauxModel(), streamFn, signal: controller.signal }).then(
    (r) => r,
    (e) => e,
  );
  const pids = await pidsIn(pidFile, 2);
  await outcome;
  assert.deepEqual(await survivors(pids), []);
  const states = rt.list().map((s) => s.state);
  assert.ok(states.length >= 1 && states.every((s) => s === "killed"), JSON.stringify(states));
});
