// decideToolCall (reference §6.2): allow, deny, failures, malformed decisions, bad codes, the
// 10 s timeout, a frozen input; and that a process using it exits cleanly.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import v8 from "node:v8";
import vm from "node:vm";
import { describe, test } from "node:test";

import { decideToolCall, TOOL_POLICY_TIMEOUT_MS } from "../lib/index.mjs";
import { coded } from "./helpers.mjs";

const input = Object.freeze({
  runId: "r1",
  agentId: "reviewer",
  agentPath: [],
  toolCallId: "c1",
  name: "write_file",
  effect: "write",
  args: { path: "out.txt" },
});

// A real `gc()`, to collect a never-settling promise nothing references while it is awaited.
v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc");

const failed = (check) => (error) => {
  coded("cave_tool_policy_failed")(error);
  check(error.cause);
  return true;
};

test("TOOL_POLICY_TIMEOUT_MS is 10,000", () => {
  assert.equal(TOOL_POLICY_TIMEOUT_MS, 10_000);
});

test("allow: undefined, null and {allow:true}, sync and async, resolve to undefined", async () => {
  for (const answer of [undefined, null, { allow: true }]) {
    assert.equal(await decideToolCall(() => answer, input), undefined, `sync ${JSON.stringify(answer)}`);
    assert.equal(await decideToolCall(async () => answer, input), undefined, `async ${JSON.stringify(answer)}`);
    assert.equal(await decideToolCall(() => new Promise((r) => setTimeout(() => r(answer), 20)), input), undefined);
  }
  assert.equal(await decideToolCall(() => {}, input), undefined);
});

test("deny: {deny:code} gives {block:true, reason:'cave_tool_denied:code'}, sync and async", async () => {
  assert.deepEqual(await decideToolCall(() => ({ deny: "read_only_review" }), input), { block: true, reason: "cave_tool_denied:read_only_review" });
  assert.deepEqual(await decideToolCall(async () => ({ deny: "scope" }), input), { block: true, reason: "cave_tool_denied:scope" });
  const thenable = { then: (resolve) => resolve({ deny: "shell_scope" }) };
  assert.deepEqual(await decideToolCall(() => thenable, input), { block: true, reason: "cave_tool_denied:shell_scope" });
  assert.deepEqual(await decideToolCall(() => ({ deny: "a".repeat(64) }), input), { block: true, reason: `cave_tool_denied:${"a".repeat(64)}` });
  assert.deepEqual(await decideToolCall(() => ({ deny: "x9_z" }), input), { block: true, reason: "cave_tool_denied:x9_z" });
});

test("the policy sees a frozen copy of the input and decides per call", async () => {
  const seen = [];
  const policy = (call) => {
    seen.push(call);
    return call.effect === "write" ? { deny: "read_only_review" } : undefined;
  };
  assert.deepEqual(await decideToolCall(policy, input), { block: true, reason: "cave_tool_denied:read_only_review" });
  assert.equal(await decideToolCall(policy, { ...input, name: "bash", effect: "external", parentToolCallId: "p1" }), undefined);
  assert.deepEqual(seen[0], input);
  assert.equal(seen[1].parentToolCallId, "p1");
  assert.ok(Object.isFrozen(seen[0]));
  // Mutating it throws (ESM is strict), which fails the policy.
  const thrown = [];
  await assert.rejects(
    decideToolCall((call) => {
      try {
        call.name = "rewritten";
      } catch (error) {
        thrown.push(error);
        throw error;
      }
    }, input),
    failed((cause) => assert.ok(cause instanceof TypeError)),
  );
  assert.equal(thrown.length, 1);
  assert.equal(input.name, "write_file");
});

test("throw and rejection fail with cave_tool_policy_failed and keep the cause", async () => {
  const boom = new Error("boom");
  await assert.rejects(decideToolCall(() => { throw boom; }, input), failed((cause) => assert.equal(cause, boom)));
  await assert.rejects(decideToolCall(async () => { throw boom; }, input), failed((cause) => assert.equal(cause, boom)));
  await assert.rejects(decideToolCall(() => Promise.reject(boom), input), failed((cause) => assert.equal(cause, boom)));
  await assert.rejects(decideToolCall(() => Promise.reject("plain string"), input), failed((cause) => assert.equal(cause, "plain string")));
});

