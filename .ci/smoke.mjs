// Runs in a fresh project where knap was installed from the packed tarball.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { shellTools, decideToolCall, TOOL_POLICY_TIMEOUT_MS } from "knap";

const ws = fs.mkdtempSync(path.join(os.tmpdir(), "knap-smoke-"));
fs.writeFileSync(path.join(ws, "a.txt"), "alpha\nbeta\n");
const tools = Object.fromEntries(shellTools({ workspace: ws }).map((t) => [t.name, t]));
assert.equal(await tools.bash.execute({ command: "echo hi" }), "exit 0\nhi\n");
assert.equal(await tools.read_file.execute({ path: "a.txt", offset: 2, limit: 1 }), "2\tbeta");
assert.deepEqual(await decideToolCall(() => ({ deny: "nope" }), { name: "bash" }), { block: true, reason: "cave_tool_denied:nope" });
assert.equal(TOOL_POLICY_TIMEOUT_MS, 10_000);
console.log("smoke: 4 passed, 0 failed");

// The exec server from the tarball (the `knap-exec-server` bin that `npx` runs), driven by
// httpExecutionBackend. The bin is started directly: npx does not pass SIGTERM on.
{
  const { spawn } = await import("node:child_process");
  const { httpExecutionBackend } = await import("knap");
  const token = "smoke-token-0123456789abcdef";
  const tokenFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "knap-smoke-token-")), "token");
  fs.writeFileSync(tokenFile, token, { mode: 0o600 });
  const server = spawn(path.join("node_modules", ".bin", "knap-exec-server"), ["--workspace", ws, "--listen", "127.0.0.1:0", "--token-file", tokenFile], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    server.stdout.on("data", (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    server.once("exit", (code) => reject(new Error(`knap-exec-server exited ${code}`)));
  });
  const backend = httpExecutionBackend({ url, token });
  const r = await backend.exec({ command: "cat", args: ["a.txt"], cwd: ws, env: {}, timeoutMs: 10_000, maxOutputBytes: 100 });
  assert.deepEqual([r.code, r.stdout], [0, "alpha\nbeta\n"]);
  const exited = new Promise((resolve) => server.once("exit", resolve));
  server.kill("SIGTERM");
  await exited;
  console.log("smoke: knap-exec-server from the tarball answered /exec");
}
