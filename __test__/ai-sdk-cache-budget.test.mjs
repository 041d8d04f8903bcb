// Caching (stats, TTL, LRU, per-tool switches, invalidation by writes) and budget tracking
// (pricing sources, model-id matching, stopping a loop).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateText, stepCountIs } from "ai";
import {
  createLocalSandbox,
  createAgentTools,
  cached,
  LRUCacheStore,
  createBudgetTracker,
  fetchOpenRouterModels,
  getModelContextLength,
  resetModelRegistryCache,
} from "knap/ai-sdk";
import { call, runTool, runTools, scripted, tempWorkspace, usage, withClock, setup } from "./ai-sdk-helpers.mjs";


// --------------------------------------------------------------------------------------- cache

test("cache: true caches Read, Glob, Grep (not Bash/Write/Edit); stats count hits and misses", async () => {
  const { ws, tools } = await setup({ "a.txt": "one\n" }, { cache: true });
  try {
    assert.equal(typeof tools.Read.getStats, "function");
    assert.equal(typeof tools.Glob.getStats, "function");
    assert.equal(typeof tools.Grep.getStats, "function");
    assert.equal(tools.Bash.getStats, undefined);
    assert.equal(tools.Write.getStats, undefined);
    assert.equal(tools.Edit.getStats, undefined);
    await runTool(tools, "Read", { file_path: "a.txt" });
    // The file changes behind the tools' back: the cached result is served (that is caching).
    writeFileSync(join(ws.dir, "a.txt"), "changed outside\n");
    const second = await runTool(tools, "Read", { file_path: "a.txt" });
    assert.equal(second.content, "one\n");
    await runTool(tools, "Read", { file_path: "a.txt", offset: 1 });
    assert.deepEqual(tools.Read.getStats(), { hits: 1, misses: 2, hitRate: 1 / 3, size: 2 });
    await runTool(tools, "Glob", { pattern: "*.txt" });
    assert.deepEqual(tools.Glob.getStats(), { hits: 0, misses: 1, hitRate: 0, size: 3 }, "size is the shared store's");
    assert.deepEqual(await tools.Grep.getStats(), { hits: 0, misses: 0, hitRate: 0, size: 3 }, "awaitable as in bashkit");
  } finally {
    ws.cleanup();
  }
});

test("cache: an Edit invalidates a cached Read of that file (bashkit served the old content)", async () => {
  const { ws, tools } = await setup({ "a.txt": "alpha\n", "b.txt": "beta\n" }, { cache: true });
  try {
    assert.equal((await runTool(tools, "Read", { file_path: "a.txt" })).content, "alpha\n");
    assert.equal((await runTool(tools, "Read", { file_path: "b.txt" })).content, "beta\n");
    await runTool(tools, "Edit", { file_path: "a.txt", old_string: "alpha", new_string: "ALPHA" });
    assert.equal((await runTool(tools, "Read", { file_path: "a.txt" })).content, "ALPHA\n");
    assert.equal((await runTool(tools, "Read", { file_path: join(ws.dir, "b.txt") })).content, "beta\n");
    await runTool(tools, "Read", { file_path: "b.txt" });
    assert.deepEqual(tools.Read.getStats(), { hits: 1, misses: 4, hitRate: 0.2, size: 3 }, "b.txt stayed cached");
  } finally {
    ws.cleanup();
  }
});

