#!/usr/bin/env node
// Execution backends: what one exec (and one small read) costs on each backend, in one run.
//   node bench/backends.mjs [--runs N] [--write]     (needs `npm run build`: addon + knap-exec-server)
//
// 1. `backend.exec` of `true`: Node's child_process.spawn, localExecutionBackend() (Rust), and
//    httpExecutionBackend() against knap-exec-server on 127.0.0.1 (N sequential requests, p50/p99).
// 2. The bash tool (`shellTools().bash.execute({command: "true"})`, `sh -c true`) over
//    - the default local backend (native tools, no JS in the loop),
//    - a JS backend: a plain object whose methods forward to localExecutionBackend() (the Rust
//      tool calls JS through the binding's threadsafe functions, and JS calls back into Rust),
//    - a JS backend built on child_process.spawn and node:fs only,
//    - httpExecutionBackend() to knap-exec-server.
// 3. read_file of a 1 KiB file through the same four.
// Prints Markdown (medians, p99, ratio to the local row); --write also saves bench/BACKENDS.md.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";

import { httpExecutionBackend, localExecutionBackend, shellTools } from "../lib/index.mjs";
import { createCommandSessionRuntime } from "../lib/command-session.mjs";
import { BENCH_DIR, MIB, ROOT, fmtX, median, memStatus, resetPeak } from "./common.mjs";

/**
 * `--memory-child <case>`: one memory measurement in a fresh process (peak RSS growth over the
 * case, from VmHWM reset just before it), printed as one JSON line.
 */
async function memoryChild(which) {
  const cwd = os.tmpdir();
  const env = { PATH: process.env.PATH };
  const GiB = 1024 * MIB;
  // Warm the addon and the launcher so their one-time cost is not counted.
  const local = localExecutionBackend();
  await local.exec({ command: "true", args: [], cwd, env, timeoutMs: 10_000, maxOutputBytes: 1024 });
  const sessions = createCommandSessionRuntime({ maxSessions: 8, maxOutputBytes: 4 * MIB });
  const reset = resetPeak();
  const before = memStatus();
  const t0 = performance.now();
  let detail;
  if (which === "exec-1gib") {
    const r = await local.exec({ command: "sh", args: ["-c", "yes 0123456789abcdef | head -c 1073741824"], cwd, env, timeoutMs: 120_000, maxOutputBytes: 1 * MIB });
    detail = `exit ${r.code}, truncated ${r.truncated}, ${r.stdout.length} chars kept of 1 GiB`;
  } else if (which === "node-1gib") {
    // Node's spawn reading the same stream, keeping the first 1 MiB (what a careful caller does).
    detail = await new Promise((resolve) => {
      const child = spawn("sh", ["-c", "yes 0123456789abcdef | head -c 1073741824"], { cwd, env, stdio: ["ignore", "pipe", "ignore"] });
      const kept = [];
      let keptBytes = 0;
      let total = 0;
      child.stdout.on("data", (c) => {
        total += c.length;
        if (keptBytes < MIB) {
          kept.push(c.subarray(0, MIB - keptBytes));
          keptBytes += Math.min(c.length, MIB - keptBytes);
        }
      });
      child.once("close", (code) => resolve(`exit ${code}, ${total} bytes read, ${keptBytes} kept`));
    });
  } else if (which === "sessions-8x100mb") {
    const ids = [];
    for (let i = 0; i < 8; i++) {
      const { sessionId } = await sessions.start({ command: "sh", args: ["-c", "yes 0123456789abcdef | head -c 100000000"], cwd, env, timeoutMs: 120_000 });
      ids.push(sessionId);
    }
    const states = [];
    for (const sessionId of ids) {
      let r;
      do r = await sessions.read({ sessionId, cursor: 0, limit: 16, waitMs: 30_000 });
      while (r.state === "running");
      states.push(`${r.state}:${r.availableTo}`);
    }
    const kept = sessions.list().map((s) => s.availableTo - s.availableFrom);
    detail = `${states.filter((x) => x.startsWith("exited:100000000")).length}/8 exited after 100,000,000 bytes; ${(kept.reduce((a, b) => a + b, 0) / MIB).toFixed(1)} MiB retained in all`;
  } else {
    throw new Error(`unknown memory case ${which}`);
  }
  const ms = performance.now() - t0;
  const after = memStatus();
  await sessions.close();
  await local.close();
  console.log(JSON.stringify({ which, reset, ms, growth: (reset ? after.hwm : after.rss) - before.rss, detail }));
}

