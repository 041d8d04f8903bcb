// The reference's export surface, name by name (caveman-agent-api.md §1.1 and §1.2,
// caveman-serve-plugins-memory.md §2.1): each subpath's names — values and types, as the
// TypeScript checker sees knap's .d.mts typings — match the reference's, every value a typing
// declares exists at runtime and nothing untyped leaks out, and the root values whose behaviour
// needs a part knap lacks throw a `cave_*_unsupported` code naming it.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT_NAMES = fs
  .readFileSync(path.join(here, "fixtures", "reference-root-names.txt"), "utf8")
  .split("\n")
  .filter((l) => l && !l.startsWith("#"));

const words = (s) => s.trim().split(/\s+/);
const PLUGINS = words(`AgentEnvironment AgentEnvironmentDiagnostic AgentPlugin AgentPluginCommand AgentPluginManifest AgentSkill
  ApplyAgentEnvironmentOptions LoadAgentEnvironmentOptions AgentEnvironmentDiagnosticCode AgentPluginFormat applyAgentEnvironment
  createAgentEnvironmentTransform expandAgentEnvironmentSlashCommand findAgentWorkspaceRoot loadAgentEnvironment loadAgentPlugin
  loadAgentSkillDirectory parseAgentSkill readAgentSkillResource renderAgentPluginCommandInvocation renderAgentPluginCommandsIndex
  renderAgentSkillInvocation renderAgentSkillsIndex AGENT_PLUGINS_SCHEMA AGENT_SKILLS_CONTEXT_ID AGENT_PLUGIN_COMMANDS_CONTEXT_ID`);
// §1.2's memory names plus the `memory()` primitives: the 43 of `./memory`.
const MEMORY = words(`MemoryEngine createMemoryEngine CreateMemoryEngineOptions createFileMemoryAdapter MemoryStoreConfig
  createInMemoryMemoryStorage createSparseEmbeddingAdapter openAICompatibleMemoryEmbedding OpenAICompatibleMemoryEmbeddingOptions
  completionMemorySidecar CompletionMemorySidecarOptions createMemoryWorkflow emptyMemoryState cosine packVector MemoryAmbientOptions
  MemoryCompletionRequest MemoryConsolidationInput MemoryDraft MemoryEdge MemoryEmbeddingAdapter MemoryExtractionInput MemoryHit
  MemoryKind MemoryRecall MemoryRecord MemoryRelation MemoryRememberInput MemoryReviewInput MemoryReviewResult MemoryRuntimeConfig
  MemoryScope MemorySearchOptions MemorySessionHit MemorySidecarAdapter MemorySource MemoryState MemoryStorageAdapter MemoryTurn
  MemoryTurnInput MemoryVector memory memoryTTLMilliseconds`);
// The 30 compaction names §1.2 lists; the table's 42 for `./compaction` counts 12 more the notes do not name.
const COMPACTION = words(`normalizeCompaction contextSummarySources latestContextSummary parseContextSummary renderSummary
  summarizationInstruction validateContextSummaryTransition evaluateContextSummary evaluateContextSummaryStability
  runContextCompactionHarness SUMMARY_SCHEMA_VERSION CompactionOptions NormalizedCompaction ContextAnchor ContextAnchorKind
  ContextSummary ContextSummarySource ContextSummaryValidation ContextCompactionFixture ContextCompactionFixtureRound
  ContextCompactionHarnessOptions ContextCompactionHarnessResult ContextCompactionHarnessRoundResult ContextCompactionSummarizer
  ContextCompactionSummarizerRequest ContextSummaryEvaluation ContextSummaryEvaluationInput ContextSummaryRound ContextSummaryStability
  ExpectedContextAnchor`);
