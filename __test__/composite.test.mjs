// Composite tools (caveman-code.md §4): tool()'s nestedTools/speculativeTools checks, and
// context.dispatch in real runs — every nested call admitted by the Rust kernel (policy with
// parentToolCallId, toolCalls, the receipt, maxToolCalls, nested_tool_start/end), the
// reference's codes for refused dispatches, and knap/programmatic-tools end to end.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { run, stream, tool, schema, shellTools, DiskDurableStore } from "../lib/index.mjs";
import { createProgrammaticToolRuntime } from "../lib/programmatic-tools.mjs";
import { baseOptions, collect, hostAgent, recordingStream, toolResultsSeen } from "./run-helpers.mjs";
import { tempWorkspace } from "./helpers.mjs";

const obj = schema.object({});

function plain(name, effect, execute, extra = {}) {
  return tool({ name, description: `${name} (test tool)`, input: obj, effect, execute, ...extra });
}

/** Runs the composite call `name` once (args `{}`), then ends with "done". */
const oneCall = (name, extra) => baseOptions([{ toolCalls: [{ name, args: {} }] }, { text: "done" }], extra);

const rejection = async (promise) => {
  try {
    await promise;
  } catch (error) {
    return { message: error.message, code: error.code };
  }
  return { resolved: true };
};

// ---------- tool() (§4.1) ----------

test("tool() keeps nestedTools and speculativeTools, frozen", () => {
  const look = plain("look", "read", () => "x", { speculative: true });
  const save = plain("save", "write", () => "y");
  const combo = tool({ name: "combo", description: "c", input: obj, effect: "write", nestedTools: [look, save], speculativeTools: ["look"], execute: () => "z" });
  assert.deepEqual(combo.nestedTools.map((t) => t.name), ["look", "save"]);
  assert.deepEqual(combo.speculativeTools, ["look"]);
  assert.ok(Object.isFrozen(combo.nestedTools) && Object.isFrozen(combo.speculativeTools));
  const bare = plain("bare", "read", () => "x");
  assert.equal("nestedTools" in bare, false);
  assert.equal("speculativeTools" in bare, false);
});

test("tool() refuses composites as the reference does, with its messages", () => {
  const look = plain("look", "read", () => "x", { speculative: true });
  const lookPlain = plain("lookPlain", "read", () => "x");
  const save = plain("save", "write", () => "y");
  const connected = Object.freeze({ ...plain("remote", "read", () => "x"), runtime: { kind: "connect" } });
  const inner = tool({ name: "inner", description: "i", input: obj, effect: "write", nestedTools: [save], execute: () => "" });
  const make = (extra) => () => tool({ name: "combo", description: "c", input: obj, effect: "write", execute: () => "", ...extra });
  const cases = [
    [{ nestedTools: [look], runtime: { kind: "subagent" } }, "caveman agent: composite tool runtime unsupported"],
    [{ effect: "read", nestedTools: [look, save] }, "caveman agent: read composite cannot contain effectful nested tools"],
    [{ nestedTools: [connected] }, 'caveman agent: nested tool runtime unsupported "remote"'],
    [{ nestedTools: [inner] }, 'caveman agent: nested tools must be flat "inner"'],
    [{ nestedTools: [look, look] }, 'caveman agent: duplicate nested tool "look"'],
    [{ nestedTools: [plain("combo", "read", () => "")] }, 'caveman agent: duplicate nested tool "combo"'],
    [{ speculativeTools: ["look"] }, "caveman agent: speculativeTools requires nestedTools"],
    [{ nestedTools: [look, save], speculativeTools: ["save"] }, 'caveman agent: invalid speculative nested tool "save"'],
    [{ nestedTools: [look, lookPlain], speculativeTools: ["lookPlain"] }, 'caveman agent: invalid speculative nested tool "lookPlain"'],
    [{ nestedTools: [look], speculativeTools: ["look", "look"] }, 'caveman agent: invalid speculative nested tool "look"'],
    [{ nestedTools: [look], speculativeTools: ["missing"] }, 'caveman agent: invalid speculative nested tool "missing"'],
  ];
  for (const [extra, message] of cases) assert.throws(make(extra), { message }, message);
  assert.throws(make({ nestedTools: [{ name: "fake" }] }), /nestedTools must be an array of tool\(\) definitions/);
});

