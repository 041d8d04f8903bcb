// Input hygiene (issue 13): numeric arguments checked with codes across shellTools and the AI
// SDK tools (reference behaviour kept where the reference defines it), file names that are not
// UTF-8 shown faithfully and addressable, an AbortSignal reaching the sandbox's file calls, a
// device node never read.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";

import { createAgentTools, createLocalSandbox } from "knap/ai-sdk";
import { tempWorkspace, toolsFor } from "./helpers.mjs";

const workspaces = [];
const sandboxes = [];
after(async () => {
  for (const sb of sandboxes) await sb.destroy();
  workspaces.forEach((ws) => ws.cleanup());
});

function setup() {
  const ws = tempWorkspace();
  workspaces.push(ws);
  ws.write("f.txt", "a\nb\nc\nd\n");
  return ws;
}

async function aiTools(ws) {
  const sb = createLocalSandbox({ cwd: ws.root });
  sandboxes.push(sb);
  return { sb, tools: (await createAgentTools(sb)).tools };
}

const mismatch = (tool, pattern) => (e) => {
  assert.equal(e.code, `cave_tool_input_schema_mismatch:${tool}`, e.message);
  assert.match(e.message, pattern);
  return true;
};

test("shellTools numbers: non-finite and non-integers refused with a code; the reference's clamps kept", async () => {
  const ws = setup();
  const t = toolsFor(ws);
  for (const v of [NaN, Infinity, -Infinity]) {
    await assert.rejects(t.read_file.execute({ path: "f.txt", offset: v }), mismatch("read_file", /offset must be an integer$/));
    await assert.rejects(t.read_file.execute({ path: "f.txt", limit: v }), mismatch("read_file", /limit must be an integer$/));
    await assert.rejects(t.bash.execute({ command: "echo hi", timeoutMs: v }), mismatch("bash", /timeoutMs must be an integer$/));
    await assert.rejects(t.write_file.execute({ path: "n.txt", content: v }), mismatch("write_file", /content must be a string$/));
  }
  assert.equal(fs.existsSync(ws.path("n.txt")), false);
  await assert.rejects(t.read_file.execute({ path: "f.txt", offset: 2.5 }), mismatch("read_file", /offset must be an integer$/));
  await assert.rejects(t.read_file.execute({ path: "f.txt", limit: "2" }), mismatch("read_file", /limit must be an integer$/));
  // The reference: offset = max(1, offset ?? 1), limit = max(1, limit).
  assert.equal(await t.read_file.execute({ path: "f.txt", offset: -5, limit: 0 }), "1\ta");
  assert.equal(await t.read_file.execute({ path: "f.txt", offset: 0, limit: -1 }), "1\ta");
  assert.equal(await t.read_file.execute({ path: "f.txt", offset: 2, limit: 1, ignored: undefined }), "2\tb");
  // bash: min(timeoutMs, 120000); below 1 ms is refused (it could only kill the command at once).
  for (const v of [0, -1]) {
    await assert.rejects(t.bash.execute({ command: "echo hi", timeoutMs: v }), mismatch("bash", new RegExp(`timeoutMs must be an integer of at least 1 \\(got ${v}\\)`)));
  }
  await assert.rejects(t.bash.execute({ command: "echo hi", timeoutMs: 1.5 }), mismatch("bash", /timeoutMs must be an integer$/));
  assert.equal(await t.bash.execute({ command: "echo hi", timeoutMs: 10 ** 12 }), "exit 0\nhi\n");
  // read_tool_output keeps the reference's own codes for its fields, NaN included.
  const capped = toolsFor(ws, { outputCaps: { bash: 200 } });
  const long = await capped.bash.execute({ command: "seq 1 2000" });
  const handle = /handle (tool_[0-9a-f]{32})/.exec(long)[1];
  await assert.rejects(capped.read_tool_output.execute({ handle, offset: NaN }), (e) => e.code === "cave_tool_output_offset_invalid");
  await assert.rejects(capped.read_tool_output.execute({ handle, limit: Infinity }), (e) => e.code === "cave_tool_output_limit_invalid");
  assert.match(await capped.read_tool_output.execute({ handle, offset: 0, limit: 5 }), /bytes 0-5 of/);
  // A cycle or a BigInt cannot be a tool input.
  const cyclic = { path: "f.txt", extra: {} };
  cyclic.extra.self = cyclic.extra;
  await assert.rejects(t.read_file.execute(cyclic), (e) => e.code === "cave_tool_arguments_invalid");
  await assert.rejects(t.read_file.execute({ path: "f.txt", offset: 1n }), (e) => e.code === "cave_tool_arguments_invalid");
  await assert.rejects(t.read_file.execute("f.txt"), (e) => e.code === "cave_tool_arguments_invalid");
});

