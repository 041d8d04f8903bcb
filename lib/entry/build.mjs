// `@caveman-ai/agent/build`: the Cave Build lane (compiler, profiles, locks). knap has no
// compiler: these throw `cave_compiler_unsupported` / `cave_profile_unsupported`; `runLocked`
// runs a lock that pins no compiled pipeline.
export {
  compileProfiled,
  compileProfiledNativePi,
  executeCompiledPipeline,
  assertProfiledBuildTarget,
  capabilityManifestFor,
  nativePiCompilerTarget,
  planNativePiCandidates,
  createWorkloadProfile,
  createCompilerWorkloadProfile,
  parseWorkloadProfile,
  workloadSplitSHA256,
  normalizeTrajectory,
  parseNormalizedTrajectory,
  PROFILED_COMPILER_SHA256,
  PROFILED_COMPILER_VERSION,
  TARGET_CAPABILITY_LATTICE,
  WORKLOAD_PROFILE_SCHEMA_VERSION,
  TRAJECTORY_IR_SCHEMA_VERSION,
  routine,
  routineOutcomes,
} from "../unsupported.mjs";
export { runLocked, evalFixture, evalFixture as eval, assertQualityGrader } from "../definition-extras.mjs";
