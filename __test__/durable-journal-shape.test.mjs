// The journal's `tool_settled.value` has the reference's shape: the tool's result value as Pi
// sees it, in canonical JSON. Journals knap wrote before (the bare text) still replay.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { run, DiskDurableStore } from "../lib/index.mjs";
import { baseOptions, countingTool, hostAgent, recordingStream, toolResultsSeen } from "./run-helpers.mjs";

function tempStore(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-journal-shape-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return new DiskDurableStore(dir);
}

const journal = async (store, runId) => (await store.load(runId)).map((line) => JSON.parse(line));

test("tool_settled.value.json is the tool's result value as Pi sees it, canonical", async (t) => {
  const store = tempStore(t);
  const counter = { n: 0 };
  const def = hostAgent("shape", [countingTool("lookup", "read", counter)]);
  await run(def, "go", baseOptions([{ toolCalls: [{ name: "lookup", args: {} }] }, { text: "done" }], { durable: { runId: "shape-1", store } }));
  const events = await journal(store, "shape-1");
  const settled = events.find((e) => e.type === "tool_settled");
  assert.equal(settled.outcome, "returned");
  assert.deepEqual(settled.value, {
    encoding: "json",
    json: { content: [{ text: "lookup:ok", type: "text" }], details: { effect: "read", resultPolicy: "auto" } },
  });
  // Canonical: keys sorted at every level, as written on disk.
  const line = (await store.load("shape-1")).find((l) => l.includes('"tool_settled"'));
  assert.ok(line.includes('"value":{"encoding":"json","json":{"content":[{"text":"lookup:ok","type":"text"}],"details":{"effect":"read","resultPolicy":"auto"}}}'), line);
});

test("a journal with the earlier value shape (the bare text) replays the same text", async (t) => {
  const store = tempStore(t);
  const counter = { n: 0 };
  const def = hostAgent("shape", [countingTool("lookup", "read", counter)]);
  const script = () => [{ toolCalls: [{ name: "lookup", args: {} }] }, { text: "done" }];
  await run(def, "go", baseOptions(script(), { durable: { runId: "shape-2", store } }));
  assert.equal(counter.n, 1);
  // Rewrite the settlement to the old shape and cut the journal after it (a crash there).
  const lines = await store.load("shape-2");
  const at = lines.findIndex((l) => l.includes('"tool_settled"'));
  const old = JSON.parse(lines[at]);
  old.value = { encoding: "json", json: "lookup:ok" };
  const file = path.join(store.runDir("shape-2"), "journal.jsonl");
  fs.writeFileSync(file, [...lines.slice(0, at), JSON.stringify(old)].map((l) => l + "\n").join(""));
  const { streamFn, calls } = recordingStream(script());
  const result = await run(def, "go", { ...baseOptions([]), streamFn, durable: { runId: "shape-2", store } });
  assert.equal(result.text, "done");
  assert.equal(result.resumed, true);
  assert.equal(counter.n, 1, "the settled read replayed, not re-run");
  assert.deepEqual(toolResultsSeen(calls), [{ name: "lookup", isError: false, text: "lookup:ok" }]);
});
