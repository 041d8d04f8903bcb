// The caveman-code command: flags and help byte for byte, exit codes, the credential error, the
// script guard through a symlink, and a real terminal session driven with tmux (banner, prompt,
// a turn with streamed text and a tool call, Ctrl-C mid-turn killing the bash process group,
// Ctrl-C at an empty prompt, Ctrl-D, /exit with the final bill and status 0).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { createHash } from "node:crypto";

import { CODING_AGENT_HELP, parseCodingAgentCLIArgs, main } from "../lib/code/cli.mjs";
import { startFakeProvider } from "./fake-provider.mjs";
import { tempWorkspace, liveGroupMembers } from "./helpers.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BIN = path.join(root, "bin", "caveman-code.mjs");
const COMPANION_BIN = path.join(root, "packages", "coding-agent", "bin.mjs");

const HELP = `Usage: caveman-code [options]

Options:
  --workspace <path>    workspace root (default: current directory)
  --model <id>          provider/model override
  --observe-only        disable Cave runtime transforms
  --max-cost-usd <usd>  best-effort per-turn public-catalog spend cap
  --no-start-runtime    probe runtime without trying to start it
  -h, --help            show help
`;

/** The CLI's environment: no provider credential unless given. */
function cliEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/_API_KEY$|^CAVE_|^ANTHROPIC_|^KNAP_PROVIDER/.test(k)) env[k] = v;
  }
  return { ...env, ...extra };
}

const cli = (args, options = {}) => spawnSync(process.execPath, [options.bin ?? BIN, ...args], { encoding: "utf8", env: cliEnv(options.env), input: options.input ?? "", cwd: options.cwd });

test("--help prints the reference's text byte for byte (also through the companion package)", () => {
  assert.equal(`${CODING_AGENT_HELP}\n`, HELP);
  for (const bin of [BIN, COMPANION_BIN]) {
    for (const flag of ["--help", "-h"]) {
      const r = cli([flag], { bin });
      assert.equal(r.status, 0);
      assert.equal(r.stdout, HELP);
      assert.equal(r.stderr, "");
    }
  }
});

test("bad arguments exit 1 with the reference's message on stderr", () => {
  const cases = [
    [["--bogus"], "caveman-code: unknown option --bogus"],
    [["--workspace=."], "caveman-code: unknown option --workspace=."],
    [["positional"], "caveman-code: unknown option positional"],
    [["--model"], "caveman-code: missing value for --model"],
    [["--workspace", "--model", "a/b"], "caveman-code: missing value for --workspace"],
    [["--workspace", ""], "caveman-code: missing value for --workspace"],
    [["--max-cost-usd", "0"], "caveman-code: --max-cost-usd must be positive"],
    [["--max-cost-usd", "-5"], "caveman-code: --max-cost-usd must be positive"],
    [["--max-cost-usd", "abc"], "caveman-code: --max-cost-usd must be positive"],
    [["--help", "--bogus"], "caveman-code: unknown option --bogus"],
  ];
  for (const [args, message] of cases) {
    const r = cli(args);
    assert.equal(r.status, 1, args.join(" "));
    assert.equal(r.stdout, "");
    assert.equal(r.stderr, `${message}\n`);
  }
});

test("the path to the first prompt does not load the run engine or the provider transport (loaded at the first turn)", (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-code-loads-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const log = path.join(dir, "loaded.txt");
  // A module hook (its own thread) notes every module loaded; the child builds an agent and a
  // session as the CLI does before its prompt.
  fs.writeFileSync(path.join(dir, "hooks.mjs"), `import fs from "node:fs";\nexport async function load(url, context, next) {\n  fs.appendFileSync(${JSON.stringify(log)}, url + "\\n");\n  return next(url, context);\n}\n`);
  fs.writeFileSync(path.join(dir, "register.mjs"), `import { register } from "node:module";\nregister(${JSON.stringify(`file://${path.join(dir, "hooks.mjs")}`)});\n`);
  const script = `
    const [{ createCodingAgent }, { runCodingSession }, { startCodingSession }] = await Promise.all([
      import(${JSON.stringify(path.join(root, "lib/code/agent.mjs"))}),
      import(${JSON.stringify(path.join(root, "lib/code/repl.mjs"))}),
      import(${JSON.stringify(path.join(root, "lib/code/session.mjs"))}),
    ]);
    const agent = createCodingAgent({ workspace: ${JSON.stringify(dir)}, model: "anthropic/claude-haiku-4-5" });
    await startCodingSession(agent, { cave: "off" });
    await agent.close();
    console.log(typeof runCodingSession);`;
  const r = spawnSync(process.execPath, ["--import", path.join(dir, "register.mjs"), "--input-type=module", "-e", script], { encoding: "utf8", env: cliEnv() });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), "function");
  const loaded = fs.readFileSync(log, "utf8").split("\n").filter((u) => u.startsWith("file://")).map((u) => path.relative(root, fileURLToPath(u)));
  assert.ok(loaded.includes(path.join("lib", "code", "session.mjs")), loaded.join(" "));
  for (const heavy of ["run.mjs", "transport.mjs", "models.mjs", "durable.mjs", "memory.mjs", "sandbox.mjs", "receipt.mjs", "pi-ai.mjs"]) {
    assert.ok(!loaded.includes(path.join("lib", heavy)), `lib/${heavy} loaded before the first prompt: ${loaded.join(" ")}`);
  }
  assert.ok(!loaded.some((u) => u.includes("@mariozechner")), loaded.join(" "));
});

