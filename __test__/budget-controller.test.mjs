// RunOptions.budgetController, RunOptions.onBudgetExhausted and the legacy maxCostUsd ledger
// (caveman-serve-plugins-memory.md §5.7, caveman-durable.md §5.1–5.2), end to end with a
// scripted model.
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { run, tool, schema, createBudgetController, CavemanRunError } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";
import { DiskDurableStore } from "../lib/durable.mjs";
import { baseOptions, hostAgent, countingTool } from "./run-helpers.mjs";
import { journalEvents } from "./fixtures/durable-scenario.mjs";

const call = (name, args = {}) => ({ name, args });
/** A streamFn that counts provider calls. */
function counted(turns) {
  const inner = scriptedStream(turns);
  const seen = { calls: 0 };
  return { seen, streamFn: (...a) => (seen.calls++, inner(...a)) };
}

// One scripted call costs 100 input + 10 output = 110 tokens; its worst case is well above 1.
const TIGHT = { maxTokens: 200_000, initialTokens: 1, onExhausted: "stop" };

test("onBudgetExhausted releases once at the call boundary; the tranche funds the run and is on the receipt", async () => {
  const contexts = [];
  const { seen, streamFn } = counted([{ text: "done" }]);
  const result = await run(hostAgent("escalate", []), "go", {
    ensureRuntime: false,
    model: fauxModel(),
    streamFn,
    budget: TIGHT,
    onBudgetExhausted: async (ctx) => {
      contexts.push(ctx);
      return { release: 199_999, reason: "approved by ops" };
    },
  });
  assert.equal(result.stopReason, "complete");
  assert.equal(result.text, "done");
  assert.equal(seen.calls, 1);
  assert.equal(contexts.length, 1);
  assert.ok(Object.isFrozen(contexts[0]));
  assert.deepEqual({ ...contexts[0] }, { denomination: "tokens", max: 200_000, released: 1, spent: 0, remaining: 1, releasable: 199_999, calls: 0 });
  assert.deepEqual(result.receipt.tranches, [{ amount: 199_999, reason: "approved by ops", atCall: 0 }]);
  assert.equal(result.receipt.released, 200_000);
  assert.equal(result.receipt.spent, 110);
});

test("onBudgetExhausted \"stop\" (sync or async) stops with budget_exhausted before any provider call", async () => {
  for (const handler of [() => "stop", async () => "stop"]) {
    let asked = 0;
    const { seen, streamFn } = counted([{ text: "never" }]);
    const result = await run(hostAgent("stop", []), "go", {
      ensureRuntime: false, model: fauxModel(), streamFn, budget: TIGHT,
      onBudgetExhausted: (ctx) => (asked++, handler(ctx)),
    });
    assert.equal(result.stopReason, "budget_exhausted");
    assert.equal(seen.calls, 0);
    assert.equal(asked, 1);
    assert.deepEqual(result.receipt.tranches, []);
  }
});

test("a release that still does not fund the call stops after one escalation (the plan is recomputed once)", async () => {
  let asked = 0;
  const { seen, streamFn } = counted([{ text: "never" }]);
  const result = await run(hostAgent("still-short", []), "go", {
    ensureRuntime: false, model: fauxModel(), streamFn, budget: TIGHT,
    onBudgetExhausted: () => (asked++, { release: 1, reason: "a crumb" }),
  });
  assert.equal(result.stopReason, "budget_exhausted");
  assert.equal(asked, 1);
  assert.equal(seen.calls, 0);
  assert.deepEqual(result.receipt.tranches, [{ amount: 1, reason: "a crumb", atCall: 0 }]);
  assert.equal(result.receipt.released, 2);
});

test("a bad handler answer is cave_budget_exhaustion_result_invalid; a failed release or a throw fails the run", async () => {
  const fails = async (onBudgetExhausted, pattern) => {
    const { seen, streamFn } = counted([{ text: "never" }]);
    await assert.rejects(
      run(hostAgent("bad-answer", []), "go", { ensureRuntime: false, model: fauxModel(), streamFn, budget: TIGHT, onBudgetExhausted }),
      (error) => {
        assert.ok(error instanceof CavemanRunError);
        assert.equal(error.code, "cave_agent_run_failed");
        assert.match(error.message, pattern);
        return true;
      },
    );
    assert.equal(seen.calls, 0);
  };
  for (const answer of [undefined, null, "go", 5, { release: "5", reason: "x" }, { release: 5 }, { reason: "x" }]) {
    await fails(async () => answer, /^cave_agent_run_failed: cave_budget_exhaustion_result_invalid: /);
  }
  await fails(() => ({ release: 300_000, reason: "too much" }), /cave_budget_release_exceeds_max: /);
  await fails(() => ({ release: 1.5, reason: "half" }), /cave_budget_release_invalid: /);
  await fails(() => ({ release: 10, reason: "   " }), /cave_budget_release_reason_required: /);
  await fails(async () => {
    throw new Error("ops said no");
  }, /ops said no/);
});

