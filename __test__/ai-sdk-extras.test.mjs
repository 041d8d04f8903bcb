// The opt-in tools: Patch, AskUser, plan mode, TodoWrite, Skill, Task (sub-agents), and the web
// tools against fake HTTP servers on 127.0.0.1.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { generateText, stepCountIs } from "ai";
import {
  createLocalSandbox,
  createAgentTools,
  createTaskTool,
  createTodoWriteTool,
  createBudgetTracker,
  createWebFetchTool,
  createWebSearchTool,
} from "knap/ai-sdk";
import { call, runTool, runTools, scripted, tempWorkspace, usage, setup } from "./ai-sdk-helpers.mjs";


// --------------------------------------------------------------------------------------- Patch

test("Patch: add, update (two hunks, @@ context), delete and move in one patch", async () => {
  const { ws, tools } = await setup({
    "src/app.js": "function a() {\n  return 1;\n}\n\nfunction b() {\n  return 2;\n}\n",
    "old.txt": "bye\n",
    "mv.txt": "keep\nchange me\n",
  }, { patch: true });
  try {
    const patch = [
      "*** Begin Patch",
      "*** Add File: docs/new.md",
      "+# Title",
      "+body",
      "*** Update File: src/app.js",
      "@@ function a() {",
      "-  return 1;",
      "+  return 10;",
      "@@ function b() {",
      "-  return 2;",
      "+  return 20;",
      "*** Delete File: old.txt",
      "*** Update File: mv.txt",
      "*** Move to: moved/mv.txt",
      " keep",
      "-change me",
      "+changed",
      "*** End Patch",
    ].join("\n");
    const out = await runTool(tools, "Patch", { patch });
    assert.deepEqual(out, {
      message: "Successfully patched 4 files",
      files: [
        { status: "added", path: "docs/new.md" },
        { status: "modified", path: "src/app.js" },
        { status: "deleted", path: "old.txt" },
        { status: "modified", path: "moved/mv.txt" },
      ],
    });
    assert.equal(readFileSync(join(ws.dir, "docs/new.md"), "utf8"), "# Title\nbody\n");
    assert.equal(readFileSync(join(ws.dir, "src/app.js"), "utf8"), "function a() {\n  return 10;\n}\n\nfunction b() {\n  return 20;\n}\n");
    assert.equal(existsSync(join(ws.dir, "old.txt")), false);
    assert.equal(existsSync(join(ws.dir, "mv.txt")), false);
    assert.equal(readFileSync(join(ws.dir, "moved/mv.txt"), "utf8"), "keep\nchanged\n");
  } finally {
    ws.cleanup();
  }
});

test("Patch: validated whole before anything is written (a failing hunk changes nothing)", async () => {
  const { ws, tools } = await setup({ "a.txt": "one\ntwo\n", "b.txt": "three\n" }, { patch: true });
  try {
    const patch = [
      "*** Begin Patch",
      "*** Add File: c.txt",
      "+new",
      "*** Update File: a.txt",
      "-one",
      "+ONE",
      "*** Update File: b.txt",
      "-not there",
      "+x",
      "*** End Patch",
    ].join("\n");
    const out = await runTool(tools, "Patch", { patch });
    assert.match(out.error, /^b\.txt: Failed to find expected lines in b\.txt/);
    assert.equal(existsSync(join(ws.dir, "c.txt")), false, "the added file was not written");
    assert.equal(readFileSync(join(ws.dir, "a.txt"), "utf8"), "one\ntwo\n", "the first update was not written");
  } finally {
    ws.cleanup();
  }
});

test("Patch: a move onto an existing file is refused", async () => {
  const { ws, tools } = await setup({ "a.txt": "a\n", "b.txt": "b\n" }, { patch: true });
  try {
    const patch = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n-a\n+A\n*** End Patch";
    assert.deepEqual(await runTool(tools, "Patch", { patch }), { error: "Move target already exists: b.txt" });
    assert.equal(readFileSync(join(ws.dir, "b.txt"), "utf8"), "b\n");
    assert.deepEqual(await runTool(tools, "Edit", { file_path: "a.txt", old_string: "", new_string: "x" }), { error: "old_string must not be empty" });
  } finally {
    ws.cleanup();
  }
});

