// Memory recall over 10,000 stored memories: knap's engine (storage, index and ranking in
// knap-core) beside the same lexical ranking as a plain JS scan over the state. Target: ≤ 5 ms
// per turn (engine.recall). Medians of 40 queries after a warm-up.
import os from "node:os";
import { performance } from "node:perf_hooks";
import { createMemoryEngine, createInMemoryMemoryStorage, createSparseEmbeddingAdapter, packVector } from "../lib/index.mjs";

const N = 10_000;
const words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega build deploy cache server client billing invoice user prefers tabs spaces rust node python kernel memory budget receipt skill plugin".split(" ");
const pick = (i, k) => words[(i * 7 + k * 13) % words.length];
const sparse = createSparseEmbeddingAdapter();
const now = Date.now();
const memories = [];
for (let i = 0; i < N; i++) {
  const text = `note ${i}: ${pick(i, 1)} ${pick(i, 2)} ${pick(i, 3)} ${pick(i, 4)} relates to ${pick(i, 5)} and ${pick(i, 6)}`;
  const [v] = await sparse.embed([text]);
  memories.push({ id: `m-${i}`, text, kind: "fact", tags: [], createdAt: now, updatedAt: now, expiresAt: now + 86_400_000, confidence: 0.7, strength: 1, active: true, sources: [], vector: packVector(sparse.id, v) });
}
const storage = createInMemoryMemoryStorage();
const scope = { tenant: "_", agentId: "bench", namespace: "notes" };
await storage.update(scope, () => ({ schemaVersion: 1, revision: 0, memories, turns: [], edges: [] }));
const engine = createMemoryEngine({ scope, ttlMs: 30 * 86_400_000, storage, embedding: sparse });

const queries = Array.from({ length: 40 }, (_, i) => `what about ${pick(i, 2)} ${pick(i, 5)} and ${pick(i, 9)}?`);
const tokens = (t) => new Set(t.toLowerCase().match(/[a-z0-9][a-z0-9_-]{1,}/g) ?? []);
function jsScan(q) {
  const qs = tokens(q);
  const scored = [];
  for (const m of memories) {
    const ts = tokens(m.text);
    let common = 0;
    for (const w of qs) if (ts.has(w)) common++;
    const s = common / Math.sqrt(qs.size * ts.size);
    if (s >= 0.08) scored.push([s, m]);
  }
  return scored.sort((a, b) => b[0] - a[0]).slice(0, 6);
}
/** Median wall time and median CPU time (user + system) per turn over the 40 queries. */
async function median(fn) {
  await fn(queries[0]);
  const t = [];
  const cpu = [];
  for (const q of queries) {
    const c = process.cpuUsage();
    const s = performance.now();
    await fn(q);
    t.push(performance.now() - s);
    const d = process.cpuUsage(c);
    cpu.push((d.user + d.system) / 1000);
  }
  const mid = (a) => a.sort((x, y) => x - y)[a.length >> 1];
  return [mid(t), mid(cpu)];
}
const [knap, knapCpu] = await median((q) => engine.recall(q));
const [js, jsCpu] = await median(async (q) => jsScan(q));
console.log(`memory recall over ${N} memories (median of ${queries.length} turns, ms; ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(2)})`);
console.log(`  ${"".padEnd(46)} ${"wall".padStart(7)} ${"cpu".padStart(7)}`);
console.log(`  knap engine.recall (lexical + vector + graph) ${knap.toFixed(2).padStart(7)} ${knapCpu.toFixed(2).padStart(7)}  ${knap <= 5 ? "PASS" : "FAIL"} wall ≤ 5 ms, ${knapCpu <= 5 ? "PASS" : "FAIL"} cpu ≤ 5 ms`);
console.log(`  JS lexical scan of the same state             ${js.toFixed(2).padStart(7)} ${jsCpu.toFixed(2).padStart(7)}`);
console.log(`  ratio JS / knap: wall ${(js / knap).toFixed(2)}×, cpu ${(jsCpu / knapCpu).toFixed(2)}×`);
