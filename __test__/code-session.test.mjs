// Full coding sessions through runCodingSession with input/output streams, against a fake
// provider on 127.0.0.1 speaking the Anthropic and OpenAI streaming formats (pi-ai's real HTTP
// path); the exact text of the header, prompts, bills, slash commands and errors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import fs from "node:fs";
import path from "node:path";

import { createCodingAgent, runCodingSession, streamCodingTurn, startCodingSession, codingModelsAtProviderBaseURL, OBSERVE_ONLY_BANNER } from "../lib/code.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { AgentRunController } from "../lib/code.mjs";
import { startFakeProvider } from "./fake-provider.mjs";
import { tempWorkspace } from "./helpers.mjs";

const saved = {};
before(() => {
  for (const k of ["ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "CAVE_MODEL"]) saved[k] = process.env[k];
  delete process.env.ANTHROPIC_OAUTH_TOKEN;
  process.env.ANTHROPIC_API_KEY = "sk-ant-test-dummy";
  process.env.OPENAI_API_KEY = "sk-test-dummy";
});
after(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

const HEADER_HELP = [
  "/tokens          session token bill so far",
  "/prove-recovery  compress one recorded tool output and recover it byte-exactly",
  "/mode            show whether this session is optimized or observe-only",
  "/help            this list",
  "/exit            end the session and print the final bill",
];
const PROMPT = "\nagent [observe-only] > ";

/** Runs a session over `lines`; returns stdout, stderr (notice) and the bill. */
async function session(agent, lines, options = {}) {
  const input = new PassThrough();
  const output = new PassThrough();
  const notice = new PassThrough();
  let out = "";
  let err = "";
  output.on("data", (c) => (out += c));
  notice.on("data", (c) => (err += c));
  const done = runCodingSession({ agent, input, output, notice, ...options });
  input.end(lines.map((l) => `${l}\n`).join(""));
  const bill = await done;
  return { out, err, bill };
}

/** The latency and elapsed numbers vary; everything else is exact. */
const normalize = (text) => text.replace(/ · [\d,]+ ms$/gm, " · <ms> ms").replace(/ · \d+ ms\n/g, " · <ms>\n");

const anthropicBill = (turn, input, output) => [
  `turn ${turn} · observe-only · anthropic/claude-sonnet-4-6 · <ms> ms`,
  "  context transforms: off (observe-only) — provider usage and local context estimates remain available",
  `  tokens saved: 0 this turn · 0 this session — local estimate, token counts only`,
  `  provider usage (provider_reported): in ${input} · out ${output} · cache read 0 · cache write 0`,
  "  cache input-token hit ratio: 0.00% · target 98.00% missed — provider-reported; cold seeds included",
];

test("a whole session (Anthropic): banner on notice, header, a turn with a tool call, /tokens, /mode, /help, the final bill", async (t) => {
  const ws = tempWorkspace();
  const fake = await startFakeProvider([
    { text: "Let me count.", toolCalls: [{ name: "bash", args: { command: "wc -l notes.txt" } }] },
    { text: "notes.txt has 3 lines." },
  ]);
  t.after(async () => {
    await fake.close();
    ws.cleanup();
  });
  ws.write("notes.txt", "a\nb\nc\n");
  const agent = createCodingAgent({ workspace: ws.root, model: "anthropic/claude-sonnet-4-6" });
  const models = codingModelsAtProviderBaseURL(agent.modelID, fake.url);
  const { out, err, bill } = await session(agent, ["how many lines?", "/tokens", "/mode", "/help", "", "/exit", "never read"], {
    runOverrides: { models },
  });
  const spend = (usd) => `  spend: ${usd} USD measured at public catalog list prices (public_catalog)`;
  const sessionLines = [
    "session · 1 turn · observe-only",
    "  context transforms: none applied",
    "  transformed context: 0 tokens before → 0 after",
    "  tokens saved: 0 — local estimate, token counts only; no provider savings claim",
    "  provider usage (provider_reported): in 200 · out 20 · cache read 0 · cache write 0",
    "  cache input-token hit ratio: 0.00% · target 98.00% missed — provider-reported; cold seeds included",
    spend("0.000900"),
  ];
  const expected =
    [`caveman-code · anthropic/claude-sonnet-4-6 · workspace ${ws.root}`, "mode: observe-only", ...HEADER_HELP].join("\n") +
    "\n" +
    PROMPT +
    ["", "notes.txt has 3 lines.", "", ...anthropicBill(1, 200, 20), spend("0.000900")].join("\n") +
    "\n" +
    PROMPT +
    sessionLines.join("\n") +
    "\n" +
    PROMPT +
    "mode: observe-only\n" +
    PROMPT +
    HEADER_HELP.join("\n") +
    "\n" +
    PROMPT +
    PROMPT +
    "\n" +
    sessionLines.join("\n") +
    "\n";
  assert.equal(normalize(out), expected);
  assert.equal(err, `${OBSERVE_ONLY_BANNER}\ntool bash wc -l notes.txt · ✓ 19 B · <ms>\n`.replace("<ms>", err.match(/· (\d+ ms)\n$/)?.[1] ?? "?"));
  assert.equal(bill.turns, 1);
  assert.equal(bill.inputTokens, 200);
  assert.equal(bill.costUsd, 0.0009);
  // The provider got the coding agent's request: its model, tools, system prompt, then the tool result.
  assert.equal(fake.requests.length, 2);
  const first = fake.requests[0].body;
  assert.equal(first.model, "claude-sonnet-4-6");
  assert.deepEqual(first.tools.map((tool) => tool.name), ["read_file", "grep", "bash", "write_file", "edit_file", "read_tool_output"]);
  assert.match(JSON.stringify(first.system), /You are a coding agent/);
  assert.match(JSON.stringify(first.system), /<cave-output max_tokens=8000>Return output matching declared schema when present\.<\/cave-output>/);
  assert.match(JSON.stringify(fake.requests[1].body.messages.at(-1)), /exit 0\\n3 notes\.txt/);
});

test("a session against the OpenAI Responses format; a second turn carries the conversation", async (t) => {
  const ws = tempWorkspace();
  const fake = await startFakeProvider([
    { text: "Reading.", toolCalls: [{ name: "read_file", args: { path: "a.txt" } }] },
    { text: "It says alpha.", usage: { input_tokens: 50, cache_read_input_tokens: 150 } },
    { text: "Still alpha." },
  ]);
  t.after(async () => {
    await fake.close();
    ws.cleanup();
  });
  ws.write("a.txt", "alpha\n");
  const agent = createCodingAgent({ workspace: ws.root, model: "openai/gpt-5.5" });
  const { out, bill } = await session(agent, ["what does a.txt say?", "and now?"], {
    runOverrides: { models: codingModelsAtProviderBaseURL("openai/gpt-5.5", `${fake.url}/v1`) },
  });
  const text = normalize(out);
  assert.match(text, /\nIt says alpha\.\n\nturn 1 · observe-only · openai\/gpt-5\.5 · <ms> ms\n/);
  assert.match(text, /  provider usage \(provider_reported\): in 150 · out 20 · cache read 150 · cache write 0\n/);
  assert.match(text, /  cache input-token hit ratio: 50\.00% · target 98\.00% missed/);
  assert.match(text, /\nStill alpha\.\n\nturn 2 · observe-only · openai\/gpt-5\.5/);
  assert.equal(bill.turns, 2);
  assert.equal(fake.requests.length, 3);
  assert.match(JSON.stringify(fake.requests[2].body.input), /what does a\.txt say\?.*It says alpha\..*and now\?/);
});

test("errors are `error: …` lines and the session goes on; end of input ends it", async (t) => {
  const ws = tempWorkspace();
  const fake = await startFakeProvider([]); // every call answers 500
  t.after(async () => {
    await fake.close();
    ws.cleanup();
  });
  const agent = createCodingAgent({ workspace: ws.root, model: "anthropic/claude-sonnet-4-6" });
  const unknown = createCodingAgent({ workspace: ws.root, model: "anthropic/no-such-model" });
  const models = codingModelsAtProviderBaseURL(agent.modelID, fake.url);
  const a = await session(agent, ["hello", "/prove-recovery"], { runOverrides: { models } });
  assert.match(a.out, /> error: cave_agent_run_failed: cave_provider_terminal_error: 500 .*script exhausted.*\n/);
  assert.match(a.out, /> recovery proof unavailable: caveman-code: no tool output recorded yet to prove recovery on\n/);
  assert.match(a.out, /\nsession · 0 turns · observe-only\n  no provider calls this session — nothing measured, nothing claimed\n$/);
  assert.equal(a.bill.turns, 0);
  const b = await session(unknown, ["hello"], { runOverrides: { models } });
  assert.match(b.out, /> error: cave_agent_run_failed: caveman agent: unknown model "anthropic\/no-such-model"\n/);
  await assert.rejects(session(agent, [], { runOverrides: { efficiencyPlan: {} } }), /cave_internal_run_option/);
});

test("an agent built from agentOptions belongs to the session; a streamFn override runs offline", async (t) => {
  const ws = tempWorkspace();
  t.after(() => ws.cleanup());
  const notices = [];
  const { out, bill } = await session(undefined, ["hi"], {
    agentOptions: { workspace: ws.root, model: "anthropic/claude-haiku-4-5" },
    runOverrides: { model: fauxModel(), streamFn: scriptedStream([{ text: "hello there" }]) },
    onNotice: (line) => notices.push(line),
  });
  assert.match(out, /\nhello there\n\nturn 1 · observe-only · anthropic\/faux-1 · /);
  assert.equal(bill.turns, 1);
  assert.deepEqual(notices, [OBSERVE_ONLY_BANNER]);
});

test("streamCodingTurn: Pebble v1 events, one sequence per session, the turn recorded", async (t) => {
  const ws = tempWorkspace();
  t.after(() => ws.cleanup());
  ws.write("a.txt", "alpha\n");
  const agent = createCodingAgent({ workspace: ws.root, model: "anthropic/claude-haiku-4-5" });
  const s = await startCodingSession(agent, { cave: "off" });
  const overrides = {
    model: fauxModel(),
    streamFn: scriptedStream([{ toolCalls: [{ name: "read_file", args: { path: "a.txt" } }, { name: "read_file", args: { path: "missing.txt" } }] }, { text: "done" }]),
  };
  const events = [];
  const it = streamCodingTurn(s, "read", { overrides });
  let step;
  while (!(step = await it.next()).done) events.push(step.value);
  const turn = step.value;
  assert.equal(turn.text, "done");
  assert.deepEqual(s.turns, [turn]);
  assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => i));
  assert.ok(events.every((e) => Object.isFrozen(e) && e.v === 1 && e.sessionId === s.conversation.sessionId && !Number.isNaN(Date.parse(e.ts))));
  const kinds = events.map((e) => e.kind);
  assert.equal(kinds[0], "turn.start");
  assert.equal(kinds.at(-1), "turn.end");
  assert.equal(events.at(-1).stopReason, "end_turn");
  const starts = events.filter((e) => e.kind === "tool.start");
  assert.deepEqual(starts.map((e) => [e.name, e.argsSummary]), [["read_file", '{"path":"a.txt"}'], ["read_file", '{"path":"missing.txt"}']]);
  const ends = events.filter((e) => e.kind === "tool.end");
  assert.deepEqual(ends.map((e) => e.status).sort(), ["completed", "failed"]);
  assert.match(ends.find((e) => e.status === "failed").detail, /ENOENT/);
  assert.ok(kinds.includes("delta.text") || kinds.includes("usage"));
  assert.equal(events.filter((e) => e.kind === "usage").length, 2);

  // a run error: error + turn.end "error", then { failed: true, receipt }; seq continues
  const failing = streamCodingTurn(s, "again", { overrides: { model: fauxModel(), streamFn: scriptedStream([]) } });
  const more = [];
  while (!(step = await failing.next()).done) more.push(step.value);
  assert.equal(step.value.failed, true);
  assert.equal(step.value.receipt.schema, "caveman.agent.run-receipt.v1");
  assert.equal(more[0].seq, events.length);
  assert.deepEqual(more.slice(-2).map((e) => e.kind), ["error", "turn.end"]);
  assert.match(more.at(-2).message, /^cave_agent_run_failed: cave_testing_script_exhausted/);
  assert.equal(more.at(-1).stopReason, "error");
  assert.equal(s.turns.length, 1);

  // A controller is passed to the run: its follow-up extends the turn, and each change of its
  // state is a queue.changed event.
  const controller = new AgentRunController();
  const inner = scriptedStream([{ text: "y" }, { text: "z" }]);
  let calls = 0;
  const streamFn = (model, context, options) => {
    if (++calls === 1) controller.followUp("more");
    return inner(model, context, options);
  };
  const controlled = streamCodingTurn(s, "x", { overrides: { model: fauxModel(), streamFn }, controller });
  const steered = [];
  while (!(step = await controlled.next()).done) steered.push(step.value);
  assert.equal(calls, 2);
  assert.equal(steered.at(-1).kind, "turn.end");
  assert.equal(steered.at(-1).stopReason, "end_turn");
  assert.deepEqual(steered.filter((e) => e.kind === "queue.changed").map((e) => e.queued), [1, 0]);
  assert.equal(step.value.text, "z");
});

test("programmatic mode in a whole session: the cell's reads run as nested calls, a denied nested write, the cell's output reaches the model", async (t) => {
  const ws = tempWorkspace();
  ws.write("a.txt", "alpha\n");
  ws.write("b.txt", "beta\n");
  const code = [
    'const [a, b] = await Promise.all([read_file({ path: "a.txt" }), tools.read_file({ path: "b.txt" })]);',
    'const denied = await write_file({ path: "c.txt", content: "x" }).catch((e) => e.message);',
    'print(a.includes("alpha") && b.includes("beta") ? "both read" : "missing", denied);',
  ].join("\n");
  const fake = await startFakeProvider([{ text: "One cell.", toolCalls: [{ name: "caveman_code", args: { code } }] }, { text: "Read both files." }]);
  const agent = createCodingAgent({ workspace: ws.root, model: "anthropic/claude-sonnet-4-6", toolMode: "programmatic" });
  t.after(async () => {
    await fake.close();
    ws.cleanup();
  });
  const policy = [];
  const toolPolicy = (input) => {
    policy.push([input.name, input.parentToolCallId === undefined ? "top" : "nested"]);
    return input.name === "write_file" ? { deny: "read_only_session" } : undefined;
  };
  const models = codingModelsAtProviderBaseURL(agent.modelID, fake.url);
  const { out, err, bill } = await session(agent, ["read a and b", "/exit"], { runOverrides: { models, toolPolicy } });
  await agent.close();
  assert.equal(bill.turns, 1);
  assert.ok(out.includes("agent [observe-only] > \nRead both files.\n\nturn 1 · observe-only"), out);
  assert.deepEqual(policy, [
    ["caveman_code", "top"],
    ["read_file", "nested"],
    ["read_file", "nested"],
    ["write_file", "nested"],
  ]);
  // what the model got back from the cell: the printed line, the denial as the cell caught it
  const toolResult = JSON.stringify(fake.requests[1].body.messages.at(-1));
  assert.match(toolResult, /both read cave_tool_denied:read_only_session/);
  assert.equal(fs.existsSync(path.join(ws.root, "c.txt")), false);
  // not a terminal: one plain line per finished call on the notice stream, nested ones indented
  const lines = err.split("\n").filter((l) => /tool /.test(l));
  assert.deepEqual(
    lines.map((l) => l.replace(/ · [\d.]+ (ms|s)$/, "").replace(/ \d+(\.\d)? (B|KB)/, " <size>")).sort(),
    [
      "  tool read_file a.txt · ✓ <size>",
      "  tool read_file b.txt · ✓ <size>",
      "  tool write_file c.txt · ✗ <size>",
      `tool caveman_code ${code.replace(/\s+/g, " ").slice(0, 59)}… · ✓ <size>`,
    ].sort(),
  );
});

test("streamCodingTurn in programmatic mode: the cell's nested calls are tool.start/tool.end events inside the cell's", async (t) => {
  const ws = tempWorkspace();
  ws.write("a.txt", "alpha\n");
  const agent = createCodingAgent({ workspace: ws.root, model: "anthropic/claude-haiku-4-5", toolMode: "programmatic" });
  t.after(async () => {
    await agent.close();
    ws.cleanup();
  });
  const s = await startCodingSession(agent, { cave: "off" });
  const code = 'print(await read_file({ path: "a.txt" })); await read_file({ path: "missing.txt" }).catch(() => print("no missing"));';
  const overrides = { model: fauxModel(), streamFn: scriptedStream([{ toolCalls: [{ name: "caveman_code", args: { code } }] }, { text: "done" }]) };
  const events = [];
  const it = streamCodingTurn(s, "cell", { overrides });
  let step;
  while (!(step = await it.next()).done) events.push(step.value);
  assert.equal(step.value.text, "done");
  const tools = events.filter((e) => e.kind === "tool.start" || e.kind === "tool.end");
  const cell = tools[0];
  assert.deepEqual([cell.kind, cell.name], ["tool.start", "caveman_code"]);
  assert.equal(cell.argsSummary, JSON.stringify({ code }).length > 240 ? `${JSON.stringify({ code }).slice(0, 239)}…` : JSON.stringify({ code }));
  // in order: the cell starts, its two reads start and end inside it, then the cell ends
  const named = tools.map((e) => (e.kind === "tool.start" ? `start ${e.name} ${e.argsSummary}` : `end ${e.id === cell.id ? "cell" : "nested"} ${e.status}`));
  assert.deepEqual(named.slice(1), [
    'start read_file {"path":"a.txt"}',
    "end nested completed",
    'start read_file {"path":"missing.txt"}',
    "end nested failed",
    "end cell completed",
  ]);
  assert.ok(tools.slice(1, 5).every((e) => e.id !== cell.id), "nested calls have their own ids");
  assert.match(tools[4].detail, /ENOENT/);
  assert.deepEqual(step.value.toolCalls, ["caveman_code", "read_file", "read_file"]);
});
