// Checks what `npm pack` would publish: the entry points and typings are in, the build tree and
// tests are out, and every relative link in the packed READMEs resolves inside the tarball.
import { execFileSync } from "node:child_process";
import path from "node:path";

const [{ files }] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { encoding: "utf8" }));
const packed = new Set(files.map((f) => f.path));
const problems = [];

const pkg = JSON.parse(execFileSync("npm", ["pkg", "get", "exports", "--json"], { encoding: "utf8" }));
const required = ["package.json", "README.md", "index.js", "index.d.ts", "knap.linux-x64-gnu.node", "knap-exec-server"];
const bins = JSON.parse(execFileSync("npm", ["pkg", "get", "bin", "--json"], { encoding: "utf8" }));
for (const target of Object.values(bins)) required.push(target.replace(/^\.\//, ""));
for (const entry of Object.values(pkg)) {
  if (typeof entry === "string") required.push(entry.replace(/^\.\//, ""));
  else for (const target of Object.values(entry)) if (typeof target === "string") required.push(target.replace(/^\.\//, ""));
}
for (const f of new Set(required)) if (!f.includes("*") && !packed.has(f)) problems.push(`missing from the tarball: ${f}`);

for (const f of packed) {
  if (/^(target|crates|src|__test__|node_modules|npm|\.ci|\.github|scripts)\//.test(f) || f.endsWith(".tgz")) problems.push(`should not be packed: ${f}`);
}

for (const readme of [...packed].filter((f) => f.endsWith(".md"))) {
  const text = execFileSync("cat", [readme], { encoding: "utf8" });
  for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/.test(target) || target.startsWith("#")) continue;
    const rel = path.posix.normalize(path.posix.join(path.posix.dirname(readme), target.split("#")[0]));
    if (!packed.has(rel) && ![...packed].some((p) => p.startsWith(`${rel}/`))) problems.push(`${readme}: link ${target} does not resolve in the tarball`);
  }
}

console.log(`pack-check: ${packed.size} files, ${problems.length} problems`);
for (const p of problems) console.log(`  ${p}`);
process.exit(problems.length ? 1 : 0);
