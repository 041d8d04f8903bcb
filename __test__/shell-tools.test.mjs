// shellTools(): tool objects, selection, and each tool's exact output and error texts through the
// public JS surface (reference §5).
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, describe, test } from "node:test";

import { localExecutionBackend, shellTools } from "../lib/index.mjs";
import { coded, fourThousandLines, HANDLE_RE, tempWorkspace, toolsFor } from "./helpers.mjs";

const workspaces = [];
function workspace() {
  const ws = tempWorkspace();
  workspaces.push(ws);
  return ws;
}
after(() => workspaces.forEach((ws) => ws.cleanup()));

describe("tool objects", () => {
  test("default order, properties and descriptions", () => {
    const ws = workspace();
    const tools = shellTools({ workspace: ws.root });
    assert.deepEqual(
      tools.map((t) => t.name),
      ["read_file", "grep", "bash", "write_file", "edit_file", "read_tool_output"],
    );
    assert.deepEqual(
      tools.map((t) => [t.name, t.effect, t.speculative, t.timeoutMs, t.kind, t.result]),
      [
        ["read_file", "read", true, 30000, "tool", "inline"],
        ["grep", "read", true, 30000, "tool", "inline"],
        ["bash", "external", false, 120000, "tool", "inline"],
        ["write_file", "write", false, 30000, "tool", "inline"],
        ["edit_file", "write", false, 30000, "tool", "inline"],
        ["read_tool_output", "read", false, 30000, "tool", "inline"],
      ],
    );
    for (const t of tools) {
      assert.deepEqual(Object.keys(t), ["kind", "name", "description", "input", "effect", "result", "speculative", "timeoutMs", "execute"]);
      assert.equal(typeof t.execute, "function");
      assert.equal(t.input.type, "object");
    }
    const [read, grep, bash, write, edit, rto] = tools;
    assert.equal(
      read.description,
      "Read a UTF-8 file from the workspace. Optional offset/limit read a line range. Each returned line starts with its 1-based line number and a tab. These prefixes are not file content; remove the leading number and tab from each line before copying content into another file. Output is capped at 24000 bytes.",
    );
    assert.equal(grep.description, "Search the workspace for a regular expression with ripgrep (grep fallback). Returns at most 200 matches, capped at 16000 bytes.");
    assert.equal(bash.description, "Run one shell command in the workspace; hard timeout 120000 ms; output capped at 24000 bytes. Interactive sessions are unavailable.");
    assert.equal(write.description, "Create a UTF-8 file in the workspace. Refuses an existing path unless overwrite is true. Parent directory must already exist.");
    assert.equal(edit.description, "Replace an exact string in a workspace file. The old string must appear exactly once unless replace_all is set. Writes to disk.");
    assert.equal(
      rto.description,
      "Read captured output from this active agent by opaque handle. Uses zero-based byte offset and bounded byte limit, or finds a literal query without rerunning the original tool.",
    );
    assert.deepEqual(read.input, {
      type: "object",
      properties: { path: { type: "string" }, offset: { type: "integer" }, limit: { type: "integer" } },
      required: ["path"],
    });
    assert.deepEqual(Object.keys(grep.input.properties), ["pattern", "path", "glob"]);
    assert.deepEqual(Object.keys(bash.input.properties), ["command", "timeoutMs"]);
    assert.deepEqual(write.input.required, ["path", "content"]);
    assert.deepEqual(Object.keys(edit.input.properties), ["path", "old_string", "new_string", "replace_all"]);
    assert.deepEqual(Object.keys(rto.input.properties), ["handle", "offset", "limit", "query"]);
  });

  test("tools selects and orders; unknown and duplicate names throw with codes", () => {
    const ws = workspace();
    assert.deepEqual(
      shellTools({ workspace: ws.root, tools: ["bash", "read_file", "read_tool_output"] }).map((t) => t.name),
      ["bash", "read_file", "read_tool_output"],
    );
    assert.deepEqual(shellTools({ workspace: ws.root, tools: [] }), []);
    assert.throws(() => shellTools({ workspace: ws.root, tools: ["read_file", "rm_rf"] }), coded("cave_shell_tool_unknown:rm_rf", /^cave_shell_tool_unknown:rm_rf\nhint: the tools are read_file, grep, bash, write_file, edit_file, read_tool_output$/));
    assert.throws(() => shellTools({ workspace: ws.root, tools: ["grep", "bash", "grep"] }), coded("cave_shell_tool_duplicate:grep"));
    // Construction is synchronous and the workspace need not exist yet.
    assert.equal(shellTools({ workspace: `${ws.outside}/later` }).length, 6);
    assert.equal(shellTools({ workspace: ws.root, executionBackend: localExecutionBackend() }).length, 6);
  });

  test("execute is directly callable, detached from its object", async () => {
    const ws = workspace();
    const { execute } = shellTools({ workspace: ws.root, tools: ["bash"] })[0];
    assert.equal(await execute({ command: "echo hi" }, undefined, { toolCallId: "c1" }), "exit 0\nhi\n");
  });

  test("a missing workspace is ENOENT at first use", async () => {
    const ws = workspace();
    const later = `${ws.outside}/later`;
    const tools = toolsFor({ root: later });
    await assert.rejects(tools.read_file.execute({ path: "a.txt" }), (e) => e.code === "ENOENT");
    fs.mkdirSync(later);
    fs.writeFileSync(`${later}/a.txt`, "x");
    assert.equal(await tools.read_file.execute({ path: "a.txt" }), "1\tx");
  });
});

