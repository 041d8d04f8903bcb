// The disk journal store under hostile files: what is not provably a torn append is never cut,
// nothing inside the store is reached through a symlink, and a lock is taken over only when its
// owner is proven gone (with a manual override for the rest).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { run, DiskDurableStore } from "../lib/index.mjs";
import { countSide, scenarioAgent, scenarioOptions } from "./fixtures/durable-scenario.mjs";

function workspace(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-hardening-durable-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { dir, root: path.join(dir, "durable"), sideFile: path.join(dir, "side.jsonl") };
}

const go = (ws, store, runId, extra) => run(scenarioAgent("full", ws.sideFile), "go", scenarioOptions(ws.sideFile, { runId, store }, extra));
const rejection = (p) => p.then(() => assert.fail("should reject"), (e) => e);
/** Ages every entry of `dir` (and `dir`) by a minute: older than the lock's settle time. */
function age(dir) {
  const past = new Date(Date.now() - 60_000);
  for (const name of fs.readdirSync(dir)) fs.utimesSync(path.join(dir, name), past, past);
  fs.utimesSync(dir, past, past);
}

test("a journal of 1 KB garbage with no newline is corrupt, left byte-identical, and nothing re-runs", async (t) => {
  const ws = workspace(t);
  const store = new DiskDurableStore(ws.root);
  await go(ws, store, "g-1");
  const ran = countSide(ws.sideFile);
  const file = path.join(store.runDir("g-1"), "journal.jsonl");
  const garbage = Buffer.alloc(1024, 0);
  for (let i = 0; i < garbage.length; i++) garbage[i] = (i * 37 + 11) & 0xff || 1;
  garbage[0] = 0x80; // not even the start of a JSON object
  fs.writeFileSync(file, garbage);
  const error = await rejection(go(ws, store, "g-1"));
  assert.equal(error.code, "cave_durable_journal_corrupt");
  assert.match(error.message, /^cave_durable_journal_corrupt: unparseable journal line/);
  assert.deepEqual(fs.readFileSync(file), garbage, "not wiped");
  assert.deepEqual(countSide(ws.sideFile), ran, "no side effect ran again");
  assert.equal(fs.existsSync(path.join(store.runDir("g-1"), "lock.d")), false, "the lock was released");
});

test("a corrupt line followed by a torn tail: corrupt, and the tail is not cut (validation before repair)", async (t) => {
  const ws = workspace(t);
  const store = new DiskDurableStore(ws.root);
  await go(ws, store, "c-1");
  const file = path.join(store.runDir("c-1"), "journal.jsonl");
  const lines = fs.readFileSync(file, "utf8").split("\n");
  lines[2] = lines[2].replace(/}$/, ',"extra":1}');
  const bytes = lines.join("\n") + '{"v":2,"at":"2026-01-01T00:00:00.000Z","type":"tu';
  fs.writeFileSync(file, bytes);
  const error = await rejection(go(ws, store, "c-1"));
  assert.equal(error.code, "cave_durable_journal_corrupt");
  assert.equal(fs.readFileSync(file, "utf8"), bytes, "byte-identical");
});

test("journal.jsonl as a symlink is refused, never followed; its target is untouched", async (t) => {
  const ws = workspace(t);
  const store = new DiskDurableStore(ws.root);
  const outside = path.join(ws.dir, "outside.txt");
  fs.writeFileSync(outside, "line one\nlast line with no newline");
  fs.mkdirSync(store.runDir("s-1"), { recursive: true });
  fs.symlinkSync(outside, path.join(store.runDir("s-1"), "journal.jsonl"));
  const error = await rejection(go(ws, store, "s-1"));
  assert.equal(error.code, "cave_durable_store_failed");
  assert.match(error.message, /symbolic link/);
  assert.equal(fs.readFileSync(outside, "utf8"), "line one\nlast line with no newline");
  assert.deepEqual(countSide(ws.sideFile).model, 0, "refused before any work");
  // The run directory as a symlink, too.
  const elsewhere = path.join(ws.dir, "elsewhere");
  fs.mkdirSync(elsewhere);
  fs.symlinkSync(elsewhere, store.runDir("s-2"));
  assert.match((await rejection(go(ws, store, "s-2"))).message, /symbolic link/);
  assert.deepEqual(fs.readdirSync(elsewhere), [], "nothing created through the link");
});

test("garbage and pid ≤ 1 owners: stale only when proven, breakLock() for the rest", async (t) => {
  const ws = workspace(t);
  const store = new DiskDurableStore(ws.root);
  const lockDir = path.join(store.runDir("l-1"), "lock.d");
  for (const owner of ["garbage", '{"pid":0}', '{"pid":-1}', ""]) {
    fs.mkdirSync(lockDir, { recursive: true });
    fs.writeFileSync(path.join(lockDir, "owner.json"), owner);
    // Just written: a writer of another implementation may be between mkdir and its owner file.
    await assert.rejects(store.acquire("l-1"), (e) => e.code === "cave_durable_run_locked", owner);
    age(lockDir);
    const release = await store.acquire("l-1");
    await release();
    assert.equal(fs.existsSync(lockDir), false, owner);
  }
  // pid 1 always exists: locked however old, until broken by hand.
  fs.mkdirSync(lockDir, { recursive: true });
  fs.writeFileSync(path.join(lockDir, "owner.json"), '{"pid":1}');
  age(lockDir);
  await assert.rejects(store.acquire("l-1"), (e) => e.code === "cave_durable_run_locked");
  assert.equal(await store.breakLock("l-1"), true);
  assert.equal(await store.breakLock("l-1"), false);
  const result = await go(ws, store, "l-1");
  assert.equal(result.text, "done");
  // A lock held by a live knap owner is never broken.
  const release = await store.acquire("l-1");
  await assert.rejects(new DiskDurableStore(ws.root).breakLock("l-1"), (e) => e.code === "cave_durable_run_locked");
  await release();
});
