// `BudgetController`: staged budget release for a live run (`RunOptions.budgetController`).
// Unbound, every member throws `cave_budget_controller_unbound`; a run binds it at start.
import { codedError } from "./native.mjs";

export const OUTPUT_CLAMP_FLOOR_TOKENS = 256;
const BIND = Symbol.for("knap.budgetController.bind");

export class BudgetController {
  #meter;

  #bound() {
    if (!this.#meter) throw codedError("cave_budget_controller_unbound");
    return this.#meter;
  }

  /** Releases `amount` more of the budget's `max` for the rest of the run. */
  releaseBudget(amount, reason) {
    return this.#bound().release(amount, reason);
  }

  get spent() {
    return this.#bound().snapshot().spent;
  }

  get remaining() {
    const s = this.#bound().snapshot();
    return Math.max(0, s.released - s.spent);
  }

  get released() {
    return this.#bound().snapshot().released;
  }

  get max() {
    return this.#bound().snapshot().max;
  }

  get denomination() {
    return this.#bound().snapshot().denomination;
  }

  get tranches() {
    return Object.freeze(this.#bound().snapshot().tranches.map((t) => Object.freeze({ ...t })));
  }

  /** The run's side: `meter` = `{ release(amount, reason), snapshot() }`; returns unbind. */
  [BIND](meter) {
    if (this.#meter) throw codedError("cave_budget_controller_in_use");
    this.#meter = meter;
    return () => {
      if (this.#meter === meter) this.#meter = undefined;
    };
  }
}

export function createBudgetController() {
  return new BudgetController();
}

export { BIND as BUDGET_CONTROLLER_BIND };
