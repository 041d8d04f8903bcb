// bashkit's system-context helpers in knap/ai-sdk (discoverInstructions, collectEnvironment,
// formatEnvironment, buildToolGuidance, buildSystemContext, createPrepareStep), each checked
// against bashkit 0.7.1 itself on the same sandbox and the same messages.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { MockLanguageModelV3 } from "ai/test";
import * as bashkit from "bashkit";
import * as knapAi from "knap/ai-sdk";

/** A sandbox over an in-memory file map; `exec` answers from `commands` and records each call. */
function memorySandbox(files, { cwd = "/repo/pkg/sub", commands = {}, unreadable = [] } = {}) {
  const execs = [];
  return {
    workingDirectory: cwd,
    execs,
    fileExists: async (p) => p in files,
    readFile: async (p) => {
      if (unreadable.includes(p)) throw new Error(`EACCES: ${p}`);
      if (!(p in files)) throw new Error(`ENOENT: ${p}`);
      return files[p];
    },
    exec: async (command, options) => {
      execs.push([command, options]);
      const answer = commands[command];
      if (answer instanceof Error) throw answer;
      return { stdout: answer ?? "", stderr: "", exitCode: 0, durationMs: 1, interrupted: false };
    },
  };
}

const TREE = {
  "/repo/.git": "",
  "/repo/AGENTS.md": "# Repo rules\nUse tabs.",
  "/repo/pkg/CLAUDE.md": "pkg: run npm test",
  "/repo/pkg/sub/AGENTS.md": "sub: agents wins over claude",
  "/repo/pkg/sub/CLAUDE.md": "never read",
  "/home/me/.agents.md": "global: be terse",
};

test("discoverInstructions: the same files, order, scopes, separator and cut as bashkit's", async () => {
  const cases = [
    [TREE, {}],
    [TREE, { maxBytes: 40 }],
    [TREE, { globalPath: "/home/me/.agents.md" }],
    [TREE, { globalPath: "/nowhere.md" }],
    [TREE, { filenames: ["CLAUDE.md"] }],
    [TREE, { cwd: "/repo" }],
    [TREE, { rootMarkers: [".hg"] }],
    [{ ...TREE, "/repo/pkg/.git": "" }, {}],
    [{ "/x/y/AGENTS.md": "only here" }, { cwd: "/x/y" }],
    [{ "/AGENTS.md": "at the top" }, { cwd: "/a/b" }],
    [{}, {}],
  ];
  for (const [files, config] of cases) {
    const knap = await knapAi.discoverInstructions(memorySandbox(files), config);
    const ref = await bashkit.discoverInstructions(memorySandbox(files), config);
    assert.deepEqual(knap, ref, JSON.stringify(config));
  }
  const found = await knapAi.discoverInstructions(memorySandbox(TREE), { globalPath: "/home/me/.agents.md" });
  assert.equal(found.text, "global: be terse\n\n--- project-doc ---\n\n# Repo rules\nUse tabs.\n\n--- project-doc ---\n\npkg: run npm test\n\n--- project-doc ---\n\nsub: agents wins over claude");
  assert.deepEqual(found.sources.map((s) => [s.path, s.scope]), [
    ["/home/me/.agents.md", "global"],
    ["/repo/AGENTS.md", "project"],
    ["/repo/pkg/CLAUDE.md", "local"],
    ["/repo/pkg/sub/AGENTS.md", "local"],
  ]);
  const cut = await knapAi.discoverInstructions(memorySandbox(TREE), { maxBytes: 40 });
  assert.equal(cut.text.length, 40);
  assert.deepEqual(cut.sources.map((s) => s.truncated), [false, false, true]);
  assert.equal(await knapAi.discoverInstructions(memorySandbox({})), null);
  // An unreadable candidate is skipped for the next name, as bashkit does.
  const sb = () => memorySandbox(TREE, { unreadable: ["/repo/pkg/sub/AGENTS.md"] });
  const skipped = await knapAi.discoverInstructions(sb());
  assert.deepEqual(skipped, await bashkit.discoverInstructions(sb()));
  assert.equal(skipped.sources.at(-1).path, "/repo/pkg/sub/CLAUDE.md");
});

const PROBES = {
  "echo $SHELL": "/bin/zsh\n",
  "git branch --show-current 2>/dev/null": "main\n",
  "git status --porcelain 2>/dev/null | wc -l": "       3\n",
  "date +%Z 2>/dev/null": "CET\n",
};

