// Programmatic tools: the caveman_code cell — a vm context in a worker thread, tools as async
// functions, print, the per-cell call budget, argument checks, denied nested calls, timeouts,
// the output cap, the guest realm, and the runtime's construction rules.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

import { agent, shellTools, tool, schema } from "../lib/index.mjs";
import { createProgrammaticToolRuntime, programmaticToolInstructions, PROGRAMMATIC_TOOL_NAME } from "../lib/programmatic-tools.mjs";
import { tempWorkspace } from "./helpers.mjs";

/** The cell tool over the six shell tools, and a kernel-like context whose dispatch records calls. */
function setup(t, { policy } = {}) {
  const ws = tempWorkspace();
  t.after(() => ws.cleanup());
  const direct = agent({ id: "cells", instructions: "Work.", model: "a/b", sandbox: "host", tools: shellTools({ workspace: ws.root }) });
  const runtime = createProgrammaticToolRuntime(direct);
  const cell = runtime.definition.tools[0];
  const byName = new Map(direct.tools.map((x) => [x.name, x]));
  const dispatched = [];
  let n = 0;
  const context = {
    toolCallId: "call_1",
    parentToolCallId: "call_1",
    async dispatch(name, args, options) {
      const id = `call_1:nested:${++n}`;
      dispatched.push({ id, name, args });
      const decision = policy?.({ name, effect: byName.get(name).effect, toolCallId: id, parentToolCallId: "call_1", args });
      if (decision?.deny) throw new Error(`cave_tool_denied:${decision.deny}`);
      return byName.get(name).execute(args, options?.signal);
    },
  };
  const exec = (code, signal) => cell.execute({ code }, signal, context);
  return { ws, runtime, cell, exec, dispatched, context };
}

test("the cell tool: name, schema, effect, timeout, description with a declaration per tool", (t) => {
  const { cell, runtime } = setup(t);
  assert.equal(cell.name, PROGRAMMATIC_TOOL_NAME);
  assert.equal(cell.effect, "idempotent");
  assert.equal(cell.result, "inline");
  assert.equal(cell.timeoutMs, 125000);
  assert.deepEqual(cell.input, { type: "object", properties: { code: { type: "string" } }, required: ["code"], additionalProperties: false });
  const lines = cell.description.split("\n");
  assert.equal(lines[0], "Bounded async JS cell. Tools are direct functions and under tools.");
  assert.ok(lines.includes("declare function read_file(args: { path: string; offset?: number; limit?: number }): Promise<string>;"));
  assert.ok(lines.includes("declare function edit_file(args: { path: string; old_string: string; new_string: string; replace_all?: boolean }): Promise<string>;"));
  assert.ok(lines.some((l) => l.startsWith("// Read a UTF-8 file from the workspace.")));
  assert.ok(Object.isFrozen(runtime.definition));
  assert.equal(runtime.definition.instructions.split("\n\n").at(-1), "Work.");
});

test("Promise.all of reads: calls run through dispatch, results come back as the tools' text", async (t) => {
  const { ws, exec, dispatched } = setup(t);
  ws.write("a.txt", "alpha\n");
  ws.write("b.txt", "beta\n");
  const out = await exec(`
    const [a, b] = await Promise.all([read_file({ path: "a.txt" }), tools.read_file({ path: "b.txt" })]);
    print(a.split("\\n")[0], b.split("\\n")[0]);
    print({ both: true }, 3, null);
  `);
  assert.equal(out, '1\talpha 1\tbeta\n{"both":true} 3 null');
  assert.deepEqual(dispatched.map((d) => [d.id, d.name, d.args]), [
    ["call_1:nested:1", "read_file", { path: "a.txt" }],
    ["call_1:nested:2", "read_file", { path: "b.txt" }],
  ]);
});

test("output rule: printed lines, else the returned value, else ok", async (t) => {
  const { exec } = setup(t);
  assert.equal(await exec("return { x: [1, 2] }"), '{"x":[1,2]}');
  assert.equal(await exec('return "text"'), "text");
  assert.equal(await exec("const x = 1;"), "ok");
  assert.equal(await exec('console.log("via console"); return 5'), "via console");
});

test("the call budget: 8 calls per cell, the 9th is refused", async (t) => {
  const { ws, exec, dispatched } = setup(t);
  ws.write("a.txt", "a\n");
  const out = await exec(`
    const results = [];
    for (let i = 1; i <= 9; i++) {
      try { await read_file({ path: "a.txt", offset: i }); results.push("ok"); }
      catch (e) { results.push(e.message); }
    }
    return results;
  `);
  assert.deepEqual(JSON.parse(out), [...Array(8).fill("ok"), "cave_program_tool_call_budget_exceeded"]);
  assert.equal(dispatched.length, 8);
});

