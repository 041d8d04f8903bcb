// The README's first command ends in `npm run demo` (examples/agent.mjs) and names
// `npm run demo:tools` (examples/demo.mjs): both run here as a user runs them, offline (no provider
// key in the environment, so the scripted model), and their output is checked line by line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function runExample(file) {
  const env = { ...process.env };
  for (const key of ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "KNAP_DEBUG"]) delete env[key];
  const r = spawnSync(process.execPath, [path.join(root, "examples", file)], { cwd: root, env, encoding: "utf8", timeout: 60_000 });
  assert.equal(r.status, 0, `${file} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

test("npm run demo: the scripted review runs its five tools under the read-only policy and prints the receipt", () => {
  const out = runExample("agent.mjs");
  const lines = out.split("\n");
  assert.equal(lines[0], "model: anthropic/claude-haiku-4-5 (scripted, offline)");
  assert.match(out, /^answer: notes\.txt has 4,000 numbered lines/m);
  assert.match(out, /^stopReason: complete {3}toolCalls: bash, grep, read_file, bash, write_file$/m);
  const decisions = lines.filter((l) => l.startsWith("policy: ")).map((l) => JSON.parse(l.slice("policy: ".length)));
  assert.deepEqual(
    decisions.map((d) => [d.name, d.effect]),
    [["bash", "external"], ["grep", "read"], ["read_file", "read"], ["bash", "external"], ["write_file", "write"]],
  );
  const tools = JSON.parse(out.slice(out.indexOf("receipt.tools: ") + "receipt.tools: ".length, out.indexOf("\nreceipt: ")));
  assert.deepEqual(tools.find((t) => t.name === "write_file"), { name: "write_file", calls: 1, errors: 1, denied: 1 }, "the write was denied by the policy");
  assert.deepEqual(tools.find((t) => t.name === "bash"), { name: "bash", calls: 2, errors: 0 });
  assert.match(out, /^receipt: 5 model calls, \d+ tokens, \$[0-9.]+ \(public_catalog\), mode observe-only$/m);
});

test("npm run demo:tools: the tools on their own — paging, grep, the workspace boundary, the policy, output labels", () => {
  const out = runExample("demo.mjs");
  assert.match(out, /\[next offset: \d+\]/);
  assert.match(out, /^\.\/README\.md:2:knap runs tools in Rust\.$/m);
  assert.match(out, /^refused \(cave_workspace_escape\): caveman-code: path escapes the workspace: \.\.\/etc\/passwd$/m);
  assert.match(out, /block: true, reason: 'cave_tool_denied:read_only_review'/);
  assert.match(out, /^onOutput labels: \[ 'bash:wc -l notes\.txt', 'bash:cat notes\.txt', 'grep:knap' \]$/m);
});
