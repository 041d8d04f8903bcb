// knap/plugins (skills and plugins of .agents/) and bashkit's skills API in knap/ai-sdk, over the
// core's one implementation; a scripted model loads a skill through load_skill.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { agent, run, stream } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import * as plugins from "knap/plugins";
import * as aiSdk from "../lib/ai-sdk/index.mjs";

const { loadAgentEnvironment, applyAgentEnvironment, expandAgentEnvironmentSlashCommand } = plugins;

function write(file, text) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

const json = (v) => JSON.parse(JSON.stringify(v));
const skillMd = (name, description, body = `# ${name}\n`) => `---\nname: ${name}\ndescription: ${description}\n---\n${body}`;

function workspace() {
  const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "knap-plugins-")));
  fs.mkdirSync(path.join(ws, ".git"));
  const home = path.join(ws, "home");
  write(path.join(ws, ".agents/skills/pdf/SKILL.md"), skillMd("pdf", "Read PDF files", "Use pdftotext.\nSee ref/tips.md.\n"));
  write(path.join(ws, ".agents/skills/pdf/ref/tips.md"), "tip: -layout\n");
  write(path.join(home, ".agents/skills/pdf/SKILL.md"), skillMd("pdf", "home copy"));
  write(path.join(home, ".agents/skills/csv/SKILL.md"), skillMd("csv", "Work with CSV"));
  write(path.join(ws, ".agents/plugins/kit/.claude-plugin/plugin.json"), JSON.stringify({ name: "kit", version: "1.0.0" }));
  write(path.join(ws, ".agents/plugins/kit/commands/review.md"), "---\ndescription: Review a file\n---\nReview $ARGUMENTS carefully.\n");
  return { ws, home };
}

test("plugins exports the reference's 16 values", () => {
  const names = `AGENT_PLUGINS_SCHEMA AGENT_SKILLS_CONTEXT_ID AGENT_PLUGIN_COMMANDS_CONTEXT_ID applyAgentEnvironment
createAgentEnvironmentTransform expandAgentEnvironmentSlashCommand findAgentWorkspaceRoot loadAgentEnvironment loadAgentPlugin
loadAgentSkillDirectory parseAgentSkill readAgentSkillResource renderAgentPluginCommandInvocation renderAgentPluginCommandsIndex
renderAgentSkillInvocation renderAgentSkillsIndex`.split(/\s+/);
  assert.deepEqual(names.filter((n) => !(n in plugins)), []);
  assert.equal(plugins.AGENT_SKILLS_CONTEXT_ID, "agent.skills");
});

test("loadAgentEnvironment: precedence, plugin skills and commands, frozen", async () => {
  const { ws, home } = workspace();
  const env = await loadAgentEnvironment({ cwd: ws, homeDir: home });
  assert.equal(env.workspaceRoot, ws);
  assert.deepEqual(env.skills.map((s) => [s.id, s.description]), [["csv", "Work with CSV"], ["pdf", "Read PDF files"]]);
  assert.deepEqual(env.commands.map((c) => c.id), ["kit:review"]);
  assert.equal(env.plugins[0].format, "claude-code");
  assert.deepEqual(env.diagnostics.map((d) => d.code), ["agent_environment_duplicate_skill"]);
  assert.equal(env.diagnostics[0].message, 'ignored lower-precedence duplicate skill "pdf"');
  assert.ok(Object.isFrozen(env) && Object.isFrozen(env.skills[0]));
  assert.equal(env.skills[1].body, skillMd("pdf", "Read PDF files", "Use pdftotext.\nSee ref/tips.md.\n"));
  assert.equal(await plugins.findAgentWorkspaceRoot(path.join(ws, "home")), ws);
  assert.throws(() => plugins.parseAgentSkill("---\nname: x\n---\n", { file: "/a/x/SKILL.md", root: "/a/x" }), { code: "cave_agent_skill_description_invalid" });
});