test("the definition SHA of an agent without composites is unchanged by composite support", async (t) => {
  // Pinned from main before composite tools (8cedcb4): the same agent, durable run, journal's
  // run_started.definitionSha256. A resumed run checks it, so it must not move.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-composite-sha-"));
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), "knap-composite-ws-"));
  const shell = shellTools({ workspace: ws });
  t.after(async () => {
    await shell.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(ws, { recursive: true, force: true });
  });
  const store = new DiskDurableStore(dir);
  const look = tool({ name: "look", description: "looks", input: schema.object({ q: schema.string() }), effect: "read", speculative: true, allowRepeat: true, execute: () => "ok" });
  const def = hostAgent("sha-pin", [look, ...shell], { instructions: "pinned" });
  await run(def, "go", baseOptions([{ text: "done" }], { durable: { runId: "pin-1", store } }));
  const started = (await store.load("pin-1")).map((l) => JSON.parse(l)).find((e) => e.type === "run_started");
  assert.equal(started.definitionSha256, "62d027dedbf7156cfbd8361d52f6a36711f30c42d9dcd7f04f534ac0a819fa6f");
  // A composite is a different definition.
  const combo = tool({ name: "combo", description: "c", input: obj, effect: "write", nestedTools: [look], execute: () => "" });
  await run(hostAgent("sha-pin", [look, ...shell, combo], { instructions: "pinned" }), "go", baseOptions([{ text: "done" }], { durable: { runId: "pin-2", store } }));
  const other = (await store.load("pin-2")).map((l) => JSON.parse(l)).find((e) => e.type === "run_started");
  assert.notEqual(other.definitionSha256, started.definitionSha256);
});

// ---------- context.dispatch in a real run ----------

