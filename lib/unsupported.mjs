// Entry points of the reference whose behaviour needs the Caveman gateway, compression engine,
// compiler/build lane or a part knap does not have. They exist so imports resolve; calling one
// throws `cave_<area>_unsupported` naming what is missing.
import { codedError } from "./native.mjs";

export function unsupported(area, name, missing) {
  const code = `cave_${area}_unsupported`;
  const fn = function () {
    throw codedError(code, `${code}: ${name} needs ${missing}, which knap does not have`);
  };
  Object.defineProperty(fn, "name", { value: name });
  return fn;
}

export function unsupportedClass(area, name, missing) {
  const code = `cave_${area}_unsupported`;
  const C = class {
    constructor() {
      throw codedError(code, `${code}: ${name} needs ${missing}, which knap does not have`);
    }
  };
  Object.defineProperty(C, "name", { value: name });
  return C;
}

/**
 * A constant whose value belongs to a part knap does not have: any use of it (a property, a
 * conversion to a string or number, a comparison) throws the code naming what is missing.
 */
export function unsupportedValue(area, name, missing) {
  const code = `cave_${area}_unsupported`;
  const fail = () => {
    throw codedError(code, `${code}: ${name} needs ${missing}, which knap does not have`);
  };
  return new Proxy(Object.freeze(Object.create(null)), {
    // `then` is read by `await` and Promise resolution: not a thenable, so awaiting it is no use.
    get: (_, key) => (key === "then" ? undefined : fail()),
    has: fail,
    ownKeys: fail,
    getOwnPropertyDescriptor: fail,
    set: fail,
    defineProperty: fail,
    deleteProperty: fail,
  });
}

const COMPILER = "the Cave Build compiler";
const ENGINE = "the Caveman compression engine";

// Compiler, profile, trajectory (build lane).
export const compileProfiled = unsupported("compiler", "compileProfiled", COMPILER);
export const compileProfiledNativePi = unsupported("compiler", "compileProfiledNativePi", COMPILER);
export const executeCompiledPipeline = unsupported("compiler", "executeCompiledPipeline", COMPILER);
export const assertProfiledBuildTarget = unsupported("compiler", "assertProfiledBuildTarget", COMPILER);
export const capabilityManifestFor = unsupported("compiler", "capabilityManifestFor", COMPILER);
export const nativePiCompilerTarget = unsupported("compiler", "nativePiCompilerTarget", COMPILER);
export const planNativePiCandidates = unsupported("compiler", "planNativePiCandidates", COMPILER);
export const createWorkloadProfile = unsupported("profile", "createWorkloadProfile", "the Cave Build workload profiler");
export const createCompilerWorkloadProfile = unsupported("profile", "createCompilerWorkloadProfile", "the Cave Build workload profiler");
export const parseWorkloadProfile = unsupported("profile", "parseWorkloadProfile", "the Cave Build workload profiler");
export const workloadSplitSHA256 = unsupported("profile", "workloadSplitSHA256", "the Cave Build workload profiler");
export const normalizeTrajectory = unsupported("trajectory", "normalizeTrajectory", "the Cave Build trajectory IR");
export const parseNormalizedTrajectory = unsupported("trajectory", "parseNormalizedTrajectory", "the Cave Build trajectory IR");
export const PROFILED_COMPILER_SHA256 = unsupportedValue("compiler", "PROFILED_COMPILER_SHA256", COMPILER);
export const PROFILED_COMPILER_VERSION = unsupportedValue("compiler", "PROFILED_COMPILER_VERSION", COMPILER);
export const TARGET_CAPABILITY_LATTICE = unsupportedValue("compiler", "TARGET_CAPABILITY_LATTICE", COMPILER);
export const WORKLOAD_PROFILE_SCHEMA_VERSION = unsupportedValue("profile", "WORKLOAD_PROFILE_SCHEMA_VERSION", "the Cave Build workload profiler");
export const TRAJECTORY_IR_SCHEMA_VERSION = unsupportedValue("trajectory", "TRAJECTORY_IR_SCHEMA_VERSION", "the Cave Build trajectory IR");

