// knap/serve (`@caveman-ai/agent/serve`): createAgentServer, the handler of serve-core.mjs behind
// a Node `http` server, with WebSocket upgrades (the optional peer `ws`), the periodic recovery
// sweep and the single-instance lease.
import http from "node:http";
import path from "node:path";

import { codedError, native } from "./native.mjs";
import { DiskDurableStore, defaultDurableRoot } from "./durable.mjs";
import { createAgentHandler, ENTRY_PATH_GIVEN, INSTANCE_LOCK_RUN_ID } from "./serve-core.mjs";

const L = native.serveLimits();
const WS_PATH = /^\/sessions\/[^/]+\/ws$/;
const SERVER_OWNED = ["controller", "conversation", "signal"];

/** `createAgentServer(options)`: `{ server, listen, recover, nextWakeAt, close }`. */
export function createAgentServer(options) {
  if (options === null || typeof options !== "object") throw new TypeError("createAgentServer(options): options must be an object");
  const { runOptions, singleInstance = true, ...rest } = options;
  let factory = runOptions;
  let entryPathGiven = false;
  if (runOptions !== undefined && typeof runOptions !== "function") {
    if (runOptions === null || typeof runOptions !== "object") throw new TypeError("createAgentServer: runOptions must be an object or a function");
    if ("durable" in runOptions) throw new Error("cave_serve_durable_owned: the server assigns durable options per request");
    if (SERVER_OWNED.some((key) => Object.hasOwn(runOptions, key))) {
      throw new Error("cave_serve_run_option_owned: controller, conversation, and signal are server-owned");
    }
    entryPathGiven = runOptions.entryPath !== undefined;
    factory = () => runOptions;
  }
  const rootDir = path.resolve(options.rootDir ?? process.cwd());
  // The server resolves the store itself, so the instance lease and the journals share one.
  const store = options.store ?? new DiskDurableStore(defaultDurableRoot(rootDir));

  let wss;
  let wsModule;
  const handler = createAgentHandler({
    ...rest,
    rootDir,
    store,
    ...(factory === undefined ? {} : { runOptions: factory }),
    [ENTRY_PATH_GIVEN]: entryPathGiven,
    upgrade: (request) => request[UPGRADE]?.(),
  });

  const server = http.createServer((req, res) => {
    serveRequest(handler, req, res).catch((error) => {
      if (res.headersSent) return res.destroy();
      writeJson(res, 500, { error: "cave_serve_internal", message: error instanceof Error ? error.message : String(error) });
    });
  });

  server.on("upgrade", (req, socket, head) => {
    upgradeRequest(req, socket, head).catch(() => socket.destroy());
  });

  async function upgradeRequest(req, socket, head) {
    const pathname = new URL(req.url ?? "/", "http://localhost").pathname;
    if (!WS_PATH.test(pathname)) return writeRaw(socket, 426, "Upgrade Required", { error: "cave_serve_upgrade_required" });
    copyBearerProtocol(req);
    // Preflight without a body: authentication and the session check answer before any upgrade.
    const preflight = await handler.fetch(toRequest(req, false));
    const body = await preflight.text();
    if (!(preflight.status === 501 && JSON.parse(body || "{}").error === "cave_serve_websocket_unavailable")) {
      return writeRaw(socket, preflight.status, http.STATUS_CODES[preflight.status] ?? "", body, preflight.headers);
    }
    if (!wss) {
      wsModule ??= await import("ws").catch(() => null);
      const WebSocketServer = wsModule?.WebSocketServer ?? wsModule?.default?.WebSocketServer;
      if (!WebSocketServer) return writeRaw(socket, 501, "Not Implemented", body);
      // `caveman-agent` is chosen only when offered, so the cave-bearer.* token is never echoed.
      wss = new WebSocketServer({ noServer: true, handleProtocols: (protocols) => (protocols.has("caveman-agent") ? "caveman-agent" : false) });
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const request = toRequest(req, false);
      request[UPGRADE] = () => ({ response: new Response(null, { status: 200 }), socket: ws });
      handler.fetch(request).then(
        (response) => {
          if (response.status >= 300) ws.close(1011, "cave_serve_internal");
        },
        () => ws.close(1011, "cave_serve_internal"),
      );
    });
  }

  let sweep;
  let instanceRelease;

  async function listen(port, host = "0.0.0.0") {
    if (singleInstance !== false) {
      try {
        instanceRelease = await store.acquire(INSTANCE_LOCK_RUN_ID);
      } catch (cause) {
        throw codedError(
          "cave_serve_instance_already_active",
          "cave_serve_instance_already_active: another instance holds this store's instance lease. Session state is per-process, so two live instances can drive one session blind to each other. Run one instance (a crashed one's lease expires and the next takes over), or set singleInstance: false if no session is ever addressed from two instances.",
          cause,
        );
      }
    }
    await new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    await handler.recover();
    sweep = setInterval(() => handler.recover().catch(() => {}), L.recoverySweepIntervalMs);
    sweep.unref();
    return server.address().port;
  }

  async function close(graceMs = L.closeGraceMs) {
    clearInterval(sweep);
    const closed = new Promise((resolve) => server.close(() => resolve()));
    server.closeIdleConnections?.();
    await handler.close(graceMs);
    try {
      for (const client of wss?.clients ?? []) client.terminate();
      wss?.close();
      server.closeAllConnections?.();
      await closed;
      if (instanceRelease) await instanceRelease();
      await store.close(INSTANCE_LOCK_RUN_ID);
    } catch {
      // shutting down: nothing left to report to
    }
  }

  return {
    server,
    listen,
    recover: () => handler.recover(),
    nextWakeAt: () => handler.nextWakeAt(),
    close,
  };
}

