// The Worker of one programmatic cell. The cell's JavaScript runs in a fresh `vm` context (no
// `process`, `require`, timers or string code generation) inside this Worker; tool calls travel to
// the parent thread, which admits them and dispatches them through the kernel.
//
// NOT an isolation boundary: `vm` shares this isolate with the Worker's own realm, and a determined
// cell can exhaust memory or CPU until the parent terminates it. The guest only ever sees
// functions and objects of its own realm: everything it is handed is built by the bootstrap below
// (guest code), and the host functions it closes over never throw and only return primitives.
import vm from "node:vm";
import { parentPort, workerData } from "node:worker_threads";

const { code, names, syncTimeoutMs } = workerData;

// Rejections the cell leaves unobserved are judged by the cell's rules, not by Node's default
// (which would kill the Worker).
process.on("unhandledRejection", () => {});

const post = (message) => parentPort.postMessage(message);
// A thrown value's message. Errors of the cell's realm are not `instanceof Error` here.
const messageOf = (error) => (error !== null && typeof error === "object" && typeof error.message === "string" ? error.message : String(error));

// Host side of the bridge: every record lives here, in the Worker's realm.
const lines = [];
const calls = new Map(); // id -> { state: "pending" | "fulfilled" | "rejected", observed, message }
let nextId = 0;
let finishing = false;
let ended = false;

const bridge = {
  // Each returns a primitive and never throws into the guest.
  print(line) {
    if (typeof line === "string") lines.push(line);
    return 0;
  },
  call(name, json) {
    const id = ++nextId;
    if (finishing) {
      calls.set(id, { state: "rejected", observed: false, message: "cave_program_cell_finishing" });
      return -id; // settled at once: the guest rejects it
    }
    calls.set(id, { state: "pending", observed: false, message: "" });
    post({ t: "call", id, name: String(name), json: typeof json === "string" ? json : null });
    return id;
  },
  observe(id) {
    const record = calls.get(id);
    if (record) record.observed = true;
    return 0;
  },
  end(ok, text, hasValue) {
    if (ended) return 0;
    ended = true;
    finishing = true;
    const message = typeof text === "string" ? text : "";
    if (!ok) {
      post({ t: "fail", message });
      return 0;
    }
    const value = hasValue === true ? message : null;
    settleAll().then(() => {
      for (const record of calls.values()) {
        if (record.state === "rejected" && !record.observed) {
          post({ t: "fail", message: record.message });
          return;
        }
      }
      post({ t: "done", lines, value });
    });
    return 0;
  },
};

const waiters = [];
function settleAll() {
  return new Promise((resolve) => {
    const check = () => {
      for (const record of calls.values()) if (record.state === "pending") return false;
      resolve();
      return true;
    };
    if (!check()) waiters.push(check);
  });
}

const context = vm.createContext(Object.create(null), {
  name: "caveman_code",
  codeGeneration: { strings: false, wasm: false },
});

