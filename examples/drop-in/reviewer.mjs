// Written for @caveman-ai/agent 0.2.0, unchanged: only package.json decides that the package
// behind the name is knap. No API key and no network: a scripted model from /testing drives real
// shell tools on a throwaway workspace, and a host policy keeps the review read-only.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { agent, auto, run, schema, shellTools, stream, tool, CavemanRunError } from "@caveman-ai/agent";
import { fauxModel, scriptedStream } from "@caveman-ai/agent/testing";

const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "drop-in-"));
fs.writeFileSync(path.join(workspace, "notes.txt"), "alpha\nbeta\ngamma\n");

const wordCount = tool({
  name: "word_count",
  description: "Counts the words of a text.",
  input: schema.object({ text: schema.string() }),
  effect: "read",
  execute: ({ text }) => ({ words: text.trim().split(/\s+/).length }),
});

const reviewer = agent({
  id: "reviewer",
  instructions: "Read the workspace and explain what changed.",
  model: auto(),
  sandbox: "host",
  tools: [...shellTools({ workspace, tools: ["bash", "read_file", "grep", "write_file", "read_tool_output"] }), wordCount],
});

const script = () =>
  scriptedStream([
    { toolCalls: [{ name: "bash", args: { command: "wc -l notes.txt" } }] },
    { toolCalls: [{ name: "grep", args: { pattern: "beta" } }, { name: "word_count", args: { text: "alpha beta gamma" } }] },
    { toolCalls: [{ name: "write_file", args: { path: "out.txt", content: "tampered" } }] },
    { text: "notes.txt has 3 lines and mentions beta once." },
  ]);

const policyLog = [];
const options = () => ({
  ensureRuntime: false,
  model: fauxModel(),
  streamFn: script(),
  toolPolicy: ({ name, effect, agentPath }) => {
    policyLog.push(JSON.stringify({ name, effect, agentPath }));
    return effect === "write" ? { deny: "read_only_review" } : undefined;
  },
});

const result = await run(reviewer, "count the lines in notes.txt", options());
for (const line of policyLog) console.log(`policy: ${line}`);
console.log(`text: ${result.text}`);
console.log(`stopReason: ${result.stopReason}`);
console.log(`receipt.tools: ${JSON.stringify(result.receipt.tools)}`);
console.log(`out.txt written: ${fs.existsSync(path.join(workspace, "out.txt"))}`);

const started = [];
const failed = [];
for await (const event of stream(reviewer, "count the lines in notes.txt", options())) {
  if (event.type !== "pi") continue;
  if (event.event.type === "tool_execution_start") started.push(event.event.toolName);
  if (event.event.type === "tool_execution_end" && event.event.isError) {
    failed.push(`${event.event.toolName} -> ${event.event.result.content[0].text}`);
  }
}
console.log(`stream tool starts: ${started.join(", ")}`);
console.log(`stream tool errors: ${failed.join(", ")}`);

try {
  await run(reviewer, "go", { ensureRuntime: false, model: fauxModel(), streamFn: scriptedStream([]) });
} catch (error) {
  console.log(`error: ${error instanceof CavemanRunError} ${error.code}`);
}
fs.rmSync(workspace, { recursive: true, force: true });
