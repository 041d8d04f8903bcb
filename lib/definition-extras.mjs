// Smaller definition primitives: artifact(), eval fixtures, definition transforms, the sandbox
// conformance probe, runLocked.
import { codedError } from "./native.mjs";

const STRATEGIES = new Set(["verbatim", "json-index", "page"]);
const RECOVERIES = new Set(["exact_ccr", "source_ref"]);
const TRANSFORM_ID = /^[a-z0-9][a-z0-9._-]{0,95}$/;

/** `artifact({strategy, maxInlineTokens, recovery})`: an artifact result policy for a tool. */
export function artifact(options = {}) {
  const { strategy = "page", maxInlineTokens = 1_200, recovery = "exact_ccr" } = options;
  if (!STRATEGIES.has(strategy)) throw new Error(`caveman agent: unknown artifact strategy ${JSON.stringify(strategy)}`);
  if (!Number.isSafeInteger(maxInlineTokens) || maxInlineTokens < 0) throw new Error("caveman agent: artifact maxInlineTokens must be a non-negative integer");
  if (!RECOVERIES.has(recovery)) throw new Error(`caveman agent: unknown artifact recovery ${JSON.stringify(recovery)}`);
  return Object.freeze({ kind: "artifact", strategy, maxInlineTokens, recovery });
}

/** The tool result policy an artifact maps to, and its inline ceiling in bytes. */
export function artifactResultPolicy(a) {
  const policy = a.strategy === "verbatim" ? (a.recovery === "exact_ccr" ? "exact_ccr" : "inline") : a.strategy === "json-index" ? "compress" : "page";
  return { policy, inlineBytes: a.maxInlineTokens * 4 };
}

/** `evalFixture(options)` (alias `eval`): a frozen eval declaration for the build lane. */
export function evalFixture(options) {
  if (!options || typeof options !== "object") throw new Error("caveman agent: eval options are required");
  const { id, input } = options;
  if (typeof id !== "string" || !TRANSFORM_ID.test(id)) throw new Error(`caveman agent: invalid eval id ${JSON.stringify(id)}`);
  if (input === undefined) throw new Error(`caveman agent: eval ${JSON.stringify(id)} needs an input`);
  const split = options.split ?? "train";
  if (!["train", "validation", "test", "holdout"].includes(split)) throw new Error(`caveman agent: unknown eval split ${JSON.stringify(split)}`);
  return Object.freeze({ kind: "eval", ...options, split, guardrails: Object.freeze([...(options.guardrails ?? [])]) });
}

/** `assertQualityGrader(grader)`: a grader is a function or `{ id, grade(...) }`. */
export function assertQualityGrader(grader) {
  const ok = typeof grader === "function" || (grader && typeof grader === "object" && typeof grader.grade === "function");
  if (!ok) throw codedError("cave_eval_quality_grader_invalid", "cave_eval_quality_grader_invalid: a quality grader is a function or an object with grade()");
  return grader;
}

/** Applies `{id, apply(def)}` transforms in order; ids must be valid and unique. */
export function applyAgentDefinitionTransforms(definition, transforms) {
  if (definition?.kind !== "agent") throw new Error("caveman agent: transforms apply to an agent() definition");
  if (!Array.isArray(transforms)) throw codedError("cave_agent_definition_transforms_invalid");
  const seen = new Set();
  let current = definition;
  for (const t of transforms) {
    if (!t || typeof t !== "object" || typeof t.id !== "string" || !TRANSFORM_ID.test(t.id) || typeof t.apply !== "function") {
      throw codedError("cave_agent_definition_transform_invalid", `cave_agent_definition_transform_invalid:${t?.id ?? "?"}`);
    }
    if (seen.has(t.id)) throw codedError("cave_agent_definition_transform_duplicate", `cave_agent_definition_transform_duplicate:${t.id}`);
    seen.add(t.id);
    const next = t.apply(current);
    if (next?.kind !== "agent") throw codedError("cave_agent_definition_transform_result_invalid", `cave_agent_definition_transform_result_invalid:${t.id}`);
    current = next;
  }
  return current;
}

/**
 * `verifySandboxConformance()`: whether this host offers the OS sandbox `sandbox: "required"`
 * needs. knap runs no isolated tool worker, so the answer is false.
 */
export async function verifySandboxConformance() {
  return false;
}

/**
 * `runLocked(definition, input, build, options)`: a run from a validated Cave Build lock. knap has
 * no compiler, so only a lock that pins no compiled pipeline (no transforms, no plan) can run; it
 * runs as `run()` does, never prints a receipt, and reports `unlocked: false`.
 */
export async function runLocked(definition, input, build, options = {}) {
  if (!build || typeof build !== "object") throw codedError("cave_build_lock_invalid", "cave_build_lock_invalid: runLocked needs a Cave Build lock object");
  const plan = build.efficiencyPlan ?? build.plan ?? build.pipeline;
  const transforms = build.transformIDs ?? build.transforms ?? plan?.transforms ?? [];
  if ((Array.isArray(transforms) && transforms.length > 0) || (plan && typeof plan === "object" && Object.keys(plan).length > 0 && !Array.isArray(plan))) {
    throw codedError("cave_build_lock_unsupported", "cave_build_lock_unsupported: this lock pins a compiled pipeline, which needs the Cave Build compiler knap does not have");
  }
  const { printReceipt: _ignored, ...rest } = options ?? {};
  // The run engine is loaded on first use: importing the definition helpers stays cheap.
  const { run } = await import("./run.mjs");
  const result = await run(definition, input, rest);
  return Object.freeze({ ...result, unlocked: false });
}
