// bashkit's system-context helpers in knap/ai-sdk (issue 12): discoverInstructions,
// collectEnvironment, formatEnvironment, buildToolGuidance, buildSystemContext and
// createPrepareStep, each checked against bashkit 0.7.1 itself on the same workspace, sandbox
// object or messages; a user's own sandbox object (not createLocalSandbox) for discovery; the
// caps; and a real generateText loop whose prepareStep compacts, reports the context status and
// flags plan mode.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import * as bashkit from "bashkit";
import * as knap from "knap/ai-sdk";
import { createLocalSandbox, createAgentTools } from "knap/ai-sdk";
import { tempWorkspace, usage } from "./ai-sdk-helpers.mjs";

const git = (dir, ...args) => execFileSync("git", args, { cwd: dir, stdio: "pipe" });

/** A git workspace: instructions at three levels, a branch, two uncommitted files. */
function gitWorkspace() {
  const ws = tempWorkspace({
    "AGENTS.md": "# Root rules\nUse tabs.\n",
    "CLAUDE.md": "never read: AGENTS.md wins here\n",
    "pkg/CLAUDE.md": "pkg: claude only\n",
    "pkg/app/AGENTS.md": "app: agents\n",
    "pkg/app/CLAUDE.md": "app: claude (not read)\n",
    "pkg/app/deep/README.md": "no instructions here\n",
    "docs/RULES.md": "custom filename\n",
  });
  git(ws.dir, "init", "-q", "-b", "feature/ctx");
  return ws;
}

const today = () => new Date().toISOString().split("T")[0];

/** Runs `fn` and checks its result against bashkit's on the same arguments. */
async function same(name, ...args) {
  const mine = await knap[name](...args);
  const theirs = await bashkit[name](...args);
  assert.deepStrictEqual(mine, theirs, `${name}(${JSON.stringify(args.slice(1))})`);
  return mine;
}

// ------------------------------------------------------------------------ discoverInstructions

test("discoverInstructions: the same text and sources as bashkit's on a git workspace (knap's sandbox)", async () => {
  const ws = gitWorkspace();
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    const root = sandbox.workingDirectory;
    // From the working directory (which is the root: "local", as bashkit says).
    const atRoot = await same("discoverInstructions", sandbox);
    assert.equal(atRoot.text, "# Root rules\nUse tabs.\n");
    assert.deepEqual(atRoot.sources, [{ path: `${root}/AGENTS.md`, scope: "local", bytes: 23, truncated: false }]);
    // From a nested directory: root (project) → pkg (CLAUDE.md) → app (AGENTS.md wins), outermost first.
    const nested = await same("discoverInstructions", sandbox, { cwd: `${root}/pkg/app/deep` });
    assert.equal(nested.text, "# Root rules\nUse tabs.\n\n\n--- project-doc ---\n\npkg: claude only\n\n\n--- project-doc ---\n\napp: agents\n");
    assert.deepEqual(
      nested.sources.map((s) => [s.path.slice(root.length), s.scope]),
      [["/AGENTS.md", "project"], ["/pkg/CLAUDE.md", "local"], ["/pkg/app/AGENTS.md", "local"]],
    );
    for (const config of [
      { cwd: `${root}/pkg/app`, filenames: ["CLAUDE.md", "AGENTS.md"] },
      { cwd: `${root}/pkg/app`, rootMarkers: ["pkg"] }, // a marker that is a directory: the walk stops at the root
      { cwd: `${root}/pkg/app`, rootMarkers: ["AGENTS.md"] }, // stops at app itself
      { cwd: `${root}/pkg/app`, globalPath: `${root}/docs/RULES.md` },
      { cwd: `${root}/pkg/app`, globalPath: `${root}/docs/missing.md` },
      { cwd: `${root}/docs`, filenames: ["RULES.md"] },
      { cwd: `${root}/pkg/app`, maxBytes: 30 },
      { cwd: `${root}/pkg/app`, maxBytes: 0 },
      { cwd: `${root}/pkg`, filenames: ["NOPE.md"] },
    ]) {
      await same("discoverInstructions", sandbox, config);
    }
    assert.equal(await knap.discoverInstructions(sandbox, { filenames: ["NOPE.md"] }), null);
    const global = await knap.discoverInstructions(sandbox, { cwd: `${root}/pkg`, globalPath: `${root}/docs/RULES.md` });
    assert.deepEqual(global.sources.map((s) => s.scope), ["global", "project", "local"]);
  } finally {
    ws.cleanup();
  }
});

