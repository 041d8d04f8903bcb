// The typings are knap's (`knap/code/cli`), reached under the name knap is installed as: the
// reference's four names (knap's module also has `runCli`, which this entry does not export).
export { CODING_AGENT_HELP, parseCodingAgentCLIArgs, main } from "@caveman-ai/agent/code/cli";
export type { CodingAgentCLIOptions } from "@caveman-ai/agent/code/cli";
