// A fake model provider on 127.0.0.1 for coding-agent tests: answers Anthropic Messages
// (`/v1/messages`) and OpenAI Responses (`/v1/responses`) streaming requests from a script of
// turns, as the real SSE formats. Not a test file.
import http from "node:http";

/**
 * `turns`: `{ text?, toolCalls?: [{ name, args }], usage?, chunks?, hang? }` per provider call, in
 * order. `text` is streamed in `chunks` pieces (default 3); `hang: true` streams the text and then
 * keeps the response open (for aborts). Past the script, the server answers 500.
 */
export async function startFakeProvider(turns = []) {
  const state = { turns: [...turns], requests: [], open: new Set() };
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const request = { url: req.url, headers: req.headers, body: body ? JSON.parse(body) : undefined };
      state.requests.push(request);
      const turn = state.turns.shift();
      if (!turn) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ type: "error", error: { type: "api_error", message: "fake provider: script exhausted" } }));
        return;
      }
      state.open.add(res);
      res.on("close", () => state.open.delete(res));
      if (req.url.endsWith("/messages")) anthropic(res, turn, request);
      else if (req.url.endsWith("/responses")) openai(res, turn, request);
      else {
        res.writeHead(404);
        res.end();
      }
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    requests: state.requests,
    push: (...more) => state.turns.push(...more),
    get remaining() {
      return state.turns.length;
    },
    async close() {
      for (const res of state.open) res.destroy();
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function pieces(text, n = 3) {
  if (!text) return [];
  const size = Math.max(1, Math.ceil(text.length / n));
  const out = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

function sse(res, events, hang) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  for (const [event, data] of events) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  if (!hang) res.end();
}

let ids = 0;

function anthropic(res, turn, request) {
  const usage = { input_tokens: 100, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0, ...(turn.usage ?? {}) };
  const events = [
    ["message_start", { type: "message_start", message: { id: `msg_${++ids}`, type: "message", role: "assistant", model: request.body?.model, content: [], stop_reason: null, stop_sequence: null, usage } }],
  ];
  let index = 0;
  if (turn.text) {
    events.push(["content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } }]);
    for (const piece of pieces(turn.text, turn.chunks)) events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: piece } }]);
    if (turn.hang) return sse(res, events, true);
    events.push(["content_block_stop", { type: "content_block_stop", index }]);
    index++;
  }
  for (const call of turn.toolCalls ?? []) {
    events.push(["content_block_start", { type: "content_block_start", index, content_block: { type: "tool_use", id: `toolu_${++ids}`, name: call.name, input: {} } }]);
    events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(call.args ?? {}) } }]);
    events.push(["content_block_stop", { type: "content_block_stop", index }]);
    index++;
  }
  const stop = turn.toolCalls?.length ? "tool_use" : "end_turn";
  events.push(["message_delta", { type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: turn.usage?.output_tokens ?? 10 } }]);
  events.push(["message_stop", { type: "message_stop" }]);
  sse(res, events, false);
}

function openai(res, turn) {
  let seq = 0;
  const events = [["response.created", { type: "response.created", sequence_number: seq++, response: { id: `resp_${++ids}`, object: "response", status: "in_progress", output: [] } }]];
  let outputIndex = 0;
  if (turn.text) {
    const item = { id: `msg_${++ids}`, type: "message", role: "assistant", status: "in_progress", content: [] };
    events.push(["response.output_item.added", { type: "response.output_item.added", sequence_number: seq++, output_index: outputIndex, item }]);
    events.push([
      "response.content_part.added",
      { type: "response.content_part.added", sequence_number: seq++, item_id: item.id, output_index: outputIndex, content_index: 0, part: { type: "output_text", text: "", annotations: [] } },
    ]);
    for (const piece of pieces(turn.text, turn.chunks)) {
      events.push(["response.output_text.delta", { type: "response.output_text.delta", sequence_number: seq++, item_id: item.id, output_index: outputIndex, content_index: 0, delta: piece }]);
    }
    if (turn.hang) return sse(res, events, true);
    events.push([
      "response.output_item.done",
      { type: "response.output_item.done", sequence_number: seq++, output_index: outputIndex, item: { ...item, status: "completed", content: [{ type: "output_text", text: turn.text, annotations: [] }] } },
    ]);
    outputIndex++;
  }
  for (const call of turn.toolCalls ?? []) {
    const fc = { id: `fc_${++ids}`, type: "function_call", call_id: `call_${ids}`, name: call.name, arguments: "", status: "in_progress" };
    const args = JSON.stringify(call.args ?? {});
    events.push(["response.output_item.added", { type: "response.output_item.added", sequence_number: seq++, output_index: outputIndex, item: fc }]);
    events.push(["response.function_call_arguments.delta", { type: "response.function_call_arguments.delta", sequence_number: seq++, item_id: fc.id, output_index: outputIndex, delta: args }]);
    events.push(["response.output_item.done", { type: "response.output_item.done", sequence_number: seq++, output_index: outputIndex, item: { ...fc, arguments: args, status: "completed" } }]);
    outputIndex++;
  }
  const input = turn.usage?.input_tokens ?? 100;
  const cached = turn.usage?.cache_read_input_tokens ?? 0;
  events.push([
    "response.completed",
    {
      type: "response.completed",
      sequence_number: seq++,
      response: {
        id: `resp_${ids}`,
        object: "response",
        status: "completed",
        output: [],
        usage: {
          input_tokens: input + cached,
          input_tokens_details: { cached_tokens: cached },
          output_tokens: turn.usage?.output_tokens ?? 10,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: input + cached + (turn.usage?.output_tokens ?? 10),
        },
      },
    },
  ]);
  sse(res, events, false);
}
