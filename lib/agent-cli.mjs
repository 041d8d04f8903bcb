// The `caveman-agent` command (the reference package's bin): `caveman-agent serve [dir] [--port N]
// [--host H] [--locked]` serves one agent directory with createAgentServer. What the reference
// documents: port `PORT` else 8080, host `HOST` else 0.0.0.0, `CAVE_SERVE_TOKEN` (≥ 16 chars)
// required, `CAVE_JOURNAL_URL` + `CAVE_JOURNAL_TOKEN` select HttpDurableStore (a URL without a
// token refuses at startup), `--locked` runs through `.caveman/agent.lock.json`. How a
// directory holds its agent is knap's choice (the notes do not say): `agent.mjs` (or
// `agent.js`) whose default export is the agent() definition, with an optional `runOptions`
// export. `--locked` needs a Cave Build lock, which knap cannot run: refused.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { HttpDurableStore, defaultDurableRoot } from "./durable.mjs";
import { native } from "./native.mjs";
import { createAgentServer } from "./serve.mjs";

export const AGENT_MODULES = ["agent.mjs", "agent.js"];

export const USAGE = `Usage: caveman-agent serve [dir] [--port N] [--host H] [--locked]

Serves the agent in dir (default: the current directory) over HTTP: POST /runs, /sessions with
SSE and WebSocket event streams, /healthz, /readyz; crashed runs are resumed on start and every
60 s. dir/agent.mjs (or agent.js) default-exports the agent() definition; an optional named
export runOptions (an object, or a function of {sessionId, runId, principal}) gives every run
its options. Journals go to dir/.caveman/runs/durable unless CAVE_JOURNAL_URL is set.

Options:
  --port N    port to listen on (default: PORT, else 8080)
  --host H    address to listen on (default: HOST, else 0.0.0.0)
  --locked    run through .caveman/agent.lock.json (a Cave Build lock; knap refuses it)

Environment:
  CAVE_SERVE_TOKEN     the bearer token clients must send (required, at least 16 characters)
  CAVE_JOURNAL_URL     keep journals on a journal server (HttpDurableStore; https unless localhost)
  CAVE_JOURNAL_TOKEN   that server's bearer token (required with CAVE_JOURNAL_URL)
`;


/** A refusal: the code's message on stderr, and the exit status (2: usage, 1: startup). */
class CliError extends Error {
  constructor(code, message, status = 1) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

const usage = (detail) => new CliError("cave_agent_cli_usage", `cave_agent_cli_usage: ${detail}\nhint: caveman-agent serve [dir] [--port N] [--host H] [--locked]; --help for more`, 2);

function parsePort(text, from) {
  const n = /^\d{1,5}$/.test(String(text)) ? Number(text) : Number.NaN;
  if (!Number.isInteger(n) || n > 65_535) {
    throw new CliError("cave_serve_port_invalid", `cave_serve_port_invalid: ${from} must be a port number from 0 to 65535, got ${JSON.stringify(String(text))}`);
  }
  return n;
}

/** `serve` arguments → { dir, port?, host?, locked }. */
export function parseServeArgs(args) {
  const out = { dir: undefined, port: undefined, host: undefined, locked: false, help: false };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const [flag, inline] = arg.startsWith("--") && arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    const value = () => {
      if (inline !== undefined) return inline;
      const next = args[++i];
      if (next === undefined || next.startsWith("--")) throw usage(`${flag} needs a value`);
      return next;
    };
    if (flag === "--help" || flag === "-h") out.help = true;
    else if (flag === "--port") out.port = parsePort(value(), "--port");
    else if (flag === "--host") {
      out.host = value();
      if (out.host === "") throw usage("--host needs a value");
    } else if (flag === "--locked") {
      if (inline !== undefined) throw usage("--locked takes no value");
      out.locked = true;
    } else if (arg.startsWith("-")) throw usage(`unknown option ${JSON.stringify(arg)}`);
    else if (out.dir === undefined) out.dir = arg;
    else throw usage(`one agent directory only (got ${JSON.stringify(out.dir)} and ${JSON.stringify(arg)})`);
  }
  return out;
}

/** The store the environment selects: HttpDurableStore for CAVE_JOURNAL_URL, else the default. */
export function journalStore(env) {
  const url = env.CAVE_JOURNAL_URL;
  const token = env.CAVE_JOURNAL_TOKEN;
  if (url === undefined || url === "") {
    if (token !== undefined && token !== "") {
      throw new CliError("cave_serve_journal_url_required", "cave_serve_journal_url_required: CAVE_JOURNAL_TOKEN is set but CAVE_JOURNAL_URL is not\nhint: set CAVE_JOURNAL_URL to the journal server, or unset CAVE_JOURNAL_TOKEN to keep journals on disk");
    }
    return undefined;
  }
  try {
    return new HttpDurableStore({ url, token: token === "" ? undefined : token });
  } catch (error) {
    const hint = error.code === "cave_durable_http_token_required" ? "\nhint: set CAVE_JOURNAL_TOKEN to the journal server's bearer token" : "";
    throw new CliError(error.code, `${error.message.split("\n")[0]} (CAVE_JOURNAL_URL)${hint}`);
  }
}