const INPUT = words(`AgentInput AgentInputPart AgentTextInputPart AgentImageInputPart AgentAudioInputPart AgentFileInputPart
  AgentOpaqueInputPart AgentInputSource AgentInputURLSource AgentInputBase64Source normalizeAgentInput NormalizedAgentInput
  encodeAgentInput defineAgentInputEncoder AgentInputEncoder FiniteJSON AGENT_INPUT_MAX_PARTS AGENT_INPUT_MAX_TEXT_BYTES
  AGENT_INPUT_MAX_BASE64_BYTES_PER_PART AGENT_INPUT_MAX_BASE64_BYTES_TOTAL AGENT_INPUT_MAX_URL_LENGTH AGENT_INPUT_MAX_MIME_LENGTH
  AGENT_INPUT_MAX_FILE_NAME_LENGTH`);
const MODEL_USAGE = words(`defineModelUsage modelUsageAccountingStatus requireCompleteModelUsage ModelUsage CompleteModelUsage
  ModelUsageAccountingStatus ModelUsageCost ModelUsageTokenCount`);
const RUN_RECEIPT = words("AGENT_RUN_RECEIPT_SCHEMA defineRunReceipt validateRunReceipt");

// knap's own additions to the root, each documented in the README: the SQL stores, the schema
// type helpers behind typed `result.output`, the Pi message and model types the options name.
const ROOT_EXTRAS = words(`SqlDurableStore SqlExecutor SqlMemoryStorage JSONSchema TSchema Static StaticObject TOptional SchemaBuilders
  SandboxMode ShellToolSet HttpExecutionBackendOptions AgentRunControllerState AnyCaveBuildLock Conversation AssistantMessage Message
  Model Models StreamFn`);

/** `{name: isValue}` of every export of each specifier, as the type checker resolves knap's typings. */
function typedExports(specifiers) {
  const file = path.join(here, "..", "__surface_counts__.mts");
  const source = specifiers.map((s, i) => `import * as m${i} from "${s}";`).join("\n");
  const host = ts.createCompilerHost({});
  const read = host.readFile.bind(host);
  const exists = host.fileExists.bind(host);
  host.readFile = (f) => (f === file ? source : read(f));
  host.fileExists = (f) => f === file || exists(f);
  const program = ts.createProgram([file], { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16, strict: true, noEmit: true, skipLibCheck: false }, host);
  const checker = program.getTypeChecker();
  const sf = program.getSourceFile(file);
  const errors = ts.getPreEmitDiagnostics(program).filter((d) => d.file && !d.file.fileName.includes("node_modules"));
  assert.deepEqual(errors.map((d) => `${d.file.fileName}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`), [], "the typings check");
  return specifiers.map((s, i) => {
    const symbol = checker.getSymbolAtLocation(sf.statements[i].moduleSpecifier);
    assert.ok(symbol, `${s} has typings`);
    return Object.fromEntries(
      checker.getExportsOfModule(symbol).map((e) => {
        const target = e.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(e) : e;
        return [e.name, Boolean(target.flags & ts.SymbolFlags.Value)];
      }),
    );
  });
}

const SUBPATHS = [
  ["knap", ROOT_NAMES, ROOT_EXTRAS, 334],
  ["knap/plugins", PLUGINS, [], 26],
  ["knap/memory", MEMORY, ["SqlMemoryStorage"], 43],
  ["knap/input", INPUT, [], 23],
  ["knap/model-usage", MODEL_USAGE, [], 8],
  ["knap/run-receipt", RUN_RECEIPT, [], 3],
  ["knap/compaction", COMPACTION, [], 30],
];

