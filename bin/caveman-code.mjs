#!/usr/bin/env node
// The `caveman-code` command. npm links this file into node_modules/.bin; it always runs.
import { runCli } from "../lib/code/cli.mjs";

runCli();
