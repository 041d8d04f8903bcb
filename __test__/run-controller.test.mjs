// RunOptions.controller (AgentRunController, reference serve-plugins-memory §5.6, agent-api
// §3.10): steering at the next turn boundary, follow-ups when the loop would end, one per turn,
// clear / interrupt / resume, and the error codes. Scripted models only.
import { test } from "node:test";
import assert from "node:assert/strict";

import { run, stream, createConversation, tool, schema } from "../lib/index.mjs";
import { AgentRunController } from "../lib/surface.mjs";
import { scriptedStream } from "../lib/testing.mjs";
import { baseOptions, hostAgent, collect } from "./run-helpers.mjs";

/** A scripted stream that records each call's messages; `onCall(n)` runs as call n starts. */
function recorded(turns, onCall) {
  const inner = scriptedStream(turns);
  const calls = [];
  const streamFn = (model, context, options) => {
    calls.push(structuredClone(context.messages));
    onCall?.(calls.length);
    return inner(model, context, options);
  };
  return { streamFn, calls };
}

const userTexts = (messages) => messages.filter((m) => m.role === "user").map((m) => (typeof m.content === "string" ? m.content : m.content.map((p) => p.text).join("")));
const lastUser = (messages) => userTexts(messages).at(-1);

test("a steering message queued mid-run is the next model call's newest user message", async () => {
  const controller = new AgentRunController();
  const lookup = tool({
    name: "lookup",
    description: "Looks up.",
    input: schema.object({}),
    effect: "read",
    execute: () => {
      controller.steer("use the other file");
      return "looked";
    },
  });
  const { streamFn, calls } = recorded([{ toolCalls: [{ name: "lookup" }] }, { text: "switched" }]);
  const events = await collect(stream(hostAgent("steered", [lookup]), "start", { ...baseOptions([]), streamFn, controller }));
  assert.equal(calls.length, 2);
  const second = calls[1];
  assert.deepEqual(second.slice(-2).map((m) => m.role), ["toolResult", "user"]);
  assert.equal(lastUser(second), "use the other file");
  const end = events.at(-1);
  assert.equal(end.type, "run_end");
  assert.equal(end.result.text, "switched");
  assert.equal(end.result.receipt.calls.length, 2);
  // stream(): the delivered message has its own message_start / message_end after a turn_start.
  const pi = events.filter((e) => e.type === "pi").map((e) => e.event);
  const i = pi.findIndex((e) => e.type === "message_end" && e.message.role === "user" && e.message.content[0].text === "use the other file");
  assert.ok(i > 0, "a message_end for the steering message");
  assert.equal(pi[i - 1].type, "message_start");
  assert.equal(pi[i - 2].type, "turn_start");
  assert.equal(controller.state.queued, 0);
});

test("a follow-up extends a run that would have ended, and the conversation keeps it", async () => {
  const controller = new AgentRunController();
  const conversation = createConversation();
  const { streamFn, calls } = recorded([{ text: "first" }, { text: "second" }], (n) => {
    if (n === 1) controller.followUp("and then?");
  });
  const result = await run(hostAgent("followed", []), "hello", { ...baseOptions([]), streamFn, controller, conversation });
  assert.equal(calls.length, 2);
  assert.deepEqual(userTexts(calls[1]), ["hello", "and then?"]);
  assert.equal(calls[1].at(-2).role, "assistant", "the first answer stays in the transcript");
  assert.equal(result.text, "second");
  assert.equal(result.stopReason, "complete");
  assert.equal(result.receipt.calls.length, 2);
  const messages = conversation.snapshot().messages;
  assert.deepEqual(messages.map((m) => m.role), ["user", "assistant", "user", "assistant"]);
  assert.equal(messages[2].content[0].text, "and then?");
});

test("messages queued before the run are attached at its start: steering first, one per turn, then follow-ups", async () => {
  const controller = new AgentRunController();
  controller.followUp("f1");
  controller.steer("s1");
  controller.steer("s2");
  const states = [];
  controller.subscribe((s) => states.push(s.queued));
  const { streamFn, calls } = recorded([{ text: "a" }, { text: "b" }, { text: "c" }, { text: "d" }]);
  const result = await run(hostAgent("ordered", []), "p", { ...baseOptions([]), streamFn, controller });
  assert.deepEqual(calls.map(lastUser), ["p", "s1", "s2", "f1"]);
  assert.equal(result.text, "d");
  assert.deepEqual(states, [3, 2, 1, 0], "subscribe: the current state at once, then one change per delivery");
  assert.deepEqual(controller.state, { queued: 0, heldAfterInterrupt: false });
  assert.ok(Object.isFrozen(controller.state));
});

