// The typings are knap's (`knap/code`), reached under the name knap is installed as.
export * from "@caveman-ai/agent/code";
