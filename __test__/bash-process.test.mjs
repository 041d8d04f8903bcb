// bash as a process: allow-listed environment, process-group kill on timeout and on abort, and
// the JS thread staying free while a command runs.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, test } from "node:test";

import { groupSurvivors, tempWorkspace, toolsFor, waitForFile } from "./helpers.mjs";

const ws = tempWorkspace();
after(() => ws.cleanup());

test("the child environment is the allow-list only: no API keys leak", async () => {
  process.env.ANTHROPIC_API_KEY = "sk-ant-knap-test-should-not-leak";
  process.env.CAVE_API_KEY = "cave-knap-test-should-not-leak";
  process.env.OPENAI_API_KEY = "sk-knap-test-should-not-leak";
  try {
    const { bash } = toolsFor(ws);
    const text = await bash.execute({ command: "env" });
    assert.ok(text.startsWith("exit 0\n"));
    assert.ok(!text.includes("should-not-leak"), text);
    assert.ok(!/^(ANTHROPIC|CAVE|OPENAI)_API_KEY=/m.test(text), text);
    const allowed = new Set([
      "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "TMPDIR", "PWD",
      "ComSpec", "PATHEXT", "SystemRoot", "TEMP", "TMP", "USERPROFILE", "APPDATA", "LOCALAPPDATA",
      // set by /bin/sh itself
      "SHLVL", "OLDPWD", "_",
    ]);
    const names = text.split("\n").slice(1).filter((l) => l.includes("=")).map((l) => l.slice(0, l.indexOf("=")));
    assert.deepEqual(names.filter((n) => !allowed.has(n)), []);
    if (process.env.PATH) assert.ok(names.includes("PATH"), "PATH is passed on");
  } finally {
    delete process.env.ANTHROPIC_API_KEY;
    delete process.env.CAVE_API_KEY;
    delete process.env.OPENAI_API_KEY;
  }
});

test("timeout: `exit timeout after Nms` and the whole process group is killed", async () => {
  const { bash } = toolsFor(ws);
  fs.rmSync(ws.path("timeout.pid"), { force: true });
  const text = await bash.execute({
    command: "echo $$ > timeout.pid; (sleep 300; echo never) & sleep 300 & echo started; wait",
    timeoutMs: 500,
  });
  assert.equal(text, "exit timeout after 500ms\nstarted\n");
  const pgid = Number(ws.read("timeout.pid").trim());
  assert.ok(pgid > 1);
  assert.deepEqual(await groupSurvivors(pgid), [], `no survivor in process group ${pgid}`);
});

test("timeoutMs above 120000 is clamped, not an error", async () => {
  const { bash } = toolsFor(ws);
  assert.equal(await bash.execute({ command: "echo ok", timeoutMs: 10_000_000 }), "exit 0\nok\n");
});

test("AbortSignal aborts a running bash: rejects with AbortError and kills the group", async () => {
  const { bash } = toolsFor(ws);
  fs.rmSync(ws.path("abort.pid"), { force: true });
  const controller = new AbortController();
  const running = bash.execute({ command: "sleep 300 & sleep 300 & echo $$ > abort.pid; wait" }, controller.signal);
  await waitForFile(ws.path("abort.pid"));
  controller.abort();
  await assert.rejects(running, (e) => e instanceof Error && e.name === "AbortError" && e.code === "ABORT_ERR");
  const pgid = Number(ws.read("abort.pid").trim());
  assert.deepEqual(await groupSurvivors(pgid), [], `no survivor in process group ${pgid}`);
});

test("an already-aborted signal never starts the command", async () => {
  const { bash } = toolsFor(ws);
  const controller = new AbortController();
  controller.abort(new Error("stop"));
  await assert.rejects(bash.execute({ command: "touch started.txt" }, controller.signal), (e) => e.name === "AbortError");
  assert.equal(fs.existsSync(ws.path("started.txt")), false);
});

test("a background child holding the pipe does not hang the call, and dies with it", async () => {
  const { bash } = toolsFor(ws);
  const text = await bash.execute({ command: "sleep 300 & echo $! > bg.pid; echo done" });
  assert.equal(text, "exit 0\ndone\n");
  const pid = Number(ws.read("bg.pid").trim());
  assert.throws(() => process.kill(pid, 0), (e) => e.code === "ESRCH", "killed when its shell exited");
});

test("the event loop keeps ticking while bash runs `sleep 2`", async () => {
  const { bash } = toolsFor(ws);
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  try {
    const text = await bash.execute({ command: "sleep 2; echo slept" });
    assert.equal(text, "exit 0\nslept\n");
  } finally {
    clearInterval(timer);
  }
  // A blocked JS thread would see no tick at all during the call.
  assert.ok(ticks > 20, `only ${ticks} ticks while bash ran`);
});