test("budgetController: bound for the run's life, releases tranches with atCall, every release code", async () => {
  const controller = createBudgetController();
  const seen = {};
  const release = tool({
    name: "ask_for_more",
    description: "releases budget",
    input: schema.object({}),
    effect: "read",
    execute: async () => {
      seen.before = { spent: controller.spent, released: controller.released, max: controller.max, denomination: controller.denomination, remaining: controller.remaining };
      const codeOf = (fn) => {
        try {
          fn();
        } catch (error) {
          return error.code;
        }
        return "no error";
      };
      seen.codes = [
        codeOf(() => controller.releaseBudget(0, "zero")),
        codeOf(() => controller.releaseBudget(2.5, "fraction")),
        codeOf(() => controller.releaseBudget("10", "string")),
        codeOf(() => controller.releaseBudget(10, "")),
        codeOf(() => controller.releaseBudget(10, 7)),
        codeOf(() => controller.releaseBudget(1_000_000, "too much")),
      ];
      seen.tranche = controller.releaseBudget(90_000, "second stage");
      seen.tranches = controller.tranches;
      return "released";
    },
  });
  const result = await run(hostAgent("controller", [release]), "go", baseOptions([{ toolCalls: [call("ask_for_more")] }, { text: "done" }], {
    budget: { maxTokens: 100_000, initialTokens: 10_000, onExhausted: "stop" },
    budgetController: controller,
  }));
  assert.equal(result.stopReason, "complete");
  assert.deepEqual(seen.before, { spent: 110, released: 10_000, max: 100_000, denomination: "tokens", remaining: 9_890 });
  assert.deepEqual(seen.codes, [
    "cave_budget_release_invalid",
    "cave_budget_release_invalid",
    "cave_budget_release_invalid",
    "cave_budget_release_reason_required",
    "cave_budget_release_reason_required",
    "cave_budget_release_exceeds_max",
  ]);
  assert.deepEqual(seen.tranche, { amount: 90_000, reason: "second stage", atCall: 1 });
  assert.ok(Object.isFrozen(seen.tranches) && Object.isFrozen(seen.tranches[0]));
  assert.deepEqual(result.receipt.tranches, [{ amount: 90_000, reason: "second stage", atCall: 1 }]);
  assert.equal(result.receipt.released, 100_000);
  // Unbound again once the run ended.
  assert.throws(() => controller.spent, { code: "cave_budget_controller_unbound" });
  assert.throws(() => controller.releaseBudget(1, "late"), { code: "cave_budget_controller_unbound" });
});

test("budgetController: one live run at a time (cave_budget_controller_in_use); a breached cap refuses releases", async () => {
  const controller = createBudgetController();
  let release;
  const gate = new Promise((resolve) => (release = resolve));
  const waiting = tool({ name: "wait", description: "waits", input: schema.object({}), effect: "read", execute: () => gate });
  const budget = { maxTokens: 100_000, initialTokens: 50_000, onExhausted: "stop" };
  const first = run(hostAgent("first", [waiting]), "go", baseOptions([{ toolCalls: [call("wait")] }, { text: "done" }], { budget, budgetController: controller }));
  // The first run is live (its tool is waiting): a second run cannot bind the same controller.
  await new Promise((r) => setImmediate(r));
  await assert.rejects(run(hostAgent("second", []), "go", baseOptions([{ text: "x" }], { budget, budgetController: controller })), { code: "cave_budget_controller_in_use" });
  release("ok");
  assert.equal((await first).stopReason, "complete");

  // Measured usage above the release breaches the cap, which is terminal: the tool after it is
  // blocked, and the next boundary stops without asking the handler (a release would be
  // cave_budget_cap_breached; the meter's own test covers that code).
  let asked = 0;
  const counter = { n: 0 };
  const breached = await run(hostAgent("breach", [countingTool("read_thing", "read", counter)]), "go", baseOptions([{ toolCalls: [call("read_thing")], usage: { input: 60_000 } }, { text: "never" }], {
    budget,
    budgetController: controller,
    onBudgetExhausted: () => (asked++, { release: 10, reason: "after the breach" }),
  }));
  assert.equal(breached.receipt.capBreached, true);
  assert.equal(breached.stopReason, "budget_exhausted");
  assert.equal(asked, 0);
  assert.equal(counter.n, 0);
});

