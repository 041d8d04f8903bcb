#!/usr/bin/env node
// knap's main job: an agent reviews a demo workspace with the six shell tools, a host policy
// keeps it read-only, and the run's receipt is printed.
//
// With no API key it runs offline on a scripted model (knap/testing). With ANTHROPIC_API_KEY,
// OPENAI_API_KEY or GEMINI_API_KEY set (and @mariozechner/pi-ai installed) the same agent runs
// on a real provider through auto().
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { agent, auto, run, shellTools } from "../lib/index.mjs";
import { fauxModel, scriptedStream } from "../lib/testing.mjs";

const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "knap-agent-"));
fs.writeFileSync(path.join(workspace, "notes.txt"), Array.from({ length: 4000 }, (_, i) => `line ${i}`).join("\n"));
fs.writeFileSync(path.join(workspace, "TODO.md"), "# todo\n- ship knap\n- TODO: write the docs\n");

const reviewer = agent({
  id: "reviewer",
  instructions: "Read the workspace and explain what is in it. Do not change files.",
  model: auto(),
  sandbox: "host",
  tools: shellTools({ workspace }),
});

const live = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "CAVE_MODEL"].some((k) => process.env[k]);
const offline = live
  ? {}
  : {
      model: fauxModel({ priced: true }),
      streamFn: scriptedStream([
        { text: "Let me look around.", toolCalls: [{ name: "bash", args: { command: "wc -l notes.txt && ls" } }] },
        { toolCalls: [{ name: "grep", args: { pattern: "TODO" } }, { name: "read_file", args: { path: "TODO.md" } }] },
        { toolCalls: [{ name: "bash", args: { command: "cat notes.txt" } }] },
        { toolCalls: [{ name: "write_file", args: { path: "summary.md", content: "reviewed" } }] },
        { text: "notes.txt has 4,000 numbered lines; TODO.md lists two items, one of them the docs." },
      ]),
    };

const policyLog = [];
const result = await run(reviewer, "What is in this workspace?", {
  ...offline,
  rootDir: workspace,
  toolPolicy: ({ name, effect, agentPath }) => {
    policyLog.push({ name, effect, agentPath });
    return effect === "write" ? { deny: "read_only_review" } : undefined;
  },
});

console.log(`model: ${result.provider}/${result.model}${live ? "" : " (scripted, offline)"}`);
console.log(`answer: ${result.text}`);
console.log(`stopReason: ${result.stopReason}   toolCalls: ${result.toolCalls.join(", ")}`);
for (const entry of policyLog) console.log(`policy: ${JSON.stringify(entry)}`);
console.log("receipt.tools:", JSON.stringify(result.receipt.tools, null, 2));
console.log(
  `receipt: ${result.receipt.calls.length} model calls, ${result.receipt.totalTokens} tokens, ` +
    `$${result.receipt.totalEstimatedUsd} (${result.priceBasis}), mode ${result.mode}`,
);
fs.rmSync(workspace, { recursive: true, force: true });