if (process.argv[2] === "--memory-child") {
  await memoryChild(process.argv[3]);
  process.exit(0);
}

const argv = process.argv.slice(2);
const runsAt = argv.indexOf("--runs");
const RUNS = runsAt >= 0 ? Number(argv[runsAt + 1]) : 500;
const WARMUP = 20;
const TOKEN = "knap-bench-token-0123456789abcdef";

const lines = [];
const out = (line = "") => {
  console.log(line);
  lines.push(line);
};
const progress = (text) => process.stderr.write(`  … ${text}\n`);

const p = (values, q) => {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const us = (ms) => `${(ms * 1000).toFixed(0)} µs`;

/**
 * Runs each `[label, fn]` WARMUP + RUNS times, the entries interleaved call by call (so load
 * from other processes lands on every row alike), one call at a time. Per row: p50 and p99 (ms).
 */
async function measure(entries) {
  progress(entries.map(([label]) => label).join(" | "));
  const times = entries.map(() => []);
  for (let i = 0; i < WARMUP + RUNS; i++) {
    for (let j = 0; j < entries.length; j++) {
      const t0 = performance.now();
      await entries[j][1]();
      if (i >= WARMUP) times[j].push(performance.now() - t0);
    }
  }
  return entries.map(([label], j) => ({ label, p50: median(times[j]), p99: p(times[j], 0.99) }));
}

function table(rows, baseline) {
  out("| path | p50 | p99 | p50 ÷ local |");
  out("| --- | ---: | ---: | ---: |");
  for (const r of rows) out(`| ${r.label} | ${us(r.p50)} | ${us(r.p99)} | ${fmtX(r.p50 / baseline.p50)} |`);
}

// ---------------------------------------------------------------------------------------------

const work = fs.mkdtempSync(path.join(os.tmpdir(), "knap-bench-backends-"));
const workspace = path.join(work, "ws");
fs.mkdirSync(workspace);
fs.writeFileSync(path.join(workspace, "small.txt"), "x".repeat(1023) + "\n");
const tokenFile = path.join(work, "token");
fs.writeFileSync(tokenFile, TOKEN + "\n");

async function startServer() {
  const shim = path.join(ROOT, "bin", "knap-exec-server.mjs");
  const child = spawn(process.execPath, [shim, "--workspace", workspace, "--listen", "127.0.0.1:0", "--token-file", tokenFile], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  const url = await new Promise((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).once("line", (line) => {
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) resolve(m[1]);
      else reject(new Error(`knap-exec-server: ${line}`));
    });
    child.once("exit", (code) => reject(new Error(`knap-exec-server exited ${code} (run npm run build)`)));
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  // The shim's child is the server binary: its VmHWM (peak RSS).
  const peakRss = () => {
    try {
      const kids = fs.readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim().split(/\s+/);
      const status = fs.readFileSync(`/proc/${kids[0]}/status`, "utf8");
      return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)[1]) * 1024;
    } catch {
      return undefined;
    }
  };
  return { url, peakRss, stop: () => (child.kill("SIGTERM"), exited) };
}

/** Node's own spawn-to-exit for one command, output collected as the backends do. */
function nodeSpawn(command, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: workspace, env: { PATH: process.env.PATH }, stdio: ["ignore", "pipe", "pipe"] });
    const chunks = [];
    child.stdout.on("data", (c) => chunks.push(c));
    child.stderr.on("data", (c) => chunks.push(c));
    child.once("error", reject);
    child.once("close", (code) => resolve(code));
  });
}

