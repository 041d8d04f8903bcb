// The kernel ↔ JS seam carries messages in exactly the shapes serde gives the kernel's types:
// the tool results a provider call sees are the ones `stream()`'s events carry (whichever of the
// binding's paths built them: the positional one-tool-result step or the general request), and an
// assistant message read back from the transport keeps every member (as the journal shows).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { run, stream, schema, tool, DiskDurableStore } from "../lib/index.mjs";
import { messageStream } from "../lib/event-stream.mjs";
import { baseOptions, collect, countingTool, hostAgent, recordingStream } from "./run-helpers.mjs";

const failing = tool({
  name: "boom",
  description: "always throws",
  input: schema.object({}),
  effect: "read",
  execute: () => {
    throw new Error("boom failed");
  },
});

test("tool results reach the transport in the shape the kernel's events give them (key order included)", async () => {
  const counter = { n: 0 };
  const def = hostAgent("seam", [countingTool("lookup", "read", counter), failing]);
  const turns = [
    { toolCalls: [{ name: "lookup", args: {} }] }, // one result: the positional step
    { toolCalls: [{ name: "boom", args: {} }] }, // one failed result: details {}
    { toolCalls: [{ name: "nope", args: {} }] }, // an unknown tool
    { toolCalls: [{ name: "lookup", args: {} }, { name: "boom", args: {} }] }, // two results: the general request
    { text: "done" },
  ];
  const { streamFn, calls } = recordingStream(turns);
  const events = await collect(stream(def, "go", { ...baseOptions([]), streamFn }));
  assert.equal(events.at(-1).type, "run_end");
  const fromEvents = events
    .filter((e) => e.type === "pi" && e.event.type === "message_end" && e.event.message.role === "toolResult")
    .map((e) => e.event.message);
  const seen = calls.at(-1).messages.filter((m) => m.role === "toolResult");
  assert.equal(seen.length, 5);
  assert.equal(JSON.stringify(seen), JSON.stringify(fromEvents));
  assert.deepEqual(Object.keys(seen[0]), ["role", "toolCallId", "toolName", "content", "details", "isError", "timestamp"]);
  assert.deepEqual(seen[0].details, { effect: "read", resultPolicy: "auto" });
  assert.deepEqual(seen[1].details, {});
  assert.equal(seen[1].isError, true);
  assert.equal(typeof seen[0].timestamp, "number");
  // run() sends the same messages as stream() does.
  const again = recordingStream(turns);
  await run(def, "go", { ...baseOptions([]), streamFn: again.streamFn });
  const strip = (ms) => ms.map(({ timestamp, ...m }) => m);
  assert.deepEqual(
    again.calls.map((c) => strip(c.messages)),
    calls.map((c) => strip(c.messages)),
  );
});

test("an assistant message read back from the transport keeps every member", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-seam-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new DiskDurableStore(dir);
  const first = {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "hm", thinkingSignature: "sig-t", redacted: false },
      { type: "text", text: "looking", textSignature: "sig-x" },
      { type: "toolCall", id: "c1", name: "lookup", arguments: { q: 1.5, n: 2, deep: { a: [1, "x", null, true] } }, thoughtSignature: "sig-c" },
    ],
    api: "faux",
    provider: "anthropic",
    model: "faux-1",
    responseId: "resp-1",
    usage: { input: 120, output: 7, cacheRead: 3, cacheWrite: 1, reasoning: 2, totalTokens: 131, cost: { input: 0.5, output: 0.25, cacheRead: 0, cacheWrite: 0, total: 0.75 } },
    stopReason: "toolUse",
    timestamp: 1764700000123,
  };
  const last = { role: "assistant", content: [{ type: "text", text: "done" }], usage: { input: 1, output: 1 }, stopReason: "stop" };
  const replies = [first, last];
  const streamFn = (_model, _context, options) => messageStream(replies.shift(), options?.signal);
  const counter = { n: 0 };
  const def = hostAgent("seam", [countingTool("lookup", "read", counter)]);
  const result = await run(def, "go", { ...baseOptions([]), streamFn, durable: { runId: "seam-1", store } });
  assert.equal(result.text, "done");
  assert.equal(result.receipt.calls[0].inputTokens, 120);
  assert.equal(result.receipt.calls[0].cacheReadTokens, 3);
  const turns = (await store.load("seam-1")).map((l) => JSON.parse(l)).filter((e) => e.type === "turn");
  const journaled = turns.flatMap((e) => e.messages).filter((m) => m.role === "assistant");
  assert.deepEqual(journaled[0], first);
  assert.deepEqual(journaled[1], { ...last, usage: { input: 1, output: 1 } });
});

test("an unreadable assistant message fails the run with the provider's terminal error", async () => {
  const bad = [
    { role: "assistant", content: "text", stopReason: "stop" },
    { role: "assistant", content: [{ type: "text", text: 5 }], stopReason: "stop" },
    { role: "assistant", content: [], usage: null, stopReason: "stop" },
    { role: "assistant", content: [], usage: { input: "7" }, stopReason: "stop" },
    { role: "assistant", content: [], stopReason: 3 },
  ];
  for (const message of bad) {
    const def = hostAgent("seam", []);
    const streamFn = (_model, _context, options) => messageStream(message, options?.signal);
    await assert.rejects(run(def, "go", { ...baseOptions([]), streamFn }), (error) => {
      assert.match(error.message, /cave_provider_terminal_error: unreadable assistant message: /, JSON.stringify(message));
      return true;
    });
  }
});
