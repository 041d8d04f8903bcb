// The reference's root names and small subpaths: each resolves, and the pure ones work
// (receipts, input, canonical JSON, durable summaries, controllers, definition extras).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import * as knap from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";

const { agent, run, tool, schema } = knap;

// §1.2's root values (types are not values).
const ROOT_VALUES = `agent applyAgentDefinitionTransforms run stream runLocked CavemanRunError AgentRunController
createConversation agentStaticContextDiagnostics verifySandboxConformance subagent auto AUTO tool schema output context
file memory memoryTTLMilliseconds artifact evalFixture eval assertQualityGrader shellTools decideToolCall
TOOL_POLICY_TIMEOUT_MS localExecutionBackend httpExecutionBackend BudgetController createBudgetController
OUTPUT_CLAMP_FLOOR_TOKENS AGENT_RUN_RECEIPT_SCHEMA defineRunReceipt validateRunReceipt renderReceipt routine
routineOutcomes normalizeAgentInput encodeAgentInput defineAgentInputEncoder AGENT_INPUT_MAX_PARTS
AGENT_INPUT_MAX_TEXT_BYTES AGENT_INPUT_MAX_BASE64_BYTES_PER_PART AGENT_INPUT_MAX_BASE64_BYTES_TOTAL
AGENT_INPUT_MAX_URL_LENGTH AGENT_INPUT_MAX_MIME_LENGTH AGENT_INPUT_MAX_FILE_NAME_LENGTH DiskDurableStore
HttpDurableStore durableRunSummary durableInputIsReplayable createMemoryEngine createFileMemoryAdapter
createInMemoryMemoryStorage lowerContext appendRuntimeContextSegment contextBill contextIRToWire contextIRFromWire
opaquePayload sha256 stableStringify compileProfiled compileProfiledNativePi executeCompiledPipeline
assertProfiledBuildTarget capabilityManifestFor nativePiCompilerTarget planNativePiCandidates createWorkloadProfile
createCompilerWorkloadProfile parseWorkloadProfile workloadSplitSHA256 normalizeTrajectory parseNormalizedTrajectory
TARGET_CAPABILITY_LATTICE createModelBoundary captureModelBoundary ConnectRuntime createConnect connectEnvironment
executeConnectTool resolveConnectBinary compareConnectEfficiency loadAgentDir composeAgentDir AGENT_DIR_ENTRY
egressAllowed resolveEgressPolicy`.split(/\s+/);

test("every root value of the reference's list resolves", () => {
  assert.deepEqual(ROOT_VALUES.filter((n) => !(n in knap)), []);
  assert.equal(knap.OUTPUT_CLAMP_FLOOR_TOKENS, 256);
  assert.equal(knap.AGENT_RUN_RECEIPT_SCHEMA, "caveman.agent.run-receipt.v1");
  assert.equal(knap.AGENT_INPUT_MAX_TEXT_BYTES, 1024 * 1024);
  assert.equal(knap.AGENT_INPUT_MAX_URL_LENGTH, 8192);
});

test("HttpDurableStore (root and knap/durable) and ObjectDurableStore (knap/durable only, as in the reference) are the real stores", async () => {
  const sub = await import("knap/durable");
  assert.equal(knap.HttpDurableStore, sub.HttpDurableStore);
  assert.equal(typeof sub.ObjectDurableStore, "function");
  assert.equal("ObjectDurableStore" in knap, false);
  assert.throws(() => new knap.HttpDurableStore({}), { code: "cave_durable_http_url_invalid" });
  assert.throws(() => new knap.HttpDurableStore({ url: "https://journal.example.com" }), { code: "cave_durable_http_token_required" });
  assert.throws(() => new sub.ObjectDurableStore({}), { code: "cave_durable_object_storage_invalid" });
});

