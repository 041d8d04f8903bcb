// createLocalSandbox: bashkit's Sandbox interface on Node over knap's Rust engine.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync, symlinkSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { realpathSync } from "node:fs";
import { createLocalSandbox } from "knap/ai-sdk";
import { tempWorkspace } from "./ai-sdk-helpers.mjs";

test("exec: stdout, stderr, exit code, duration, cwd option", async () => {
  const ws = tempWorkspace({ "sub/f.txt": "x" });
  try {
    const sb = createLocalSandbox({ workingDirectory: ws.dir });
    const r = await sb.exec("echo out; echo err >&2; pwd; exit 3");
    assert.equal(r.stdout, `out\n${realpathSync(ws.dir)}\n`);
    assert.equal(r.stderr, "err\n");
    assert.equal(r.exitCode, 3);
    assert.equal(r.interrupted, false);
    assert.equal(typeof r.durationMs, "number");
    const inSub = await sb.exec("ls", { cwd: "sub" });
    assert.equal(inSub.stdout, "f.txt\n");
    await assert.rejects(sb.exec("ls", { cwd: "../.." }), /outside|escapes/);
  } finally {
    ws.cleanup();
  }
});

test("exec: a timeout kills the process group and reports interrupted", async () => {
  const ws = tempWorkspace();
  try {
    const sb = createLocalSandbox({ cwd: ws.dir });
    const r = await sb.exec(`sleep 30 & echo $! > bg.pid; wait`, { timeout: 300 });
    assert.equal(r.interrupted, true);
    assert.equal(r.exitCode, 124);
    const pid = Number(readFileSync(join(ws.dir, "bg.pid"), "utf8"));
    let alive = true;
    for (let i = 0; i < 500 && alive; i++) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        alive = !stat.includes(") Z");
      } catch {
        alive = false;
      }
      if (alive) await new Promise((r2) => setTimeout(r2, 20));
    }
    assert.equal(alive, false, "the background child of the timed-out command was killed");
  } finally {
    ws.cleanup();
  }
});

test("exec: an AbortSignal cancels the command", async () => {
  const ws = tempWorkspace();
  try {
    const sb = createLocalSandbox({ workingDirectory: ws.dir });
    const ac = new AbortController();
    const p = sb.exec("sleep 30", { signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    const r = await p;
    assert.equal(r.interrupted, true);
  } finally {
    ws.cleanup();
  }
});

test("exec: the environment is allow-listed; env adds variables", async () => {
  const ws = tempWorkspace();
  process.env.KNAP_TEST_SECRET_API_KEY = "sk-do-not-leak";
  try {
    const sb = createLocalSandbox({ workingDirectory: ws.dir, env: { EXTRA: "yes" } });
    const r = await sb.exec('echo "[$KNAP_TEST_SECRET_API_KEY][$EXTRA]"; test -n "$PATH" && echo path');
    assert.equal(r.stdout, "[][yes]\npath\n");
  } finally {
    delete process.env.KNAP_TEST_SECRET_API_KEY;
    ws.cleanup();
  }
});

test("exec: huge output is middle-truncated to maxOutputLength", async () => {
  const ws = tempWorkspace();
  try {
    const sb = createLocalSandbox({ workingDirectory: ws.dir });
    const r = await sb.exec("seq 1 200000", { maxOutputLength: 20 });
    assert.match(r.stdout, /^\[Total output lines: 200001\]\n\n1\n2\n3\n4\n5\n\n\n…\d+ chars truncated…\n\n/);
    assert.ok(r.stdout.endsWith("99\n200000\n"), r.stdout);
  } finally {
    ws.cleanup();
  }
});

test("file operations: write creates parents, read, readDir, exists, isDirectory, rename, delete", async () => {
  const ws = tempWorkspace();
  try {
    const sb = createLocalSandbox({ workingDirectory: ws.dir });
    await sb.writeFile("a/b/c.txt", "héllo\n");
    assert.equal(readFileSync(join(ws.dir, "a/b/c.txt"), "utf8"), "héllo\n");
    assert.equal(await sb.readFile("a/b/c.txt"), "héllo\n");
    assert.equal(await sb.readFile(join(ws.dir, "a/b/c.txt")), "héllo\n", "absolute paths inside work");
    assert.deepEqual(await sb.readDir("a"), ["b"]);
    assert.equal(await sb.fileExists("a/b/c.txt"), true);
    assert.equal(await sb.fileExists("a/b"), true, "directories exist too");
    assert.equal(await sb.fileExists("nope"), false);
    assert.equal(await sb.isDirectory("a/b"), true);
    assert.equal(await sb.isDirectory("a/b/c.txt"), false);
    await sb.rename("a/b/c.txt", "d/e.txt");
    assert.equal(existsSync(join(ws.dir, "a/b/c.txt")), false);
    assert.equal(await sb.readFile("d/e.txt"), "héllo\n");
    await sb.deleteFile("d/e.txt");
    assert.equal(await sb.fileExists("d/e.txt"), false);
    await assert.rejects(sb.readFile("nope.txt"), (e) => e.code === "ENOENT");
    assert.equal(sb.workingDirectory, realpathSync(ws.dir));
    assert.equal(sb.id, undefined);
    await sb.destroy();
  } finally {
    ws.cleanup();
  }
});

test("file operations stay inside the workspace (.., absolute paths, symlinks out)", async () => {
  const ws = tempWorkspace({ "in.txt": "in" });
  const outside = tempWorkspace({ "secret.txt": "secret" });
  try {
    symlinkSync(outside.dir, join(ws.dir, "link"));
    const sb = createLocalSandbox({ workingDirectory: ws.dir });
    await assert.rejects(sb.readFile("../x"), /escapes the workspace/);
    await assert.rejects(sb.readFile(join(outside.dir, "secret.txt")), /escapes the workspace/);
    await assert.rejects(sb.readFile("link/secret.txt"), /escapes the workspace/);
    await assert.rejects(sb.writeFile("link/new.txt", "x"), /escapes the workspace/);
    assert.equal(existsSync(join(outside.dir, "new.txt")), false);
    await assert.rejects(sb.deleteFile("link/secret.txt"), /escapes the workspace/);
    assert.equal(readFileSync(join(outside.dir, "secret.txt"), "utf8"), "secret");
  } finally {
    ws.cleanup();
    outside.cleanup();
  }
});

test("workingDirectory is created if missing; { cwd } is the same option", async () => {
  const ws = tempWorkspace();
  try {
    const dir = join(ws.dir, "new", "deep");
    const sb = createLocalSandbox({ cwd: dir });
    assert.equal(existsSync(dir), true);
    await sb.writeFile("x.txt", "1");
    assert.equal(readFileSync(join(dir, "x.txt"), "utf8"), "1");
    mkdirSync(join(ws.dir, "other"));
    writeFileSync(join(ws.dir, "other", "y.txt"), "2");
    const sb2 = createLocalSandbox({ workingDirectory: join(ws.dir, "other") });
    assert.equal(await sb2.readFile("y.txt"), "2");
  } finally {
    ws.cleanup();
  }
});
