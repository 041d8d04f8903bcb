// `@caveman-ai/agent/claude`: the Claude Agent SDK bridge (throws `cave_claude_unsupported`).
export { runClaudeAgent } from "../unsupported.mjs";
