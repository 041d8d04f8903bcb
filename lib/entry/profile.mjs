// `@caveman-ai/agent/profile`: needs the Cave Build workload profiler (throws `cave_profile_unsupported`).
export {
  createWorkloadProfile,
  createCompilerWorkloadProfile,
  parseWorkloadProfile,
  workloadSplitSHA256,
  normalizeTrajectory,
  parseNormalizedTrajectory,
  WORKLOAD_PROFILE_SCHEMA_VERSION,
  TRAJECTORY_IR_SCHEMA_VERSION,
} from "../unsupported.mjs";
