// `knap/execution-backend` (`@caveman-ai/agent/execution-backend`): where the shell tools run.
export { localExecutionBackend, httpExecutionBackend } from "./backends.mjs";