/** Imports the directory's agent module: `{ definition, runOptions? }`. */
export async function loadAgentModule(dir) {
  let stat;
  try {
    stat = fs.statSync(dir);
  } catch {
    throw new CliError("cave_serve_agent_module_missing", `cave_serve_agent_module_missing: ${dir} does not exist`);
  }
  if (!stat.isDirectory()) throw new CliError("cave_serve_agent_module_missing", `cave_serve_agent_module_missing: ${dir} is not a directory`);
  const file = AGENT_MODULES.map((name) => path.join(dir, name)).find((f) => fs.existsSync(f));
  if (!file) {
    throw new CliError(
      "cave_serve_agent_module_missing",
      `cave_serve_agent_module_missing: ${dir} has no ${AGENT_MODULES.join(" or ")}\nhint: create ${path.join(dir, "agent.mjs")} with \`export default agent({ … })\``,
    );
  }
  const mod = await import(pathToFileURL(file).href);
  const definition = mod.default;
  if (definition?.kind !== "agent") {
    throw new CliError("cave_serve_agent_module_invalid", `cave_serve_agent_module_invalid: the default export of ${file} is not an agent() definition`);
  }
  const runOptions = mod.runOptions;
  if (runOptions !== undefined && typeof runOptions !== "function" && (runOptions === null || typeof runOptions !== "object")) {
    throw new CliError("cave_serve_agent_module_invalid", `cave_serve_agent_module_invalid: the runOptions export of ${file} must be an object or a function`);
  }
  return { file, definition, runOptions };
}

/**
 * Runs `caveman-agent <args>`. Resolves once serving has started (to `{ server, port, host,
 * close }`), or to the exit status of a refusal or of --help (having written to `io`).
 */
export async function main(args, { env = process.env, cwd = process.cwd(), stdout = process.stdout, stderr = process.stderr } = {}) {
  try {
    const [command, ...rest] = args;
    if (command === undefined || command === "--help" || command === "-h" || command === "help") {
      stdout.write(USAGE);
      return command === undefined ? 2 : 0;
    }
    if (command !== "serve") {
      throw new CliError("cave_agent_cli_command_unsupported", `cave_agent_cli_command_unsupported: ${JSON.stringify(command)}\nhint: knap's caveman-agent has one command, serve`, 2);
    }
    const options = parseServeArgs(rest);
    if (options.help) {
      stdout.write(USAGE);
      return 0;
    }
    if (options.locked) {
      throw new CliError(
        "cave_serve_build_unsupported",
        "cave_serve_build_unsupported: --locked runs through .caveman/agent.lock.json, a Cave Build lock, and knap does not run locked Cave builds\nhint: serve the directory without --locked",
      );
    }
    const token = env.CAVE_SERVE_TOKEN;
    if (typeof token !== "string" || token.length < native.serveLimits().minTokenChars) {
      throw new CliError(
        "cave_serve_token_required",
        "cave_serve_token_required: set a bearer token of at least 16 characters, or pass authenticate(); this endpoint spends money\nhint: export CAVE_SERVE_TOKEN=$(head -c 24 /dev/urandom | base64)",
      );
    }
    const port = options.port ?? (env.PORT !== undefined && env.PORT !== "" ? parsePort(env.PORT, "PORT") : 8080);
    const host = options.host ?? (env.HOST !== undefined && env.HOST !== "" ? env.HOST : "0.0.0.0");
    const store = journalStore(env);
    const dir = path.resolve(cwd, options.dir ?? ".");
    const agentModule = await loadAgentModule(dir);
    const server = createAgentServer({
      definition: agentModule.definition,
      token,
      rootDir: dir,
      ...(store ? { store } : {}),
      ...(agentModule.runOptions === undefined ? {} : { runOptions: agentModule.runOptions }),
    });
    const bound = await server.listen(port, host);
    const shown = host.includes(":") ? `[${host}]` : host;
    const journals = store ? `journals at ${env.CAVE_JOURNAL_URL}` : `journals in ${defaultDurableRoot(dir)}`;
    stderr.write(`caveman-agent serve: ${agentModule.definition.id} on http://${shown}:${bound} (${journals})\n`);
    return { server, port: bound, host, close: (graceMs) => server.close(graceMs) };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    stderr.write(`${message}\n`);
    return error instanceof CliError ? error.status : 1;
  }
}

/** The bin: serve until SIGTERM/SIGINT, then drain (a second signal exits at once). */
export async function runAgentCli(args = process.argv.slice(2)) {
  const outcome = await main(args);
  if (typeof outcome === "number") {
    process.exitCode = outcome;
    return;
  }
  let stopping = false;
  const stop = (signal) => {
    if (stopping) process.exit(signal === "SIGINT" ? 130 : 143);
    stopping = true;
    process.stderr.write(`caveman-agent serve: ${signal}, draining in-flight runs\n`);
    outcome.close().then(
      () => process.exit(0),
      (error) => {
        process.stderr.write(`caveman-agent serve: ${error?.message ?? error}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}