test("cache: Write, Patch and Bash invalidate Read, Glob and Grep results they may have made stale", async () => {
  const { ws, tools } = await setup({ "src/a.txt": "needle\n", "other/b.txt": "x\n" }, { cache: true, patch: true });
  try {
    assert.deepEqual((await runTool(tools, "Grep", { pattern: "needle" })).files, ["./src/a.txt"]);
    assert.deepEqual((await runTool(tools, "Glob", { pattern: "*.txt", path: "src" })).matches, ["src/a.txt"]);
    assert.deepEqual((await runTool(tools, "Glob", { pattern: "*.txt", path: "other" })).matches, ["other/b.txt"]);
    await runTool(tools, "Write", { file_path: "src/c.txt", content: "needle too\n" });
    assert.deepEqual((await runTool(tools, "Grep", { pattern: "needle" })).files, ["./src/a.txt", "./src/c.txt"]);
    assert.deepEqual((await runTool(tools, "Glob", { pattern: "*.txt", path: "src" })).matches.sort(), ["src/a.txt", "src/c.txt"]);
    await runTool(tools, "Glob", { pattern: "*.txt", path: "other" });
    assert.equal(tools.Glob.getStats().hits, 1, "a write in src/ left the other/ listing cached");
    await runTool(tools, "Patch", { patch: "*** Begin Patch\n*** Delete File: src/c.txt\n*** End Patch" });
    assert.deepEqual((await runTool(tools, "Grep", { pattern: "needle" })).files, ["./src/a.txt"]);
    await runTool(tools, "Bash", { command: "echo needle > other/d.txt" });
    assert.deepEqual((await runTool(tools, "Grep", { pattern: "needle" })).files, ["./other/d.txt", "./src/a.txt"]);
    assert.equal((await runTool(tools, "Read", { file_path: "other/d.txt" })).content, "needle\n");
    await runTool(tools, "Bash", { command: "echo changed > other/d.txt" });
    assert.equal((await runTool(tools, "Read", { file_path: "other/d.txt" })).content, "changed\n", "any Bash command invalidates");
  } finally {
    ws.cleanup();
  }
});

test("cache: a result computed while a write was in flight is not served afterwards", async () => {
  const { ws, tools } = await setup({ "a.txt": "old\n" }, { cache: true });
  try {
    const o = { toolCallId: "x", messages: [] };
    // Bash is in flight (waiting for the marker file) while Read runs and caches "old".
    const bash = tools.Bash.execute({ command: "while [ ! -f go ]; do sleep 0.01; done; echo new > a.txt", timeout: 60000 }, o);
    const read = await tools.Read.execute({ file_path: "a.txt", offset: null, limit: null }, o);
    assert.equal(read.content, "old\n");
    writeFileSync(join(ws.dir, "go"), "");
    assert.equal((await bash).exit_code, 0);
    assert.equal((await tools.Read.execute({ file_path: "a.txt", offset: null, limit: null }, o)).content, "new\n");
    assert.deepEqual(tools.Read.getStats(), { hits: 0, misses: 2, hitRate: 0, size: 1 });
  } finally {
    ws.cleanup();
  }
});

test("cache: web results are not invalidated by file writes; user tools cached by name are", async () => {
  let searches = 0;
  let lookups = 0;
  const extra = { Lookup: { description: "l", inputSchema: undefined, execute: async () => ({ n: ++lookups }) } };
  const { ws, tools } = await setup(
    {},
    { cache: { Lookup: true }, webSearch: { search: async () => [{ title: `t${++searches}`, url: "https://a.example/", snippet: "s" }] }, context: { outputPolicy: false, extraTools: extra } },
  );
  try {
    assert.equal((await runTool(tools, "WebSearch", { query: "q" })).results[0].title, "t1");
    assert.equal((await runTool(tools, "Lookup", {})).n, 1);
    await runTool(tools, "Bash", { command: "echo x > f.txt" });
    assert.equal((await runTool(tools, "WebSearch", { query: "q" })).results[0].title, "t1", "still cached");
    assert.equal((await runTool(tools, "Lookup", {})).n, 2, "a tool with unknown dependencies is invalidated by any write");
    assert.equal(searches, 1);
  } finally {
    ws.cleanup();
  }
});

test("cache: TTL (default 5 minutes, or configured) without waiting", async () => {
  await withClock(1_000_000, async (advance) => {
    const { ws, tools } = await setup({ "a.txt": "v1\n" }, { cache: true });
    const short = await setup({ "a.txt": "v1\n" }, { cache: { ttl: 1000 } });
    try {
      await runTool(tools, "Read", { file_path: "a.txt" });
      await runTool(short.tools, "Read", { file_path: "a.txt" });
      writeFileSync(join(ws.dir, "a.txt"), "v2\n");
      writeFileSync(join(short.ws.dir, "a.txt"), "v2\n");
      advance(999);
      assert.equal((await runTool(short.tools, "Read", { file_path: "a.txt" })).content, "v1\n");
      advance(1);
      assert.equal((await runTool(short.tools, "Read", { file_path: "a.txt" })).content, "v2\n", "expired at ttl");
      advance(5 * 60 * 1000 - 1001);
      assert.equal((await runTool(tools, "Read", { file_path: "a.txt" })).content, "v1\n", "default ttl: still fresh just before 5 min");
      advance(1);
      assert.equal((await runTool(tools, "Read", { file_path: "a.txt" })).content, "v2\n", "default ttl: expired at 5 min");
    } finally {
      ws.cleanup();
      short.ws.cleanup();
    }
  });
});