/** An execution backend in plain JS: child_process for exec, node:fs for files. */
const nodeBackend = {
  id: "node",
  exec: (request) =>
    new Promise((resolve) => {
      const child = spawn(request.command, request.args, { cwd: request.cwd, env: request.env, stdio: ["ignore", "pipe", "pipe"], signal: request.signal });
      const stdout = [];
      const stderr = [];
      child.stdout.on("data", (c) => stdout.push(c));
      child.stderr.on("data", (c) => stderr.push(c));
      child.once("error", (e) => resolve({ stdout: "", stderr: String(e.message), code: 127, timedOut: false, truncated: false, startFailed: true }));
      child.once("close", (code) => resolve({ stdout: Buffer.concat(stdout).toString(), stderr: Buffer.concat(stderr).toString(), code, timedOut: false, truncated: false }));
    }),
  readFile: async (file, options) => {
    const data = await fs.promises.readFile(file);
    return options?.maxBytes === undefined ? data : data.subarray(0, options.maxBytes);
  },
  writeFile: (file, data) => fs.promises.writeFile(file, data),
};

const server = await startServer();
const local = localExecutionBackend();
const http = httpExecutionBackend({ url: server.url, token: TOKEN });
// A JS object, not the local backend itself (only localExecutionBackend()'s own object is local).
const forwarding = { id: "forwarding", exec: (r) => local.exec(r), readFile: (f, o) => local.readFile(f, o), writeFile: (f, d) => local.writeFile(f, d) };

const request = { command: "true", args: [], cwd: workspace, env: { PATH: process.env.PATH }, timeoutMs: 10_000, maxOutputBytes: 1 << 20 };
const toolsOver = (executionBackend) => {
  const set = shellTools({ workspace, ...(executionBackend ? { executionBackend } : {}) });
  return { ...Object.fromEntries(set.map((t) => [t.name, t])), close: () => set.close() };
};
const sets = {
  local: toolsOver(undefined),
  forwarding: toolsOver(forwarding),
  node: toolsOver(nodeBackend),
  http: toolsOver(http),
};

