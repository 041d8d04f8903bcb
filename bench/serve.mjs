// Serving load: N concurrent sessions on one createAgentServer (disk store, fsynced journal),
// each with its SSE stream open and one scripted multi-turn run (two tool turns and an answer);
// a quarter of the clients drop their stream mid-run and reconnect with Last-Event-ID.
// Prints events/s delivered to clients and the delivery latency (frame ts → client arrival).
// Baseline: the disk's own fsync rate (write ~250 B + fdatasync from Node, as bench/durable.mjs
// section 1 measures it), the ceiling for the journal barriers every run waits for.
//   node bench/serve.mjs [sessions=200] [rounds=3]
import fs from "node:fs";
import path from "node:path";

import { DiskDurableStore } from "../lib/index.mjs";
import { createAgentServer } from "../lib/serve.mjs";
import { TOKEN, tempRoot, servedAgent, runOptionsFor, sseSessionsLoad } from "../__test__/serve-helpers.mjs";

const sessions = Number(process.argv[2] ?? 200);
const rounds = Number(process.argv[3] ?? 3);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = [];

/** write + fdatasync per second on the temp directory's disk (2,000 writes). */
function fsyncRate() {
  const root = tempRoot("knap-bench-fsync-");
  const fd = fs.openSync(path.join(root, "journal"), "a");
  const line = `${JSON.stringify({ kind: "tool_settled", value: "x".repeat(200) })}\n`;
  const started = performance.now();
  for (let i = 0; i < 2000; i++) {
    fs.writeSync(fd, line);
    fs.fdatasyncSync(fd);
  }
  const seconds = (performance.now() - started) / 1000;
  fs.closeSync(fd);
  fs.rmSync(root, { recursive: true, force: true });
  return 2000 / seconds;
}
const fsyncs = [];
for (let round = 0; round < rounds; round++) {
  const root = tempRoot("knap-bench-serve-");
  const server = createAgentServer({
    definition: servedAgent(path.join(root, "effects")),
    token: TOKEN,
    store: new DiskDurableStore(path.join(root, "journals")),
    maxConcurrentRuns: 16,
    maxQueuedRuns: 4096,
    runOptions: runOptionsFor(2),
  });
  const port = await server.listen(0, "127.0.0.1");
  const load = await sseSessionsLoad({ base: `http://127.0.0.1:${port}`, sessions, steps: 2, prefix: `b${round}` });
  await server.close(5_000);
  results.push(load);
  fsyncs.push(fsyncRate());
  console.log(
    `round ${round + 1}: ${load.total} events to ${sessions} sessions in ${load.seconds.toFixed(2)} s = ${load.eventsPerSecond.toFixed(0)} events/s; ` +
      `latency p50 ${load.p50} ms, p99 ${load.p99} ms, max ${load.max} ms; ${load.reconnects} reconnects; ` +
      `${((sessions * (load.framesPerRun - 1)) / load.seconds).toFixed(0)} journal barriers/s against the disk's ${fsyncs.at(-1).toFixed(0)} fdatasyncs/s`,
  );
}
const barriers = median(results.map((r) => (sessions * (r.framesPerRun - 1)) / r.seconds));
console.log(
  `median of ${rounds}: ${median(results.map((r) => r.eventsPerSecond)).toFixed(0)} events/s, p99 ${median(results.map((r) => r.p99))} ms ` +
    `(${sessions} sessions × ${results[0].framesPerRun} frames, ${results[0].framesPerRun - 1} journal barriers per run fsynced); ` +
    `${barriers.toFixed(0)} barriers/s = ${(barriers / median(fsyncs)).toFixed(2)}× the disk's ${median(fsyncs).toFixed(0)} fdatasyncs/s`,
);
