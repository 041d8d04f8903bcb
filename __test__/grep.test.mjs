// grep: rg-style output, ignore rules, glob, the 200-match limit, regex errors as text, and the
// JS thread staying free while a large tree is scanned.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, test } from "node:test";

import { tempWorkspace, toolsFor } from "./helpers.mjs";

const workspaces = [];
function workspace() {
  const ws = tempWorkspace("knap-grep-");
  workspaces.push(ws);
  return ws;
}
after(() => workspaces.forEach((ws) => ws.cleanup()));

test("path:line:text lines, scope, single file, no matches", async () => {
  const ws = workspace();
  const { grep } = toolsFor(ws);
  ws.write("a.txt", "needle one\nhay\nneedle two\n");
  ws.write("src/b.rs", "fn needle() {}\n");
  assert.equal(await grep.execute({ pattern: "needle" }), "./a.txt:1:needle one\n./a.txt:3:needle two\n./src/b.rs:1:fn needle() {}\n");
  assert.equal(await grep.execute({ pattern: "needle", path: "src" }), "src/b.rs:1:fn needle() {}\n");
  assert.equal(await grep.execute({ pattern: "two", path: "a.txt" }), "3:needle two\n");
  assert.equal(await grep.execute({ pattern: "absent_[0-9]+" }), "no matches");
  await assert.rejects(grep.execute({ pattern: "x", path: "../" }), (e) => e.code === "cave_workspace_escape");
});

test(".gitignore inside a git repo, .ignore, hidden files and glob", async () => {
  const ws = workspace();
  const { grep } = toolsFor(ws);
  ws.write("keep.txt", "needle\n");
  ws.write("build/out.txt", "needle\n");
  ws.write("notes.txt", "needle\n");
  ws.write(".hidden.txt", "needle\n");
  ws.write(".config/x.txt", "needle\n");
  ws.write("lib.rs", "needle\n");
  ws.write(".gitignore", "build/\n");
  ws.write(".ignore", "notes.txt\n");
  // Outside a git repository, rg does not apply .gitignore; .ignore always applies.
  assert.equal(await grep.execute({ pattern: "needle" }), "./build/out.txt:1:needle\n./keep.txt:1:needle\n./lib.rs:1:needle\n");
  fs.mkdirSync(ws.path(".git"));
  assert.equal(await grep.execute({ pattern: "needle" }), "./keep.txt:1:needle\n./lib.rs:1:needle\n");
  assert.equal(await grep.execute({ pattern: "needle", glob: "*.rs" }), "./lib.rs:1:needle\n");
  assert.equal(await grep.execute({ pattern: "needle", glob: "!*.rs" }), "./keep.txt:1:needle\n");
});

test("at most 200 matches, with the limit marker", async () => {
  const ws = workspace();
  const { grep } = toolsFor(ws);
  const many = Array.from({ length: 150 }, (_, i) => `match ${i}\n`).join("");
  ws.write("a.txt", many);
  ws.write("b.txt", many);
  const text = await grep.execute({ pattern: "match" });
  const lines = text.split("\n");
  assert.equal(lines.length, 201);
  assert.equal(lines[200], "[caveman-code: matches limited to first 200; narrow pattern or path]");
  assert.equal(lines[0], "./a.txt:1:match 0");
  assert.equal(lines[199], "./b.txt:50:match 49");
});

test("a regex error comes back as text, not as a thrown error", async () => {
  const ws = workspace();
  const { grep } = toolsFor(ws);
  ws.write("a.txt", "x\n");
  const text = await grep.execute({ pattern: "(unclosed" });
  assert.match(text, /regex parse error/);
  assert.match(text, /unclosed group/);
});

test("over the cap: head preview with a handle", async () => {
  const ws = workspace();
  const { grep, read_tool_output } = toolsFor(ws, { outputCaps: { grep: 300 } });
  ws.write("a.txt", Array.from({ length: 100 }, (_, i) => `long matching line number ${i}\n`).join(""));
  const text = await grep.execute({ pattern: "matching" });
  assert.equal(Buffer.byteLength(text), 300);
  assert.ok(text.startsWith("./a.txt:1:long matching line number 0\n"));
  const handle = text.match(/handle (tool_[a-f0-9]{32})\]$/)[1];
  assert.match(await read_tool_output.execute({ handle, limit: 10 }), /^grep:matching · bytes 0-10 of \d+ · complete capture\n\.\/a\.txt:1:\n\[next offset: 10\]$/);
});

test("the event loop keeps ticking while grep scans a 5,000-file tree", async () => {
  const ws = workspace();
  const { grep } = toolsFor(ws);
  const body = Array.from({ length: 60 }, (_, i) => `const value_${i} = compute(${i}, "some text to scan");`).join("\n");
  for (let d = 0; d < 50; d++) {
    const dir = ws.path(`dir${d}`);
    fs.mkdirSync(dir);
    for (let f = 0; f < 100; f++) fs.writeFileSync(path.join(dir, `file${f}.js`), body);
  }
  ws.write("dir7/file42.js", `${body}\nNEEDLE_IN_THE_TREE\n`);
  let ticks = 0;
  let during = 0;
  const timer = setInterval(() => ticks++, 1);
  try {
    for (let i = 0; i < 3; i++) {
      const before = ticks;
      const text = await grep.execute({ pattern: "NEEDLE_[A-Z_]+TREE|absent\\d{3}zz" });
      during += ticks - before;
      assert.equal(text, "./dir7/file42.js:61:NEEDLE_IN_THE_TREE\n");
    }
  } finally {
    clearInterval(timer);
  }
  // Timers cannot fire while the JS thread is blocked, so a synchronous scan would count 0 here.
  assert.ok(during > 5, `only ${during} ticks during three scans`);
});