test("cache: per-tool switches, a custom store, debug logging, onHit/onMiss, errors not cached", async () => {
  const logs = [];
  const realLog = console.log;
  const store = new LRUCacheStore(10);
  const events = [];
  const { ws, tools } = await setup(
    { "a.txt": "a" },
    { cache: { store, Read: false, Bash: true, debug: true, onHit: (n) => events.push(`hit:${n}`), onMiss: (n) => events.push(`miss:${n}`) } },
  );
  console.log = (...a) => logs.push(a.join(" "));
  try {
    assert.equal(tools.Read.getStats, undefined, "Read: false removes it");
    assert.equal(typeof tools.Bash.getStats, "function", "Bash: true adds it");
    await runTool(tools, "Glob", { pattern: "*" });
    await runTool(tools, "Glob", { pattern: "*" });
    await runTool(tools, "Glob", { pattern: "*", path: "missing" });
    await runTool(tools, "Glob", { pattern: "*", path: "missing" });
    assert.deepEqual(events, ["miss:Glob", "hit:Glob", "miss:Glob", "miss:Glob"]);
    assert.equal(store.size(), 1, "the {error} result was not stored");
    assert.ok(logs.some((l) => /^\[Cache\] MISS Glob:/.test(l)));
    assert.ok(logs.some((l) => /^\[Cache\] HIT Glob:/.test(l)));
    assert.ok(logs.some((l) => /^\[Cache\] STORED Glob:/.test(l)));
  } finally {
    console.log = realLog;
    ws.cleanup();
  }
});

test("cached(tool, name, { ttl }): standalone, getStats() as a plain object, clearCache, LRU eviction", async () => {
  let runs = 0;
  const myTool = { description: "d", inputSchema: undefined, execute: async ({ q }) => ({ answer: q * 2, run: ++runs }) };
  const tool = cached(myTool, "MyTool", { ttl: 60000, store: new LRUCacheStore(2) });
  assert.deepEqual(await tool.execute({ q: 1 }), { answer: 2, run: 1 });
  assert.deepEqual(await tool.execute({ q: 1 }), { answer: 2, run: 1 });
  assert.deepEqual(await tool.execute({ q: 2 }), { answer: 4, run: 2 });
  await tool.execute({ q: 3 }); // evicts q=1 (least recently used)
  assert.deepEqual(await tool.execute({ q: 1 }), { answer: 2, run: 4 });
  const stats = tool.getStats();
  assert.deepEqual(stats, { hits: 1, misses: 4, hitRate: 0.2, size: 2 });
  await tool.clearCache();
  assert.equal(tool.getStats().size, 0);
  // Keys are stable across key order and nested objects (bashkit dropped nested keys).
  const nested = cached({ execute: async (p) => ({ v: JSON.stringify(p) }) }, "N");
  await nested.execute({ a: { x: 1 }, b: 2 });
  await nested.execute({ b: 2, a: { x: 1 } });
  await nested.execute({ a: { x: 2 }, b: 2 });
  assert.deepEqual(nested.getStats(), { hits: 1, misses: 2, hitRate: 1 / 3, size: 2 });
  // An async store: getStats returns a Promise.
  const asyncStore = { m: new Map(), async get(k) { return this.m.get(k); }, async set(k, v) { this.m.set(k, v); }, async delete(k) { this.m.delete(k); }, async clear() { this.m.clear(); }, async size() { return this.m.size; } };
  const viaAsync = cached({ execute: async () => ({ ok: 1 }) }, "A", { store: asyncStore });
  await viaAsync.execute({});
  await viaAsync.execute({});
  assert.deepEqual(await viaAsync.getStats(), { hits: 1, misses: 1, hitRate: 0.5, size: 1 });
});

// -------------------------------------------------------------------------------------- budget