test("clear(index) over the combined order, clear(), and the queue error codes", async () => {
  const controller = new AgentRunController();
  assert.throws(() => controller.steer("  "), { code: "cave_agent_queue_message_required" });
  assert.throws(() => controller.followUp(3), { code: "cave_agent_queue_message_required" });
  controller.followUp("f1");
  controller.steer("s1");
  controller.followUp("f2");
  for (const bad of [3, -1, 1.5, "0"]) assert.throws(() => controller.clear(bad), { code: "cave_agent_queue_index_invalid" }, String(bad));
  controller.clear(1); // steering first: [s1, f1, f2] → removes f1
  assert.equal(controller.state.queued, 2);
  const { streamFn, calls } = recorded([{ text: "a" }, { text: "b" }, { text: "c" }]);
  await run(hostAgent("cleared", []), "p", { ...baseOptions([]), streamFn, controller });
  assert.deepEqual(calls.map(lastUser), ["p", "s1", "f2"]);
  // clear() while attached: nothing queued reaches the run.
  const again = recorded([{ text: "x" }, { text: "y" }], (n) => {
    if (n === 1) {
      controller.followUp("dropped");
      controller.clear();
    }
  });
  const r = await run(hostAgent("cleared", []), "q", { ...baseOptions([]), streamFn: again.streamFn, controller });
  assert.equal(again.calls.length, 1);
  assert.equal(r.text, "x");
});

test("interrupt() aborts the run and holds the queue; resume() releases it into a later run", async () => {
  const controller = new AgentRunController();
  const stop = tool({
    name: "stop",
    description: "Interrupts.",
    input: schema.object({}),
    effect: "read",
    execute: () => {
      controller.followUp("after the interrupt");
      controller.interrupt();
      return "stopping";
    },
  });
  const first = recorded([{ toolCalls: [{ name: "stop" }] }, { text: "never" }]);
  await assert.rejects(run(hostAgent("interrupted", [stop]), "go", { ...baseOptions([]), streamFn: first.streamFn, controller }), { code: "cave_agent_run_failed", message: /cave_run_aborted/ });
  assert.equal(first.calls.length, 1);
  assert.deepEqual(controller.state, { queued: 1, heldAfterInterrupt: true });
  // Held: the next run does not get it.
  const held = recorded([{ text: "alone" }]);
  const r1 = await run(hostAgent("held", []), "go", { ...baseOptions([]), streamFn: held.streamFn, controller });
  assert.equal(r1.text, "alone");
  assert.equal(controller.state.queued, 1);
  // resume() during a run: the follow-up is delivered when the loop would end.
  const resumed = recorded([{ text: "one" }, { text: "two" }], (n) => {
    if (n === 1) controller.resume();
  });
  const r2 = await run(hostAgent("resumed", []), "go", { ...baseOptions([]), streamFn: resumed.streamFn, controller });
  assert.deepEqual(resumed.calls.map(lastUser), ["go", "after the interrupt"]);
  assert.equal(r2.text, "two");
  assert.deepEqual(controller.state, { queued: 0, heldAfterInterrupt: false });
});

test("one controller, one run at a time: cave_agent_controller_in_use; a non-controller is refused", async () => {
  const controller = new AgentRunController();
  let release, started;
  const gate = new Promise((resolve) => (release = resolve));
  const calling = new Promise((resolve) => (started = resolve));
  const inner = scriptedStream([{ text: "a" }]);
  const slow = async (model, context, options) => {
    started();
    await gate;
    return inner(model, context, options);
  };
  const first = run(hostAgent("holder", []), "go", { ...baseOptions([]), streamFn: slow, controller });
  await calling; // the first run is attached and waiting on its model call
  await assert.rejects(run(hostAgent("second", []), "go", { ...baseOptions([{ text: "b" }]), controller }), { code: "cave_agent_controller_in_use" });
  release();
  assert.equal((await first).text, "a");
  // Detached when the first run ended: the controller can be used again.
  assert.equal((await run(hostAgent("third", []), "go", { ...baseOptions([{ text: "c" }]), controller })).text, "c");
  await assert.rejects(run(hostAgent("fake", []), "go", { ...baseOptions([{ text: "d" }]), controller: { steer() {} } }), { code: "cave_agent_controller_invalid" });
});
