// "Did you mean" (issue 14): every refusal of a name knap does not know keeps the reference's code
// and first line and adds a hint line with the nearest known name, from the core's one matcher
// (knap_core::suggest, also behind the model ids' "did you mean").
import { test } from "node:test";
import assert from "node:assert/strict";

import { agent, httpExecutionBackend, shellTools, tool } from "../lib/index.mjs";
import { native } from "../lib/native.mjs";
import { fauxModel } from "../lib/testing.mjs";
import { createCommandSessionRuntime } from "../lib/command-session.mjs";
import { createAgentHandler } from "../lib/serve-handler.mjs";
import { createAgentTools, createLocalSandbox, createVercelSandbox } from "../lib/ai-sdk/index.mjs";
import { tempWorkspace } from "./helpers.mjs";

const lines = (e) => e.message.split("\n");

/** The error `fn` throws (or rejects with): first line, code and hint checked by the caller. */
async function caught(fn) {
  try {
    await fn();
  } catch (error) {
    assert.equal(lines(error).length, 2, error.message);
    assert.equal(lines(error)[1], `hint: ${error.hint}`);
    return error;
  }
  assert.fail("did not throw");
}

test("suggestNames: case, -, _ and . ignored; edit distance within a third; containment; nothing far", () => {
  assert.deepEqual(native.suggestNames("workingDir", ["workingDirectory", "cwd", "env"]), ["workingDirectory"]);
  assert.deepEqual(native.suggestNames("defaultTimeOut", ["tools", "defaultTimeout"]), ["defaultTimeout"]);
  assert.deepEqual(native.suggestNames("readfile", ["read_file", "grep", "bash"]), ["read_file"]);
  assert.deepEqual(native.suggestNames("qqqqqqqq", ["read_file", "grep", "bash"], 3), []);
  assert.deepEqual(native.suggestNames("timeout", ["timeoutMs", "timeou", "zzz"], 3), ["timeou", "timeoutMs"]);
  assert.deepEqual(native.catalogNearest("anthropic/claude-haiku-4.5", 1), ["anthropic/claude-haiku-4-5"]);
});

test("shellTools: an unknown tool name gets the nearest and the six names", async () => {
  const e = await caught(() => shellTools({ workspace: "/tmp", tools: ["readfile"] }));
  assert.equal(e.code, "cave_shell_tool_unknown:readfile");
  assert.equal(lines(e)[0], "cave_shell_tool_unknown:readfile");
  assert.equal(e.hint, 'did you mean "read_file"? the tools are read_file, grep, bash, write_file, edit_file, read_tool_output');
});

test("httpExecutionBackend and createAgentHandler: unknown options get the nearest", async () => {
  let e = await caught(() => httpExecutionBackend({ url: "https://x.test", tokn: "t" }));
  assert.equal(e.code, "cave_execution_backend_http_option_unknown:tokn");
  assert.equal(lines(e)[0], "cave_execution_backend_http_option_unknown:tokn");
  assert.equal(e.hint, 'did you mean "token"? the options are url, token, fetch');
  const definition = agent({ id: "a", instructions: "i", model: fauxModel(), sandbox: "host", tools: [] });
  e = await caught(() => createAgentHandler({ definition, token: "t".repeat(32), maxConcurentRuns: 2 }));
  assert.equal(e.code, "cave_serve_option_unknown");
  assert.equal(lines(e)[0], 'cave_serve_option_unknown: createAgentHandler does not take "maxConcurentRuns"');
  assert.match(e.hint, /^did you mean "maxConcurrentRuns"\? the options are definition, token, /);
});

test("command sessions: unknown runtime and start options get the nearest", async (t) => {
  let e = await caught(() => createCommandSessionRuntime({ maxSesions: 2 }));
  assert.equal(e.code, "command_session_option_unknown:maxSesions");
  assert.equal(lines(e)[0], "command_session_option_unknown:maxSesions");
  assert.match(e.hint, /^did you mean "maxSessions"\? the options are maxSessions, /);
  const rt = createCommandSessionRuntime();
  t.after(() => rt.close());
  e = await caught(() => rt.start({ command: "true", cwd: "/", env: {}, timeoutMs: 1000, timeoutMS: 5 }));
  assert.equal(e.code, "command_session_start_option_unknown:timeoutMS");
  assert.equal(e.hint, 'did you mean "timeoutMs"? the options are command, args, cwd, env, stdin, timeoutMs');
});

test("the AI SDK's config: the Vercel sandbox's keys and the model registry provider get the nearest", async (t) => {
  let e = await caught(() => createVercelSandbox({ sdk: {}, sandboxid: "sbx_1" }));
  assert.equal(e.code, "cave_config_unknown_key");
  assert.equal(lines(e)[0], 'cave_config_unknown_key: createVercelSandbox does not know the option "sandboxid"');
  assert.match(e.hint, /^did you mean "sandboxId"\? the options are runtime, /);
  const ws = tempWorkspace();
  t.after(ws.cleanup);
  e = await caught(() => createAgentTools(createLocalSandbox({ workingDirectory: ws.root }), { modelRegistry: { provider: "openrouter" } }));
  assert.equal(e.code, "cave_model_registry_unknown");
  assert.equal(lines(e)[0], 'cave_model_registry_unknown: unknown model registry provider "openrouter"');
  assert.equal(e.hint, 'did you mean "openRouter"? the providers are openRouter');
});

test("definitions: an unknown effect, result policy or sandbox mode names the values", async () => {
  let e = await caught(() => tool({ name: "t", description: "d", effect: "reed", input: {}, execute: () => "" }));
  assert.equal(lines(e)[0], 'caveman agent: unknown tool effect "reed"');
  assert.equal(e.hint, 'effect is one of "read", "write", "idempotent", "external"');
  e = await caught(() => tool({ name: "t", description: "d", effect: "read", result: "pages", input: {}, execute: () => "" }));
  assert.equal(lines(e)[0], 'caveman agent: unknown tool result policy "pages"');
  assert.match(e.hint, /^result is one of "auto", "inline", "page", /);
  e = await caught(() => agent({ id: "a", instructions: "i", model: fauxModel(), sandbox: "hots", tools: [] }));
  assert.equal(lines(e)[0], 'caveman agent: unknown sandbox mode "hots"');
  assert.equal(e.hint, 'sandbox is one of "required", "fixture", "host"');
});
