// examples/serve as its README documents it, offline: server.mjs started as a user starts it
// (scripted model, disk store, 127.0.0.1), then the README's curl session run command by
// command with bash and curl, each command's output checked against the `# …` lines under it
// ("…" stands for any text). If the README and the server drift apart, this fails.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const example = path.join(root, "examples", "serve");
const hasCurl = spawnSync("curl", ["--version"]).status === 0;

/**
 * The README's curl session: `[{ command, expected, open }]`. `# ` lines right under a command
 * are its output; `# ` lines after a blank line are prose. A last expected line of `…` means the
 * output goes on (an open event stream): the command is stopped once the lines before it matched.
 */
export function curlSession(readme) {
  const block = readme.split("## A curl session")[1]?.match(/```sh\n([\s\S]*?)```/)?.[1];
  assert.ok(block, "the README has a curl session");
  const steps = [];
  let current;
  let continued = false;
  for (const line of block.split("\n")) {
    if (continued) {
      current.command += `\n${line}`;
      continued = line.endsWith("\\");
      continue;
    }
    if (line.trim() === "") {
      current = undefined;
      continue;
    }
    if (line.startsWith("# ")) {
      if (current) current.expected.push(line.slice(2));
      continue;
    }
    current = { command: line, expected: [] };
    steps.push(current);
    continued = line.endsWith("\\");
  }
  for (const s of steps) s.open = s.expected.at(-1) === "…";
  if (steps.length) steps.forEach((s) => s.open && s.expected.pop());
  return steps;
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const pattern = (line) => new RegExp(`^${line.split("…").map(escape).join(".*")}$`);

/** The output's non-blank lines (SSE frames are separated by blank lines). */
const linesOf = (text) => text.split("\n").filter((l) => l.trim() !== "");

function matches(expected, lines, open) {
  if (open ? lines.length < expected.length : lines.length !== expected.length) return false;
  return expected.every((e, i) => pattern(e).test(lines[i]));
}

/** Runs one step; an open stream is stopped once its expected lines are there. */
function runStep(step, env) {
  return new Promise((resolve) => {
    const child = spawn("bash", ["-c", step.command], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    const guard = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.stdout.on("data", (d) => {
      out += d;
      if (step.open && matches(step.expected, linesOf(out), true)) child.kill("SIGTERM");
    });
    child.stderr.on("data", (d) => (err += d));
    child.on("close", (code, signal) => {
      clearTimeout(guard);
      resolve({ out, err, code, signal });
    });
  });
}

function startServer(env, store = /disk store, scripted model/) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(example, "server.mjs")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
      const m = out.match(new RegExp(`^serving notes on http://127\\.0\\.0\\.1:(\\d+) \\(${store.source}\\)\n`));
      if (m) resolve({ child, port: Number(m[1]), output: () => out + err });
    });
    child.stderr.on("data", (d) => (err += d));
    child.on("exit", (code) => reject(new Error(`server.mjs exited (${code}) before serving:\n${out}${err}`)));
  });
}

test("the README's curl session parses into commands with their outputs", () => {
  const steps = curlSession(fs.readFileSync(path.join(example, "README.md"), "utf8"));
  assert.ok(steps.length >= 9, `${steps.length} steps`);
  assert.ok(steps.every((s) => s.command === "T=dev-token-0123456789; B=http://127.0.0.1:8080" || s.command.startsWith("curl ")));
  assert.deepEqual(steps.filter((s) => s.open).map((s) => s.command.match(/\$B(\S+)/)[1]), ["/sessions/kitchen/events"]);
  assert.ok(steps.filter((s) => s.command.startsWith("curl ")).every((s) => s.expected.length > 0), "every curl command shows its output");
});

