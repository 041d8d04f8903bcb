// `AgentRunController`: steering and follow-up messages for a running (or the next) run. The
// controller keeps its own ordered queue (its `state`, `clear(index)`, what a later run gets);
// a run attached to it mirrors every change into a queue the Rust kernel owns, which the loop
// drains at turn boundaries without waiting on JS: steering messages at the next boundary,
// follow-ups when the loop would otherwise end, one per turn. The kernel reports each delivery
// back (`delivered(id)`), and the entry leaves this queue.
import { codedError } from "./native.mjs";

const ATTACH = Symbol.for("knap.controller.attach");
/** Internal: queue a message and get its message object back (serve sessions track them). */
const ENQUEUE = Symbol.for("knap.controller.enqueue");
/** Internal: the message objects still queued, in the combined order. */
const QUEUED = Symbol.for("knap.controller.queued");

function userMessage(text) {
  return { role: "user", content: [{ type: "text", text }], timestamp: Date.now() };
}

export class AgentRunController {
  /** Entries `{ id, message }`, in arrival order per queue. */
  #steering = [];
  #followUps = [];
  #held = false;
  #listeners = new Set();
  /** `{ run, sink }` of the attached run. */
  #attached;
  #nextId = 1;

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

  [ENQUEUE](mode, text) {
    if (typeof text !== "string" || text.trim() === "") throw codedError("cave_agent_queue_message_required");
    const steer = mode === "steer";
    const entry = { id: this.#nextId++, message: userMessage(text) };
    (steer ? this.#steering : this.#followUps).push(entry);
    this.#attached?.sink.push(steer, entry);
    this.#notify();
    return entry.message;
  }

  [QUEUED]() {
    return [...this.#steering, ...this.#followUps].map((e) => e.message);
  }

  steer(text) {
    this[ENQUEUE]("steer", text);
  }

  followUp(text) {
    this[ENQUEUE]("followUp", text);
  }

  clear(index) {
    if (index === undefined) {
      this.#steering = [];
      this.#followUps = [];
      this.#attached?.sink.clear();
    } else {
      const total = this.#steering.length + this.#followUps.length;
      if (!Number.isSafeInteger(index) || index < 0 || index >= total) throw codedError("cave_agent_queue_index_invalid");
      const [entry] = index < this.#steering.length ? this.#steering.splice(index, 1) : this.#followUps.splice(index - this.#steering.length, 1);
      this.#attached?.sink.remove(entry.id);
    }
    this.#notify();
  }

  /** Aborts the attached run (as its `signal` would); queued messages stay, held until `resume()`. */
  interrupt() {
    this.#held = this.#steering.length + this.#followUps.length > 0;
    const sink = this.#attached?.sink;
    sink?.hold(this.#held);
    sink?.abort();
    this.#notify();
  }

  resume() {
    this.#held = false;
    this.#attached?.sink.hold(false);
    this.#notify();
  }

  /**
   * The run's side: binds one run at a time and replays the retained queues into its `sink`
   * (`push(steer, entry)`, `remove(id)`, `clear()`, `hold(held)`, `abort()`). Returns
   * `delivered(id)` (the kernel took entry `id`) and `detach()` (undelivered entries stay).
   */
  [ATTACH](run, sink) {
    if (this.#attached && this.#attached.run !== run) throw codedError("cave_agent_controller_in_use");
    this.#attached = { run, sink };
    sink.hold(this.#held);
    for (const entry of this.#steering) sink.push(true, entry);
    for (const entry of this.#followUps) sink.push(false, entry);
    const delivered = (id) => {
      for (const list of [this.#steering, this.#followUps]) {
        const i = list.findIndex((e) => e.id === id);
        if (i >= 0) {
          list.splice(i, 1);
          this.#notify();
          return;
        }
      }
    };
    const detach = () => {
      if (this.#attached?.run === run) this.#attached = undefined;
    };
    return { delivered, detach };
  }
}

/**
 * `RunOptions.controller` for one kernel run: attaches `controller` to `nativeRun`'s queue.
 * `interrupt` aborts the run. Throws `cave_agent_controller_in_use` when another run holds it.
 */
export function bindController(controller, nativeRun, interrupt) {
  if (!(controller instanceof AgentRunController)) {
    throw codedError("cave_agent_controller_invalid", "cave_agent_controller_invalid: RunOptions.controller must be an AgentRunController");
  }
  return controller[ATTACH](nativeRun, {
    push: (steer, entry) => nativeRun.controllerPush(steer, entry.id, entry.message.content[0].text, entry.message.timestamp),
    remove: (id) => nativeRun.controllerRemove(id),
    clear: () => nativeRun.controllerClear(),
    hold: (held) => nativeRun.controllerHold(held),
    abort: interrupt,
  });
}

export { ATTACH as CONTROLLER_ATTACH, ENQUEUE as CONTROLLER_ENQUEUE, QUEUED as CONTROLLER_QUEUED };
