// knap/ai-sdk's tools are core operations (knap_core::agent_tools): a user's sandbox object is
// driven through typed callbacks, its rejections become {error} results, odd answers are
// normalized, and configuration errors are refused when the tools are built.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAgentTools, createReadTool, createPatchTool, createBashTool } from "knap/ai-sdk";
import { nodeSandbox, tempWorkspace, runTool } from "./ai-sdk-helpers.mjs";

test("a sandbox's rejection is the tool's {error}; a partial exec answer is normalized", async () => {
  const ws = tempWorkspace({ "a.txt": "a\n" });
  try {
    const sb = { ...nodeSandbox(ws.dir), readFile: async () => Promise.reject(new Error("disk on fire")), exec: async () => ({ stdout: "hi\n" }) };
    const { tools } = await createAgentTools(sb);
    assert.deepEqual(await runTool(tools, "Read", { file_path: "a.txt" }), { error: "disk on fire" });
    assert.deepEqual(await runTool(tools, "Bash", { command: "anything" }), { stdout: "hi\n", stderr: "" });
    const read = createReadTool(sb);
    assert.deepEqual(await read.execute({ file_path: "a.txt" }, { toolCallId: "x", messages: [] }), { error: "disk on fire" });
  } finally {
    ws.cleanup();
  }
});

test("Patch through a sandbox without deleteFile removes with `rm --`", async () => {
  const ws = tempWorkspace({ "gone.txt": "g\n" });
  try {
    const sb = nodeSandbox(ws.dir);
    delete sb.deleteFile;
    const commands = [];
    const exec = sb.exec;
    sb.exec = (command, options) => (commands.push(command), exec(command, options));
    const patch = createPatchTool(sb);
    const out = await patch.execute({ patch: "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch" }, { toolCallId: "p", messages: [] });
    assert.deepEqual(out, { message: "Successfully patched gone.txt", files: [{ status: "deleted", path: "gone.txt" }] });
    assert.deepEqual(commands, ["rm -- 'gone.txt'"]);
    assert.equal(await sb.fileExists("gone.txt"), false);
  } finally {
    ws.cleanup();
  }
});

test("an invalid allowedPaths pattern is refused when the tool is built", () => {
  const ws = tempWorkspace({});
  try {
    assert.throws(() => createBashTool(nodeSandbox(ws.dir), { allowedPaths: ["src/[a"] }), (e) => e.code === "cave_tool_config_invalid" && /src\/\[a/.test(e.message));
  } finally {
    ws.cleanup();
  }
});
