// The `caveman-agent serve [dir] [--port N] [--host H] [--locked]` command (the reference's bin):
// every refusal with its code and exit status before anything starts, serving an agent
// directory (agent.mjs's default export) on 127.0.0.1, journals on disk or on a journal server
// (CAVE_JOURNAL_URL + CAVE_JOURNAL_TOKEN), the instance lease across two commands, the SIGTERM
// drain. The command runs as a child process, as a user runs it.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { startJournalServer } from "./fixtures/remote-stores.mjs";
import { waitFor } from "./serve-helpers.mjs";

const BIN = fileURLToPath(new URL("../bin/caveman-agent.mjs", import.meta.url));
const LIB = pathToFileURL(fileURLToPath(new URL("../lib/", import.meta.url))).href;
const TOKEN = "cli-serve-token-0123456789";
const WATCHDOG = { timeout: 120_000 };

const cleanups = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** A temp agent directory whose agent.mjs serves a scripted agent (`text` is its answer). */
function agentDir({ text = "served from the directory", module } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-agent-cli-"));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const source =
    module ??
    `import { agent } from "${LIB}index.mjs";
import { fauxModel, scriptedStream } from "${LIB}testing.mjs";
export default agent({ id: "cli-agent", instructions: "Answer.", model: "anthropic/claude-haiku-4-5", sandbox: "host", tools: [] });
export const runOptions = () => ({ model: fauxModel(), streamFn: scriptedStream([{ text: ${JSON.stringify(text)} }]) });
`;
  fs.writeFileSync(path.join(dir, "agent.mjs"), source);
  return dir;
}

/** Runs the command; resolves {code, stdout, stderr} when it exits. */
function runCli(args, { env = {}, cwd } = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, env: { PATH: process.env.PATH, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Starts the command as a server; resolves once it prints where it listens. */
async function startCli(args, { env = {}, cwd } = {}) {
  const child = spawn(process.execPath, [BIN, ...args], { cwd, env: { PATH: process.env.PATH, HOST: "127.0.0.1", PORT: "0", CAVE_SERVE_TOKEN: TOKEN, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal, stderr })));
  cleanups.push(() => child.kill("SIGKILL"));
  const port = await Promise.race([
    waitFor(() => /on http:\/\/127\.0\.0\.1:(\d+) /.exec(stderr)?.[1], "the listening line", 30_000),
    exited.then((e) => assert.fail(`the command exited: ${JSON.stringify(e)}`)),
  ]);
  return { child, exited, base: `http://127.0.0.1:${port}`, stderr: () => stderr };
}

const auth = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };

test("refusals: each with its code on stderr and its exit status, before anything starts", WATCHDOG, async () => {
  const dir = agentDir();
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), "knap-agent-cli-empty-"));
  cleanups.push(() => fs.rmSync(empty, { recursive: true, force: true }));
  const env = { CAVE_SERVE_TOKEN: TOKEN };
  const cases = [
    ["no command", [], {}, 2, null],
    ["another command", ["deploy"], env, 2, "cave_agent_cli_command_unsupported"],
    ["no token", ["serve", dir], {}, 1, "cave_serve_token_required"],
    ["a short token", ["serve", dir], { CAVE_SERVE_TOKEN: "fifteen-chars15" }, 1, "cave_serve_token_required"],
    ["--locked", ["serve", dir, "--locked"], env, 1, "cave_serve_build_unsupported"],
    ["a journal URL without its token", ["serve", dir], { ...env, CAVE_JOURNAL_URL: "http://127.0.0.1:9" }, 1, "cave_durable_http_token_required"],
    ["an insecure journal URL", ["serve", dir], { ...env, CAVE_JOURNAL_URL: "http://journal.example.com", CAVE_JOURNAL_TOKEN: "t" }, 1, "cave_durable_http_insecure"],
    ["a journal token without its URL", ["serve", dir], { ...env, CAVE_JOURNAL_TOKEN: "t" }, 1, "cave_serve_journal_url_required"],
    ["a bad --port", ["serve", dir, "--port", "99999"], env, 1, "cave_serve_port_invalid"],
    ["a bad PORT", ["serve", dir], { ...env, PORT: "http" }, 1, "cave_serve_port_invalid"],
    ["--port without a value", ["serve", dir, "--port"], env, 2, "cave_agent_cli_usage"],
    ["an unknown option", ["serve", dir, "--watch"], env, 2, "cave_agent_cli_usage"],
    ["two directories", ["serve", dir, dir], env, 2, "cave_agent_cli_usage"],
    ["a missing directory", ["serve", path.join(dir, "nope")], env, 1, "cave_serve_agent_module_missing"],
    ["a directory without agent.mjs", ["serve", empty], env, 1, "cave_serve_agent_module_missing"],
    ["a default export that is not an agent", ["serve", agentDir({ module: "export default { id: 'x' };" })], env, 1, "cave_serve_agent_module_invalid"],
  ];
  for (const [what, args, extra, status, code] of cases) {
    const r = await runCli(args, { env: extra });
    assert.equal(r.code, status, `${what}: ${r.stderr}`);
    if (code) assert.match(r.stderr, new RegExp(`^${code}`), what);
    else assert.match(r.stdout, /^Usage: caveman-agent serve \[dir\] \[--port N\] \[--host H\] \[--locked\]/, what);
  }
  // Nothing started: no journal directory was made in the agent directory.
  assert.equal(fs.existsSync(path.join(dir, ".caveman")), false);
  const help = await runCli(["serve", "--help"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /CAVE_SERVE_TOKEN/);
});

