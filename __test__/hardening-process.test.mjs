// Commands as processes under hostile use: daemons (`&`, `setsid`, `setsid -f`, a double fork)
// die with their call on normal exit, timeout, abort and close(); no output is lost however many
// calls run at once; a command cannot read knap's environment.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import { shellTools } from "../lib/index.mjs";
import { createLocalSandbox, createAgentTools } from "knap/ai-sdk";
import { tempWorkspace, waitForFile } from "./helpers.mjs";

const WATCHDOG = { timeout: 240_000 };

/** Starts one daemon of each kind; each appends its pid to `pids`, then the script goes on. */
const DAEMONS = [
  "sleep 300 & echo $! >> pids",
  "setsid sleep 301 >/dev/null 2>&1 & echo $! >> pids",
  "setsid -f sh -c 'echo $$ >> pids; exec sleep 302' >/dev/null 2>&1",
  "(sh -c 'sleep 303 >/dev/null 2>&1 & echo $! >> pids' &)",
  "while [ $(wc -l < pids) -lt 4 ]; do sleep 0.02; done",
].join("; ");

const running = (pid) => {
  try {
    return !/\) [ZX] /.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
};

/** The daemons' pids that still run after a bounded wait (they are killed, not waited for). */
async function survivors(ws) {
  const pids = ws.read("pids").trim().split("\n").map(Number);
  assert.equal(pids.length, 4, "every daemon started");
  for (let i = 0; i < 200 && pids.some(running); i++) await sleep(25);
  return pids.filter(running);
}

function setup(t) {
  const ws = tempWorkspace("knap-hardening-proc-");
  t.after(() => ws.cleanup());
  const list = shellTools({ workspace: ws.root });
  const bash = list.find((x) => x.name === "bash");
  return { ws, list, bash };
}

test("daemons die with their call on normal exit", WATCHDOG, async (t) => {
  const { ws, bash } = setup(t);
  assert.equal(await bash.execute({ command: `${DAEMONS}; echo done` }), "exit 0\ndone\n");
  assert.deepEqual(await survivors(ws), []);
});

test("daemons die with their call on timeout", WATCHDOG, async (t) => {
  const { ws, bash } = setup(t);
  const text = await bash.execute({ command: `${DAEMONS}; echo started; sleep 300`, timeoutMs: 3_000 });
  assert.equal(text, "exit timeout after 3000ms\nstarted\n");
  assert.deepEqual(await survivors(ws), []);
});

test("daemons die with their call on abort", WATCHDOG, async (t) => {
  const { ws, bash } = setup(t);
  const controller = new AbortController();
  const call = bash.execute({ command: `${DAEMONS}; echo 1 > ready; sleep 300` }, controller.signal);
  await waitForFile(ws.path("ready"));
  controller.abort();
  await assert.rejects(call, (e) => e.name === "AbortError");
  assert.deepEqual(await survivors(ws), []);
});

test("close() kills what the tool set runs, daemons included, and refuses later calls", WATCHDOG, async (t) => {
  const { ws, list, bash } = setup(t);
  assert.equal(Object.keys(list).includes("close"), false, "close is not enumerable: the array is still a ToolDefinition[]");
  const call = bash.execute({ command: `${DAEMONS}; echo 1 > ready; sleep 300` });
  await waitForFile(ws.path("ready"));
  await list.close();
  await assert.rejects(call, (e) => e.name === "AbortError");
  assert.deepEqual(await survivors(ws), []);
  await assert.rejects(bash.execute({ command: "echo late" }), (e) => e.code === "cave_shell_tools_closed");
});

test("AI SDK sandbox: background runs keep their daemons until destroy(), which kills them and removes the log", WATCHDOG, async (t) => {
  const ws = tempWorkspace("knap-hardening-bg-");
  t.after(() => ws.cleanup());
  const sandbox = createLocalSandbox({ workingDirectory: ws.root });
  const { tools } = await createAgentTools(sandbox);
  const out = await tools.Bash.execute({ command: `${DAEMONS}; echo up; sleep 300`, run_in_background: true }, { toolCallId: "b1", messages: [] });
  assert.equal(out.exit_code, 0);
  await waitForFile(ws.path("pids"));
  for (let i = 0; i < 400 && ws.read("pids").trim().split("\n").length < 4; i++) await sleep(25);
  const pids = ws.read("pids").trim().split("\n").map(Number);
  assert.ok(pids.every(running), "a background run's processes outlive the tool call");
  // A foreground call's daemons still die with it.
  const fg = await tools.Bash.execute({ command: "sleep 300 & echo $!" }, { toolCallId: "b2", messages: [] });
  const fgPid = Number(fg.stdout.trim());
  for (let i = 0; i < 200 && running(fgPid); i++) await sleep(25);
  assert.equal(running(fgPid), false);
  await sandbox.destroy();
  assert.deepEqual(await survivors(ws), []);
  // The launcher exits right after its sweep.
  for (let i = 0; i < 200 && running(out.background.pid); i++) await sleep(25);
  assert.equal(running(out.background.pid), false);
  assert.equal(fs.existsSync(out.background.output_file), false, "the log file was removed");
});