test("discoverInstructions: the 32,768 cap, maxBytes, and the truncated flag on the last source", async () => {
  const big = "a".repeat(20_000);
  const ws = tempWorkspace({ ".git/HEAD": "ref: refs/heads/main\n", "AGENTS.md": big, "sub/AGENTS.md": "b".repeat(20_000) });
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    const got = await same("discoverInstructions", sandbox, { cwd: `${sandbox.workingDirectory}/sub` });
    assert.equal(got.text.length, 32_768);
    assert.deepEqual(got.sources.map((s) => [s.bytes, s.truncated]), [[20_000, false], [20_000, true]]);
    assert.ok(got.text.startsWith(`${big}\n\n--- project-doc ---\n\nbbb`));
    // Exactly at the cap: nothing is cut.
    const exact = await same("discoverInstructions", sandbox, { cwd: `${sandbox.workingDirectory}/sub`, maxBytes: 40_023 });
    assert.equal(exact.text.length, 40_023);
    assert.equal(exact.sources[1].truncated, false);
    const one = await same("discoverInstructions", sandbox, { cwd: `${sandbox.workingDirectory}/sub`, maxBytes: 40_022 });
    assert.equal(one.sources[1].truncated, true);
  } finally {
    ws.cleanup();
  }
});

test("discoverInstructions: the cap counts as String.length does (bashkit's measure), never splitting a surrogate pair", async () => {
  const content = "é".repeat(10) + "😀" + "z";
  const ws = tempWorkspace({ ".git/config": "", "AGENTS.md": content });
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    const whole = await same("discoverInstructions", sandbox, { maxBytes: 13 });
    assert.equal(whole.text, content);
    assert.equal(whole.sources[0].bytes, 13);
    await same("discoverInstructions", sandbox, { maxBytes: 12 });
    await same("discoverInstructions", sandbox, { maxBytes: 10 });
    // Cutting inside the emoji: bashkit keeps a lone high surrogate; knap leaves the pair out.
    const mine = await knap.discoverInstructions(sandbox, { maxBytes: 11 });
    const theirs = await bashkit.discoverInstructions(sandbox, { maxBytes: 11 });
    assert.equal(theirs.text.length, 11);
    assert.equal(mine.text, theirs.text.slice(0, 10));
    assert.equal(mine.text, "é".repeat(10));
    assert.equal(mine.sources[0].truncated, true);
  } finally {
    ws.cleanup();
  }
});

/** A user's own Sandbox: files in a Map, every call recorded. No knap code behind it. */
function memorySandbox(files, { cwd = "/proj/pkg", dirs = [], failRead = [], failExists } = {}) {
  const calls = [];
  const has = (p) => files.has(p) || dirs.includes(p);
  return {
    calls,
    workingDirectory: cwd,
    async exec() {
      throw new Error("not used");
    },
    async readFile(p) {
      calls.push(["readFile", p]);
      if (failRead.includes(p)) throw new Error(`EACCES: ${p}`);
      if (!files.has(p)) throw new Error(`ENOENT: ${p}`);
      return files.get(p);
    },
    async writeFile() {},
    async readDir() {
      return [];
    },
    async fileExists(p) {
      calls.push(["fileExists", p]);
      if (failExists?.(p)) throw new Error("disk on fire");
      return has(p);
    },
    async isDirectory(p) {
      return dirs.includes(p);
    },
    async destroy() {},
  };
}