test("a composite's nested calls: policy with parentToolCallId, toolCalls, receipt, events in order, settled values", async () => {
  const seen = [];
  const lookup = plain("lookup", "read", (_input, _signal, context) => {
    seen.push({ tool: "lookup", toolCallId: context.toolCallId, parentToolCallId: context.parentToolCallId });
    return { v: 41 };
  });
  const save = tool({
    name: "save",
    description: "save",
    input: schema.object({ v: schema.number() }),
    effect: "write",
    execute: async (input, _signal, context) => {
      seen.push({ tool: "save", nestedDispatch: await rejection(context.dispatch("lookup", {})) });
      return `saved ${input.v}`;
    },
  });
  let composite;
  const combo = tool({
    name: "combo",
    description: "looks up, then saves",
    input: obj,
    effect: "write",
    nestedTools: [lookup, save],
    execute: async (_input, _signal, context) => {
      composite = context;
      const found = await context.dispatch("lookup", {});
      const unknown = await rejection(context.dispatch("nope", {}));
      const saved = await context.dispatch("save", { v: found.v + 1 });
      return JSON.stringify({ found, unknown, saved });
    },
  });
  const policyInputs = [];
  const toolPolicy = (input) => {
    policyInputs.push(input);
  };
  const { streamFn, calls } = recordingStream([{ toolCalls: [{ name: "combo", args: {} }] }, { text: "done" }]);
  const events = await collect(stream(hostAgent("composite", [combo]), "go", { ...baseOptions([]), streamFn, toolPolicy }));
  const end = events.at(-1);
  assert.equal(end.type, "run_end", JSON.stringify(end));
  const result = end.result;

  // What the container saw: the value (not text), the refusal of an unknown name, the write.
  const body = JSON.parse(toolResultsSeen(calls)[0].text);
  assert.deepEqual(body.found, { v: 41 });
  assert.deepEqual(body.unknown, { message: "cave_nested_tool_not_allowed:nope", code: "cave_nested_tool_not_allowed" });
  assert.equal(body.saved, "saved 42");

  // The policy: the container without the key, each nested call with its container's id.
  const parent = "scripted-1-0";
  assert.deepEqual(policyInputs.map((p) => [p.name, p.toolCallId, p.parentToolCallId]), [
    ["combo", parent, undefined],
    ["lookup", `${parent}:nested:1`, parent],
    ["save", `${parent}:nested:2`, parent],
  ]);
  assert.equal("parentToolCallId" in policyInputs[0], false);
  assert.equal(policyInputs[2].effect, "write");
  assert.deepEqual(policyInputs[2].args, { v: 42 });

  // A nested call's own context: its id, the container's id, and no second level.
  assert.deepEqual(seen[0], { tool: "lookup", toolCallId: `${parent}:nested:1`, parentToolCallId: parent });
  assert.deepEqual(seen[1].nestedDispatch, { message: "cave_nested_tool_dispatch_unavailable", code: "cave_nested_tool_dispatch_unavailable" });

  // toolCalls and the receipt count the nested calls (the refused name never started).
  assert.deepEqual(result.toolCalls, ["combo", "lookup", "save"]);
  const receiptTools = Object.fromEntries(result.receipt.tools.map((e) => [e.name, e.calls]));
  assert.deepEqual(receiptTools, { combo: 1, lookup: 1, save: 1 });

  // Events: each nested call starts and ends before the next one starts, inside the container.
  const nested = events.filter((e) => e.type === "nested_tool_start" || e.type === "nested_tool_end");
  assert.deepEqual(nested.map((e) => [e.type, e.id, e.name]), [
    ["nested_tool_start", `${parent}:nested:1`, "lookup"],
    ["nested_tool_end", `${parent}:nested:1`, "lookup"],
    ["nested_tool_start", `${parent}:nested:2`, "save"],
    ["nested_tool_end", `${parent}:nested:2`, "save"],
  ]);
  assert.deepEqual(nested[0].args, {});
  assert.deepEqual(nested[1].result, { v: 41 });
  assert.equal(nested[1].isError, false);
  assert.equal(nested[3].result, "saved 42");
  assert.ok(nested.every((e) => e.runId === result.runId));
  const containerEnd = events.findIndex((e) => e.type === "pi" && e.event.type === "tool_execution_end" && e.event.toolName === "combo");
  assert.ok(containerEnd > events.indexOf(nested[3]), "the container ends after its nested calls");

  // Once execute has returned, dispatch is closed.
  assert.deepEqual(await rejection(composite.dispatch("lookup", {})), {
    message: "cave_nested_tool_parent_inactive",
    code: "cave_nested_tool_parent_inactive",
  });
});

test("a tool without nestedTools cannot dispatch; a top-level context names itself as parent", async () => {
  let got;
  const solo = plain("solo", "read", async (_input, _signal, context) => {
    got = { parent: context.parentToolCallId, id: context.toolCallId, dispatch: await rejection(context.dispatch("solo", {})) };
    return "ok";
  });
  await run(hostAgent("solo", [solo]), "go", oneCall("solo"));
  assert.deepEqual(got, {
    parent: "scripted-1-0",
    id: "scripted-1-0",
    dispatch: { message: "cave_nested_tool_dispatch_unavailable", code: "cave_nested_tool_dispatch_unavailable" },
  });
});

test("maxToolCalls counts nested calls, not their container", async () => {
  const ran = [];
  const lookup = plain("lookup", "read", () => {
    ran.push("lookup");
    return "v";
  }, { allowRepeat: true });
  const outcomes = [];
  const combo = tool({
    name: "combo",
    description: "c",
    input: obj,
    effect: "read",
    nestedTools: [lookup],
    execute: async (_input, _signal, context) => {
      outcomes.push(await rejection(context.dispatch("lookup", {})));
      outcomes.push(await rejection(context.dispatch("lookup", {})));
      return "ok";
    },
  });
  const result = await run(hostAgent("budget", [combo]), "go", oneCall("combo", { maxToolCalls: 1 }));
  assert.deepEqual(outcomes[0], { resolved: true });
  assert.equal(outcomes[1].message, "cave_tool_call_budget_exceeded");
  assert.deepEqual(ran, ["lookup"], "the refused call never ran");
  assert.deepEqual(result.toolCalls, ["combo", "lookup", "lookup"]);
  const entry = result.receipt.tools.find((e) => e.name === "lookup");
  assert.equal(entry.calls, 2);
  assert.equal(entry.errors, 1);
});

