// One memory-measured case, run in a fresh process by run.mjs:
//   node --expose-gc bench/child.mjs <case> <arg>
// It warms the code path up on a tiny input, resets the peak-RSS counter (VmHWM) to the current
// RSS, runs the case once, and prints one JSON line: wall time, peak RSS growth over the RSS at
// the reset, and a short description of the result.
import fs from "node:fs";
import path from "node:path";
import { spawn, exec } from "node:child_process";
import { shellTools } from "../lib/index.mjs";
import { DATA_DIR, MIB, memStatus, resetPeak } from "./common.mjs";

const PROCESS_CAPTURE_MAX_BYTES = 4 * MIB;
const [kind, arg] = process.argv.slice(2);

function toolsIn(workspace) {
  return Object.fromEntries(shellTools({ workspace }).map((t) => [t.name, t]));
}

/** The reference's read_file: whole file as UTF-8, split, number, join, then cap (head). */
async function referenceReadFile(abs) {
  const text = await fs.promises.readFile(abs, "utf8");
  const numbered = text
    .split("\n")
    .map((line, i) => `${i + 1}\t${line}`)
    .join("\n");
  const total = Buffer.byteLength(numbered);
  return `${Buffer.from(numbered).subarray(0, 24_000 - 120).toString()}\n[output capped from ${total} captured bytes]`;
}

/** The reference's process capture: spawn, keep the first 4 MiB of output, drain the rest. */
function referenceCapture(command) {
  return new Promise((resolve, reject) => {
    const child = spawn("/bin/sh", ["-c", command], { stdio: ["ignore", "pipe", "pipe"] });
    const chunks = [];
    let used = 0;
    let total = 0;
    const onData = (chunk) => {
      total += chunk.length;
      const room = PROCESS_CAPTURE_MAX_BYTES - used;
      if (room > 0) {
        const kept = chunk.length <= room ? chunk : chunk.subarray(0, room);
        chunks.push(kept);
        used += kept.length;
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("error", reject);
    child.on("close", (code) => {
      const text = Buffer.concat(chunks).toString("utf8");
      resolve({ code, total, text: text.slice(-24_000) });
    });
  });
}

/** `child_process.exec` collecting everything (maxBuffer raised so it does not kill the child). */
function execAll(command, maxBuffer) {
  return new Promise((resolve, reject) => {
    exec(command, { maxBuffer }, (error, stdout) => (error ? reject(error) : resolve(stdout)));
  });
}

const cases = {
  async "read_file:knap"() {
    const abs = path.resolve(arg);
    const tools = toolsIn(path.dirname(abs));
    fs.writeFileSync(path.join(path.dirname(abs), "warm.txt"), "a\nb\n");
    await tools.read_file.execute({ path: "warm.txt" });
    return async () => {
      const out = await tools.read_file.execute({ path: path.basename(abs) });
      return `${out.length} chars; ${/\[caveman-code: output capped from (\d+)/.exec(out)?.[1] ?? "?"} bytes numbered`;
    };
  },
  async "read_file:node"() {
    const abs = path.resolve(arg);
    const warm = path.join(path.dirname(abs), "warm.txt");
    fs.writeFileSync(warm, "a\nb\n");
    await referenceReadFile(warm);
    return async () => {
      try {
        const out = await referenceReadFile(abs);
        return `${out.length} chars; ${/capped from (\d+)/.exec(out)?.[1]} bytes numbered`;
      } catch (error) {
        return `failed: ${error.code ?? error.message}`;
      }
    };
  },
  async "bash:knap"() {
    const tools = toolsIn(DATA_DIR);
    await tools.bash.execute({ command: "echo warm" });
    return async () => {
      const out = await tools.bash.execute({ command: `yes | head -c ${arg}` });
      return `${out.split("\n", 1)[0]}; ${out.length} chars; ${/output capped from (\d+ captured bytes[^;]*)/.exec(out)?.[1] ?? "?"}`;
    };
  },
  async "bash:node-capped"() {
    await referenceCapture("echo warm");
    return async () => {
      const r = await referenceCapture(`yes | head -c ${arg}`);
      return `exit ${r.code}; ${r.total} bytes read, 4 MiB kept`;
    };
  },
  async "bash:node-exec"() {
    await execAll("echo warm", 1024);
    return async () => {
      const out = await execAll(`yes | head -c ${arg}`, Number(arg) + MIB);
      return `${out.length} chars kept`;
    };
  },
};

const prepare = cases[kind];
if (!prepare) {
  console.error(`unknown case ${kind}`);
  process.exit(2);
}
const run = await prepare();
globalThis.gc?.();
await new Promise((r) => setTimeout(r, 50));
const reset = resetPeak();
const before = memStatus();
const t0 = performance.now();
const detail = await run();
const ms = performance.now() - t0;
const after = memStatus();
const growth = reset ? after.hwm - before.rss : Math.max(0, after.hwm - before.hwm);
process.stdout.write(JSON.stringify({ kind, ms, growth, baseRss: before.rss, peakReset: reset, detail }) + "\n");
