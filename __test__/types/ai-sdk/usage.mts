// Compiled by types.test.mjs against ai@6 and ai@5 (the `ai` import is mapped to one or the other),
// with `strict`, `exactOptionalPropertyTypes`, and both `node16` and `bundler` resolution. The
// README's and the seed's AI SDK examples, as written, with no cast and no `any`.
import { generateText, streamText, stepCountIs, wrapLanguageModel, tool, jsonSchema } from "ai";
import type { LanguageModel, ToolSet } from "ai";
import {
  anthropicPromptCacheMiddleware,
  cached,
  createAgentTools,
  createBashTool,
  createGlobTool,
  createLocalSandbox,
  createRedisCacheStore,
  createTaskTool,
  ensureSandboxTools,
  getDebugLogs,
  isDebugEnabled,
  pruneMessages,
  toAiSdkTools,
} from "knap/ai-sdk";
import type { BashOutput, BashError, GlobOutput, GrepOutput, RedisClient, AgentTools } from "knap/ai-sdk";
import { shellTools } from "knap";

declare const model: LanguageModel;
declare const providerModel: Parameters<typeof wrapLanguageModel>[0]["model"]; // e.g. anthropic("claude-sonnet-4-5")
declare const process: { cwd(): string; env: Record<string, string | undefined> };

// `true` only when T is `any`: the tests below must all be `false`.
type IsAny<T> = 0 extends 1 & T ? true : false;
const notAny = <T,>(_value: T, _check: IsAny<T> extends false ? true : never): void => {};

export async function readme(): Promise<void> {
  // lib/ai-sdk/README.md, first example
  const sandbox = createLocalSandbox({ workingDirectory: "." });
  const { tools, budget } = await createAgentTools(sandbox, {
    defaultTimeout: 30000,
    tools: { Bash: { timeout: 10000, blockedCommands: ["rm -rf"] }, Write: { allowedPaths: ["src/**"] } },
    cache: true,
    modelRegistry: { provider: "openRouter" },
    budget: { maxUsd: 5 },
  });
  const result = await generateText({
    model,
    tools,
    prompt: "Find the TODOs in src and fix the easy ones.",
    stopWhen: [stepCountIs(50), budget.stopWhen],
    onStepFinish: (step) => budget.onStepFinish(step),
  });
  console.log(result.text, budget.getStatus().remainingUsd);
  notAny(tools.Bash, true);
  notAny(result.steps, true);
}

export async function issueExample(): Promise<void> {
  // The issue's first failure: createAgentTools(...) straight into generateText under --strict.
  const { tools } = await createAgentTools(createLocalSandbox({ workingDirectory: "." }), {});
  await generateText({ model, tools, prompt: "go" });
  const set: ToolSet = tools;
  const typed: AgentTools = tools;
  console.log(Object.keys(set), typed.Glob.description);

  // toAiSdkTools(): knap's own tools in generateText and streamText.
  const knapTools = toAiSdkTools(shellTools({ workspace: process.cwd(), tools: ["bash", "read_file"] }), {
    toolPolicy: ({ effect }) => (effect === "write" ? { deny: "read_only" } : undefined),
  });
  await generateText({ model, tools: knapTools, prompt: "go", stopWhen: stepCountIs(5) });
  const streamed = streamText({ model, tools: { ...knapTools, ...tools }, prompt: "go" });
  for await (const part of streamed.fullStream) {
    if (part.type === "text-delta") console.log(part.type);
    if (part.type === "tool-call") console.log(part.toolName);
  }
}

export async function progress(): Promise<void> {
  // README "Progress of a bash command", as written: knap's tools always have `execute`.
  const { tools } = await createAgentTools(createLocalSandbox({ workingDirectory: "." }), {
    tools: { Bash: { onProgress: ({ chunk }) => console.log(chunk) } },
  });
  const out = await tools.Bash.execute({ command: "for i in 1 2 3; do echo $i; sleep 1; done", description: "count" }, { toolCallId: "t1", messages: [] });
  notAny(out, true);
  const read = await tools.Read.execute({ file_path: "a.txt" }, { toolCallId: "t2", messages: [] });
  notAny(read, true);
  await generateText({ model, tools, prompt: "go" });
}

