// The real HTTP path: pi-ai's streamSimple -> Anthropic / OpenAI SDK -> a fake provider server on
// 127.0.0.1 speaking the provider's SSE format. No internet; the base URL is overridden per model.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { getModel, Type } from "@mariozechner/pi-ai";
import { callModel } from "../lib/transport.mjs";
import { defaultStreamFn, resolveModelCall } from "../lib/models.mjs";

const ANTHROPIC_KEY = "sk-ant-test-0000-dummy";
const OPENAI_KEY = "sk-test-openai-dummy";

let server;
let baseUrl;
const requests = [];
let respond = () => {};
const savedEnv = {};

function sse(res, events) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  for (const [event, data] of events) {
    res.write(`${event ? `event: ${event}\n` : ""}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
  }
  res.end();
}

before(async () => {
  for (const name of ["ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "OPENAI_API_KEY"]) savedEnv[name] = process.env[name];
  delete process.env.ANTHROPIC_OAUTH_TOKEN; // would take precedence over ANTHROPIC_API_KEY in pi-ai
  process.env.ANTHROPIC_API_KEY = ANTHROPIC_KEY;
  process.env.OPENAI_API_KEY = OPENAI_KEY;
  server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const request = { method: req.method, url: req.url, headers: req.headers, body: body ? JSON.parse(body) : undefined };
      requests.push(request);
      respond(request, res);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${server.address().port}`;
});

after(async () => {
  for (const [name, value] of Object.entries(savedEnv)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  server.closeAllConnections?.();
  await new Promise((resolve) => server.close(resolve));
});

const readTool = {
  name: "read_file",
  description: "Read a UTF-8 file from the workspace",
  parameters: Type.Object({ path: Type.String({ description: "workspace-relative path" }) }),
};

const context = {
  systemPrompt: "You are a support agent.",
  messages: [{ role: "user", content: [{ type: "text", text: "What does README.md say?" }], timestamp: 1 }],
  tools: [readTool],
};

function anthropicToolTurn() {
  return [
    [
      "message_start",
      {
        type: "message_start",
        message: {
          id: "msg_01",
          type: "message",
          role: "assistant",
          model: "claude-haiku-4-5",
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 100, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
        },
      },
    ],
    ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
    ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Let me " } }],
    ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "look." } }],
    ["content_block_stop", { type: "content_block_stop", index: 0 }],
    [
      "content_block_start",
      { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "toolu_01", name: "read_file", input: {} } },
    ],
    ["content_block_delta", { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"path": "READ' } }],
    ["content_block_delta", { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: 'ME.md"}' } }],
    ["content_block_stop", { type: "content_block_stop", index: 1 }],
    ["message_delta", { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 10 } }],
    ["message_stop", { type: "message_stop" }],
  ];
}

test("anthropic: pi-ai streamSimple over HTTP to a fake server (request and parsed response)", async () => {
  requests.length = 0;
  respond = (request, res) => sse(res, anthropicToolTurn());
  const model = { ...getModel("anthropic", "claude-haiku-4-5"), baseUrl };
  const events = [];
  const message = await callModel({
    model,
    context,
    options: { maxTokens: 512, maxRetries: 0 },
    streamFn: defaultStreamFn(),
    onEvent: (event) => events.push(event),
  });

  // the request
  assert.equal(requests.length, 1);
  const request = requests[0];
  assert.equal(request.method, "POST");
  assert.equal(request.url, "/v1/messages");
  assert.equal(request.headers["x-api-key"], ANTHROPIC_KEY);
  assert.ok(request.headers["anthropic-version"], "anthropic-version header");
  assert.match(request.headers["content-type"], /application\/json/);
  assert.equal(request.body.model, "claude-haiku-4-5");
  assert.equal(request.body.stream, true);
  assert.equal(request.body.max_tokens, 512);
  const systemText = JSON.stringify(request.body.system);
  assert.match(systemText, /You are a support agent\./);
  assert.equal(request.body.messages.length, 1);
  assert.equal(request.body.messages[0].role, "user");
  assert.match(JSON.stringify(request.body.messages[0].content), /What does README\.md say\?/);
  assert.equal(request.body.tools.length, 1);
  assert.equal(request.body.tools[0].name, "read_file");
  assert.equal(request.body.tools[0].description, "Read a UTF-8 file from the workspace");
  assert.deepEqual(request.body.tools[0].input_schema.properties, { path: { type: "string", description: "workspace-relative path" } });
  assert.deepEqual(request.body.tools[0].input_schema.required, ["path"]);

  // the parsed final message
  assert.equal(message.role, "assistant");
  assert.equal(message.stopReason, "toolUse");
  assert.deepEqual(message.content, [
    { type: "text", text: "Let me look." },
    { type: "toolCall", id: "toolu_01", name: "read_file", arguments: { path: "README.md" } },
  ]);
  assert.deepEqual([message.api, message.provider, message.model], ["anthropic-messages", "anthropic", "claude-haiku-4-5"]);
  assert.equal(message.responseId, "msg_01");
  assert.equal(message.usage.input, 100);
  assert.equal(message.usage.output, 10);
  assert.equal(message.usage.totalTokens, 110);
  assert.ok(Math.abs(message.usage.cost.total - (100 * 1 + 10 * 5) / 1e6) < 1e-12, `cost ${message.usage.cost.total}`);

  // the events the kernel relays
  assert.equal(events[0].type, "message_start");
  assert.equal(events.at(-1).type, "message_end");
  const deltas = events.filter((e) => e.type === "message_update" && e.assistantMessageEvent.type === "text_delta");
  assert.deepEqual(
    deltas.map((e) => e.assistantMessageEvent.delta),
    ["Let me ", "look."],
  );
  assert.ok(events.some((e) => e.type === "message_update" && e.assistantMessageEvent.type === "toolcall_end"));
});

