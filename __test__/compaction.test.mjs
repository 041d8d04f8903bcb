// Compaction end to end (issue 12): `budget.onExhausted: "compact"` in run() with a scripted model
// (eviction, then a metered summarizer call, and what the model sees afterwards), the options
// knap refuses, and knap/ai-sdk's bashkit compaction helpers checked against bashkit 0.7.1 itself
// on the same messages and the same AI SDK mock model.
import test from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { MockLanguageModelV3 } from "ai/test";
import * as bashkit from "bashkit";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { run, tool, schema, subagent, validateRunReceipt, normalizeCompaction, DiskDurableStore } from "../lib/index.mjs";
import { fauxModel } from "../lib/testing.mjs";
import { native } from "../lib/native.mjs";
import * as knapAi from "knap/ai-sdk";
import { recordingStream, hostAgent } from "./run-helpers.mjs";

const BIG_OUTPUT = "x".repeat(30_000); // under the 32,768-byte inline limit of a tool result
const LONG_TEXT = "y".repeat(40_000);
const SUMMARY = { schema_version: 2, goal: "fetch and note", state: "fetched once, noted three times", anchors: [{ kind: "fact", value: "fetched" }] };

function compactingRun(turns, budget) {
  const fetchTool = tool({ name: "fetch", description: "fetch a page", input: schema.object({}), effect: "read", allowRepeat: true, execute: () => BIG_OUTPUT });
  const noteTool = tool({ name: "note", description: "take a note", input: schema.object({}), effect: "read", allowRepeat: true, execute: () => "noted" });
  const { streamFn, calls } = recordingStream(turns);
  const def = hostAgent("compacting", [fetchTool, noteTool]);
  const result = run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, budget });
  return { result, calls };
}

// call 1 fetches 30,000 bytes; after call 2 the budget cannot afford 4 more calls of that context,
// so the old fetch output is evicted; call 3 writes 40,000 bytes of text (nothing to evict), so
// after call 4 the history is summarized (call 5, the summarizer), and call 6 answers.
const WORKING = [
  { toolCalls: [{ name: "fetch" }] },
  { toolCalls: [{ name: "note" }] },
  { text: LONG_TEXT, toolCalls: [{ name: "note" }] },
  { toolCalls: [{ name: "note" }] },
];
const OPTIONS = { maxCompactions: 2, keepRecentTokens: 10, minYieldTokens: 1, summaryMaxTokens: 300 };

const CHILD = fileURLToPath(new URL("./fixtures/compaction-child.mjs", import.meta.url));
const text = (m) => (typeof m.content === "string" ? m.content : m.content.map((p) => p.text ?? "").join(""));
const sha256 = (s) => createHash("sha256").update(s).digest("hex");