test("a denied nested call rejects with cave_tool_denied and never runs; the run goes on", async () => {
  let ran = false;
  const save = plain("save", "write", () => {
    ran = true;
    return "saved";
  });
  let denied;
  const combo = tool({
    name: "combo",
    description: "c",
    input: obj,
    effect: "write",
    nestedTools: [save],
    execute: async (_input, _signal, context) => {
      denied = await rejection(context.dispatch("save", {}));
      return "ok";
    },
  });
  const toolPolicy = (input) => (input.parentToolCallId !== undefined ? { deny: "no_nested_writes" } : undefined);
  const result = await run(hostAgent("deny", [combo]), "go", oneCall("combo", { toolPolicy }));
  assert.equal(denied.message, "cave_tool_denied:no_nested_writes");
  assert.equal(denied.code, "cave_tool_denied");
  assert.equal(ran, false);
  assert.equal(result.stopReason, "complete");
  const entry = result.receipt.tools.find((e) => e.name === "save");
  assert.equal(entry.denied, 1);
});

test("a dispatch whose signal has already aborted fails with its Error reason, else cave_nested_tool_aborted; an unserializable nested value is an error", async () => {
  const lookup = plain("lookup", "read", () => "v");
  const cyclic = plain("cyclic", "read", () => {
    const o = {};
    o.self = o;
    return o;
  });
  const outcomes = {};
  const combo = tool({
    name: "combo",
    description: "c",
    input: obj,
    effect: "read",
    nestedTools: [lookup, cyclic],
    execute: async (_input, _signal, context) => {
      const gone = new AbortController();
      gone.abort(new Error("caller gave up"));
      outcomes.reason = await rejection(context.dispatch("lookup", {}, { signal: gone.signal }));
      const bare = new AbortController();
      bare.abort("not an Error");
      outcomes.bare = await rejection(context.dispatch("lookup", {}, { signal: bare.signal }));
      outcomes.cyclic = await rejection(context.dispatch("cyclic", {}));
      outcomes.badArgs = await rejection(context.dispatch("lookup", 7));
      return "ok";
    },
  });
  await run(hostAgent("abort", [combo]), "go", oneCall("combo"));
  assert.equal(outcomes.reason.message, "caller gave up");
  assert.equal(outcomes.bare.message, "cave_nested_tool_aborted");
  assert.equal(outcomes.cyclic.message, "cave_tool_result_not_json_safe:cyclic");
  assert.equal(outcomes.badArgs.message, "cave_tool_input_schema_mismatch:lookup");
});

test("aborting a running dispatch's signal stops the nested call and rejects with the reason", async () => {
  let started;
  const running = new Promise((resolve) => (started = resolve));
  let nestedSignal;
  const wait = plain("wait", "read", (_input, signal) => {
    nestedSignal = signal;
    started();
    return new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(new Error("wait saw the abort")), { once: true }));
  });
  let outcome;
  const combo = tool({
    name: "combo",
    description: "c",
    input: obj,
    effect: "read",
    nestedTools: [wait],
    execute: async (_input, _signal, context) => {
      const controller = new AbortController();
      const pending = context.dispatch("wait", {}, { signal: controller.signal });
      await running;
      controller.abort(new Error("stop now"));
      outcome = await rejection(pending);
      return "ok";
    },
  });
  const events = await collect(stream(hostAgent("abort-running", [combo]), "go", oneCall("combo")));
  assert.equal(events.at(-1).type, "run_end");
  assert.equal(outcome.message, "stop now");
  assert.equal(nestedSignal.aborted, true, "the nested tool's own signal aborted");
  const end = events.find((e) => e.type === "nested_tool_end");
  assert.deepEqual([end.isError, end.result], [true, "stop now"]);
});