test("anthropic: the second turn sends the tool call and its result back", async () => {
  requests.length = 0;
  respond = (request, res) =>
    sse(res, [
      [
        "message_start",
        {
          type: "message_start",
          message: { id: "msg_02", type: "message", role: "assistant", model: "claude-haiku-4-5", content: [], usage: { input_tokens: 140, output_tokens: 1 } },
        },
      ],
      ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
      ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "It says hello." } }],
      ["content_block_stop", { type: "content_block_stop", index: 0 }],
      ["message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 5 } }],
      ["message_stop", { type: "message_stop" }],
    ]);
  const model = { ...getModel("anthropic", "claude-haiku-4-5"), baseUrl };
  const assistant = {
    role: "assistant",
    content: [
      { type: "text", text: "Let me look." },
      { type: "toolCall", id: "toolu_01", name: "read_file", arguments: { path: "README.md" } },
    ],
    api: "anthropic-messages",
    provider: "anthropic",
    model: "claude-haiku-4-5",
    usage: { input: 100, output: 10, cacheRead: 0, cacheWrite: 0, totalTokens: 110, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
    stopReason: "toolUse",
    timestamp: 2,
  };
  const toolResult = {
    role: "toolResult",
    toolCallId: "toolu_01",
    toolName: "read_file",
    content: [{ type: "text", text: "hello" }],
    isError: false,
    timestamp: 3,
  };
  const message = await callModel({
    model,
    context: { ...context, messages: [...context.messages, assistant, toolResult] },
    options: { maxRetries: 0 },
    streamFn: defaultStreamFn(),
  });
  assert.equal(message.stopReason, "stop");
  assert.deepEqual(message.content, [{ type: "text", text: "It says hello." }]);
  const sent = requests[0].body.messages;
  assert.deepEqual(
    sent.map((m) => m.role),
    ["user", "assistant", "user"],
  );
  const toolUse = sent[1].content.find((part) => part.type === "tool_use");
  assert.deepEqual([toolUse.id, toolUse.name, toolUse.input], ["toolu_01", "read_file", { path: "README.md" }]);
  const result = sent[2].content.find((part) => part.type === "tool_result");
  assert.equal(result.tool_use_id, "toolu_01");
  assert.match(JSON.stringify(result.content), /hello/);
});

test("anthropic: an HTTP error becomes an error message, not a throw", async () => {
  requests.length = 0;
  respond = (request, res) => {
    res.writeHead(401, { "content-type": "application/json" });
    res.end(JSON.stringify({ type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } }));
  };
  const model = { ...getModel("anthropic", "claude-haiku-4-5"), baseUrl };
  const message = await callModel({ model, context, options: { maxRetries: 0 }, streamFn: defaultStreamFn() });
  assert.equal(message.stopReason, "error");
  assert.match(message.errorMessage, /invalid x-api-key/);
  assert.equal(requests.length, 1);
});

