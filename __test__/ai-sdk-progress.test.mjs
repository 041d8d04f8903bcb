// Bash `onProgress` and `sandbox.exec({ onOutput })`: a running command's output in chunks,
// through knap-core's progress buffer (256 KiB, merged per stream, drops counted in `skipped`).
// No timing assertions: "while it runs" is proven by a command that waits for a file the
// listener writes on its first chunk, and "a slow listener" by a listener that blocks the JS
// thread until the command has written everything.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLocalSandbox, createAgentTools } from "knap/ai-sdk";
import { call, runTools, setup, tempWorkspace, nodeSandbox } from "./ai-sdk-helpers.mjs";

const BUFFER = 256 * 1024;

/** Blocks the JS thread (not the command: its output is read natively) until `path` exists. */
function blockUntil(path) {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < 6000 && !existsSync(path); i++) Atomics.wait(cell, 0, 0, 10);
  assert.ok(existsSync(path), `${path} never appeared`);
}

/**
 * Checks that `chunks` of one stream are `full`'s bytes in order, with `skipped` bytes left out
 * just before a chunk; returns the bytes delivered and skipped.
 */
function replay(chunks, full) {
  const bytes = Buffer.from(full);
  let at = 0;
  let delivered = 0;
  let skipped = 0;
  for (const c of chunks) {
    at += c.skipped;
    skipped += c.skipped;
    const b = Buffer.from(c.chunk);
    assert.ok(bytes.subarray(at, at + b.length).equals(b), `chunk at byte ${at} is not the output's next bytes`);
    at += b.length;
    delivered += b.length;
  }
  assert.equal(at, bytes.length, "delivered + skipped covers the whole output");
  return { delivered, skipped };
}

test("Bash onProgress: chunks arrive while the command runs, with the toolCallId, before the unchanged result", async () => {
  const seen = [];
  let ws;
  const gate = () => join(ws.dir, "gate");
  const onProgress = (p) => {
    seen.push(p);
    // The command below waits for this file: it only finishes if a chunk arrived before it ended.
    if (!existsSync(gate())) writeFileSync(gate(), "");
  };
  const s = await setup({}, { tools: { Bash: { onProgress } } });
  ws = s.ws;
  try {
    const command = "echo first; i=0; while [ ! -e gate ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; test -e gate || exit 7; echo second; echo oops >&2";
    const c = call("Bash", { command }, "call_progress_1");
    const { outputs } = await runTools(s.tools, [c]);
    const out = outputs[0];
    assert.equal(out.exit_code, 0, "the gate was written by onProgress while the command ran");
    assert.equal(out.stdout, "first\nsecond\n");
    assert.equal(out.stderr, "oops\n");
    assert.ok(seen.length >= 2, "the first chunk came before 'second' was written");
    for (const p of seen) {
      assert.deepEqual(Object.keys(p).sort(), ["chunk", "skipped", "stream", "toolCallId"]);
      assert.equal(p.toolCallId, "call_progress_1");
      assert.equal(p.skipped, 0);
    }
    assert.equal(seen[0].stream, "stdout");
    assert.equal(seen[0].chunk, "first\n");
    replay(seen.filter((p) => p.stream === "stdout"), out.stdout);
    replay(seen.filter((p) => p.stream === "stderr"), out.stderr);

    // The same command without onProgress gives the same result (duration aside).
    writeFileSync(gate(), "");
    const plain = await createAgentTools(s.sandbox, {});
    const { outputs: [again] } = await runTools(plain.tools, [call("Bash", { command })]);
    const { duration_ms: _a, ...withProgress } = out;
    const { duration_ms: _b, ...without } = again;
    assert.deepEqual(withProgress, without);
  } finally {
    ws.cleanup();
  }
});

test("Bash onProgress: a listener's error becomes the call's {error} once the command ended", async () => {
  let calls = 0;
  const { ws, tools } = await setup({}, {
    tools: {
      Bash: {
        onProgress: () => {
          calls++;
          throw new Error("listener broke");
        },
      },
    },
  });
  try {
    const { outputs } = await runTools(tools, [call("Bash", { command: "echo a; echo b >&2; echo c; touch ran" })]);
    assert.deepEqual(outputs[0], { error: "onProgress threw: listener broke" });
    assert.equal(calls, 1, "deliveries stop at the first error");
    assert.equal(existsSync(join(ws.dir, "ran")), true, "the command itself ran to its end");
  } finally {
    ws.cleanup();
  }
});

test("Bash onProgress: refused when not a function, and on tools other than Bash", async () => {
  const ws = tempWorkspace();
  try {
    const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
    await assert.rejects(createAgentTools(sandbox, { tools: { Bash: { onProgress: "yes" } } }), (e) => {
      assert.equal(e.code, "cave_tool_config_invalid");
      assert.match(e.message, /^cave_tool_config_invalid: Bash onProgress must be a function, received string\nhint: /);
      return true;
    });
    await assert.rejects(createAgentTools(sandbox, { tools: { Read: { onProgress: () => {} } } }), /onProgress/);
  } finally {
    ws.cleanup();
  }
});