test("discoverInstructions: a user's sandbox object is read through its own methods, as bashkit reads it", async () => {
  const files = new Map([
    ["/AGENTS.md", "filesystem root"],
    ["/proj/CLAUDE.md", "project claude"],
    ["/proj/pkg/AGENTS.md", "pkg agents"],
    ["/proj/pkg/CLAUDE.md", "pkg claude"],
  ]);
  // No .git anywhere: the walk goes to the top ("/AGENTS.md").
  const mine = memorySandbox(files);
  const theirs = memorySandbox(files);
  const got = await knap.discoverInstructions(mine);
  assert.deepStrictEqual(got, await bashkit.discoverInstructions(theirs));
  assert.equal(got.text, "filesystem root\n\n--- project-doc ---\n\nproject claude\n\n--- project-doc ---\n\npkg agents");
  assert.deepEqual(got.sources.map((s) => s.path), ["/AGENTS.md", "/proj/CLAUDE.md", "/proj/pkg/AGENTS.md"]);
  assert.ok(mine.calls.some(([m, p]) => m === "fileExists" && p === "/proj/pkg/.git"), "the walk asked the user's object");
  assert.deepEqual(mine.calls.filter(([m]) => m === "readFile").map(([, p]) => p), ["/AGENTS.md", "/proj/CLAUDE.md", "/proj/pkg/AGENTS.md"]);

  // A marker stops the walk; an unreadable AGENTS.md gives way to CLAUDE.md.
  const opts = { dirs: ["/proj/.git"], failRead: ["/proj/pkg/AGENTS.md"] };
  const marked = await knap.discoverInstructions(memorySandbox(files, opts));
  assert.deepStrictEqual(marked, await bashkit.discoverInstructions(memorySandbox(files, opts)));
  assert.deepEqual(marked.sources.map((s) => [s.path, s.scope]), [["/proj/CLAUDE.md", "project"], ["/proj/pkg/CLAUDE.md", "local"]]);

  // The `cwd` option wins over workingDirectory; a trailing slash is walked past (bashkit stops at it).
  const trailing = await knap.discoverInstructions(memorySandbox(files, { cwd: "/proj/pkg/" }));
  assert.deepStrictEqual(trailing, got);
  await same("discoverInstructions", memorySandbox(files), { cwd: "/proj" });

  // A marker check that fails fails the call, with the sandbox's own message.
  const broken = { failExists: (p) => p.endsWith(".git") };
  await assert.rejects(bashkit.discoverInstructions(memorySandbox(files, broken)), /disk on fire/);
  await assert.rejects(knap.discoverInstructions(memorySandbox(files, broken)), (e) => e.message === "disk on fire" && e.code === "cave_sandbox_failed");
});

test("discoverInstructions: knap's sandbox stops the walk at its workspace boundary (bashkit's would read above it)", async () => {
  const ws = tempWorkspace({ "inner/AGENTS.md": "inner" });
  try {
    const sandbox = createLocalSandbox({ workingDirectory: `${ws.dir}/inner` });
    const got = await knap.discoverInstructions(sandbox);
    assert.deepEqual(got.sources.map((s) => s.path), [`${sandbox.workingDirectory}/AGENTS.md`]);
    assert.equal(got.text, "inner");
  } finally {
    ws.cleanup();
  }
});

test("discoverInstructions / collectEnvironment: unknown keys, bad values and bad sandboxes are refused", async () => {
  const sandbox = memorySandbox(new Map());
  await assert.rejects(knap.discoverInstructions(sandbox, { maxByte: 10 }), (e) => e.code === "cave_config_unknown_key" && /"maxByte"/.test(e.message) && /did you mean "maxBytes"/.test(e.message));
  for (const bad of [{ maxBytes: -1 }, { maxBytes: 1.5 }, { filenames: "AGENTS.md" }, { cwd: 7 }, { rootMarkers: [1] }]) {
    await assert.rejects(knap.discoverInstructions(sandbox, bad), (e) => e.code === "cave_context_config_invalid" && e.message.startsWith("cave_context_config_invalid: discoverInstructions"), JSON.stringify(bad));
  }
  await assert.rejects(knap.discoverInstructions({ readFile() {} }), (e) => e.code === "cave_sandbox_invalid" && /fileExists, readFile/.test(e.message));
  await assert.rejects(knap.collectEnvironment({}), (e) => e.code === "cave_sandbox_invalid" && /exec/.test(e.message));
  await assert.rejects(knap.collectEnvironment(sandbox, { branch: true }), (e) => e.code === "cave_config_unknown_key");
  await assert.rejects(knap.collectEnvironment(sandbox, { git: "yes" }), (e) => e.code === "cave_context_config_invalid");
  await assert.rejects(knap.collectEnvironment(sandbox, { custom: { a: 1 } }), (e) => e.code === "cave_context_config_invalid" && /custom\.a/.test(e.message));
});

// --------------------------------------------------------------------------- collectEnvironment

