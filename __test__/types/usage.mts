// Compiled by types.test.mjs with `tsc --noEmit`: the seed's code must type-check as written.
import { agent, auto, run, stream, shellTools, decideToolCall, tool, schema, subagent, output, CavemanRunError, TOOL_POLICY_TIMEOUT_MS, DiskDurableStore } from "knap";
import type { ToolCallPolicy, RunResult, RunOptions } from "knap";
import { fauxModel, scriptedStream } from "knap/testing";

declare const process: { cwd(): string };
import { SqlDurableStore } from "knap/durable";

const reviewer = agent({
  id: "reviewer",
  instructions: "Read the workspace and explain what changed.",
  model: auto(),
  sandbox: "host",
  tools: shellTools({ workspace: process.cwd(), tools: ["bash", "read_file", "read_tool_output"] }),
});

export async function main(): Promise<void> {
  await run(reviewer, "count the lines in notes.txt");
  await run(reviewer, "count the lines", {
    toolPolicy: ({ name, effect, agentPath }) => (effect === "write" ? { deny: "read_only_review" } : undefined),
  });
  const policy: ToolCallPolicy = () => undefined;
  const decision = await decideToolCall(policy, {
    runId: "r1", agentId: "reviewer", agentPath: [], toolCallId: "c1",
    name: "write_file", effect: "write", args: { path: "out.txt" },
  });
  console.log(decision?.reason, TOOL_POLICY_TIMEOUT_MS);
  const lookup = tool({ name: "lookup", description: "d", input: schema.object({ q: schema.string(), n: schema.optional(schema.integer()) }), effect: "read", execute: async ({ q }: { q: string }) => q });
  const child = agent({ id: "child", instructions: "c", model: "anthropic/claude-haiku-4-5", tools: [lookup] });
  const parent = agent({ id: "parent", instructions: "p", model: auto(), tools: [subagent({ name: "delegate", description: "d", agent: child })], output: output({ maxTokens: 100 }) });
  const options: RunOptions = { model: fauxModel({ priced: true }), streamFn: scriptedStream([{ text: "hi" }]), budget: { maxUsd: 1 }, durable: { runId: "r-1", store: new DiskDurableStore("/tmp/x") } };
  const result: RunResult = await run(parent, "go", options);
  console.log(result.receipt.tools.map((t) => t.denied ?? 0), result.stopReason);
  for await (const e of stream(parent, "go", options)) if (e.type === "run_error") console.log(e.code);
  try { await run(parent, "go"); } catch (error) { if (error instanceof CavemanRunError) console.log(error.code, error.receipt.calls.length); }
  console.log(SqlDurableStore.schema("sqlite"));
}

import { createConversation, memory, agentStaticContextDiagnostics, httpExecutionBackend } from "knap";
export function more(): void {
  const conversation = createConversation();
  const withMemory = agent({ id: "m", instructions: "i", model: auto(), memory: memory({ namespace: "notes" }) });
  const d = agentStaticContextDiagnostics(withMemory);
  console.log(conversation.sessionId, d.staticContextBytes, httpExecutionBackend({ url: "https://x", token: "t" }).id);
  void run(withMemory, "go", { conversation });
}

// The root's smaller exports.
import { validateRunReceipt, renderReceipt, normalizeAgentInput, sha256, stableStringify, durableRunSummary, AgentRunController, createBudgetController, artifact, OUTPUT_CLAMP_FLOOR_TOKENS } from "knap";
{
  const r = await run(reviewer, "go");
  const receipt = validateRunReceipt(r.receipt);
  const text: string = renderReceipt(receipt);
  const n = normalizeAgentInput("hi");
  const bytes: number = n.textBytes;
  const digest: string = sha256(stableStringify({ a: 1 }));
  const summary = durableRunSummary([]);
  if (summary.status === "completed") summary.result.text.toUpperCase();
  const c = new AgentRunController();
  c.steer("x");
  const b = createBudgetController();
  const floor: 256 = OUTPUT_CLAMP_FLOOR_TOKENS;
  void [text, bytes, digest, b, floor, artifact({ strategy: "verbatim" }).strategy];
}

// Memory engine and plugins.
import { createMemoryEngine, createInMemoryMemoryStorage, memory as declareMemory } from "knap";
import type { MemoryEngine, MemoryHit } from "knap";
import { loadAgentEnvironment, applyAgentEnvironment } from "knap/plugins";
{
  const engine: MemoryEngine = createMemoryEngine({ scope: { agentId: "a", namespace: "n" }, ttlMs: 1000, storage: createInMemoryMemoryStorage() });
  const hits: readonly MemoryHit[] = await engine.search("x");
  const withMemory = agent({ id: "m", instructions: "x", model: auto(), memory: declareMemory({ namespace: "n" }) });
  await run(withMemory, "hi", { memory: { engine }, printReceipt: false });
  const env = await loadAgentEnvironment({ cwd: "." });
  const applied = applyAgentEnvironment(withMemory, env);
  void [hits.length, applied.id, env.skills.map((s) => s.id)];
}

// The remote durable stores, as the reference types them.
import { HttpDurableStore } from "knap";
import type { HttpDurableStoreOptions } from "knap";
import { ObjectDurableStore } from "knap/durable";
import type { ObjectStorage, DurableStore } from "knap/durable";
export function remoteStores(): DurableStore[] {
  const options: HttpDurableStoreOptions = { url: "https://journal.example.com", token: "t", lockTtlMs: 30_000 };
  const objects = new Map<string, Uint8Array>();
  const storage: ObjectStorage = {
    conditionalPut: true,
    get: async (key) => objects.get(key),
    put: async (key, data, opts) => (opts?.ifMatch === "" && objects.has(key) ? false : (objects.set(key, data), true)),
    list: async (prefix) => [...objects.keys()].filter((k) => k.startsWith(prefix)),
  };
  return [new HttpDurableStore(options), new ObjectDurableStore({ storage, prefix: "runs/" })];
}
