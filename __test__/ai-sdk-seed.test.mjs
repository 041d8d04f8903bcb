// Every code example of seed 004 (bashkit's API reference page, copied to
// fixtures/ai-sdk-seed-004.txt) runs as written against knap/ai-sdk, with a mock model.
//
// The examples are cut out of the seed text by their first and last lines, written to ES modules
// with only their import specifiers changed ('bashkit' → knap/ai-sdk, '@ai-sdk/anthropic' → a stub
// returning a mock model), and imported. Free variables the page leaves to the reader (`sandbox`,
// `model`, `generateText`, `stepCountIs`, `myTool`, `messages`) are provided; `generateText` is the
// real one, given a prompt when the example has none (the budget example passes no prompt, which
// no AI SDK call accepts). The caching block declares `const { tools }` twice, so it is two examples.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync, mkdtempSync, rmSync, realpathSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { generateText as realGenerateText, stepCountIs, jsonSchema } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { createLocalSandbox, resetModelRegistryCache } from "knap/ai-sdk";
import { call, scripted, usage } from "./ai-sdk-helpers.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const seed = readFileSync(join(here, "fixtures", "ai-sdk-seed-004.txt"), "utf8").split("\n");

/** The lines from the first line equal to `first` (at or after `from`) to the next one equal to `last`. */
function cut(first, last, from = 0) {
  const start = seed.findIndex((l, i) => i >= from && l === first);
  assert.notEqual(start, -1, `seed line not found: ${first}`);
  const end = seed.findIndex((l, i) => i > start && l === last);
  assert.notEqual(end, -1, `seed line not found after ${first}: ${last}`);
  return { text: seed.slice(start, end + 1).join("\n"), end };
}

const work = mkdtempSync(join(tmpdir(), "knap-seed-"));
const stub = join(work, "anthropic-stub.mjs");
writeFileSync(
  stub,
  `import { MockLanguageModelV3 } from ${JSON.stringify(import.meta.resolve("ai/test"))};
export const anthropic = (modelId) => new MockLanguageModelV3({ provider: "anthropic.messages", modelId, doGenerate: async () => ({
  content: [{ type: "text", text: "cached" }], finishReason: { unified: "stop", raw: undefined },
  usage: { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } }, warnings: [] }) });
`,
);
const SPECIFIERS = {
  bashkit: new URL("../lib/ai-sdk/index.mjs", import.meta.url).href,
  ai: import.meta.resolve("ai"),
  "@ai-sdk/anthropic": pathToFileURL(stub).href,
};
const FREE = ["sandbox", "model", "generateText", "stepCountIs", "myTool", "messages"];

let counter = 0;
/** Runs one example as an ES module; returns the bindings it declared. */
async function runExample(source, globals) {
  let code = source.replace(/from '([^']+)'/g, (m, spec) => (SPECIFIERS[spec] ? `from ${JSON.stringify(SPECIFIERS[spec])}` : m));
  const declared = new Set();
  for (const m of source.matchAll(/^(?:const|let)\s+(\w+)\s*=/gm)) declared.add(m[1]);
  for (const m of source.matchAll(/^(?:const|let)\s+\{([^}]+)\}\s*=/gm)) for (const n of m[1].split(",")) declared.add(n.trim());
  for (const m of source.matchAll(/^import\s+\{([^}]+)\}/gm)) for (const n of m[1].split(",")) declared.add(n.trim());
  const provided = FREE.filter((n) => !declared.has(n));
  const exported = [...declared].filter((n) => !FREE.includes(n) || source.match(new RegExp(`^(?:const|let)[^=]*\\b${n}\\b[^=]*=`, "m")));
  globalThis.__seed = globals;
  const prelude = provided.length ? `const { ${provided.join(", ")} } = globalThis.__seed;\n` : "";
  const imports = code.match(/^import .*$/gm) ?? [];
  const body = code.replace(/^import .*$/gm, "");
  const file = join(work, `example-${++counter}.mjs`);
  writeFileSync(file, `${imports.join("\n")}\n${prelude}${body}\nexport { ${exported.join(", ")} };\n`);
  return import(pathToFileURL(file).href);
}

