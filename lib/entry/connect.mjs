// `@caveman-ai/agent/connect`: needs the caveman-connect runtime (throws `cave_connect_unsupported`).
export { ConnectRuntime, createConnect, connectEnvironment, executeConnectTool, resolveConnectBinary, compareConnectEfficiency } from "../unsupported.mjs";
