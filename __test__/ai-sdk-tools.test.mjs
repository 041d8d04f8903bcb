// The six sandbox tools of createAgentTools, driven through real generateText/streamText loops
// with MockLanguageModelV3: inputs, outputs, {error} results and every ToolConfig option.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync, utimesSync, symlinkSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { createLocalSandbox, createAgentTools } from "knap/ai-sdk";
import { call, runTool, runTools, runStream, tempWorkspace, nodeSandbox, setup } from "./ai-sdk-helpers.mjs";


test("the default tool set: six tools in bashkit's order, bashkit's input schemas reach the model", async () => {
  const { ws, tools } = await setup({});
  try {
    assert.deepEqual(Object.keys(tools), ["Bash", "Read", "Write", "Edit", "Glob", "Grep"]);
    const { model } = await runTools(tools, [call("Bash", { command: "true" })]);
    const sent = model.doGenerateCalls[0].tools;
    assert.deepEqual(sent.map((t) => t.name), ["Bash", "Read", "Write", "Edit", "Glob", "Grep"]);
    const bash = sent.find((t) => t.name === "Bash").inputSchema;
    assert.deepEqual(bash.required, ["command"]);
    assert.deepEqual(bash.properties.timeout.type, ["number", "null"]);
    assert.equal(bash.properties.timeout.default, null);
    assert.equal(bash.additionalProperties, false);
    const grep = sent.find((t) => t.name === "Grep").inputSchema;
    assert.deepEqual(Object.keys(grep.properties), ["pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-B", "-A", "-C", "head_limit", "offset", "multiline"]);
  } finally {
    ws.cleanup();
  }
});

test("invalid input is refused by the schema (the SDK reports a tool error)", async () => {
  const { ws, tools } = await setup({});
  try {
    const out = await runTool(tools, "Bash", { command: 5 });
    assert.match(out.__toolError, /Invalid input/);
    assert.match(out.__toolError, /"command": expected string, received number/);
  } finally {
    ws.cleanup();
  }
});

test("strict, needsApproval and providerOptions pass through to the AI SDK tool", async () => {
  const { ws, tools } = await setup({}, { tools: { Bash: { needsApproval: true, strict: true, providerOptions: { x: { y: 1 } } } } });
  try {
    assert.equal(tools.Bash.needsApproval, true);
    assert.equal(tools.Bash.strict, true);
    assert.deepEqual(tools.Bash.providerOptions, { x: { y: 1 } });
    const { result } = await runTools(tools, [call("Bash", { command: "touch approved-not.txt" })]);
    assert.equal(result.steps[0].content.some((p) => p.type === "tool-approval-request"), true);
    assert.equal(existsSync(join(ws.dir, "approved-not.txt")), false, "not run without approval");
  } finally {
    ws.cleanup();
  }
});

// ---------------------------------------------------------------------------------------- Bash

test("Bash: stdout, stderr, exit_code (non-zero is not an error), interrupted, duration_ms", async () => {
  const { ws, tools } = await setup({});
  try {
    const out = await runTool(tools, "Bash", { command: "echo hi; echo err 1>&2; exit 3", description: "test" });
    assert.equal(out.stdout, "hi\n");
    assert.equal(out.stderr, "err\n");
    assert.equal(out.exit_code, 3);
    assert.equal(out.interrupted, false);
    assert.equal(typeof out.duration_ms, "number");
    assert.deepEqual(Object.keys(out).sort(), ["duration_ms", "exit_code", "interrupted", "stderr", "stdout"]);
  } finally {
    ws.cleanup();
  }
});

test("Bash: blockedCommands refuses a command containing a blocked string", async () => {
  const { ws, tools } = await setup({}, { tools: { Bash: { blockedCommands: ["rm -rf", "curl"] } } });
  try {
    assert.deepEqual(await runTool(tools, "Bash", { command: "ls; rm -rf /tmp/x" }), { error: "Command blocked: contains 'rm -rf'" });
    assert.equal((await runTool(tools, "Bash", { command: "echo fine" })).stdout, "fine\n");
  } finally {
    ws.cleanup();
  }
});

