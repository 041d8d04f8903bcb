#!/usr/bin/env node
import { createCodingAgent, runCodingSession } from "@caveman-ai/coding-agent";

export async function main(options = {}) {
  const agent = createCodingAgent({ workspace: options.workspace ?? process.cwd() });
  return runCodingSession({ agent, ...options });
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  main().catch((error) => {
    process.stderr.write(`caveman-code: ${error instanceof Error ? error.message : error}\n`);
    process.exitCode = 1;
  });
}