test("collectEnvironment: shell, platform, date, timezone, branch and changed files, as bashkit collects them (knap's sandbox)", async () => {
  const ws = gitWorkspace();
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    const before = today();
    const mine = await knap.collectEnvironment(sandbox);
    const theirs = await bashkit.collectEnvironment(sandbox);
    assert.ok([before, today()].includes(mine.date));
    assert.deepStrictEqual({ ...mine, date: theirs.date }, theirs);
    assert.equal(mine.cwd, sandbox.workingDirectory);
    assert.equal(mine.platform, process.platform);
    assert.equal(mine.gitBranch, "feature/ctx");
    assert.equal(mine.gitStatus, String(execFileSync("sh", ["-c", "git status --porcelain | wc -l"], { cwd: ws.dir })).trim());
    assert.notEqual(mine.gitStatus, "0");
    const off = await knap.collectEnvironment(sandbox, { git: false, timezone: false });
    assert.deepStrictEqual(Object.keys(off), ["cwd", "shell", "platform", "date", "timezone", "gitBranch", "gitStatus"]);
    assert.equal(off.gitBranch, undefined);
    assert.equal(off.timezone, undefined);
  } finally {
    ws.cleanup();
  }
});

/** A user sandbox that answers commands from a script and records `(command, options)`. */
function scriptedExec(answers, { cwd = "/srv/app" } = {}) {
  const calls = [];
  return {
    calls,
    workingDirectory: cwd,
    async exec(command, options) {
      calls.push([command, options]);
      const a = answers[command];
      if (a instanceof Error) throw a;
      if (a === "hang") return new Promise(() => {});
      return { stdout: a ?? "", stderr: "", exitCode: a === undefined ? 1 : 0, durationMs: 1, interrupted: false };
    },
  };
}

const ANSWERS = {
  "echo $SHELL": "/usr/bin/fish\n",
  "git branch --show-current 2>/dev/null": "  main  \n",
  "git status --porcelain 2>/dev/null | wc -l": "      12\n",
  "date +%Z 2>/dev/null": "CET\n",
};

test("collectEnvironment: the same commands, each with a 5 s timeout, and the same answer as bashkit (user sandbox)", async () => {
  for (const [answers, config] of [
    [ANSWERS, undefined],
    [ANSWERS, { git: false }],
    [ANSWERS, { timezone: false, custom: { ignored: "here" } }],
    [{ ...ANSWERS, "echo $SHELL": new Error("no shell"), "date +%Z 2>/dev/null": "\n" }, undefined],
    [{}, undefined], // every command fails with exit 1 and no output
  ]) {
    const mine = scriptedExec(answers);
    const theirs = scriptedExec(answers);
    const a = await knap.collectEnvironment(mine, config);
    const b = await bashkit.collectEnvironment(theirs, config);
    assert.deepStrictEqual({ ...a, date: b.date }, b, JSON.stringify(config));
    const sorted = (calls) => calls.map(([c, o]) => `${c} ${JSON.stringify(o)}`).sort();
    assert.deepEqual(sorted(mine.calls), sorted(theirs.calls));
    assert.ok(mine.calls.every(([, o]) => o.timeout === 5000));
  }
  const env = await knap.collectEnvironment(scriptedExec(ANSWERS));
  assert.deepStrictEqual({ ...env, date: "d" }, { cwd: "/srv/app", shell: "/usr/bin/fish", platform: process.platform, date: "d", timezone: "CET", gitBranch: "main", gitStatus: "12" });
  const failed = await knap.collectEnvironment(scriptedExec({ "echo $SHELL": new Error("x") }, { cwd: null }));
  assert.equal(failed.shell, "unknown");
  assert.equal(failed.cwd, "/tmp");
});

test("collectEnvironment: a sandbox that ignores the timeout is given up on (bashkit's would wait forever)", async () => {
  const sandbox = scriptedExec({ ...ANSWERS, "echo $SHELL": "hang", "git branch --show-current 2>/dev/null": "hang" });
  const env = await knap.collectEnvironment(sandbox);
  assert.equal(env.shell, "unknown");
  assert.equal(env.gitBranch, undefined);
  assert.equal(env.gitStatus, "12");
  assert.equal(env.timezone, "CET");
});

// ---------------------------------------------------------------------------- formatEnvironment