test('budget.onExhausted "compact": eviction, then one metered summarizer call; the model sees the compacted context', async () => {
  const { result, calls } = compactingRun([...WORKING, { text: JSON.stringify(SUMMARY) }, { text: "done" }], { maxTokens: 30_000, compaction: OPTIONS });
  const r = await result;
  assert.equal(r.stopReason, "complete");
  assert.equal(r.text, "done");
  const receipt = r.receipt;
  assert.deepEqual(receipt.compactions.map((c) => [c.index, c.tier]), [[0, "evicted"], [1, "summarized"]]);
  const [evicted, summarized] = receipt.compactions;

  // Eviction: no provider call; the fetch output became a pointer carrying its digest.
  const fetchDigest = sha256(JSON.stringify([{ type: "text", text: BIG_OUTPUT }]));
  assert.deepEqual(evicted.elidedSegmentDigests, [fetchDigest]);
  assert.equal(evicted.meteredCost, 0);
  assert.equal(evicted.summarySchemaVersion, undefined);
  assert.deepEqual(evicted.pinnedSegmentIds, ["runtime.user_intent.0"]);
  assert.ok(evicted.preTokens - evicted.postTokens > 7_000, `${evicted.preTokens} -> ${evicted.postTokens}`);
  assert.equal(evicted.workingCallsAfter, 3, "working calls 3, 4 and 6 came after it (call 5 is the summarizer)");

  assert.equal(calls.length, 6);
  assert.equal(text(calls[1].messages[2]), BIG_OUTPUT, "before the eviction the model saw the whole output");
  const seen3 = calls[2].messages;
  assert.deepEqual(seen3.map((m) => m.role), ["user", "assistant", "toolResult", "assistant", "toolResult"]);
  assert.equal(text(seen3[2]), `[cave: output of fetch (call scripted-1-0) elided by compaction: 30000 bytes, sha256:${fetchDigest}]`);
  assert.equal(text(seen3[4]), "noted", "the recent tail is verbatim");

  // The summarizer: same system prompt and tools as a working call, summaryMaxTokens, the
  // evicted history plus the instruction; metered on the same budget and on receipt.calls.
  const summarizer = calls[4];
  assert.equal(summarizer.maxTokens, 300);
  assert.equal(summarizer.systemPrompt, calls[3].systemPrompt);
  assert.deepEqual(summarizer.tools, calls[3].tools);
  const history = summarizer.messages.slice(0, -1);
  assert.deepEqual(history.map((m) => m.role), calls[3].messages.map((m) => m.role).concat(["assistant", "toolResult"]));
  assert.equal(text(history[2]), text(seen3[2]), "the summarizer sees the evicted context, not the original output");
  const instruction = summarizer.messages.at(-1);
  assert.equal(instruction.role, "user");
  assert.match(text(instruction), /"schema_version":2/);
  assert.equal(summarized.summarySchemaVersion, 2);
  assert.equal(summarized.meteredCost, 110, "the summarizer's own usage (100 in + 10 out), in tokens");
  assert.equal(summarized.workingCallsAfter, 1);
  assert.ok(summarized.postTokens < summarized.preTokens);
  assert.equal(summarized.modeledNetTokens, (summarized.preTokens - summarized.postTokens) * 1 - summarized.postTokens);
  assert.equal(receipt.calls.length, 6, "the summarizer call is on the receipt");
  assert.equal(receipt.spent, 6 * 110);
  assert.equal(r.inputTokens, 600, "its usage adds to the run totals");

  // After the summary: the pinned prompt, the summary message, then the verbatim last turn.
  const seen6 = calls[5].messages;
  assert.deepEqual(seen6.map((m) => m.role), ["user", "user", "assistant", "toolResult"]);
  assert.equal(text(seen6[0]), "go");
  const rendered = text(seen6[1]);
  assert.ok(rendered.startsWith("<cave-context-summary>\n") && rendered.endsWith("\n</cave-context-summary>"), rendered);
  const shown = JSON.parse(rendered.slice("<cave-context-summary>\n".length, -"\n</cave-context-summary>".length));
  assert.equal(shown.schema_version, 2);
  assert.equal(shown.goal, SUMMARY.goal);
  assert.deepEqual(shown.anchors, SUMMARY.anchors);
  assert.equal(text(seen6[3]), "noted");
  assert.ok(!JSON.stringify(seen6).includes("yyyyyyyy"), "the 40,000-byte turn was summarized away");
  assert.doesNotThrow(() => validateRunReceipt(receipt));
});

test("a summary that does not parse is paid for and metered, and the context stays as it was", async () => {
  const { result, calls } = compactingRun([...WORKING, { text: "a summary in prose" }, { text: "done" }], { maxTokens: 30_000, compaction: OPTIONS });
  const r = await result;
  assert.equal(r.text, "done");
  assert.deepEqual(r.receipt.compactions.map((c) => c.tier), ["evicted"]);
  assert.equal(r.receipt.calls.length, 6);
  assert.equal(r.receipt.spent, 6 * 110);
  assert.ok(JSON.stringify(calls[5].messages).includes("yyyyyyyy"), "the history was not replaced");
});

