// knap as people install and use it (issue 14): errors that say what to do (the reference's code
// and first line kept, a `hint` and a second line added), AI SDK habits, bounded Glob results,
// KNAP_DEBUG tracing.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { z } from "zod";
import * as z3 from "zod/v3";

import { agent, run, stream, shellTools, tool } from "../lib/index.mjs";
import { resolveModel } from "../lib/models.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { createAgentTools, createGlobTool, createLocalSandbox, getDebugLogs, clearDebugLogs, reinitDebugMode, isDebugEnabled } from "../lib/ai-sdk/index.mjs";
import { tempWorkspace } from "./helpers.mjs";

const opts = { toolCallId: "t", messages: [] };
const lines = (e) => e.message.split("\n");

test("no credential: the reference's first line, then the env vars to set and the offline path", async () => {
  const e = await resolveModel(undefined, {}, { env: {} }).then(
    () => assert.fail("resolved"),
    (x) => x,
  );
  assert.equal(e.code, "cave_provider_credentials");
  assert.equal(lines(e)[0], "caveman agent: no supported provider credential found");
  for (const name of ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "fauxModel()", "streamFn", "knap/testing"]) assert.ok(e.hint.includes(name), name);
  assert.equal(lines(e)[1], `hint: ${e.hint}`);
});

test("an unknown model id: did you mean the catalog's nearest", async () => {
  const e = await resolveModel("anthropic/claude-haiku-4.5", { models: { getModel: () => undefined } }).catch((x) => x);
  assert.equal(lines(e)[0], 'caveman agent: unknown model "anthropic/claude-haiku-4.5"');
  assert.match(e.hint, /^did you mean "anthropic\/claude-haiku-4-5"/);
});

test("deadlineMs: \"5s\" names the field, the type and the value received, with the reference's code", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  const def = agent({ id: "d", instructions: "i", model: fauxModel(), sandbox: "host", tools: [] });
  const e = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn: scriptedStream([{ text: "x" }]), deadlineMs: "5s" }).catch((x) => x);
  assert.equal(e.code, "cave_run_deadline_invalid");
  assert.equal(lines(e)[0], 'cave_run_deadline_invalid: deadlineMs must be a positive integer of milliseconds, received string "5s"');
  assert.equal(e.hint, "deadlineMs: 5000 (five seconds)");
  assert.doesNotMatch(e.message, /line 1 column/);

  // Options are checked before the model is resolved, as in the reference (plain Errors before
  // the run's try): the option error comes first, not the model's.
  const unresolvable = agent({ id: "u", instructions: "i", model: "nope/no-such-model", sandbox: "host", tools: [] });
  for (const [bad, code, first] of [
    [{ deadlineMs: "5s" }, "cave_run_deadline_invalid", /^cave_run_deadline_invalid: deadlineMs must be/],
    [{ maxCostUsd: -1 }, "cave_agent_definition_invalid", /^caveman agent: run maxCostUsd must be positive$/],
  ]) {
    const err = await run(unresolvable, "go", { ensureRuntime: false, ...bad }).catch((x) => x);
    assert.equal(err.name, "Error", JSON.stringify(bad));
    assert.equal(err.code, code);
    assert.match(lines(err)[0], first);
  }
  // With good options the model's own error still arrives, as a run error; so it does before a
  // bad call cap, which the reference checks inside its try, after resolving the model.
  for (const caps of [{ deadlineMs: 5000 }, { maxModelCalls: "10" }, { maxToolCalls: 0 }]) {
    const modelError = await run(unresolvable, "go", { ensureRuntime: false, ...caps }).catch((x) => x);
    assert.equal(modelError.name, "CavemanRunError", JSON.stringify(caps));
    assert.match(modelError.message, /unknown model "nope\/no-such-model"/);
  }
});

