// The root names existing @caveman-ai/agent code imports all resolve, and the smaller ones work.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as knap from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";

const { agent, run, shellTools, createConversation, agentStaticContextDiagnostics, memory, memoryTTLMilliseconds, httpExecutionBackend } = knap;

test("every root import user code depends on resolves (reference §8.1)", () => {
  const names = [
    "agent", "auto", "tool", "schema", "output", "subagent", "memory", "shellTools", "run", "stream",
    "localExecutionBackend", "httpExecutionBackend", "createConversation", "createMemoryEngine",
    "createInMemoryMemoryStorage", "createFileMemoryAdapter", "memoryTTLMilliseconds", "decideToolCall",
    "agentStaticContextDiagnostics", "context", "CavemanRunError", "TOOL_POLICY_TIMEOUT_MS",
    "DiskDurableStore", "SqlDurableStore",
  ];
  assert.deepEqual(names.filter((n) => typeof knap[n] === "undefined"), []);
});

test("a conversation carries its transcript between runs and refuses concurrent use", async () => {
  const def = agent({ id: "chat", instructions: "Be brief.", model: fauxModel(), sandbox: "host" });
  const conversation = createConversation();
  assert.match(conversation.sessionId, /^conversation-[0-9a-f-]{36}$/);
  const contexts = [];
  const script = scriptedStream([{ text: "hello" }, { text: "again" }]);
  const streamFn = (model, context, options) => {
    contexts.push(context.messages.map((m) => `${m.role}:${m.content[0]?.text ?? ""}`));
    return script(model, context, options);
  };
  const first = await run(def, "hi", { model: fauxModel(), streamFn, conversation });
  const second = await run(def, "and?", { model: fauxModel(), streamFn, conversation });
  assert.equal(first.text, "hello");
  assert.equal(second.text, "again");
  assert.deepEqual(contexts, [["user:hi"], ["user:hi", "assistant:hello", "user:and?"]]);
  assert.deepEqual(conversation.snapshot().messages.map((m) => m.role), ["user", "assistant", "user", "assistant"]);

  const pending = run(def, "x", { model: fauxModel(), streamFn: scriptedStream([{ text: "a" }]), conversation });
  await assert.rejects(run(def, "y", { model: fauxModel(), streamFn, conversation }), { code: "cave_conversation_in_use" });
  await pending;
  await assert.rejects(run(def, "z", { model: fauxModel(), streamFn, conversation: {} }), { code: "cave_conversation_invalid" });
});

test("agentStaticContextDiagnostics counts the prompt and tool schemas without a model", () => {
  const bare = agent({ id: "a", instructions: "Hello", model: knap.auto() });
  const withTools = agent({ id: "a", instructions: "Hello", model: knap.auto(), tools: shellTools({ workspace: "/tmp" }) });
  const a = agentStaticContextDiagnostics(bare);
  const b = agentStaticContextDiagnostics(withTools);
  assert.equal(a.availableToolCount, 0);
  assert.equal(a.basis, "system_prompt_plus_active_tool_definitions_json_utf8");
  const withMemory = agentStaticContextDiagnostics(agent({ id: "a", instructions: "Hello", model: knap.auto(), memory: memory({ namespace: "n" }) }));
  assert.equal(withMemory.availableToolCount, 3);
  assert.ok(withMemory.staticContextBytes > a.staticContextBytes + 300);
  assert.equal(b.availableToolCount, 6);
  assert.equal(a.staticContextBytes, "Hello".length + "[]".length);
  assert.ok(b.staticContextBytes > a.staticContextBytes + 1000);
});

test("memory() validates as the reference; the engine entry points say they are missing", () => {
  assert.equal(memoryTTLMilliseconds("30d"), 30 * 86_400_000);
  assert.equal(memoryTTLMilliseconds("5m"), 300_000);
  assert.throws(() => memoryTTLMilliseconds("0d"), { code: "cave_memory_ttl_invalid" });
  assert.equal(memory({ namespace: "notes" }).ttl, "30d");
  assert.throws(() => memory({ namespace: "Bad Name" }), /caveman agent: invalid memory namespace/);
  assert.throws(() => memory({ namespace: "n", provenance: "cloud" }), { code: "cave_memory_provenance_unsupported" });
  assert.throws(() => memory({ namespace: "n", consent: "shared" }), { code: "cave_memory_consent_unsupported" });
  assert.throws(() => memory({ namespace: "n", ttl: "1y" }), /caveman agent: memory ttl must use positive m, h, or d duration/);
  assert.throws(() => memory({ namespace: "n", recallBudget: -1 }), /caveman agent: memory recallBudget must be a non-negative integer/);
  assert.throws(() => knap.createMemoryEngine({ scope: { agentId: "a.b", namespace: "n" }, ttlMs: 1 }), { code: "cave_memory_agent_invalid" });
});

test("httpExecutionBackend validates its options; shellTools runs on it", () => {
  assert.throws(() => httpExecutionBackend({ token: "t" }), { code: "cave_execution_backend_http_url_required" });
  assert.throws(() => httpExecutionBackend({ url: "https://x.test" }), { code: "cave_execution_backend_http_token_required" });
  assert.throws(() => httpExecutionBackend({ url: "http://example.com", token: "t" }), { code: "cave_execution_backend_http_insecure_url" });
  const backend = httpExecutionBackend({ url: "http://127.0.0.1:9/", token: "t" });
  assert.equal(backend.id, "http");
  assert.equal(shellTools({ workspace: "/tmp", executionBackend: backend }).length, 6);
});