test("formatEnvironment: the same <environment_context> block as bashkit's", async () => {
  const full = { cwd: "/w", shell: "/bin/zsh", platform: "linux", date: "2026-01-02", timezone: "UTC", gitBranch: "main", gitStatus: "3" };
  const bare = { cwd: "/w", shell: "unknown", platform: "darwin", date: "2026-01-02", timezone: undefined, gitBranch: undefined, gitStatus: undefined };
  for (const [env, custom] of [[full], [bare], [full, { team: "core", "10": "numeric keys first, as Object.entries orders them", z: "" }], [{ ...full, gitStatus: "" }]]) {
    assert.equal(knap.formatEnvironment(env, custom), bashkit.formatEnvironment(env, custom));
  }
  assert.equal(
    knap.formatEnvironment(full, { team: "core" }),
    "<environment_context>\n  <cwd>/w</cwd>\n  <shell>/bin/zsh</shell>\n  <platform>linux</platform>\n  <date>2026-01-02</date>\n  <timezone>UTC</timezone>\n  <git_branch>main</git_branch>\n  <git_changed_files>3</git_changed_files>\n  <team>core</team>\n</environment_context>",
  );
  // From collectEnvironment, as a user would chain them.
  const sandbox = scriptedExec(ANSWERS);
  const env = await knap.collectEnvironment(sandbox);
  assert.equal(knap.formatEnvironment(env), bashkit.formatEnvironment(env));
  assert.throws(() => knap.formatEnvironment({ ...full, user: "bob" }), (e) => e.code === "cave_config_unknown_key" && /"user"/.test(e.message));
  assert.throws(() => knap.formatEnvironment({ cwd: "/w" }), (e) => e.code === "cave_context_config_invalid" && /env\.shell/.test(e.message));
  assert.throws(() => knap.formatEnvironment(full, { n: 1 }), (e) => e.code === "cave_context_config_invalid");
});

// ---------------------------------------------------------------------------- buildToolGuidance

test("buildToolGuidance: the same text as bashkit's for the tools given, hints and guidelines", () => {
  const all = ["Bash", "Read", "Write", "Edit", "Patch", "Glob", "Grep", "WebSearch", "WebFetch", "Task", "TodoWrite"];
  for (const config of [
    { tools: all },
    { tools: ["Grep", "Read", "Unknown", "Bash"] },
    { tools: [] },
    { tools: ["Read", "Mine", "Glob"], hints: { Mine: "My own tool.", Read: "Read it." }, guidelines: ["Be brief.", "Cite paths."] },
    { tools: ["Read", "Glob"], hints: { Glob: "" } }, // an empty hint drops the line
    { tools: ["Read"], guidelines: [] },
  ]) {
    assert.equal(knap.buildToolGuidance(config), bashkit.buildToolGuidance(config), JSON.stringify(config));
  }
  assert.equal(
    knap.buildToolGuidance({ tools: ["Edit", "Task"], guidelines: ["Test first."] }),
    "## Available Tools\n- **Edit**: Replace exact strings in files. Prefer over Write for modifications.\n- **Task**: Spawn sub-agents for complex parallel work.\n\n## Guidelines\n- Test first.",
  );
  assert.throws(() => knap.buildToolGuidance({ tools: ["Read"], hint: {} }), (e) => e.code === "cave_config_unknown_key" && /did you mean "hints"/.test(e.message));
  assert.throws(() => knap.buildToolGuidance({}), (e) => e.code === "cave_context_config_invalid" && /tools must be an array of strings/.test(e.message));
  assert.throws(() => knap.buildToolGuidance(), (e) => e.code === "cave_context_config_invalid");
  assert.throws(() => knap.buildToolGuidance({ tools: ["Read"], hints: { Read: 1 } }), (e) => e.code === "cave_context_config_invalid");
});

// --------------------------------------------------------------------------- buildSystemContext

