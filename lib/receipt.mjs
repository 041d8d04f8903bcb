// The run receipt's public helpers: the strict parser (checks in Rust), the text rendering and
// `RunOptions.printReceipt`'s file + stdout output.
import fs from "node:fs";
import path from "node:path";
import { native, codedError, deepFreeze } from "./native.mjs";
import { priceOf } from "./prices.mjs";

export const AGENT_RUN_RECEIPT_SCHEMA = "caveman.agent.run-receipt.v1";

const invalid = (field) => codedError("cave_run_receipt_invalid", `cave_run_receipt_invalid:${field}`);

/** A plain-data copy: no accessors, no class instances, no cycles, no -0, undefined keys dropped. */
function snapshot(value, seen = new Set()) {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (!Number.isFinite(value) || Object.is(value, -0)) throw invalid("number");
    return value;
  }
  if (typeof value !== "object") throw invalid("identity");
  if (seen.has(value)) throw invalid("cycle");
  seen.add(value);
  let out;
  if (Array.isArray(value)) {
    out = [];
    for (let i = 0; i < value.length; i++) {
      const d = Object.getOwnPropertyDescriptor(value, i);
      if (!d || !("value" in d)) throw invalid("identity");
      out.push(snapshot(d.value, seen));
    }
  } else {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) throw invalid("identity");
    out = {};
    for (const key of Reflect.ownKeys(value)) {
      if (typeof key === "symbol") throw invalid("identity");
      const d = Object.getOwnPropertyDescriptor(value, key);
      if (!("value" in d)) throw invalid("identity");
      if (d.value !== undefined) out[key] = snapshot(d.value, seen);
    }
  }
  seen.delete(value);
  return out;
}

/** `defineRunReceipt(value)`: the single strict parser; returns a deep-frozen receipt. */
export function defineRunReceipt(value) {
  const copy = snapshot(value);
  try {
    native.validateRunReceiptJson(JSON.stringify(copy));
  } catch (error) {
    throw codedError(error.code ?? "cave_run_receipt_invalid", error.message);
  }
  return deepFreeze(copy);
}

/** The same function (`validateRunReceipt` is an alias in the reference). */
export const validateRunReceipt = defineRunReceipt;

// ---- renderReceipt -------------------------------------------------------------------------

const int = (n) => Math.round(n).toLocaleString("en-US");
const usd = (n) => `$${n.toFixed(4)}`;
const row = (label, value) => `  ${label.padEnd(15)}${value}`;
const more = (text) => `${" ".repeat(17)}${text}`;

function flatCalls(receipt) {
  const out = [...(receipt.calls ?? [])];
  for (const child of receipt.subagents ?? []) out.push(...flatCalls(child));
  return out;
}

/** Every call repriced with all input as fresh input; undefined when some call cannot be. */
function coldEstimate(receipt) {
  let total = 0;
  for (const call of receipt.calls ?? []) {
    const price = priceOf(call.provider, call.model);
    if (!price) return { unavailable: call.model };
    total += ((call.inputTokens + call.cacheReadTokens + call.cacheWriteTokens) * price.input + call.outputTokens * price.output) / 1e6;
  }
  for (const child of receipt.subagents ?? []) {
    const c = coldEstimate(child);
    if (c === undefined || c.unavailable !== undefined) return undefined;
    total += c.usd;
  }
  return { usd: total };
}

function trimUsd(n) {
  return `$${String(Number(n.toFixed(10)))}`;
}