test("anthropic: aborting mid-response ends the call as aborted", async () => {
  requests.length = 0;
  let hungResponse;
  respond = (request, res) => {
    hungResponse = res;
    res.writeHead(200, { "content-type": "text/event-stream" });
    const [first, second, third] = anthropicToolTurn();
    for (const [event, data] of [first, second, third]) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    // and then nothing: the connection stays open
  };
  const controller = new AbortController();
  const model = { ...getModel("anthropic", "claude-haiku-4-5"), baseUrl };
  const message = await callModel({
    model,
    context,
    options: { signal: controller.signal, maxRetries: 0 },
    streamFn: defaultStreamFn(),
    onEvent: (event) => {
      if (event.type === "message_update" && event.assistantMessageEvent.type === "text_delta") controller.abort();
    },
  });
  assert.equal(message.stopReason, "aborted");
  assert.equal(message.content[0].text.startsWith("Let me"), true);
  hungResponse?.destroy();
});

test("openai: resolveModelCall('openai/gpt-5.4-mini') over HTTP to a fake Responses API", async () => {
  requests.length = 0;
  const item = { id: "msg_1", type: "message", role: "assistant", status: "in_progress", content: [] };
  const fc = { id: "fc_1", type: "function_call", call_id: "call_abc", name: "read_file", arguments: "", status: "in_progress" };
  respond = (request, res) =>
    sse(res, [
      ["response.created", { type: "response.created", sequence_number: 0, response: { id: "resp_1", object: "response", status: "in_progress", output: [] } }],
      ["response.output_item.added", { type: "response.output_item.added", sequence_number: 1, output_index: 0, item }],
      [
        "response.content_part.added",
        { type: "response.content_part.added", sequence_number: 2, item_id: "msg_1", output_index: 0, content_index: 0, part: { type: "output_text", text: "", annotations: [] } },
      ],
      ["response.output_text.delta", { type: "response.output_text.delta", sequence_number: 3, item_id: "msg_1", output_index: 0, content_index: 0, delta: "Checking." }],
      [
        "response.output_item.done",
        {
          type: "response.output_item.done",
          sequence_number: 4,
          output_index: 0,
          item: { ...item, status: "completed", content: [{ type: "output_text", text: "Checking.", annotations: [] }] },
        },
      ],
      ["response.output_item.added", { type: "response.output_item.added", sequence_number: 5, output_index: 1, item: fc }],
      [
        "response.function_call_arguments.delta",
        { type: "response.function_call_arguments.delta", sequence_number: 6, item_id: "fc_1", output_index: 1, delta: '{"path":"README.md"}' },
      ],
      [
        "response.output_item.done",
        { type: "response.output_item.done", sequence_number: 7, output_index: 1, item: { ...fc, arguments: '{"path":"README.md"}', status: "completed" } },
      ],
      [
        "response.completed",
        {
          type: "response.completed",
          sequence_number: 8,
          response: {
            id: "resp_1",
            object: "response",
            status: "completed",
            output: [],
            usage: {
              input_tokens: 80,
              input_tokens_details: { cached_tokens: 0 },
              output_tokens: 12,
              output_tokens_details: { reasoning_tokens: 0 },
              total_tokens: 92,
            },
          },
        },
      ],
    ]);
  const models = {
    getModel: (provider, id) => (provider === "openai" ? { ...getModel(provider, id), baseUrl: `${baseUrl}/v1` } : undefined),
  };
  const { model, streamFn, source } = await resolveModelCall("openai/gpt-5.4-mini", { models });
  assert.equal(source, "pinned");
  const message = await callModel({ model, context, options: { maxRetries: 0 }, streamFn });
  const request = requests[0];
  assert.equal(request.url, "/v1/responses");
  assert.equal(request.headers.authorization, `Bearer ${OPENAI_KEY}`);
  assert.equal(request.body.model, "gpt-5.4-mini");
  assert.equal(request.body.stream, true);
  assert.match(JSON.stringify(request.body.input), /What does README\.md say\?/);
  assert.match(JSON.stringify(request.body.input ?? request.body.instructions), /You are a support agent\./);
  assert.equal(request.body.tools[0].name, "read_file");
  assert.equal(request.body.tools[0].type, "function");
  assert.deepEqual(request.body.tools[0].parameters.required, ["path"]);
  assert.equal(message.stopReason, "toolUse");
  assert.deepEqual(message.content[0], { type: "text", text: "Checking.", textSignature: message.content[0].textSignature });
  const call = message.content.find((part) => part.type === "toolCall");
  assert.equal(call.name, "read_file");
  assert.deepEqual(call.arguments, { path: "README.md" });
  assert.match(call.id, /call_abc/);
  assert.equal(message.usage.input, 80);
  assert.equal(message.usage.output, 12);
  assert.equal(message.provider, "openai");
});
