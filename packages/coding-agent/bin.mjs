#!/usr/bin/env node
// The caveman-code command of @caveman-ai/coding-agent: knap's, run as the process.
import { loadKnap } from "./load.mjs";

(await loadKnap("code/cli.mjs", "code/cli")).runCli();