test('budget.onExhausted "stop" never compacts: every call sees the whole history', async () => {
  const { result, calls } = compactingRun([...WORKING, { text: "done" }], { maxTokens: 30_000, onExhausted: "stop", compaction: OPTIONS });
  const r = await result;
  assert.equal(r.text, "done");
  assert.deepEqual(r.receipt.compactions, []);
  assert.equal(calls.length, 5);
  for (const c of calls.slice(1)) assert.equal(text(c.messages[2]), BIG_OUTPUT);
  assert.deepEqual(calls.map((c) => c.messages.length), [1, 3, 5, 7, 9]);
});

test("summarizerModel: the summary goes to that model (from knap's catalog with the run's streamFn), priced for it; the router sees it as the compaction's currentModel", async () => {
  const routed = [];
  const modelRouter = (input) => (routed.push({ role: input.role, currentModel: input.currentModel }), { model: input.currentModel, reason: "keep", signals: [] });
  const { streamFn, calls } = recordingStream([...WORKING, { text: JSON.stringify(SUMMARY) }, { text: "done" }]);
  const fetchTool = tool({ name: "fetch", description: "fetch a page", input: schema.object({}), effect: "read", allowRepeat: true, execute: () => BIG_OUTPUT });
  const noteTool = tool({ name: "note", description: "take a note", input: schema.object({}), effect: "read", allowRepeat: true, execute: () => "noted" });
  const def = hostAgent("compacting", [fetchTool, noteTool]);
  const budget = { maxTokens: 30_000, compaction: { ...OPTIONS, summarizerModel: "anthropic/claude-sonnet-4-5" } };
  const r = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn, budget, modelRouter });
  assert.equal(r.text, "done");
  assert.deepEqual(r.receipt.compactions.map((c) => c.tier), ["evicted", "summarized"]);
  assert.deepEqual(calls.map((c) => c.model.id), ["faux-model", "faux-model", "faux-model", "faux-model", "claude-sonnet-4-5", "faux-model"].map((id) => (id === "faux-model" ? fauxModel().id : id)));
  assert.equal(calls[4].maxTokens, 300);
  const summaryCall = r.receipt.calls[4];
  assert.equal(summaryCall.model, "claude-sonnet-4-5");
  assert.equal(summaryCall.unpriced, false, "priced from the catalog entry of the summarizer");
  assert.ok(summaryCall.estimatedUsd > 0);
  assert.equal(r.receipt.calls[5].unpriced, true, "the working model stays the run's own");
  assert.deepEqual(routed.filter((x) => x.role === "compaction"), [{ role: "compaction", currentModel: "anthropic/claude-sonnet-4-5" }]);
  assert.equal(routed.filter((x) => x.role === "working").length, 5);
  assert.doesNotThrow(() => validateRunReceipt(r.receipt));

  // A model object works as well; an unknown "provider/id" fails the run before any call.
  const own = { ...fauxModel(), id: "summarizer-1", name: "summarizer" };
  const second = recordingStream([...WORKING, { text: JSON.stringify(SUMMARY) }, { text: "done" }]);
  const r2 = await run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn: second.streamFn, budget: { ...budget, compaction: { ...OPTIONS, summarizerModel: own } } });
  assert.deepEqual(r2.receipt.compactions.map((c) => c.tier), ["evicted", "summarized"]);
  assert.equal(second.calls[4].model, own);
  const third = recordingStream([{ text: "never" }]);
  await assert.rejects(run(def, "go", { ensureRuntime: false, model: fauxModel(), streamFn: third.streamFn, budget: { maxTokens: 30_000, compaction: { summarizerModel: "anthropic/no-such-model" } } }), /unknown model "anthropic\/no-such-model"/);
  assert.equal(third.calls.length, 0);
});

