// The grep bench's search tree and the plain Node.js grep it is compared with.
//
// The tree is generated deterministically under bench/.data/tree (gitignored): 26,000 text
// files of pseudo-source in 40×25 directories, about 150 MB. It has no .gitignore, no .ignore,
// no hidden files and no binary files, so knap, `rg` and the Node grep all search exactly the
// same files. Each pattern's matches are planted in a known, small set of files (fewer than
// 200 lines in all), so every tool scans every file in full and no result is cut by knap's
// 200-line limit or rg's per-file `--max-count 200`.
import fs from "node:fs";
import path from "node:path";
import { DATA_DIR, prng } from "./common.mjs";

const VERSION = 1;
const TOP = 40;
const SUB = 25;
const PER_DIR = 26;
const EXTENSIONS = ["rs", "ts", "js", "md", "txt"];

export const TREE_DIR = path.join(DATA_DIR, "tree");
const STAMP = path.join(DATA_DIR, "tree.json");

/** The patterns searched; `plant(i, rand)` returns the line planted in file `i`, or null. */
export const PATTERNS = [
  {
    name: "literal",
    pattern: "knap_needle_literal",
    plant: (i) => (i % 211 === 7 ? `    let knap_needle_literal = ${i};` : null),
  },
  {
    name: "regex, inner literal",
    pattern: String.raw`fn\s+\w+_impl_needle\b`,
    plant: (i) => (i % 227 === 13 ? `pub fn parse${i % 7}_impl_needle(x: u32) -> u32 {` : null),
  },
  {
    name: "regex, no literal",
    pattern: String.raw`\b[A-Z]{3}[0-9]{6}[a-z]{2}\b`,
    plant: (i, rand) => {
      if (i % 241 !== 3) return null;
      const up = () => String.fromCharCode(65 + Math.floor(rand() * 26));
      const lo = () => String.fromCharCode(97 + Math.floor(rand() * 26));
      const digits = String(100000 + Math.floor(rand() * 900000));
      return `    // ticket ${up()}${up()}${up()}${digits}${lo()}${lo()} reopened`;
    },
  },
];

const WORDS = (
  "let const mut fn pub struct impl trait enum match if else for while loop return async await self " +
  "value result error option some none string vec map buffer reader writer stream token parse emit walk " +
  "path file line count index offset limit cap store handle policy tool call input output decide bench " +
  "config context state event signal abort timeout child process group kill spawn wait drain pipe " +
  "ParseError ToolOutput WalkState Matcher Searcher Sink Collector Decision Policy Runtime Handle"
).split(" ");
const PUNCT = [" = ", "(", ")", ", ", ".", "::", " { ", " }", ";", " -> ", " + ", " => ", "[", "]", ": "];

function linePool(rand) {
  const pool = [];
  for (let i = 0; i < 8192; i++) {
    const indent = " ".repeat(2 * Math.floor(rand() * 4));
    let line = indent;
    const tokens = 3 + Math.floor(rand() * 12);
    for (let t = 0; t < tokens; t++) {
      const r = rand();
      if (r < 0.62) line += WORDS[Math.floor(rand() * WORDS.length)];
      else if (r < 0.9) line += PUNCT[Math.floor(rand() * PUNCT.length)];
      else line += String(Math.floor(rand() * 10000));
    }
    pool.push(line);
  }
  return pool;
}

/** Generates the tree unless an up-to-date one exists. Returns its description. */
export function ensureTree(log = () => {}) {
  try {
    const stamp = JSON.parse(fs.readFileSync(STAMP, "utf8"));
    if (stamp.version === VERSION && fs.existsSync(TREE_DIR)) return { ...stamp, reused: true };
  } catch {}
  log(`generating ${TOP * SUB * PER_DIR} files under ${path.relative(process.cwd(), TREE_DIR)} ...`);
  fs.rmSync(TREE_DIR, { recursive: true, force: true });
  fs.rmSync(STAMP, { force: true });
  const rand = prng(0x6b6e6170);
  const pool = linePool(rand);
  const planted = Object.fromEntries(PATTERNS.map((p) => [p.name, 0]));
  let files = 0;
  let bytes = 0;
  for (let d = 0; d < TOP; d++) {
    for (let s = 0; s < SUB; s++) {
      const dir = path.join(TREE_DIR, `pkg${String(d).padStart(2, "0")}`, `mod${String(s).padStart(2, "0")}`);
      fs.mkdirSync(dir, { recursive: true });
      for (let f = 0; f < PER_DIR; f++) {
        const i = files++;
        const lines = [];
        const n = 20 + Math.floor(rand() * 160);
        for (let l = 0; l < n; l++) lines.push(pool[Math.floor(rand() * pool.length)]);
        for (const p of PATTERNS) {
          const planted_line = p.plant(i, rand);
          if (planted_line !== null) {
            lines.splice(Math.floor(rand() * lines.length), 0, planted_line);
            planted[p.name]++;
          }
        }
        const text = lines.join("\n") + "\n";
        bytes += Buffer.byteLength(text);
        fs.writeFileSync(path.join(dir, `file${String(f).padStart(2, "0")}.${EXTENSIONS[i % EXTENSIONS.length]}`), text);
      }
    }
  }
  const stamp = { version: VERSION, files, bytes, planted };
  fs.writeFileSync(STAMP, JSON.stringify(stamp));
  return { ...stamp, reused: false };
}

/**
 * A lean synchronous Node.js grep: recursive readdirSync, readFileSync as UTF-8, split on
 * "\n", RegExp.test per line; hidden entries skipped, at most 200 matches per file. Returns
 * rg-style `./path:line:text` lines.
 */
export function nodeGrep(root, pattern) {
  const re = new RegExp(pattern);
  const out = [];
  const walk = (dir, rel) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (entry.name.startsWith(".")) continue;
      const abs = `${dir}/${entry.name}`;
      const shown = `${rel}/${entry.name}`;
      if (entry.isDirectory()) walk(abs, shown);
      else if (entry.isFile()) {
        const lines = fs.readFileSync(abs, "utf8").split("\n");
        let found = 0;
        for (let i = 0; i < lines.length; i++) {
          if (re.test(lines[i])) {
            out.push(`${shown}:${i + 1}:${lines[i]}`);
            if (++found >= 200) break;
          }
        }
      }
    }
  };
  walk(root, ".");
  return out;
}