test("shellTools: a file as workspace is refused at once; a missing one fails at first use with a hint (the reference creates it lazily)", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  const file = ws.write("file.txt", "x");
  assert.throws(() => shellTools({ workspace: file }), (e) => {
    assert.equal(e.code, "cave_workspace_not_directory");
    assert.match(e.hint, /pass the directory/);
    return true;
  });
  const missing = path.join(ws.outside, "no", "such", "dir");
  const [read] = shellTools({ workspace: missing, tools: ["read_file"] });
  await assert.rejects(read.execute({ path: "a.txt" }), (e) => {
    assert.equal(e.code, "ENOENT");
    assert.match(e.hint, /does not exist: create it/);
    return true;
  });
  assert.equal(shellTools({ workspace: ws.root }).length, 6);

  // Inside a run the kernel dispatches natively: the model reads the same two lines.
  const results = [];
  const def = agent({ id: "m", instructions: "i", model: fauxModel(), sandbox: "host", tools: shellTools({ workspace: missing, tools: ["bash"] }) });
  for await (const event of stream(def, "go", { model: fauxModel(), streamFn: scriptedStream([{ toolCalls: [{ name: "bash", args: { command: "ls" } }] }, { text: "done" }]) })) {
    if (event.type === "pi" && event.event.type === "tool_execution_end") results.push(event.event);
  }
  assert.equal(results.length, 1);
  assert.equal(results[0].isError, true);
  const [first, second] = results[0].result.content[0].text.split("\n");
  assert.equal(first, `ENOENT: no such file or directory, realpath '${missing}'`);
  assert.match(second, /^hint: the workspace ".*" does not exist: create it/);
});

test("createLocalSandbox refuses unknown keys (workingDir) and a file as workingDirectory", (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  assert.throws(() => createLocalSandbox({ workingDir: ws.root }), (e) => {
    assert.equal(e.code, "cave_config_unknown_key");
    assert.equal(lines(e)[0], 'cave_config_unknown_key: createLocalSandbox does not know the option "workingDir"');
    assert.match(e.hint, /^did you mean "workingDirectory"\?/);
    return true;
  });
  assert.throws(() => createLocalSandbox({ workingDirectory: ws.write("f", "x") }), { code: "cave_workspace_not_directory" });
  const created = path.join(ws.outside, "new-dir");
  createLocalSandbox({ workingDirectory: created }); // bashkit's: a missing directory is created
  assert.ok(fs.statSync(created).isDirectory());
});

test("createAgentTools refuses unknown config keys, tool names and tool options", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  const sandbox = createLocalSandbox({ workingDirectory: ws.root });
  await assert.rejects(createAgentTools(sandbox, { defaultTimeOut: 5 }), (e) => e.code === "cave_config_unknown_key" && /did you mean "defaultTimeout"/.test(e.hint));
  await assert.rejects(createAgentTools(sandbox, { tools: { bash: { timeout: 5 } } }), (e) => e.code === "cave_config_unknown_key" && /did you mean "Bash"/.test(e.hint));
  await assert.rejects(createAgentTools(sandbox, { tools: { Bash: { timeoutMs: 5 } } }), (e) => e.code === "cave_config_unknown_key" && /tools\.Bash/.test(e.message));
  const { tools } = await createAgentTools(sandbox, { tools: { Glob: { maxResults: 5 } } });
  assert.ok(tools.Glob);
});