let models;
before(async () => {
  // The examples ask for `modelRegistry: { provider: 'openRouter' }`: serve it from 127.0.0.1.
  resetModelRegistryCache();
  const body = JSON.stringify({
    data: [{ id: "anthropic/claude-sonnet-4.5", context_length: 1000000, pricing: { prompt: "0.000003", completion: "0.000015" } }],
  });
  models = createServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(body);
  });
  await new Promise((r) => models.listen(0, "127.0.0.1", r));
  process.env.KNAP_OPENROUTER_MODELS_URL = `http://127.0.0.1:${models.address().port}/api/v1/models`;
  process.chdir(work); // `createLocalSandbox({ workingDirectory: '.' })`
});

after(async () => {
  delete process.env.KNAP_OPENROUTER_MODELS_URL;
  resetModelRegistryCache();
  await new Promise((r) => models.close(r));
  rmSync(work, { recursive: true, force: true });
});

const freshSandbox = () => createLocalSandbox({ workingDirectory: mkdtempSync(join(work, "ws-")) });
const generateText = (options) => realGenerateText({ prompt: "Do the task.", ...options });

test("example 1: createLocalSandbox + createAgentTools with every AgentConfig key of the snippet", async () => {
  const { text } = cut("import { createLocalSandbox, createAgentTools } from 'bashkit';", "});");
  const m = await runExample(text, {});
  assert.equal(m.sandbox.workingDirectory, realpathSync(work), "workingDirectory '.' is the process's directory");
  assert.deepEqual(Object.keys(m.tools), ["Bash", "Read", "Write", "Edit", "Glob", "Grep", "WebSearch", "WebFetch"]);
  assert.equal(typeof m.tools.Read.getStats, "function", "cache: true");
  assert.equal(typeof m.budget.getStatus, "function");
  assert.equal(m.budget.getStatus().maxUsd, 5);
  // `tools: { Bash: { timeout: 10000 } }` is honoured.
  const out = await m.tools.Bash.execute({ command: "sleep 30", timeout: null }, { toolCallId: "t", messages: [] }).catch((e) => e);
  assert.equal(out.interrupted, true);
});

test("example 2: anthropicPromptCacheMiddleware with wrapLanguageModel", async () => {
  const { text } = cut("import { anthropicPromptCacheMiddleware } from 'bashkit';", "});");
  const m = await runExample(text, {});
  assert.equal(m.model.modelId, "claude-sonnet-4-5");
  const r = await realGenerateText({ model: m.model, system: "sys", messages: [{ role: "user", content: "a" }, { role: "assistant", content: "b" }, { role: "user", content: "c" }] });
  assert.equal(r.text, "cached");
});

test("examples 3 and 4: cache: true, and per-tool cache control", async () => {
  const first = cut("// Enable with defaults (LRU, 5min TTL)", "const { tools } = await createAgentTools(sandbox, { cache: true });");
  const importLine = "import { createLocalSandbox, createAgentTools } from 'bashkit';";
  const sandbox = freshSandbox();
  const a = await runExample(`${importLine}\n${first.text}`, { sandbox });
  assert.equal(typeof a.tools.Glob.getStats, "function");
  const second = cut("// Per-tool control", "});", first.end);
  const b = await runExample(`${importLine}\n${second.text}`, { sandbox });
  assert.equal(typeof b.tools.Read.getStats, "function");
  assert.equal(typeof b.tools.Grep.getStats, "function");
  assert.equal(b.tools.WebFetch, undefined, "no web config: WebFetch: false has nothing to switch off");
  // debug: true logs hits and misses.
  const logs = [];
  const real = console.log;
  console.log = (...x) => logs.push(x.join(" "));
  try {
    await sandbox.writeFile("f.txt", "x");
    await b.tools.Read.execute({ file_path: "f.txt", offset: null, limit: null }, {});
    await b.tools.Read.execute({ file_path: "f.txt", offset: null, limit: null }, {});
  } finally {
    console.log = real;
  }
  assert.ok(logs.some((l) => l.startsWith("[Cache] HIT Read:")));
});