describe("onOutput and outputCaps", () => {
  test("labels and texts for read_file, grep, bash; none for write, edit, read_tool_output", async () => {
    const ws = workspace();
    const seen = [];
    const tools = toolsFor(ws, { onOutput: (label, text) => seen.push([label, text]) });
    ws.write("a.txt", "alpha\nbeta\n");
    const results = [];
    results.push(await tools.read_file.execute({ path: "./a.txt" }));
    results.push(await tools.grep.execute({ pattern: "bet[a]" }));
    const long = `echo ${"é".repeat(70)}`;
    results.push(await tools.bash.execute({ command: long }));
    results.push(await tools.bash.execute({ command: "echo hi" }));
    const written = await tools.write_file.execute({ path: "b.txt", content: "x" });
    const edited = await tools.edit_file.execute({ path: "b.txt", old_string: "x", new_string: "y" });
    const capped = await tools.bash.execute({ command: "seq 1 20000" });
    const handle = capped.match(HANDLE_RE)[1];
    const page = await tools.read_tool_output.execute({ handle, limit: 10 });
    assert.equal(written, "wrote b.txt: 1 bytes");
    assert.equal(edited, "edited b.txt: 1 replacement");
    assert.match(page, /^bash:seq 1 20000 · bytes 0-10 of /);
    assert.deepEqual(
      seen.map(([label]) => label),
      ["read_file:./a.txt", "grep:bet[a]", `bash:${long.slice(0, 60)}`, "bash:echo hi", "bash:seq 1 20000"],
    );
    assert.deepEqual(seen.slice(0, 4).map(([, text]) => text), results, "onOutput sees the returned text");
    assert.equal(seen[4][1], capped);
  });

  test("outputCaps overrides a tool's cap and description", async () => {
    const ws = workspace();
    const tools = toolsFor(ws, { outputCaps: { write_file: 10, grep: 1234 } });
    assert.match(tools.grep.description, /capped at 1234 bytes\.$/);
    assert.match(tools.read_file.description, /capped at 24000 bytes\.$/);
    assert.equal(
      await tools.write_file.execute({ path: "a.txt", content: "hello" }),
      "wrote a.tx\n[caveman-code: output capped at 10 of 20 bytes; narrow the request]",
    );
  });
});

