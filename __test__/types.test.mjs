// The typings (generated index.d.ts plus lib/*.d.mts) describe the public surface: the seed's
// code and the main entry points type-check under `tsc --strict`; knap/ai-sdk's tools go into
// ai@6's and ai@5's generateText/streamText under strict + exactOptionalPropertyTypes with both
// node16 and bundler resolution; every type name bashkit exports is exported by knap/ai-sdk.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const run = promisify(execFile);

function tscPath(t) {
  try {
    return require.resolve("typescript/bin/tsc");
  } catch {
    t.skip("typescript is not installed (npm ci installs it as a devDependency)");
    return undefined;
  }
}

async function tsc(tsc, project) {
  try {
    await run(process.execPath, [tsc, "-p", project], { encoding: "utf8", maxBuffer: 64 << 20 });
    return "";
  } catch (error) {
    return `${error.stdout ?? ""}${error.stderr ?? ""}` || String(error);
  }
}

test("the public typings type-check the seed's code", async (t) => {
  const bin = tscPath(t);
  if (!bin) return;
  const out = await tsc(bin, path.join(here, "types", "tsconfig.json"));
  assert.equal(out, "", `tsc failed:\n${out}`);
});

test("knap/ai-sdk's tools compile into generateText/streamText of ai@6 and ai@5 (strict, exactOptionalPropertyTypes, node16 and bundler)", async (t) => {
  const bin = tscPath(t);
  if (!bin) return;
  const configs = ["ai6-node16", "ai6-bundler", "ai5-node16", "ai5-bundler"];
  const results = await Promise.all(configs.map((c) => tsc(bin, path.join(here, "types", "ai-sdk", `tsconfig.${c}.json`))));
  const failures = configs.map((c, i) => (results[i] ? `== ${c}\n${results[i]}` : "")).filter(Boolean);
  assert.equal(failures.join("\n"), "", "tsc failed");
});

test("every type name bashkit 0.7.1 exports is imported from knap/ai-sdk by the typings test", () => {
  const bashkit = fs.readFileSync(path.join(here, "..", "node_modules", "bashkit", "dist", "index.d.ts"), "utf8");
  const expected = [...bashkit.matchAll(/export type \{([^}]*)\}/g)].flatMap((m) => m[1].split(",").map((s) => s.trim()).filter(Boolean));
  assert.equal(expected.length, 115);
  const fixture = fs.readFileSync(path.join(here, "types", "ai-sdk", "bashkit-names.mts"), "utf8");
  const imported = /import type \{([^}]*)\} from "knap\/ai-sdk"/.exec(fixture)[1].split(",").map((s) => s.trim()).filter(Boolean);
  assert.deepEqual(imported.sort(), expected.sort());
});

test("every value bashkit 0.7.1 exports is exported by knap/ai-sdk, except those its README lists as not provided", async () => {
  const bashkit = fs.readFileSync(path.join(here, "..", "node_modules", "bashkit", "dist", "index.d.ts"), "utf8");
  const values = [...bashkit.matchAll(/^export \{([^}]*)\}/gm)]
    .flatMap((m) => m[1].split(","))
    .map((s) => s.trim())
    .filter((s) => s && !s.startsWith("type "))
    .map((s) => s.split(/\s+as\s+/).at(-1));
  assert.ok(values.length > 60, `bashkit's value exports: ${values.length}`);
  const knap = await import("../lib/ai-sdk/index.mjs");
  const missing = values.filter((name) => !(name in knap)).sort();
  const readme = fs.readFileSync(path.join(here, "..", "lib", "ai-sdk", "README.md"), "utf8");
  const paragraph = /Not provided: ([^(]*)\(/.exec(readme)?.[1] ?? "";
  const documented = [...paragraph.matchAll(/`([A-Za-z]+)`/g)].map((m) => m[1]).sort();
  assert.deepEqual(missing, documented);
});

test("knap/execution-backend and knap/command-session export the reference's 5 and 12 names, no more", (t) => {
  let ts;
  try {
    ts = require("typescript");
  } catch {
    t.skip("typescript is not installed (npm ci installs it as a devDependency)");
    return;
  }
  const lib = path.join(here, "..", "lib");
  const files = ["execution-backend.d.mts", "command-session.d.mts"].map((f) => path.join(lib, f));
  const program = ts.createProgram(files, {
    strict: true,
    noEmit: true,
    types: [],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
  });
  const checker = program.getTypeChecker();
  const names = (file) => checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(file))).map((s) => s.name).sort();
  assert.deepEqual(names(files[0]), ["ExecRequest", "ExecResult", "ExecutionBackend", "httpExecutionBackend", "localExecutionBackend"]);
  const sessions = names(files[1]);
  assert.equal(sessions.length, 12, sessions.join(", "));
  assert.deepEqual(sessions.filter((n) => !n.startsWith("CommandSession")), ["createCommandSessionRuntime"]);
  assert.equal(sessions.filter((n) => n !== "CommandSessionState" && n.startsWith("CommandSession")).length, 10, "the ten CommandSession* interfaces");
});