test('mode "new-context": the newContext callback persists the window and seeds the next context; no provider call', async () => {
  const saved = [];
  const newContext = async ({ messages, generation, agentPath }) => {
    saved.push({ generation, agentPath, roles: messages.map((m) => m.role), bytes: JSON.stringify(messages).length });
    return `Context ${generation} was saved (${messages.length} messages). Take the next note.`;
  };
  const { result, calls } = compactingRun([...WORKING.slice(0, 2), { text: "done" }], { maxTokens: 30_000, compaction: { mode: "new-context", newContext, keepRecentTokens: 10, minYieldTokens: 1 } });
  const r = await result;
  assert.equal(r.text, "done");
  assert.deepEqual(r.receipt.compactions.map((c) => [c.tier, c.meteredCost, c.pinnedSegmentIds]), [["new-context", 0, ["runtime.user_intent.0"]]]);
  assert.equal(r.receipt.compactions[0].summarySchemaVersion, undefined);
  assert.equal(r.receipt.calls.length, 3, "the rollover calls no model");
  // After the first turn the budget cannot afford four calls of a 30,000-byte context, and there
  // is nothing older than that turn to evict: the window rolls over at once.
  assert.deepEqual(saved.map((s) => [s.generation, s.agentPath, s.roles]), [[1, [], ["user", "assistant", "toolResult"]]]);
  assert.ok(saved[0].bytes > 30_000, "the window it saved holds the whole fetch output");
  assert.equal(text(calls[0].messages[0]), "go");
  const seen = calls[1].messages;
  assert.deepEqual(seen.map((m) => m.role), ["user", "user"]);
  assert.equal(text(seen[0]), "go");
  assert.equal(text(seen[1]), "Context 1 was saved (3 messages). Take the next note.");
  assert.deepEqual(calls[2].messages.map((m) => m.role), ["user", "user", "assistant", "toolResult"], "later turns join the new context");
  assert.doesNotThrow(() => validateRunReceipt(r.receipt));

  // A seed that is not a string fails the run with a code naming it.
  const bad = compactingRun([...WORKING.slice(0, 2), { text: "never" }], { maxTokens: 30_000, compaction: { mode: "new-context", newContext: async () => 42, keepRecentTokens: 10, minYieldTokens: 1 } });
  await assert.rejects(bad.result, (e) => {
    assert.equal(e.code, "cave_agent_run_failed");
    assert.match(e.message, /^cave_agent_run_failed: cave_compaction_new_context_invalid: newContext must resolve to the seed of the new context \(a string\), got number/);
    return true;
  });
  assert.equal(bad.calls.length, 1, "no call after the failed rollover");
});

test("compaction options are checked by name before any call; the reference's code for bad values", async () => {
  for (const [compaction, pattern] of [
    [{ mode: "new-context" }, /^cave_compaction_option_invalid:newContext: mode "new-context" needs a newContext\(\{messages, generation\}\) callback/],
    [{ newContext: async () => "seed" }, /^cave_compaction_option_invalid:mode: newContext is called only with mode "new-context"/],
    [{ mode: "rollover", newContext: async () => "seed" }, /^cave_compaction_option_invalid:mode: must be "summarize" or "new-context"/],
    [{ mode: "new-context", newContext: "seed" }, /^cave_compaction_option_invalid:newContext: must be a function/],
    [{ summarizerModel: 42 }, /^cave_compaction_option_invalid:summarizerModel: must be a "provider\/id" string or a model object/],
    [{ keepRecentTokens: 0 }, /^cave_compaction_option_invalid:keepRecentTokens: must be a positive integer/],
  ]) {
    const { result, calls } = compactingRun([{ text: "never" }], { maxTokens: 30_000, compaction });
    await assert.rejects(result, (e) => {
      assert.equal(e.code, "cave_compaction_option_invalid", e.message);
      assert.match(e.message, pattern);
      return true;
    });
    assert.equal(calls.length, 0, `${JSON.stringify(compaction)}: refused before any provider call`);
  }
  const normalized = normalizeCompaction({ mode: "new-context", newContext: async () => "s", summarizerModel: "anthropic/claude-haiku-4-5" });
  assert.equal(normalized.mode, "new-context");
  assert.equal(typeof normalized.newContext, "function");
  assert.equal(normalized.summarizerModel, "anthropic/claude-haiku-4-5");
  assert.throws(() => normalizeCompaction({ mode: "new-context" }), { code: "cave_compaction_option_invalid" });
});