describe("read_file", () => {
  test("numbered lines, offset and limit", async () => {
    const ws = workspace();
    const tools = toolsFor(ws);
    ws.write("a.txt", "a\nb\n");
    ws.write("greek.txt", "alpha\nbeta\ngamma");
    assert.equal(await tools.read_file.execute({ path: "a.txt" }), "1\ta\n2\tb\n3\t");
    assert.equal(await tools.read_file.execute({ path: "greek.txt", offset: 2, limit: 1 }), "2\tbeta");
    assert.equal(await tools.read_file.execute({ path: "greek.txt", offset: 2 }), "2\tbeta\n3\tgamma");
    assert.equal(await tools.read_file.execute({ path: "greek.txt", offset: 0, limit: 0 }), "1\talpha");
    assert.equal(await tools.read_file.execute({ path: `${ws.real}/greek.txt`, limit: 1 }), "1\talpha");
  });

  test("errors: not a file, ENOENT", async () => {
    const ws = workspace();
    const tools = toolsFor(ws);
    fs.mkdirSync(ws.path("dir"));
    await assert.rejects(tools.read_file.execute({ path: "dir" }), coded("cave_not_a_file", "caveman-code: not a file: dir"));
    await assert.rejects(
      tools.read_file.execute({ path: "missing.txt" }),
      coded("ENOENT", `ENOENT: no such file or directory, stat '${ws.real}/missing.txt'`),
    );
  });

  test("capped with a handle, paged with read_tool_output (offset, limit, [next offset], query)", async () => {
    const ws = workspace();
    const tools = toolsFor(ws, { outputCaps: { read_file: 512, read_tool_output: 1024 } });
    const lines = ["HEAD_SENTINEL", ...Array.from({ length: 400 }, (_, i) => `filler line ${i}`), "TAIL_SENTINEL", ""];
    ws.write("big.txt", lines.join("\n"));
    const numbered = lines.map((l, i) => `${i + 1}\t${l}`).join("\n");
    const total = Buffer.byteLength(numbered);
    const text = await tools.read_file.execute({ path: "big.txt" });
    assert.equal(Buffer.byteLength(text), 512);
    assert.ok(text.startsWith("1\tHEAD_SENTINEL\n2\tfiller line 0\n"));
    assert.ok(text.includes(`\n[caveman-code: output capped from ${total} captured bytes; use read_tool_output with handle tool_`));
    const handle = text.match(HANDLE_RE)[1];

    const first = await tools.read_tool_output.execute({ handle, offset: 0, limit: 64 });
    assert.equal(first, `read_file:big.txt · bytes 0-64 of ${total} · complete capture\n${numbered.slice(0, 64)}\n[next offset: 64]`);
    assert.ok(first.includes("HEAD_SENTINEL"));
    const next = Number(first.match(/\[next offset: (\d+)\]/)[1]);
    const found = await tools.read_tool_output.execute({ handle, offset: next, query: "TAIL_SENTINEL" });
    const at = numbered.indexOf("TAIL_SENTINEL");
    assert.equal(found, `read_file:big.txt · bytes ${at}-${total} of ${total} · complete capture\n${numbered.slice(at)}`);
    assert.equal(
      await tools.read_tool_output.execute({ handle, offset: at + 1, query: "TAIL_SENTINEL" }),
      `no literal match in read_file:big.txt at or after byte ${at + 1}`,
    );
    // Default page: min(8000, cap - 512) = 512 bytes.
    assert.match(await tools.read_tool_output.execute({ handle }), new RegExp(`^read_file:big\\.txt · bytes 0-512 of ${total} · complete capture\\n[^]*\\n\\[next offset: 512\\]$`));
  });

  test("without read_tool_output a capped result says recovery paging is not exposed", async () => {
    const ws = workspace();
    const tools = toolsFor(ws, { tools: ["read_file"], outputCaps: { read_file: 512 } });
    ws.write("big.txt", "x".repeat(5000));
    const text = await tools.read_file.execute({ path: "big.txt" });
    assert.ok(
      text.endsWith("\n[caveman-code: output capped from 5002 captured bytes; recovery paging is not exposed; narrow original request]"),
      text,
    );
    assert.equal(Buffer.byteLength(text), 512);
  });
});

describe("read_tool_output errors", () => {
  test("unknown handle, invalid offset, limit and query", async () => {
    const ws = workspace();
    const tools = toolsFor(ws, { outputCaps: { bash: 200 } });
    await assert.rejects(
      tools.read_tool_output.execute({ handle: "tool_00000000000000000000000000000000" }),
      coded("cave_tool_output_handle_unknown", "caveman-code: tool output handle is unknown or evicted"),
    );
    const handle = (await tools.bash.execute({ command: "seq 1 500" })).match(HANDLE_RE)[1];
    for (const offset of [-1, 1.5, "3"]) {
      await assert.rejects(
        tools.read_tool_output.execute({ handle, offset }),
        coded("cave_tool_output_offset_invalid", "caveman-code: read_tool_output offset must be a non-negative integer"),
      );
    }
    for (const limit of [0, -2, 2.5]) {
      await assert.rejects(
        tools.read_tool_output.execute({ handle, limit }),
        coded("cave_tool_output_limit_invalid", "caveman-code: read_tool_output limit must be a positive integer"),
      );
    }
    await assert.rejects(
      tools.read_tool_output.execute({ handle, query: "" }),
      coded("cave_tool_output_query_empty", "caveman-code: read_tool_output query must not be empty"),
    );
    // Handles never cross shellTools() instances.
    await assert.rejects(toolsFor(ws).read_tool_output.execute({ handle }), coded("cave_tool_output_handle_unknown", /unknown or evicted/));
  });
});

