// knap/ai-sdk against bashkit 0.7.1, same workload, one run:
//   node bench/ai-sdk.mjs            (build first: npx napi build --platform --release)
//
// bashkit's tools run on a small Node Sandbox written here (bashkit's own local sandbox needs
// Bun), with ripgrep from bashkit's dependency @vscode/ripgrep (or `rg` on the PATH); knap's on
// createLocalSandbox. Both sides call the tools' `execute` directly (no model in the loop).
// Timings are medians of several runs; memory is the peak RSS growth of a fresh child process
// running one call. Prints a Markdown table with the targets and PASS/FAIL.
import { execFile, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync, existsSync, readFileSync, statSync, readdirSync, rmSync, createWriteStream } from "node:fs";
import { readFile, writeFile, readdir, stat, unlink, rename, mkdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import os from "node:os";

const here = dirname(fileURLToPath(import.meta.url));
const DATA = join(here, ".data", "ai-sdk");
const BIG_TREE = join(DATA, "big-tree");
const SMALL_TREE = join(DATA, "small-tree");
const BIG_FILE_DIR = join(DATA, "big-file");
const BIG_FILE = join(BIG_FILE_DIR, "100mb.txt");
const TREE_FILES = 25_600;
const SMALL_FILES = 100;

// ------------------------------------------------------------------------------------ data

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = "const let function return import export from async await class interface type value data result error config index item list map filter reduce string number boolean".split(" ");
const EXTS = ["ts", "ts", "ts", "js", "js", "md", "json", "py", "go", "rs"];

const TREE_VERSION = "2";

function makeTree(root, files, seed) {
  const marker = join(root, ".complete");
  if (existsSync(marker) && readFileSync(marker, "utf8") === `${TREE_VERSION}:${files}`) return;
  rmSync(root, { recursive: true, force: true });
  const r = rng(seed);
  const perDir = 100;
  for (let i = 0; i < files; i++) {
    const dir = join(root, `pkg${Math.floor(i / perDir / 16)}`, `mod${Math.floor(i / perDir)}`);
    if (i % perDir === 0) mkdirSync(dir, { recursive: true });
    // About 1% are .toml: a selective Glob pattern (under bashkit's 1,000-result cap).
    const ext = r() < 0.01 ? "toml" : EXTS[Math.floor(r() * EXTS.length)];
    const lines = 40 + Math.floor(r() * 80);
    let text = "";
    for (let l = 0; l < lines; l++) {
      let line = "";
      const n = 4 + Math.floor(r() * 8);
      for (let w = 0; w < n; w++) line += `${WORDS[Math.floor(r() * WORDS.length)]} `;
      text += `${line}${l}\n`;
    }
    // A rare token in about 1% of the files.
    if (r() < 0.01) text += "needle_in_haystack found here\n";
    writeFileSync(join(dir, `file${i}.${ext}`), text);
  }
  writeFileSync(join(root, ".gitignore"), "");
  writeFileSync(marker, `${TREE_VERSION}:${files}`);
}

function makeBigFile() {
  if (existsSync(BIG_FILE) && statSync(BIG_FILE).size >= 100 * 1024 * 1024) return;
  mkdirSync(BIG_FILE_DIR, { recursive: true });
  const line = `${"lorem ipsum dolor sit amet ".repeat(3)}`.slice(0, 99);
  const chunk = Buffer.from(Array.from({ length: 10_000 }, (_, i) => `${line}\n`).join(""));
  const fd = createWriteStream(BIG_FILE);
  return new Promise((done) => {
    let written = 0;
    const target = 100 * 1024 * 1024;
    const write = () => {
      while (written < target) {
        written += chunk.length;
        if (!fd.write(chunk)) return fd.once("drain", write);
      }
      fd.end(done);
    };
    write();
  });
}

// ------------------------------------------------------------------------------- sandboxes

const require = createRequire(import.meta.url);

function rgPath() {
  try {
    return require("@vscode/ripgrep").rgPath;
  } catch {
    const which = spawnSync("sh", ["-c", "command -v rg"]).stdout.toString().trim();
    return which || undefined;
  }
}

/** The bench's Node Sandbox for bashkit: sh -c through child_process, fs/promises for files. */
function nodeSandbox(cwd) {
  const full = (p) => resolve(cwd, p);
  return {
    rgPath: rgPath(),
    exec(command, options = {}) {
      const started = performance.now();
      return new Promise((done) => {
        execFile("/bin/sh", ["-c", command], { cwd: options.cwd ?? cwd, timeout: options.timeout ?? 0, maxBuffer: Infinity, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
          const interrupted = Boolean(error?.killed);
          const exitCode = error ? (typeof error.code === "number" ? error.code : 1) : 0;
          done({ stdout: String(stdout), stderr: String(stderr), exitCode, durationMs: Math.round(performance.now() - started), interrupted });
        });
      });
    },
    readFile: (p) => readFile(full(p), "utf8"),
    writeFile: async (p, c) => {
      await mkdir(dirname(full(p)), { recursive: true });
      await writeFile(full(p), c);
    },
    readDir: (p) => readdir(full(p)),
    fileExists: async (p) => stat(full(p)).then(() => true, () => false),
    isDirectory: async (p) => stat(full(p)).then((s) => s.isDirectory(), () => false),
    deleteFile: (p) => unlink(full(p)),
    rename: (a, b) => rename(full(a), full(b)),
    destroy: async () => {},
  };
}

async function toolsFor(side, cwd, config = {}) {
  if (side === "bashkit") {
    const { createAgentTools } = await import("bashkit");
    return (await createAgentTools(nodeSandbox(cwd), config)).tools;
  }
  const { createAgentTools, createLocalSandbox } = await import("knap/ai-sdk");
  return (await createAgentTools(createLocalSandbox({ workingDirectory: cwd }), config)).tools;
}

const opts = { toolCallId: "bench", messages: [] };

// --------------------------------------------------------------------------------- timing

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function timeIt(fn, runs, warmup = 1) {
  for (let i = 0; i < warmup; i++) await fn();
  const times = [];
  let last;
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    last = await fn();
    times.push(performance.now() - t);
  }
  return { ms: median(times), last };
}