test("budget: pricing given directly, status fields, three-tier model-id matching", async () => {
  const pricing = {
    "claude-sonnet-4.5": { inputPerToken: 3e-6, outputPerToken: 15e-6 },
    "gpt-4o": { inputPerToken: 2.5e-6, outputPerToken: 10e-6 },
    "gpt-4o-mini": { inputPerToken: 0.15e-6, outputPerToken: 0.6e-6 },
    "anthropic/claude-haiku-4.5-extended": { inputPerToken: 1e-6, outputPerToken: 5e-6 },
  };
  const step = (modelId, i, o, details) => ({
    response: { modelId },
    usage: { inputTokens: i, outputTokens: o, inputTokenDetails: details ?? {} },
  });
  const b = createBudgetTracker(1, { modelPricing: pricing, onUnpricedModel: () => {} });
  b.onStepFinish(step("CLAUDE-SONNET-4.5", 1000, 50)); // exact (case-insensitive)
  b.onStepFinish(step("openai/gpt-4o-mini-2024-07-18", 1000, 1000)); // longest contained: gpt-4o-mini, not gpt-4o
  b.onStepFinish(step("claude-haiku-4.5", 1000, 0)); // reverse containment
  b.onStepFinish(step("unknown-model", 1000, 1000));
  const expected = 1000 * 3e-6 + 50 * 15e-6 + 1000 * 0.15e-6 + 1000 * 0.6e-6 + 1000 * 1e-6;
  const s = b.getStatus();
  assert.ok(Math.abs(s.totalCostUsd - expected) < 1e-15);
  assert.deepEqual(Object.keys(s), ["totalCostUsd", "maxUsd", "remainingUsd", "usagePercent", "stepsCompleted", "exceeded", "unpricedSteps"]);
  assert.equal(s.maxUsd, 1);
  assert.ok(Math.abs(s.remainingUsd - (1 - expected)) < 1e-15);
  assert.ok(Math.abs(s.usagePercent - expected * 100) < 1e-12);
  assert.equal(s.stepsCompleted, 4);
  assert.equal(s.exceeded, false);
  assert.equal(s.unpricedSteps, 1);
  // Cache-aware input pricing (ai@6 usage) and ai@5's flat usage.
  const c = createBudgetTracker(1, { modelPricing: { m: { inputPerToken: 1, outputPerToken: 0, cacheReadPerToken: 0.1, cacheWritePerToken: 2 } } });
  c.onStepFinish(step("m", 100, 0, { noCacheTokens: 10, cacheReadTokens: 80, cacheWriteTokens: 10 }));
  assert.equal(c.getStatus().totalCostUsd, 10 + 8 + 20);
  const d = createBudgetTracker(1000, { modelPricing: { m: { inputPerToken: 1, outputPerToken: 0, cacheReadPerToken: 0.5 } } });
  d.onStepFinish({ response: { modelId: "m" }, usage: { inputTokens: 100, outputTokens: 0, cachedInputTokens: 40 } });
  assert.equal(d.getStatus().totalCostUsd, 60 + 20);
  assert.throws(() => createBudgetTracker(0), /maxUsd must be a positive number/);
});

test("budget: budget.stopWhen stops a generateText loop once maxUsd is spent", async () => {
  const { ws, tools, budget } = await setup({}, { budget: { maxUsd: 0.01, modelPricing: { "claude-sonnet-4-5": { inputPerToken: 3e-6, outputPerToken: 15e-6 } } } });
  try {
    // Each step costs 2000*3e-6 + 100*15e-6 = 0.0075 USD.
    const model = scripted(
      Array.from({ length: 10 }, () => [call("Bash", { command: "true" })]),
      { modelId: "claude-sonnet-4-5", usagePerStep: usage(2000, 100) },
    );
    const statuses = [];
    const r = await generateText({
      model,
      tools,
      prompt: "loop",
      stopWhen: [stepCountIs(50), budget.stopWhen],
      onStepFinish: (step) => {
        budget.onStepFinish(step);
        statuses.push(budget.getStatus());
      },
    });
    assert.equal(r.steps.length, 2);
    assert.equal(model.doGenerateCalls.length, 2);
    assert.equal(statuses[0].exceeded, false);
    assert.equal(statuses[1].exceeded, true);
    assert.ok(Math.abs(statuses[1].totalCostUsd - 0.015) < 1e-12);
    assert.equal(statuses[1].remainingUsd, 0);
  } finally {
    ws.cleanup();
  }
});