test("serves the directory's agent: runs with the bearer token, journals under dir/.caveman, SIGTERM drains and exits 0", WATCHDOG, async () => {
  const dir = agentDir({ text: "hello from the directory" });
  // No dir argument: the current directory.
  const cli = await startCli(["serve"], { cwd: dir });
  assert.match(cli.stderr(), /^caveman-agent serve: cli-agent on http:\/\/127\.0\.0\.1:\d+ \(journals in /);
  assert.equal((await fetch(`${cli.base}/runs`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"runId":"job-1","input":"hi"}' })).status, 401);
  const submitted = await fetch(`${cli.base}/runs`, { method: "POST", headers: auth, body: '{"runId":"job-1","input":"hi"}' });
  assert.equal(submitted.status, 202);
  const done = await waitFor(async () => {
    const s = await (await fetch(`${cli.base}/runs/job-1`, { headers: auth })).json();
    return s.status === "completed" && s;
  }, "the run");
  assert.equal(done.result.text, "hello from the directory");
  const runDirs = fs.readdirSync(path.join(dir, ".caveman", "runs", "durable"));
  assert.ok(runDirs.some((d) => d.startsWith("job-1-")), runDirs.join(","));
  cli.child.kill("SIGTERM");
  const end = await cli.exited;
  assert.equal(end.code, 0, end.stderr);
  assert.match(end.stderr, /caveman-agent serve: SIGTERM, draining in-flight runs\n$/);
});

test("CAVE_JOURNAL_URL + CAVE_JOURNAL_TOKEN keep the journals and the instance lease on the journal server; a second command over it refuses", WATCHDOG, async () => {
  const journal = await startJournalServer();
  cleanups.push(() => journal.close());
  const env = { CAVE_JOURNAL_URL: journal.url, CAVE_JOURNAL_TOKEN: journal.token };
  const dir = agentDir({ text: "journaled remotely" });
  const cli = await startCli(["serve", dir, "--host", "127.0.0.1", "--port", "0"], { env });
  assert.match(cli.stderr(), new RegExp(`journals at ${journal.url.replace(/[.]/g, "\\.")}`));
  assert.ok(journal.locks.has("caveman.instance.lock"));
  const second = await runCli(["serve", agentDir()], { env: { ...env, CAVE_SERVE_TOKEN: TOKEN, HOST: "127.0.0.1", PORT: "0" } });
  assert.equal(second.code, 1);
  assert.match(second.stderr, /^cave_serve_instance_already_active: another instance holds this store's instance lease/);
  assert.equal((await fetch(`${cli.base}/runs`, { method: "POST", headers: auth, body: '{"runId":"remote-1","input":"hi"}' })).status, 202);
  await waitFor(async () => (await (await fetch(`${cli.base}/runs/remote-1`, { headers: auth })).json()).status === "completed", "the run");
  const lines = journal.journals.get("remote-1").trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual([lines[0].type, lines.at(-1).type], ["run_started", "run_completed"]);
  assert.equal(lines.at(-1).result.text, "journaled remotely");
  assert.equal(fs.existsSync(path.join(dir, ".caveman", "runs", "durable")), false, "nothing journaled on disk");
  cli.child.kill("SIGTERM");
  assert.equal((await cli.exited).code, 0);
  // The drained server gave its instance lease back.
  assert.equal(journal.liveLeases("caveman.instance.lock").length, 0);
});