test("a subagent compacts on the wallet carved from the root budget", async () => {
  const fetchTool = tool({ name: "fetch", description: "fetch a page", input: schema.object({}), effect: "read", allowRepeat: true, execute: () => BIG_OUTPUT });
  const noteTool = tool({ name: "note", description: "take a note", input: schema.object({}), effect: "read", allowRepeat: true, execute: () => "noted" });
  const child = hostAgent("researcher", [fetchTool, noteTool]);
  const researcher = subagent({ name: "research", description: "research a topic", agent: child, maxTokens: 30_000 });
  const { streamFn, calls } = recordingStream([{ toolCalls: [{ name: "research", args: { task: "look it up" } }] }, ...WORKING.slice(0, 2), { text: "found it" }, { text: "parent done" }]);
  const r = await run(hostAgent("lead", [researcher]), "go", { ensureRuntime: false, model: fauxModel(), streamFn, budget: { maxTokens: 200_000, compaction: { keepRecentTokens: 10 } } });
  assert.equal(r.text, "parent done");
  assert.deepEqual(r.receipt.compactions, [], "the root had room");
  const sub = r.receipt.subagents[0];
  assert.deepEqual(sub.compactions.map((c) => [c.tier, c.workingCallsAfter]), [["evicted", 1]]);
  assert.match(text(calls[3].messages[2]), /^\[cave: output of fetch \(call scripted-\d+-0\) elided by compaction: 30000 bytes, sha256:[0-9a-f]{64}\]$/);
  assert.doesNotThrow(() => validateRunReceipt(r.receipt));
});

test("durable: a process killed after a compaction resumes from the compacted context without paying for the summary again", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-compaction-crash-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const budget = { maxTokens: 30_000, compaction: OPTIONS };
  const turns = [...WORKING, { text: JSON.stringify(SUMMARY) }, { text: "never: the process dies here" }];
  const child = spawn(process.execPath, [CHILD, dir, "compact-1", JSON.stringify(turns), JSON.stringify(budget)], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  await new Promise((resolve, reject) => {
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("crash\n")) resolve();
    });
    child.on("exit", () => reject(new Error(`the child exited before the crash point: ${out}`)));
  });
  child.kill("SIGKILL");
  await new Promise((resolve) => child.once("close", resolve));
  const store = new DiskDurableStore(dir);
  const journal = fs.readFileSync(path.join(store.runDir("compact-1"), "journal.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const kinds = journal.map((e) => (e.kind ? `${e.type}:${e.kind}` : e.type));
  // Each compaction leaves a snapshot of the new context: the eviction right after its turn, the
  // summary right after the summarizer's settlement, both durable before the next call.
  const first = kinds.indexOf("snapshot");
  const at = kinds.lastIndexOf("snapshot");
  assert.deepEqual(kinds.slice(first - 1, first + 2), ["turn", "snapshot", "call_started:model"]);
  assert.deepEqual(kinds.slice(at - 2, at + 2), ["call_started:compaction", "call_settled:compaction", "snapshot", "call_started:model"]);
  assert.equal(kinds.filter((k) => k === "snapshot").length, 2);
  assert.equal(kinds.at(-1), "call_started:model", "killed inside the call after the compaction");

  const fetchTool = tool({ name: "fetch", description: "fetch a page", input: schema.object({}), effect: "read", allowRepeat: true, execute: () => BIG_OUTPUT });
  const noteTool = tool({ name: "note", description: "take a note", input: schema.object({}), effect: "read", allowRepeat: true, execute: () => "noted" });
  const { streamFn, calls } = recordingStream([{ text: "done" }]);
  const r = await run(hostAgent("compacting", [fetchTool, noteTool]), "go", { ensureRuntime: false, model: fauxModel(), streamFn, budget, durable: { runId: "compact-1", store } });
  assert.equal(r.text, "done");
  assert.equal(r.resumed, true);
  assert.equal(calls.length, 1, "no second summarizer call");
  assert.deepEqual(calls[0].messages.map((m) => m.role), ["user", "user", "assistant", "toolResult"]);
  assert.ok(text(calls[0].messages[1]).startsWith("<cave-context-summary>\n"));
  assert.deepEqual(r.receipt.compactions, [], "this attempt compacted nothing");
  assert.equal(r.receipt.resume.priorCalls, 5, "four working calls and the summarizer, settled before the crash");
  assert.equal(r.receipt.spent, 6 * 110, "the summarizer's spend is counted once");
  assert.doesNotThrow(() => validateRunReceipt(r.receipt));
});

