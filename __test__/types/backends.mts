// Compiled by types.test.mjs: the execution-backend (and command-session) surface as user code
// written for @caveman-ai/agent uses it.
import { localExecutionBackend, httpExecutionBackend, shellTools } from "knap";
import type { ExecutionBackend, ExecRequest, ExecResult } from "knap";
import * as backends from "knap/execution-backend";

/** A Docker-style backend that wraps the local one, as applications do. */
function dockerBackend(container: string): ExecutionBackend {
  const local = localExecutionBackend();
  return {
    id: "docker",
    exec: (r: ExecRequest): Promise<ExecResult> => local.exec({ ...r, command: "docker", args: ["exec", container, r.command, ...r.args] }),
    readFile: (p, o) => local.readFile(p, o),
    writeFile: (p, d) => local.writeFile(p, d),
  };
}

export async function backendsUsage(): Promise<void> {
  const remote = backends.httpExecutionBackend({ url: "http://127.0.0.1:8787", token: "t", fetch });
  const r: ExecResult = await remote.exec({ command: "true", args: [], cwd: "/w", env: {}, timeoutMs: 1000, maxOutputBytes: 10 });
  const bytes: Uint8Array = await remote.readFile("/w/a", { maxBytes: 4 });
  console.log(r.code, r.startFailed, bytes.length, await remote.snapshot?.());
  shellTools({ workspace: "/w", executionBackend: dockerBackend("c1") });
  shellTools({ workspace: "/w", executionBackend: httpExecutionBackend({ url: "https://x", token: "t" }) });
}

import { createCommandSessionRuntime } from "knap/command-session";
import type { CommandSessionReadResult } from "knap/command-session";
import { createCommandSessionRuntime as fromCode } from "knap/code";

export async function sessionsUsage(): Promise<void> {
  const sessions = createCommandSessionRuntime({ maxSessions: 8, maxOutputBytes: 4 * 1024 * 1024 });
  const { sessionId } = await sessions.start({ command: "/bin/sh", args: ["-c", "cat"], cwd: "/tmp", env: {}, stdin: "pipe", timeoutMs: 1000 });
  await sessions.write({ sessionId, input: "hi\n", closeStdin: true });
  const page: CommandSessionReadResult = await sessions.read({ sessionId, query: "hi", waitMs: 100 });
  console.log(page.matchStart, sessions.list()[0]?.stdinOpen, fromCode === createCommandSessionRuntime);
  shellTools({ workspace: "/w", commandSessions: sessions });
  await sessions.close();
}