test("AI SDK numbers: NaN, Infinity, negatives and fractions are {error}s; 0 keeps bashkit's 'not given'", async () => {
  const ws = setup();
  const { sb, tools } = await aiTools(ws);
  const err = async (p, pattern) => {
    const r = await p;
    assert.equal(typeof r.error, "string", JSON.stringify(r));
    assert.match(r.error, pattern);
  };
  for (const [key, v, shown] of [["offset", NaN, "NaN"], ["offset", -1, "-1"], ["limit", Infinity, "Infinity"], ["limit", 2.5, "2.5"]]) {
    await err(tools.Read.execute({ file_path: "f.txt", [key]: v }, {}), new RegExp(`^Invalid "${key}": expected a non-negative integer, received ${shown}$`));
  }
  for (const key of ["-A", "-B", "-C", "head_limit", "offset"]) {
    await err(tools.Grep.execute({ pattern: "a", output_mode: "content", [key]: -1 }, {}), new RegExp(`^Invalid "${key}": expected a non-negative integer, received -1$`));
  }
  for (const [v, shown] of [[0, "0"], [-1, "-1"], [NaN, "NaN"]]) {
    await err(tools.Bash.execute({ command: "echo hi", timeout: v }, {}), new RegExp(`^Invalid "timeout": expected a positive number of milliseconds, received ${shown}$`));
  }
  // A wrong type is worded by the schema check, as the AI SDK would have refused it.
  await err(tools.Read.execute({ file_path: "f.txt", offset: "2" }, {}), /^Invalid "offset": expected number or null, received string$/);
  // 0 is bashkit's falsy "not given".
  const all = await tools.Read.execute({ file_path: "f.txt", offset: 0, limit: 0 }, {});
  assert.equal(all.content, "a\nb\nc\nd\n");
  assert.equal((await tools.Read.execute({ file_path: "f.txt", offset: 2, limit: 1 }, {})).content, "b");
  assert.equal((await tools.Bash.execute({ command: "echo hi", timeout: 1500.5 }, {})).stdout, "hi\n");
  for (const [opts, pattern] of [
    [{ timeout: NaN }, /exec timeout must be a positive number of milliseconds, received NaN$/],
    [{ timeout: -1 }, /exec timeout must be a positive number of milliseconds, received -1$/],
    [{ timeout: 0 }, /received 0$/],
    [{ maxOutputLength: -5 }, /exec maxOutputLength must be a non-negative number of characters, received -5$/],
  ]) {
    await assert.rejects(sb.exec("echo hi", opts), (e) => {
      assert.equal(e.code, "cave_sandbox_exec_option_invalid", e.message);
      assert.match(e.message, pattern);
      return true;
    });
  }
});