// ---- knap/ai-sdk against bashkit 0.7.1 ----

/** An AI SDK mock model that answers every call with `reply` and records each prompt. */
function summarizer(reply = "SUMMARY TEXT") {
  const prompts = [];
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      if (reply instanceof Error) throw reply;
      return { content: [{ type: "text", text: reply }], finishReason: { unified: "stop", raw: undefined }, usage: { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } }, warnings: [] };
    },
  });
  return { model, prompts };
}

const toolCall = (id, toolName, input) => ({ role: "assistant", content: [{ type: "tool-call", toolCallId: id, toolName, input }] });
const toolResult = (id, toolName, value) => ({ role: "tool", content: [{ type: "tool-result", toolCallId: id, toolName, output: { type: "text", value } }] });

/** 16 messages: text turns, file tools (read/write/edit), a long tool input, a tool call and its result at the split point. */
function conversation() {
  return [
    { role: "user", content: "Refactor the parser in src/parse.ts — keep the API" },
    { role: "assistant", content: [{ type: "text", text: "Reading it first." }] },
    toolCall("c1", "Read", { file_path: "src/parse.ts" }),
    toolResult("c1", "Read", "export function parse(s) { return s.split(','); }\n".repeat(40)),
    toolCall("c2", "Write", { file_path: "src/<new>&parse.ts", content: "z".repeat(900) }),
    toolResult("c2", "Write", "ok"),
    { role: "user", content: [{ type: "text", text: "Also add tests, ünïcödé and all" }] },
    toolCall("c3", "Edit", { file_path: "test/parse.test.ts", old_string: "a", new_string: "b" }),
    toolResult("c3", "Edit", "edited"),
    toolCall("c4", "Bash", { command: "npm test" }),
    toolResult("c4", "Bash", "1 passing"),
    { role: "assistant", content: "Tests pass." },
    { role: "user", content: "Now document it" },
    toolCall("c5", "Read", { file_path: "README.md" }),
    toolResult("c5", "Read", "# parser"),
    { role: "assistant", content: "Documented." },
  ];
}

async function both(messages, config, state) {
  const k = summarizer();
  const b = summarizer();
  const knap = await knapAi.compactConversation(messages, { ...config, summarizerModel: k.model }, state);
  const ref = await bashkit.compactConversation(messages, { ...config, summarizerModel: b.model }, state);
  return { knap, ref, knapPrompts: k.prompts, refPrompts: b.prompts };
}

test("compactConversation: the same split, summarizer prompt and new history as bashkit's", async () => {
  for (const protectRecentMessages of [undefined, 3, 6, 11, 15]) {
    const config = { maxTokens: 100, protectRecentMessages, taskContext: "Refactor the parser", summaryInstructions: "Keep file paths." };
    const { knap, ref, knapPrompts, refPrompts } = await both(conversation(), config);
    assert.equal(knap.didCompact, true, `protect ${protectRecentMessages}`);
    assert.equal(knapPrompts.length, 1);
    assert.deepEqual(knapPrompts, refPrompts, `protect ${protectRecentMessages}: the summarizer prompt`);
    assert.deepEqual(knap, ref, `protect ${protectRecentMessages}: messages and state`);
    // The kept tail never starts on a tool result.
    assert.notEqual(knap.messages[2].role, "tool");
  }
  // A later compaction carries the previous summary, and no task context or instructions.
  const { knap, ref, knapPrompts, refPrompts } = await both(conversation(), { maxTokens: 100, protectRecentMessages: 1 }, { conversationSummary: "EARLIER SUMMARY" });
  assert.deepEqual(knapPrompts, refPrompts);
  assert.deepEqual(knap, ref);
  assert.match(knapPrompts[0][0].content[0].text, /<previous-summary>\nEARLIER SUMMARY\n<\/previous-summary>/);
  assert.match(knapPrompts[0][0].content[0].text, /Read: README\.md, src\/parse\.ts\nModified: src\/&lt;new&gt;&amp;parse\.ts, test\/parse\.test\.ts/);
});