test("collectEnvironment and formatEnvironment: the same probes through the sandbox and the same block", async () => {
  for (const [commands, config] of [
    [PROBES, undefined],
    [PROBES, { git: false }],
    [PROBES, { timezone: false }],
    [{ ...PROBES, "echo $SHELL": new Error("exec failed"), "date +%Z 2>/dev/null": "" }, {}],
  ]) {
    const k = memorySandbox({}, { commands });
    const b = memorySandbox({}, { commands });
    const knap = await knapAi.collectEnvironment(k, config);
    const ref = await bashkit.collectEnvironment(b, config);
    assert.deepEqual(knap, ref, JSON.stringify(config));
    assert.deepEqual(k.execs.sort(), b.execs.sort(), "the same commands with the same 5 s timeout");
    const custom = { node: "20", "team-name": "core" };
    assert.equal(knapAi.formatEnvironment(knap, custom), bashkit.formatEnvironment(ref, custom));
    assert.equal(knapAi.formatEnvironment(knap), bashkit.formatEnvironment(ref));
  }
  const env = await knapAi.collectEnvironment(memorySandbox({}, { commands: PROBES }));
  assert.deepEqual({ ...env, date: "d" }, { cwd: "/repo/pkg/sub", shell: "/bin/zsh", platform: process.platform, date: "d", timezone: "CET", gitBranch: "main", gitStatus: "3" });
  assert.match(env.date, /^\d{4}-\d{2}-\d{2}$/);
  const failed = await knapAi.collectEnvironment(memorySandbox({}, { commands: { "echo $SHELL": new Error("x") } }), { git: false, timezone: false });
  assert.equal(failed.shell, "unknown");
  assert.equal(
    knapAi.formatEnvironment({ ...env, date: "2026-01-02" }, { node: "20" }),
    "<environment_context>\n  <cwd>/repo/pkg/sub</cwd>\n  <shell>/bin/zsh</shell>\n  <platform>" + process.platform + "</platform>\n  <date>2026-01-02</date>\n  <timezone>CET</timezone>\n  <git_branch>main</git_branch>\n  <git_changed_files>3</git_changed_files>\n  <node>20</node>\n</environment_context>",
  );
});

test("buildToolGuidance and buildSystemContext: bashkit's sections, each only when asked for", async () => {
  for (const config of [
    { tools: ["Bash", "Read", "Unknown", "Patch", "TodoWrite"] },
    { tools: ["Grep"], hints: { Grep: "Use it.", Mine: "My tool." }, guidelines: ["Be careful", "Test first"] },
    { tools: ["Mine"], hints: { Mine: "My tool." } },
    { tools: [] },
  ]) {
    assert.equal(knapAi.buildToolGuidance(config), bashkit.buildToolGuidance(config));
  }
  assert.equal(knapAi.buildToolGuidance({ tools: ["Bash", "Unknown"], guidelines: ["g"] }), "## Available Tools\n- **Bash**: Execute shell commands. Prefer Read/Grep/Glob over bash for file exploration.\n\n## Guidelines\n- g");
  for (const config of [
    undefined,
    {},
    { instructions: true },
    { instructions: { globalPath: "/home/me/.agents.md", maxBytes: 60 } },
    { environment: true },
    { environment: { git: false, custom: { deploy: "staging" } } },
    { instructions: false, environment: false, toolGuidance: { tools: ["Read", "Edit"] } },
    { instructions: true, environment: true, toolGuidance: { tools: ["Bash"], guidelines: ["Keep diffs small"] } },
  ]) {
    const knap = await knapAi.buildSystemContext(memorySandbox(TREE, { commands: PROBES }), config);
    const ref = await bashkit.buildSystemContext(memorySandbox(TREE, { commands: PROBES }), config);
    assert.deepEqual(knap, ref, JSON.stringify(config));
  }
  const all = await knapAi.buildSystemContext(memorySandbox(TREE, { commands: PROBES }), { instructions: true, environment: true, toolGuidance: { tools: ["Read"] } });
  assert.ok(all.instructions.startsWith("# Project Instructions\n<INSTRUCTIONS>\n# Repo rules"));
  assert.ok(all.instructions.endsWith("sub: agents wins over claude\n</INSTRUCTIONS>"));
  assert.equal(all.combined, [all.instructions, all.environment, all.toolGuidance].join("\n\n"));
  const none = await knapAi.buildSystemContext(memorySandbox(TREE));
  assert.deepEqual(none, { instructions: null, environment: null, toolGuidance: null, combined: "", meta: { instructionSources: undefined, environmentContext: undefined } });
});