test("Bash: maxOutputLength middle-truncates each stream (bashkit's format)", async () => {
  const { ws, tools } = await setup({}, { tools: { Bash: { maxOutputLength: 40 } } });
  try {
    const out = await runTool(tools, "Bash", { command: "seq 1 1000" });
    const full = Array.from({ length: 1000 }, (_, i) => `${i + 1}\n`).join("");
    const omitted = full.length - 40;
    assert.equal(out.stdout, `[Total output lines: 1001]\n\n${full.slice(0, 20)}\n\n…${omitted} chars truncated…\n\n${full.slice(-20)}`);
  } finally {
    ws.cleanup();
  }
});

test("Bash: the default maxOutputLength is 30000 characters", async () => {
  const { ws, tools } = await setup({});
  try {
    const out = await runTool(tools, "Bash", { command: "head -c 100000 /dev/zero | tr '\\0' a" });
    assert.equal(out.stdout, `[Total output lines: 1]\n\n${"a".repeat(15000)}\n\n…70000 chars truncated…\n\n${"a".repeat(15000)}`);
  } finally {
    ws.cleanup();
  }
});

test("Bash: input timeout, per-tool timeout and defaultTimeout interrupt the command", async () => {
  const a = await setup({});
  const b = await setup({}, { tools: { Bash: { timeout: 200 } } });
  const c = await setup({}, { defaultTimeout: 200 });
  try {
    const viaInput = await runTool(a.tools, "Bash", { command: "sleep 20; echo never", timeout: 200 });
    assert.equal(viaInput.interrupted, true);
    assert.equal(viaInput.stdout, "");
    assert.equal((await runTool(b.tools, "Bash", { command: "sleep 20" })).interrupted, true);
    assert.equal((await runTool(c.tools, "Bash", { command: "sleep 20" })).interrupted, true);
    // The input timeout wins over the configured one.
    assert.equal((await runTool(b.tools, "Bash", { command: "sleep 0.5; echo ok", timeout: 20000 })).stdout, "ok\n");
  } finally {
    a.ws.cleanup();
    b.ws.cleanup();
    c.ws.cleanup();
  }
});