export async function seed(): Promise<void> {
  // The seed's API reference page, with knap/ai-sdk as the import.
  const sandbox = createLocalSandbox({ workingDirectory: "." });
  const { tools, budget } = await createAgentTools(sandbox, {
    defaultTimeout: 30000,
    tools: { Bash: { timeout: 10000 } },
    webSearch: { apiKey: process.env.PARALLEL_API_KEY },
    cache: true,
    modelRegistry: { provider: "openRouter" },
    budget: { maxUsd: 5.0 },
  });
  const wrapped = wrapLanguageModel({ model: providerModel, middleware: anthropicPromptCacheMiddleware });
  console.log(wrapped.modelId);
  const cachedOnly = await createAgentTools(sandbox, { cache: true });
  const perTool = await createAgentTools(sandbox, {
    cache: { ttl: 10 * 60 * 1000, debug: true, Read: true, Glob: true, Grep: true, WebFetch: false },
  });
  console.log(cachedOnly.contextLayers.length, Object.keys(perTool.tools));
  const myTool = tool({
    description: "Look a city up",
    inputSchema: jsonSchema<{ city: string }>({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
    execute: async ({ city }) => city.toUpperCase(),
  });
  const cachedTool = cached(myTool, "MyTool", { ttl: 60000 });
  const stats = await cachedTool.getStats();
  console.log(stats.hitRate);
  const result = await generateText({
    model,
    tools: { ...tools, MyTool: cachedTool },
    prompt: "go",
    stopWhen: [stepCountIs(50), budget.stopWhen],
    onStepFinish: (step) => {
      budget.onStepFinish(step);
      console.log(budget.getStatus());
    },
  });
  const pruned = pruneMessages(result.response.messages, { maxTokens: 100000, protectRecentUserMessages: 3 });
  console.log(pruned.length);
}

export async function outputs(): Promise<void> {
  const sandbox = createLocalSandbox({ cwd: "." });
  const bash = createBashTool(sandbox, { timeout: 1000 });
  const out = await bash.execute?.({ command: "ls" }, { toolCallId: "1", messages: [] });
  if (out && !(Symbol.asyncIterator in out)) {
    const r: BashOutput | BashError = out;
    if ("error" in r) console.log(r.error);
    else console.log(r.exit_code, r.stdout);
  }
  const glob = createGlobTool(sandbox, { maxResults: 200 });
  const g = await glob.execute?.({ pattern: "**/*.ts" }, { toolCallId: "2", messages: [] });
  if (g && !(Symbol.asyncIterator in g) && !("error" in g)) {
    const o: GlobOutput = g;
    console.log(o.count, o.note ?? "");
  }
  const grepOut: GrepOutput = { files: [], count: 0 };
  console.log(grepOut);
  const client: RedisClient = {
    get: async () => null,
    set: async () => "OK",
    del: async () => 1,
    keys: async () => [],
  };
  const store = createRedisCacheStore(client, { prefix: "app:" });
  await createAgentTools(sandbox, { cache: store });
  await ensureSandboxTools(sandbox);
  console.log(isDebugEnabled(), getDebugLogs().length);
  const task = createTaskTool({ model, tools: { Bash: bash } });
  console.log(task.description);
}

// bashkit's system-context helpers: a static system prompt built once, and prepareStep in the loop.
import { buildSystemContext, createPrepareStep, discoverInstructions, collectEnvironment, formatEnvironment, buildToolGuidance } from "knap/ai-sdk";

export async function systemContext(): Promise<void> {
  const sandbox = createLocalSandbox({ workingDirectory: "." });
  const { tools, planModeState } = await createAgentTools(sandbox, { planMode: true });
  const context = await buildSystemContext(sandbox, {
    instructions: true,
    environment: { git: true, custom: { ci: "false" } },
    toolGuidance: { tools: Object.keys(tools), guidelines: ["Run the tests."] },
  });
  const system: string = context.combined;
  const sources: number = context.meta.instructionSources?.length ?? 0;
  const found = await discoverInstructions(sandbox, { maxBytes: 16_384 });
  const text: string | undefined = found?.text;
  const env = await collectEnvironment(sandbox, { timezone: false });
  const block: string = formatEnvironment(env, { team: "core" }) + buildToolGuidance({ tools: ["Read"] });
  const prepareStep = createPrepareStep({
    compaction: { maxTokens: 200_000, summarizerModel: model },
    contextStatus: { maxTokens: 200_000, config: { highThreshold: 0.6 } },
    planModeState,
    extend: async ({ stepNumber }) => (stepNumber > 3 ? { activeTools: ["Read"] } : {}),
  });
  const result = await generateText({ model, tools, system, prompt: "Fix the bug", stopWhen: stepCountIs(20), prepareStep });
  notAny(result.text, true);
  notAny(context, true);
  void [sources, text, block];
}