// Routines (guarded tool substitution compiled by the build lane).
export const routine = unsupported("routine", "routine", COMPILER);
export const routineOutcomes = unsupported("routine", "routineOutcomes", COMPILER);

// Model boundary middleware (gateway-side call capture).
export const createModelBoundary = unsupported("model_boundary", "createModelBoundary", "the Caveman gateway's model boundary");
export const captureModelBoundary = unsupported("model_boundary", "captureModelBoundary", "the Caveman gateway's model boundary");
export const MODEL_BOUNDARY_MAX_CONTEXT_STRING_LENGTH = unsupportedValue("model_boundary", "MODEL_BOUNDARY_MAX_CONTEXT_STRING_LENGTH", "the Caveman gateway's model boundary");
export const MODEL_BOUNDARY_MAX_ID_LENGTH = unsupportedValue("model_boundary", "MODEL_BOUNDARY_MAX_ID_LENGTH", "the Caveman gateway's model boundary");
export const MODEL_BOUNDARY_MAX_MIDDLEWARE = unsupportedValue("model_boundary", "MODEL_BOUNDARY_MAX_MIDDLEWARE", "the Caveman gateway's model boundary");

// Context IR lowering (the engine's context representation).
export const lowerContext = unsupported("context_ir", "lowerContext", ENGINE);
export const appendRuntimeContextSegment = unsupported("context_ir", "appendRuntimeContextSegment", ENGINE);
export const contextBill = unsupported("context_ir", "contextBill", ENGINE);
export const contextIRToWire = unsupported("context_ir", "contextIRToWire", ENGINE);
export const contextIRFromWire = unsupported("context_ir", "contextIRFromWire", ENGINE);
export const opaquePayload = unsupported("context_ir", "opaquePayload", ENGINE);

// Connect (third-party data tools through the caveman-connect binary).
export const ConnectRuntime = unsupportedClass("connect", "ConnectRuntime", "the caveman-connect runtime");
export const createConnect = unsupported("connect", "createConnect", "the caveman-connect runtime");
export const connectEnvironment = unsupported("connect", "connectEnvironment", "the caveman-connect runtime");
export const executeConnectTool = unsupported("connect", "executeConnectTool", "the caveman-connect runtime");
export const resolveConnectBinary = unsupported("connect", "resolveConnectBinary", "the caveman-connect runtime");
export const compareConnectEfficiency = unsupported("connect", "compareConnectEfficiency", "the caveman-connect runtime");

// Agent directories (the caveman-agent dev/build layout) and sandbox egress.
export const loadAgentDir = unsupported("agent_dir", "loadAgentDir", "the caveman-agent directory loader");
export const composeAgentDir = unsupported("agent_dir", "composeAgentDir", "the caveman-agent directory loader");
export const AGENT_DIR_ENTRY = ".caveman/agent-dir-entry.mjs";
export const egressAllowed = unsupported("sandbox_egress", "egressAllowed", "an OS sandbox with egress control");
export const resolveEgressPolicy = unsupported("sandbox_egress", "resolveEgressPolicy", "an OS sandbox with egress control");

// Claude Agent SDK runtime (`/claude`).
export const runClaudeAgent = unsupported("claude", "runClaudeAgent", "@anthropic-ai/claude-agent-sdk's runtime bridge");

// Programmatic-tool internals of the reference whose interfaces the notes do not describe. knap's
// speculation scope exists, inside the kernel: createProgrammaticToolRuntime cells use it.
export const ProgrammaticSpeculationScope = unsupportedClass(
  "programmatic_tools",
  "ProgrammaticSpeculationScope",
  "the reference's internal scope interface (knap speculates for createProgrammaticToolRuntime cells inside its kernel)",
);
export const createProgrammaticToolErrorWrapper = unsupported("programmatic_tools", "createProgrammaticToolErrorWrapper", "the programmatic-tool error wrapper");
export const programmaticToolMetadata = unsupported("programmatic_tools", "programmaticToolMetadata", "programmatic-tool metadata");
