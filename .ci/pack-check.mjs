// Checks what `npm pack` would publish, for knap and for the companion package in
// packages/coding-agent: the entry points, bins and typings are in, the build tree and tests are
// out, and every relative link in the packed READMEs resolves inside that package's tarball.
//
//   node .ci/pack-check.mjs [dir ...]      (default: the repository root and packages/coding-agent)
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dirs = process.argv.length > 2 ? process.argv.slice(2) : [root, path.join(root, "packages", "coding-agent")];

let failed = 0;
for (const dir of dirs) {
  const problems = check(path.resolve(dir));
  console.log(`pack-check ${path.relative(root, path.resolve(dir)) || "."}: ${problems.files} files, ${problems.length} problems`);
  for (const p of problems) console.log(`  ${p}`);
  failed += problems.length;
}
process.exit(failed ? 1 : 0);

function check(dir) {
  const [{ files }] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: dir, encoding: "utf8" }));
  const packed = new Set(files.map((f) => f.path));
  const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
  const problems = [];

  const required = ["package.json", "README.md"];
  if (dir === root) required.push("index.js", "index.d.ts", "knap.linux-x64-gnu.node", "knap-exec-server");
  for (const target of Object.values(pkg.bin ?? {})) required.push(target);
  for (const field of ["main", "types"]) if (typeof pkg[field] === "string") required.push(pkg[field]);
  for (const entry of Object.values(pkg.exports ?? {})) {
    if (typeof entry === "string") required.push(entry);
    else for (const target of Object.values(entry)) if (typeof target === "string") required.push(target);
  }
  for (const f of new Set(required.map((f) => f.replace(/^\.\//, "")))) {
    if (!f.includes("*") && !packed.has(f)) problems.push(`missing from the tarball: ${f}`);
  }

  for (const f of packed) {
    if (/^(target|crates|src|__test__|node_modules|npm|\.ci|\.github|scripts)\//.test(f) || f.endsWith(".tgz")) problems.push(`should not be packed: ${f}`);
  }

  for (const readme of [...packed].filter((f) => f.endsWith(".md"))) {
    const text = readFileSync(path.join(dir, readme), "utf8");
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target) || target.startsWith("#")) continue;
      const rel = path.posix.normalize(path.posix.join(path.posix.dirname(readme), target.split("#")[0]));
      if (!packed.has(rel) && ![...packed].some((p) => p.startsWith(`${rel}/`))) problems.push(`${readme}: link ${target} does not resolve in the tarball`);
    }
  }
  problems.files = packed.size;
  return problems;
}