test("a scripted model loads a skill through load_skill; the index is in the system prompt", async () => {
  const { ws, home } = workspace();
  const env = await loadAgentEnvironment({ cwd: ws, homeDir: home });
  const base = agent({ id: "reader", instructions: "Help.", model: fauxModel(), sandbox: "host" });
  const def = applyAgentEnvironment(base, env);
  assert.deepEqual(def.tools.map((t) => t.name), ["load_skill"]);
  assert.equal(def.sandboxDeclared, true);
  assert.deepEqual(def.contexts.map((c) => c.id), ["agent.skills", "agent.plugin-commands"]);
  assert.equal(def.contexts[0].cacheRegion, "frozen_prefix");
  const prompts = [];
  const results = [];
  const script = scriptedStream([
    { toolCalls: [{ name: "load_skill", args: { name: "pdf" } }, { name: "load_skill", args: { name: "pdf", resource: "ref/tips.md" } }, { name: "load_skill", args: { name: "zip" } }, { name: "load_skill", args: { name: "pdf", resource: "../../x" } }] },
    { text: "done" },
  ]);
  const streamFn = (model, context, options) => {
    prompts.push(context.systemPrompt);
    results.push(context.messages.filter((m) => m.role === "toolResult").map((m) => [m.isError, m.content.map((c) => c.text).join("")]));
    return script(model, context, options);
  };
  const result = await run(def, "summarize a.pdf", { model: fauxModel(), streamFn });
  assert.equal(result.text, "done");
  assert.match(prompts[0], /<cave-context id="agent\.skills">\nSkills available to this agent\. Load one only when its description matches the task\.\nCall load_skill\(\{"name":"<skill>"\}\) for instructions\. Use its resource argument for referenced files\.\n- csv: Work with CSV\n- pdf: Read PDF files\n<\/cave-context>/);
  assert.match(prompts[0], /- \/kit:review: Review a file/);
  assert.deepEqual(results[1], [
    [false, env.skills[1].body],
    [false, "tip: -layout\n"],
    [false, 'Unknown skill "zip". Available skills: csv, pdf'],
    [true, "cave_agent_skill_resource_path_invalid:pdf"],
  ]);
  assert.deepEqual(result.receipt.tools, [{ name: "load_skill", calls: 4, errors: 1 }]);
  assert.throws(() => applyAgentEnvironment(def, env), { code: "cave_agent_environment_context_collision" });
});

test("slash commands expand to invocations; others pass through", async () => {
  const { ws, home } = workspace();
  const env = await loadAgentEnvironment({ cwd: ws, homeDir: home });
  assert.equal(expandAgentEnvironmentSlashCommand("hello", env), "hello");
  const cmd = expandAgentEnvironmentSlashCommand("/kit:review src/a.rs", env);
  assert.equal(cmd.split("\n\n")[0], 'Execute explicitly invoked Agent Plugin command "kit:review". Follow it for this turn.');
  assert.match(cmd, /Review src\/a\.rs carefully\./);
  assert.match(cmd, /User arguments:\nsrc\/a\.rs$/);
  assert.match(expandAgentEnvironmentSlashCommand("/skill csv now", env), /^Apply explicitly invoked Agent Skill "csv"/);
  assert.throws(() => expandAgentEnvironmentSlashCommand("/skill nope", env), { code: "cave_agent_skill_unknown", message: "cave_agent_skill_unknown:nope" });
  assert.throws(() => plugins.renderAgentSkillInvocation(env, "x"), { code: "cave_agent_skill_unknown" });
  const transform = plugins.createAgentEnvironmentTransform(env);
  assert.equal(transform.id, "agent-environment");
});

test("bashkit's skills API matches bashkit's own output", async () => {
  const bashkit = await import("bashkit");
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "knap-bkskills-")));
  write(path.join(root, ".skills/alpha/SKILL.md"), "---\nname: alpha\ndescription: Alpha & <beta>\nlicense: MIT\nallowed-tools: Read Bash\nmetadata:\n  author: me\n---\nbody");
  write(path.join(root, ".skills/alpha/scripts/run.sh"), "echo hi");
  write(path.join(root, ".skills/broken/SKILL.md"), "nope");
  write(path.join(root, "other/alpha/SKILL.md"), "---\nname: alpha\ndescription: other\n---\n");
  for (const opts of [{ cwd: root }, { cwd: root, paths: ["other", ".skills"] }]) {
    // bashkit leaves absent optional fields as undefined keys; the JSON is the contract.
    assert.deepEqual(json(await aiSdk.discoverSkills(opts)), json(await bashkit.discoverSkills(opts)));
  }
  const skills = await aiSdk.discoverSkills({ cwd: root });
  assert.equal(aiSdk.skillsToXml(skills), bashkit.skillsToXml(skills));
  assert.equal(aiSdk.skillsToXml([]), bashkit.skillsToXml([]));
  const md = fs.readFileSync(path.join(root, ".skills/alpha/SKILL.md"), "utf8");
  assert.deepEqual(json(aiSdk.parseSkillMetadata(md, "/x/alpha/SKILL.md")), json(bashkit.parseSkillMetadata(md, "/x/alpha/SKILL.md")));
  for (const bad of ["no", "---\nname: x\n---\n", "---\ndescription: y\n---\n", "---\nname: Bad\ndescription: y\n---\n"]) {
    assert.throws(() => aiSdk.parseSkillMetadata(bad, "/s/x/SKILL.md"), { message: (() => { try { bashkit.parseSkillMetadata(bad, "/s/x/SKILL.md"); } catch (e) { return e.message; } })() });
  }
  assert.deepEqual(await aiSdk.loadSkillBundle(path.join(root, ".skills/alpha")), await bashkit.loadSkillBundle(path.join(root, ".skills/alpha")));
  assert.deepEqual(await aiSdk.loadSkillBundles(skills), await bashkit.loadSkillBundles(skills));
});