const UPGRADE = Symbol("knap.serve.upgrade");

/** A `cave-bearer.` subprotocol becomes `Authorization: Bearer …` when no Authorization was sent. */
function copyBearerProtocol(req) {
  if (req.headers.authorization !== undefined) return;
  const entry = String(req.headers["sec-websocket-protocol"] ?? "")
    .split(",")
    .map((p) => p.trim())
    .find((p) => p.startsWith("cave-bearer."));
  if (!entry) return;
  const token = Buffer.from(entry.slice("cave-bearer.".length), "base64url").toString("utf8");
  req.headers.authorization = `Bearer ${token}`;
}

function toRequest(req, withBody) {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, value);
  }
  const init = { method: req.method, headers };
  if (withBody && req.method !== "GET" && req.method !== "HEAD") {
    init.body = new ReadableStream({
      start(controller) {
        req.on("data", (chunk) => {
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 1) <= 0) req.pause();
        });
        req.on("end", () => controller.close());
        req.on("error", (error) => controller.error(error));
      },
      pull() {
        req.resume();
      },
      cancel() {
        // The handler stopped reading (a body over the limit): the rest is not wanted, and the
        // connection closes after the response.
        req.bodyAbandoned = true;
        req.pause();
      },
    });
    init.duplex = "half";
  }
  return new Request(new URL(req.url ?? "/", "http://localhost"), init);
}

async function serveRequest(handler, req, res) {
  const response = await handler.fetch(toRequest(req, true));
  const headers = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  if (req.bodyAbandoned) headers.connection = "close";
  res.writeHead(response.status, headers);
  if (!response.body) return finish(req, res);
  if (headers["content-type"] === "text/event-stream") res.flushHeaders();
  const reader = response.body.getReader();
  let gone = false;
  res.on("close", () => {
    gone = true;
    reader.cancel().catch(() => {});
  });
  for (;;) {
    const { done, value } = await reader.read();
    if (done || gone) break;
    if (!res.write(value)) {
      await new Promise((resolve) => {
        res.once("drain", resolve);
        res.once("close", resolve);
      });
    }
  }
  finish(req, res);
}

function finish(req, res) {
  res.end(() => {
    if (req.bodyAbandoned) req.socket?.destroy();
  });
}

function writeJson(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** A raw HTTP/1.1 response on an upgrade socket, then close. */
function writeRaw(socket, status, reason, body, headers) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const lines = [`HTTP/1.1 ${status} ${reason}`];
  let type = "application/json";
  headers?.forEach?.((value, name) => {
    if (name === "content-type") type = value;
    else if (name !== "content-length" && name !== "connection") lines.push(`${name}: ${value}`);
  });
  lines.push(`content-type: ${type}`, `content-length: ${Buffer.byteLength(text)}`, "Connection: close", "", text);
  socket.end(lines.join("\r\n"));
}