test("Patch: parse errors, missing files, fuzzy whitespace, two updates of one file, allowedPaths, maxFileSize", async () => {
  const { ws, tools } = await setup({ "a.txt": "x  \n  y\nz\n" }, { patch: { allowedPaths: ["a.txt", "ok/**"], maxFileSize: 20 } });
  try {
    assert.deepEqual(await runTool(tools, "Patch", { patch: "nothing" }), { error: "The first line of the patch must be '*** Begin Patch'" });
    assert.deepEqual(await runTool(tools, "Patch", { patch: "*** Begin Patch\n*** Delete File: ok/missing.txt\n*** End Patch" }), {
      error: "File not found for deletion: ok/missing.txt",
    });
    assert.deepEqual(await runTool(tools, "Patch", { patch: "*** Begin Patch\n*** Update File: a.txt\n*** Move to: a.txt.bak\n-z\n+Z\n*** End Patch" }), {
      error: "Path not allowed: a.txt.bak",
    });
    assert.deepEqual(await runTool(tools, "Patch", { patch: "*** Begin Patch\n*** Frobnicate: a.txt\n*** End Patch" }), {
      error: "Line 2: '*** Frobnicate: a.txt' is not a valid hunk header. Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'",
    });
    assert.deepEqual(await runTool(tools, "Patch", { patch: "*** Begin Patch\n*** Add File: elsewhere.txt\n+x\n*** End Patch" }), {
      error: "Path not allowed: elsewhere.txt",
    });
    assert.match((await runTool(tools, "Patch", { patch: `*** Begin Patch\n*** Add File: ok/big.txt\n+${"x".repeat(30)}\n*** End Patch` })).error, /^File too large: ok\/big\.txt/);
    const twice = [
      "*** Begin Patch",
      "*** Update File: a.txt",
      " x",
      "-y",
      "+Y",
      "*** Update File: a.txt",
      "-z",
      "+Z",
      "*** End Patch",
    ].join("\n");
    assert.deepEqual(await runTool(tools, "Patch", { patch: twice }), {
      message: "Successfully patched 2 files",
      files: [
        { status: "modified", path: "a.txt" },
        { status: "modified", path: "a.txt" },
      ],
    });
    assert.equal(readFileSync(join(ws.dir, "a.txt"), "utf8"), "x  \nY\nZ\n", "whitespace-fuzzy match; the second update saw the first");
  } finally {
    ws.cleanup();
  }
});

// ------------------------------------------------------------------- AskUser and plan mode

test("AskUser: a client-side tool, the loop stops at the call", async () => {
  const { ws, tools } = await setup({}, { askUser: true });
  try {
    assert.equal(tools.AskUser.execute, undefined);
    const questions = [{ id: "db", header: "Database", question: "Which one?", options: [{ label: "Postgres (Recommended)", description: "SQL" }, { label: "Mongo", description: "docs" }] }];
    const model = scripted([[call("AskUser", { questions })], "unreachable"]);
    const r = await generateText({ model, tools, prompt: "plan", stopWhen: stepCountIs(5) });
    assert.equal(r.steps.length, 1);
    assert.equal(r.toolCalls[0].toolName, "AskUser");
    assert.deepEqual(r.toolCalls[0].input.questions[0].options[0].label, "Postgres (Recommended)");
    assert.equal(model.doGenerateCalls.length, 1);
    const bad = await runTool(tools, "AskUser", { questions: [{ id: "x", header: "h", question: "q", options: [{ label: "only", description: "one" }] }] });
    assert.match(bad.__toolError, /at least 2 items/);
  } finally {
    ws.cleanup();
  }
});

test("plan mode: EnterPlanMode blocks Bash/Write/Edit (with context), ExitPlanMode ends it", async () => {
  const { ws, tools, planModeState, contextLayers } = await setup({ "a.txt": "a" }, { planMode: true, context: { outputPolicy: false } });
  try {
    assert.equal(contextLayers.length, 1);
    const entered = await runTool(tools, "EnterPlanMode", { reason: "explore first" });
    assert.deepEqual(entered, {
      message: "Entered planning mode: explore first. Use Read, Grep, and Glob to explore. Call ExitPlanMode when ready with a plan.",
      mode: "planning",
    });
    assert.equal(planModeState.isActive, true);
    assert.deepEqual(await runTool(tools, "EnterPlanMode", { reason: "again" }), { error: "Already in planning mode. Use ExitPlanMode to exit." });
    assert.match((await runTool(tools, "Bash", { command: "echo x" })).error, /^Bash is not available in plan mode/);
    assert.match((await runTool(tools, "Write", { file_path: "b.txt", content: "b" })).error, /^Write is not available in plan mode/);
    assert.equal((await runTool(tools, "Read", { file_path: "a.txt" })).content, "a", "read-only tools still work");
    assert.deepEqual(await runTool(tools, "ExitPlanMode", { plan: "1. do it" }), { message: "Plan submitted for review", approved: undefined });
    assert.equal(planModeState.isActive, false, "ExitPlanMode ends plan mode (bashkit's left it on)");
    assert.equal((await runTool(tools, "Bash", { command: "echo x" })).stdout, "x\n");
  } finally {
    ws.cleanup();
  }
});

