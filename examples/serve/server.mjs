// An agent served over HTTP with knap/serve: /runs jobs and /sessions with live event streams,
// journaled in the disk store (or PostgreSQL with DATABASE_URL). Offline by default: a scripted
// model that calls the `note` tool once per message and then answers.
//
//   CAVE_SERVE_TOKEN=dev-token-0123456789 node examples/serve/server.mjs          # port 8080
//   PORT=8081 DATABASE_URL=postgres://… SINGLE_INSTANCE=0 node examples/serve/server.mjs
//   SCRIPTED_DELAY_MS=2000 …   the scripted model takes that long per answer (to kill a server mid-run)
import fs from "node:fs";
import path from "node:path";

import { agent, tool, schema, SqlDurableStore, DiskDurableStore } from "knap";
import { fauxModel, scriptedStream } from "knap/testing";
import { createAgentServer } from "knap/serve";

const token = process.env.CAVE_SERVE_TOKEN ?? "dev-token-0123456789";
const rootDir = process.env.ROOT_DIR ?? path.resolve("served-agent");
fs.mkdirSync(rootDir, { recursive: true });

const notes = agent({
  id: "notes",
  instructions: "Keep a note of what the user says, then confirm.",
  model: "anthropic/claude-haiku-4-5",
  sandbox: "host",
  tools: [
    tool({
      name: "note",
      description: "Append a note",
      input: schema.object({ text: schema.string() }),
      effect: "write",
      execute: async ({ text }) => {
        fs.appendFileSync(path.join(rootDir, "notes.txt"), `${text}\n`);
        return "noted";
      },
    }),
  ],
});

// The scripted model reads the transcript, so a run resumed in another process gets the same
// answers: a `note` call for a new user message, then the confirmation.
const delayMs = Number(process.env.SCRIPTED_DELAY_MS ?? 0);
const scripted = async (model, context, options) => {
  if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
  const last = context.messages.at(-1);
  const userText = [...context.messages].reverse().find((m) => m.role === "user")?.content?.[0]?.text ?? "";
  const turn = last?.role === "toolResult" ? { text: `Noted: ${userText.split("\n")[0]}` } : { toolCalls: [{ name: "note", args: { text: userText.split("\n")[0] } }] };
  return scriptedStream([turn])(model, context, options);
};
const offline = !process.env.ANTHROPIC_API_KEY;

let store;
if (process.env.DATABASE_URL) {
  const { default: pg } = await import("pg");
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
  await pool.query(SqlDurableStore.schema("postgres"));
  store = new SqlDurableStore({ sql: { exec: async (q, p) => (await pool.query(q, [...p])).rows }, dialect: "postgres" });
} else {
  store = new DiskDurableStore(path.join(rootDir, ".caveman", "runs", "durable"));
}

const server = createAgentServer({
  definition: notes,
  token,
  store,
  rootDir,
  singleInstance: process.env.SINGLE_INSTANCE !== "0",
  // Per run: the principal (if any) decides; here every run gets the same options.
  runOptions: () => (offline ? { model: fauxModel(), streamFn: scripted } : { budget: { maxTokens: 50_000 }, maxModelCalls: 8 }),
});
const port = await server.listen(Number(process.env.PORT ?? 8080), process.env.HOST ?? "127.0.0.1");
process.stdout.write(`serving ${notes.id} on http://127.0.0.1:${port} (${process.env.DATABASE_URL ? "PostgreSQL" : "disk"} store${offline ? ", scripted model" : ""})\n`);
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    await server.close(10_000);
    process.exit(0);
  });
}