// ---------- knap/programmatic-tools in a real run ----------

test("programmatic tools end to end: the cell's calls are nested calls of the kernel", async (t) => {
  const ws = tempWorkspace();
  const shell = shellTools({ workspace: ws.root });
  t.after(async () => {
    await shell.close();
    ws.cleanup();
  });
  ws.write("notes.txt", "alpha\nbeta\n");
  const direct = hostAgent("cells", shell);
  const runtime = createProgrammaticToolRuntime(direct);
  const code = [
    'const text = await read_file({ path: "notes.txt" });',
    'await write_file({ path: "out.txt", content: "written by the cell\\n" });',
    'const denied = await tools.bash({ command: "echo hi" }).catch((e) => e.message);',
    "print(text.includes(\"beta\") ? \"found beta\" : \"no beta\", denied);",
  ].join("\n");
  const policyInputs = [];
  const toolPolicy = (input) => {
    policyInputs.push(input);
    return input.name === "bash" ? { deny: "no_shell" } : undefined;
  };
  const { streamFn, calls } = recordingStream([{ toolCalls: [{ name: "caveman_code", args: { code } }] }, { text: "done" }]);
  const events = await collect(stream(runtime.definition, "go", { ...baseOptions([]), streamFn, toolPolicy }));
  const end = events.at(-1);
  assert.equal(end.type, "run_end", JSON.stringify(end));
  const [seen] = toolResultsSeen(calls);
  assert.equal(seen.isError, false, seen.text);
  assert.equal(seen.text, "found beta cave_tool_denied:no_shell");
  assert.equal(fs.readFileSync(path.join(ws.root, "out.txt"), "utf8"), "written by the cell\n");
  assert.deepEqual(end.result.toolCalls, ["caveman_code", "read_file", "write_file", "bash"]);
  const parent = "scripted-1-0";
  assert.deepEqual(policyInputs.map((p) => [p.name, p.parentToolCallId]), [
    ["caveman_code", undefined],
    ["read_file", parent],
    ["write_file", parent],
    ["bash", parent],
  ]);
  const ends = events.filter((e) => e.type === "nested_tool_end");
  assert.deepEqual(ends.map((e) => [e.name, e.isError]), [["read_file", false], ["write_file", false], ["bash", true]]);
  assert.ok(ends[0].result.includes("beta"), "a shell tool settles to its text");
  assert.equal(ends[2].result, "cave_tool_denied:no_shell");
});

// ---------- container order, timeouts and settling ----------

test("a container's reads run concurrently; its effects run one at a time in dispatch order", async () => {
  // Each read waits until both reads have started: serialized reads would never get there
  // (the bound turns that into a failed assertion, not a hang).
  let startedReads = 0;
  let bothStarted;
  const both = new Promise((resolve) => (bothStarted = resolve));
  const read = plain("peek", "read", async () => {
    if (++startedReads === 2) bothStarted("together");
    return Promise.race([both, new Promise((resolve) => setTimeout(resolve, 5_000, "alone").unref())]);
  }, { allowRepeat: true });
  const log = [];
  const write = tool({
    name: "put",
    description: "put",
    input: schema.object({ k: schema.string() }),
    effect: "write",
    execute: async ({ k }) => {
      log.push(`start ${k}`);
      await new Promise((resolve) => setImmediate(resolve));
      log.push(`end ${k}`);
      return k;
    },
  });
  let reads;
  let writes;
  const combo = tool({
    name: "combo",
    description: "c",
    input: obj,
    effect: "write",
    nestedTools: [read, write],
    execute: async (_input, _signal, context) => {
      reads = await Promise.all([context.dispatch("peek", {}), context.dispatch("peek", {})]);
      writes = await Promise.all([context.dispatch("put", { k: "a" }), context.dispatch("put", { k: "b" }), context.dispatch("put", { k: "c" })]);
      return "ok";
    },
  });
  await run(hostAgent("order", [combo]), "go", oneCall("combo"));
  assert.deepEqual(reads, ["together", "together"]);
  assert.deepEqual(writes, ["a", "b", "c"]);
  assert.deepEqual(log, ["start a", "end a", "start b", "end b", "start c", "end c"]);
});

