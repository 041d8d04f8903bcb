// Scale: 200 concurrent SSE sessions on one server, each running a scripted multi-turn run
// (two tool turns and an answer); a quarter of the clients drop their stream mid-run and
// reconnect with Last-Event-ID. Every event must arrive exactly once and in order per session
// (by event id), with nothing lost across a reconnect. No timing assertions; bench/serve.mjs
// reports the rates.
import test from "node:test";
import assert from "node:assert/strict";
import path from "node:path";

import { DiskDurableStore } from "../lib/index.mjs";
import { createAgentServer } from "../lib/serve.mjs";
import { TOKEN, AUTH, tempRoot, servedAgent, runOptionsFor, effects, readSse, sseSessionsLoad } from "./serve-helpers.mjs";

test("200 concurrent SSE sessions: every event exactly once, in order, across reconnects", { timeout: 600_000 }, async () => {
  const root = tempRoot();
  const effectsDir = path.join(root, "effects");
  const server = createAgentServer({
    definition: servedAgent(effectsDir),
    token: TOKEN,
    store: new DiskDurableStore(path.join(root, "journals")),
    maxConcurrentRuns: 16,
    maxQueuedRuns: 512,
    runOptions: runOptionsFor(2),
  });
  const port = await server.listen(0, "127.0.0.1");
  const base = `http://127.0.0.1:${port}`;
  try {
    const load = await sseSessionsLoad({ base, sessions: 200, steps: 2, reconnectEvery: 4, dropAfter: 3 });
    assert.equal(load.reconnects, 50);
    for (const id of load.ids) {
      const frames = load.received.get(id);
      assert.deepEqual(frames.map((f) => f.id), Array.from({ length: load.framesPerRun }, (_, i) => i), `${id}: ids`);
      assert.ok(frames.every((f) => f.event === undefined && f.data.sessionId === id && f.data.seq === f.id), `${id}: envelopes`);
      assert.deepEqual(
        frames.map((f) => f.data.kind),
        ["turn.start", "usage", "tool.start", "tool.end", "usage", "tool.start", "tool.end", "usage", "turn.end"],
        `${id}: kinds`,
      );
      // What arrived live is what the buffer holds: a full replay is the same frames.
      const replay = await readSse(await fetch(`${base}/sessions/${id}/events`, { headers: AUTH }), (f) => f.data?.kind === "turn.end").done;
      assert.deepEqual(replay.map((f) => f.data), frames.map((f) => f.data), `${id}: replay`);
    }
    // Each run's two writes ran exactly once.
    const keys = effects(effectsDir).map(([key]) => key);
    assert.equal(keys.length, 400);
    assert.equal(new Set(keys).size, 400);
  } finally {
    await server.close(5_000);
  }
});