test("buildSystemContext over knap's own local sandbox reads a real tree as bashkit does", async (t) => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "knap-sysctx-")));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, ".git"));
  fs.mkdirSync(path.join(dir, "app", "web"), { recursive: true });
  fs.writeFileSync(path.join(dir, "AGENTS.md"), "root rules");
  fs.writeFileSync(path.join(dir, "app", "web", "CLAUDE.md"), "web rules");
  const sandbox = knapAi.createLocalSandbox({ workingDirectory: dir });
  const config = { instructions: { cwd: path.join(dir, "app", "web") }, environment: { git: false, timezone: false } };
  const knap = await knapAi.buildSystemContext(sandbox, config);
  const ref = await bashkit.buildSystemContext(sandbox, config);
  assert.deepEqual(knap, ref);
  assert.deepEqual(knap.meta.instructionSources.map((s) => [path.relative(dir, s.path), s.scope]), [["AGENTS.md", "project"], ["app/web/CLAUDE.md", "local"]]);
  assert.match(knap.environment, /<shell>.*<\/shell>/);
  // knap: a walk that would leave the sandbox's workspace ends at its boundary (bashkit's rejects
  // with the sandbox's refusal).
  const inner = knapAi.createLocalSandbox({ workingDirectory: path.join(dir, "app", "web") });
  const found = await knapAi.discoverInstructions(inner);
  assert.deepEqual(found, { text: "web rules", sources: [{ path: path.join(dir, "app", "web", "CLAUDE.md"), scope: "local", bytes: 9, truncated: false }] });
  await assert.rejects(bashkit.discoverInstructions(inner), { code: "cave_workspace_escape" });
});

/** An AI SDK mock summarizer that answers `reply` and records each prompt. */
function summarizer(reply) {
  const prompts = [];
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      return { content: [{ type: "text", text: reply }], finishReason: { unified: "stop", raw: undefined }, usage: { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } }, warnings: [] };
    },
  });
  return { model, prompts };
}

const history = () => [
  { role: "user", content: "Fix the parser " + "p".repeat(2_000) },
  { role: "assistant", content: [{ type: "text", text: "Looking " + "l".repeat(2_000) }] },
  { role: "user", content: "Now the tests " + "t".repeat(2_000) },
  { role: "assistant", content: "Done." },
  { role: "user", content: "thanks" },
];

test("createPrepareStep: compaction, context-status and plan-mode notes, extend — as bashkit's", async () => {
  const messages = history();
  const used = knapAi.getContextStatus(messages, 1).usedTokens;
  const plan = { isActive: true };
  const configs = [
    { contextStatus: { maxTokens: used * 10 } },
    { contextStatus: { maxTokens: Math.ceil(used / 0.75) } },
    { contextStatus: { maxTokens: used, config: { criticalGuidance: "Wrap up now." } } },
    { planModeState: plan },
    { planModeState: { isActive: false } },
    { contextStatus: { maxTokens: used }, planModeState: plan },
    { contextStatus: { maxTokens: used }, extend: async (args) => ({ toolChoice: "none", seen: args.messages.length }) },
    { contextStatus: { maxTokens: used }, extend: async () => ({ messages: [{ role: "user", content: "replaced" }] }) },
  ];
  for (const config of configs) {
    const knap = await knapAi.createPrepareStep(config)({ messages, stepNumber: 1, steps: [] });
    const ref = await bashkit.createPrepareStep(config)({ messages, stepNumber: 1, steps: [] });
    assert.deepEqual(knap, ref, JSON.stringify(config));
    assert.equal("system" in knap, false, "never touches the system prompt");
  }
  const noted = await knapAi.createPrepareStep({ contextStatus: { maxTokens: used }, planModeState: plan })({ messages });
  assert.deepEqual(noted.messages.slice(messages.length).map((m) => m.content), [
    `<context_status>Context usage: 100%. Consider wrapping up the current task or summarizing progress before continuing.</context_status>`,
    "<plan_mode>PLAN MODE ACTIVE — use read-only tools (Read, Grep, Glob) to gather information. Call ExitPlanMode when your plan is ready.</plan_mode>",
  ]);
  assert.deepEqual(await knapAi.createPrepareStep({})({ messages }), {});

  // With compaction: the summarizer is asked the same prompt, and the step returns the same history.
  const k = summarizer("SUMMARY");
  const b = summarizer("SUMMARY");
  const compaction = (model) => ({ maxTokens: used, summarizerModel: model, protectRecentMessages: 2 });
  const knap = await knapAi.createPrepareStep({ compaction: compaction(k.model), contextStatus: { maxTokens: used * 4 } })({ messages });
  const ref = await bashkit.createPrepareStep({ compaction: compaction(b.model), contextStatus: { maxTokens: used * 4 } })({ messages });
  assert.deepEqual(knap, ref);
  assert.deepEqual(k.prompts, b.prompts);
  assert.equal(k.prompts.length, 1);
  assert.match(knap.messages[0].content, /^\[Previous conversation summary\]\n\nSUMMARY/);
});