test("a nested call past its own timeoutMs fails with cave_tool_timeout", async () => {
  let aborted = false;
  const slow = plain("slow", "read", (_input, signal) => new Promise((_resolve, reject) => {
    signal.addEventListener("abort", () => {
      aborted = true;
      reject(new Error("slow was stopped"));
    }, { once: true });
  }), { timeoutMs: 50 });
  let outcome;
  const combo = tool({
    name: "combo",
    description: "c",
    input: obj,
    effect: "read",
    nestedTools: [slow],
    execute: async (_input, _signal, context) => {
      outcome = await rejection(context.dispatch("slow", {}));
      return "ok";
    },
  });
  await run(hostAgent("nested-timeout", [combo]), "go", oneCall("combo"));
  assert.equal(outcome.message, "cave_tool_timeout");
  assert.equal(aborted, true, "the nested tool was told to stop");
});

test("a container that returns while a nested call never settles fails with cave_program_nested_calls_unquiesced", async () => {
  let nestedSignal;
  const hang = plain("hang", "read", (_input, signal) => {
    nestedSignal = signal;
    return new Promise(() => {});
  }, { timeoutMs: 600_000 });
  const combo = tool({
    name: "combo",
    description: "c",
    input: obj,
    effect: "read",
    nestedTools: [hang],
    execute: (_input, _signal, context) => {
      context.dispatch("hang", {}).catch(() => {});
      return "returned early";
    },
  });
  const { streamFn, calls } = recordingStream([{ toolCalls: [{ name: "combo", args: {} }] }, { text: "done" }]);
  const result = await run(hostAgent("unquiesced", [combo]), "go", { ...baseOptions([]), streamFn });
  const [seen] = toolResultsSeen(calls);
  assert.deepEqual([seen.isError, seen.text], [true, "cave_program_nested_calls_unquiesced"]);
  assert.equal(nestedSignal.aborted, true, "the nested call was aborted with its container");
  assert.equal(result.stopReason, "complete");
});

test("durable: nested calls are journaled under their own ids; a resumed container replays a settled nested write instead of repeating it", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-composite-durable-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new DiskDurableStore(dir);
  const writes = [];
  const put = plain("put", "write", (_input, _signal, context) => {
    writes.push(context.durable);
    return { stored: writes.length };
  });
  const containers = [];
  const got = [];
  const combo = (effect) =>
    tool({
      name: "combo",
      description: "c",
      input: obj,
      effect,
      nestedTools: [put],
      execute: async (_input, _signal, context) => {
        containers.push(context.durable);
        const value = await context.dispatch("put", {});
        got.push(value);
        return JSON.stringify(value);
      },
    });
  const script = (runId) => baseOptions([{ toolCalls: [{ name: "combo", args: {} }] }, { text: "done" }], { durable: { runId, store } });
  // A crash right after the nested write settled: the journal up to that record.
  const crashAfterNested = async (def, runId) => {
    await run(def, "go", script(runId));
    const lines = await store.load(runId);
    const records = lines.map((l) => JSON.parse(l));
    assert.deepEqual(
      records.filter((r) => r.type.startsWith("tool_")).map((r) => [r.type, r.toolCallId, r.name]),
      [
        ["tool_intent", "scripted-1-0", "combo"],
        ["tool_intent", "scripted-1-0:nested:1", "put"],
        ["tool_settled", "scripted-1-0:nested:1", "put"],
        ["tool_settled", "scripted-1-0", "combo"],
      ],
    );
    const cut = records.findIndex((r) => r.type === "tool_settled" && r.toolCallId === "scripted-1-0:nested:1");
    const file = fs.readdirSync(dir, { recursive: true }).map((f) => path.join(dir, f)).find((f) => fs.statSync(f).isFile() && fs.readFileSync(f, "utf8").includes(`"runId":"${runId}"`));
    fs.writeFileSync(file, lines.slice(0, cut + 1).join("\n") + "\n");
    writes.length = 0;
    containers.length = 0;
    got.length = 0;
  };

  const idempotent = hostAgent("composite-durable", [combo("idempotent")]);
  await crashAfterNested(idempotent, "dur-1");
  const resumed = await run(idempotent, "go", script("dur-1"));
  assert.equal(resumed.resumed, true);
  assert.equal(resumed.stopReason, "complete");
  assert.equal(containers.length, 1);
  assert.equal(containers[0].resumed, true, "the container re-ran as resumed");
  assert.deepEqual(writes, [], "the settled nested write was replayed, not repeated");
  assert.deepEqual(got, [{ stored: 1 }], "dispatch resolved to the journaled value");

  // A write container that never settled fails closed.
  const effectful = hostAgent("composite-durable-w", [combo("write")]);
  await crashAfterNested(effectful, "dur-2");
  await assert.rejects(run(effectful, "go", script("dur-2")), (e) => e.message.includes("cave_durable_tool_effect_uncertain:combo:scripted-1-0"));
  assert.deepEqual([containers.length, writes.length], [0, 0]);
});