test("malformed decisions fail with cave_tool_policy_decision_invalid", async () => {
  const malformed = ["yes", 1, 0, true, false, {}, [], { allow: false }, { allow: "true" }, { allow: true, deny: "x" }, { deny: 5 }, { deny: null }, () => {}, Symbol("s"), 10n];
  for (const answer of malformed) {
    await assert.rejects(decideToolCall(() => answer, input), coded("cave_tool_policy_decision_invalid"), String(typeof answer === "object" ? JSON.stringify(answer) : typeof answer));
    await assert.rejects(decideToolCall(async () => answer, input), coded("cave_tool_policy_decision_invalid"));
  }
});

test("bad deny codes fail with cave_tool_policy_reason_invalid", async () => {
  for (const code of ["Bad Code!", "", "1abc", "_x", "a-b", "Upper", "a".repeat(65), "é"]) {
    await assert.rejects(decideToolCall(() => ({ deny: code }), input), coded("cave_tool_policy_reason_invalid"), code);
  }
});

test("many concurrent decisions each get their own answer", async () => {
  const policy = async (call) => (Number(call.toolCallId) % 2 ? { deny: `odd_${call.toolCallId}` } : undefined);
  const results = await Promise.all(Array.from({ length: 500 }, (_, i) => decideToolCall(policy, { ...input, toolCallId: String(i) })));
  results.forEach((r, i) => assert.deepEqual(r, i % 2 ? { block: true, reason: `cave_tool_denied:odd_${i}` } : undefined));
});

const script = fileURLToPath(new URL("./fixtures/policy-exit.mjs", import.meta.url));

function runScript(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--expose-gc", script, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    // A liveness bound only: a process kept alive by the addon would never exit by itself.
    const guard = setTimeout(() => child.kill("SIGKILL"), 90_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(guard);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

// The two slow cases overlap: the real 10 s timeout in this process and in a child process.
describe("timeouts and process exit", { concurrency: true }, () => {
  test("a policy that never settles fails after TOOL_POLICY_TIMEOUT_MS with a timeout cause", async () => {
    const started = Date.now();
    const collector = setInterval(gc, 250);
    const decision = decideToolCall(() => new Promise(() => {}), input);
    await assert.rejects(
      decision.finally(() => clearInterval(collector)),
      failed((cause) => {
        assert.ok(cause instanceof Error);
        assert.equal(cause.message, "cave_tool_policy_timeout");
      }),
    );
    // The evaluator must not give up early (a lower bound, not a speed check).
    assert.ok(Date.now() - started >= TOOL_POLICY_TIMEOUT_MS - 50);
  });

  test("a script using decideToolCall (throwing, timed-out never-settling policies) exits cleanly with 0", async () => {
    const { code, signal, stdout, stderr } = await runScript(["all"]);
    assert.equal(signal, null, stderr);
    assert.equal(code, 0, stderr);
    assert.equal(stderr, "");
    assert.deepEqual(JSON.parse(stdout), [
      ["throw", "cave_tool_policy_failed", "boom"],
      ["reject", "cave_tool_policy_failed", "async boom"],
      ["deny", { block: true, reason: "cave_tool_denied:nope" }],
      ["never", "cave_tool_policy_failed", "cave_tool_policy_timeout"],
      ["after-timeout", null],
    ]);
  });

  test("a script whose only policy throws, without awaiting anything else, exits cleanly with 0", async () => {
    const { code, signal, stdout, stderr } = await runScript(["throw-only"]);
    assert.equal(signal, null, stderr);
    assert.equal(code, 0, stderr);
    assert.deepEqual(JSON.parse(stdout), [["throw", "cave_tool_policy_failed", "boom"]]);
  });
});
