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