test("parseCodingAgentCLIArgs: flags, last value wins, frozen", () => {
  const o = parseCodingAgentCLIArgs(["--workspace", "a", "--workspace", "b", "--model", "x/y", "--observe-only", "--max-cost-usd", "0.5", "--no-start-runtime"]);
  assert.deepEqual(o, { help: false, workspace: "b", model: "x/y", cave: "off", maxCostUsd: 0.5, ensureRuntime: false });
  assert.ok(Object.isFrozen(o));
  assert.deepEqual(parseCodingAgentCLIArgs([]), { help: false });
});

test("no credential: the reference's message, then how to run offline; exit 1 before any banner", () => {
  const ws = tempWorkspace();
  try {
    const r = cli(["--workspace", ws.root]);
    assert.equal(r.status, 1);
    assert.equal(r.stdout, "");
    const lines = r.stderr.split("\n");
    assert.equal(lines[0], "caveman-code: no supported provider credential found; set ANTHROPIC_API_KEY, OPENAI_API_KEY, or GEMINI_API_KEY");
    assert.match(lines[1], /^caveman-code: to run offline, .*KNAP_PROVIDER_BASE_URL=http:\/\/127\.0\.0\.1:8080 ANTHROPIC_API_KEY=local caveman-code$/);
    assert.equal(lines.length, 3);
    const many = cli(["--workspace", ws.root], { env: { ANTHROPIC_API_KEY: "a", OPENAI_API_KEY: "b" } });
    assert.equal(many.stderr, "caveman-code: multiple provider credentials found; set CAVE_MODEL to pick one\n");
    assert.equal(many.status, 1);
    const badModel = cli(["--workspace", ws.root, "--model", "plain"]);
    assert.equal(badModel.stderr, "caveman-code: model must use provider/model format\n");
    // An error whose message already has its hint line prints it once.
    const file = ws.write("file.txt", "x");
    const notDir = cli(["--workspace", file, "--observe-only"], { env: { ANTHROPIC_API_KEY: "a" } });
    assert.equal(notDir.status, 1);
    const after = notDir.stderr.slice(notDir.stderr.indexOf("cave_workspace_not_directory"));
    assert.equal(after, `cave_workspace_not_directory: shellTools workspace ${JSON.stringify(file)} is not a directory\nhint: pass the directory the tools may work in (e.g. process.cwd())\n`);
  } finally {
    ws.cleanup();
  }
});

test("piped: the banner on stderr, the session on stdout, end of input ends it with status 0", () => {
  const ws = tempWorkspace();
  try {
    const r = cli(["--workspace", ws.root, "--observe-only"], { env: { ANTHROPIC_API_KEY: "x" }, input: "/mode\n" });
    assert.equal(r.status, 0);
    assert.equal(
      r.stderr,
      "cave: OBSERVE-ONLY — the Caveman engine/gateway is not available here.\n" +
        "  Context transforms and gateway telemetry are OFF. Provider usage and local context estimates remain available.\n" +
        "  Turn optimized mode on: npm i -g @caveman-ai/cli && caveman start\n",
    );
    assert.ok(r.stdout.startsWith(`caveman-code · anthropic/claude-sonnet-4-6 · workspace ${ws.root}\nmode: observe-only\n`));
    assert.ok(r.stdout.endsWith("\nagent [observe-only] > mode: observe-only\n\nagent [observe-only] > \nsession · 0 turns · observe-only\n  no provider calls this session — nothing measured, nothing claimed\n"));
  } finally {
    ws.cleanup();
  }
});

