#!/usr/bin/env node
// The `caveman-agent` command (`caveman-agent serve [dir] [--port N] [--host H] [--locked]`).
// npm links this file into node_modules/.bin; it always runs.
import { runAgentCli } from "../lib/agent-cli.mjs";

runAgentCli();