test("buildSystemContext: sections, combined and meta equal to bashkit's (knap's sandbox and a user sandbox)", async () => {
  const ws = gitWorkspace();
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    const root = sandbox.workingDirectory;
    const { tools } = await createAgentTools(sandbox, { patch: true });
    const guidance = { tools: Object.keys(tools), guidelines: ["Run the tests before you finish."] };
    for (const config of [
      undefined,
      {},
      { instructions: true },
      { instructions: { cwd: `${root}/pkg/app`, maxBytes: 60 } },
      { toolGuidance: guidance },
      { instructions: false, environment: false, toolGuidance: guidance },
    ]) {
      await same("buildSystemContext", sandbox, config);
    }
    // With the environment, the date is today's on both sides (checked, then aligned).
    const config = { instructions: { cwd: `${root}/pkg` }, environment: { custom: { ci: "false" } }, toolGuidance: guidance };
    const mine = await knap.buildSystemContext(sandbox, config);
    const theirs = await bashkit.buildSystemContext(sandbox, config);
    const day = theirs.meta.environmentContext.date;
    assert.deepStrictEqual(JSON.parse(JSON.stringify(mine).replaceAll(mine.meta.environmentContext.date, day)), JSON.parse(JSON.stringify(theirs)));
    assert.deepStrictEqual(Object.keys(mine), ["instructions", "environment", "toolGuidance", "combined", "meta"]);
    assert.equal(mine.combined, [mine.instructions, mine.environment, mine.toolGuidance].join("\n\n"));
    assert.match(mine.instructions, /^# Project Instructions\n<INSTRUCTIONS>\n# Root rules\nUse tabs.\n\n\n--- project-doc ---\n\npkg: claude only\n\n<\/INSTRUCTIONS>$/);
    assert.match(mine.environment, /<git_branch>feature\/ctx<\/git_branch>\n.*\n  <ci>false<\/ci>\n<\/environment_context>$/);
    assert.equal(mine.meta.environmentContext.gitBranch, "feature/ctx");
    assert.equal(mine.meta.instructionSources.length, 2);

    const empty = await knap.buildSystemContext(sandbox, {});
    assert.deepStrictEqual(empty, { instructions: null, environment: null, toolGuidance: null, combined: "", meta: { instructionSources: undefined, environmentContext: undefined } });
  } finally {
    ws.cleanup();
  }
  // A user sandbox: instructions through its fileExists/readFile, the environment through its exec.
  const files = new Map([["/srv/app/AGENTS.md", "app rules"]]);
  const user = () => ({ ...memorySandbox(files, { cwd: "/srv/app", dirs: ["/srv/app/.git"] }), exec: scriptedExec(ANSWERS).exec });
  const config = { instructions: true, environment: { git: true }, toolGuidance: { tools: ["Read"] } };
  const mine = await knap.buildSystemContext(user(), config);
  const theirs = await bashkit.buildSystemContext(user(), config);
  assert.deepStrictEqual({ ...mine, environment: null, combined: "", meta: { ...mine.meta, environmentContext: null } }, { ...theirs, environment: null, combined: "", meta: { ...theirs.meta, environmentContext: null } });
  assert.equal(mine.combined.replaceAll(mine.meta.environmentContext.date, "D"), theirs.combined.replaceAll(theirs.meta.environmentContext.date, "D"));
  assert.match(mine.environment, /<shell>\/usr\/bin\/fish<\/shell>/);
  // Tool guidance alone needs no sandbox methods at all.
  assert.equal((await knap.buildSystemContext({}, { toolGuidance: { tools: ["Read"] } })).combined, knap.buildToolGuidance({ tools: ["Read"] }));
});

test("buildSystemContext: unknown keys and bad sections are refused", async () => {
  const sandbox = memorySandbox(new Map());
  await assert.rejects(knap.buildSystemContext(sandbox, { instruction: true }), (e) => e.code === "cave_config_unknown_key" && /did you mean "instructions"/.test(e.message));
  await assert.rejects(knap.buildSystemContext(sandbox, { instructions: { maxbytes: 1 } }), (e) => e.code === "cave_config_unknown_key" && /buildSystemContext instructions/.test(e.message));
  await assert.rejects(knap.buildSystemContext(sandbox, { environment: "yes" }), (e) => e.code === "cave_context_config_invalid");
  await assert.rejects(knap.buildSystemContext(sandbox, { instructions: null }), (e) => e.code === "cave_context_config_invalid");
  await assert.rejects(knap.buildSystemContext(sandbox, { toolGuidance: { tools: "Read" } }), (e) => e.code === "cave_context_config_invalid");
  await assert.rejects(knap.buildSystemContext({ fileExists() {}, readFile() {} }, { environment: true }), (e) => e.code === "cave_sandbox_invalid" && /needs a Sandbox with exec/.test(e.message));
  await assert.rejects(knap.buildSystemContext({ exec() {} }, { instructions: true, environment: true }), (e) => e.code === "cave_sandbox_invalid" && /fileExists, readFile, exec/.test(e.message));
});

// ---------------------------------------------------------------------------- createPrepareStep

const long = (role, chars, label) => ({ role, content: `${label}:${"x".repeat(chars)}` });

