#!/usr/bin/env node
// knap's main job before a model is involved: the six workspace tools on a demo workspace,
// bounded output with a pageable handle, and a host policy denying a write.
// Offline, no API key. Run: npm run demo
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { shellTools, decideToolCall } from "../lib/index.mjs";

const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "knap-demo-"));
fs.writeFileSync(path.join(workspace, "notes.txt"), Array.from({ length: 4000 }, (_, i) => `line ${i}`).join("\n"));
fs.writeFileSync(path.join(workspace, "README.md"), "# demo\nknap runs tools in Rust.\n");

const labels = [];
const tools = Object.fromEntries(
  shellTools({ workspace, onOutput: (label) => labels.push(label) }).map((tool) => [tool.name, tool]),
);

console.log("$ bash: wc -l notes.txt");
console.log(await tools.bash.execute({ command: "wc -l notes.txt" }));

console.log("\n$ bash: cat notes.txt   (capped at 24,000 bytes; the tail is kept)");
const capped = await tools.bash.execute({ command: "cat notes.txt" });
console.log("…" + capped.slice(-120));

const handle = /handle (tool_[a-f0-9]{32})/.exec(capped)?.[1];
console.log(`\n$ read_tool_output: ${handle} offset 0 limit 40`);
console.log(await tools.read_tool_output.execute({ handle, offset: 0, limit: 40 }));

console.log("\n$ grep: knap");
console.log(await tools.grep.execute({ pattern: "knap" }));

console.log("\n$ read_file: ../etc/passwd");
try {
  await tools.read_file.execute({ path: "../etc/passwd" });
} catch (error) {
  console.log(`refused (${error.code}): ${error.message}`);
}

const policy = ({ effect }) => (effect === "write" ? { deny: "read_only_review" } : undefined);
const input = { runId: "r1", agentId: "reviewer", agentPath: [], toolCallId: "c1", name: "write_file", effect: "write", args: { path: "out.txt" } };
console.log("\n$ decideToolCall(policy, write_file)");
console.log(await decideToolCall(policy, input));
console.log("\nonOutput labels:", labels);
fs.rmSync(workspace, { recursive: true, force: true });