test("dist/cli.js is the caveman-agent command when run, and runs nothing when imported", async () => {
  const { execFileSync } = await import("node:child_process");
  const root = new URL("..", import.meta.url).pathname;
  const viaDist = execFileSync(process.execPath, [root + "dist/cli.js", "--help"], { encoding: "utf8" });
  const viaBin = execFileSync(process.execPath, [root + "bin/caveman-agent.mjs", "--help"], { encoding: "utf8" });
  assert.match(viaDist, /^Usage: caveman-agent serve/);
  assert.equal(viaDist, viaBin);
  const mod = await import("../dist/cli.js");
  assert.equal(typeof mod.runAgentCli, "function");
});

test("subpaths and dist/ shims resolve against knap", async () => {
  for (const sub of ["run-receipt", "input", "catalog", "model-usage", "model-boundary", "build", "compiler", "profile", "claude", "connect", "cache-engine", "adapters", "wire"]) {
    const m = await import(`knap/${sub}`);
    assert.ok(Object.keys(m).length > 0, sub);
  }
  const dist = await import("../dist/index.js");
  assert.equal(dist.run, knap.run);
  assert.equal((await import("../dist/shell-tools.js")).shellTools, knap.shellTools);
  assert.equal((await import("knap/run-receipt")).validateRunReceipt, knap.defineRunReceipt);
});

test("every dist/ file the reference's export map names re-exports the same names as knap's subpath", async () => {
  // caveman-agent-api.md §1.1: subpath -> the reference's dist file (its tests import ../dist/<file>).
  const map = {
    ".": "index.js", "./testing": "testing.js", "./code": "code.js", "./command-session": "command-session.js",
    "./execution-backend": "execution-backend.js", "./catalog": "catalog.js", "./programmatic-tools": "programmatic-tools.js",
    "./connect": "connect.js", "./plugins": "agent-environment.js", "./compaction": "compaction-api.js",
    "./memory": "memory-api.js", "./durable": "durable.js", "./serve": "serve.js", "./serve-handler": "serve-handler.js",
    "./build": "build.js", "./compiler": "compiler.js", "./profile": "profile.js", "./claude": "claude.js",
    "./cache-engine": "cache-planner/index.js",
  };
  for (const [sub, file] of Object.entries(map)) {
    const viaExports = await import(sub === "." ? "knap" : `knap/${sub.slice(2)}`);
    const viaDist = await import(`../dist/${file}`);
    assert.deepEqual(Object.keys(viaDist).sort(), Object.keys(viaExports).sort(), `dist/${file} vs ${sub}`);
    for (const name of Object.keys(viaExports)) assert.equal(viaDist[name], viaExports[name], `${file}: ${name}`);
  }
  const session = await import("../dist/serve-session.js");
  assert.equal(session.withMessageContext, (await import("knap/serve-handler")).withMessageContext);
  assert.equal(session.SESSION_MESSAGE_CONTEXT_MAX_BYTES, 65536);
  assert.equal((await import("../dist/durable-stores.js")).DiskDurableStore, (await import("knap/durable")).DiskDurableStore);
  assert.equal((await import("../dist/durable-object-store.js")).ObjectDurableStore, (await import("knap/durable")).ObjectDurableStore);
});

test("what needs the compiler, engine or gateway throws a code naming it", () => {
  assert.throws(() => knap.compileProfiled(), { code: "cave_compiler_unsupported", message: /Cave Build compiler/ });
  assert.throws(() => knap.contextBill(), { code: "cave_context_ir_unsupported" });
  assert.throws(() => new knap.ConnectRuntime(), { code: "cave_connect_unsupported" });
  assert.throws(() => knap.routine(), { code: "cave_routine_unsupported" });
});

async function scriptedRun(extra = {}) {
  const lookup = tool({ name: "lookup", description: "d", input: schema.object({ q: schema.string() }), effect: "read", execute: () => "ok" });
  const def = agent({ id: "receipts", instructions: "x", model: fauxModel(), sandbox: "host", tools: [lookup] });
  return run(def, "go", {
    model: fauxModel({ priced: true }),
    streamFn: scriptedStream([{ toolCalls: [{ name: "lookup", args: { q: "a" } }] }, { text: "done" }]),
    ...extra,
  });
}

