// Large tool arguments and the event loop: how long the JS thread stalls (largest gap between
// ticks of a 1 ms setInterval probe) and how much RSS grows while one call with a 100 MB argument
// runs, for shellTools write_file/edit_file and the AI SDK Write/Edit, next to Node's own
// `fs.promises.writeFile` of the same string measured in the same run (the floor: encoding a JS
// string to bytes happens on the JS thread for any consumer). Each case runs in a fresh process.
// Then the event-loop utilization (share of wall time the JS thread was busy) over 40 calls on a
// 1,000-deep path, next to `fs.promises.readFile`/`writeFile` of the same path (libuv's pool).
//
//   node bench/args.mjs [--mb 100] [--runs 3]
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { median, memStatus, resetPeak, MIB } from "./common.mjs";

const CASES = ["fs.promises.writeFile", "shellTools write_file", "shellTools edit_file", "AI SDK Write", "AI SDK Edit"];
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};

async function child(name, mb) {
  const root = fileURLToPath(new URL("..", import.meta.url));
  const { shellTools } = await import(path.join(root, "lib/index.mjs"));
  const { createAgentTools, createLocalSandbox } = await import(path.join(root, "lib/ai-sdk/index.mjs"));
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), "knap-args-"));
  fs.writeFileSync(path.join(ws, "small.txt"), "alpha MARK omega\n");
  const big = "x".repeat(mb * MIB);
  const tools = Object.fromEntries(shellTools({ workspace: ws }).map((t) => [t.name, t]));
  const sb = createLocalSandbox({ cwd: ws });
  const { tools: ai } = await createAgentTools(sb);
  const calls = {
    "fs.promises.writeFile": () => fs.promises.writeFile(path.join(ws, "node.txt"), big),
    "shellTools write_file": () => tools.write_file.execute({ path: "w.txt", content: big, overwrite: true }),
    "shellTools edit_file": () => tools.edit_file.execute({ path: "small.txt", old_string: "MARK", new_string: big }),
    "AI SDK Write": () => ai.Write.execute({ file_path: "w2.txt", content: big }, {}),
    "AI SDK Edit": () => ai.Edit.execute({ file_path: "small.txt", old_string: "MARK", new_string: big }, {}),
  };
  // Warm up the paths with a small argument.
  await tools.write_file.execute({ path: "warm.txt", content: "w", overwrite: true });
  await ai.Write.execute({ file_path: "warm2.txt", content: "w" }, {});
  global.gc?.();
  resetPeak();
  const before = memStatus().rss;
  let last = performance.now();
  let maxGap = 0;
  const probe = setInterval(() => {
    const now = performance.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
  }, 1);
  const t0 = performance.now();
  last = t0;
  const r = await calls[name]();
  const ms = performance.now() - t0;
  const now = performance.now();
  maxGap = Math.max(maxGap, now - last);
  clearInterval(probe);
  const peak = memStatus().hwm;
  if (r && typeof r === "object" && r.error) throw new Error(r.error);
  await sb.destroy();
  fs.rmSync(ws, { recursive: true, force: true });
  process.stdout.write(JSON.stringify({ ms, maxGap, rssMb: (peak - before) / MIB }));
}

/** Event-loop utilization over 40 calls of each case on a 1,000-deep path. */
async function deep() {
  const root = fileURLToPath(new URL("..", import.meta.url));
  const { shellTools } = await import(path.join(root, "lib/index.mjs"));
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), "knap-deep-"));
  const rel = Array(1000).fill("d").join("/");
  fs.mkdirSync(path.join(ws, rel), { recursive: true });
  fs.writeFileSync(path.join(ws, rel, "f.txt"), "deep\n");
  const tools = Object.fromEntries(shellTools({ workspace: ws }).map((t) => [t.name, t]));
  const abs = (name) => path.join(ws, rel, name);
  const cases = {
    "fs.promises.readFile": () => fs.promises.readFile(abs("f.txt"), "utf8"),
    "shellTools read_file": () => tools.read_file.execute({ path: `${rel}/f.txt` }),
    "fs.promises.writeFile": () => fs.promises.writeFile(abs("w.txt"), "w"),
    "shellTools write_file": () => tools.write_file.execute({ path: `${rel}/w.txt`, content: "w", overwrite: true }),
  };
  const out = {};
  for (const [name, call] of Object.entries(cases)) {
    await call();
    const e0 = performance.eventLoopUtilization();
    for (let i = 0; i < 40; i++) await call();
    out[name] = performance.eventLoopUtilization(e0).utilization;
  }
  fs.rmSync(ws, { recursive: true, force: true });
  return out;
}

if (args[0] === "--child") {
  await child(args[1], Number(args[2]));
} else if (args[0] === "--deep") {
  process.stdout.write(JSON.stringify(await deep()));
} else {
  const mb = opt("mb", 100);
  const runs = opt("runs", 3);
  const results = Object.fromEntries(CASES.map((c) => [c, []]));
  for (let r = 0; r < runs; r++) {
    for (const name of CASES) {
      const out = spawnSync(process.execPath, ["--expose-gc", fileURLToPath(import.meta.url), "--child", name, String(mb)], { encoding: "utf8", maxBuffer: 1 << 20 });
      if (out.status !== 0) throw new Error(`${name}: ${out.stderr}`);
      results[name].push(JSON.parse(out.stdout));
    }
  }
  const floor = median(results["fs.promises.writeFile"].map((x) => x.maxGap));
  console.log(`## One call with a ${mb} MB string argument (median of ${runs} fresh processes)\n`);
  console.log("| case | call ms | longest event-loop stall ms | stall / fs.promises.writeFile's | peak RSS growth MB |");
  console.log("|---|---:|---:|---:|---:|");
  for (const name of CASES) {
    const m = (k) => median(results[name].map((x) => x[k]));
    console.log(`| ${name} | ${m("ms").toFixed(0)} | ${m("maxGap").toFixed(0)} | ${(m("maxGap") / floor).toFixed(2)}x | ${m("rssMb").toFixed(0)} |`);
  }
  const deeps = [];
  for (let r = 0; r < runs; r++) {
    const out = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--deep"], { encoding: "utf8" });
    if (out.status !== 0) throw new Error(`deep: ${out.stderr}`);
    deeps.push(JSON.parse(out.stdout));
  }
  console.log(`\n## 40 calls on a 1,000-deep path: event-loop utilization (median of ${runs} fresh processes)\n`);
  console.log("| case | utilization | / Node's own call |");
  console.log("|---|---:|---:|");
  for (const [name, base] of [["fs.promises.readFile"], ["shellTools read_file", "fs.promises.readFile"], ["fs.promises.writeFile"], ["shellTools write_file", "fs.promises.writeFile"]]) {
    const u = median(deeps.map((d) => d[name]));
    const b = base ? median(deeps.map((d) => d[base])) : u;
    console.log(`| ${name} | ${u.toFixed(2)} | ${(u / b).toFixed(2)}x |`);
  }
}