test("createPrepareStep: the same step settings as bashkit's (context status, plan mode, extend)", async () => {
  const messages = [long("user", 4000, "u1"), long("assistant", 4000, "a1"), long("user", 400, "u2")];
  const planOn = { isActive: true };
  const planOff = { isActive: false };
  const extendAdds = async (args) => ({ activeTools: ["Read"], toolChoice: "auto", seen: args.messages.length });
  const extendReplaces = async (args) => ({ messages: args.messages.slice(-1) });
  const configs = [
    {},
    { contextStatus: { maxTokens: 100_000 } }, // comfortable: nothing added
    { contextStatus: { maxTokens: 2900 } }, // high
    { contextStatus: { maxTokens: 2200 } }, // critical
    { contextStatus: { maxTokens: 2900, config: { highGuidance: "Mind the budget." } } },
    { contextStatus: { maxTokens: 2200, config: { criticalGuidance: (s) => `At ${s.usedTokens} tokens.` } } },
    { planModeState: planOn },
    { planModeState: planOff },
    { contextStatus: { maxTokens: 2200 }, planModeState: planOn },
    { contextStatus: { maxTokens: 2200 }, planModeState: planOn, extend: extendAdds },
    { planModeState: planOff, extend: extendAdds },
    { planModeState: planOn, extend: extendReplaces },
  ];
  for (const config of configs) {
    const args = { messages, stepNumber: 1, steps: [], model: { modelId: "m" } };
    const mine = await knap.createPrepareStep(config)(args);
    const theirs = await bashkit.createPrepareStep(config)(args);
    assert.deepStrictEqual(mine, theirs, JSON.stringify(Object.keys(config)));
    assert.equal("system" in mine, false);
    assert.equal(messages.length, 3, "the caller's messages are not modified");
  }
  const critical = await knap.createPrepareStep({ contextStatus: { maxTokens: 2200 }, planModeState: planOn })({ messages });
  assert.deepEqual(critical.messages.slice(3), [
    { role: "user", content: `<context_status>Context usage: ${Math.round((knap.estimateMessagesTokens(messages) / 2200) * 100)}%. Consider wrapping up the current task or summarizing progress before continuing.</context_status>` },
    { role: "user", content: "<plan_mode>PLAN MODE ACTIVE — use read-only tools (Read, Grep, Glob) to gather information. Call ExitPlanMode when your plan is ready.</plan_mode>" },
  ]);
});

test("createPrepareStep: unknown keys and bad values are refused by name", () => {
  const cases = [
    [{ contextstatus: {} }, "cave_config_unknown_key", /did you mean "contextStatus"/],
    [{ contextStatus: { maxTokens: 10, threshold: 1 } }, "cave_config_unknown_key", /createPrepareStep contextStatus/],
    [{ contextStatus: { maxTokens: 10, config: { critical: 0.9 } } }, "cave_config_unknown_key", /criticalThreshold/],
    [{ compaction: { maxTokens: 10, summarizerModel: {}, keepRecent: 2 } }, "cave_config_unknown_key", /createPrepareStep compaction/],
    [{ contextStatus: {} }, "cave_context_config_invalid", /maxTokens must be a positive number/],
    [{ contextStatus: { maxTokens: 0 } }, "cave_context_config_invalid", /maxTokens/],
    [{ compaction: { maxTokens: 1000 } }, "cave_context_config_invalid", /summarizerModel/],
    [{ extend: "no" }, "cave_context_config_invalid", /extend must be a function/],
    [{ planModeState: true }, "cave_context_config_invalid", /planModeState/],
    ["nope", "cave_context_config_invalid", /options object/],
  ];
  for (const [config, code, re] of cases) {
    assert.throws(() => knap.createPrepareStep(config), (e) => e.code === code && re.test(e.message), JSON.stringify(config));
  }
});

/** The model of the loop: plays `turns` and records every prompt it is sent. */
function recordingModel(turns) {
  const prompts = [];
  let i = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      const step = turns[Math.min(i++, turns.length - 1)];
      if (typeof step === "string") return { content: [{ type: "text", text: step }], finishReason: { unified: "stop", raw: undefined }, usage: usage(), warnings: [] };
      return { content: step, finishReason: { unified: "tool-calls", raw: undefined }, usage: usage(), warnings: [] };
    },
  });
  return { model, prompts };
}

function summarizerModel() {
  const prompts = [];
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      return { content: [{ type: "text", text: `SUMMARY ${prompts.length}` }], finishReason: { unified: "stop", raw: undefined }, usage: usage(1, 1), warnings: [] };
    },
  });
  return { model, prompts };
}

const toolCall = (id, toolName, input) => ({ type: "tool-call", toolCallId: id, toolName, input: JSON.stringify(input) });