// ---------- a non-read body after its timeout; the no-progress breaker and nested results ----------

test("a non-read tool whose body outlives its timeout by 1 s is cave_tool_effect_unquiesced; one that stops in time is cave_tool_timeout", async () => {
  const stubborn = plain("stubborn", "write", () => new Promise(() => {}), { timeoutMs: 30 });
  const polite = plain("polite", "write", (_input, signal) => new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true })), { timeoutMs: 30 });
  // A write container whose own body ignores its abort.
  const combo = tool({ name: "combo", description: "c", input: obj, effect: "write", nestedTools: [plain("noop", "read", () => "x")], timeoutMs: 30, execute: () => new Promise(() => {}) });
  const { streamFn, calls } = recordingStream([
    { toolCalls: [{ name: "stubborn", args: {} }, { name: "polite", args: {} }, { name: "combo", args: {} }] },
    { text: "done" },
  ]);
  const result = await run(hostAgent("unquiesced-effects", [stubborn, polite, combo]), "go", { ...baseOptions([]), streamFn });
  assert.deepEqual(toolResultsSeen(calls).map((r) => [r.name, r.text]), [
    ["stubborn", "cave_tool_effect_unquiesced"],
    ["polite", "cave_tool_timeout"],
    ["combo", "cave_tool_effect_unquiesced"],
  ]);
  assert.equal(result.stopReason, "complete");
});

test("no-progress breaker: a container's successful nested write is progress, a denied one is not", async () => {
  for (const [deny, expected, providerCalls] of [[false, "complete", 4], [true, "no_progress", 2]]) {
    const put = plain("put", "write", () => "stored");
    const combo = tool({
      name: "combo",
      description: "c",
      input: obj,
      effect: "idempotent",
      nestedTools: [put],
      allowRepeat: true,
      execute: async (_input, _signal, context) => {
        await context.dispatch("put", {}).catch(() => {});
        return "same every time";
      },
    });
    const same = { text: "again", toolCalls: [{ name: "combo", args: {} }] };
    const { streamFn, calls } = recordingStream([same, same, same, { text: "end" }]);
    const toolPolicy = (input) => (deny && input.name === "put" ? { deny: "frozen" } : undefined);
    const result = await run(hostAgent("progress", [combo]), "go", { ...baseOptions([]), streamFn, toolPolicy, breakers: { noProgressTurns: 2, repeatedToolCalls: 10 } });
    assert.equal(result.stopReason, expected, `deny ${deny}`);
    assert.equal(calls.length, providerCalls);
  }
});