test("compactConversation: below the threshold, or with everything protected, nothing is summarized", async () => {
  const messages = conversation();
  for (const config of [{ maxTokens: 1_000_000 }, { maxTokens: 100, protectRecentMessages: 16 }, { maxTokens: 100, protectRecentMessages: 40 }]) {
    const { knap, ref, knapPrompts } = await both(messages, config);
    assert.equal(knap.didCompact, false);
    assert.equal(knap.messages, messages, "the same array back");
    assert.deepEqual(knap, ref);
    assert.equal(knapPrompts.length, 0, "no summarizer call");
  }
  // compactionThreshold scales the limit: the same conversation compacts at a lower threshold.
  const tokens = knapAi.getContextStatus(messages, 10_000).usedTokens;
  const config = { maxTokens: Math.ceil(tokens / 0.5), compactionThreshold: 0.5 };
  const { knap, ref } = await both(messages, config);
  assert.equal(knap.didCompact, ref.didCompact);
  assert.equal(knap.didCompact, true);
  const { knap: above } = await both(messages, { maxTokens: tokens * 2 + 10, compactionThreshold: 0.5 });
  assert.equal(above.didCompact, false);
});

test("createAutoCompaction: compacts only when critical, keeps the summary, retries once then throws CompactionError", async () => {
  const messages = conversation();
  const tokens = knapAi.getContextStatus(messages, 10_000).usedTokens;
  const s = summarizer("FIRST");
  const auto = knapAi.createAutoCompaction({ maxTokens: tokens * 10, summarizerModel: s.model });
  assert.deepEqual(await auto.prepareStep({ messages }), {});
  assert.equal(s.prompts.length, 0);

  const s2 = summarizer("FIRST");
  const auto2 = knapAi.createAutoCompaction({ maxTokens: tokens, summarizerModel: s2.model });
  const b2 = summarizer("FIRST");
  const ref2 = bashkit.createAutoCompaction({ maxTokens: tokens, summarizerModel: b2.model });
  const step = await auto2.prepareStep({ messages });
  assert.deepEqual(step, await ref2.prepareStep({ messages }));
  assert.match(step.messages[0].content, /^\[Previous conversation summary\]\n\nFIRST\n\n\[Continuing from recent messages below\.\.\.\]$/);
  assert.deepEqual(auto2.getState(), { conversationSummary: "FIRST" });
  assert.deepEqual(s2.prompts, b2.prompts);

  const failing = summarizer(new Error("provider down"));
  const auto3 = knapAi.createAutoCompaction({ maxTokens: tokens, summarizerModel: failing.model });
  await assert.rejects(auto3.prepareStep({ messages }), (e) => {
    assert.ok(e instanceof knapAi.CompactionError);
    assert.equal(e.name, "CompactionError");
    assert.equal(e.message, "Conversation compaction failed after 2 attempts");
    assert.match(String(e.cause?.message ?? e.cause), /provider down/);
    return true;
  });
  // generateText retries a failing call itself (maxRetries 2 by default), then the helper tries twice.
  assert.equal(failing.prompts.length % 2, 0);
  assert.ok(failing.prompts.length >= 2);
  assert.deepEqual(auto3.getState(), { conversationSummary: "" });
});

