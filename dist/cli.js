#!/usr/bin/env node
// knap shim for the reference's dist/cli.js (its `caveman-agent` bin): runs the same command as
// bin/caveman-agent.mjs when executed; importing it runs nothing.
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { runAgentCli } from "../lib/agent-cli.mjs";

const self = fileURLToPath(import.meta.url);
let invoked;
try {
  invoked = process.argv[1] && realpathSync(process.argv[1]);
} catch {
  invoked = undefined;
}
if (invoked === realpathSync(self)) runAgentCli();
export { runAgentCli };