test("plan mode: onPlanSubmit approval; a rejected plan stays in plan mode", async () => {
  const answers = [false, true];
  const plans = [];
  const { ws, tools, planModeState } = await setup({}, { planMode: { onPlanSubmit: (plan) => (plans.push(plan), answers.shift()) } });
  try {
    await runTool(tools, "EnterPlanMode", { reason: "r" });
    assert.deepEqual(await runTool(tools, "ExitPlanMode", { plan: "v1" }), { message: "Plan rejected: revise it and call ExitPlanMode again", approved: false });
    assert.equal(planModeState.isActive, true);
    assert.deepEqual(await runTool(tools, "ExitPlanMode", { plan: "v2" }), { message: "Plan approved, proceeding with execution", approved: true });
    assert.equal(planModeState.isActive, false);
    assert.deepEqual(plans, ["v1", "v2"]);
  } finally {
    ws.cleanup();
  }
});

// ------------------------------------------------------------------------- TodoWrite, Skill

test("TodoWrite: state, stats, onUpdate (both signatures)", async () => {
  const state = {};
  const seen = [];
  const tool = createTodoWriteTool(state, (todos) => seen.push(todos.length));
  const todos = [
    { content: "Run tests", status: "completed", activeForm: "Running tests" },
    { content: "Fix bug", status: "in_progress", activeForm: "Fixing bug" },
    { content: "Ship", status: "pending", activeForm: "Shipping" },
  ];
  assert.deepEqual(await runTool({ TodoWrite: tool }, "TodoWrite", { todos }), {
    message: "Todo list updated successfully",
    stats: { total: 3, pending: 1, in_progress: 1, completed: 1 },
  });
  assert.deepEqual(state.todos, todos);
  assert.deepEqual(seen, [3]);
  const other = {};
  const withConfig = createTodoWriteTool(other, {}, (t) => seen.push(t.length));
  await runTool({ TodoWrite: withConfig }, "TodoWrite", { todos: todos.slice(0, 1) });
  assert.deepEqual(seen, [3, 1]);
  const bad = await runTool({ TodoWrite: tool }, "TodoWrite", { todos: [{ content: "x", status: "doing", activeForm: "x" }] });
  assert.match(bad.__toolError, /expected one of "pending", "in_progress", "completed"/);
});

test("Skill: loads SKILL.md through the sandbox without its frontmatter", async () => {
  const { ws, tools } = await setup(
    { ".skills/pdf/SKILL.md": "---\nname: pdf\ndescription: PDFs\n---\n\nUse pdftotext.\n" },
    { skill: { skills: { pdf: { name: "pdf", path: ".skills/pdf/SKILL.md", allowedTools: ["Bash"] } } } },
  );
  try {
    assert.deepEqual(await runTool(tools, "Skill", { name: "pdf" }), {
      name: "pdf",
      instructions: "Use pdftotext.",
      allowed_tools: ["Bash"],
      message: "Skill 'pdf' activated. Restricted to tools: Bash",
    });
    assert.deepEqual(await runTool(tools, "Skill", { name: "nope" }), { error: "Skill 'nope' not found. Available skills: pdf" });
  } finally {
    ws.cleanup();
  }
});

// ------------------------------------------------------------------------------------ Task