/** `renderReceipt(receipt)`: the receipt as the text `printReceipt` writes to stdout. */
export function renderReceipt(receipt) {
  const calls = flatCalls(receipt);
  const n = calls.length;
  const lines = [];
  const stop = receipt.stopReason ?? "complete";
  const head = stop === "complete" ? "run complete" : `run stopped — ${stop.replaceAll("_", " ")}`;
  lines.push(`${head} · ${n} turn${n === 1 ? "" : "s"} · ${((receipt.durationMs ?? 0) / 1000).toFixed(1)}s`);
  lines.push("");
  const mode = receipt.mode === "optimized" ? "optimized" : "observe-only — engine adds compression + recovery";
  if (n === 0) {
    lines.push(row("mode", mode));
    lines.push("  no model calls were made — nothing to price, nothing to estimate.");
  } else {
    const models = new Map();
    for (const c of calls) {
      const key = `${c.provider}/${c.model}`;
      const m = models.get(key) ?? { model: c.model, count: 0 };
      m.count += 1;
      models.set(key, m);
    }
    lines.push(row("model", [...models.values()].map((m) => `${m.model} (${m.count} call${m.count === 1 ? "" : "s"})`).join(" · ")));
    lines.push(row("mode", mode));
    const sum = (k) => calls.reduce((a, c) => a + (c[k] ?? 0), 0);
    const read = sum("cacheReadTokens");
    const write = sum("cacheWriteTokens");
    const input = sum("inputTokens") + read + write;
    const cache = read > 0 && write > 0 ? `${int(read)} read warm · ${int(write)} written to cache` : write > 0 ? `${int(write)} written to cache` : `${int(read)} read warm`;
    lines.push(row("input", `${int(input)} tok · ${cache} (provider-reported)`));
    lines.push(row("output", `${int(sum("outputTokens"))} tok`));
    const unpricedCall = calls.find((c) => c.unpriced);
    if (unpricedCall || receipt.unpriced) {
      lines.push(row("cost", `unpriced — ${unpricedCall?.model ?? "a model in this run"} is not in the public catalog,`));
      lines.push(more("so no dollar figure is shown rather than a guessed one"));
    } else {
      const cost = receipt.totalEstimatedUsd ?? 0;
      lines.push(row("cost", `${usd(cost)}   list-price subtotal, not an invoice`));
      const cold = receipt.resume ? undefined : coldEstimate(receipt);
      if (cold?.unavailable !== undefined) {
        lines.push(row("cold estimate", `unavailable — ${cold.unavailable} uses recurring pricing`));
      } else if (cold) {
        if (write > 0 && cost > cold.usd) {
          lines.push(more("above the cold estimate: this run paid the up-front"));
          lines.push(more("premium to write your prefix into the provider cache"));
        }
        const what = read > 0 && write > 0 ? "provider cache" : write > 0 ? "cache write" : "warm prefix";
        lines.push(row("cold estimate", `${usd(cold.usd)}   inferred — same run with no ${what}`));
      }
    }
  }
  if (receipt.denomination && receipt.denomination !== "none" && receipt.max !== undefined && receipt.spent !== undefined) {
    const tokens = receipt.denomination === "tokens";
    const spent = tokens ? int(receipt.spent) : usd(Number(receipt.spent.toFixed(4)));
    const cap = tokens ? int(receipt.max) : trimUsd(receipt.max);
    const prefix = tokens ? "token cap: " : "";
    if (receipt.capBreached || receipt.spent > receipt.max) {
      const over = tokens ? int(receipt.spent - receipt.max) : usd(receipt.spent - receipt.max);
      lines.push(row("budget", `${prefix}${spent} spent of ${cap} cap · over by ${over} (provider-reported after reservation)`));
    } else {
      const pct = Math.floor(((receipt.max - receipt.spent) / receipt.max) * 100);
      lines.push(row("budget", `${prefix}${spent} spent of ${cap} · ${pct}% remains`));
    }
  }
  const r = receipt.resume;
  if (r) {
    const prior = r.priorUnpriced ? `${r.priorCalls} call${r.priorCalls === 1 ? "" : "s"} (unpriced)` : `${r.priorCalls} call${r.priorCalls === 1 ? "" : "s"}, ${usd(r.priorEstimatedUsd)}`;
    lines.push(row("resumed", `attempt ${r.attempts} · prior attempts: ${prior} — included in the totals above`));
    const d = r.possibleDoubleCountCalls ?? 0;
    if (d > 0) {
      lines.push(more(`${d} ${d === 1 ? "call was" : "calls were"} in flight at a crash — the provider`));
      lines.push(more(`may have billed ${d === 1 ? "it" : "them"}; that usage is unknown and counted nowhere`));
    }
  }
  if (receipt.receiptPath !== undefined) {
    lines.push("");
    lines.push(row("full receipt", receipt.receiptPath));
  }
  return lines.join("\n") + "\n";
}

/**
 * `RunOptions.printReceipt`: the receipt as JSON under `<rootDir>/.caveman/runs/<stamp>/receipt.json`,
 * then its rendering on stdout. A failure is reported on stderr; the run result stands.
 */
export function printRunReceipt(result, rootDir = process.cwd(), io = { stdout: process.stdout, stderr: process.stderr }) {
  try {
    const stamp = new Date().toISOString().slice(0, 19).replaceAll(":", "-");
    const runs = path.join(rootDir, ".caveman", "runs");
    fs.mkdirSync(runs, { recursive: true });
    let name = stamp;
    for (let i = 2; ; i++) {
      try {
        fs.mkdirSync(path.join(runs, name));
        break;
      } catch (error) {
        if (error.code !== "EEXIST" || i > 99) throw error;
        name = `${stamp}-${i}`;
      }
    }
    const relative = `.caveman/runs/${name}/receipt.json`;
    fs.writeFileSync(path.join(rootDir, relative), JSON.stringify(result.receipt, null, 2) + "\n");
    io.stdout.write(renderReceipt({ ...result.receipt, mode: result.mode, durationMs: result.latencyMs, receiptPath: relative }));
  } catch (error) {
    io.stderr.write(`caveman agent: receipt write failed: ${error?.message ?? String(error)}\n`);
  }
}