test("example 5: cached(myTool, 'MyTool', { ttl: 60000 }) and getStats()", async () => {
  const { text } = cut("import { cached } from 'bashkit';", "// { hits: 5, misses: 2, hitRate: 0.71, size: 2 }");
  let runs = 0;
  const myTool = { description: "doubles", inputSchema: jsonSchema({ type: "object", properties: { n: { type: "number" } } }), execute: async ({ n }) => ({ n: n * 2, runs: ++runs }) };
  const m = await runExample(text, { myTool });
  assert.deepEqual(m.stats, { hits: 0, misses: 0, hitRate: 0, size: 0 }, "getStats() gives the object directly");
  for (const n of [1, 1, 1, 1, 1, 2, 2]) await m.cachedTool.execute({ n }, {});
  assert.deepEqual(m.cachedTool.getStats(), { hits: 5, misses: 2, hitRate: 5 / 7, size: 2 });
});

test("example 6: budget tracking wired into a generateText loop", async () => {
  const { text } = cut("const { tools, budget } = await createAgentTools(sandbox, {", "});", 100);
  const rest = cut("const result = await generateText({", "});", 140);
  const model = scripted([[call("Bash", { command: "echo hi" })], "finished"], { modelId: "anthropic/claude-sonnet-4.5", usagePerStep: usage(1000, 100) });
  const logged = [];
  const real = console.log;
  console.log = (x) => logged.push(x);
  let m;
  try {
    m = await runExample(`import { createAgentTools } from 'bashkit';\n${text}\n\n${rest.text}`, { sandbox: freshSandbox(), model, generateText, stepCountIs });
  } finally {
    console.log = real;
  }
  assert.equal(m.result.text, "finished");
  assert.equal(logged.length, 2);
  const cost = 1000 * 3e-6 + 100 * 15e-6;
  assert.ok(Math.abs(logged[1].totalCostUsd - 2 * cost) < 1e-12);
  assert.deepEqual(Object.keys(logged[1]), ["totalCostUsd", "maxUsd", "remainingUsd", "usagePercent", "stepsCompleted", "exceeded", "unpricedSteps"]);
  assert.equal(logged[1].maxUsd, 5);
  assert.equal(logged[1].stepsCompleted, 2);
});

test("example 7: pruneMessages(messages, { maxTokens: 100000, protectRecentUserMessages: 3 })", async () => {
  const { text } = cut("import { pruneMessages } from 'bashkit';", "});");
  const big = "x".repeat(200_000);
  const messages = [
    { role: "system", content: "system prompt" },
    { role: "user", content: `old question ${big}` },
    { role: "assistant", content: `old answer ${big}` },
    { role: "user", content: "q1" },
    { role: "assistant", content: "a1" },
    { role: "user", content: "q2" },
    { role: "assistant", content: "a2" },
    { role: "user", content: "q3" },
  ];
  const m = await runExample(text, { messages });
  assert.deepEqual(m.pruned.map((x) => x.content), ["system prompt", "q1", "a1", "q2", "a2", "q3"]);
});

test("the seed's examples are all covered", () => {
  const imports = seed.filter((l) => /^import .* from '(bashkit|ai|@ai-sdk\/anthropic)';$/.test(l));
  assert.equal(imports.length, 6);
  const starts = seed.filter((l) => /^(const \{ tools|const result = await generateText|const cachedTool|const pruned|const model = wrapLanguageModel)/.test(l));
  assert.equal(starts.length, 8, "4 createAgentTools calls, generateText, cached, wrapLanguageModel, pruneMessages");
});