test("Bash onProgress with a JS sandbox: its exec onOutput chunks go through the same buffer", async () => {
  const ws = tempWorkspace();
  try {
    const base = nodeSandbox(ws.dir);
    const sandbox = {
      ...base,
      async exec(command, options = {}) {
        assert.equal(typeof options.onOutput, "function", "Bash with onProgress asks the sandbox to stream");
        options.onOutput("one ", "stdout");
        options.onOutput("two", "stdout");
        options.onOutput("warn", "stderr");
        return { stdout: "one two", stderr: "warn", exitCode: 0, durationMs: 1, interrupted: false };
      },
    };
    const seen = [];
    const { tools } = await createAgentTools(sandbox, { tools: { Bash: { onProgress: (p) => seen.push(p) } } });
    const { outputs } = await runTools(tools, [call("Bash", { command: "anything" }, "call_js_1")]);
    assert.equal(outputs[0].stdout, "one two");
    const stdout = seen.filter((p) => p.stream === "stdout");
    assert.equal(stdout.map((p) => p.chunk).join(""), "one two", "stdout chunks in order (merged when the listener is behind)");
    assert.deepEqual(seen.filter((p) => p.stream === "stderr").map((p) => p.chunk), ["warn"]);
    assert.ok(seen.every((p) => p.toolCallId === "call_js_1" && p.skipped === 0));

    // Without onProgress the sandbox is not asked to stream.
    const quiet = {
      ...base,
      async exec(command, options = {}) {
        assert.equal(options.onOutput, undefined);
        return { stdout: "q", stderr: "", exitCode: 0 };
      },
    };
    const plain = await createAgentTools(quiet, {});
    assert.equal((await runTools(plain.tools, [call("Bash", { command: "x" })])).outputs[0].stdout, "q");
  } finally {
    ws.cleanup();
  }
});

test("exec onOutput: chunks in order per stream, covering the whole output, result unchanged", async () => {
  const ws = tempWorkspace();
  try {
    const sb = createLocalSandbox({ workingDirectory: ws.dir });
    const seen = [];
    const command = "i=0; while [ $i -lt 2000 ]; do echo line-$i; echo err-$i >&2; i=$((i+1)); done";
    const r = await sb.exec(command, { onOutput: (chunk, stream, info) => seen.push({ chunk, stream, skipped: info.skipped }) });
    assert.equal(r.exitCode, 0);
    assert.ok(r.stdout.startsWith("line-0\nline-1\n") && r.stdout.endsWith("line-1999\n"));
    const out = replay(seen.filter((c) => c.stream === "stdout"), r.stdout);
    const err = replay(seen.filter((c) => c.stream === "stderr"), r.stderr);
    assert.equal(out.skipped + err.skipped, 0, "a listener that keeps up misses nothing");
    const plain = await sb.exec(command);
    assert.equal(plain.stdout, r.stdout);
    assert.equal(plain.stderr, r.stderr);
  } finally {
    ws.cleanup();
  }
});

test("exec onOutput: a listener that falls behind gets merged chunks bounded by the 256 KiB buffer and a skipped count; the command is not slowed", async () => {
  const ws = tempWorkspace();
  try {
    const sb = createLocalSandbox({ workingDirectory: ws.dir });
    const seen = [];
    const total = 2 * 1024 * 1024;
    const done = join(ws.dir, "done");
    // The listener blocks the JS thread on its first chunk until the command has written all
    // 2 MiB (and then `done`): the command can only finish if its reader never waits for us.
    const onOutput = (chunk, stream, info) => {
      if (seen.length === 0) blockUntil(done);
      seen.push({ chunk, stream, skipped: info.skipped });
    };
    const r = await sb.exec(`head -c ${total} /dev/zero | tr '\\0' x; touch done`, { onOutput });
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout.length, total, "the result keeps its own full capture");
    const { delivered, skipped } = replay(seen, r.stdout);
    assert.ok(skipped > 0, "what did not fit was dropped and counted");
    // At most one chunk in the listener's hands plus one full buffer.
    assert.ok(delivered <= 2 * BUFFER, `delivered ${delivered}`);
    assert.ok(seen.every((c) => Buffer.byteLength(c.chunk) <= BUFFER), "no chunk exceeds the buffer");
    // Reads are at most 64 KiB: a larger chunk was merged from several while the listener waited.
    assert.ok(seen.some((c) => Buffer.byteLength(c.chunk) > 64 * 1024), "adjacent chunks were merged");
    assert.ok(seen.some((c) => c.skipped > 0), "a chunk says how much was dropped before it");
  } finally {
    ws.cleanup();
  }
});

test("exec onOutput: refused when not a function; a listener's error rejects exec after the command ended", async () => {
  const ws = tempWorkspace();
  try {
    const sb = createLocalSandbox({ workingDirectory: ws.dir });
    await assert.rejects(sb.exec("true", { onOutput: 42 }), (e) => {
      assert.equal(e.code, "cave_sandbox_exec_option_invalid");
      assert.match(e.message, /^cave_sandbox_exec_option_invalid: exec onOutput must be a function, received number\nhint: /);
      return true;
    });
    const boom = new Error("listener broke");
    await assert.rejects(
      sb.exec("echo a; sleep 0.1; echo b; touch ran", {
        onOutput: () => {
          throw boom;
        },
      }),
      (e) => e === boom,
    );
    assert.equal(existsSync(join(ws.dir, "ran")), true, "the command ran to its end");
    // A refused command still ends the deliveries (exec settles).
    await assert.rejects(sb.exec("ls", { cwd: "../..", onOutput: () => {} }), /outside|escapes/);
  } finally {
    ws.cleanup();
  }
});