test("onBudgetExhausted must be \"stop\" or a function; budgetController must come from createBudgetController()", async () => {
  const go = (extra) => run(hostAgent("opts", []), "go", baseOptions([{ text: "ok" }], { budget: { maxTokens: 100_000 }, ...extra }));
  await assert.rejects(go({ onBudgetExhausted: "compact" }), { code: "cave_budget_on_exhausted_invalid" });
  await assert.rejects(go({ budgetController: { releaseBudget() {} } }), { code: "cave_budget_controller_invalid" });
  assert.equal((await go({ onBudgetExhausted: "stop" })).text, "ok");
});

test("legacy maxCostUsd: the call that crosses the cap is made, the next one throws cave_run_cost_budget_exceeded", async () => {
  const counter = { n: 0 };
  const def = hostAgent("legacy", [countingTool("read_thing", "read", counter, { allowRepeat: true })]);
  const { seen, streamFn } = counted([{ toolCalls: [call("read_thing")] }, { text: "never" }]);
  await assert.rejects(run(def, "go", { ensureRuntime: false, model: fauxModel({ priced: true }), streamFn, maxCostUsd: 0.000001 }), (error) => {
    assert.ok(error instanceof CavemanRunError);
    assert.equal(error.code, "cave_agent_run_failed");
    assert.match(error.message, /^cave_agent_run_failed: cave_run_cost_budget_exceeded: spent \$0\.\d+ of maxCostUsd \$0\.000001 before the next model call/);
    assert.equal(error.receipt.calls.length, 1);
    return true;
  });
  assert.equal(seen.calls, 1);
  assert.equal(counter.n, 1);

  // Under the cap it is a plain run: no meter (the receipt's denomination is none).
  const ok = await run(def, "go", baseOptions([{ toolCalls: [call("read_thing")] }, { text: "done" }], { model: fauxModel({ priced: true }), maxCostUsd: 1 }));
  assert.equal(ok.stopReason, "complete");
  assert.equal(ok.receipt.denomination, "none");
  assert.ok(ok.costUsd > 0);
});

test("legacy maxCostUsd on an unpriced model is cave_subagent_unpriced_budget, before any provider call", async () => {
  const { seen, streamFn } = counted([{ text: "never" }]);
  await assert.rejects(run(hostAgent("legacy-unpriced", []), "go", { ensureRuntime: false, model: fauxModel(), streamFn, maxCostUsd: 1 }), (error) => {
    assert.match(error.message, /^cave_agent_run_failed: cave_subagent_unpriced_budget: anthropic\/faux-1 is not in the public catalog/);
    return true;
  });
  assert.equal(seen.calls, 0);
});

test("released tranches survive a crash and fund the resumed run without re-escalating", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-budget-durable-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new DiskDurableStore(dir);
  const counter = { n: 0 };
  const def = hostAgent("durable-tranche", [countingTool("read_thing", "read", counter)]);
  const durable = { runId: "tranche-1", store };
  // Attempt 1: the handler releases once; the run is aborted (a crash's twin) during call 2.
  const abort = new AbortController();
  const first = scriptedStream([{ toolCalls: [call("read_thing")] }, { text: "lost" }]);
  let calls = 0;
  let asked = 0;
  await assert.rejects(
    run(def, "go", {
      ensureRuntime: false, model: fauxModel(), budget: TIGHT, durable, signal: abort.signal,
      onBudgetExhausted: () => (asked++, { release: 199_999, reason: "stage two" }),
      streamFn: (...a) => {
        if (++calls === 2) abort.abort();
        return first(...a);
      },
    }),
    /cave_run_aborted/,
  );
  assert.equal(asked, 1);
  const tranches = journalEvents(store, "tranche-1").filter((e) => e.type === "tranche");
  assert.deepEqual(tranches.map(({ amount, reason, atCall }) => ({ amount, reason, atCall })), [{ amount: 199_999, reason: "stage two", atCall: 0 }]);

  // Attempt 2: the journaled tranche is restored before the settled spend; no new escalation.
  let askedAgain = 0;
  const result = await run(def, "go", {
    ensureRuntime: false, model: fauxModel(), budget: TIGHT, durable, streamFn: scriptedStream([{ text: "done" }]),
    onBudgetExhausted: () => (askedAgain++, "stop"),
  });
  assert.equal(result.stopReason, "complete");
  assert.equal(result.text, "done");
  assert.equal(askedAgain, 0);
  const r = result.receipt;
  assert.deepEqual(r.tranches, [{ amount: 199_999, reason: "stage two", atCall: 0 }]);
  assert.equal(r.released, 200_000);
  assert.ok(r.resume.priorSettled >= 110, String(r.resume.priorSettled));
  assert.equal(r.spent, r.resume.priorSettled + 110);
  assert.equal(journalEvents(store, "tranche-1").filter((e) => e.type === "tranche").length, 1);
});