test("file names that are not UTF-8 are listed faithfully and can be read, written and edited by that name", async () => {
  const ws = setup();
  const { sb, tools } = await aiTools(ws);
  const t = toolsFor(ws);
  // Latin-1 "café.txt" (0xE9 alone is not UTF-8).
  const raw = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x2e, 0x74, 0x78, 0x74]);
  fs.writeFileSync(Buffer.concat([Buffer.from(ws.root + "/"), raw]), "latin one\n");
  const shown = "caf\u{EFE9}.txt";
  assert.ok((await sb.readDir(".")).includes(shown));
  const listing = await tools.Read.execute({ file_path: "." }, {});
  assert.ok(listing.entries.includes(shown), JSON.stringify(listing));
  assert.equal(await sb.readFile(shown), "latin one\n");
  assert.equal(await t.read_file.execute({ path: shown }), "1\tlatin one\n2\t");
  assert.equal((await tools.Read.execute({ file_path: shown }, {})).content, "latin one\n");
  assert.equal(await t.edit_file.execute({ path: shown, old_string: "one", new_string: "two" }), `edited ${shown}: 1 replacement`);
  assert.equal(fs.readFileSync(Buffer.concat([Buffer.from(ws.root + "/"), raw]), "utf8"), "latin two\n");
  // Writing by the shown name creates the file with the raw byte.
  await t.write_file.execute({ path: "new\u{EFFF}.txt", content: "x" });
  await sb.writeFile("w\u{EF80}.txt", "y");
  const names = fs.readdirSync(ws.root, { encoding: "buffer" }).map((b) => b.toString("hex"));
  assert.ok(names.includes(Buffer.from([...Buffer.from("new"), 0xff, ...Buffer.from(".txt")]).toString("hex")), names.join(" "));
  assert.ok(names.includes(Buffer.from([0x77, 0x80, ...Buffer.from(".txt")]).toString("hex")), names.join(" "));
  // The lossy form names nothing.
  await assert.rejects(sb.readFile("caf\uFFFD.txt"), (e) => e.code === "ENOENT");
});

test("names that are not UTF-8 printed by grep, Grep and Glob reach the file when given back to read_file and Read", async () => {
  const ws = setup();
  const { tools } = await aiTools(ws);
  const t = toolsFor(ws);
  // Latin-1 directory "dé" holding Latin-1 "café.txt".
  const dir = Buffer.concat([Buffer.from(ws.root + "/d"), Buffer.from([0xe9])]);
  fs.mkdirSync(dir);
  fs.writeFileSync(Buffer.concat([dir, Buffer.from("/caf"), Buffer.from([0xe9]), Buffer.from(".txt")]), "needle here\n");
  const shown = "d\u{EFE9}/caf\u{EFE9}.txt";
  // shellTools grep: the whole tree, and the directory given by its shown name.
  assert.equal(await t.grep.execute({ pattern: "needle" }), `./${shown}:1:needle here\n`);
  assert.equal(await t.grep.execute({ pattern: "needle", path: "d\u{EFE9}" }), `${shown}:1:needle here\n`);
  const fromGrep = (await t.grep.execute({ pattern: "needle" })).split(":")[0];
  assert.equal(await t.read_file.execute({ path: fromGrep }), "1\tneedle here\n2\t");
  // AI SDK Grep (files, content, count) and Glob.
  const files = await tools.Grep.execute({ pattern: "needle" }, {});
  assert.deepEqual(files.files, [`./${shown}`], JSON.stringify(files));
  const content = await tools.Grep.execute({ pattern: "needle", output_mode: "content" }, {});
  assert.equal(content.matches[0].file, `./${shown}`);
  const counts = await tools.Grep.execute({ pattern: "needle", output_mode: "count" }, {});
  assert.equal(counts.counts[0].file, `./${shown}`, JSON.stringify(counts));
  const glob = await tools.Glob.execute({ pattern: "**/*.txt" }, {});
  assert.ok(glob.matches.includes(`./${shown}`), JSON.stringify(glob));
  assert.deepEqual((await tools.Glob.execute({ pattern: "caf\u{EFE9}.*" }, {})).matches, [`./${shown}`]);
  for (const name of [files.files[0], content.matches[0].file, glob.matches.find((m) => m.endsWith(".txt") && m.includes("d\u{EFE9}"))]) {
    assert.equal((await tools.Read.execute({ file_path: name }, {})).content, "needle here\n", name);
    assert.equal(await t.read_file.execute({ path: name }), "1\tneedle here\n2\t", name);
  }
  // Nothing shows U+FFFD.
  assert.ok(!JSON.stringify([files, content, counts, glob]).includes("\uFFFD"));
});

