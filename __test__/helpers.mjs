// Shared fixtures for the knap tests: temp workspaces and /proc inspection. Not a test file.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import { shellTools } from "../lib/index.mjs";

/** A fresh directory holding a `ws/` workspace; `outside` is the directory around it. */
export function tempWorkspace(prefix = "knap-test-") {
  const outside = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const root = path.join(outside, "ws");
  fs.mkdirSync(root);
  const real = fs.realpathSync(root);
  return {
    outside,
    root,
    /** The canonical root, as error messages show it. */
    real,
    path: (rel) => path.join(root, rel),
    write(rel, content) {
      const p = path.join(root, rel);
      fs.mkdirSync(path.dirname(p), { recursive: true });
      fs.writeFileSync(p, content);
      return p;
    },
    read: (rel) => fs.readFileSync(path.join(root, rel), "utf8"),
    cleanup: () => fs.rmSync(outside, { recursive: true, force: true }),
  };
}

/** `shellTools` over a workspace, indexed by name. */
export function toolsFor(ws, options = {}) {
  const list = shellTools({ workspace: ws.root, ...options });
  return Object.fromEntries(list.map((t) => [t.name, t]));
}

/** The seed's 4,000-line file: `line 0` .. `line 3999` joined by `\n` (38,889 bytes). */
export function fourThousandLines() {
  return Array.from({ length: 4000 }, (_, i) => `line ${i}`).join("\n");
}

export const HANDLE_RE = /handle (tool_[a-f0-9]{32})\]$/;

/** Live (non-zombie) processes in process group `pgid`, read from /proc. */
export function liveGroupMembers(pgid) {
  const out = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // state ppid pgrp ...
    if (Number(fields[2]) === pgid && fields[0] !== "Z") out.push(Number(name));
  }
  return out;
}

/**
 * Waits until process group `pgid` has no live member; returns the survivors if some remain
 * after a generous bound (a liveness wait: the assertion is on survivors, not on time).
 */
export async function groupSurvivors(pgid) {
  for (let i = 0; i < 200; i++) {
    const live = liveGroupMembers(pgid);
    if (live.length === 0) return [];
    await sleep(25);
  }
  return liveGroupMembers(pgid);
}

/** Waits for a file to appear (bounded). */
export async function waitForFile(p) {
  for (let i = 0; i < 2000; i++) {
    if (fs.existsSync(p) && fs.statSync(p).size > 0) return;
    await sleep(10);
  }
  throw new Error(`${p} never appeared`);
}

/** Rejects-with matcher for node:assert: exact message and code. */
export function coded(code, message = code) {
  return (error) => {
    if (!(error instanceof Error)) throw new Error(`not an Error: ${error}`);
    if (error.code !== code) throw new Error(`code ${JSON.stringify(error.code)} !== ${JSON.stringify(code)} (${error.message})`);
    if (message instanceof RegExp ? !message.test(error.message) : error.message !== message) {
      throw new Error(`message ${JSON.stringify(error.message)} does not match ${message}`);
    }
    return true;
  };
}