test("argument checks and repeats are refused before dispatch", async (t) => {
  const { ws, exec, dispatched } = setup(t);
  ws.write("a.txt", "a\n");
  const out = await exec(`
    const tryCall = async (f) => { try { await f(); return "ok"; } catch (e) { return e.message; } };
    return [
      await tryCall(() => read_file({ path: 1 })),
      await tryCall(() => read_file("a.txt")),
      await tryCall(() => read_file({ path: "a.txt", extra: JSON.parse('{"__proto__": 1}') })),
      await tryCall(() => grep({ pattern: "a", path: "a.txt" })),
      await tryCall(() => grep({ pattern: "a", path: "a.txt" })),
      await tryCall(() => grep({ pattern: "a", path: "a.txt" })),
      await tryCall(() => grep({ pattern: "a", path: "a.txt" })),
    ];
  `);
  assert.deepEqual(JSON.parse(out), [
    "cave_program_tool_arguments_invalid:read_file",
    "cave_program_tool_arguments_invalid:read_file",
    "cave_program_tool_arguments_invalid:read_file",
    "ok",
    "ok",
    "ok",
    "cave_program_repeated_tool_call",
  ]);
  assert.equal(dispatched.length, 3);
});

test("a denied nested write: caught by the cell it reads as the denial; unobserved it fails the cell", async (t) => {
  const policy = ({ effect }) => (effect === "write" ? { deny: "read_only_review" } : undefined);
  const { ws, exec, dispatched } = setup(t, { policy });
  assert.equal(
    await exec(`try { await write_file({ path: "out.txt", content: "x" }); } catch (e) { return "denied: " + e.message; }`),
    "denied: cave_tool_denied:read_only_review",
  );
  await assert.rejects(exec(`write_file({ path: "out.txt", content: "x" }); return "fire and forget"`), {
    code: "cave_program_execution_failed",
    message: "cave_program_execution_failed:cave_tool_denied:read_only_review",
  });
  // .then(fn) alone does not observe a rejection; .catch(fn) does
  await assert.rejects(exec(`write_file({ path: "o", content: "x" }).then(() => 1); return 1`), /cave_tool_denied/);
  assert.equal(await exec(`write_file({ path: "o", content: "x" }).catch(() => print("handled")); return 1`), "handled");
  assert.equal(dispatched.filter((d) => d.name === "write_file").length, 4);
  assert.equal(fs.existsSync(ws.path("out.txt")), false);
});

test("a cell that throws fails with cave_program_execution_failed:<message>", async (t) => {
  const { exec } = setup(t);
  await assert.rejects(exec('throw new Error("boom")'), { code: "cave_program_execution_failed", message: "cave_program_execution_failed:boom" });
  await assert.rejects(exec("this is not javascript"), /^Error: cave_program_execution_failed:.*/);
});

test("the synchronous part is bounded: a busy loop ends at 2 s with the vm timeout text", async (t) => {
  const { exec } = setup(t);
  await assert.rejects(exec("while (true) {}"), {
    code: "cave_program_execution_failed",
    message: "cave_program_execution_failed:Script execution timed out after 2000ms",
  });
});