/** Times both sides in alternating rounds, so a change in the machine's load hits both alike. */
async function timeBoth(fn, runs, warmup = 1) {
  const sides = ["bashkit", "knap"];
  for (let i = 0; i < warmup; i++) for (const side of sides) await fn(side);
  const times = { bashkit: [], knap: [] };
  const last = {};
  for (let i = 0; i < runs; i++) {
    for (const side of i % 2 ? [...sides].reverse() : sides) {
      const t = performance.now();
      last[side] = await fn(side);
      times[side].push(performance.now() - t);
    }
  }
  return { bashkit: { ms: median(times.bashkit), last: last.bashkit }, knap: { ms: median(times.knap), last: last.knap } };
}

// -------------------------------------------------------------------- child (memory) mode

async function child(side, what) {
  const cwd = what === "read" ? BIG_FILE_DIR : SMALL_TREE;
  const tools = await toolsFor(side, cwd);
  // Warm the code paths with small calls before the baseline.
  await tools.Read.execute({ file_path: join(SMALL_TREE, "pkg0/mod0/file0.ts").replace(`${cwd}/`, ""), offset: null, limit: null }, opts).catch(() => {});
  await tools.Bash.execute({ command: "echo warm", timeout: null, description: null, run_in_background: null }, opts);
  globalThis.gc?.();
  const base = process.memoryUsage().rss;
  const t = performance.now();
  let result;
  if (what === "read") result = await tools.Read.execute({ file_path: "100mb.txt", offset: 500_000, limit: 100 }, opts);
  else result = await tools.Bash.execute({ command: "head -c 50000000 /dev/zero | tr '\\0' 'a'", timeout: null, description: null, run_in_background: null }, opts);
  const ms = performance.now() - t;
  const peak = process.resourceUsage().maxRSS * 1024;
  const ok = what === "read" ? result.lines?.length === 100 : result.exit_code === 0 && result.stdout?.length > 30000;
  process.stdout.write(JSON.stringify({ growth: peak - base, ms, ok, error: result.error }));
}