describe("bash outputs", () => {
  test("status line and body", async () => {
    const ws = workspace();
    const { bash } = toolsFor(ws);
    assert.equal(await bash.execute({ command: "echo hi" }), "exit 0\nhi\n");
    assert.equal(await bash.execute({ command: "printf out; printf err >&2" }), "exit 0\nout\nerr");
    assert.equal(await bash.execute({ command: "echo out; echo err >&2; exit 3" }), "exit 3\nout\nerr\n");
    assert.equal(await bash.execute({ command: "exit 4" }), "exit 4\n(no output)");
    assert.equal(await bash.execute({ command: "kill -9 $$" }), "exit null\n(no output)");
    assert.equal(await bash.execute({ command: "pwd -P" }), `exit 0\n${ws.real}\n`);
    assert.equal(await bash.execute({ command: "cat; echo stdin-closed" }), "exit 0\nstdin-closed\n");
  });

  test("127 is host command shell is not available; yieldTimeMs is refused", async () => {
    const ws = workspace();
    const { bash } = toolsFor(ws);
    for (const command of ["exit 127", "definitely_not_a_command_knap_test"]) {
      await assert.rejects(bash.execute({ command }), coded("cave_shell_unavailable", "caveman-code: host command shell is not available"));
    }
    await assert.rejects(bash.execute({ command: "echo", yieldTimeMs: 5 }), coded("cave_execution_backend_command_sessions_disabled"));
  });

  test("seed: cat of a 4,000-line file ends with the last lines and the capped marker", async () => {
    const ws = workspace();
    const { bash, read_tool_output } = toolsFor(ws);
    const content = fourThousandLines();
    assert.equal(Buffer.byteLength(content), 38889);
    ws.write("notes.txt", content);
    const text = await bash.execute({ command: "cat notes.txt" });
    assert.match(
      text,
      /\nline 3998\nline 3999\n\[caveman-code: output capped from 38889 captured bytes; use read_tool_output with handle tool_[a-f0-9]{32}\]$/,
    );
    assert.ok(text.startsWith("exit 0\n"));
    assert.equal(Buffer.byteLength(text), 24000);
    const handle = text.match(HANDLE_RE)[1];
    const page = await read_tool_output.execute({ handle, offset: 38889 - 19, limit: 100 });
    assert.equal(page, "bash:cat notes.txt · bytes 38870-38889 of 38889 · complete capture\nline 3998\nline 3999");

    const bashOnly = toolsFor(ws, { tools: ["bash"] });
    assert.match(
      await bashOnly.bash.execute({ command: "cat notes.txt" }),
      /\nline 3998\nline 3999\n\[caveman-code: output capped from 38889 captured bytes; recovery paging is not exposed; narrow original request\]$/,
    );
  });
});