test("Task: a sub-agent runs its own generateText loop with the filtered tools and the budget wired in", async () => {
  const { ws, tools } = await setup({ "notes.txt": "the answer is 42\n" });
  try {
    const sub = scripted([[call("Grep", { pattern: "answer", output_mode: "content" })], "The answer is 42."], {
      modelId: "claude-sonnet-4-5-20250929",
      usagePerStep: usage(1000, 100),
    });
    const budget = createBudgetTracker(1, { modelPricing: { "claude-sonnet-4.5": { inputPerToken: 3e-6, outputPerToken: 15e-6 } } });
    const task = createTaskTool({
      model: sub,
      tools,
      budget,
      subagentTypes: { researcher: { systemPrompt: "You research.", tools: ["Grep", "Read"] } },
    });
    const parent = scripted([[call("Task", { description: "find answer", prompt: "What is the answer?", subagent_type: "researcher" })], "42 it is"]);
    const r = await generateText({ model: parent, tools: { Task: task }, prompt: "go", stopWhen: stepCountIs(5) });
    assert.equal(r.text, "42 it is");
    const out = r.steps[0].toolResults[0].output;
    assert.equal(out.result, "The answer is 42.");
    assert.equal(out.subagent, "researcher");
    assert.equal(out.description, "find answer");
    assert.deepEqual(out.usage, { input_tokens: 2000, output_tokens: 200 });
    const subCall = sub.doGenerateCalls[0];
    assert.deepEqual(subCall.tools.map((t) => t.name), ["Grep", "Read"]);
    assert.equal(subCall.prompt[0].role, "system");
    assert.equal(subCall.prompt[0].content, "You research.");
    const grepResult = sub.doGenerateCalls[1].prompt.at(-1).content[0].output.value;
    assert.equal(grepResult.matches[0].line, "the answer is 42");
    const status = budget.getStatus();
    assert.equal(status.stepsCompleted, 2);
    assert.ok(Math.abs(status.totalCostUsd - 2 * (1000 * 3e-6 + 100 * 15e-6)) < 1e-12);
  } finally {
    ws.cleanup();
  }
});

test("Task: the budget stops a sub-agent; errors come back as {error, subagent, description}", async () => {
  const { ws, tools } = await setup({});
  try {
    const sub = scripted([[call("Bash", { command: "true" })], [call("Bash", { command: "true" })], [call("Bash", { command: "true" })], "end"], {
      modelId: "pricey",
      usagePerStep: usage(1000, 0),
    });
    const budget = createBudgetTracker(0.0015, { modelPricing: { pricey: { inputPerToken: 1e-6, outputPerToken: 0 } } });
    const task = createTaskTool({ model: sub, tools, budget });
    const r = await runTool({ Task: task }, "Task", { description: "loop", prompt: "p", subagent_type: "any" });
    assert.equal(sub.doGenerateCalls.length, 2, "stopped once the budget was spent");
    assert.equal(budget.getStatus().exceeded, true);
    assert.equal(r.subagent, "any");
    const failing = createTaskTool({ model: { specificationVersion: "v3", provider: "x", modelId: "x", supportedUrls: {}, doGenerate: async () => { throw new Error("model down"); }, doStream: async () => { throw new Error("x"); } }, tools });
    const err = await runTool({ Task: failing }, "Task", { description: "d", prompt: "p", subagent_type: "t" });
    assert.match(err.error, /model down/);
    assert.equal(err.subagent, "t");
    assert.equal(err.description, "d");
    assert.equal(typeof err.duration_ms, "number");
  } finally {
    ws.cleanup();
  }
});

test("Task with a streamWriter streams the sub-agent and reports its events", async () => {
  const { ws, tools } = await setup({ "a.txt": "x" });
  try {
    const { MockLanguageModelV3 } = await import("ai/test");
    const { simulateReadableStream } = await import("ai");
    let n = 0;
    const sub = new MockLanguageModelV3({
      doStream: async () => {
        n++;
        const chunks =
          n === 1
            ? [{ type: "tool-call", toolCallId: "s1", toolName: "Read", input: '{"file_path":"a.txt"}' }, { type: "finish", finishReason: { unified: "tool-calls", raw: undefined }, usage: usage() }]
            : [{ type: "text-start", id: "1" }, { type: "text-delta", id: "1", delta: "read it" }, { type: "text-end", id: "1" }, { type: "finish", finishReason: { unified: "stop", raw: undefined }, usage: usage() }];
        return { stream: simulateReadableStream({ chunks, initialDelayInMs: null, chunkDelayInMs: null }) };
      },
    });
    const events = [];
    const task = createTaskTool({ model: sub, tools, streamWriter: { write: (e) => events.push(e) } });
    const out = await runTool({ Task: task }, "Task", { description: "d", prompt: "p", subagent_type: "general" });
    assert.equal(out.result, "read it");
    assert.deepEqual(events.map((e) => e.data.event), ["start", "tool-call", "done", "complete"]);
    assert.equal(events[1].data.toolName, "Read");
    assert.deepEqual(events[1].data.args, { file_path: "a.txt", offset: null, limit: null });
  } finally {
    ws.cleanup();
  }
});