test("validateRunReceipt accepts run receipts, freezes them, and names the broken field", async () => {
  for (const budget of [undefined, { maxTokens: 100_000 }, { maxUsd: 1 }]) {
    const result = await scriptedRun(budget ? { budget } : {});
    const receipt = knap.validateRunReceipt(result.receipt);
    assert.ok(Object.isFrozen(receipt) && Object.isFrozen(receipt.calls[0]));
    assert.equal(receipt.calls.length, 2);
  }
  const { receipt } = await scriptedRun();
  const bad = (mutate, field) => {
    const copy = structuredClone(receipt);
    mutate(copy);
    assert.throws(() => knap.defineRunReceipt(copy), { message: `cave_run_receipt_invalid:${field}` });
  };
  bad((r) => (r.totalTokens += 1), "total_tokens");
  bad((r) => (r.stopReason = "finished"), "stop_reason");
  bad((r) => (r.extra = 1), "identity");
  bad((r) => (r.tools[0].errors = 5), "tools");
  bad((r) => (r.overspent = -0), "number");
  const cyclic = structuredClone(receipt);
  cyclic.subagents.push(cyclic);
  assert.throws(() => knap.defineRunReceipt(cyclic), { message: "cave_run_receipt_invalid:cycle" });
  const getter = structuredClone(receipt);
  Object.defineProperty(getter, "unpriced", { get: () => false, enumerable: true });
  assert.throws(() => knap.defineRunReceipt(getter), { message: "cave_run_receipt_invalid:identity" });
});

test("renderReceipt prints the reference's rows", async () => {
  const result = await scriptedRun({ budget: { maxTokens: 10_000 } });
  const text = knap.renderReceipt({ ...result.receipt, mode: "observe-only", durationMs: 12_400, receiptPath: ".caveman/runs/x/receipt.json" });
  const lines = text.split("\n");
  assert.equal(lines[0], "run complete · 2 turns · 12.4s");
  assert.equal(lines[2], "  model          claude-haiku-4-5 (2 calls)");
  assert.equal(lines[3], "  mode           observe-only — engine adds compression + recovery");
  assert.equal(lines[4], "  input          200 tok · 0 read warm (provider-reported)");
  assert.equal(lines[5], "  output         20 tok");
  assert.match(lines[6], /^ {2}cost {11}\$0\.\d{4} {3}list-price subtotal, not an invoice$/);
  assert.match(lines[7], /^ {2}cold estimate {2}\$0\.\d{4} {3}inferred — same run with no warm prefix$/);
  assert.equal(lines[8], "  budget         token cap: 220 spent of 10,000 · 97% remains");
  assert.equal(lines.at(-2), "  full receipt   .caveman/runs/x/receipt.json");
  assert.ok(text.endsWith("\n"));
  const none = knap.renderReceipt({ ...result.receipt, calls: [], stopReason: "budget_exhausted", denomination: "none", durationMs: 0 });
  assert.equal(none.split("\n")[0], "run stopped — budget exhausted · 0 turns · 0.0s");
  assert.equal(none.split("\n")[3], "  no model calls were made — nothing to price, nothing to estimate.");
  const unpriced = await run(agent({ id: "u", instructions: "x", model: fauxModel(), sandbox: "host" }), "hi", {
    model: fauxModel(),
    streamFn: scriptedStream([{ text: "ok" }]),
  });
  assert.match(knap.renderReceipt(unpriced.receipt), /cost {11}unpriced — faux-1 is not in the public catalog,\n {17}so no dollar figure/);
});

