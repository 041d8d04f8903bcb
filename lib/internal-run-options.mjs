// The run options only Cave Build may set. Its own module (no imports) so the coding agent's
// session layer can refuse them before it loads the run engine.
const INTERNAL_OPTIONS = ["buildIdentity", "efficiencyPlan", "lockedBuild", "candidatePlan", "caveRoute", "invocationTrace"];

/** Throws `cave_internal_run_option` when `options` carries an option only Cave Build may set. */
export function rejectInternalRunOptions(options) {
  for (const key of INTERNAL_OPTIONS) {
    if (options && key in options) {
      throw new Error("cave_internal_run_option: Cave Build execution is available through caveman-agent dev/build after lock validation");
    }
  }
}