test("the script guard works through a symlink (npm's .bin), for the bin and the module", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-bin-"));
  try {
    // bins are run as npm runs them (the shebang); the module with node
    for (const [name, target, viaNode] of [
      ["caveman-code", BIN, false],
      ["companion", COMPANION_BIN, false],
      ["cli-module.mjs", path.join(root, "lib", "code", "cli.mjs"), true],
    ]) {
      const link = path.join(dir, name);
      fs.symlinkSync(target, link);
      const r = viaNode ? spawnSync(process.execPath, [link, "--help"], { encoding: "utf8", env: cliEnv() }) : spawnSync(link, ["--help"], { encoding: "utf8", env: cliEnv() });
      assert.equal(r.status, 0, name);
      assert.equal(r.stdout, HELP, name);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("main() with an injected runtime: the agent and session options the CLI passes", async () => {
  const calls = [];
  const closed = [];
  const runtime = {
    createCodingAgent: (options) => {
      calls.push(["agent", options]);
      return { modelID: "a/b", close: async () => closed.push(true) };
    },
    runCodingSession: async (options) => {
      calls.push(["session", Object.keys(options).sort(), options.cave, options.maxCostUsd, options.ensureRuntime]);
      return { turns: 0 };
    },
  };
  const io = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin };
  assert.deepEqual(await main(["--workspace", "w", "--model", "m/n", "--observe-only", "--max-cost-usd", "2", "--no-start-runtime"], io, runtime), { turns: 0 });
  assert.deepEqual(calls, [
    ["agent", { workspace: "w", model: "m/n" }],
    ["session", ["agent", "cave", "ensureRuntime", "input", "maxCostUsd", "notice", "output"], "off", 2, false],
  ]);
  assert.deepEqual(closed, [true], "the CLI closes the agent it built");
});

// ---------- a real terminal ----------

/** False (the test skipped) without tmux; in CI a missing tmux fails. */
function haveTmux(t) {
  if (spawnSync("tmux", ["-V"], { encoding: "utf8" }).status === 0) return true;
  if (process.env.CI) assert.fail("tmux is required in CI (.ci/run installs it)");
  t.skip("tmux is not installed");
  return false;
}

/** A private tmux server running the CLI in a 160x50 pane. */
async function terminal(t, { args, env, cwd }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-tmux-"));
  const socket = path.join(dir, "tmux.sock");
  const status = path.join(dir, "status");
  const tmux = (...a) => execFileSync("tmux", ["-S", socket, ...a], { encoding: "utf8" });
  const envArgs = Object.entries(env).map(([k, v]) => `${k}=${shellQuote(v)}`).join(" ");
  const command = `cd ${shellQuote(cwd)} && env -i PATH=${shellQuote(process.env.PATH)} HOME=${shellQuote(os.homedir())} TERM=xterm-256color LANG=C.UTF-8 ${envArgs} ${shellQuote(process.execPath)} ${shellQuote(BIN)} ${args.map(shellQuote).join(" ")}; echo $? > ${shellQuote(status)}; sleep 600`;
  tmux("new-session", "-d", "-s", "knap", "-x", "160", "-y", "50", command);
  t.after(() => {
    try {
      tmux("kill-server");
    } catch {
      // already gone
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const screen = () => tmux("capture-pane", "-p", "-J", "-t", "knap").replace(/[ \t]+$/gm, "").replace(/\n+$/, "");
  /** Waits (up to a minute) until the screen matches `pattern`; returns the screen. */
  const waitFor = async (pattern, what = String(pattern)) => {
    for (let i = 0; i < 600; i++) {
      const s = screen();
      if (pattern.test(s)) return s;
      await sleep(100);
    }
    assert.fail(`the terminal never showed ${what}:\n${screen()}`);
  };
  const exitStatus = async () => {
    for (let i = 0; i < 600; i++) {
      if (fs.existsSync(status) && fs.readFileSync(status, "utf8").trim() !== "") return Number(fs.readFileSync(status, "utf8").trim());
      await sleep(100);
    }
    assert.fail("the CLI never exited");
  };
  return { keys: (...k) => tmux("send-keys", "-t", "knap", ...k), screen, waitFor, exitStatus };
}

function shellQuote(s) {
  return `'${String(s).replace(/'/g, "'\\''")}'`;
}

const PROMPT_AT_END = /agent \[observe-only\] >$/;

test("in a terminal: banner, prompt, a streamed turn with a tool line, Ctrl-C mid-turn, /exit", { timeout: 180_000 }, async (t) => {
  if (!haveTmux(t)) return;
  const ws = tempWorkspace();
  t.after(() => ws.cleanup());
  ws.write("notes.txt", "one\ntwo\nthree\n");
  const pidFile = path.join(ws.outside, "sleep.pid");
  const fake = await startFakeProvider([
    { text: "Let me count the lines.", toolCalls: [{ name: "bash", args: { command: "wc -l notes.txt" } }] },
    { text: "notes.txt has three lines: one, two and three.", chunks: 8 },
    { text: "Waiting on it.", toolCalls: [{ name: "bash", args: { command: `echo $$ > ${pidFile}; exec sleep 300` } }] },
  ]);
  t.after(() => fake.close());
  const term = await terminal(t, { args: ["--workspace", ws.root], env: { ANTHROPIC_API_KEY: "sk-ant-dummy", KNAP_PROVIDER_BASE_URL: fake.url }, cwd: ws.root });

  let s = await term.waitFor(PROMPT_AT_END, "the first prompt");
  const lines = s.split("\n");
  // the TTY-only "unavailable" line and the banner come first, on stderr, before the header
  assert.match(lines[0], /^cave: observe-only — engine\/gateway unavailable; transforms and gateway telemetry off;/);
  const banner = lines.indexOf("cave: OBSERVE-ONLY — the Caveman engine/gateway is not available here.");
  const header = lines.indexOf(`caveman-code · anthropic/claude-sonnet-4-6 · workspace ${ws.root}`);
  assert.ok(banner > 0 && header > banner, s);
  assert.equal(lines[header + 1], "mode: observe-only");
  assert.equal(lines[header + 2], "/tokens          session token bill so far");

  term.keys("how many lines are in notes.txt?", "Enter");
  s = await term.waitFor(/spend: .*\n\nagent \[observe-only\] >$/, "the first turn's bill and a new prompt");
  const turn = s.slice(s.indexOf("> how many lines are in notes.txt?"));
  assert.match(turn, /\n\nLet me count the lines\.\n  ✓ bash wc -l notes\.txt · \d+ (ms|\.\d s) · 19 B\nnotes\.txt has three lines: one, two and three\.\n\nturn 1 · observe-only · anthropic\/claude-sonnet-4-6 · [\d,]+ ms\n/);
  assert.equal(turn.match(/notes\.txt has three lines/g).length, 1, "the streamed text is not printed twice");

  term.keys("now wait", "Enter");
  s = await term.waitFor(/… bash echo .* · [\d.]+ (ms|s)$/, "the live progress line of the running bash call");
  for (let i = 0; i < 100 && !fs.existsSync(pidFile); i++) await sleep(100);
  const pid = Number(fs.readFileSync(pidFile, "utf8"));
  assert.ok(pid > 0);
  assert.deepEqual(liveGroupMembers(pid), [pid], "sleep runs in its own process group");
  term.keys("C-c");
  s = await term.waitFor(/turn aborted \(Ctrl-C\); the session continues\n\nagent \[observe-only\] >$/, "the aborted turn and a new prompt");
  assert.match(s, /  ✗ bash echo .* · [\d.]+ (ms|s) · \d+ B\n/);
  for (let i = 0; i < 100 && liveGroupMembers(pid).length > 0; i++) await sleep(100);
  assert.deepEqual(liveGroupMembers(pid), [], "no process of the aborted bash call survives");

  term.keys("/mode", "Enter");
  await term.waitFor(/> \/mode\nmode: observe-only\n\nagent \[observe-only\] >$/, "/mode");
  term.keys("/exit", "Enter");
  s = await term.waitFor(/session · 1 turn · observe-only\n(.*\n){5}  spend: .*$/, "the final bill");
  assert.match(s, /> \/exit\n\nsession · 1 turn · observe-only\n  context transforms: none applied\n/);
  assert.equal(await term.exitStatus(), 0);
});

test("in a terminal: Ctrl-C at an empty prompt and Ctrl-D end the session with the final bill", { timeout: 120_000 }, async (t) => {
  if (!haveTmux(t)) return;
  const ws = tempWorkspace();
  t.after(() => ws.cleanup());
  for (const key of ["C-c", "C-d"]) {
    const term = await terminal(t, { args: ["--workspace", ws.root, "--observe-only"], env: { ANTHROPIC_API_KEY: "sk-ant-dummy" }, cwd: ws.root });
    await term.waitFor(PROMPT_AT_END, "the first prompt");
    term.keys("half a line");
    await term.waitFor(/> half a line$/, "the typed text");
    if (key === "C-c") {
      term.keys("C-c");
      await term.waitFor(PROMPT_AT_END, "the cleared line");
    } else {
      term.keys("C-u");
    }
    term.keys(key);
    const s = await term.waitFor(/session · 0 turns · observe-only\n  no provider calls this session — nothing measured, nothing claimed$/, `the final bill after ${key}`);
    assert.doesNotMatch(s, /half a line/);
    assert.equal(await term.exitStatus(), 0, key);
  }
});

test("in a terminal: --help and a bad flag; every slash command, an unknown /word as a turn, a failed turn, /quit", { timeout: 180_000 }, async (t) => {
  if (!haveTmux(t)) return;
  const ws = tempWorkspace();
  t.after(() => ws.cleanup());
  ws.write("notes.txt", "one\ntwo\nthree\n");

  // --help on a terminal: the reference's text and nothing else, status 0; a bad flag: status 1.
  let term = await terminal(t, { args: ["--help"], env: {}, cwd: ws.root });
  assert.equal(await term.exitStatus(), 0);
  assert.equal(`${term.screen()}\n`, HELP);
  term = await terminal(t, { args: ["--max-cost-usd", "0"], env: { ANTHROPIC_API_KEY: "sk-ant-dummy" }, cwd: ws.root });
  assert.equal(await term.exitStatus(), 1);
  assert.equal(term.screen(), "caveman-code: --max-cost-usd must be positive");

  // A stand-in engine for /prove-recovery: compress keeps 4 bytes and stores the input, retrieve
  // answers the stored bytes, so the proof must print the digest of exactly what it was given.
  const store = path.join(ws.outside, "engine-store");
  const engine = path.join(ws.outside, "engine");
  fs.writeFileSync(
    engine,
    `#!/bin/sh\nif [ "$1" = compress ]; then cat > '${store}'; printf '{"handle":"h1","compressed":"%s"}' "$(head -c 4 '${store}')"; else cat '${store}'; fi\n`,
    { mode: 0o755 },
  );
  const fake = await startFakeProvider([
    { text: "Counting.", toolCalls: [{ name: "bash", args: { command: "cat notes.txt notes.txt" } }] },
    { text: "Six lines in all." },
    { text: "That is not a command I know, so it was a prompt." },
  ]);
  t.after(() => fake.close());
  term = await terminal(t, {
    args: ["--workspace", ws.root, "--observe-only"],
    env: { ANTHROPIC_API_KEY: "sk-ant-dummy", KNAP_PROVIDER_BASE_URL: fake.url, CAVEMAN_ENGINE_BIN: engine },
    cwd: ws.root,
  });
  let s = await term.waitFor(PROMPT_AT_END, "the first prompt");
  // --observe-only: no probe, so no TTY "unavailable" line; the banner is the first thing shown
  assert.ok(s.startsWith("cave: OBSERVE-ONLY — the Caveman engine/gateway is not available here.\n"), s);

  // the reference's help, typed out here rather than taken from the implementation
  const help = [
    "/tokens          session token bill so far",
    "/prove-recovery  compress one recorded tool output and recover it byte-exactly",
    "/mode            show whether this session is optimized or observe-only",
    "/help            this list",
    "/exit            end the session and print the final bill",
  ].join("\n");
  term.keys("/help", "Enter");
  await term.waitFor(new RegExp(`> /help\\n${escape(help)}\\n\\nagent \\[observe-only\\] >$`), "/help");
  term.keys("/tokens", "Enter");
  await term.waitFor(/> \/tokens\nsession · 0 turns · observe-only\n  no provider calls this session — nothing measured, nothing claimed\n\nagent \[observe-only\] >$/, "/tokens before any turn");
  term.keys("/prove-recovery", "Enter");
  await term.waitFor(/> \/prove-recovery\nrecovery proof unavailable: caveman-code: no tool output recorded yet to prove recovery on\n\nagent \[observe-only\] >$/, "/prove-recovery before any tool output");

  term.keys("count the lines twice", "Enter");
  await term.waitFor(/spend: .*\n\nagent \[observe-only\] >$/, "the first turn");
  term.keys("/prove-recovery", "Enter");
  s = await term.waitFor(/> \/prove-recovery\nrecovery proof: .*\n\nagent \[observe-only\] >$/, "the recovery proof");
  const stored = fs.readFileSync(store);
  assert.match(stored.toString("utf8"), /one\ntwo\nthree\none\ntwo\nthree/, "the engine was given the bash output");
  const digest = createHash("sha256").update(stored).digest("hex").slice(0, 12);
  assert.match(s, new RegExp(`\\nrecovery proof: \\S.* round-trip OK \\(sha256 match ${digest}\\)\\n\\nagent \\[observe-only\\] >$`));

  term.keys("/bogus", "Enter");
  s = await term.waitFor(/turn 2 · .*\n(.*\n){4}  spend: .*\n\nagent \[observe-only\] >$/, "/bogus answered as a turn");
  assert.match(s, /> \/bogus\n\nThat is not a command I know, so it was a prompt\.\n\nturn 2 · observe-only · anthropic\/claude-sonnet-4-6 · [\d,]+ ms\n/);
  term.keys("one more", "Enter");
  s = await term.waitFor(/> one more\n(\n)?error: .*\n\nagent \[observe-only\] >$/, "the failed turn's error line");
  assert.match(s, /\nerror: cave_agent_run_failed: .*fake provider: script exhausted/);

  term.keys("/mode", "Enter");
  await term.waitFor(/> \/mode\nmode: observe-only\n\nagent \[observe-only\] >$/, "/mode");
  term.keys("/tokens", "Enter");
  s = await term.waitFor(/> \/tokens\nsession · 2 turns · observe-only\n(.*\n){5}  spend: .*\n\nagent \[observe-only\] >$/, "/tokens after two turns");
  assert.match(
    s,
    /> \/tokens\nsession · 2 turns · observe-only\n  context transforms: none applied\n  transformed context: 0 tokens before → 0 after\n  tokens saved: 0 — local estimate, token counts only; no provider savings claim\n  provider usage \(provider_reported\): in [\d,]+ · out [\d,]+ · cache read 0 · cache write 0\n  cache input-token hit ratio: 0\.00% · target 98\.00% missed — provider-reported; cold seeds included\n  spend: \d+\.\d{6} USD measured at public catalog list prices \(public_catalog\)\n/,
  );
  term.keys("/quit", "Enter");
  s = await term.waitFor(/> \/quit\n\nsession · 2 turns · observe-only\n(.*\n){5}  spend: .*$/, "the final bill after /quit");
  assert.equal(await term.exitStatus(), 0);
  assert.equal(fake.remaining, 0);
});

function escape(text) {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

test("--max-cost-usd is the reference's best-effort ledger: the call that crosses it is made, the next fails the turn with error: …", { timeout: 120_000 }, async (t) => {
  const ws = tempWorkspace();
  t.after(() => ws.cleanup());
  ws.write("notes.txt", "one\n");
  // One Sonnet call of 100 input tokens costs $0.0003, past the $0.0001 cap: it is made (the
  // ledger reserves nothing), its tool runs, and the next call is refused. The second turn
  // fails the same way at once (the cap is per turn, and the first call of a turn is made).
  const fake = await startFakeProvider([
    { text: "Reading.", toolCalls: [{ name: "read_file", args: { path: "notes.txt" } }] },
    { text: "Again.", toolCalls: [{ name: "read_file", args: { path: "notes.txt" } }] },
  ]);
  t.after(() => fake.close());
  const env = { ANTHROPIC_API_KEY: "sk-ant-dummy", KNAP_PROVIDER_BASE_URL: fake.url };
  const r = await new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, "--workspace", ws.root, "--observe-only", "--max-cost-usd", "0.0001"], { env: cliEnv(env) });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    child.on("close", (status) => resolve({ status, stdout, stderr }));
    child.stdin.end("hello\nagain\n");
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(fake.requests.length, 2);
  // Piped, each turn's output follows its prompt on the same line.
  const errors = r.stdout.match(/error: [^\n]*/g) ?? [];
  assert.equal(errors.length, 2, r.stdout);
  for (const line of errors) assert.match(line, /^error: cave_agent_run_failed: cave_run_cost_budget_exceeded: spent \$0\.\d+ of maxCostUsd \$0\.0001 before the next model call/);
  assert.doesNotMatch(r.stdout + r.stderr, /turn stopped/);
  // The session goes on after a failed turn and ends with its bill.
  assert.match(r.stdout, /agent \[observe-only\] > $/m);
});