test("1,000 concurrent bash calls lose no byte", WATCHDOG, async (t) => {
  const { bash } = setup(t);
  const N = 1000;
  const expected = (i) => Array.from({ length: 1500 }, (_, k) => `${i}:${k + 1}`).join("\n") + "\n";
  const texts = await Promise.all(
    Array.from({ length: N }, (_, i) => bash.execute({ command: `seq 1 1500 | sed 's/^/${i}:/'` })),
  );
  let lost = 0;
  for (let i = 0; i < N; i++) {
    const want = `exit 0\n${expected(i)}`;
    if (texts[i] !== want) lost += Math.max(0, want.length - texts[i].length) || 1;
  }
  assert.equal(lost, 0, `bytes lost over ${N} concurrent calls`);
});

// ---------------------------------------------------------------------------------------------
// Secrets: a Node process holding a secret runs bash; bash looks everywhere it can.

const PROBE = [
  // The chain of ancestors: /proc/<pid>/environ of each, up to init.
  'p=$$; while [ "$p" -gt 1 ] 2>/dev/null; do echo "== ancestor $p"; tr "\\0" "\\n" < /proc/$p/environ 2>&1; p=$(sed "s/.*) . //" /proc/$p/stat | cut -d" " -f1); done',
  'echo "== PPID $PPID"; cat /proc/$PPID/environ 2>&1 | tr "\\0" "\\n"',
  'echo "== ps e"; ps eww -e 2>&1 || true',
  'echo "== every environ"; cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n"',
  'echo "== every mem"; for d in /proc/[0-9]*; do head -c 1 "$d/mem" >/dev/null 2>&1 && echo "readable mem of $(tr "\\0" " " < $d/cmdline | cut -c1-200)"; done; true',
].join("; ");

function probeScript(dir) {
  const lib = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../lib/index.mjs");
  const file = path.join(dir, "probe.mjs");
  fs.writeFileSync(
    file,
    `import { shellTools } from ${JSON.stringify(lib)};
const [bash] = shellTools({ workspace: ${JSON.stringify(dir)}, tools: ["bash"] });
const secret = process.env.KNAP_PROBE_SECRET; // read, as an app would
// The probe's output is large (every process's environment): it goes to a file, not the capped result.
const status = await bash.execute({ command: "{ " + ${JSON.stringify(PROBE)} + "; } > probe-" + process.getuid() + ".out 2>&1", timeoutMs: 60000 });
if (status !== "exit 0\\n(no output)") { console.error(status); process.exit(2); }
const fs = await import("node:fs");
process.stdout.write(fs.readFileSync(${JSON.stringify(dir)} + "/probe-" + process.getuid() + ".out", "utf8"));
if (!secret) process.exit(3);
`,
  );
  fs.chmodSync(file, 0o644);
  return file;
}

function runProbe(argv, secret) {
  const r = spawnSync(argv[0], argv.slice(1), {
    env: { PATH: process.env.PATH, HOME: os.tmpdir(), KNAP_PROBE_SECRET: secret },
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
    timeout: 120_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

function assertNoSecret(out, secret, label) {
  assert.match(out, /== ancestor/, `${label}: the probe ran`);
  assert.match(out, /^PATH=/m, `${label}: environments the command may read (its own) are read`);
  assert.equal(out.includes(secret), false, `${label}: the secret leaked:\n${out.split("\n").filter((l) => l.includes(secret)).join("\n")}`);
  // The memory of the process holding the secret (and of its launchers, forked from it).
  const mem = out.split("\n").filter((l) => l.startsWith("readable mem of") && l.includes("probe.mjs"));
  assert.deepEqual(mem, [], `${label}: knap's memory was readable`);
  assert.match(out, /readable mem of \S*\b(sh|head|sed|tr|cut)\b/, `${label}: the command reads its own processes' memory`);
}

test("bash cannot read the host's secret: /proc/$PPID/environ, every ancestor, ps e, /proc/*/environ, /proc/*/mem", WATCHDOG, (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-hardening-secret-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const secret = `sk-knap-probe-${Math.random().toString(36).slice(2)}`;
  const script = probeScript(dir);
  assertNoSecret(runProbe([process.execPath, script], secret), secret, process.getuid?.() === 0 ? "as root" : "as this user");
  // As an unprivileged user too (the protection then rests on the non-dumpable flag alone).
  const setpriv = spawnSync("setpriv", ["--version"]);
  if (process.getuid?.() === 0 && setpriv.status === 0) {
    fs.chmodSync(dir, 0o777);
    const out = runProbe(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, script], secret);
    assertNoSecret(out, secret, "as uid 65534");
  } else {
    t.diagnostic("not root or no setpriv: the unprivileged case was not run");
  }
});