// Guest-realm bootstrap: builds print, console, the tool functions and `tools`, and the thenables
// the calls return. The bridge stays in this closure only.
const BOOTSTRAP = `(function (bridge, names) {
  "use strict";
  const G = globalThis;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const freeze = Object.freeze;
  const define = Object.defineProperty;
  const NativePromise = Promise;
  const then = NativePromise.prototype.then;
  const toStringTag = Symbol.toStringTag;
  const settlers = new Map();
  const format = (value) => {
    if (typeof value === "string") return value;
    let text;
    try { text = stringify(value); } catch (error) { text = undefined; }
    return text === undefined ? String(value) : text;
  };
  const print = function print(...values) {
    let line = "";
    for (let i = 0; i < values.length; i++) line += (i ? " " : "") + format(values[i]);
    bridge.print(line);
  };
  const thenable = (id, promise) => freeze({
    then(onFulfilled, onRejected) {
      if (typeof onRejected === "function") bridge.observe(id);
      return Reflect.apply(then, promise, [onFulfilled, onRejected]);
    },
    catch(onRejected) {
      if (typeof onRejected === "function") bridge.observe(id);
      return Reflect.apply(then, promise, [undefined, onRejected]);
    },
    finally(onFinally) {
      return NativePromise.prototype.finally.call(promise, onFinally);
    },
    [toStringTag]: "Promise",
  });
  const callTool = (name) => function (args) {
    let json;
    try { json = stringify(args); } catch (error) { json = undefined; }
    let settle;
    const promise = new NativePromise((resolve, reject) => { settle = { resolve, reject }; });
    Reflect.apply(then, promise, [undefined, () => {}]);
    const id = bridge.call(name, typeof json === "string" ? json : "");
    if (id < 0) {
      settle.reject(new Error("cave_program_cell_finishing"));
      return thenable(-id, promise);
    }
    settlers.set(id, settle);
    return thenable(id, promise);
  };
  const tools = Object.create(null);
  for (const name of names) {
    const fn = callTool(name);
    define(fn, "name", { value: name });
    tools[name] = fn;
    define(G, name, { value: fn, writable: false, enumerable: true, configurable: false });
  }
  define(G, "tools", { value: freeze(tools), writable: false, enumerable: true, configurable: false });
  define(G, "print", { value: print, writable: false, enumerable: true, configurable: false });
  define(G, "console", { value: freeze({ log: print }), writable: false, enumerable: false, configurable: false });
  // settle(id, ok, text): a reply from the host, in primitives.
  const settle = (id, ok, text) => {
    const s = settlers.get(id);
    if (!s) return;
    settlers.delete(id);
    if (typeof text !== "string") {
      s.reject(new Error(ok ? "cave_program_bridge_protocol_invalid" : "cave_program_tool_failed"));
      return;
    }
    if (!ok) {
      s.reject(new Error(text));
      return;
    }
    let value;
    try { value = parse(text); } catch (error) {
      s.reject(new Error("cave_program_bridge_protocol_invalid"));
      return;
    }
    s.resolve(value);
  };
  // finish(body): report how the cell's body ended, with its value formatted like print.
  const finish = (body) => {
    Reflect.apply(then, body, [
      (value) => bridge.end(true, value === undefined ? "" : format(value), value !== undefined),
      (error) => {
        let message;
        try { message = error instanceof Error ? String(error.message) : String(error); } catch (e) { message = "cave_program_tool_failed"; }
        bridge.end(false, message, false);
      },
    ]);
  };
  return { settle, finish };
})`;

let guest;
try {
  const hooks = new vm.Script(BOOTSTRAP, { filename: "caveman_code:bootstrap" }).runInContext(context)(bridge, names);
  // Keep only what the host needs; the guest's references to the bridge die with the closure.
  guest = { settle: hooks.settle, finish: hooks.finish };
} catch (error) {
  post({ t: "fail", message: messageOf(error) });
}

parentPort.on("message", (message) => {
  if (!message || message.t !== "settle") return;
  const record = calls.get(message.id);
  if (!record || record.state !== "pending") return;
  record.state = message.ok ? "fulfilled" : "rejected";
  record.message = message.ok ? "" : String(message.text);
  try {
    guest.settle(message.id, Boolean(message.ok), message.text);
  } catch {
    // A guest that broke its own intrinsics only breaks itself.
  }
  for (let i = waiters.length - 1; i >= 0; i--) if (waiters[i]()) waiters.splice(i, 1);
});

if (guest) {
  let body;
  try {
    const script = new vm.Script(`(async () => { "use strict";\n${code}\n})()`, { filename: "caveman_code" });
    body = script.runInContext(context, { timeout: syncTimeoutMs, breakOnSigint: false });
  } catch (error) {
    bridge.end(false, messageOf(error), false);
  }
  if (body !== undefined) {
    try {
      guest.finish(body);
    } catch (error) {
      bridge.end(false, messageOf(error), false);
    }
  }
}