describe("write_file and edit_file", () => {
  test("write_file: wrote text, EEXIST, overwrite, ENOENT parent", async () => {
    const ws = workspace();
    const { write_file } = toolsFor(ws);
    assert.equal(await write_file.execute({ path: "a.txt", content: "hello" }), "wrote a.txt: 5 bytes");
    assert.equal(await write_file.execute({ path: "u.txt", content: "héllo€" }), "wrote u.txt: 9 bytes");
    await assert.rejects(
      write_file.execute({ path: "a.txt", content: "again" }),
      coded("EEXIST", `EEXIST: file already exists, open '${ws.real}/a.txt'`),
    );
    assert.equal(ws.read("a.txt"), "hello");
    assert.equal(await write_file.execute({ path: "a.txt", content: "again", overwrite: true }), "wrote a.txt: 5 bytes");
    assert.equal(ws.read("a.txt"), "again");
    await assert.rejects(
      write_file.execute({ path: "no/such/dir.txt", content: "x" }),
      coded("ENOENT", `ENOENT: no such file or directory, open '${ws.real}/no/such/dir.txt'`),
    );
  });

  test("edit_file: one replacement, appears N times, replace_all, not found, identical, literal $&", async () => {
    const ws = workspace();
    const { edit_file } = toolsFor(ws);
    ws.write("a.txt", "one two three");
    assert.equal(await edit_file.execute({ path: "a.txt", old_string: "two", new_string: "2" }), "edited a.txt: 1 replacement");
    assert.equal(ws.read("a.txt"), "one 2 three");
    ws.write("b.txt", "ab ab");
    await assert.rejects(
      edit_file.execute({ path: "b.txt", old_string: "ab", new_string: "x" }),
      coded("cave_edit_ambiguous", "caveman-code: old_string appears 2 times in b.txt; add surrounding context or pass replace_all"),
    );
    assert.equal(ws.read("b.txt"), "ab ab");
    assert.equal(await edit_file.execute({ path: "b.txt", old_string: "ab", new_string: "x", replace_all: true }), "edited b.txt: 2 replacements");
    assert.equal(ws.read("b.txt"), "x x");
    await assert.rejects(
      edit_file.execute({ path: "b.txt", old_string: "zzz", new_string: "y" }),
      coded("cave_edit_not_found", "caveman-code: old_string not found in b.txt"),
    );
    await assert.rejects(
      edit_file.execute({ path: "b.txt", old_string: "x", new_string: "x" }),
      coded("cave_edit_identical", "caveman-code: old_string and new_string are identical"),
    );
    await assert.rejects(
      edit_file.execute({ path: "b.txt", old_string: "", new_string: "y" }),
      coded("cave_edit_empty_old_string", "caveman-code: old_string must not be empty"),
    );
    await assert.rejects(
      edit_file.execute({ path: "none.txt", old_string: "a", new_string: "b" }),
      coded("ENOENT", `ENOENT: no such file or directory, open '${ws.real}/none.txt'`),
    );
    ws.write("c.txt", "price: COST");
    await edit_file.execute({ path: "c.txt", old_string: "COST", new_string: "$& $1 $$ $`" });
    assert.equal(ws.read("c.txt"), "price: $& $1 $$ $`");
  });
});

describe("workspace boundary", () => {
  test("`..`, absolute and symlink escapes are refused for read and write", async () => {
    const ws = workspace();
    const tools = toolsFor(ws);
    fs.writeFileSync(`${ws.outside}/secret.txt`, "secret");
    fs.mkdirSync(ws.path("nested"));
    fs.symlinkSync(ws.outside, ws.path("nested/escape"));
    fs.symlinkSync(`${ws.outside}/secret.txt`, ws.path("secret-link"));
    for (const p of ["../secret.txt", "nested/escape/secret.txt", "nested/../../secret.txt", `${ws.outside}/secret.txt`, "secret-link"]) {
      const escape = coded("cave_workspace_escape", `caveman-code: path escapes the workspace: ${p}`);
      await assert.rejects(tools.read_file.execute({ path: p }), escape);
      await assert.rejects(tools.write_file.execute({ path: p, content: "pwned", overwrite: true }), escape);
      await assert.rejects(tools.edit_file.execute({ path: p, old_string: "secret", new_string: "pwned" }), escape);
    }
    await assert.rejects(
      tools.write_file.execute({ path: "nested/escape/new.txt", content: "x" }),
      coded("cave_workspace_escape", "caveman-code: path escapes the workspace: nested/escape/new.txt"),
    );
    assert.equal(fs.readFileSync(`${ws.outside}/secret.txt`, "utf8"), "secret");
    assert.equal(fs.existsSync(`${ws.outside}/new.txt`), false);
    // An inward symlink is fine.
    ws.write("real.txt", "inside");
    fs.symlinkSync(ws.path("real.txt"), ws.path("inner-link"));
    assert.equal(await tools.read_file.execute({ path: "inner-link" }), "1\tinside");
  });
});

describe("input validation", () => {
  test("wrong argument types are coded errors", async () => {
    const ws = workspace();
    const tools = toolsFor(ws);
    await assert.rejects(tools.read_file.execute({}), (e) => e.code === "cave_tool_input_schema_mismatch:read_file");
    await assert.rejects(tools.bash.execute({ command: 5 }), (e) => e.code === "cave_tool_input_schema_mismatch:bash");
    await assert.rejects(tools.read_file.execute("a.txt"), coded("cave_tool_arguments_invalid"));
  });
});