test("tool({ inputSchema }) is tool({ input }): the JSON Schema is sent and the input validated", async () => {
  const seen = [];
  const weather = tool({ name: "weather", description: "d", effect: "read", inputSchema: z.object({ city: z.string() }), execute: async (i) => (seen.push(i), "ok") });
  assert.deepEqual(weather.input.required, ["city"]);
  await assert.rejects(weather.execute({ city: 42 }), /cave_tool_input_schema_mismatch:weather/);
  assert.equal(await weather.execute({ city: "Oslo" }), "ok");
  assert.deepEqual(seen, [{ city: "Oslo" }]);
  assert.throws(() => tool({ name: "w", description: "d", effect: "read", input: z.object({}), inputSchema: z.object({}) }), /has both input and inputSchema/);
  assert.throws(() => tool({ name: "w", description: "d", effect: "read", parameters: z.object({}) }), (e) => /input \(or inputSchema/.test(e.hint));
});

test("a zod 3 schema keeps the reference's message and gets the zod 4 hint", () => {
  assert.throws(() => tool({ name: "w", description: "d", effect: "read", input: z3.z.object({ a: z3.z.string() }) }), (e) => {
    assert.equal(lines(e)[0], 'caveman agent: tool "w" input is a Standard Schema without JSON Schema; pass inputJSONSchema');
    assert.match(e.hint, /zod 3 schema: zod 4 schemas carry their JSON Schema \(npm install zod@\^4/);
    return true;
  });
});

test("Glob returns at most 1,000 paths, newest first, and says how many more matched and how to narrow", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  for (let i = 0; i < 1005; i++) ws.write(`d/f${i}.js`, "");
  const newest = ws.write("d/newest.js", "");
  fs.utimesSync(newest, new Date(), new Date(Date.now() + 60_000));
  const sandbox = createLocalSandbox({ workingDirectory: ws.root });
  const r = await createGlobTool(sandbox).execute({ pattern: "*.js" }, opts);
  assert.equal(r.matches.length, 1000);
  assert.equal(r.count, 1000);
  assert.match(r.matches[0], /newest\.js$/);
  assert.deepEqual(r.truncated, { total: 1006, omitted: 6 });
  assert.equal(Object.keys(r).at(-1), "note"); // the last thing the model reads
  assert.match(r.note, /^Showing the 1,000 newest of 1,006 matching paths \(6 more not listed\)\. Narrow the pattern/);
  const all = await createGlobTool(sandbox, { maxResults: 0 }).execute({ pattern: "*.js" }, opts);
  assert.equal(all.count, 1006);
  assert.equal(all.note, undefined);
  const ten = await createGlobTool(sandbox, { maxResults: 10 }).execute({ pattern: "*.js" }, opts);
  assert.equal(ten.count, 10);
  assert.deepEqual(ten.truncated, { total: 1006, omitted: 996 });
});

test("KNAP_DEBUG=memory records tool calls with timings, and cache hits", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  const saved = process.env.KNAP_DEBUG;
  process.env.KNAP_DEBUG = "memory";
  reinitDebugMode();
  t.after(() => {
    if (saved === undefined) delete process.env.KNAP_DEBUG;
    else process.env.KNAP_DEBUG = saved;
    reinitDebugMode();
  });
  assert.equal(isDebugEnabled(), true);
  ws.write("a.txt", "alpha\n");
  const { tools } = await createAgentTools(createLocalSandbox({ workingDirectory: ws.root }), { cache: true });
  await tools.Read.execute({ file_path: "a.txt" }, opts);
  await tools.Read.execute({ file_path: "a.txt" }, opts);
  const [bash] = shellTools({ workspace: ws.root, tools: ["bash"] });
  await bash.execute({ command: "echo hi" });
  const logs = getDebugLogs();
  const starts = logs.filter((e) => e.event === "start").map((e) => e.tool);
  assert.deepEqual(starts, ["Read", "Read", "bash"]);
  const ends = logs.filter((e) => e.event === "end");
  assert.ok(ends.every((e) => typeof e.duration_ms === "number"));
  assert.ok(ends.some((e) => e.tool === "Read" && e.summary?.cache === "hit"));
  assert.deepEqual(logs.find((e) => e.tool === "bash" && e.event === "start").input, { command: "echo hi" });
  clearDebugLogs();

  // Inside a run the calls are traced from the run's events: the end line has the result's
  // size, an error its message.
  const def = agent({ id: "dbg", instructions: "i", model: fauxModel(), sandbox: "host", tools: shellTools({ workspace: ws.root, tools: ["bash", "read_file"] }) });
  const script = [{ toolCalls: [{ name: "bash", args: { command: "printf 12345" } }] }, { toolCalls: [{ name: "read_file", args: { path: "missing.txt" } }] }, { text: "done" }];
  const texts = {};
  for await (const event of stream(def, "go", { model: fauxModel(), streamFn: scriptedStream(script) })) {
    if (event.type === "pi" && event.event.type === "tool_execution_end") texts[event.event.toolName] = event.event.result.content[0].text;
  }
  assert.match(texts.bash, /12345/);
  const traced = getDebugLogs();
  assert.deepEqual(traced.filter((e) => e.event === "start").map((e) => e.tool), ["bash", "read_file"]);
  const bashEnd = traced.find((e) => e.tool === "bash" && e.event === "end");
  assert.deepEqual(bashEnd.summary, { chars: texts.bash.length });
  assert.equal(typeof bashEnd.duration_ms, "number");
  assert.match(traced.find((e) => e.tool === "read_file" && e.event === "error").error, /^ENOENT: no such file or directory/);
  clearDebugLogs();
  assert.deepEqual(getDebugLogs(), []);
});