test("each subpath exports the reference's names, values and types, in its typings and at runtime", async () => {
  const typed = typedExports(SUBPATHS.map(([s]) => s));
  for (const [i, [specifier, names, extras, count]] of SUBPATHS.entries()) {
    assert.equal(new Set(names).size, count, `${specifier}: the reference's count`);
    const exported = typed[i];
    assert.deepEqual(names.filter((n) => !(n in exported)), [], `${specifier}: reference names missing from the typings`);
    assert.deepEqual(Object.keys(exported).filter((n) => !names.includes(n) && !extras.includes(n)).sort(), [], `${specifier}: names beyond the reference`);
    const runtime = await import(specifier);
    const values = Object.keys(exported).filter((n) => exported[n]);
    assert.deepEqual(values.filter((n) => !(n in runtime)), [], `${specifier}: typed values missing at runtime`);
    assert.deepEqual(Object.keys(runtime).filter((n) => !exported[n]).sort(), [], `${specifier}: runtime exports without a value typing`);
  }
  // `./catalog`'s 21 names are not listed in the notes: knap's own, typed and all present.
  const [catalog] = typedExports(["knap/catalog"]);
  const runtime = await import("knap/catalog");
  assert.deepEqual(Object.keys(runtime).filter((n) => !catalog[n]), []);
  assert.ok(["catalogModel", "catalogPrice", "catalogCost", "catalogContextWindow"].every((n) => catalog[n] === true));
});

test("root values whose behaviour needs a part knap lacks throw cave_<area>_unsupported naming it", async () => {
  const knap = await import("knap");
  const calls = {
    compiler: "compileProfiled compileProfiledNativePi executeCompiledPipeline assertProfiledBuildTarget capabilityManifestFor nativePiCompilerTarget planNativePiCandidates",
    profile: "createWorkloadProfile createCompilerWorkloadProfile parseWorkloadProfile workloadSplitSHA256",
    trajectory: "normalizeTrajectory parseNormalizedTrajectory",
    routine: "routine routineOutcomes",
    model_boundary: "createModelBoundary captureModelBoundary",
    context_ir: "lowerContext appendRuntimeContextSegment contextBill contextIRToWire contextIRFromWire opaquePayload",
    connect: "createConnect connectEnvironment executeConnectTool resolveConnectBinary compareConnectEfficiency",
    agent_dir: "loadAgentDir composeAgentDir",
    sandbox_egress: "egressAllowed resolveEgressPolicy",
    programmatic_tools: "createProgrammaticToolErrorWrapper programmaticToolMetadata",
    compaction: "evaluateContextSummary evaluateContextSummaryStability runContextCompactionHarness",
  };
  const expectCode = (area, name) => (e) => {
    assert.equal(e.code, `cave_${area}_unsupported`, name);
    assert.match(e.message, new RegExp(`^cave_${area}_unsupported: ${name} needs .+, which knap does not have`));
    return true;
  };
  for (const [area, names] of Object.entries(calls)) {
    for (const name of words(names)) {
      assert.ok(ROOT_NAMES.includes(name), name);
      assert.throws(() => knap[name](), expectCode(area, name));
    }
  }
  for (const [area, name] of [["connect", "ConnectRuntime"], ["programmatic_tools", "ProgrammaticSpeculationScope"]]) {
    assert.throws(() => new knap[name]({}), expectCode(area, name));
  }
  // Constants of those parts: using one (a conversion, a comparison, a property) throws.
  for (const [area, name] of [
    ["compiler", "PROFILED_COMPILER_SHA256"],
    ["compiler", "PROFILED_COMPILER_VERSION"],
    ["compiler", "TARGET_CAPABILITY_LATTICE"],
    ["profile", "WORKLOAD_PROFILE_SCHEMA_VERSION"],
    ["trajectory", "TRAJECTORY_IR_SCHEMA_VERSION"],
    ["model_boundary", "MODEL_BOUNDARY_MAX_CONTEXT_STRING_LENGTH"],
    ["model_boundary", "MODEL_BOUNDARY_MAX_ID_LENGTH"],
    ["model_boundary", "MODEL_BOUNDARY_MAX_MIDDLEWARE"],
  ]) {
    assert.throws(() => `${knap[name]}`, expectCode(area, name));
    assert.throws(() => knap[name] > 1, expectCode(area, name));
    assert.throws(() => knap[name].length, expectCode(area, name));
  }
  // The internal helpers stay internal.
  for (const name of ["unsupported", "unsupportedClass", "unsupportedValue", "NATIVE_TOOL", "splitCompactionOptions", "runClaudeAgent", "MEMORY_SYSTEM_PROMPT"]) {
    assert.equal(name in knap, false, name);
  }
});
