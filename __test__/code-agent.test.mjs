// knap/code: createCodingAgent (options, validation order, model resolution, instructions, plan),
// the constants, the bills' text, the recovery proof, task economics, the provider base URL.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import * as code from "../lib/code.mjs";
import { run, httpExecutionBackend, localExecutionBackend } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { tempWorkspace } from "./helpers.mjs";

const {
  createCodingAgent,
  defaultCodingPlan,
  capOutput,
  CODING_RUN_BREAKERS,
  CODING_TOOL_OUTPUT_CAPS,
  OBSERVE_ONLY_BANNER,
  RECOVERABLE_CODING_TRANSFORMS,
  PROGRAMMATIC_TOOL_NAME,
  formatTurnBill,
  formatSessionBill,
  sessionBill,
  startCodingSession,
  runCodingTurn,
  proveRecovery,
  formatRecoveryProof,
  summarizeCodingTaskAttempts,
  codingModelsAtProviderBaseURL,
  classifyTurnFailure,
} = code;

const CREDENTIALS = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "CAVE_MODEL"];

/** Runs `fn` with exactly `env` among the credential variables. */
function withEnv(env, fn) {
  const saved = Object.fromEntries(CREDENTIALS.map((k) => [k, process.env[k]]));
  for (const k of CREDENTIALS) delete process.env[k];
  Object.assign(process.env, env);
  try {
    return fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

test("knap/code exports the reference's 24 runtime names (the other 33 of the 57 are types)", () => {
  assert.deepEqual(Object.keys(code).sort(), [
    "AgentRunController",
    "CODING_RUN_BREAKERS",
    "CODING_TOOL_OUTPUT_CAPS",
    "OBSERVE_ONLY_BANNER",
    "PROGRAMMATIC_TOOL_NAME",
    "RECOVERABLE_CODING_TRANSFORMS",
    "capOutput",
    "classifyTurnFailure",
    "codingModelsAtProviderBaseURL",
    "createCodingAgent",
    "createCommandSessionRuntime",
    "createProgrammaticToolRuntime",
    "defaultCodingPlan",
    "formatRecoveryProof",
    "formatSessionBill",
    "formatTurnBill",
    "programmaticToolInstructions",
    "proveRecovery",
    "runCodingSession",
    "runCodingTurn",
    "sessionBill",
    "startCodingSession",
    "streamCodingTurn",
    "summarizeCodingTaskAttempts",
  ]);
});

test("constants: caps, breakers, recoverable transforms, banner, cell tool name", () => {
  assert.deepEqual(CODING_TOOL_OUTPUT_CAPS, { read_file: 24000, grep: 16000, bash: 24000, write_file: 2000, edit_file: 2000, read_tool_output: 24000 });
  assert.deepEqual(CODING_RUN_BREAKERS, { repeatedToolCalls: 3, repeatedToolCallWindowTurns: 8, noProgressTurns: 3, maxToolCallsPerTurn: 8 });
  assert.ok(Object.isFrozen(CODING_TOOL_OUTPUT_CAPS) && Object.isFrozen(CODING_RUN_BREAKERS) && Object.isFrozen(RECOVERABLE_CODING_TRANSFORMS));
  assert.deepEqual(RECOVERABLE_CODING_TRANSFORMS, [
    "caveman.engine.code.v1",
    "caveman.engine.diff.v1",
    "caveman.engine.json.v1",
    "caveman.engine.log.v1",
    "caveman.engine.search-result.v1",
    "caveman.engine.terminal.v1",
    "caveman.engine.text.v1",
  ]);
  assert.equal(
    OBSERVE_ONLY_BANNER,
    "cave: OBSERVE-ONLY — the Caveman engine/gateway is not available here.\n" +
      "  Context transforms and gateway telemetry are OFF. Provider usage and local context estimates remain available.\n" +
      "  Turn optimized mode on: npm i -g @caveman-ai/cli && caveman start",
  );
  assert.equal(PROGRAMMATIC_TOOL_NAME, "caveman_code");
});

test("capOutput is the shell tools' cap", () => {
  assert.equal(capOutput("hello", 5), "hello");
  assert.equal(capOutput("hello world", 5), "hello\n[caveman-code: output capped at 5 of 11 bytes; narrow the request]");
});

test("model resolution: option, CAVE_MODEL, exactly one credential; the reference's messages", () => {
  const ws = tempWorkspace();
  try {
    const make = (options = {}) => createCodingAgent({ workspace: ws.root, ...options });
    withEnv({ ANTHROPIC_API_KEY: "a" }, () => assert.equal(make().modelID, "anthropic/claude-sonnet-4-6"));
    withEnv({ OPENAI_API_KEY: "o" }, () => assert.equal(make().modelID, "openai/gpt-5.5"));
    withEnv({ GOOGLE_API_KEY: "g" }, () => assert.equal(make().modelID, "google/gemini-2.5-pro"));
    withEnv({ GEMINI_API_KEY: "g", GOOGLE_API_KEY: "g" }, () => assert.equal(make().modelID, "google/gemini-2.5-pro"));
    withEnv({ ANTHROPIC_API_KEY: "a", OPENAI_API_KEY: "o", CAVE_MODEL: "openai/gpt-5.4-mini" }, () => assert.equal(make().modelID, "openai/gpt-5.4-mini"));
    withEnv({ CAVE_MODEL: "openai/x" }, () => assert.equal(make({ model: "anthropic/y" }).modelID, "anthropic/y"));
    withEnv({}, () => {
      assert.throws(() => make(), {
        message: "caveman-code: no supported provider credential found; set ANTHROPIC_API_KEY, OPENAI_API_KEY, or GEMINI_API_KEY",
        hint: /offline.*KNAP_PROVIDER_BASE_URL=http:\/\/127\.0\.0\.1:8080 ANTHROPIC_API_KEY=local caveman-code/,
      });
    });
    withEnv({ ANTHROPIC_API_KEY: "a", OPENAI_API_KEY: "o" }, () => {
      assert.throws(() => make(), { message: "caveman-code: multiple provider credentials found; set CAVE_MODEL to pick one" });
    });
    for (const bad of ["nomodel", "/x", "x/"]) {
      assert.throws(() => make({ model: bad }), { message: "caveman-code: model must use provider/model format" });
    }
  } finally {
    ws.cleanup();
  }
});

test("createCodingAgent: the definition, plan, frozen result; validation in the reference's order", () => {
  const ws = tempWorkspace();
  try {
    const agent = createCodingAgent({ workspace: path.join(ws.root, "sub", ".."), model: "anthropic/claude-sonnet-4-6" });
    assert.ok(Object.isFrozen(agent));
    assert.equal(agent.workspace, ws.root);
    assert.equal(agent.toolMode, "direct");
    assert.equal(agent.programmaticTools, undefined);
    const def = agent.definition;
    assert.equal(def.id, "caveman-code");
    assert.equal(def.model, "anthropic/claude-sonnet-4-6");
    assert.equal(def.reasoning, "off");
    assert.equal(def.sandbox, "host");
    assert.equal(def.sandboxDeclared, true);
    assert.deepEqual(def.output, { kind: "output", maxTokens: 8000 });
    assert.deepEqual(def.tools.map((t) => t.name), ["read_file", "grep", "bash", "write_file", "edit_file", "read_tool_output"]);
    assert.deepEqual(agent.plan, defaultCodingPlan("anthropic/claude-sonnet-4-6", "caveman-code"));
    assert.equal(agent.plan.budgets.retry_cascade_reserve, 16128);
    assert.deepEqual(agent.plan.recovery, { namespace: "caveman-code", tools: ["cave_retrieve"] });
    assert.deepEqual(agent.samples, []);

    const pebble = createCodingAgent({ workspace: ws.root, model: "a/b", toolSet: "pebble-v1", id: "mine", instructions: "Be terse." });
    assert.deepEqual(pebble.definition.tools.map((t) => t.name), ["read_file", "bash", "write_file", "edit_file"]);
    assert.equal(pebble.definition.id, "mine");
    assert.ok(pebble.definition.instructions.endsWith("\n\nBe terse."));
    assert.equal(pebble.plan.recovery.namespace, "mine");

    const capped = createCodingAgent({ workspace: ws.root, model: "a/b", outputCaps: { bash: 100 } });
    assert.match(capped.definition.tools.find((t) => t.name === "bash").description, /output (is )?capped at 100 bytes/);

    assert.throws(() => createCodingAgent({ workspace: ws.root, model: "a/b", toolSet: "mini" }), { message: "coding_tool_set_invalid:mini" });
    assert.throws(() => createCodingAgent({ workspace: ws.root, model: "a/b", toolMode: "magic" }), { message: "coding_tool_mode_invalid:magic" });
    // the model comes first
    assert.throws(() => createCodingAgent({ workspace: ws.root, model: "bad", toolSet: "mini" }), /provider\/model format/);
    const remote = httpExecutionBackend({ url: "http://127.0.0.1:9", token: "t" });
    assert.throws(() => createCodingAgent({ workspace: ws.root, model: "a/b", executionBackend: remote, commandSessions: true }), {
      code: "cave_execution_backend_command_sessions_local_only",
    });
    const fakeLocal = { id: "local" };
    assert.throws(() => createCodingAgent({ workspace: ws.root, model: "a/b", executionBackend: fakeLocal, commandSessionSpill: { directory: "/tmp", maxBytes: 1 } }), {
      code: "cave_execution_backend_command_sessions_local_only",
    });
    assert.throws(
      () => createCodingAgent({ workspace: ws.root, model: "a/b", executionBackend: localExecutionBackend(), commandSessions: false, commandSessionSpill: { directory: "/tmp", maxBytes: 1 } }),
      { code: "cave_execution_backend_command_sessions_disabled" },
    );
    assert.equal(createCodingAgent({ workspace: ws.root, model: "a/b", memory: true }).definition.memory.namespace, "caveman-code");
  } finally {
    ws.cleanup();
  }
});

test("the built-in instructions: fixed text of the reference's size, then the output contract", () => {
  const ws = tempWorkspace();
  try {
    const full = createCodingAgent({ workspace: ws.root, model: "a/b" }).definition.instructions;
    const pebble = createCodingAgent({ workspace: ws.root, model: "a/b", toolSet: "pebble-v1" }).definition.instructions;
    assert.deepEqual([full.length, full.split("\n").length], [1306, 23]);
    assert.deepEqual([pebble.length, pebble.split("\n").length], [1022, 19]);
    for (const name of ["read_file", "grep", "bash", "write_file", "edit_file", "read_tool_output"]) assert.match(full, new RegExp(`- ${name}:`));
    assert.doesNotMatch(pebble, /- grep:|- read_tool_output:/);
    for (const text of [full, pebble]) {
      assert.match(text, /<cave-compressed>/);
      assert.match(text, /cave_retrieve/);
      assert.match(text, /recovery_handle/);
      assert.match(text, /Retrieve before guessing\./);
    }
  } finally {
    ws.cleanup();
  }
});

test("programmatic mode: one cell tool over the direct tools, cell guidance first", () => {
  const ws = tempWorkspace();
  try {
    const agent = createCodingAgent({ workspace: ws.root, model: "a/b", toolMode: "programmatic" });
    assert.equal(agent.toolMode, "programmatic");
    assert.deepEqual(agent.definition.tools.map((t) => t.name), ["caveman_code"]);
    assert.equal(agent.definition.tools[0].effect, "idempotent");
    assert.equal(agent.definition.tools[0].timeoutMs, 125000);
    assert.deepEqual(agent.programmaticTools.stats(), { launched: 0, claimed: 0, missed: 0, abandoned: 0 });
    const text = agent.definition.instructions;
    const direct = createCodingAgent({ workspace: ws.root, model: "a/b" }).definition.instructions;
    assert.ok(text.endsWith(`\n\n${direct}`));
    assert.equal(text.length - direct.length - 2, 692, "692 characters of cell guidance, no second recovery block");
    const renamed = createCodingAgent({ workspace: ws.root, model: "a/b", toolMode: "programmatic", programmaticToolName: "run_js" });
    assert.deepEqual(renamed.definition.tools.map((t) => t.name), ["run_js"]);
    assert.match(renamed.definition.instructions, /Use the run_js tool/);
  } finally {
    ws.cleanup();
  }
});

test("samples: the four largest outputs of read_file, grep and bash, largest first", async () => {
  const ws = tempWorkspace();
  try {
    for (let i = 1; i <= 5; i++) ws.write(`f${i}.txt`, "x".repeat(i * 10));
    const agent = createCodingAgent({ workspace: ws.root, model: "a/b" });
    const calls = [1, 2, 3, 4, 5].map((i) => ({ name: "read_file", args: { path: `f${i}.txt` } }));
    await run(agent.definition, "go", { model: fauxModel(), streamFn: scriptedStream([{ toolCalls: calls }, { text: "done" }]) });
    assert.deepEqual(
      agent.samples.map((s) => s.label),
      ["read_file:f5.txt", "read_file:f4.txt", "read_file:f3.txt", "read_file:f2.txt"],
    );
    assert.equal(agent.samples[0].text, `1\t${"x".repeat(50)}`);
    const closing = agent.close();
    assert.equal(agent.close(), closing, "close() is memoized");
    await closing;
  } finally {
    ws.cleanup();
  }
});

function bill(overrides = {}) {
  return {
    turn: 1,
    mode: "observe-only",
    provider: "anthropic",
    model: "claude-sonnet-4-6",
    contextBill: {},
    transformedTokensBefore: 0,
    transformedTokensAfter: 0,
    tokensSavedInferred: 0,
    tokensBasis: "byte_derived",
    transformIDs: [],
    transformFailures: [],
    recoveryResolved: false,
    usageBasis: "provider_reported",
    inputTokens: 1234,
    outputTokens: 56,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cacheInputTokenHitRatio: 0,
    cacheHitTarget: 0.98,
    cacheHitTargetMet: false,
    costUsd: 0.004542,
    priceBasis: "public_catalog",
    latencyMs: 2345,
    ...overrides,
  };
}

test("formatTurnBill: the reference's example, word for word", () => {
  assert.deepEqual(formatTurnBill(bill(), 0), [
    "turn 1 · observe-only · anthropic/claude-sonnet-4-6 · 2,345 ms",
    "  context transforms: off (observe-only) — provider usage and local context estimates remain available",
    "  tokens saved: 0 this turn · 0 this session — local estimate, token counts only",
    "  provider usage (provider_reported): in 1,234 · out 56 · cache read 0 · cache write 0",
    "  cache input-token hit ratio: 0.00% · target 98.00% missed — provider-reported; cold seeds included",
    "  spend: 0.004542 USD measured at public catalog list prices (public_catalog)",
  ]);
});

test("formatTurnBill: optimized turns, applied transforms, unavailable cache, failures", () => {
  assert.equal(formatTurnBill(bill({ mode: "optimized" }), 0)[1], "  context transforms: none applied this turn (nothing was smaller compressed)");
  const applied = formatTurnBill(
    bill({
      mode: "optimized",
      transformIDs: ["caveman.engine.terminal.v1", "caveman.engine.text.v1"],
      transformedTokensBefore: 12000,
      transformedTokensAfter: 3000,
      tokensSavedInferred: 9000,
      cacheInputTokenHitRatio: 0.99,
      cacheHitTargetMet: true,
      transformFailures: ["caveman.engine.json.v1"],
    }),
    15000,
  );
  assert.deepEqual(applied.slice(1, 4), [
    "  context transforms: caveman.engine.terminal.v1, caveman.engine.text.v1",
    "  transformed context: 12,000 tokens before → 3,000 after",
    "  tokens saved: 9,000 this turn · 15,000 this session — local estimate, token counts only",
  ]);
  assert.equal(applied[5], "  cache input-token hit ratio: 99.00% · target 98.00% met — provider-reported; cold seeds included");
  assert.equal(applied.at(-1), "  transform fell back to original: caveman.engine.json.v1");
  const unavailable = formatTurnBill(bill({ usageBasis: "unavailable", cacheInputTokenHitRatio: null, cacheHitTargetMet: null }), 0);
  assert.equal(unavailable[4], "  cache input-token hit ratio: unavailable — complete provider usage required");
});

test("sessionBill and formatSessionBill: zero turns, one turn, sums over turns", () => {
  const session = { mode: "observe-only", turns: [] };
  assert.deepEqual(formatSessionBill(sessionBill(session)), [
    "session · 0 turns · observe-only",
    "  no provider calls this session — nothing measured, nothing claimed",
  ]);
  const empty = sessionBill(session);
  assert.equal(empty.priceBasis, "unpriced");
  assert.equal(empty.usageBasis, "unavailable");
  assert.equal(empty.cacheInputTokenHitRatio, null);

  session.turns.push({ bill: bill() });
  assert.deepEqual(formatSessionBill(sessionBill(session)), [
    "session · 1 turn · observe-only",
    "  context transforms: none applied",
    "  transformed context: 0 tokens before → 0 after",
    "  tokens saved: 0 — local estimate, token counts only; no provider savings claim",
    "  provider usage (provider_reported): in 1,234 · out 56 · cache read 0 · cache write 0",
    "  cache input-token hit ratio: 0.00% · target 98.00% missed — provider-reported; cold seeds included",
    "  spend: 0.004542 USD measured at public catalog list prices (public_catalog)",
  ]);
  session.turns.push({ bill: bill({ turn: 2, inputTokens: 100, cacheReadTokens: 900, cacheInputTokenHitRatio: 0.9, priceBasis: "unpriced", costUsd: 0 }) });
  const two = sessionBill(session);
  assert.equal(two.turns, 2);
  assert.equal(two.inputTokens, 1334);
  assert.equal(two.cacheInputTokenHitRatio, 900 / 2234);
  assert.equal(two.priceBasis, "unpriced");
  assert.equal(formatSessionBill(two)[0], "session · 2 turns · observe-only");
  session.turns.push({ bill: bill({ turn: 3, usageBasis: "unavailable", cacheInputTokenHitRatio: null }) });
  assert.equal(sessionBill(session).cacheInputTokenHitRatio, null);
  assert.equal(sessionBill(session).usageBasis, "unavailable");
});

test("a turn: bill from the run result, session observe-only with the banner noticed once", async () => {
  const ws = tempWorkspace();
  try {
    ws.write("notes.txt", "a\nb\nc\n");
    const agent = createCodingAgent({ workspace: ws.root, model: "anthropic/claude-haiku-4-5" });
    const notices = [];
    const session = await startCodingSession(agent, { cave: "off", onNotice: (line) => notices.push(line) });
    assert.equal(session.mode, "observe-only");
    assert.deepEqual(notices, [OBSERVE_ONLY_BANNER]);
    assert.deepEqual(session.notices, [OBSERVE_ONLY_BANNER]);
    assert.deepEqual(session.route, { useGateway: false });
    assert.equal(session.gatewayURL, "http://127.0.0.1:8787");
    const streamFn = scriptedStream([{ toolCalls: [{ name: "bash", args: { command: "wc -l notes.txt" } }] }, { text: "3 lines", usage: { cacheRead: 300 } }]);
    const turn = await runCodingTurn(session, "count", { model: fauxModel({ priced: true }), streamFn });
    assert.equal(turn.text, "3 lines");
    assert.deepEqual(turn.toolCalls, ["bash"]);
    assert.equal(turn.degraded, false);
    assert.equal(turn.bill.turn, 1);
    assert.equal(turn.bill.mode, "observe-only");
    assert.equal(turn.bill.inputTokens, 200);
    assert.equal(turn.bill.cacheReadTokens, 300);
    assert.equal(turn.bill.cacheInputTokenHitRatio, 300 / 500);
    assert.equal(turn.bill.priceBasis, "public_catalog");
    assert.deepEqual(session.turns, [turn]);
    assert.equal(agent.samples[0].label, "bash:wc -l notes.txt");
    const second = await runCodingTurn(session, "again", { model: fauxModel(), streamFn: scriptedStream([{ text: "still 3" }]) });
    assert.equal(second.bill.turn, 2);
    assert.equal(session.conversation.snapshot().messages.length, 6, "the conversation carries the first turn");
    await assert.rejects(runCodingTurn(session, "x", { caveRoute: {} }), /cave_internal_run_option/);
    await assert.rejects(runCodingTurn(session, "x", { maxCostUsd: 1, budget: { maxUsd: 1 } }), { code: "cave_budget_conflicting_cap" });
    await assert.rejects(startCodingSession(agent, { memory: {} }), { code: "cave_memory_definition_required" });
    assert.equal((await startCodingSession(agent, { cave: "off", gatewayURL: "http://gw.example//" })).gatewayURL, "http://gw.example");
  } finally {
    ws.cleanup();
  }
});

test("classifyTurnFailure", () => {
  assert.equal(classifyTurnFailure(new Error("x cave_gateway_required_for_locked_plan y")), "degrade_to_observe_only");
  assert.equal(classifyTurnFailure("cave_gateway_required_for_locked_plan"), "degrade_to_observe_only");
  assert.equal(classifyTurnFailure(new Error("cave_agent_run_failed: boom")), "fatal");
});

test("proveRecovery: needs a sample; round trip through an engine; the three texts", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-engine-"));
  try {
    const store = path.join(dir, "store");
    // A stand-in engine: compress keeps the text's first line (or all of it: mode "same"), retrieve
    // returns what was stored (or something else: mode "bad").
    const engine = path.join(dir, "engine");
    fs.writeFileSync(
      engine,
      `#!/bin/sh
mode=$(cat "${dir}/mode")
if [ "$1" = compress ]; then
  cat > "${store}"
  if [ "$mode" = same ]; then body=$(cat "${store}"); else body=$(head -c 4 "${store}"); fi
  printf '{"handle":"h1","compressed":"%s","tokensBefore":10,"tokensAfter":2}' "$body"
else
  if [ "$mode" = bad ]; then printf 'other'; else cat "${store}"; fi
fi
`,
      { mode: 0o755 },
    );
    const session = { agent: { samples: [] }, options: { engineBin: engine } };
    await assert.rejects(proveRecovery(session), { message: "caveman-code: no tool output recorded yet to prove recovery on" });
    session.agent.samples.push({ label: "bash:cat big.log", text: "line one\nline two\n" });
    fs.writeFileSync(path.join(dir, "mode"), "ok");
    const ok = await proveRecovery(session);
    assert.equal(ok.outcome, "recovered");
    assert.equal(ok.handle, "h1");
    assert.equal(ok.transformID, "caveman.engine.terminal.v1");
    assert.equal(ok.originalBytes, 18);
    assert.equal(ok.tokensBefore, 10);
    assert.equal(formatRecoveryProof(ok), `recovery proof: bash:cat big.log round-trip OK (sha256 match ${ok.originalSHA256.slice(0, 12)})`);
    fs.writeFileSync(path.join(dir, "mode"), "bad");
    const bad = await proveRecovery(session);
    assert.equal(formatRecoveryProof(bad), "recovery proof: bash:cat big.log FAILED (sha256 mismatch) — the plan falls back to the original body");
    session.agent.samples[0] = { label: "read_file:a", text: "abc" };
    fs.writeFileSync(path.join(dir, "mode"), "same");
    const same = await proveRecovery(session);
    assert.equal(formatRecoveryProof(same), "recovery proof: read_file:a not compressed — the engine kept the original bytes, nothing to recover");
    session.options.engineBin = path.join(dir, "missing-engine");
    await assert.rejects(proveRecovery(session), { code: "coding_recovery_engine_unavailable" });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("summarizeCodingTaskAttempts: evidence issues, status, cost per verified completion", () => {
  const attempt = (overrides = {}) => ({
    taskId: "t1",
    attemptId: "a1",
    provider: "anthropic",
    model: "claude-sonnet-4-6",
    completed: true,
    completionBasis: "external_verifier",
    costUsd: 0.5,
    priceBasis: "public_catalog",
    tokens: 1000,
    usageBasis: "provider_reported",
    ...overrides,
  });
  const ok = summarizeCodingTaskAttempts([attempt(), attempt({ attemptId: "a2", completed: false, costUsd: 0.25 }), attempt({ taskId: "t2", costUsd: 0.25 })]);
  assert.ok(Object.isFrozen(ok));
  assert.equal(ok.status, "complete");
  assert.deepEqual(ok.issues, []);
  assert.equal(ok.completedTasks, 2);
  assert.equal(ok.costPerCompletedTaskUsd, 0.5);
  assert.equal(summarizeCodingTaskAttempts([]).status, "incomplete_evidence");
  assert.deepEqual(summarizeCodingTaskAttempts([]).issues, ["no_attempts"]);
  assert.equal(summarizeCodingTaskAttempts([attempt({ completed: false })]).status, "no_completed_tasks");
  const messy = summarizeCodingTaskAttempts(
    [
      attempt(),
      attempt(),
      attempt({ attemptId: "", model: "other" }),
      attempt({ attemptId: "a3", completionBasis: "missing", costUsd: null, priceBasis: "unpriced", tokens: null }),
    ],
    { expectedAttempts: 3 },
  );
  assert.deepEqual(messy.issues, [
    "attempt_cardinality_mismatch",
    "attempt_identity_duplicate",
    "attempt_identity_missing",
    "completion_evidence_missing",
    "cost_evidence_missing",
    "price_basis_mixed",
    "runtime_identity_drift",
    "usage_evidence_missing",
  ]);
  assert.equal(messy.costPerCompletedTaskUsd, null);
  assert.throws(() => summarizeCodingTaskAttempts([], { expectedAttempts: -1 }), { code: "coding_task_expected_attempts_invalid" });
});

test("codingModelsAtProviderBaseURL rewrites the provider's base URL and validates its input", async () => {
  const source = {
    getModel: (provider, id) => ({ provider, id, baseUrl: "https://api.example" }),
    getModels: (provider) => [{ provider, id: "m", baseUrl: "https://api.example" }],
  };
  const models = codingModelsAtProviderBaseURL("anthropic/claude-sonnet-4-6", "http://127.0.0.1:9999/", source);
  assert.equal(models.getModel("anthropic", "claude-sonnet-4-6").baseUrl, "http://127.0.0.1:9999");
  assert.equal(models.getModel("openai", "gpt-5.5").baseUrl, "https://api.example");
  assert.equal(models.getModels("anthropic")[0].baseUrl, "http://127.0.0.1:9999");
  assert.throws(() => codingModelsAtProviderBaseURL("nope", "http://x", source), { code: "coding_provider_base_url_model_invalid" });
  for (const bad of ["not a url", "ftp://x", "http://user:pw@x"]) {
    assert.throws(() => codingModelsAtProviderBaseURL("a/b", bad, source), { code: "coding_provider_base_url_invalid" });
  }
  // Without a source, pi-ai's catalog is loaded when a run first resolves the model.
  const lazy = codingModelsAtProviderBaseURL("anthropic/claude-haiku-4-5", "http://127.0.0.1:1/");
  const { resolveModel } = await import("../lib/models.mjs");
  const model = await resolveModel("anthropic/claude-haiku-4-5", { models: lazy });
  assert.equal(model.baseUrl, "http://127.0.0.1:1");
  assert.equal(model.api, "anthropic-messages");
});

test("an execution backend runs the coding agent's tools elsewhere (no command sessions there)", async () => {
  const ws = tempWorkspace();
  try {
    const requests = [];
    const backend = {
      id: "fake-remote",
      async exec(request) {
        requests.push(request);
        return { stdout: "remote says hi\n", stderr: "", code: 0, timedOut: false, truncated: false };
      },
      async readFile() {
        return new TextEncoder().encode("remote file\n");
      },
      async writeFile() {},
    };
    const agent = createCodingAgent({ workspace: ws.root, model: "a/b", executionBackend: backend });
    const result = await run(agent.definition, "go", {
      model: fauxModel(),
      streamFn: scriptedStream([{ toolCalls: [{ name: "bash", args: { command: "echo hi" } }, { name: "read_file", args: { path: "x.txt" } }] }, { text: "done" }]),
    });
    assert.equal(result.text, "done");
    assert.deepEqual(requests.map((r) => [r.command, r.args]), [["sh", ["-c", "echo hi"]]]);
    assert.deepEqual(agent.samples.map((s) => s.label).sort(), ["bash:echo hi", "read_file:x.txt"]);
    assert.equal(agent.samples.find((s) => s.label === "bash:echo hi").text, "exit 0\nremote says hi\n");
  } finally {
    ws.cleanup();
  }
});


test("command sessions are on by default on the local backend, with the coding agent's limits; close() kills live ones", async (t) => {
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  const bashOf = (agent) => agent.definition.tools.find((tool) => tool.name === "bash");

  for (const executionBackend of [undefined, localExecutionBackend()]) {
    const agent = createCodingAgent({ workspace: ws.root, model: "a/b", ...(executionBackend ? { executionBackend } : {}) });
    const bash = bashOf(agent);
    assert.equal(await bash.execute({ action: "list" }), "command sessions: none");
    const page = await bash.execute({ command: "echo up; exec sleep 60", yieldTimeMs: 300 });
    const id = /^session (cmd_[a-f0-9]{32}) · running\n/.exec(page)?.[1];
    assert.ok(id, page);
    assert.match(await bash.execute({ action: "list" }), new RegExp(`^command sessions: 1 retained · oldest first\n${id} · running · stdin open · `));
    await agent.close();
    await agent.close(); // memoized
    // The runtime is closed: its sessions are gone and no new one starts.
    await assert.rejects(bash.execute({ command: "echo again", yieldTimeMs: 100 }), /command_session_runtime_closed/);
  }

  // The pool holds 8 live sessions (the runtime's own default is 64).
  const agent = createCodingAgent({ workspace: ws.root, model: "a/b" });
  t.after(() => agent.close());
  const bash = bashOf(agent);
  for (let i = 0; i < 8; i++) assert.match(await bash.execute({ command: "exec sleep 60", yieldTimeMs: 0 }), / · running\n/);
  await assert.rejects(bash.execute({ command: "exec sleep 60", yieldTimeMs: 0 }), {
    message: 'caveman-code: all 8 command sessions are still live; kill one with bash({action:"kill",sessionId}) before starting another',
  });

  // Off: a session-shaped call is refused with the reference's code.
  const off = createCodingAgent({ workspace: ws.root, model: "a/b", commandSessions: false });
  await assert.rejects(bashOf(off).execute({ action: "list" }), { code: "cave_execution_backend_command_sessions_local_only" });
  assert.equal(await bashOf(off).execute({ command: "echo hi" }), "exit 0\nhi\n");

  // A spill option reaches the runtime, which checks it.
  assert.throws(() => createCodingAgent({ workspace: ws.root, model: "a/b", commandSessionSpill: { directory: "relative", maxBytes: 1024 } }), /command_session_spill_directory_invalid/);
  const spilled = createCodingAgent({ workspace: ws.root, model: "a/b", commandSessionSpill: { directory: ws.outside, maxBytes: 1024 } });
  await spilled.close();
});
