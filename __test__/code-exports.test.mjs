// The reference's coding-agent surface (caveman-code.md §1.1, §1.14): all 57 names of
// `@caveman-ai/agent/code` with their kinds (class, function, constant, interface, type), from
// knap/code and from the companion package packages/coding-agent (`@caveman-ai/coding-agent`),
// at runtime and in the typings; and the companion installed with `file:` into a fresh project
// (offline: `file:` specs never reach a registry), imported by its reference names, entry and ./cli.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import * as code from "../lib/code.mjs";
import * as cli from "../lib/code/cli.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const companionDir = path.join(root, "packages", "coding-agent");
const require = createRequire(import.meta.url);

/** The 57 names, as the reference lists them (§1.1). */
const KINDS = {
  class: ["AgentRunController"],
  function: [
    "capOutput",
    "classifyTurnFailure",
    "codingModelsAtProviderBaseURL",
    "createCodingAgent",
    "createCommandSessionRuntime",
    "createProgrammaticToolRuntime",
    "defaultCodingPlan",
    "formatRecoveryProof",
    "formatSessionBill",
    "formatTurnBill",
    "programmaticToolInstructions",
    "proveRecovery",
    "runCodingSession",
    "runCodingTurn",
    "sessionBill",
    "startCodingSession",
    "streamCodingTurn",
    "summarizeCodingTaskAttempts",
  ],
  const: ["CODING_RUN_BREAKERS", "CODING_TOOL_OUTPUT_CAPS", "OBSERVE_ONLY_BANNER", "PROGRAMMATIC_TOOL_NAME", "RECOVERABLE_CODING_TRANSFORMS"],
  interface: [
    "CodingAgent",
    "CodingAgentOptions",
    "CodingRecoveryProof",
    "CodingSession",
    "CodingSessionOptions",
    "CodingSessionRunOptions",
    "CodingTaskAttemptEvidence",
    "CodingTaskEconomics",
    "CodingTaskEconomicsOptions",
    "CommandSessionReadOptions",
    "CommandSessionReadResult",
    "CommandSessionRuntime",
    "CommandSessionRuntimeOptions",
    "CommandSessionSpillOptions",
    "CommandSessionStartOptions",
    "CommandSessionStartResult",
    "CommandSessionSummary",
    "CommandSessionWriteOptions",
    "CommandSessionWriteResult",
    "FailedStreamingTurn",
    "ProgrammaticToolRuntime",
    "ProgrammaticToolStats",
    "SessionBill",
    "StreamingCodingTurnOptions",
    "ToolOutputSample",
    "TurnBill",
    "TurnRecord",
  ],
  type: ["CodingTaskPriceBasis", "CodingToolMode", "CodingToolSet", "CommandSessionState", "SessionMode", "StreamingCodingTurnResult"],
};
const EXPECTED = Object.fromEntries(Object.entries(KINDS).flatMap(([kind, names]) => names.map((name) => [name, kind])));
const VALUE_KINDS = new Set(["class", "function", "const"]);
const expectedValues = () => Object.fromEntries(Object.entries(EXPECTED).filter(([, kind]) => VALUE_KINDS.has(kind)));
/** `./cli` (§1.14): 4 names. knap's module adds `runCli` (its bin's entry), the companion does not. */
const CLI_EXPECTED = { CODING_AGENT_HELP: "const", parseCodingAgentCLIArgs: "function", main: "function", CodingAgentCLIOptions: "interface" };

/** The kind of a runtime value: a class, a plain function, or a frozen constant. */
function runtimeKind(value) {
  if (typeof value === "function") return /^class\b/.test(Function.prototype.toString.call(value)) ? "class" : "function";
  return Object.isFrozen(value) ? "const" : `mutable ${typeof value}`;
}
const runtimeKinds = (module) => Object.fromEntries(Object.entries(module).map(([name, value]) => [name, runtimeKind(value)]));

test("the 57 names: the reference's list has 1 class, 18 functions, 5 constants, 27 interfaces, 6 types", () => {
  assert.equal(Object.keys(EXPECTED).length, 57);
  assert.deepEqual(Object.fromEntries(Object.entries(KINDS).map(([k, v]) => [k, v.length])), { class: 1, function: 18, const: 5, interface: 27, type: 6 });
});

