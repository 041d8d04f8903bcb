// `AgentRunController`: steering and follow-up messages for a running (or the next) run. The
// controller keeps its own ordered queue; a run attached to it drains steering messages at the
// next turn boundary and follow-ups when the loop would otherwise end, one per turn.
import { codedError } from "./native.mjs";

const ATTACH = Symbol.for("knap.controller.attach");

function userMessage(text) {
  return { role: "user", content: [{ type: "text", text }], timestamp: Date.now() };
}

export class AgentRunController {
  #steering = [];
  #followUps = [];
  #held = false;
  #listeners = new Set();
  #attached;

  get state() {
    return Object.freeze({ queued: this.#steering.length + this.#followUps.length, heldAfterInterrupt: this.#held });
  }

  subscribe(listener) {
    this.#listeners.add(listener);
    listener(this.state);
    return () => this.#listeners.delete(listener);
  }

  #notify() {
    const state = this.state;
    for (const listener of this.#listeners) listener(state);
  }

  #queue(list, text) {
    if (typeof text !== "string" || text.trim() === "") throw codedError("cave_agent_queue_message_required");
    list.push(userMessage(text));
    this.#attached?.wake();
    this.#notify();
  }

  steer(text) {
    this.#queue(this.#steering, text);
  }

  followUp(text) {
    this.#queue(this.#followUps, text);
  }

  clear(index) {
    if (index === undefined) {
      this.#steering = [];
      this.#followUps = [];
    } else {
      const total = this.#steering.length + this.#followUps.length;
      if (!Number.isSafeInteger(index) || index < 0 || index >= total) throw codedError("cave_agent_queue_index_invalid");
      if (index < this.#steering.length) this.#steering.splice(index, 1);
      else this.#followUps.splice(index - this.#steering.length, 1);
    }
    this.#notify();
  }

  interrupt() {
    this.#held = this.#steering.length + this.#followUps.length > 0;
    this.#attached?.abort();
    this.#notify();
  }

  resume() {
    this.#held = false;
    this.#notify();
  }

  /**
   * The run's side (knap's kernel hook): `attach` binds one run at a time; `take(kind)` removes
   * and returns the next steering (`"steer"`) or follow-up (`"followUp"`) message for delivery.
   */
  [ATTACH](run) {
    if (this.#attached && this.#attached !== run) throw codedError("cave_agent_controller_in_use");
    this.#attached = run;
    const take = (kind) => {
      if (this.#held) return undefined;
      const list = kind === "steer" ? this.#steering : this.#followUps;
      const message = list.shift();
      if (message) this.#notify();
      return message;
    };
    const detach = () => {
      if (this.#attached === run) this.#attached = undefined;
    };
    return { take, detach };
  }
}

export { ATTACH as CONTROLLER_ATTACH };
