// sandbox: "required" with RunOptions.entryPath (reference caveman-agent-api.md §2.3): the tool
// closures of a required agent run in worker processes that import the entry module. The
// entry is __test__/fixtures/sandbox-agent.mjs; the model is scripted.
import test, { after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { agent, auto, run, stream, schema, tool, CavemanRunError, DiskDurableStore } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { createAgentServer } from "../lib/serve.mjs";
import * as entry from "./fixtures/sandbox-agent.mjs";
import { recordingStream, toolResultsSeen } from "./run-helpers.mjs";
import { TOKEN, AUTH, tempRoot, post, get, waitFor } from "./serve-helpers.mjs";

const ENTRY = fileURLToPath(new URL("./fixtures/sandbox-agent.mjs", import.meta.url));
const EMPTY = fileURLToPath(new URL("./fixtures/sandbox-empty.mjs", import.meta.url));
const call = (name, args = {}) => ({ name, args });
const options = (streamFn, extra = {}) => ({ ensureRuntime: false, model: fauxModel(), streamFn, entryPath: ENTRY, ...extra });

const temps = [];
after(() => {
  for (const dir of temps) fs.rmSync(dir, { recursive: true, force: true });
});
function tempDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-sandbox-"));
  temps.push(dir);
  return dir;
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const gone = (pid, what) => waitFor(() => !alive(pid), what);

test("a required-sandbox tool runs in another process: its pid, its globals and its environment are its own", async (t) => {
  process.env.KNAP_SANDBOX_SECRET = "parent-only";
  process.env.KNAP_SANDBOX_CREDENTIAL = "passed-by-name";
  t.after(() => {
    delete process.env.KNAP_SANDBOX_SECRET;
    delete process.env.KNAP_SANDBOX_CREDENTIAL;
  });
  const { streamFn, calls } = recordingStream([{ toolCalls: [call("probe")] }, { toolCalls: [call("probe")] }, { text: "done" }]);
  const profile = { network: false, childProcess: false, credentialEnv: ["KNAP_SANDBOX_CREDENTIAL"] };
  const result = await run(entry.sandboxed, "go", options(streamFn, { sandboxProfile: profile }));
  assert.equal(result.text, "done");
  const seen = toolResultsSeen(calls);
  assert.deepEqual(seen.map((r) => r.isError), [false, false]);
  const [first, second] = seen.map((r) => JSON.parse(r.text));
  assert.notEqual(first.pid, process.pid, "the tool ran in another process");
  assert.equal(second.pid, first.pid, "one run's calls reuse its worker");
  assert.deepEqual([first.touched, second.touched], [1, 2], "the worker's global counted both calls");
  assert.equal(globalThis.knapSandboxTouched, 0, "the parent's copy of the global never changed");
  assert.equal(first.secret, null, "an environment variable not named in credentialEnv stays in the parent");
  assert.equal(first.credential, "passed-by-name");
  assert.equal(typeof first.toolCallId, "string");
  assert.notEqual(first.toolCallId, second.toolCallId);
  assert.deepEqual(result.receipt.tools, [{ name: "probe", calls: 2, errors: 0 }]);
  await gone(first.pid, "the run's worker to exit when the run ends");

  // Another run gets a fresh worker: nothing of the first run's state is left.
  const again = recordingStream([{ toolCalls: [call("probe")] }, { text: "done" }]);
  await run(entry.sandboxed, "go", options(again.streamFn));
  const third = JSON.parse(toolResultsSeen(again.calls)[0].text);
  assert.notEqual(third.pid, first.pid);
  assert.equal(third.touched, 1);
});

test("a tool that throws in the worker: the model reads its message, the run goes on", async () => {
  const { streamFn, calls } = recordingStream([{ toolCalls: [call("boom")] }, { toolCalls: [call("probe")] }, { text: "done" }]);
  const result = await run(entry.sandboxed, "go", options(streamFn));
  const seen = toolResultsSeen(calls);
  assert.deepEqual(seen[0], { name: "boom", isError: true, text: "kaboom from the worker" });
  assert.equal(seen[1].isError, false);
  assert.equal(result.stopReason, "complete");
  assert.deepEqual(result.receipt.tools, [{ name: "boom", calls: 1, errors: 1 }, { name: "probe", calls: 1, errors: 0 }]);
});

test("a tool that ends its worker process: cave_sandbox_worker_exit, and the next call gets a new worker", async () => {
  const { streamFn, calls } = recordingStream([{ toolCalls: [call("probe")] }, { toolCalls: [call("exits")] }, { toolCalls: [call("probe")] }, { text: "done" }]);
  await run(entry.sandboxed, "go", options(streamFn));
  const seen = toolResultsSeen(calls);
  assert.equal(seen[1].isError, true);
  assert.match(seen[1].text, /^cave_sandbox_worker_exit:3: the worker process running tool "exits" exited \(code 3\)$/);
  const [before, afterExit] = [JSON.parse(seen[0].text), JSON.parse(seen[2].text)];
  assert.notEqual(afterExit.pid, before.pid);
  assert.equal(afterExit.touched, 1);
});

test("an entry that does not export the agent fails the run before any provider call, naming entryPath", async () => {
  let providerCalls = 0;
  const streamFn = (...args) => (providerCalls++, scriptedStream([{ text: "x" }])(...args));
  await assert.rejects(run(entry.sandboxed, "go", options(streamFn, { entryPath: EMPTY })), (error) => {
    assert.ok(error instanceof CavemanRunError);
    assert.ok(
      error.message.startsWith(`cave_agent_run_failed: cave_sandbox_entry_agent_missing: RunOptions.entryPath ${EMPTY} exports no agent "sandboxed" (its exports: nothing)`),
      error.message,
    );
    assert.match(error.message, /\nhint: export the definition you run/);
    return true;
  });
  // A path that does not resolve: relative to rootDir, named as resolved.
  const dir = path.dirname(EMPTY);
  await assert.rejects(run(entry.sandboxed, "go", options(streamFn, { entryPath: "./no-such-entry.mjs", rootDir: dir })), (error) => {
    assert.match(error.message, new RegExp(`cave_sandbox_entry_import_failed: RunOptions\\.entryPath ${path.join(dir, "no-such-entry.mjs").replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} could not be imported`));
    return true;
  });
  // The entry's agent of that id lacks a tool the run's definition has.
  const extra = tool({ name: "extra", description: "d", input: schema.object({}), effect: "read", execute: () => "x" });
  const drifted = agent({ id: "drifted", instructions: "x", model: auto(), sandbox: "required", tools: [...entry.drifted.tools, extra] });
  await assert.rejects(run(drifted, "go", options(streamFn)), (error) => {
    assert.match(error.message, /cave_sandbox_entry_tool_missing: the agent "drifted" exported by RunOptions\.entryPath .* has no tool extra/);
    return true;
  });
  assert.equal(providerCalls, 0);
});

test("abort kills the worker of a tool that never yields", async () => {
  const dir = tempDir();
  const controller = new AbortController();
  const streamFn = scriptedStream([{ toolCalls: [call("spin", { dir })] }, { text: "never" }]);
  const pending = run(entry.sandboxed, "go", options(streamFn, { signal: controller.signal }));
  const pid = await waitFor(() => fs.existsSync(path.join(dir, "pid")) && Number(fs.readFileSync(path.join(dir, "pid"), "utf8")), "the spinning tool to start");
  assert.notEqual(pid, process.pid);
  assert.ok(alive(pid));
  controller.abort();
  await assert.rejects(pending, (error) => error instanceof CavemanRunError && /cave_run_aborted/.test(error.message));
  await gone(pid, "the spinning worker to be killed");
});

test("a worker does not outlive its parent: killed with SIGKILL mid-call, the parent leaves no spinning worker behind", async () => {
  const dir = tempDir();
  const parent = spawn(process.execPath, [fileURLToPath(new URL("./fixtures/sandbox-parent.mjs", import.meta.url)), dir], { stdio: "ignore" });
  const exited = new Promise((resolve) => parent.once("exit", resolve));
  const pid = await waitFor(() => fs.existsSync(path.join(dir, "pid")) && Number(fs.readFileSync(path.join(dir, "pid"), "utf8")), "the spinning tool to start");
  assert.notEqual(pid, parent.pid);
  parent.kill("SIGKILL");
  await exited;
  await gone(pid, "the orphaned worker's watchdog to kill it");
});

test("a worker cannot read the parent's secret: not in its environment; as a non-root user not through /proc/<ppid>/environ or mem either", (t) => {
  const script = fileURLToPath(new URL("./fixtures/sandbox-secret.mjs", import.meta.url));
  const secret = `sk-knap-sandbox-${Math.random().toString(36).slice(2)}`;
  const probe = (argv) => {
    const r = spawnSync(argv[0], argv.slice(1), { env: { PATH: process.env.PATH, HOME: os.tmpdir(), KNAP_PROBE_SECRET: secret }, encoding: "utf8", timeout: 120_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.includes(secret), false, "the secret leaked");
    return JSON.parse(r.stdout);
  };
  const root = process.getuid?.() === 0;
  const mine = probe([process.execPath, script]);
  assert.equal(mine.secretHeld, true);
  assert.notEqual(mine.peek.pid, mine.parent);
  assert.equal(mine.peek.own, null, "the worker's environment has no KNAP_PROBE_SECRET");
  if (!root) {
    assert.equal(mine.peek.environ, "EACCES");
    assert.equal(mine.peek.mem, "EACCES");
  } else {
    t.diagnostic(`as root a worker reads the parent's /proc environ (${mine.peek.environ}) and mem (${mine.peek.mem}): knap drops no capabilities in workers`);
  }
  const setpriv = spawnSync("setpriv", ["--version"]);
  if (root && setpriv.status === 0) {
    const other = probe(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, script]);
    assert.equal(other.peek.own, null);
    assert.equal(other.peek.environ, "EACCES", "the parent is non-dumpable before its first worker starts");
    assert.equal(other.peek.mem, "EACCES");
  } else if (root) {
    t.diagnostic("no setpriv: the unprivileged case was not run");
  }
});

test("a tool timeout aborts the call in the worker (the reason crosses over), retires that worker, and the run goes on", async () => {
  const dir = tempDir();
  const { streamFn, calls } = recordingStream([{ toolCalls: [call("patient", { dir })] }, { toolCalls: [call("probe")] }, { text: "done" }]);
  const result = await run(entry.sandboxed, "go", options(streamFn));
  const seen = toolResultsSeen(calls);
  assert.deepEqual(seen[0], { name: "patient", isError: true, text: "cave_tool_timeout" });
  assert.equal(fs.readFileSync(path.join(dir, "reason"), "utf8"), "Error: cave_tool_timeout");
  const patientPid = Number(fs.readFileSync(path.join(dir, "pid"), "utf8"));
  const next = JSON.parse(seen[1].text);
  assert.notEqual(next.pid, patientPid, "an aborted worker is never reused");
  assert.equal(next.touched, 1);
  assert.equal(result.text, "done");
  await gone(patientPid, "the aborted worker to be killed");
});

test("the calls of one turn run in separate workers at once", async () => {
  const dir = tempDir();
  const { streamFn, calls } = recordingStream([
    { toolCalls: [call("rendezvous", { dir, me: "a", other: "b" }), call("rendezvous", { dir, me: "b", other: "a" })] },
    { text: "done" },
  ]);
  await run(entry.sandboxed, "go", options(streamFn));
  const seen = toolResultsSeen(calls);
  assert.deepEqual(seen.map((r) => r.isError), [false, false], JSON.stringify(seen));
  assert.notEqual(seen[0].text, seen[1].text, "two processes met");
});

test("a subagent's own tools run in a worker too, found through the subagent tool's name", async () => {
  const { streamFn, calls } = recordingStream([
    { toolCalls: [call("delegate", { task: "look" })] },
    { toolCalls: [call("probe")] },
    { text: "child done" },
    { text: "parent done" },
  ]);
  const result = await run(entry.sandboxed, "go", options(streamFn));
  assert.equal(result.text, "parent done");
  const childResult = calls[2].messages.find((m) => m.role === "toolResult");
  assert.equal(childResult.toolName, "probe");
  assert.notEqual(JSON.parse(childResult.content[0].text).pid, process.pid);
});

test("admission under a required sandbox: a composite is refused with cave_nested_tool_sandbox_unsupported and never runs", async () => {
  const { streamFn, calls } = recordingStream([{ toolCalls: [call("composite")] }, { toolCalls: [call("probe")] }, { text: "done" }]);
  await run(entry.sandboxed, "go", options(streamFn));
  const seen = toolResultsSeen(calls);
  assert.deepEqual(seen[0], { name: "composite", isError: true, text: "cave_nested_tool_sandbox_unsupported" });
  assert.equal(JSON.parse(seen[1].text).touched, 1, "the composite never dispatched probe");
});

test("a definition without a declared sandbox and an entryPath is not downgraded: no host notice, tools in a worker", async (t) => {
  const written = [];
  const original = process.stderr.write;
  process.stderr.write = function (chunk, ...rest) {
    written.push(String(chunk));
    return original.call(this, chunk, ...rest);
  };
  t.after(() => {
    process.stderr.write = original;
  });
  assert.equal(entry.default.sandboxDeclared, false);
  const { streamFn, calls } = recordingStream([{ toolCalls: [call("probe")] }, { text: "done" }]);
  await run(entry.default, "go", options(streamFn));
  process.stderr.write = original;
  assert.deepEqual(written.filter((w) => w.includes("host execution")), []);
  assert.notEqual(JSON.parse(toolResultsSeen(calls)[0].text).pid, process.pid);
});

test("a host subagent under a required root is refused before the run with cave_host_sandbox_nested_under_required", async () => {
  let providerCalls = 0;
  const streamFn = (...args) => (providerCalls++, scriptedStream([{ text: "x" }])(...args));
  await assert.rejects(run(entry.hostChild, "go", options(streamFn)), (error) => {
    assert.ok(!(error instanceof CavemanRunError), "a plain Error, as the reference's graph validation");
    assert.equal(error.code, "cave_host_sandbox_nested_under_required");
    assert.match(error.message, /^cave_host_sandbox_nested_under_required: subagent tool "helper" runs agent "host-child" with sandbox "host" under agent "host-child-parent"/);
    return true;
  });
  const events = stream(entry.hostChild, "go", options(streamFn));
  await assert.rejects(events.next(), (error) => error.code === "cave_host_sandbox_nested_under_required");
  assert.equal(providerCalls, 0);
});

test("a run inside a worker cannot start workers of its own (cave_sandbox_worker_nested)", async () => {
  const { streamFn, calls } = recordingStream([{ toolCalls: [call("nested_run")] }, { text: "done" }]);
  await run(entry.sandboxed, "go", options(streamFn));
  assert.match(toolResultsSeen(calls)[0].text, /cave_sandbox_worker_nested: a run inside a sandbox worker cannot start sandbox workers of its own/);
});

test("shell tools: knap's local backend runs in Rust without a worker; with onOutput (user JS) the tool set runs in a worker", async () => {
  // No worker starts at all: the entry need not even export the agent.
  const local = recordingStream([{ toolCalls: [call("read_file", { path: "sandbox-empty.mjs" })] }, { text: "done" }]);
  await run(entry.shellLocal, "go", options(local.streamFn, { entryPath: EMPTY }));
  const [read] = toolResultsSeen(local.calls);
  assert.equal(read.isError, false);
  assert.match(read.text, /export const nothing = 1;/);

  const observed = recordingStream([{ toolCalls: [call("read_file", { path: "sandbox-empty.mjs" })] }, { text: "done" }]);
  await run(entry.shellObserved, "go", options(observed.streamFn));
  const [remote] = toolResultsSeen(observed.calls);
  assert.match(remote.text, /export const nothing = 1;/);
  assert.deepEqual(entry.observed, [], "onOutput ran in the worker's copy of the module, not here");
});

test("entryPath and sandboxProfile.credentialEnv are checked", async () => {
  const streamFn = scriptedStream([{ text: "x" }]);
  await assert.rejects(run(entry.sandboxed, "go", options(streamFn, { entryPath: 5 })), (error) => {
    assert.equal(error.code, "cave_sandbox_entry_invalid");
    assert.match(error.message, /^cave_sandbox_entry_invalid: RunOptions\.entryPath must be the path of the module that exports the agent, got 5/);
    return true;
  });
  await assert.rejects(run(entry.sandboxed, "go", options(streamFn, { sandboxProfile: { credentialEnv: ["NOT-A-NAME"] } })), (error) => error.code === "cave_sandbox_profile_invalid");
});

test("serve with entryPath: no host warning, each run's tools in a worker with the durable identity", async (t) => {
  const root = tempRoot("knap-sandbox-serve-");
  temps.push(root);
  // Calls probe once, then answers with what probe returned.
  const streamFn = (model, context, opts) => {
    const result = context.messages.find((m) => m.role === "toolResult");
    const turn = result ? { text: result.content[0].text } : { toolCalls: [call("probe")] };
    return scriptedStream([turn])(model, context, opts);
  };
  const written = [];
  const original = process.stderr.write;
  process.stderr.write = (chunk) => (written.push(String(chunk)), true);
  let server;
  try {
    server = createAgentServer({
      definition: entry.default,
      token: TOKEN,
      store: new DiskDurableStore(path.join(root, "journals")),
      rootDir: root,
      runOptions: { entryPath: ENTRY, model: fauxModel(), streamFn },
    });
  } finally {
    process.stderr.write = original;
  }
  assert.deepEqual(written, [], "an entryPath means no host-execution warning");
  const port = await server.listen(0, "127.0.0.1");
  t.after(() => server.close(2_000));
  const base = `http://127.0.0.1:${port}`;
  const accepted = await post(base, "/runs", { runId: "sandboxed-1", input: "go" });
  assert.equal(accepted.status, 202);
  const status = await waitFor(async () => {
    const s = await get(base, "/runs/sandboxed-1", AUTH);
    return ["completed", "failed", "cancelled"].includes(s.body.status) ? s : undefined;
  }, "the run to settle");
  assert.equal(status.body.status, "completed", JSON.stringify(status.body));
  const probed = JSON.parse(status.body.result.text);
  assert.notEqual(probed.pid, process.pid);
  assert.equal(typeof probed.idempotencyKey, "string", "a durable run's tool gets context.durable through the worker");
});