test("knap/code at runtime: exactly the 24 values of the 57, each of its kind", () => {
  assert.deepEqual(runtimeKinds(code), expectedValues());
  const cliValues = runtimeKinds(cli);
  assert.equal(cliValues.runCli, "function");
  delete cliValues.runCli;
  assert.deepEqual(cliValues, { CODING_AGENT_HELP: "const", parseCodingAgentCLIArgs: "function", main: "function" });
});

test("packages/coding-agent at runtime: the same 24 values, the very same objects as knap/code's; ./cli the reference's 3 values", async () => {
  const companion = await import(path.join(companionDir, "index.mjs"));
  assert.deepEqual(runtimeKinds(companion), expectedValues());
  for (const name of Object.keys(expectedValues())) assert.equal(companion[name], code[name], name);
  const companionCli = await import(path.join(companionDir, "cli.mjs"));
  assert.deepEqual(runtimeKinds(companionCli), { CODING_AGENT_HELP: "const", parseCodingAgentCLIArgs: "function", main: "function" });
  assert.equal(companionCli.main, cli.main);
});

// ---------- installed with file: ----------

let app;
let tmp;

function npmEnv(dir) {
  // No npm_* from a parent `npm test`, no provider credentials, a private cache, no registry.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_") && !/_API_KEY$|^CAVE_/.test(k)));
  return { ...env, npm_config_cache: path.join(dir, ".npm-cache"), npm_config_update_notifier: "false", npm_config_registry: "http://127.0.0.1:9/" };
}

before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "knap-code-exports-"));
  app = path.join(tmp, "app");
  fs.mkdirSync(app);
  fs.writeFileSync(
    path.join(app, "package.json"),
    JSON.stringify({
      name: "app",
      private: true,
      type: "module",
      dependencies: { "@caveman-ai/agent": `file:${root}`, "@caveman-ai/coding-agent": `file:${companionDir}` },
    }),
  );
  execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: app, env: npmEnv(tmp), encoding: "utf8", stdio: "pipe" });
});
after(() => tmp && fs.rmSync(tmp, { recursive: true, force: true }));

test("installed with file: under the reference's names: the entry and ./cli import, caveman-code is on .bin", () => {
  const modules = path.join(app, "node_modules", "@caveman-ai");
  assert.equal(fs.realpathSync(path.join(modules, "coding-agent")), companionDir);
  assert.equal(fs.realpathSync(path.join(modules, "agent")), root);
  fs.writeFileSync(
    path.join(app, "probe.mjs"),
    `import * as entry from "@caveman-ai/coding-agent";
import * as cli from "@caveman-ai/coding-agent/cli";
import * as agentCode from "@caveman-ai/agent/code";
const same = Object.keys(entry).filter((k) => entry[k] === agentCode[k]);
const opts = cli.parseCodingAgentCLIArgs(["--workspace", "w", "--observe-only"]);
process.stdout.write(JSON.stringify({ entry: Object.keys(entry).sort(), cli: Object.keys(cli).sort(), same: same.length, opts, help: cli.CODING_AGENT_HELP, banner: entry.OBSERVE_ONLY_BANNER }));
`,
  );
  const probe = spawnSync(process.execPath, ["probe.mjs"], { cwd: app, env: npmEnv(tmp), encoding: "utf8" });
  assert.equal(probe.status, 0, probe.stderr);
  const out = JSON.parse(probe.stdout);
  assert.deepEqual(out.entry, Object.keys(expectedValues()).sort());
  assert.equal(out.same, 24, "the companion's values are knap/code's");
  assert.deepEqual(out.cli, ["CODING_AGENT_HELP", "main", "parseCodingAgentCLIArgs"]);
  assert.deepEqual(out.opts, { help: false, workspace: "w", cave: "off" });
  assert.equal(out.help, cli.CODING_AGENT_HELP);
  assert.equal(out.banner.split("\n")[0], "cave: OBSERVE-ONLY — the Caveman engine/gateway is not available here.");

  const help = spawnSync(path.join(app, "node_modules", ".bin", "caveman-code"), ["--help"], { cwd: app, env: npmEnv(tmp), encoding: "utf8" });
  assert.equal(help.status, 0, help.stderr);
  assert.equal(help.stdout, `${cli.CODING_AGENT_HELP}\n`);
  const bad = spawnSync(path.join(app, "node_modules", ".bin", "caveman-code"), ["--frobnicate"], { cwd: app, env: npmEnv(tmp), encoding: "utf8" });
  assert.deepEqual([bad.status, bad.stdout, bad.stderr], [1, "", "caveman-code: unknown option --frobnicate\n"]);
});