test("the whole cell is bounded: 120 s in all, then cave_program_timeout (clock mocked)", async (t) => {
  const { exec } = setup(t);
  t.mock.timers.enable({ apis: ["setTimeout"] });
  let outcome;
  const stop = new AbortController();
  t.after(() => stop.abort()); // ends the cell if the timer never fired
  exec("await new Promise(() => {})", stop.signal).then(
    () => (outcome = "resolved"),
    (e) => (outcome = e),
  );
  // The worker starts for real; give it time to be waiting on its promise.
  await new Promise((resolve) => setImmediate(resolve));
  t.mock.timers.tick(119_999);
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(outcome, undefined, "still running just before 120 s");
  t.mock.timers.tick(1);
  // The failure waits for in-flight nested calls (none here) before rejecting.
  for (let i = 0; i < 200 && outcome === undefined; i++) {
    t.mock.timers.tick(10);
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(outcome?.code, "cave_program_timeout");
  assert.equal(outcome?.message, "cave_program_timeout");
});

test("an over-long output keeps 12,288 bytes at each end around the reference's marker", async (t) => {
  const { exec } = setup(t);
  const out = await exec('print("h".repeat(20000) + "t".repeat(20000))');
  assert.equal(out, `${"h".repeat(12288)}\n... caveman_code output truncated (40000 bytes) ...\n${"t".repeat(12288)}`);
  assert.equal((await exec('print("x".repeat(24576))')).length, 24576);
});

test("source checks: blank code and code over 65,536 bytes", async (t) => {
  const { cell, context } = setup(t);
  await assert.rejects(cell.execute({ code: "   " }, undefined, context), { message: "cave_program_source_required" });
  await assert.rejects(cell.execute({}, undefined, context), { message: "cave_program_source_required" });
  await assert.rejects(cell.execute({ code: `//${"x".repeat(65535)}` }, undefined, context), { message: "cave_program_source_limit" });
});

test("without a kernel context a call is refused; an abort fails the cell with the signal's reason", async (t) => {
  const { cell } = setup(t);
  assert.equal(
    await cell.execute({ code: 'try { await read_file({ path: "a" }) } catch (e) { return e.message }' }, undefined, undefined),
    "cave_program_nested_dispatch_unavailable",
  );
  const controller = new AbortController();
  const pending = cell.execute({ code: "await new Promise(() => {})" }, controller.signal, undefined);
  setTimeout(() => controller.abort(new Error("stop now")), 50);
  await assert.rejects(pending, { message: "stop now" });
  const aborted = new AbortController();
  aborted.abort("not an error");
  await assert.rejects(cell.execute({ code: "1" }, aborted.signal, undefined), { message: "cave_program_aborted" });
});

test("the guest sees only its own realm: no process, require, timers, fetch; no string code generation", async (t) => {
  const { exec } = setup(t);
  assert.deepEqual(JSON.parse(await exec("return [typeof process, typeof require, typeof setTimeout, typeof fetch, typeof globalThis.Buffer]")), [
    "undefined",
    "undefined",
    "undefined",
    "undefined",
    "undefined",
  ]);
  assert.equal(
    await exec(`const p = read_file({ path: "none" }); p.catch(() => {}); return [Object.prototype.toString.call(p), print.constructor === Function, tools.read_file.constructor === Function, Object.isFrozen(tools), Object.getPrototypeOf(tools)].join(",")`),
    "[object Promise],true,true,true,",
  );
  await assert.rejects(exec('print.constructor.constructor("return process")()'), /Code generation from strings disallowed/);
  await assert.rejects(exec('return eval("1")'), /Code generation from strings disallowed/);
  assert.equal(await exec('try { read_file = 1 } catch (e) { return e.constructor === TypeError }'), "true");
});

test("a nested result JSON cannot carry is refused; a tool returning undefined gives null", async (t) => {
  const ws = tempWorkspace();
  t.after(() => ws.cleanup());
  const odd = tool({ name: "odd", description: "d", input: schema.object({ kind: schema.string() }), effect: "read", execute: async () => 0 });
  const direct = agent({ id: "a", instructions: "", model: "a/b", sandbox: "host", tools: [odd] });
  const cell = createProgrammaticToolRuntime(direct).definition.tools[0];
  const context = { dispatch: async (name, args) => (args.kind === "big" ? 10n : undefined) };
  assert.equal(await cell.execute({ code: 'return [await odd({ kind: "none" })]' }, undefined, context), "[null]");
  assert.equal(
    await cell.execute({ code: 'try { await odd({ kind: "big" }) } catch (e) { return e.message }' }, undefined, context),
    "cave_program_tool_result_unserializable:odd",
  );
});

test("createProgrammaticToolRuntime refuses what it cannot run, in the reference's order", () => {
  const t1 = tool({ name: "t1", description: "d", input: schema.object({}), effect: "read", execute: async () => "" });
  assert.throws(() => createProgrammaticToolRuntime(agent({ id: "a", instructions: "", model: "a/b", tools: [t1] })), {
    message: "cave_programmatic_tools_require_host_sandbox",
  });
  assert.throws(() => createProgrammaticToolRuntime(agent({ id: "a", instructions: "", model: "a/b", sandbox: "host" })), {
    message: "cave_programmatic_tools_required",
  });
  const connected = tool({ name: "c", description: "d", input: schema.object({}), effect: "read", runtime: { kind: "connect" }, execute: async () => "" });
  assert.throws(() => createProgrammaticToolRuntime(agent({ id: "a", instructions: "", model: "a/b", sandbox: "host", tools: [connected] })), {
    message: "cave_programmatic_tool_runtime_unsupported",
  });
  assert.throws(() => createProgrammaticToolRuntime(agent({ id: "a", instructions: "", model: "a/b", sandbox: "host", tools: [t1] }), { toolName: "bad name" }), {
    message: 'caveman agent: invalid tool name "bad name"',
  });
  const rt = createProgrammaticToolRuntime(agent({ id: "a", instructions: "x", model: "a/b", sandbox: "host", tools: [t1] }), { speculate: false, instructions: "custom" });
  assert.equal(rt.definition.instructions, "custom");
  const models = {};
  assert.equal(rt.wrapModels(models), models);
  assert.deepEqual(rt.stats(), { launched: 0, claimed: 0, missed: 0, abandoned: 0 });
});

test("programmaticToolInstructions: 692 characters of cell guidance, recovery guidance unless present", () => {
  const base = programmaticToolInstructions();
  const [core, recovery] = base.split("\n\n");
  assert.equal(core.length, 692);
  assert.equal(core.split("\n").length, 7);
  assert.equal(recovery.length, 193);
  assert.match(recovery, /<cave-compressed>.*\n.*cave_retrieve.*recovery_handle.*before guessing/);
  assert.equal(programmaticToolInstructions("Extra."), `${base}\n\nExtra.`);
  const covered = "Has <cave-compressed>, cave_retrieve, recovery_handle. Retrieve Before Guessing.";
  assert.equal(programmaticToolInstructions(covered), `${core}\n\n${covered}`);
  assert.match(programmaticToolInstructions(undefined, { toolName: "js" }), /^Use the js tool/);
  assert.throws(() => programmaticToolInstructions("", { toolName: "1x" }), /invalid tool name "1x"/);
});