function inChild(side, what) {
  const r = spawnSync(process.execPath, ["--expose-gc", fileURLToPath(import.meta.url), "--child", side, what], { encoding: "utf8", maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`child ${side} ${what} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

// ------------------------------------------------------------------------------------ main

const MiB = 1024 * 1024;
const fmtMs = (ms) => (ms >= 100 ? `${ms.toFixed(0)} ms` : ms >= 1 ? `${ms.toFixed(1)} ms` : `${(ms * 1000).toFixed(1)} µs`);
const fmtMiB = (b) => `${(b / MiB).toFixed(1)} MiB`;

function nativeBuild() {
  const file = process.env.NAPI_RS_NATIVE_LIBRARY_PATH ?? join(here, "..", "knap.linux-x64-gnu.node");
  const size = existsSync(file) ? statSync(file).size : 0;
  return { file, debug: size > 30 * 1024 * 1024 };
}

async function main() {
  console.error(`[bench] data in ${DATA}`);
  const build = nativeBuild();
  if (build.debug) console.error(`[bench] WARNING: ${build.file} looks like a debug build; build with --release (or set NAPI_RS_NATIVE_LIBRARY_PATH to a release .node)`);
  makeTree(BIG_TREE, TREE_FILES, 1);
  makeTree(SMALL_TREE, SMALL_FILES, 2);
  await makeBigFile();
  const rows = [];
  const add = (row) => {
    rows.push(row);
    console.error(`[bench] ${row.name}: bashkit ${row.bashkit}, knap ${row.knap}, ${row.ratio} → ${row.pass ? "PASS" : "FAIL"}`);
  };

  const sides = {};
  for (const side of ["bashkit", "knap"]) {
    sides[side] = {
      big: await toolsFor(side, BIG_TREE),
      // knap bounds Glob at 1,000 paths by default (with a note); `maxResults: 0` lifts it.
      bigAll: await toolsFor(side, BIG_TREE, side === "knap" ? { tools: { Glob: { maxResults: 0 } } } : {}),
      small: await toolsFor(side, SMALL_TREE),
      cached: await toolsFor(side, SMALL_TREE, { cache: true }),
    };
  }
  const grepInput = (pattern) => ({ pattern, path: null, glob: null, type: null, output_mode: null, "-i": null, "-n": null, "-B": null, "-A": null, "-C": null, head_limit: null, offset: null, multiline: null });

  // Grep over the big tree (rg is the physical limit there: target within 1.2x).
  const g = await timeBoth((side) => sides[side].big.Grep.execute(grepInput("needle_in_haystack"), opts), 7, 2);
  const same = JSON.stringify([...g.bashkit.last.files].sort()) === JSON.stringify([...g.knap.last.files].sort());
  add({
    name: `Grep, ${TREE_FILES.toLocaleString("en")} files (${g.knap.last.count} matching)`,
    bashkit: fmtMs(g.bashkit.ms),
    knap: fmtMs(g.knap.ms),
    ratio: `knap/bashkit ${(g.knap.ms / g.bashkit.ms).toFixed(2)}×`,
    target: "≤ 1.2× bashkit",
    pass: g.knap.ms <= 1.2 * g.bashkit.ms && same,
  });

  // Grep on a ~100-file workspace (process spawning dominates bashkit's).
  const gs = await timeBoth((side) => sides[side].small.Grep.execute(grepInput("return"), opts), 31, 3);
  add({
    name: `Grep, ${SMALL_FILES} files`,
    bashkit: fmtMs(gs.bashkit.ms),
    knap: fmtMs(gs.knap.ms),
    ratio: `${(gs.bashkit.ms / gs.knap.ms).toFixed(1)}× faster`,
    target: "≥ 3× faster",
    pass: gs.bashkit.ms >= 3 * gs.knap.ms && gs.knap.last.count === gs.bashkit.last.count,
  });

  // Glob over the big tree; a pattern under bashkit's 1,000 cap so both return the same set.
  const gl = await timeBoth((side) => sides[side].big.Glob.execute({ pattern: "*.toml", path: null }, opts), 11, 2);
  const globSame = JSON.stringify([...gl.bashkit.last.matches].sort()) === JSON.stringify([...gl.knap.last.matches].sort());
  add({
    name: `Glob \`*.toml\`, ${TREE_FILES.toLocaleString("en")} files (${gl.knap.last.count} matches)`,
    bashkit: fmtMs(gl.bashkit.ms),
    knap: fmtMs(gl.knap.ms),
    ratio: `${(gl.bashkit.ms / gl.knap.ms).toFixed(1)}× faster`,
    target: "≥ 2× faster",
    pass: gl.bashkit.ms >= 2 * gl.knap.ms && globSame,
  });
  // Every file. By default both return 1,000 paths: bashkit the first 1,000 `find` lists and
  // says nothing; knap the 1,000 newest, with `truncated` and a note counting the rest.
  const gd = await timeBoth((side) => sides[side].big.Glob.execute({ pattern: "**/*", path: null }, opts), 5, 1);
  add({
    name: "Glob `**/*` (every file), default bound",
    bashkit: `${fmtMs(gd.bashkit.ms)}, ${gd.bashkit.last.count} results, no note`,
    knap: `${fmtMs(gd.knap.ms)}, ${gd.knap.last.count} newest of ${gd.knap.last.truncated?.total}, with a note`,
    ratio: `knap/bashkit ${(gd.knap.ms / gd.bashkit.ms).toFixed(2)}×`,
    target: "1,000 results, the cut said",
    pass: gd.knap.last.count === 1000 && gd.knap.last.truncated?.total >= TREE_FILES && typeof gd.knap.last.note === "string",
  });
  // knap with `maxResults: 0`: every path (bashkit cannot return more than 1,000).
  const ga = await timeBoth((side) => sides[side].bigAll.Glob.execute({ pattern: "**/*", path: null }, opts), 5, 1);
  add({
    name: "Glob `**/*` (every file), knap `maxResults: 0`",
    bashkit: `${fmtMs(ga.bashkit.ms)}, ${ga.bashkit.last.count} results`,
    knap: `${fmtMs(ga.knap.ms)}, ${ga.knap.last.count} results`,
    ratio: "no cap in knap",
    target: `all ${TREE_FILES.toLocaleString("en")} files`,
    pass: ga.knap.last.count >= TREE_FILES,
  });

  // Memory: Read of a 100 MB file, Bash printing 50 MB (fresh child per call, 3 each).
  for (const [what, label] of [
    ["read", "Read of a 100 MB file (offset/limit), peak RSS growth"],
    ["bash", "Bash printing 50 MB, peak RSS growth"],
  ]) {
    const m = {};
    for (const side of ["bashkit", "knap"]) {
      const runs = [inChild(side, what), inChild(side, what), inChild(side, what)];
      if (!runs.every((r) => r.ok)) console.error(`[bench] ${side} ${what}: ${JSON.stringify(runs)}`);
      m[side] = { growth: median(runs.map((r) => r.growth)), ms: median(runs.map((r) => r.ms)), ok: runs.every((r) => r.ok) };
    }
    add({
      name: label,
      bashkit: `${fmtMiB(m.bashkit.growth)} (${fmtMs(m.bashkit.ms)})`,
      knap: `${fmtMiB(m.knap.growth)} (${fmtMs(m.knap.ms)})`,
      ratio: `${(m.bashkit.growth / Math.max(m.knap.growth, 1)).toFixed(0)}× less`,
      target: "knap < 16 MiB",
      pass: m.knap.growth < 16 * MiB && m.knap.ok,
    });
  }

  // 1,000 cached Reads of one file.
  const c = {};
  const someFile = readdirSync(join(SMALL_TREE, "pkg0", "mod0")).sort()[0];
  const readInput = { file_path: `pkg0/mod0/${someFile}`, offset: null, limit: null };
  for (const side of ["bashkit", "knap"]) {
    const tool = sides[side].cached.Read;
    c[side] = await timeIt(
      async () => {
        for (let i = 0; i < 1000; i++) await tool.execute(readInput, opts);
      },
      9,
      2,
    );
  }
  add({
    name: "1,000 cached Reads (per call)",
    bashkit: fmtMs(c.bashkit.ms / 1000),
    knap: fmtMs(c.knap.ms / 1000),
    ratio: `${(c.bashkit.ms / c.knap.ms).toFixed(1)}× faster`,
    target: "≤ bashkit",
    pass: c.knap.ms <= c.bashkit.ms && sides.knap.cached.Read.getStats().hits > 0,
  });

  const rg = spawnSync(rgPath() ?? "rg", ["--version"]).stdout?.toString().split("\n")[0] ?? "rg ?";
  const cpu = os.cpus()[0]?.model ?? "?";
  console.log(`\nknap/ai-sdk vs bashkit 0.7.1: ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} × ${cpu}, ${rg}\n`);
  console.log("| Workload | bashkit 0.7.1 | knap | Ratio | Target | |");
  console.log("|---|---|---|---|---|---|");
  for (const r of rows) console.log(`| ${r.name} | ${r.bashkit} | ${r.knap} | ${r.ratio} | ${r.target} | ${r.pass ? "PASS" : "FAIL"} |`);
  const failed = rows.filter((r) => !r.pass).length;
  console.log(`\n${rows.length - failed}/${rows.length} targets met.`);
  process.exitCode = failed ? 1 : 0;
}

if (process.argv[2] === "--child") await child(process.argv[3], process.argv[4]);
else await main();