test("input helpers validate parts, sources and limits with the reference's codes", async () => {
  const n = knap.normalizeAgentInput("hello");
  assert.deepEqual(n, { parts: [{ type: "text", text: "hello" }], textBytes: 5, base64Bytes: 0, remoteReferences: 0 });
  assert.ok(Object.isFrozen(n.parts));
  const img = knap.normalizeAgentInput([{ type: "image", mimeType: "image/png", source: { type: "base64", data: "aGk=" } }, { type: "file", mimeType: "text/plain", name: "a.txt", source: { type: "url", url: "https://x.test/a" } }]);
  assert.equal(img.base64Bytes, 2);
  assert.equal(img.remoteReferences, 1);
  const code = (input, c) => assert.throws(() => knap.normalizeAgentInput(input), { code: c });
  code([], "cave_input_parts_invalid");
  code([{ type: "text", text: "x", extra: 1 }], "cave_input_part_invalid");
  code([{ type: "image", mimeType: "text/plain", source: { type: "base64", data: "aGk=" } }], "cave_input_part_invalid");
  code([{ type: "image", mimeType: "image/png", source: { type: "base64", data: "a" } }], "cave_input_base64_invalid");
  code([{ type: "image", mimeType: "image/png", source: { type: "base64", data: "" } }], "cave_input_base64_empty");
  code([{ type: "image", mimeType: "image/png", source: { type: "url", url: "ftp://x" } }], "cave_input_url_invalid");
  code([{ type: "image", mimeType: "image/png", source: { type: "url", url: "https://u:p@x.test/" } }], "cave_input_url_invalid");
  code([{ type: "file", mimeType: "text/plain", name: "../x", source: { type: "url", url: "https://x.test/" } }], "cave_input_file_name_invalid");
  code([{ type: "image", mimeType: "image/png", source: { type: "path", path: "/x" } }], "cave_input_source_invalid");
  code("x".repeat(1024 * 1024 + 1), "cave_input_text_bytes_limit");
  code([{ type: "opaque", provider: "-bad", value: 1 }], "cave_input_part_invalid");

  const encoder = knap.defineAgentInputEncoder({ id: "text-only", supports: (p) => p.type === "text", encode: (input) => input.parts.map((p) => p.text).join("|") });
  assert.equal(await knap.encodeAgentInput([{ type: "text", text: "a" }, { type: "text", text: "b" }], encoder), "a|b");
  await assert.rejects(knap.encodeAgentInput(img.parts, encoder), { code: "cave_input_unsupported", message: "cave_input_unsupported:text-only:0,1" });
  assert.throws(() => knap.defineAgentInputEncoder({ id: "x", supports() {} }), { code: "cave_input_encoder_invalid" });
  await assert.rejects(knap.encodeAgentInput("a", { id: "e", supports: () => "yes", encode() {} }), (e) => e instanceof AggregateError && e.message === "cave_input_encoder_support_failed");
  await assert.rejects(knap.encodeAgentInput("a", encoder, {}), { code: "cave_input_signal_invalid" });
  const never = knap.defineAgentInputEncoder({ id: "slow", supports: () => true, encode: () => new Promise(() => {}) });
  const ac = new AbortController();
  const pending = knap.encodeAgentInput("a", never, ac.signal);
  ac.abort(new Error("stop"));
  await assert.rejects(pending, { message: "stop" });
});

test("sha256 and stableStringify use the core's canonical JSON", () => {
  assert.equal(knap.sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert.equal(knap.sha256(new TextEncoder().encode("abc")), knap.sha256("abc"));
  assert.equal(knap.stableStringify({ b: [1, { d: 1, c: 2 }], a: "x" }), '{"a":"x","b":[1,{"c":2,"d":1}]}');
  assert.throws(() => knap.stableStringify({ a: undefined }), /caveman agent: value is not canonically serializable/);
  assert.throws(() => knap.stableStringify([() => 1]), /not canonically serializable/);
  assert.throws(() => knap.stableStringify(undefined), /not canonically serializable/);
});

test("durableRunSummary reads a real journal; durableInputIsReplayable spots digests", async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "knap-summary-"));
  const store = new knap.DiskDurableStore(root);
  const def = agent({ id: "durable-summary", instructions: "x", model: fauxModel(), sandbox: "host" });
  await run(def, "hi", { model: fauxModel(), streamFn: scriptedStream([{ text: "ok" }]), durable: { runId: "sum-1", store } });
  const summary = knap.durableRunSummary(await store.load("sum-1"));
  assert.equal(summary.status, "completed");
  assert.equal(summary.runId, "sum-1");
  assert.equal(summary.result.text, "ok");
  assert.deepEqual(knap.durableRunSummary([]), { status: "missing" });
  const lines = await store.load("sum-1");
  assert.throws(() => knap.durableRunSummary(lines.slice(1)), { code: "cave_durable_journal_corrupt", message: /does not begin with run_started/ });
  assert.equal(knap.durableInputIsReplayable("\u0000cave.multimodal.v1:abc"), false);
  assert.equal(knap.durableInputIsReplayable("plain"), true);
});

