// Turn and session bills of the coding agent, and their text (the reference's templates).
import { codedError } from "../native.mjs";

/** `CODING_CACHE_INPUT_TOKEN_HIT_TARGET`. */
export const CACHE_HIT_TARGET = 0.98;

const n = (value) => Number(value).toLocaleString("en-US");
const pct = (ratio) => (ratio * 100).toFixed(2);
const isCount = (value) => Number.isSafeInteger(value) && value >= 0;

function oneBasis(bases) {
  const unique = [...new Set(bases)];
  if (unique.length > 1) throw codedError("cave_transform_trace_basis_mixed");
  return unique[0] ?? "byte_derived";
}

function cacheRatio(usageBasis, input, cacheRead, cacheWrite) {
  for (const count of [input, cacheRead, cacheWrite]) if (!isCount(count)) throw codedError("cave_cache_usage_invalid");
  const providerInput = input + cacheRead + cacheWrite;
  return usageBasis === "provider_reported" && providerInput > 0 ? cacheRead / providerInput : null;
}

const failureText = (failure) => (typeof failure === "string" ? failure : String(failure?.transformID ?? failure?.transformId ?? failure?.id ?? failure));

/** The bill of turn `turn` from its `RunResult`. */
export function turnBill(turn, result) {
  const applied = (result.transformTrace ?? []).filter((item) => item?.outcome === "applied");
  const tokensBasis = oneBasis(applied.map((item) => item.tokensBasis ?? "byte_derived"));
  const before = applied.reduce((sum, item) => sum + (item.tokensBefore ?? 0), 0);
  const after = applied.reduce((sum, item) => sum + (item.tokensAfter ?? 0), 0);
  const ratio = cacheRatio(result.usageBasis, result.inputTokens, result.cacheReadTokens, result.cacheWriteTokens);
  return {
    turn,
    mode: result.mode,
    provider: result.provider,
    model: result.model,
    contextBill: result.contextBill ?? {},
    transformedTokensBefore: before,
    transformedTokensAfter: after,
    tokensSavedInferred: Math.max(0, before - after),
    tokensBasis,
    transformIDs: [...(result.transformIDs ?? [])],
    transformFailures: (result.transformFailures ?? []).map(failureText),
    recoveryResolved: Boolean(result.recoveryResolved),
    usageBasis: result.usageBasis,
    inputTokens: result.inputTokens,
    outputTokens: result.outputTokens,
    cacheReadTokens: result.cacheReadTokens,
    cacheWriteTokens: result.cacheWriteTokens,
    cacheInputTokenHitRatio: ratio,
    cacheHitTarget: CACHE_HIT_TARGET,
    cacheHitTargetMet: ratio === null ? null : ratio >= CACHE_HIT_TARGET,
    costUsd: result.costUsd,
    priceBasis: result.priceBasis,
    latencyMs: result.latencyMs,
  };
}

/** The session's totals over its recorded turns. */
export function sessionBill(session) {
  const bills = session.turns.map((t) => t.bill);
  const sum = (key) => bills.reduce((total, bill) => total + bill[key], 0);
  const tokensBasis = oneBasis(bills.filter((b) => b.transformIDs.length > 0 || b.transformedTokensBefore > 0).map((b) => b.tokensBasis));
  const sortedUnique = (key) => [...new Set(bills.flatMap((b) => b[key]))].sort();
  const inputTokens = sum("inputTokens");
  const cacheReadTokens = sum("cacheReadTokens");
  const cacheWriteTokens = sum("cacheWriteTokens");
  const allReported = bills.length > 0 && bills.every((b) => b.usageBasis === "provider_reported");
  const ratio = bills.some((b) => b.cacheInputTokenHitRatio === null)
    ? null
    : cacheRatio(allReported ? "provider_reported" : "unavailable", inputTokens, cacheReadTokens, cacheWriteTokens);
  const before = sum("transformedTokensBefore");
  const after = sum("transformedTokensAfter");
  return {
    turns: bills.length,
    mode: session.mode,
    transformedTokensBefore: before,
    transformedTokensAfter: after,
    tokensSavedInferred: sum("tokensSavedInferred"),
    tokensBasis,
    inputTokens,
    outputTokens: sum("outputTokens"),
    cacheReadTokens,
    cacheWriteTokens,
    cacheInputTokenHitRatio: ratio,
    cacheHitTarget: CACHE_HIT_TARGET,
    cacheHitTargetMet: ratio === null ? null : ratio >= CACHE_HIT_TARGET,
    costUsd: sum("costUsd"),
    priceBasis: bills.length > 0 && bills.every((b) => b.priceBasis === "public_catalog") ? "public_catalog" : "unpriced",
    usageBasis: allReported ? "provider_reported" : "unavailable",
    transformIDs: sortedUnique("transformIDs"),
    transformFailures: sortedUnique("transformFailures"),
  };
}

function usageLines(bill) {
  return [
    `  provider usage (${bill.usageBasis}): in ${n(bill.inputTokens)} · out ${n(bill.outputTokens)} · cache read ${n(bill.cacheReadTokens)} · cache write ${n(bill.cacheWriteTokens)}`,
    bill.cacheInputTokenHitRatio === null
      ? "  cache input-token hit ratio: unavailable — complete provider usage required"
      : `  cache input-token hit ratio: ${pct(bill.cacheInputTokenHitRatio)}% · target ${pct(bill.cacheHitTarget)}% ${bill.cacheHitTargetMet ? "met" : "missed"} — provider-reported; cold seeds included`,
    `  spend: ${bill.costUsd.toFixed(6)} USD measured at public catalog list prices (${bill.priceBasis})`,
  ];
}

/** The lines of a turn bill; `sessionSaved` includes this turn. */
export function formatTurnBill(bill, sessionSaved) {
  const lines = [`turn ${bill.turn} · ${bill.mode} · ${bill.provider}/${bill.model} · ${n(bill.latencyMs)} ms`];
  if (bill.mode === "observe-only") {
    lines.push("  context transforms: off (observe-only) — provider usage and local context estimates remain available");
  } else if (bill.transformIDs.length === 0) {
    lines.push("  context transforms: none applied this turn (nothing was smaller compressed)");
  } else {
    lines.push(`  context transforms: ${bill.transformIDs.join(", ")}`);
    lines.push(`  transformed context: ${n(bill.transformedTokensBefore)} tokens before → ${n(bill.transformedTokensAfter)} after`);
  }
  lines.push(`  tokens saved: ${n(bill.tokensSavedInferred)} this turn · ${n(sessionSaved)} this session — local estimate, token counts only`);
  lines.push(...usageLines(bill));
  if (bill.transformFailures.length > 0) lines.push(`  transform fell back to original: ${bill.transformFailures.join(", ")}`);
  return lines;
}

/** The lines of a session bill. */
export function formatSessionBill(bill) {
  if (bill.turns === 0) {
    return [`session · 0 turns · ${bill.mode}`, "  no provider calls this session — nothing measured, nothing claimed"];
  }
  return [
    `session · ${n(bill.turns)} ${bill.turns === 1 ? "turn" : "turns"} · ${bill.mode}`,
    bill.transformIDs.length === 0 ? "  context transforms: none applied" : `  context transforms: ${bill.transformIDs.join(", ")}`,
    `  transformed context: ${n(bill.transformedTokensBefore)} tokens before → ${n(bill.transformedTokensAfter)} after`,
    `  tokens saved: ${n(bill.tokensSavedInferred)} — local estimate, token counts only; no provider savings claim`,
    ...usageLines(bill),
  ];
}
