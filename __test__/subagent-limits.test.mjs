// RunOptions.maxSubagentInvocations / maxConcurrentSubagents (issue 12): tree-wide subagent
// admission in the kernel. Past a limit the subagent call is a tool error the model reads
// (cave_subagent_invocation_limit / cave_subagent_concurrency_limit) and the run goes on.
import test from "node:test";
import assert from "node:assert/strict";
import { agent, subagent, run } from "../lib/index.mjs";
import { fauxModel } from "../lib/testing.mjs";
import { recordingStream, toolResultsSeen } from "./run-helpers.mjs";

function tree(maxCalls = 10) {
  const child = agent({ id: "child", instructions: "c", model: fauxModel(), sandbox: "host" });
  const helper = subagent({ name: "helper", description: "d", agent: child, maxCalls });
  return agent({ id: "parent", instructions: "p", model: fauxModel(), sandbox: "host", tools: [helper] });
}
const ask = (task) => ({ name: "helper", args: { task } });

test("maxSubagentInvocations: invocations past the limit are refused across turns; the run continues", async () => {
  // Turn 1 starts two children (each answers once), turn 2 asks for a third.
  const { streamFn, calls } = recordingStream([
    { toolCalls: [ask("a"), ask("b")] },
    { text: "child done" },
    { text: "child done" },
    { toolCalls: [ask("c")] },
    { text: "parent done" },
  ]);
  const r = await run(tree(), "go", { model: fauxModel(), streamFn, maxSubagentInvocations: 2 });
  assert.equal(r.text, "parent done");
  assert.equal(calls.length, 5, "the third child never called the model");
  const results = toolResultsSeen(calls);
  assert.deepEqual(results.map((x) => x.isError), [false, false, true]);
  assert.equal(results[2].text, "cave_subagent_invocation_limit");
  assert.deepEqual(r.receipt.tools, [{ name: "helper", calls: 3, errors: 1 }]);
  // Without the option the same script runs all three.
  const again = recordingStream([{ toolCalls: [ask("a"), ask("b")] }, { text: "x" }, { text: "x" }, { toolCalls: [ask("c")] }, { text: "x" }, { text: "parent done" }]);
  const free = await run(tree(), "go", { model: fauxModel(), streamFn: again.streamFn });
  assert.deepEqual(toolResultsSeen(again.calls).map((x) => x.isError), [false, false, false]);
  assert.equal(free.text, "parent done");
});

test("maxConcurrentSubagents: a child started while the limit is in flight is refused; later ones run", async () => {
  // Three parallel children with a limit of 2: the third is refused before it calls the model
  // (the first two are waiting on their model calls). The next turn's child runs: slots free up.
  const { streamFn, calls } = recordingStream([
    { toolCalls: [ask("a"), ask("b"), ask("c")] },
    { text: "child done" },
    { text: "child done" },
    { toolCalls: [ask("d")] },
    { text: "child done" },
    { text: "parent done" },
  ]);
  const r = await run(tree(), "go", { model: fauxModel(), streamFn, maxConcurrentSubagents: 2 });
  assert.equal(r.text, "parent done");
  const results = toolResultsSeen(calls);
  assert.deepEqual(results.map((x) => [x.isError, x.isError ? x.text : JSON.parse(x.text).text]), [
    [false, "child done"],
    [false, "child done"],
    [true, "cave_subagent_concurrency_limit"],
    [false, "child done"],
  ]);
  assert.equal(calls.length, 6);
});

test("the limits are validated with the reference's codes and ranges", async () => {
  const go = (extra) => run(tree(), "hi", { model: fauxModel(), streamFn: () => assert.fail("no model call"), ...extra });
  for (const value of [0, 65_537, 1.5, -1]) {
    await assert.rejects(go({ maxSubagentInvocations: value }), { code: "cave_subagent_invocation_limit_invalid" });
  }
  for (const value of [0, 1_025, 2.5]) {
    await assert.rejects(go({ maxConcurrentSubagents: value }), { code: "cave_subagent_concurrency_limit_invalid" });
  }
});
