// @caveman-ai/coding-agent/cli on knap: the caveman-code command's module.
import { loadKnap } from "./load.mjs";

const cli = await loadKnap("code/cli.mjs", "code/cli");

export const { CODING_AGENT_HELP, parseCodingAgentCLIArgs, main } = cli;