function modelsServer(body, status = 200) {
  return new Promise((resolve) => {
    let hits = 0;
    const server = createServer((req, res) => {
      hits++;
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
    server.listen(0, "127.0.0.1", () =>
      resolve({ url: `http://127.0.0.1:${server.address().port}/api/v1/models`, hits: () => hits, close: () => new Promise((r) => server.close(r)) }),
    );
  });
}

test("modelRegistry openRouter: prices from the endpoint (fake server), cached, matched for the budget", async () => {
  resetModelRegistryCache();
  const srv = await modelsServer({
    data: [
      { id: "anthropic/claude-sonnet-4.5", context_length: 1000000, pricing: { prompt: "0.000003", completion: "0.000015", input_cache_read: "0.0000003" } },
      { id: "openai/gpt-4o", context_length: 128000, pricing: { prompt: "0.0000025", completion: "0.00001" } },
      { id: "broken", pricing: { prompt: "n/a", completion: "1" } },
    ],
  });
  const ws = tempWorkspace();
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    const { budget, openRouterModels } = await createAgentTools(sandbox, { modelRegistry: { provider: "openRouter", url: srv.url }, budget: { maxUsd: 5 } });
    assert.equal(openRouterModels.source, "openrouter");
    assert.equal(openRouterModels.size, 2);
    assert.deepEqual(openRouterModels.get("openai/gpt-4o"), { pricing: { inputPerToken: 2.5e-6, outputPerToken: 1e-5 }, contextLength: 128000 });
    assert.equal(getModelContextLength("claude-sonnet-4-5-20250929", openRouterModels), 1000000);
    budget.onStepFinish({ response: { modelId: "claude-sonnet-4-5-20250929" }, usage: { inputTokens: 1000, outputTokens: 100 } });
    assert.ok(Math.abs(budget.getStatus().totalCostUsd - (1000 * 3e-6 + 100 * 15e-6)) < 1e-15);
    await createAgentTools(sandbox, { modelRegistry: { provider: "openRouter", url: srv.url } });
    assert.equal(srv.hits(), 1, "fetched once, then served from the 24 h cache");
  } finally {
    await srv.close();
    ws.cleanup();
    resetModelRegistryCache();
  }
});

test("modelRegistry openRouter offline: the bundled catalog keeps the budget working", async () => {
  resetModelRegistryCache();
  const srv = await modelsServer({});
  const closedUrl = srv.url;
  await srv.close();
  const ws = tempWorkspace();
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    const { budget, openRouterModels } = await createAgentTools(sandbox, { modelRegistry: { provider: "openRouter", url: closedUrl }, budget: { maxUsd: 1 } });
    assert.equal(openRouterModels.source, "bundled");
    assert.ok(openRouterModels.size > 20);
    budget.onStepFinish({ response: { modelId: "gpt-4o-mini-2024-07-18" }, usage: { inputTokens: 1_000_000, outputTokens: 0 } });
    assert.ok(Math.abs(budget.getStatus().totalCostUsd - 0.15) < 1e-12);
    await assert.rejects(fetchOpenRouterModels(undefined, { url: closedUrl, fallback: false }));
    // A non-OK response falls back as well.
    resetModelRegistryCache();
    const bad = await modelsServer({ error: "x" }, 500);
    try {
      assert.equal((await fetchOpenRouterModels(undefined, { url: bad.url })).source, "bundled");
    } finally {
      await bad.close();
    }
  } finally {
    ws.cleanup();
    resetModelRegistryCache();
  }
});

test("budget without a pricing source is a configuration error", async () => {
  const ws = tempWorkspace();
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    await assert.rejects(createAgentTools(sandbox, { budget: { maxUsd: 1 } }), /Budget requires either modelRegistry, pricingProvider, or modelPricing/);
    await assert.rejects(createAgentTools(sandbox, { budget: { maxUsd: -1, modelPricing: {} } }), /maxUsd must be a positive number/);
  } finally {
    ws.cleanup();
  }
});