// ---------- typings ----------

/**
 * The exported names of `specifier` as the TypeScript checker sees them from `dir`, each with
 * its kind; plus every diagnostic of the program (the typings must type-check, lib files included).
 */
function typedExports(ts, dir, specifiers, { preserveSymlinks = false } = {}) {
  const entry = path.join(dir, `exports-probe-${process.pid}.mts`);
  fs.writeFileSync(entry, specifiers.map((s, i) => `import type * as M${i} from "${s}";\nexport type { M${i} };\n`).join(""));
  const program = ts.createProgram([entry], {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
    types: [],
    skipLibCheck: false,
    preserveSymlinks,
  });
  const checker = program.getTypeChecker();
  const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
  const source = program.getSourceFile(entry);
  const results = specifiers.map((specifier, i) => {
    const decl = source.statements[i * 2];
    const moduleSymbol = checker.getSymbolAtLocation(decl.moduleSpecifier);
    assert.ok(moduleSymbol, `${specifier} resolves (${diagnostics.join("; ")})`);
    return Object.fromEntries(checker.getExportsOfModule(moduleSymbol).map((s) => [s.name, typedKind(ts, checker, s)]));
  });
  return { results, diagnostics };
}

function typedKind(ts, checker, symbol) {
  const s = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  const F = ts.SymbolFlags;
  const kinds = [];
  if (s.flags & F.Class) kinds.push("class");
  if (s.flags & F.Function) kinds.push("function");
  if (s.flags & F.Interface && !(s.flags & F.Class)) kinds.push("interface");
  if (s.flags & F.TypeAlias) kinds.push("type");
  if (s.flags & F.Variable) {
    const decl = s.valueDeclaration;
    kinds.push(decl && ts.getCombinedNodeFlags(decl) & ts.NodeFlags.Const ? "const" : "let/var");
  }
  return kinds.join("+") || `flags ${s.flags}`;
}

function loadTypeScript(t) {
  try {
    return require("typescript");
  } catch {
    t.skip("typescript is not installed (npm ci installs it as a devDependency)");
    return undefined;
  }
}

test("typings: knap/code and @caveman-ai/coding-agent declare the 57 names with their kinds; ./cli its 4; everything type-checks", { timeout: 120_000 }, (t) => {
  const ts = loadTypeScript(t);
  if (!ts) return;
  // From this checkout (knap's own name resolves to itself through its exports map).
  const own = typedExports(ts, path.join(root, "__test__", "types"), ["knap/code", "knap/code/cli"]);
  try {
    assert.deepEqual(own.diagnostics, []);
    assert.deepEqual(own.results[0], EXPECTED);
    assert.deepEqual(own.results[1], { ...CLI_EXPECTED, runCli: "function" });
  } finally {
    fs.rmSync(path.join(root, "__test__", "types", `exports-probe-${process.pid}.mts`), { force: true });
  }
  // From the installed project. A `file:` install is a symlink; Node follows it, and the companion
  // finds knap by its checkout path. TypeScript would resolve `@caveman-ai/agent/code` from the
  // link's target (packages/coding-agent), where no such package is installed, so the probe
  // keeps the links the way a copied (registry or tarball) install lays them out.
  const installed = typedExports(ts, app, ["@caveman-ai/coding-agent", "@caveman-ai/coding-agent/cli", "@caveman-ai/agent/code"], { preserveSymlinks: true });
  assert.deepEqual(installed.diagnostics, []);
  assert.deepEqual(installed.results[0], EXPECTED);
  assert.deepEqual(installed.results[1], CLI_EXPECTED);
  assert.deepEqual(installed.results[2], EXPECTED);
});