test("AI SDK sandbox: an AbortSignal reaches readFile/writeFile and the Read/Write/Edit tools", async () => {
  const ws = setup();
  const { sb, tools } = await aiTools(ws);
  const aborted = AbortSignal.abort();
  await assert.rejects(sb.readFile("f.txt", { signal: aborted }), (e) => e.name === "AbortError" && e.code === "ABORT_ERR");
  await assert.rejects(sb.writeFile("f.txt", "new", { signal: aborted }), (e) => e.name === "AbortError");
  assert.equal(ws.read("f.txt"), "a\nb\nc\nd\n");
  // A signal that never fires changes nothing.
  const live = new AbortController().signal;
  assert.equal(await sb.readFile("f.txt", { signal: live }), "a\nb\nc\nd\n");
  await sb.writeFile("g.txt", "g", { signal: live });
  assert.equal(ws.read("g.txt"), "g");
  // An abort while a large write is under way leaves the old content (or the new one, if the
  // write finished first): never a partial file.
  const big = "z".repeat(64 * 1024 * 1024);
  const controller = new AbortController();
  const pending = sb.writeFile("g.txt", big, { signal: controller.signal });
  controller.abort();
  const outcome = await pending.then(() => "written", (e) => (assert.equal(e.name, "AbortError"), "aborted"));
  const size = fs.statSync(ws.path("g.txt")).size;
  assert.equal(size, outcome === "written" ? big.length : 1, `${outcome}: ${size}`);
  assert.deepEqual(fs.readdirSync(ws.root).filter((n) => n.startsWith(".g.txt")), [], "no temporary left");
  const options = { abortSignal: aborted };
  assert.deepEqual(await tools.Read.execute({ file_path: "f.txt" }, options), { error: "Read was aborted" });
  assert.deepEqual(await tools.Write.execute({ file_path: "f.txt", content: "w" }, options), { error: "Write was aborted" });
  assert.deepEqual(await tools.Edit.execute({ file_path: "f.txt", old_string: "a", new_string: "q" }, options), { error: "Edit was aborted" });
  assert.equal(ws.read("f.txt"), "a\nb\nc\nd\n");
});

test("a device node (/dev/zero's numbers) in the workspace is refused at once by every reader", async (t) => {
  const ws = setup();
  try {
    execFileSync("mknod", [join(ws.root, "zero"), "c", "1", "5"], { stdio: "ignore" });
  } catch {
    t.skip("mknod needs CAP_MKNOD (root)");
    return;
  }
  const { sb, tools } = await aiTools(ws);
  const st = toolsFor(ws);
  await assert.rejects(sb.readFile("zero"), (e) => e.code === "EINVAL" && /not a regular file/.test(e.message));
  assert.match((await tools.Read.execute({ file_path: "zero" }, {})).error, /not a regular file|EINVAL/);
  assert.match((await tools.Edit.execute({ file_path: "zero", old_string: "a", new_string: "b" }, {})).error, /not a regular file|EINVAL/);
  await assert.rejects(st.read_file.execute({ path: "zero" }), (e) => /not a file/.test(e.message));
  await assert.rejects(st.edit_file.execute({ path: "zero", old_string: "a", new_string: "b" }), (e) => /not a file/.test(e.message));
  // Still a device afterwards: nothing wrote over it.
  assert.ok(fs.statSync(ws.path("zero")).isCharacterDevice());
});