test("AgentRunController queues, notifies and validates", () => {
  const c = new knap.AgentRunController();
  const seen = [];
  const off = c.subscribe((s) => seen.push(s.queued));
  c.steer("look at b");
  c.followUp("then summarize");
  assert.deepEqual(c.state, { queued: 2, heldAfterInterrupt: false });
  assert.throws(() => c.steer("  "), { code: "cave_agent_queue_message_required" });
  assert.throws(() => c.clear(5), { code: "cave_agent_queue_index_invalid" });
  c.clear(0);
  c.interrupt();
  assert.deepEqual(c.state, { queued: 1, heldAfterInterrupt: true });
  c.resume();
  off();
  c.clear();
  assert.deepEqual(seen, [0, 1, 2, 1, 1, 1]);
  assert.equal(c.state.queued, 0);
});

test("BudgetController is unbound outside a run", () => {
  const b = knap.createBudgetController();
  assert.ok(b instanceof knap.BudgetController);
  assert.throws(() => b.spent, { code: "cave_budget_controller_unbound" });
  assert.throws(() => b.releaseBudget(1, "more"), { code: "cave_budget_controller_unbound" });
});

test("artifact, transforms, sandbox probe, runLocked", async () => {
  assert.deepEqual(knap.artifact(), { kind: "artifact", strategy: "page", maxInlineTokens: 1200, recovery: "exact_ccr" });
  assert.throws(() => knap.artifact({ maxInlineTokens: -1 }), /caveman agent: artifact maxInlineTokens must be a non-negative integer/);
  const def = agent({ id: "t", instructions: "a", model: fauxModel(), sandbox: "host" });
  const out = knap.applyAgentDefinitionTransforms(def, [{ id: "more", apply: (d) => agent({ ...d, instructions: d.instructions + "b" }) }]);
  assert.equal(out.instructions, "ab");
  assert.throws(() => knap.applyAgentDefinitionTransforms(def, [{ id: "x", apply: (d) => d }, { id: "x", apply: (d) => d }]), { code: "cave_agent_definition_transform_duplicate" });
  assert.equal(await knap.verifySandboxConformance(), false);
  const locked = await knap.runLocked(def, "hi", {}, { model: fauxModel(), streamFn: scriptedStream([{ text: "ok" }]) });
  assert.equal(locked.text, "ok");
  assert.equal(locked.unlocked, false);
  await assert.rejects(knap.runLocked(def, "hi", { transformIDs: ["caveman.x"] }), { code: "cave_build_lock_unsupported" });
});

