// runCodingSession(): the interactive prompt loop over a coding session — header, prompt, one
// turn per line with its bill, the slash commands, and the session bill at the end.
import readline from "node:readline";
import { rejectInternalRunOptions } from "../internal-run-options.mjs";
import { createCodingAgent } from "./agent.mjs";
import { startCodingSession, observeCodingTurn } from "./session.mjs";
import { formatTurnBill, formatSessionBill, sessionBill } from "./bill.mjs";
import { proveRecovery, formatRecoveryProof } from "./recovery.mjs";
import { createTurnView } from "./view.mjs";

export const REPL_HELP = [
  "/tokens          session token bill so far",
  "/prove-recovery  compress one recorded tool output and recover it byte-exactly",
  "/mode            show whether this session is optimized or observe-only",
  "/help            this list",
  "/exit            end the session and print the final bill",
];

// A turn that stopped before the model finished says why (the reference prints only the text,
// often empty here, and the bill). One line per graceful stop reason, with what to change.
const STOPPED = {
  budget_exhausted: "the run's budget does not cover the next model call; raise it",
  wallet_revoked: "the run's wallet was revoked",
  deadline: "the run's deadline passed",
  loop_detected: "the same tool call kept repeating (CODING_RUN_BREAKERS); rephrase or narrow the request",
  no_progress: "several steps made no progress (CODING_RUN_BREAKERS); rephrase or narrow the request",
  call_budget_exhausted: "the turn used all its model calls; continue with another prompt",
};

/** The line for a turn that did not complete, or undefined. */
export function stoppedLine(stopReason) {
  if (stopReason === undefined || stopReason === "complete") return undefined;
  return `turn stopped: ${stopReason} — ${STOPPED[stopReason] ?? "the run ended before the model finished"}`;
}

const RUN_ONLY_OPTIONS = new Set(["agent", "agentOptions", "input", "output", "notice", "runOverrides", "onNotice"]);
const INTERRUPTED = "cave_turn_interrupted";

/**
 * `runCodingSession(options = {})`: reads prompts from `input` (stdin), writes to `output`
 * (stdout) and notices to `notice` (stderr); resolves with the session bill.
 */
export async function runCodingSession(options = {}) {
  options = options ?? {};
  const runOverrides = options.runOverrides ?? {};
  rejectInternalRunOptions(runOverrides);
  const out = options.output ?? process.stdout;
  const notice = options.notice ?? process.stderr;
  const write = (value) => out.write(`${value}\n`);
  const owned = options.agent === undefined;
  const agent = options.agent ?? createCodingAgent(options.agentOptions ?? {});

  const sessionOptions = {};
  for (const [key, value] of Object.entries(options)) if (!RUN_ONLY_OPTIONS.has(key)) sessionOptions[key] = value;
  sessionOptions.onNotice = (line) => {
    notice.write(`${line}\n`);
    options.onNotice?.(line);
  };
  let session;
  try {
    session = await startCodingSession(agent, sessionOptions);
  } catch (error) {
    if (owned) await agent.close();
    throw error;
  }

  write(`caveman-code · ${agent.modelID} · workspace ${agent.workspace}`);
  write(session.mode === "optimized" ? "mode: optimized — reversible context transforms on (history + tool results)" : "mode: observe-only");
  for (const line of REPL_HELP) write(line);

  const input = options.input ?? process.stdin;
  const rl = readline.createInterface({ input, output: out });
  const tty = Boolean(out.isTTY);
  let turn = null; // the running turn's AbortController
  let closed = false;
  rl.on("close", () => {
    closed = true;
  });
  // On a terminal readline draws the prompt (so line editing redraws it too); otherwise it is
  // written as is, also after the input has ended while queued lines are still being answered.
  const prompt = () => {
    const text = `agent [${session.mode}] > `;
    if (rl.terminal && !closed) {
      out.write("\n");
      rl.setPrompt(text);
      rl.prompt();
    } else {
      out.write(`\n${text}`);
    }
  };
  // Ctrl-C: aborts the running turn (its bash process group dies) and returns to the prompt;
  // clears a half-typed line; at an empty prompt it ends the session with the final bill.
  const interrupt = () => {
    if (turn) {
      turn.abort(new Error(INTERRUPTED));
      return;
    }
    if (rl.terminal && rl.line) {
      rl.write(null, { ctrl: true, name: "e" });
      rl.write(null, { ctrl: true, name: "u" });
      return;
    }
    if (rl.terminal) out.write("\n");
    rl.close();
  };
  rl.on("SIGINT", interrupt);
  // Without a terminal, Ctrl-C reaches the process as a signal (only when reading our stdin).
  const signalled = !rl.terminal && input === process.stdin;
  if (signalled) process.on("SIGINT", interrupt);

  try {
    prompt();
    for await (const raw of rl) {
      const line = raw.trim();
      if (line === "/exit" || line === "/quit") break;
      if (line === "") {
        prompt();
        continue;
      }
      if (line === "/help") {
        for (const l of REPL_HELP) write(l);
      } else if (line === "/mode") {
        write(`mode: ${session.mode}`);
      } else if (line === "/tokens") {
        try {
          for (const l of formatSessionBill(sessionBill(session))) write(l);
        } catch (error) {
          write(`error: ${messageOf(error)}`);
        }
      } else if (line === "/prove-recovery") {
        await showProof(session, write);
      } else {
        await oneTurn(session, line, runOverrides, { out, notice, tty, write }, (controller) => {
          turn = controller;
        });
        turn = null;
      }
      prompt();
    }
  } finally {
    if (signalled) process.off("SIGINT", interrupt);
    rl.off("SIGINT", interrupt);
    rl.close();
    if (owned) await agent.close();
  }
  write("");
  const bill = sessionBill(session);
  for (const line of formatSessionBill(bill)) write(line);
  return bill;
}

function messageOf(error) {
  return error instanceof Error ? error.message : String(error);
}

async function showProof(session, write) {
  try {
    const proof = await proveRecovery(session);
    session.proofShown = true;
    write(formatRecoveryProof(proof));
  } catch (error) {
    write(`recovery proof unavailable: ${messageOf(error)}`);
  }
}

async function oneTurn(session, line, runOverrides, io, setTurn) {
  const { write } = io;
  const controller = new AbortController();
  setTurn(controller);
  const view = createTurnView(io);
  try {
    const turn = await observeCodingTurn(session, line, runOverrides, (e) => view.event(e), controller.signal);
    const printText = view.finish(turn.text);
    if (!view.started) write("");
    // Not on a terminal stdout stays the reference's output and the note goes with the tool
    // lines; on a terminal the note stands in for a stopped turn's empty text.
    const stopped = stoppedLine(turn.receipt?.stopReason);
    if (printText && !(io.tty && stopped && turn.text === "")) write(turn.text);
    if (stopped) (io.tty ? write : (l) => io.notice.write(`${l}\n`))(stopped);
    write("");
    const saved = session.turns.reduce((sum, t) => sum + t.bill.tokensSavedInferred, 0);
    for (const l of formatTurnBill(turn.bill, saved)) write(l);
    if (!session.proofShown && turn.bill.transformIDs.length > 0) await showProof(session, write);
  } catch (error) {
    view.finish("");
    if (controller.signal.aborted && controller.signal.reason?.message === INTERRUPTED) {
      write("turn aborted (Ctrl-C); the session continues");
    } else {
      write(`error: ${messageOf(error)}`);
    }
  }
}
