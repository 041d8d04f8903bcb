// One path validator for every tool (issue 13): a NUL byte, more than 4096 bytes or more than
// 1024 components gives cave_path_invalid with the same first line from shellTools and the AI
// SDK sandbox; a FIFO is refused, never waited on.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { after, test } from "node:test";

import { createLocalSandbox } from "knap/ai-sdk";
import { tempWorkspace, toolsFor } from "./helpers.mjs";

const workspaces = [];
after(() => workspaces.forEach((ws) => ws.cleanup()));

const cases = [
  ["a\0b", /^caveman-code: path contains a NUL byte\nhint: /],
  ["x".repeat(4097), /^caveman-code: path is too long: 4097 bytes \(at most 4096\)\nhint: /],
  [Array(1025).fill("d").join("/"), /^caveman-code: path has too many components: 1025 \(at most 1024\)\nhint: /],
];

test("shellTools: read_file, write_file, edit_file and grep refuse bad paths with cave_path_invalid", async () => {
  const ws = tempWorkspace();
  workspaces.push(ws);
  const tools = toolsFor(ws);
  for (const [path, message] of cases) {
    const calls = [
      ["read_file", { path }],
      ["write_file", { path, content: "x" }],
      ["edit_file", { path, old_string: "a", new_string: "b" }],
      ["grep", { pattern: "x", path }],
    ];
    for (const [name, input] of calls) {
      await assert.rejects(tools[name].execute(input), (e) => {
        assert.equal(e.code, "cave_path_invalid", `${name}: ${e.message}`);
        assert.match(e.message, message, name);
        return true;
      });
    }
  }
});

test("AI SDK sandbox: readFile and writeFile refuse bad paths with the same code; a FIFO is refused", async () => {
  const ws = tempWorkspace();
  workspaces.push(ws);
  const sb = await createLocalSandbox({ cwd: ws.root });
  for (const [path, message] of cases) {
    for (const call of [() => sb.readFile(path), () => sb.writeFile(path, "x")]) {
      await assert.rejects(call(), (e) => {
        assert.equal(e.code, "cave_path_invalid", e.message);
        assert.match(e.message, message);
        return true;
      });
    }
  }
  execFileSync("mkfifo", [join(ws.root, "pipe")]);
  // Nobody writes to the FIFO: a read that opened it blocking would never return.
  await assert.rejects(sb.readFile("pipe"), (e) => {
    assert.equal(e.code, "EINVAL");
    assert.match(e.message, /^EINVAL: not a regular file, open '.*\/pipe'$/);
    return true;
  });
});