// ------------------------------------------------------------------------------ web tools

function fakeServer(handler) {
  return new Promise((resolve) => {
    const requests = [];
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        requests.push({ method: req.method, url: req.url, headers: req.headers, body });
        handler(req, res, body);
      });
    });
    server.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${server.address().port}`, requests, close: () => new Promise((r) => server.close(r)) }));
  });
}

test("WebSearch: Parallel's search API over HTTP (fake server), domain filters, errors", async () => {
  let status = 200;
  const srv = await fakeServer((req, res) => {
    res.writeHead(status, { "content-type": "application/json" });
    if (status !== 200) return res.end(JSON.stringify({ error: "busy" }));
    res.end(
      JSON.stringify({
        search_id: "s1",
        results: [
          { url: "https://docs.example.com/a", title: "A", excerpts: ["first", "second"], publish_date: "2025-01-02" },
          { url: "https://spam.test/b", title: "B", excerpts: ["spam"] },
        ],
      }),
    );
  });
  const ws = tempWorkspace();
  try {
    const { tools } = await createAgentTools(createLocalSandbox({ workingDirectory: ws.dir }), { webSearch: { apiKey: "pk", baseUrl: srv.url } });
    assert.ok(tools.WebFetch, "webSearch enables WebFetch too (the seed's rule)");
    const out = await runTool(tools, "WebSearch", { query: "knap docs", blocked_domains: ["spam.test"] });
    assert.deepEqual(out, {
      results: [{ title: "A", url: "https://docs.example.com/a", snippet: "first\nsecond", metadata: { publish_date: "2025-01-02" } }],
      total_results: 1,
      query: "knap docs",
    });
    const req = srv.requests[0];
    assert.equal(req.method, "POST");
    assert.equal(req.url, "/v1beta/search");
    assert.equal(req.headers["x-api-key"], "pk");
    assert.deepEqual(JSON.parse(req.body), { objective: "knap docs", search_queries: ["knap docs"], mode: "agentic", max_results: 10, source_policy: { exclude_domains: ["spam.test"] } });
    const allowed = await runTool(tools, "WebSearch", { query: "q", allowed_domains: ["example.com"] });
    assert.deepEqual(allowed.results.map((r) => r.title), ["A"]);
    status = 429;
    const limited = await runTool(tools, "WebSearch", { query: "q" });
    assert.equal(limited.status_code, 429);
    assert.equal(limited.retryable, true);
    assert.match(limited.error, /^HTTP 429/);
    status = 400;
    assert.equal((await runTool(tools, "WebSearch", { query: "q" })).retryable, false);
    const noKey = createWebSearchTool({ baseUrl: srv.url });
    assert.deepEqual(await runTool({ WebSearch: noKey }, "WebSearch", { query: "q" }), { error: "WebSearch needs an API key (webSearch.apiKey)" });
  } finally {
    await srv.close();
    ws.cleanup();
  }
});

test("WebFetch: a direct GET (HTML to text, redirects), with and without a model, errors", async () => {
  const srv = await fakeServer((req, res) => {
    if (req.url === "/page") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      return res.end("<html><head><title>t</title><style>x{}</style></head><body><h1>Hello &amp; welcome</h1><script>evil()</script><p>Line one<br>Line two</p><ul><li>item</li></ul></body></html>");
    }
    if (req.url === "/moved") {
      res.writeHead(302, { location: "/page" });
      return res.end();
    }
    if (req.url === "/json") {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end('{"a":1}');
    }
    if (req.url === "/bin") {
      res.writeHead(200, { "content-type": "image/png" });
      return res.end(Buffer.from([0, 1, 2]));
    }
    res.writeHead(503, { "content-type": "text/plain" });
    res.end("down");
  });
  try {
    const tools = { WebFetch: createWebFetchTool({}) };
    assert.deepEqual(await runTool(tools, "WebFetch", { url: `${srv.url}/page`, prompt: "summarise" }), {
      response: "Hello & welcome\nLine one\nLine two\n- item",
      url: `${srv.url}/page`,
      final_url: `${srv.url}/page`,
      status_code: 200,
    });
    const moved = await runTool(tools, "WebFetch", { url: `${srv.url}/moved`, prompt: "p" });
    assert.equal(moved.final_url, `${srv.url}/page`);
    assert.equal((await runTool(tools, "WebFetch", { url: `${srv.url}/json`, prompt: "p" })).response, '{"a":1}');
    assert.deepEqual(await runTool(tools, "WebFetch", { url: `${srv.url}/down`, prompt: "p" }), { error: "HTTP 503 Service Unavailable: down", status_code: 503, retryable: true });
    assert.deepEqual(await runTool(tools, "WebFetch", { url: `${srv.url}/bin`, prompt: "p" }), { error: "Unsupported content type: image/png" });
    assert.deepEqual(await runTool(tools, "WebFetch", { url: "not a url", prompt: "p" }), { error: "Invalid URL: not a url" });
    const spare = await fakeServer(() => {});
    const closedUrl = `${spare.url}/x`;
    await spare.close();
    const closed = await runTool(tools, "WebFetch", { url: closedUrl, prompt: "p" });
    assert.match(closed.error, /fetch failed \(ECONNREFUSED\)/);
    // With a model, the prompt is answered from the page text.
    const model = scripted(["It says hello."]);
    const withModel = { WebFetch: createWebFetchTool({ model }) };
    const answered = await runTool(withModel, "WebFetch", { url: `${srv.url}/page`, prompt: "What does it say?" });
    assert.equal(answered.response, "It says hello.");
    const sent = model.doGenerateCalls[0].prompt.at(-1).content[0].text;
    assert.equal(sent, `What does it say?\n\nContent from ${srv.url}/page:\n\nHello & welcome\nLine one\nLine two\n- item`);
  } finally {
    await srv.close();
  }
});

test("WebFetch with provider parallel uses the extract API", async () => {
  const srv = await fakeServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ results: [{ url: "https://final.example/x", full_content: "# Extracted" }] }));
  });
  try {
    const tools = { WebFetch: createWebFetchTool({ provider: "parallel", apiKey: "k", baseUrl: srv.url }) };
    assert.deepEqual(await runTool(tools, "WebFetch", { url: "https://example.com/x", prompt: "p" }), {
      response: "# Extracted",
      url: "https://example.com/x",
      final_url: "https://final.example/x",
    });
    assert.equal(srv.requests[0].url, "/v1beta/extract");
    assert.deepEqual(JSON.parse(srv.requests[0].body), { urls: ["https://example.com/x"], excerpts: true, full_content: true });
  } finally {
    await srv.close();
  }
});

test("a multi-step loop: Write, then Read and Grep see the file, then the model answers", async () => {
  const { ws, tools } = await setup({});
  try {
    const model = scripted([
      [call("Write", { file_path: "notes/todo.md", content: "- [ ] ship knap\n" })],
      [call("Read", { file_path: "notes/todo.md" }), call("Grep", { pattern: "ship", output_mode: "content" })],
      "All set.",
    ]);
    const r = await generateText({ model, tools, prompt: "go", stopWhen: stepCountIs(10) });
    assert.equal(r.text, "All set.");
    assert.equal(r.steps.length, 3);
    const [read, grep] = r.steps[1].toolResults.map((t) => t.output);
    assert.equal(read.content, "- [ ] ship knap\n");
    assert.deepEqual(grep.matches, [{ file: "./notes/todo.md", line_number: 1, line: "- [ ] ship knap" }]);
  } finally {
    ws.cleanup();
  }
});

test("every knap/ai-sdk factory refuses an option key it does not read, naming it (nothing silently accepted)", async () => {
  const ai = await import("knap/ai-sdk");
  const ws = tempWorkspace();
  const sb = ai.createLocalSandbox({ cwd: ws.root });
  try {
    const refused = (where, key) => (e) => {
      assert.equal(e.code, "cave_config_unknown_key", `${where}: ${e.message}`);
      assert.ok(e.message.startsWith(`cave_config_unknown_key: ${where} does not know the option "${key}"\n`), e.message);
      return true;
    };
    const sync = [
      ["getContextStatus", () => ai.getContextStatus([], 100, { critical: 0.9 }), "critical"],
      ["pruneMessagesByTokens", () => ai.pruneMessagesByTokens([], { target: 1 }), "target"],
      ["pruneMessages", () => ai.pruneMessages([], { maxToken: 1 }), "maxToken"],
      ["createExecutionPolicy", () => ai.createExecutionPolicy(undefined, { blockedTools: ["Bash"] }), "blockedTools"],
      ["createOutputPolicy", () => ai.createOutputPolicy({ maxLength: 10 }), "maxLength"],
      ["createOutputPolicy stashOutput", () => ai.createOutputPolicy({ stashOutput: { sandbox: sb, tools: [], directory: "/x" } }), "directory"],
      ["createBudgetTracker", () => ai.createBudgetTracker(1, { pricing: {} }), "pricing"],
      ["cached", () => ai.cached({ execute: async () => ({}) }, "X", { ttlMs: 5 }), "ttlMs"],
      ["createReadTool", () => ai.createReadTool(sb, { maxSize: 5 }), "maxSize"],
      ["createBashTool", () => ai.createBashTool(sb, { onOutput: () => {} }), "onOutput"],
      ["createAskUserTool", () => ai.createAskUserTool({ question: "?" }), "question"],
      ["createTodoWriteTool", () => ai.createTodoWriteTool({}, { strictt: true }), "strictt"],
      ["createSkillTool", () => ai.createSkillTool({ skills: {}, onActivated: () => {} }), "onActivated"],
      ["createWebSearchTool", () => ai.createWebSearchTool({ apiKey: "k", limit: 3 }), "limit"],
      ["createWebFetchTool", () => ai.createWebFetchTool({ maxLength: 3 }), "maxLength"],
      ["createTaskTool", () => ai.createTaskTool({ model: {}, tools: {}, maxSteps: 3 }), "maxSteps"],
      ["createTaskTool subagentTypes.r", () => ai.createTaskTool({ model: {}, tools: {}, subagentTypes: { r: { system: "x" } } }), "system"],
      ["createRedisCacheStore", () => ai.createRedisCacheStore({ get() {}, set() {}, del() {}, keys() {} }, { ttl: 5 }), "ttl"],
      ["toAiSdkTools", () => ai.toAiSdkTools([], { policy: () => {} }), "policy"],
    ];
    for (const [where, f, key] of sync) assert.throws(f, refused(where, key));
    const later = [
      ["createAgentTools cache", () => ai.createAgentTools(sb, { cache: { tll: 5 } }), "tll"],
      ["createAgentTools budget", () => ai.createAgentTools(sb, { budget: { maxUsd: 1, modelPricing: {}, limit: 2 } }), "limit"],
      ["createAgentTools context", () => ai.createAgentTools(sb, { context: { outputPolicies: {} } }), "outputPolicies"],
      ["createAgentTools context.executionPolicy", () => ai.createAgentTools(sb, { context: { executionPolicy: { blocked: [] } } }), "blocked"],
      ["createAgentTools planMode", () => ai.createAgentTools(sb, { planMode: { onExit: () => {} } }), "onExit"],
      ["createAgentTools patch", () => ai.createAgentTools(sb, { patch: { maxSize: 1 } }), "maxSize"],
      ["createAgentTools modelRegistry", () => ai.createAgentTools(sb, { modelRegistry: { provider: "openRouter", key: "k" } }), "key"],
      ["discoverSkills", () => ai.discoverSkills({ dirs: [] }), "dirs"],
      ["fetchSkill", () => ai.fetchSkill("a/b/c", { fetcher: fetch }), "fetcher"],
      ["setupAgentEnvironment", () => ai.setupAgentEnvironment(sb, { folders: {} }), "folders"],
      ["fetchOpenRouterModels", () => ai.fetchOpenRouterModels(undefined, { timeout: 5 }), "timeout"],
    ];
    for (const [where, f, key] of later) await assert.rejects(f, refused(where, key));
    // The keys bashkit documents (and knap's own) are taken.
    assert.equal(ai.getContextStatus([], 100, { criticalThreshold: 0.9, knownTokenCount: 95 }).status, "critical");
    const { tools } = await ai.createAgentTools(sb, { cache: { ttl: 5, Read: false, Grep: true }, context: { executionPolicy: { shouldBlock: () => undefined }, outputPolicy: { maxOutputLength: 10 } } });
    assert.equal(typeof tools.Read.execute, "function");
  } finally {
    await sb.destroy();
    ws.cleanup();
  }
});
