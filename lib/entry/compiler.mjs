// `@caveman-ai/agent/compiler`: needs the Cave Build compiler (throws `cave_compiler_unsupported`).
export {
  compileProfiled,
  compileProfiledNativePi,
  executeCompiledPipeline,
  assertProfiledBuildTarget,
  capabilityManifestFor,
  nativePiCompilerTarget,
  planNativePiCandidates,
  PROFILED_COMPILER_SHA256,
  PROFILED_COMPILER_VERSION,
  TARGET_CAPABILITY_LATTICE,
} from "../unsupported.mjs";