test("setupAgentEnvironment seeds a sandbox; fetchSkill walks the GitHub contents API", async () => {
  const calls = [];
  const sandbox = {
    exec: async (c) => (calls.push(["exec", c]), { stdout: "", stderr: "", exitCode: 0, durationMs: 0, interrupted: false }),
    writeFile: async (p, c) => calls.push(["write", p, c]),
  };
  const bundle = { name: "pdf", files: { "SKILL.md": skillMd("pdf", "P"), "scripts/a.sh": "echo" } };
  const r = await aiSdk.setupAgentEnvironment(sandbox, { workspace: { notes: "files/notes/" }, skills: { web: skillMd("web", "W"), pdf: bundle, bad: "nofm" } });
  assert.deepEqual(r.skills, [
    { name: "web", description: "W", path: ".skills/web/SKILL.md" },
    { name: "pdf", description: "P", path: ".skills/pdf/SKILL.md" },
    { name: "bad", description: "Skill: bad", path: ".skills/bad/SKILL.md" },
  ]);
  assert.deepEqual(calls.slice(0, 4), [["exec", 'mkdir -p "files/notes"'], ["exec", 'mkdir -p ".skills"'], ["exec", 'mkdir -p ".skills/web"'], ["write", ".skills/web/SKILL.md", skillMd("web", "W")]]);
  assert.ok(calls.some((c) => c[0] === "write" && c[1] === ".skills/pdf/scripts/a.sh"));

  const tree = {
    "skills/pdf": [{ type: "file", path: "skills/pdf/SKILL.md", download_url: "u:skill" }, { type: "dir", path: "skills/pdf/ref" }],
    "skills/pdf/ref": [{ type: "file", path: "skills/pdf/ref/a.md", download_url: "u:a" }],
  };
  const fetch = async (url) => {
    if (url.startsWith("https://api.github.com/repos/acme/skills/contents/")) {
      const dir = url.slice("https://api.github.com/repos/acme/skills/contents/".length);
      return tree[dir] ? { ok: true, json: async () => tree[dir] } : { ok: false, status: 404, statusText: "Not Found" };
    }
    return { ok: true, text: async () => (url === "u:skill" ? skillMd("pdf", "P") : "A") };
  };
  assert.deepEqual(await aiSdk.fetchSkill("acme/skills/pdf", { fetch }), { name: "pdf", files: { "SKILL.md": skillMd("pdf", "P"), "ref/a.md": "A" } });
  await assert.rejects(aiSdk.fetchSkill("acme/skills/zip", { fetch }), /404/);
  await assert.rejects(aiSdk.fetchSkill("bad-ref"), /owner\/repo\/skillName/);
  assert.deepEqual(Object.keys(await aiSdk.fetchSkills(["acme/skills/pdf"], { fetch })), ["pdf"]);
});

test("stream() with an applied environment reports load_skill like any read tool", async () => {
  const { ws, home } = workspace();
  const env = await loadAgentEnvironment({ cwd: ws, homeDir: home, includeWorkspacePlugin: false, pluginCollections: [] });
  const def = applyAgentEnvironment(agent({ id: "s", instructions: "x", model: fauxModel() }), env, { skillToolName: "skill" });
  assert.equal(def.sandboxDeclared, false);
  const names = [];
  for await (const e of stream(def, "go", { model: fauxModel(), streamFn: scriptedStream([{ toolCalls: [{ name: "skill", args: { name: "csv" } }] }, { text: "ok" }]) })) {
    if (e.type === "pi" && e.event.type === "tool_execution_end") names.push([e.event.toolName, e.event.isError]);
  }
  assert.deepEqual(names, [["skill", false]]);
});

test("bashkit's context status helpers match bashkit; MODEL_CONTEXT_LIMITS come from the catalog", async () => {
  const bashkit = await import("bashkit");
  const m = (n) => [{ role: "user", content: "x".repeat(n) }];
  for (const n of [100, 2100, 2900, 3500]) {
    const ours = aiSdk.getContextStatus(m(n), 1000);
    assert.deepEqual(ours, bashkit.getContextStatus(m(n), 1000));
    assert.equal(aiSdk.contextNeedsAttention(ours), bashkit.contextNeedsAttention(ours));
    assert.equal(aiSdk.contextNeedsCompaction(ours), bashkit.contextNeedsCompaction(ours));
  }
  assert.deepEqual(aiSdk.getContextStatus(m(10), 1000, { knownTokenCount: 900 }), bashkit.getContextStatus(m(10), 1000, { knownTokenCount: 900 }));
  assert.deepEqual(Object.keys(aiSdk.MODEL_CONTEXT_LIMITS), Object.keys(bashkit.MODEL_CONTEXT_LIMITS));
  assert.equal(aiSdk.MODEL_CONTEXT_LIMITS["claude-sonnet-4-5"], 200_000);
});