test("options knap does not act on are refused with a code naming them; printReceipt writes and prints", async () => {
  const def = agent({ id: "opts", instructions: "x", model: fauxModel(), sandbox: "host" });
  const go = (extra) => run(def, "hi", { model: fauxModel(), streamFn: scriptedStream([{ text: "ok" }]), ...extra });
  // controller and modelRouter work now: a value of the wrong kind is refused, not ignored.
  await assert.rejects(go({ controller: {} }), { code: "cave_agent_controller_invalid" });
  await assert.rejects(go({ modelRouter: "fast" }), { code: "cave_run_options_invalid" });
  await assert.rejects(go({ onBudgetExhausted: "compact", budget: { maxTokens: 1000 } }), { code: "cave_budget_on_exhausted_invalid" });
  await assert.rejects(go({ budgetController: knap.createBudgetController() }), { code: "cave_budget_controller_without_budget" });
  await assert.rejects(go({ maxSubagentInvocations: 0 }), { code: "cave_subagent_invocation_limit_invalid" });
  await assert.rejects(go({ sandboxProfile: { network: true, childProcess: false, credentialEnv: [] } }), { code: "cave_sandbox_network_egress_unbounded" });
  await assert.rejects(go({ sandboxProfile: { network: false, childProcess: true, credentialEnv: [] } }), { code: "cave_sandbox_child_process_containment_unavailable" });
  assert.equal((await go({ onBudgetExhausted: "stop" })).text, "ok");

  const rootDir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-print-"));
  const writes = [];
  const original = process.stdout.write;
  process.stdout.write = (chunk) => (writes.push(String(chunk)), true);
  let result;
  try {
    result = await go({ printReceipt: true, rootDir });
  } finally {
    process.stdout.write = original;
  }
  const [stamp] = fs.readdirSync(path.join(rootDir, ".caveman", "runs"));
  const file = path.join(rootDir, ".caveman", "runs", stamp, "receipt.json");
  assert.deepEqual(JSON.parse(fs.readFileSync(file, "utf8")), JSON.parse(JSON.stringify(result.receipt)));
  assert.match(writes.join(""), new RegExp(`^run complete · 1 turn · \\d+\\.\\ds\\n[\\s\\S]*full receipt   \\.caveman/runs/${stamp}/receipt\\.json\\n$`));
});

test("normalizeCompaction applies the reference's defaults and checks", async () => {
  assert.deepEqual({ ...knap.normalizeCompaction() }, { maxCompactions: 1, keepRecentTokens: 8000, summaryMaxTokens: 2048, minYieldTokens: 20000, headroomCalls: 3, pinnedUserTokens: 20000, preserveFirstUserMessage: true });
  assert.throws(() => knap.normalizeCompaction({ maxCompactions: 0 }), { code: "cave_compaction_option_invalid" });
  assert.throws(() => knap.normalizeCompaction({ preserveFirstUserMessage: 1 }), { code: "cave_compaction_option_invalid" });
  assert.equal(knap.SUMMARY_SCHEMA_VERSION, 2);
  assert.throws(() => knap.renderSummary(), { code: "cave_context_summary_invalid" });
  assert.throws(() => knap.evaluateContextSummary(), { code: "cave_compaction_unsupported" });
  const m = await import("knap/compaction");
  assert.equal(m.normalizeCompaction, knap.normalizeCompaction);
  const mem = await import("knap/memory");
  assert.equal(mem.createMemoryEngine, knap.createMemoryEngine);
});

test('a "provider/id" subagent model resolves from knap\'s catalog when the run brings its streamFn', async () => {
  const child = agent({ id: "child", instructions: "c", model: "anthropic/claude-haiku-4-5", sandbox: "host" });
  const helper = knap.subagent({ name: "helper", description: "d", agent: child });
  const parent = agent({ id: "parent", instructions: "p", model: fauxModel(), sandbox: "host", tools: [helper] });
  const seen = [];
  const script = scriptedStream([{ toolCalls: [{ name: "helper", args: { task: "t" } }] }, { text: "child done" }, { text: "parent done" }]);
  const r = await run(parent, "go", { model: fauxModel(), streamFn: (model, context, options) => (seen.push(`${model.provider}/${model.id}:${model.contextWindow}`), script(model, context, options)) });
  assert.equal(r.text, "parent done");
  assert.match(seen[1], /^anthropic\/claude-haiku-4-5:\d+$/);
  const bad = agent({ id: "bad", instructions: "c", model: "anthropic/no-such-model", sandbox: "host" });
  await assert.rejects(run(bad, "go", { streamFn: scriptedStream([{ text: "x" }]) }), /unknown model "anthropic\/no-such-model"/);
});