test("the compaction helpers refuse a key bashkit's CompactConversationConfig does not have", async () => {
  const m = summarizer().model;
  const unknown = (where, key, near) => (e) => {
    assert.equal(e.code, "cave_config_unknown_key", e.message);
    assert.match(e.message, new RegExp(`^cave_config_unknown_key: ${where} does not know the option "${key}"\n`));
    if (near) assert.match(e.message, new RegExp(`did you mean "${near}"`));
    return true;
  };
  // generateText's maxRetries is not a compaction option: nothing would read it.
  assert.throws(() => knapAi.createAutoCompaction({ maxTokens: 10, summarizerModel: m, maxRetries: 0 }), unknown("createAutoCompaction", "maxRetries"));
  assert.throws(() => knapAi.createAutoCompaction({ maxTokens: 10, summarizerModel: m, protectRecent: 2 }), unknown("createAutoCompaction", "protectRecent", "protectRecentMessages"));
  await assert.rejects(knapAi.compactConversation(conversation(), { maxTokens: 100, summarizerModel: m, threshold: 0.5 }), unknown("compactConversation", "threshold", "compactionThreshold"));
  assert.throws(() => knapAi.createCompactConfig("gpt-4", m, { taskContxt: "x" }), unknown("createCompactConfig overrides", "taskContxt", "taskContext"));
  const models = new Map([["a/b", { contextLength: 10 }]]);
  assert.throws(() => knapAi.createCompactConfigFromModels("a/b", m, models, { maxToken: 5 }), unknown("createCompactConfigFromModels overrides", "maxToken", "maxTokens"));
  // Every key bashkit documents is taken.
  const all = { maxTokens: 10, compactionThreshold: 0.9, protectRecentMessages: 2, summarizerModel: m, taskContext: "t", summaryInstructions: "s" };
  assert.equal(typeof knapAi.createAutoCompaction(all).prepareStep, "function");
  assert.equal(knapAi.createCompactConfig("gpt-4", m, { ...all, summarizerModel: undefined }).taskContext, "t");
});

test("createCompactConfig(FromModels) and MODEL_CONTEXT_LIMITS match bashkit's", () => {
  const m = summarizer().model;
  // The same ids; the windows are knap's catalog's where it has the model (gemini-2.5-* is
  // 1,048,576 there, 1,000,000 in bashkit's static table), else bashkit's.
  assert.deepEqual(Object.keys(knapAi.MODEL_CONTEXT_LIMITS), Object.keys(bashkit.MODEL_CONTEXT_LIMITS));
  for (const [id, window] of Object.entries(bashkit.MODEL_CONTEXT_LIMITS)) {
    const catalog = ["anthropic", "openai", "google"].map((p) => native.catalogContextWindow(p, id)).find(Boolean);
    assert.equal(knapAi.MODEL_CONTEXT_LIMITS[id], catalog ?? window, id);
  }
  const same = ["claude-sonnet-4-5", "gpt-4", "unknown-model"].filter((id) => knapAi.MODEL_CONTEXT_LIMITS[id] === bashkit.MODEL_CONTEXT_LIMITS[id]);
  assert.ok(same.length >= 2, `${same}`);
  for (const id of same) {
    assert.deepEqual(knapAi.createCompactConfig(id, m, { protectRecentMessages: 4 }), bashkit.createCompactConfig(id, m, { protectRecentMessages: 4 }));
  }
  const models = new Map([["anthropic/claude-sonnet-4-5", { contextLength: 1_000_000 }]]);
  assert.deepEqual(knapAi.createCompactConfigFromModels("anthropic/claude-sonnet-4-5", m, models), bashkit.createCompactConfigFromModels("anthropic/claude-sonnet-4-5", m, models));
  assert.equal(knapAi.createCompactConfigFromModels("anthropic/claude-sonnet-4-5", m, models).maxTokens, 1_000_000);
  let refMessage;
  try {
    bashkit.createCompactConfigFromModels("nope/nothing", m, models);
  } catch (e) {
    refMessage = e.message;
  }
  assert.throws(() => knapAi.createCompactConfigFromModels("nope/nothing", m, models), { message: refMessage });
});