test("Bash: run_in_background returns at once with a pid and a log file; destroy() stops it", async () => {
  const { ws, tools, sandbox } = await setup({});
  try {
    const out = await runTool(tools, "Bash", { command: "echo started; sleep 60", run_in_background: true });
    assert.equal(out.exit_code, 0);
    assert.equal(typeof out.background.pid, "number");
    assert.match(out.stdout, /Started in the background \(pid \d+\)/);
    const log = out.background.output_file;
    let text = "";
    for (let i = 0; i < 1000 && !text.includes("started"); i++) {
      text = existsSync(log) ? readFileSync(log, "utf8") : "";
      if (!text.includes("started")) await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(text, "started\n");
    const pid = out.background.pid;
    assert.equal(existsSync(`/proc/${pid}`), true, "still running after the tool returned");
    await sandbox.destroy();
    let gone = false;
    for (let i = 0; i < 1000 && !gone; i++) {
      gone = !existsSync(`/proc/${pid}`) || readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z");
      if (!gone) await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(gone, true);
  } finally {
    ws.cleanup();
  }
});

// ---------------------------------------------------------------------------------------- Read

test("Read: lines, total_lines (split semantics), offset/limit, directories", async () => {
  const { ws, tools } = await setup({ "a.txt": "alpha\nbeta\ngamma\n", "d/x": "", "d/y": "" });
  try {
    assert.deepEqual(await runTool(tools, "Read", { file_path: "a.txt" }), {
      type: "text",
      content: "alpha\nbeta\ngamma\n",
      lines: [
        { line_number: 1, content: "alpha" },
        { line_number: 2, content: "beta" },
        { line_number: 3, content: "gamma" },
        { line_number: 4, content: "" },
      ],
      total_lines: 4,
    });
    const page = await runTool(tools, "Read", { file_path: join(ws.dir, "a.txt"), offset: 2, limit: 1 });
    assert.deepEqual(page, { type: "text", content: "beta", lines: [{ line_number: 2, content: "beta" }], total_lines: 4 });
    assert.deepEqual(await runTool(tools, "Read", { file_path: "d" }), { type: "directory", entries: ["x", "y"], count: 2 });
  } finally {
    ws.cleanup();
  }
});

test("Read: errors: not found, outside the workspace, large file, binary file", async () => {
  const big = Array.from({ length: 501 }, (_, i) => `line ${i}`).join("\n");
  const { ws, tools } = await setup({ "big.txt": big, "img.png": "\u0000\u0001PNG", "data.txt": "a\u0000b" });
  try {
    assert.deepEqual(await runTool(tools, "Read", { file_path: "missing.txt" }), { error: "Path not found: missing.txt" });
    const outside = await runTool(tools, "Read", { file_path: "/etc/hostname" });
    assert.match(outside.error, /^Path is outside the working directory \(.+\): \/etc\/hostname$/);
    assert.deepEqual(await runTool(tools, "Read", { file_path: "big.txt" }), {
      error: "File is large (501 lines). Use 'offset' and 'limit' to read in chunks. Example: offset=1, limit=100 for first 100 lines.",
    });
    assert.equal((await runTool(tools, "Read", { file_path: "big.txt", offset: 500, limit: 10 })).lines.length, 2);
    assert.deepEqual(await runTool(tools, "Read", { file_path: "img.png" }), {
      error: "Cannot read binary file: img.png (file exists, 5 bytes). Use appropriate tools to process PNG files (e.g., Python scripts for PDFs).",
    });
    assert.equal((await runTool(tools, "Read", { file_path: "data.txt" })).type, "text", "NUL only refuses binary extensions");
  } finally {
    ws.cleanup();
  }
});

test("Read: maxFileSize (lines without a limit), maxLineLength, maxOutputLength", async () => {
  const { ws, tools } = await setup(
    { "ten.txt": "0\n1\n2\n3\n4\n5\n6\n7\n8\n9", "long.txt": "x".repeat(50) + "\nshort" },
    { tools: { Read: { maxFileSize: 5, maxLineLength: 10, maxOutputLength: 12 } } },
  );
  try {
    assert.match((await runTool(tools, "Read", { file_path: "ten.txt" })).error, /^File is large \(10 lines\)/);
    const long = await runTool(tools, "Read", { file_path: "long.txt" });
    assert.equal(long.lines[0].content, `${"x".repeat(10)}…`);
    assert.equal(long.content, `[Total output lines: 2]\n\n${"x".repeat(6)}\n\n…5 chars truncated…\n\n\nshort`);
    assert.equal(long.lines.length, 2, "the lines array is not truncated");
  } finally {
    ws.cleanup();
  }
});

test("Read: allowedPaths are globs over resolved paths (symlinks cannot get around them)", async () => {
  const { ws, tools } = await setup(
    { "src/a.ts": "a", "src/deep/b.ts": "b", "docs/secret.md": "s", "notes.md": "n" },
    { tools: { Read: { allowedPaths: ["src/**", "**/*.md"] } } },
  );
  try {
    symlinkSync(join(ws.dir, "docs"), join(ws.dir, "src", "docs-link"));
    assert.equal((await runTool(tools, "Read", { file_path: "src/deep/b.ts" })).content, "b");
    assert.equal((await runTool(tools, "Read", { file_path: "notes.md" })).content, "n");
    assert.equal((await runTool(tools, "Read", { file_path: "docs/secret.md" })).content, "s", "**/*.md allows it");
    const ws2 = await setup({ "src/a.ts": "a", "docs/secret.txt": "s" }, { tools: { Read: { allowedPaths: ["src"] } } });
    try {
      symlinkSync(join(ws2.ws.dir, "docs"), join(ws2.ws.dir, "src", "docs-link"));
      assert.equal((await runTool(ws2.tools, "Read", { file_path: "src/a.ts" })).content, "a", "a directory allows what is under it");
      assert.deepEqual(await runTool(ws2.tools, "Read", { file_path: "docs/secret.txt" }), { error: "Path not allowed: docs/secret.txt" });
      assert.deepEqual(await runTool(ws2.tools, "Read", { file_path: "src/docs-link/secret.txt" }), {
        error: "Path not allowed: src/docs-link/secret.txt",
      });
      assert.deepEqual(await runTool(ws2.tools, "Read", { file_path: "src/../docs/secret.txt" }), { error: "Path not allowed: src/../docs/secret.txt" });
    } finally {
      ws2.ws.cleanup();
    }
  } finally {
    ws.cleanup();
  }
});

test("Read: a tool's timeout (per tool or defaultTimeout) answers {error}", async () => {
  const ws = tempWorkspace({ "a.txt": "a" });
  try {
    const slow = { ...nodeSandbox(ws.dir), readFile: () => new Promise(() => {}) };
    const { tools } = await createAgentTools(slow, { tools: { Read: { timeout: 100 } } });
    assert.deepEqual(await runTool(tools, "Read", { file_path: "a.txt" }), { error: "Read timed out after 100ms" });
    const viaDefault = await createAgentTools(slow, { defaultTimeout: 100 });
    assert.deepEqual(await runTool(viaDefault.tools, "Read", { file_path: "a.txt" }), { error: "Read timed out after 100ms" });
  } finally {
    ws.cleanup();
  }
});

// ---------------------------------------------------------------------------------------- Write

test("Write: writes (creating directories), UTF-8 byte count, maxFileSize, allowedPaths, workspace boundary", async () => {
  const { ws, tools } = await setup({}, { tools: { Write: { maxFileSize: 10, allowedPaths: ["out/**"] } } });
  try {
    assert.deepEqual(await runTool(tools, "Write", { file_path: "out/new/é.txt", content: "héllo" }), {
      message: "Successfully wrote to out/new/é.txt",
      bytes_written: 6,
      file_path: "out/new/é.txt",
    });
    assert.equal(readFileSync(join(ws.dir, "out/new/é.txt"), "utf8"), "héllo");
    assert.deepEqual(await runTool(tools, "Write", { file_path: "out/big.txt", content: "x".repeat(11) }), {
      error: "File content exceeds maximum size of 10 bytes (got 11)",
    });
    assert.deepEqual(await runTool(tools, "Write", { file_path: "elsewhere.txt", content: "x" }), { error: "Path not allowed: elsewhere.txt" });
    const free = await setup({});
    try {
      const out = await runTool(free.tools, "Write", { file_path: "../escape.txt", content: "x" });
      assert.match(out.error, /^Path is outside the working directory/);
      assert.equal(existsSync(join(free.ws.dir, "..", "escape.txt")), false);
    } finally {
      free.ws.cleanup();
    }
  } finally {
    ws.cleanup();
  }
});

// ---------------------------------------------------------------------------------------- Edit

test("Edit: replacement text is literal ($& and $1 are not patterns)", async () => {
  const { ws, tools } = await setup({ "f.txt": "alpha BETA gamma\n" });
  try {
    const out = await runTool(tools, "Edit", { file_path: "f.txt", old_string: "BETA", new_string: "[$&] $1 $$" });
    assert.deepEqual(out, { message: "Successfully edited f.txt", file_path: "f.txt", replacements: 1 });
    assert.equal(readFileSync(join(ws.dir, "f.txt"), "utf8"), "alpha [$&] $1 $$ gamma\n");
  } finally {
    ws.cleanup();
  }
});

test("Edit: errors, and replace_all", async () => {
  const { ws, tools } = await setup({ "f.txt": "a x a x a\n" });
  try {
    assert.deepEqual(await runTool(tools, "Edit", { file_path: "f.txt", old_string: "a", new_string: "a" }), {
      error: "old_string and new_string must be different",
    });
    assert.deepEqual(await runTool(tools, "Edit", { file_path: "nope.txt", old_string: "a", new_string: "b" }), { error: "File not found: nope.txt" });
    assert.deepEqual(await runTool(tools, "Edit", { file_path: "f.txt", old_string: "zzz", new_string: "b" }), {
      error: 'String not found in file: "zzz"',
    });
    assert.deepEqual(await runTool(tools, "Edit", { file_path: "f.txt", old_string: "a", new_string: "b" }), {
      error: "String appears 3 times in file. Use replace_all=true to replace all, or provide a more unique string.",
    });
    assert.equal(readFileSync(join(ws.dir, "f.txt"), "utf8"), "a x a x a\n", "nothing changed by the failures");
    assert.deepEqual(await runTool(tools, "Edit", { file_path: "f.txt", old_string: "a", new_string: "$&b", replace_all: true }), {
      message: "Successfully edited f.txt",
      file_path: "f.txt",
      replacements: 3,
    });
    assert.equal(readFileSync(join(ws.dir, "f.txt"), "utf8"), "$&b x $&b x $&b\n");
  } finally {
    ws.cleanup();
  }
});

test("Edit: allowedPaths", async () => {
  const { ws, tools } = await setup({ "src/a.txt": "one", "b.txt": "one" }, { tools: { Edit: { allowedPaths: ["src/*.txt"] } } });
  try {
    assert.equal((await runTool(tools, "Edit", { file_path: "src/a.txt", old_string: "one", new_string: "two" })).replacements, 1);
    assert.deepEqual(await runTool(tools, "Edit", { file_path: "b.txt", old_string: "one", new_string: "two" }), { error: "Path not allowed: b.txt" });
  } finally {
    ws.cleanup();
  }
});

// ---------------------------------------------------------------------------------------- Glob

test("Glob: a real glob, newest first, bounded at 1,000 with a note (maxResults: 0 lifts it)", async () => {
  const files = {};
  for (let i = 0; i < 1200; i++) files[`many/f${String(i).padStart(4, "0")}.txt`] = "x";
  files["src/a.ts"] = "";
  files["src/deep/b.ts"] = "";
  files["src/c.tsx"] = "";
  files["top.ts"] = "";
  const { ws, tools } = await setup(files);
  try {
    const all = await runTool(tools, "Glob", { pattern: "*.txt" });
    assert.equal(all.count, 1000, "bounded at 1,000 by default");
    assert.equal(all.matches.length, 1000);
    assert.deepEqual(all.truncated, { total: 1200, omitted: 200 });
    assert.match(all.note, /^Showing the 1,000 newest of 1,200 matching paths \(200 more not listed\)/);
    assert.equal(all.search_path, ".");
    assert.deepEqual((await runTool(tools, "Glob", { pattern: "src/*.ts" })).matches, ["./src/a.ts"]);
    assert.deepEqual((await runTool(tools, "Glob", { pattern: "src/**/*.ts" })).matches.sort(), ["./src/a.ts", "./src/deep/b.ts"]);
    assert.deepEqual((await runTool(tools, "Glob", { pattern: "*.{ts,tsx}", path: "src" })).matches.sort(), ["src/a.ts", "src/c.tsx", "src/deep/b.ts"]);
    const t = Date.now() / 1000;
    utimesSync(join(ws.dir, "src/a.ts"), t - 1000, t - 1000);
    utimesSync(join(ws.dir, "src/deep/b.ts"), t + 1000, t + 1000);
    utimesSync(join(ws.dir, "src/c.tsx"), t, t);
    assert.deepEqual((await runTool(tools, "Glob", { pattern: "**/*.ts*", path: "src" })).matches, ["src/deep/b.ts", "src/c.tsx", "src/a.ts"]);
  } finally {
    ws.cleanup();
  }
});

test("Glob: errors (missing path, not a directory, bad pattern) and allowedPaths", async () => {
  const { ws, tools } = await setup({ "a.txt": "", "src/b.ts": "", "lib/c.ts": "" }, { tools: { Glob: { allowedPaths: ["src/**"] } } });
  try {
    assert.deepEqual(await runTool(tools, "Glob", { pattern: "*", path: "src/nope" }), { error: "Path not found: src/nope" });
    assert.deepEqual((await runTool(tools, "Glob", { pattern: "**/*.ts" })).matches, ["./src/b.ts"], "results outside allowedPaths are dropped");
    assert.deepEqual(await runTool(tools, "Glob", { pattern: "*.ts", path: "lib" }), { error: "Path not allowed: lib" });
    const free = await setup({ "a.txt": "" });
    try {
      assert.deepEqual(await runTool(free.tools, "Glob", { pattern: "*", path: "a.txt" }), { error: "Not a directory: a.txt" });
      assert.match((await runTool(free.tools, "Glob", { pattern: "src/[a" })).error, /^Invalid glob pattern: /);
    } finally {
      free.ws.cleanup();
    }
  } finally {
    ws.cleanup();
  }
});

// ---------------------------------------------------------------------------------------- Grep

const grepFiles = {
  "a.txt": "alpha\nbeta\nALPHA gamma\n",
  "src/b.js": "const alpha = 1;\nfunction beta() { return alpha + alpha; }\n",
  "src/c.py": "alpha = 2\n",
  "ignored/x.txt": "alpha\n",
  ".ignore": "ignored/\n",
  ".hidden/y.txt": "alpha\n",
};

test("Grep: files_with_matches (default, sorted), .ignore and hidden files skipped as rg does", async () => {
  const { ws, tools } = await setup(grepFiles);
  try {
    assert.deepEqual(await runTool(tools, "Grep", { pattern: "alpha" }), { files: ["./a.txt", "./src/b.js", "./src/c.py"], count: 3 });
    assert.deepEqual(await runTool(tools, "Grep", { pattern: "alpha", path: "src" }), { files: ["src/b.js", "src/c.py"], count: 2 });
    assert.deepEqual(await runTool(tools, "Grep", { pattern: "beta", path: "a.txt" }), { files: ["a.txt"], count: 1 });
  } finally {
    ws.cleanup();
  }
});

test("Grep: count mode counts every match; -i, glob and type filters", async () => {
  const { ws, tools } = await setup(grepFiles);
  try {
    assert.deepEqual(await runTool(tools, "Grep", { pattern: "alpha", output_mode: "count", "-i": true }), {
      counts: [
        { file: "./a.txt", count: 2 },
        { file: "./src/b.js", count: 3 },
        { file: "./src/c.py", count: 1 },
      ],
      total: 6,
    });
    assert.deepEqual((await runTool(tools, "Grep", { pattern: "alpha", glob: "*.py" })).files, ["./src/c.py"]);
    assert.deepEqual((await runTool(tools, "Grep", { pattern: "alpha", type: "js" })).files, ["./src/b.js"]);
  } finally {
    ws.cleanup();
  }
});

test("Grep: content mode with -A/-B/-C context grouped as rg groups it", async () => {
  const { ws, tools } = await setup({ "f.txt": "one\nhit 1\ntwo\nthree\nfour\nhit 2\nfive\n" });
  try {
    assert.deepEqual(await runTool(tools, "Grep", { pattern: "hit", output_mode: "content", "-C": 1 }), {
      matches: [
        { file: "./f.txt", line_number: 2, line: "hit 1", before_context: ["one"], after_context: ["two"] },
        { file: "./f.txt", line_number: 6, line: "hit 2", before_context: ["four"], after_context: ["five"] },
      ],
      total_matches: 2,
    });
    const before = await runTool(tools, "Grep", { pattern: "hit", output_mode: "content", "-B": 3 });
    assert.deepEqual(before.matches[1].before_context, ["two", "three", "four"]);
    assert.equal(before.matches[0].after_context, undefined, "-B alone never attaches lines after a match");
    const after = await runTool(tools, "Grep", { pattern: "hit", output_mode: "content", "-A": 2 });
    assert.deepEqual(after.matches[0].after_context, ["two", "three"]);
    assert.equal(after.matches[1].before_context, undefined);
  } finally {
    ws.cleanup();
  }
});

test("Grep: offset and head_limit page every output mode", async () => {
  const files = {};
  for (let i = 0; i < 10; i++) files[`f${i}.txt`] = "x\nx\n";
  const { ws, tools } = await setup(files);
  try {
    const content = await runTool(tools, "Grep", { pattern: "x", output_mode: "content", offset: 3, head_limit: 4 });
    assert.deepEqual(
      content.matches.map((m) => `${m.file}:${m.line_number}`),
      ["./f1.txt:2", "./f2.txt:1", "./f2.txt:2", "./f3.txt:1"],
    );
    assert.equal(content.total_matches, 4);
    assert.deepEqual((await runTool(tools, "Grep", { pattern: "x", offset: 8 })).files, ["./f8.txt", "./f9.txt"]);
    const counts = await runTool(tools, "Grep", { pattern: "x", output_mode: "count", head_limit: 2 });
    assert.deepEqual(counts, { counts: [{ file: "./f0.txt", count: 2 }, { file: "./f1.txt", count: 2 }], total: 4 });
    assert.equal((await runTool(tools, "Grep", { pattern: "x", head_limit: 0 })).count, 10, "head_limit 0 is unlimited");
  } finally {
    ws.cleanup();
  }
});

test("Grep: maxResults bounds files, counts and lines (default 1,000) with truncated and a note; 0 lifts it", async () => {
  const files = {};
  for (let i = 0; i < 1005; i++) files[`m/f${String(i).padStart(4, "0")}.txt`] = "hit\n";
  const { ws, sandbox, tools } = await setup(files);
  try {
    const all = await runTool(tools, "Grep", { pattern: "hit" });
    assert.equal(all.count, 1000, "bounded at 1,000 by default");
    assert.equal(all.files.length, 1000);
    assert.equal(all.files[999], "./m/f0999.txt", "the first 1,000 in rg's sorted order");
    assert.deepEqual(all.truncated, { total: 1005, omitted: 5 });
    assert.equal(
      all.note,
      "Showing 1,000 of 1,005 results (5 more not listed). Narrow the search with path, glob or type, or page with offset and head_limit; tools.Grep.maxResults raises the limit.",
    );
    // offset reaches the rest.
    const rest = await runTool(tools, "Grep", { pattern: "hit", offset: 1000 });
    assert.deepEqual(rest, { files: ["./m/f1000.txt", "./m/f1001.txt", "./m/f1002.txt", "./m/f1003.txt", "./m/f1004.txt"], count: 5 });

    const small = await createAgentTools(sandbox, { tools: { Grep: { maxResults: 3 } } });
    const counts = await runTool(small.tools, "Grep", { pattern: "hit", output_mode: "count" });
    assert.deepEqual(counts.counts, [
      { file: "./m/f0000.txt", count: 1 },
      { file: "./m/f0001.txt", count: 1 },
      { file: "./m/f0002.txt", count: 1 },
    ]);
    assert.equal(counts.total, 3);
    assert.deepEqual(counts.truncated, { total: 1005, omitted: 1002 });
    assert.match(counts.note, /^Showing 3 of 1,005 results \(1,002 more not listed\)/);
    const lines = await runTool(small.tools, "Grep", { pattern: "hit", output_mode: "content", head_limit: 10 });
    assert.equal(lines.matches.length, 3, "the application's bound applies to the model's page too");
    assert.equal(lines.total_matches, 3);
    assert.deepEqual(lines.truncated, { total: 10, omitted: 7 });
    assert.deepEqual(await runTool(small.tools, "Grep", { pattern: "hit", path: "m/f0004.txt" }), { files: ["m/f0004.txt"], count: 1 }, "under the bound: no truncated, no note");

    const free = await createAgentTools(sandbox, { tools: { Grep: { maxResults: 0 } } });
    const everything = await runTool(free.tools, "Grep", { pattern: "hit" });
    assert.equal(everything.count, 1005);
    assert.equal(everything.truncated, undefined);
    assert.equal(everything.note, undefined);
  } finally {
    ws.cleanup();
  }
});

test("Grep: multiline, and errors (bad regex, missing path), allowedPaths", async () => {
  const { ws, tools } = await setup({ "a.txt": "begin\nmiddle\nend\n", "src/s.txt": "begin\n" }, { tools: { Grep: { allowedPaths: ["src/**"] } } });
  const free = await setup({ "a.txt": "begin\nmiddle\nend\n" });
  try {
    const m = await runTool(free.tools, "Grep", { pattern: "begin.*end", output_mode: "content", multiline: true });
    assert.deepEqual(m.matches, [{ file: "./a.txt", line_number: 1, line: "begin\nmiddle\nend" }]);
    assert.match((await runTool(free.tools, "Grep", { pattern: "(unclosed" })).error, /^Invalid regex: /);
    assert.match((await runTool(free.tools, "Grep", { pattern: "x", glob: "[a" })).error, /^Invalid glob: /);
    assert.match((await runTool(free.tools, "Grep", { pattern: "x", type: "nosuchtype" })).error, /nosuchtype/);
    assert.deepEqual(await runTool(free.tools, "Grep", { pattern: "x", path: "nope" }), { error: "Path not found: nope" });
    assert.deepEqual((await runTool(tools, "Grep", { pattern: "begin" })).files, ["./src/s.txt"]);
    assert.deepEqual(await runTool(tools, "Grep", { pattern: "begin", path: "a.txt" }), { error: "Path not allowed: a.txt" });
  } finally {
    ws.cleanup();
    free.ws.cleanup();
  }
});

// ------------------------------------------------------------------- other Sandbox objects

const hasRg = (() => {
  try {
    return execFileSync("sh", ["-c", "command -v rg"]).toString().trim();
  } catch {
    return "";
  }
})();

test("a plain Node Sandbox object gives the same results as knap's sandbox", async () => {
  const files = { ...grepFiles, "f.txt": "one\nhit 1\ntwo\nthree\nfour\nhit 2\nfive\n", "big.txt": "l\n".repeat(600) };
  const knapWs = tempWorkspace(files);
  const nodeWs = tempWorkspace(files);
  try {
    const knap = await createAgentTools(createLocalSandbox({ workingDirectory: knapWs.dir }));
    const plainSandbox = nodeSandbox(nodeWs.dir);
    if (hasRg) plainSandbox.rgPath = hasRg;
    const plain = await createAgentTools(plainSandbox);
    const same = async (name, input) => {
      const [a, b] = await Promise.all([runTool(knap.tools, name, input), runTool(plain.tools, name, input)]);
      if (name === "Bash") {
        delete a.duration_ms;
        delete b.duration_ms;
      }
      if (name === "Glob") {
        // Newest first: files written within one clock tick tie, differently in each workspace.
        a.matches.sort();
        b.matches.sort();
      }
      assert.deepEqual(a, b, `${name} ${JSON.stringify(input)}`);
      return a;
    };
    await same("Read", { file_path: "f.txt" });
    await same("Read", { file_path: "f.txt", offset: 3, limit: 2 });
    await same("Read", { file_path: "src" });
    await same("Read", { file_path: "big.txt" });
    await same("Read", { file_path: "missing" });
    await same("Bash", { command: "seq 1 5000; exit 2" });
    await same("Glob", { pattern: "*.txt" });
    await same("Glob", { pattern: "src/*" });
    await same("Edit", { file_path: "a.txt", old_string: "beta", new_string: "[$&]" });
    await same("Write", { file_path: "n/new.txt", content: "x" });
    await same("Edit", { file_path: "a.txt", old_string: "nope", new_string: "x" });
    if (hasRg) {
      await same("Grep", { pattern: "alpha" });
      await same("Grep", { pattern: "alpha", output_mode: "count", "-i": true });
      await same("Grep", { pattern: "hit", output_mode: "content", "-C": 1 });
      await same("Grep", { pattern: "hit", output_mode: "content", "-B": 2 });
      await same("Grep", { pattern: "x|alpha", output_mode: "content", offset: 1, head_limit: 2 });
    } else {
      assert.deepEqual(await runTool(plain.tools, "Grep", { pattern: "alpha" }), {
        error: "Ripgrep not available. Call ensureSandboxTools(sandbox) before using Grep with remote sandboxes.",
      });
    }
  } finally {
    knapWs.cleanup();
    nodeWs.cleanup();
  }
});

test("streamText: tool calls and results stream through the loop", async () => {
  const { ws, tools } = await setup({ "a.txt": "streamed\n" });
  try {
    const c = call("Read", { file_path: "a.txt" });
    const { parts, text, steps } = await runStream(tools, [c]);
    assert.equal(text, "done");
    assert.equal(steps.length, 2);
    const result = parts.find((p) => p.type === "tool-result");
    assert.equal(result.toolName, "Read");
    assert.equal(result.output.content, "streamed\n");
    assert.deepEqual(
      parts.map((p) => p.type).filter((t) => ["tool-call", "tool-result", "finish-step"].includes(t)),
      ["tool-call", "tool-result", "finish-step", "finish-step"],
    );
  } finally {
    ws.cleanup();
  }
});

test("tools of one step run concurrently (a slow Bash does not hold up a Read)", async () => {
  const { ws, tools } = await setup({ "a.txt": "x" });
  try {
    writeFileSync(join(ws.dir, "b.txt"), "y");
    mkdirSync(join(ws.dir, "d"));
    const calls = [call("Bash", { command: "sleep 0.3; echo slow" }), call("Read", { file_path: "b.txt" })];
    const { outputs } = await runTools(tools, calls);
    assert.equal(outputs[0].stdout, "slow\n");
    assert.equal(outputs[1].content, "y");
  } finally {
    ws.cleanup();
  }
});
