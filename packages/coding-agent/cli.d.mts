export * from "@caveman-ai/agent/code/cli";
