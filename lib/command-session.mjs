// `knap/command-session` (`@caveman-ai/agent/command-session`): interactive command sessions.
// One runtime value, as the reference exports it (the rest of its 12 names are types).
export { createCommandSessionRuntime } from "./command-session-runtime.mjs";