test("examples/serve runs offline as its README shows: the curl session against 127.0.0.1", { skip: !hasCurl && "curl is not installed", timeout: 120_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-serve-example-"));
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_API_KEY$|^CAVE_|^DATABASE_URL$/.test(k)));
  const server = await startServer({ ...env, CAVE_SERVE_TOKEN: "dev-token-0123456789", PORT: "0", ROOT_DIR: dir });
  t.after(async () => {
    // SIGTERM drains and releases the instance lease; remove the files once it has exited.
    const exited = server.child.exitCode !== null ? undefined : new Promise((done) => server.child.once("exit", done));
    server.child.kill("SIGTERM");
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const readme = fs.readFileSync(path.join(example, "README.md"), "utf8");
  const [vars, ...steps] = curlSession(readme);
  // The README's variables, with the port this server got.
  const base = vars.command.replace("http://127.0.0.1:8080", `http://127.0.0.1:${server.port}`);
  for (const step of steps) {
    const command = { ...step, command: `${base}\n${step.command}` };
    // A GET may show the state of a run that is still finishing (humans type slower): it is
    // asked again, a bounded number of times, until it shows what the README shows.
    const idempotent = !/ -d /.test(step.command) && !step.open;
    // A stream resumed after event N, typed right after the message was posted, can be ahead
    // of the run: the server then answers `event: gap` and replays everything (the reference's
    // "client ahead" rule). Wait for event N on a plain stream first, as a human's pace would.
    const resume = step.command.match(/last-event-id: (\d+)'? (\$B\S+)/);
    if (resume) {
      // Frames 0..N: "id: k" then its data line.
      const expected = Array.from({ length: 2 * (Number(resume[1]) + 1) }, (_, i) => (i % 2 ? "…" : `id: ${i / 2}`));
      const watch = { command: `${base}\ncurl -sN -H "Authorization: Bearer $T" ${resume[2]}`, expected, open: true };
      const w = await runStep(watch, env);
      assert.ok(matches(watch.expected, linesOf(w.out), true), `the stream never reached event ${resume[1]}:\n${w.out}`);
    }
    let r;
    for (let attempt = 0; attempt < (idempotent ? 100 : 1); attempt++) {
      r = await runStep(command, env);
      if (matches(step.expected, linesOf(r.out), step.open)) break;
      await new Promise((done) => setTimeout(done, 50));
    }
    const lines = linesOf(r.out);
    assert.ok(
      matches(step.expected, lines, step.open),
      `${step.command}\nexpected:\n${step.expected.join("\n")}\ngot:\n${lines.join("\n")}\n${r.err}\nserver:\n${server.output()}`,
    );
    if (!step.open) assert.equal(r.code, 0, `${step.command} exited ${r.code}`);
  }
  // The tool ran once per message: the README's "a settled note is not written again".
  assert.equal(fs.readFileSync(path.join(dir, "notes.txt"), "utf8"), "call the plumber\nbuy milk\n");
});

// examples/serve's "Three processes over PostgreSQL": server.mjs started three times as
// three-on-postgres.sh starts it (SINGLE_INSTANCE=0, one ROOT_DIR each, DATABASE_URL), on a fresh
// database of the test server. Runs submitted to any process are one journal; one process is
// SIGKILLed while driving runs, and once its leases lapse (30 s) a survivor's sweep (at most 60 s
// later) resumes them: each note is written once.
const POSTGRES_URL = process.env.KNAP_TEST_POSTGRES_URL;
test(
  "examples/serve as three processes over one PostgreSQL: shared journal, a killed process's runs resumed by a survivor's sweep, each note once",
  { skip: !POSTGRES_URL && "KNAP_TEST_POSTGRES_URL is not set (run `bash .ci/postgres.sh` and export the URL it prints)", timeout: 300_000 },
  async (t) => {
    const { default: pg } = await import("pg");
    const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
    const database = `knap_example_${process.pid}_${Date.now().toString(36)}`;
    await admin.query(`CREATE DATABASE ${database}`);
    const url = new URL(POSTGRES_URL);
    url.pathname = `/${database}`;
    const dirs = [0, 1, 2].map(() => fs.mkdtempSync(path.join(os.tmpdir(), "knap-serve-example-pg-")));
    const servers = [];
    t.after(async () => {
      for (const s of servers) s.child.kill("SIGKILL");
      const running = servers.filter((s) => s.child.exitCode === null && s.child.signalCode === null);
      await Promise.all(running.map((s) => new Promise((done) => s.child.once("exit", done))));
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
      for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
    });
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_API_KEY$|^CAVE_/.test(k)));
    const common = { ...env, CAVE_SERVE_TOKEN: "dev-token-0123456789", PORT: "0", SINGLE_INSTANCE: "0", DATABASE_URL: url.href, SCRIPTED_DELAY_MS: "1500" };
    for (const dir of dirs) servers.push(await startServer({ ...common, ROOT_DIR: dir }, /PostgreSQL store, scripted model/));
    const bases = servers.map((s) => `http://127.0.0.1:${s.port}`);
    const auth = { authorization: "Bearer dev-token-0123456789" };
    const submit = (base, runId) =>
      fetch(`${base}/runs`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ runId, input: `job ${runId}` }) });
    const summary = async (base, runId) => (await fetch(`${base}/runs/${runId}`, { headers: auth })).json();
    // Two runs on the first process (its two concurrent slots), one on each of the others.
    const placed = [["ex-a", 0], ["ex-b", 0], ["ex-c", 1], ["ex-d", 2]];
    for (const [runId, i] of placed) assert.equal((await submit(bases[i], runId)).status, 202, runId);
    // Every process sees every journal: the first process's runs are pending, read from another.
    const waitUntil = async (what, predicate, timeoutMs) => {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const value = await predicate();
        if (value) return value;
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await new Promise((done) => setTimeout(done, 100));
      }
    };
    await waitUntil("the first process's runs to start", async () => (await summary(bases[2], "ex-a")).status === "pending" && (await summary(bases[2], "ex-b")).status === "pending", 30_000);
    servers[0].child.kill("SIGKILL");
    const settled = await waitUntil(
      "every run to settle",
      async () => {
        const all = await Promise.all(placed.map(([runId]) => summary(bases[1], runId)));
        return all.every((s) => s.status === "completed" || s.status === "failed") && all;
      },
      200_000,
    );
    const notes = dirs.flatMap((dir) => (fs.existsSync(path.join(dir, "notes.txt")) ? fs.readFileSync(path.join(dir, "notes.txt"), "utf8").split("\n").filter(Boolean) : []));
    for (const [i, s] of settled.entries()) {
      const [runId, owner] = placed[i];
      if (s.status === "failed") {
        // The kill fell between the note's journaled intent and its settlement: never re-run.
        assert.match(s.message, /cave_durable_tool_effect_uncertain:note:/, runId);
        assert.equal(owner, 0, runId);
      } else {
        assert.equal(s.result.text, `Noted: job ${runId}`, runId);
        assert.equal(s.result.resumed === true, owner === 0, `${runId} resumed`);
      }
      assert.equal(notes.filter((n) => n === `job ${runId}`).length, 1, `${runId}: its note, once`);
    }
    // A settled run resubmitted to any process is answered from the shared journal, not re-run.
    const again = await submit(bases[2], "ex-a");
    assert.equal(again.status, 200);
    assert.equal((await again.json()).status, settled[0].status);
  },
);
