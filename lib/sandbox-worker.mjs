// One sandbox worker process (forked by lib/sandbox.mjs for a run whose agent has
// `sandbox: "required"` and `RunOptions.entryPath`). It imports the entry module, finds the
// run's agent by id (a subagent's agent through its subagent tool names) and runs tool closures
// for the parent, one call at a time, over the IPC channel:
//   parent → worker  {type:"init", entry, agentId, tools:[{path, name}], resultMaxBytes}
//                    {type:"call", id, tool, args, context:{toolCallId, parentToolCallId, durable?}}
//                    {type:"abort", id, reason?:{name, message}}
//   worker → parent  {type:"ready"} | {type:"failed", code, message}
//                    {type:"result", id, text} | {type:"error", id, error:{message, code?, name?}}
// It imports nothing of knap's native layer itself: the entry module loads what it needs.
import { Worker } from "node:worker_threads";
import { pathToFileURL } from "node:url";
import { serializeToolResult } from "./tool-result.mjs";

// A run() inside this process (a tool's own, or the entry's top level) may not start workers of
// its own (lib/sandbox.mjs refuses with cave_sandbox_worker_nested): no fork chains.
globalThis[Symbol.for("knap.sandboxWorker")] = true;

// The worker leads its own process group (so an abort kills what a tool spawned too). When the
// parent dies the IPC channel closes, but a tool stuck in a synchronous loop never sees that:
// a watchdog thread notices the re-parenting and kills the process.
// The parent's pid is taken here, not in the thread: a thread that starts late (a loaded
// machine) would otherwise take the re-parented pid for the parent's.
if (process.platform !== "win32") {
  const watchdog = new Worker(
    "const { workerData: ppid } = require('node:worker_threads'); const check = () => { if (process.ppid !== ppid) process.kill(process.pid, 'SIGKILL'); }; check(); setInterval(check, 500);",
    { eval: true, env: {}, stdout: false, stderr: false, workerData: process.ppid },
  );
  watchdog.unref();
}
process.on("disconnect", () => process.exit(0));

const tools = [];
let resultMaxBytes = Infinity;
const running = new Map();

function coded(code, detail) {
  const error = new Error(`${code}: ${detail}`);
  error.code = code;
  return error;
}

function send(message) {
  if (process.connected) process.send(message);
}

/** The exported agent with `id`: the default export first, then the named ones. */
function findAgent(mod, id) {
  const names = ["default", ...Object.keys(mod).filter((k) => k !== "default")];
  for (const name of names) {
    let value;
    try {
      value = mod[name];
    } catch {
      continue; // an export still in its temporal dead zone
    }
    if (value?.kind === "agent" && value.id === id) return value;
  }
  return undefined;
}

/** The tool `name` of the agent reached from `root` through the subagent tools of `path`. */
function findTool(root, path, name) {
  let definition = root;
  for (const step of path) {
    const sub = definition.tools?.find((t) => t.name === step && t.runtime?.kind === "subagent");
    if (!sub) return undefined;
    definition = sub.runtime.definition;
  }
  const found = definition.tools?.find((t) => t.name === name);
  return typeof found?.execute === "function" ? found : undefined;
}

async function init({ entry, agentId, tools: wanted, resultMaxBytes: max }) {
  resultMaxBytes = max;
  let mod;
  try {
    mod = await import(pathToFileURL(entry).href);
  } catch (error) {
    throw coded("cave_sandbox_entry_import_failed", `RunOptions.entryPath ${entry} could not be imported: ${error instanceof Error ? error.message : String(error)}`);
  }
  const root = findAgent(mod, agentId);
  if (!root) {
    const exported = Object.keys(mod).join(", ") || "nothing";
    throw coded(
      "cave_sandbox_entry_agent_missing",
      `RunOptions.entryPath ${entry} exports no agent ${JSON.stringify(agentId)} (its exports: ${exported})\nhint: export the definition you run from that module: export default agent({ id: ${JSON.stringify(agentId)}, … }), or export const it by any name`,
    );
  }
  for (const { path, name } of wanted) {
    const tool = findTool(root, path, name);
    if (!tool) {
      const where = [...path, name].join(" → ");
      throw coded(
        "cave_sandbox_entry_tool_missing",
        `the agent ${JSON.stringify(agentId)} exported by RunOptions.entryPath ${entry} has no tool ${where}\nhint: the entry must export the definition run() is given, with the same tools (apply transforms such as applyAgentEnvironment() in the entry module)`,
      );
    }
    tools.push(tool);
  }
}

function describe(error) {
  try {
    if (error instanceof Error) {
      let message = String(error.message);
      if (message.length > resultMaxBytes) message = message.slice(0, resultMaxBytes);
      return { message, code: typeof error.code === "string" ? error.code : undefined, name: error.name };
    }
    return { message: String(error) };
  } catch {
    return { message: "a sandboxed tool threw a value that cannot be described" };
  }
}

async function call({ id, tool: index, args, context }) {
  const tool = tools[index];
  const controller = new AbortController();
  running.set(id, controller);
  try {
    if (!tool) throw coded("cave_sandbox_worker_protocol_invalid", `no tool ${index}`);
    const value = await tool.execute(args, controller.signal, {
      toolCallId: context.toolCallId,
      parentToolCallId: context.parentToolCallId,
      ...(context.durable ? { durable: Object.freeze({ ...context.durable }) } : {}),
      // Composite tools are refused under a required sandbox, so nothing here can dispatch.
      dispatch: () => Promise.reject(Object.assign(new Error("cave_nested_tool_dispatch_unavailable"), { code: "cave_nested_tool_dispatch_unavailable" })),
    });
    const text = serializeToolResult(tool.name, value);
    // The kernel refuses it anyway; refused here it never crosses the channel.
    if (text.length > resultMaxBytes / 3 && Buffer.byteLength(text) > resultMaxBytes) throw new Error(`cave_tool_result_limit:${tool.name}`);
    send({ type: "result", id, text });
  } catch (error) {
    send({ type: "error", id, error: describe(error) });
  } finally {
    running.delete(id);
  }
}

process.on("message", (message) => {
  switch (message?.type) {
    case "init":
      init(message).then(
        () => send({ type: "ready" }),
        (error) => send({ type: "failed", code: error.code ?? "cave_sandbox_worker_failed", message: String(error.message) }),
      );
      break;
    case "call":
      call(message);
      break;
    case "abort": {
      const reason = message.reason ? Object.assign(new Error(message.reason.message), { name: message.reason.name ?? "Error" }) : undefined;
      running.get(message.id)?.abort(reason);
      break;
    }
    default:
      break;
  }
});