/** One generateText loop over knap's tools (plan mode on) with `createPrepareStep` of `lib`. */
async function loop(lib, dir) {
  const sandbox = createLocalSandbox({ workingDirectory: dir });
  const { tools, planModeState } = await createAgentTools(sandbox, { planMode: true });
  const main = recordingModel([
    [toolCall("c1", "EnterPlanMode", { reason: "look before changing anything" })],
    [toolCall("c2", "Read", { file_path: "one.txt" })],
    [toolCall("c3", "Read", { file_path: "two.txt" })],
    [toolCall("c4", "Grep", { pattern: "needle" })],
    "Plan: change two.txt.",
  ]);
  const summarizer = summarizerModel();
  const prepareStep = lib.createPrepareStep({
    compaction: { maxTokens: 3000, summarizerModel: summarizer.model, protectRecentMessages: 2, taskContext: "Plan a change" },
    contextStatus: { maxTokens: 4000 },
    planModeState,
  });
  const returned = [];
  const result = await generateText({
    model: main.model,
    tools,
    system: "You are a careful coding agent.",
    prompt: "Plan the change to two.txt",
    stopWhen: stepCountIs(8),
    prepareStep: async (args) => {
      const r = await prepareStep(args);
      returned.push(r);
      return r;
    },
  });
  return { result, prompts: main.prompts, summaries: summarizer.prompts, returned, planModeState };
}

test("createPrepareStep in a real generateText loop: compaction, context status and plan mode, as bashkit's prepareStep does them", async () => {
  const ws = tempWorkspace({ "one.txt": "line of one\n".repeat(250), "two.txt": "needle in two\n".repeat(250) });
  try {
    const mine = await loop(knap, ws.dir);
    const theirs = await loop(bashkit, ws.dir);
    assert.equal(mine.result.text, "Plan: change two.txt.");
    assert.equal(mine.prompts.length, 5);
    // Every prompt the model was sent, and every summarizer prompt, equal to bashkit's run.
    assert.deepStrictEqual(mine.prompts, theirs.prompts);
    assert.deepStrictEqual(mine.summaries, theirs.summaries);
    assert.deepStrictEqual(mine.returned, theirs.returned);

    const texts = (prompt) => prompt.map((m) => (typeof m.content === "string" ? m.content : m.content.map((p) => p.text ?? "").join("")));
    // The system prompt is never touched.
    for (const p of mine.prompts) assert.deepEqual(p[0], { role: "system", content: "You are a careful coding agent." });
    for (const r of mine.returned) assert.equal("system" in r, false);
    // Step 1: nothing to add. After EnterPlanMode, every step ends with the plan-mode message.
    assert.equal(mine.returned[0].messages, undefined);
    assert.equal(mine.planModeState.isActive, true);
    for (const p of mine.prompts.slice(1)) assert.match(texts(p).at(-1), /^<plan_mode>PLAN MODE ACTIVE/);
    // Once the reads pile up (steps 3-5), the history is summarized before each call, the summary
    // carried over; the context status is reported while usage stays high, before the plan-mode line.
    assert.equal(mine.summaries.length, 3);
    assert.match(JSON.stringify(mine.summaries[1]), /SUMMARY 1/);
    const [, second, third, fourth, fifth] = mine.prompts.map(texts);
    assert.deepEqual(second.slice(1), ["Plan the change to two.txt", "", "", second.at(-1)]);
    for (const [n, p] of [third, fourth, fifth].entries()) {
      assert.match(p[1], new RegExp(`^\\[Previous conversation summary\\]\\n\\nSUMMARY ${n + 1}\\n`));
      assert.equal(p[2], "I understand the context from the previous conversation. Continuing from where we left off.");
    }
    for (const p of [third, fourth]) assert.match(p.at(-2), /^<context_status>Context usage: \d+%\. Consider wrapping up/);
    assert.equal(fifth.filter((t) => t.startsWith("<context_status>")).length, 0, "below the high threshold after the last compaction");
  } finally {
    ws.cleanup();
  }
});

test("every value bashkit 0.7.1 exports is exported by knap/ai-sdk", () => {
  const missing = Object.keys(bashkit).filter((name) => !(name in knap));
  assert.deepEqual(missing, []);
  for (const name of ["discoverInstructions", "collectEnvironment", "formatEnvironment", "buildToolGuidance", "buildSystemContext", "createPrepareStep"]) {
    assert.equal(typeof knap[name], "function", name);
  }
});
