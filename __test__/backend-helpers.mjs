// Shared fixtures for the execution-backend and command-session tests. Not a test file.
import fs from "node:fs";
import http from "node:http";
import { setTimeout as sleep } from "node:timers/promises";

/** True when `pid` no longer runs (gone, or a zombie waiting for its reaper). */
export function pidGone(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

/** Waits until every pid is gone; returns the ones still running after a generous bound. */
export async function survivors(pids) {
  for (let i = 0; i < 400; i++) {
    if (pids.every(pidGone)) return [];
    await sleep(25);
  }
  return pids.filter((p) => !pidGone(p));
}

/** Waits until `file` holds one pid per line, `count` of them; returns them. */
export async function pidsIn(file, count = 1) {
  for (let i = 0; i < 2000; i++) {
    try {
      const pids = fs.readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number);
      if (pids.length >= count) return pids;
    } catch {
      // not written yet
    }
    await sleep(10);
  }
  throw new Error(`${file} never held ${count} pid(s)`);
}

/**
 * A fake HTTP execution-backend server on 127.0.0.1: `handler(endpoint, body, req, res)` answers
 * (return a value to send it as JSON, or write `res` yourself); every request is recorded.
 */
export async function fakeBackendServer(handler) {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const text = Buffer.concat(chunks).toString("utf8");
    const endpoint = req.url.replace(/^\//, "");
    const body = text === "" ? undefined : JSON.parse(text);
    requests.push({ endpoint, body, headers: req.headers });
    try {
      const answer = await handler(endpoint, body, req, res);
      if (!res.headersSent && answer !== undefined) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(answer));
      }
    } catch (error) {
      if (!res.headersSent) {
        res.writeHead(500);
        res.end(String(error));
      }
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(resolve);
      }),
  };
}
