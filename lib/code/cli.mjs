// The `caveman-code` command (`@caveman-ai/coding-agent/cli`): flags, help, and main(). Kept
// small: the coding agent itself is imported only after the arguments are parsed, so `--help`
// and a bad flag answer without loading the engine.
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const CODING_AGENT_HELP = [
  "Usage: caveman-code [options]",
  "",
  "Options:",
  "  --workspace <path>    workspace root (default: current directory)",
  "  --model <id>          provider/model override",
  "  --observe-only        disable Cave runtime transforms",
  "  --max-cost-usd <usd>  best-effort per-turn public-catalog spend cap",
  "  --no-start-runtime    probe runtime without trying to start it",
  "  -h, --help            show help",
].join("\n");

const VALUE_FLAGS = { "--workspace": "workspace", "--model": "model", "--max-cost-usd": "maxCostUsd" };

/** Parses the flags left to right (a repeated flag's last value wins); throws on a bad token. */
export function parseCodingAgentCLIArgs(argv) {
  const options = { help: false };
  const args = Array.from(argv ?? [], String);
  for (let i = 0; i < args.length; i++) {
    const token = args[i];
    if (token === "-h" || token === "--help") options.help = true;
    else if (token === "--observe-only") options.cave = "off";
    else if (token === "--no-start-runtime") options.ensureRuntime = false;
    else if (Object.hasOwn(VALUE_FLAGS, token)) {
      const value = args[i + 1];
      if (value === undefined || value === "" || value.startsWith("--")) throw new Error(`caveman-code: missing value for ${token}`);
      i++;
      if (token === "--max-cost-usd") {
        const usd = Number(value);
        if (!Number.isFinite(usd) || usd <= 0) throw new Error("caveman-code: --max-cost-usd must be positive");
        options.maxCostUsd = usd;
      } else {
        options[VALUE_FLAGS[token]] = value;
      }
    } else {
      throw new Error(`caveman-code: unknown option ${token}`);
    }
  }
  return Object.freeze(options);
}

/**
 * `main(argv = process.argv.slice(2), io = { stdout, stderr }, runtime?)`: runs one session;
 * resolves with its bill (or `undefined` for `--help`). `io.stdin` defaults to `process.stdin`.
 * `KNAP_PROVIDER_BASE_URL` points the chosen model's provider at another base URL (a proxy or a
 * local server speaking that provider's API).
 */
export async function main(argv = process.argv.slice(2), io = { stdout: process.stdout, stderr: process.stderr }, runtime) {
  const options = parseCodingAgentCLIArgs(argv);
  if (options.help) {
    io.stdout.write(`${CODING_AGENT_HELP}\n`);
    return undefined;
  }
  if (!runtime) requirePiAi();
  // Only what a session needs, not all of knap/code: this is the path to the first prompt.
  const sdk = runtime ?? (await loadSessionModules());
  const agent = sdk.createCodingAgent({
    ...(options.workspace !== undefined ? { workspace: options.workspace } : {}),
    ...(options.model !== undefined ? { model: options.model } : {}),
  });
  if (!runtime) {
    // Load the run engine and the provider transport while the user types the first prompt, not
    // before it (startup) nor after it (the first turn).
    setTimeout(() => {
      import("../run.mjs").catch(() => {});
      import("../pi-ai.mjs").then((m) => m.loadPiAi()).catch(() => {});
    }, 50).unref();
  }
  try {
    const baseURL = process.env.KNAP_PROVIDER_BASE_URL;
    const atBaseURL = baseURL ? (runtime?.codingModelsAtProviderBaseURL ?? (await import("./provider-base-url.mjs")).codingModelsAtProviderBaseURL) : undefined;
    const runOverrides = baseURL ? { models: atBaseURL(agent.modelID, baseURL) } : undefined;
    return await sdk.runCodingSession({
      agent,
      ...(options.cave !== undefined ? { cave: options.cave } : {}),
      ...(options.maxCostUsd !== undefined ? { maxCostUsd: options.maxCostUsd } : {}),
      ...(options.ensureRuntime !== undefined ? { ensureRuntime: options.ensureRuntime } : {}),
      ...(runOverrides ? { runOverrides } : {}),
      input: io.stdin ?? process.stdin,
      output: io.stdout,
      notice: io.stderr,
    });
  } finally {
    // The session was handed this agent, so it does not close it: live bash sessions end here.
    await agent.close?.();
  }
}

async function loadSessionModules() {
  // The model catalog for KNAP_PROVIDER_BASE_URL (provider-base-url.mjs) is loaded only when set.
  const [agent, repl] = await Promise.all([import("./agent.mjs"), import("./repl.mjs")]);
  return { createCodingAgent: agent.createCodingAgent, runCodingSession: repl.runCodingSession };
}

/** The command talks to a provider through the optional peer pi-ai: say so before starting. */
function requirePiAi() {
  try {
    import.meta.resolve("@mariozechner/pi-ai");
  } catch {
    const error = new Error("caveman-code: calling a model provider needs the optional package @mariozechner/pi-ai, which is not installed");
    error.hint = "caveman-code: run `npm install @mariozechner/pi-ai` next to knap";
    throw error;
  }
}

/** Runs `main()` as the process: exit 0 after a session or `--help`, 1 with the message on stderr. */
export function runCli() {
  main().then(
    () => {
      process.exitCode = 0;
      // Provider keep-alive sockets must not hold the process after the final bill.
      setTimeout(() => process.exit(), 200).unref();
    },
    (error) => {
      const message = error instanceof Error ? error.message : String(error);
      process.stderr.write(`${message}\n`);
      // knap's errors carry their hint as a second message line already; the CLI's own as a property.
      if (typeof error?.hint === "string" && !message.includes(error.hint)) process.stderr.write(`${error.hint}\n`);
      process.exitCode = 1;
    },
  );
}

// Run directly (`node lib/code/cli.mjs`), also through a symlink such as npm's `.bin` entries.
function invokedDirectly() {
  if (!process.argv[1]) return false;
  try {
    return realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}
if (invokedDirectly()) runCli();