const started = new Date();
try {
  const exec = await measure([
    ["child_process.spawn(true)", () => nodeSpawn("true", [])],
    ["localExecutionBackend().exec(true)", () => local.exec(request)],
    ["httpExecutionBackend().exec(true) → knap-exec-server", () => http.exec(request)],
  ]);
  const bash = await measure([
    ["bash over the local backend", () => sets.local.bash.execute({ command: "true" })],
    ["bash over a JS backend forwarding to localExecutionBackend()", () => sets.forwarding.bash.execute({ command: "true" })],
    ["bash over a JS backend on child_process", () => sets.node.bash.execute({ command: "true" })],
    ["bash over httpExecutionBackend() → knap-exec-server", () => sets.http.bash.execute({ command: "true" })],
  ]);
  const read = await measure([
    ["read_file 1 KiB, local", () => sets.local.read_file.execute({ path: "small.txt" })],
    ["read_file 1 KiB, JS backend forwarding to local", () => sets.forwarding.read_file.execute({ path: "small.txt" })],
    ["read_file 1 KiB, JS backend on node:fs", () => sets.node.read_file.execute({ path: "small.txt" })],
    ["read_file 1 KiB, httpExecutionBackend()", () => sets.http.read_file.execute({ path: "small.txt" })],
  ]);
  // A 1 GiB /read: the server refuses it by its size (413) before reading; its peak RSS says
  // nothing was buffered.
  progress("1 GiB /read");
  const big = path.join(workspace, "big.bin");
  fs.writeFileSync(big, "");
  fs.truncateSync(big, 1024 ** 3);
  const t0 = performance.now();
  const refused = await http.readFile(big).then(
    () => "read whole (unexpected)",
    (e) => e.code ?? e.message,
  );
  const bigMs = performance.now() - t0;
  const serverPeak = server.peakRss();
  const memory = [];
  for (const which of ["exec-1gib", "node-1gib", "sessions-8x100mb"]) {
    progress(`memory: ${which}`);
    const child = spawn(process.execPath, [path.join(BENCH_DIR, "backends.mjs"), "--memory-child", which], { stdio: ["ignore", "pipe", "inherit"] });
    let text = "";
    child.stdout.on("data", (c) => (text += c));
    await new Promise((resolve) => child.once("close", resolve));
    memory.push(JSON.parse(text.trim().split("\n").at(-1)));
  }
  for (const set of [exec, bash, read]) for (const r of set) if (!Number.isFinite(r.p50)) throw new Error(`${r.label}: no measurement`);

  out("# Execution backends: cost per call");
  out();
  out(`\`node bench/backends.mjs\` on ${started.toISOString().slice(0, 10)}: ${os.cpus().length} cores (${os.cpus()[0]?.model?.trim()}), Node ${process.version}, ` +
    `${RUNS} sequential calls per row after ${WARMUP} warm-up calls; the machine was shared with other builds, so read the ratios rather than the absolute times. ` +
    "knap-exec-server runs on 127.0.0.1 in its default configuration (release build).");
  out();
  out("## `backend.exec({ command: \"true\" })`");
  out();
  out("Spawn to result, output collected. The local backend spawns through knap's launcher (a child subreaper, so a command's background children die with it); the HTTP backend adds a loopback POST /exec, JSON both ways, and the same launcher on the server.");
  out();
  table(exec.slice(1), exec[1]);
  out(`| Node child_process.spawn (reference point) | ${us(exec[0].p50)} | ${us(exec[0].p99)} | ${fmtX(exec[0].p50 / exec[1].p50)} |`);
  out();
  out(`Local backend ÷ Node spawn: ${fmtX(exec[1].p50 / exec[0].p50)} (target ≤ 1.2×: ${exec[1].p50 / exec[0].p50 <= 1.2 ? "PASS" : "FAIL"}). HTTP ÷ local: ${fmtX(exec[2].p50 / exec[1].p50)}.`);
  out();
  out("## The bash tool (`sh -c true`) over each backend");
  out();
  out("What an agent's tool call costs, tool formatting included. A JS backend is any object with `exec`/`readFile`/`writeFile`: the Rust tool calls it through the binding.");
  out();
  table(bash, bash[0]);
  out();
  out("## read_file of a 1 KiB file over each backend");
  out();
  out("The local tools read in-process; every other backend goes through `readFile` (for HTTP, POST /read with a base64 body).");
  out();
  table(read, read[0]);
  out();
  out("## A 1 GiB `/read`");
  out();
  out(`httpExecutionBackend().readFile of a 1 GiB file: ${refused} after ${bigMs.toFixed(1)} ms (the server's --max-read-bytes is 48 MiB by default); ` +
    `knap-exec-server's peak RSS over the whole bench: ${serverPeak === undefined ? "not readable" : `${(serverPeak / 1024 / 1024).toFixed(1)} MiB`}.`);
  out();
  out("## Memory: 1 GiB of output, and 8 sessions printing 100 MB each");
  out();
  out("Each case in a fresh Node process; peak RSS growth is VmHWM (reset just before the case) minus RSS before it.");
  out();
  out("| case | time | peak RSS growth | result |");
  out("| --- | ---: | ---: | --- |");
  const label = {
    "exec-1gib": "localExecutionBackend().exec printing 1 GiB, maxOutputBytes 1 MiB",
    "node-1gib": "Node spawn reading the same 1 GiB, keeping 1 MiB",
    "sessions-8x100mb": "8 command sessions × 100 MB (4 MiB ring each)",
  };
  for (const m of memory) out(`| ${label[m.which]} | ${(m.ms / 1000).toFixed(2)} s | ${(m.growth / MIB).toFixed(1)} MiB | ${m.detail} |`);
  const sessionsRow = memory.find((m) => m.which === "sessions-8x100mb");
  out();
  out(`Command sessions: RSS growth ${(sessionsRow.growth / MIB).toFixed(1)} MiB against 8 × 4 MiB = 32 MiB of retained output (target: bounded by the retention limits: ${sessionsRow.growth <= 40 * MIB ? "PASS" : "FAIL"}, with 8 MiB allowed for buffers in flight).`);
  out();
  out("Overhead of the JS-backend bridge alone (forwarding row − local row, p50): " +
    `exec ${us(bash[1].p50 - bash[0].p50)}, read ${us(read[1].p50 - read[0].p50)}.`);
} finally {
  for (const set of Object.values(sets)) await set.close();
  await server.stop();
  await local.close();
  fs.rmSync(work, { recursive: true, force: true });
}

if (argv.includes("--write")) {
  fs.writeFileSync(path.join(BENCH_DIR, "BACKENDS.md"), lines.join("\n") + "\n");
  progress("wrote bench/BACKENDS.md");
}
