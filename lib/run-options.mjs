// Run options knap validates but whose behaviour its kernel does not provide yet are refused
// with a code naming them, never accepted and ignored.
import { codedError } from "./native.mjs";
import { BudgetController } from "./budget-controller.mjs";
import { splitCompactionOptions } from "./compaction.mjs";

function unsupported(name, why) {
  return codedError("cave_run_option_unsupported", `cave_run_option_unsupported:${name}: ${why}`);
}

/** Throws for the first option a run would otherwise silently ignore. */
export function refuseUnactedOptions(definition, options) {
  if (options.printReceipt !== undefined && typeof options.printReceipt !== "boolean") {
    throw codedError("cave_print_receipt_invalid", "cave_print_receipt_invalid: printReceipt must be a boolean");
  }
  if (options.entryPath !== undefined && (typeof options.entryPath !== "string" || options.entryPath === "")) {
    throw codedError(
      "cave_sandbox_entry_invalid",
      `cave_sandbox_entry_invalid: RunOptions.entryPath must be the path of the module that exports the agent, got ${JSON.stringify(options.entryPath) ?? typeof options.entryPath}\nhint: entryPath: "./agent.mjs" (resolved against rootDir)`,
    );
  }
  const profile = options.sandboxProfile;
  if (profile !== undefined) {
    if (!profile || typeof profile !== "object") throw codedError("cave_sandbox_profile_invalid");
    // The names of the variables a sandbox worker's environment keeps (lib/sandbox.mjs).
    const names = profile.credentialEnv;
    if (names !== undefined && !(Array.isArray(names) && names.every((n) => typeof n === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(n)))) {
      throw codedError("cave_sandbox_profile_invalid", "cave_sandbox_profile_invalid: sandboxProfile.credentialEnv must be an array of environment variable names");
    }
    if (profile.network === true) throw codedError("cave_sandbox_network_egress_unbounded");
    if (profile.childProcess === true) throw codedError("cave_sandbox_child_process_containment_unavailable");
    if (profile.network && typeof profile.network === "object") throw unsupported("sandboxProfile.network", "egress policies need an OS sandbox knap does not have");
  }
  if (options.modelRouter !== undefined && typeof options.modelRouter !== "function") {
    throw codedError("cave_run_options_invalid", "cave_run_options_invalid: modelRouter must be a function (input) => decision or a Promise of one");
  }
  if (options.budgetController !== undefined && options.budget === undefined) {
    throw codedError("cave_budget_controller_without_budget");
  }
  // The reference names no code for these shapes; a value the run cannot use is refused, not ignored.
  if (options.budgetController !== undefined && !(options.budgetController instanceof BudgetController)) {
    throw codedError("cave_budget_controller_invalid", "cave_budget_controller_invalid: budgetController must come from createBudgetController()");
  }
  const onExhausted = options.onBudgetExhausted;
  if (onExhausted !== undefined && onExhausted !== "stop" && typeof onExhausted !== "function") {
    throw codedError("cave_budget_on_exhausted_invalid", `cave_budget_on_exhausted_invalid: onBudgetExhausted must be "stop" or a function (ctx) => "stop" | {release, reason}, got ${JSON.stringify(onExhausted) ?? typeof onExhausted}`);
  }
  const compaction = options.budget?.compaction;
  // summarizerModel and newContext are JS values: their types are checked here, the rest (and
  // mode's pairing with newContext) by the core when the run starts.
  if (compaction && typeof compaction === "object") splitCompactionOptions(compaction);
}
