// summarizeCodingTaskAttempts(): what a set of coding-task attempts cost per verified completion,
// and which evidence is missing to say so.
import { codedError } from "../native.mjs";

const round = (value) => Number(value.toFixed(12));
const present = (value) => typeof value === "string" && value !== "";

/**
 * `summarizeCodingTaskAttempts(attempts, { expectedAttempts? })`: a frozen
 * `CodingTaskEconomics`. `status` is `incomplete_evidence` when any issue was found, else
 * `no_completed_tasks` or `complete`; `costPerCompletedTaskUsd` is the total cost (failed
 * attempts included) over verified completed tasks, or `null` when it cannot be claimed.
 */
export function summarizeCodingTaskAttempts(attempts, options = {}) {
  const expected = options?.expectedAttempts;
  if (expected !== undefined && !(Number.isSafeInteger(expected) && expected >= 0)) {
    throw codedError("coding_task_expected_attempts_invalid");
  }
  const list = Array.from(attempts ?? []);
  const issues = new Set();
  if (list.length === 0) issues.add("no_attempts");
  if (expected !== undefined && expected !== list.length) issues.add("attempt_cardinality_mismatch");
  const identities = new Set();
  const runtimes = new Set();
  const priceBases = new Set();
  const completedTasks = new Set();
  let totalCostUsd = 0;
  let totalTokens = 0;
  for (const a of list) {
    if (!present(a?.taskId) || !present(a?.attemptId)) issues.add("attempt_identity_missing");
    else {
      const key = JSON.stringify([a.taskId, a.attemptId]);
      if (identities.has(key)) issues.add("attempt_identity_duplicate");
      identities.add(key);
    }
    if (!present(a?.provider) || !present(a?.model)) issues.add("runtime_identity_missing");
    else runtimes.add(`${a.provider}/${a.model}`);
    if (a?.completionBasis !== "external_verifier") issues.add("completion_evidence_missing");
    else if (a.completed === true) completedTasks.add(a.taskId);
    if (typeof a?.costUsd !== "number" || !Number.isFinite(a.costUsd) || a.costUsd < 0 || a.priceBasis === "unpriced") {
      issues.add("cost_evidence_missing");
    } else totalCostUsd += a.costUsd;
    if (a?.priceBasis !== undefined) priceBases.add(a.priceBasis);
    if (!Number.isSafeInteger(a?.tokens) || a.tokens < 0 || a.usageBasis !== "provider_reported") issues.add("usage_evidence_missing");
    else totalTokens += a.tokens;
  }
  if (runtimes.size > 1) issues.add("runtime_identity_drift");
  if (priceBases.size > 1) issues.add("price_basis_mixed");
  const sorted = [...issues].sort();
  const completed = completedTasks.size;
  const status = sorted.length > 0 ? "incomplete_evidence" : completed === 0 ? "no_completed_tasks" : "complete";
  return Object.freeze({
    status,
    attempts: list.length,
    ...(expected !== undefined ? { expectedAttempts: expected } : {}),
    completedTasks: completed,
    totalCostUsd: round(totalCostUsd),
    totalTokens,
    priceBasis: priceBases.size === 1 ? [...priceBases][0] : priceBases.size === 0 ? "unpriced" : "mixed",
    costPerCompletedTaskUsd: status === "complete" ? round(totalCostUsd / completed) : null,
    issues: Object.freeze(sorted),
  });
}
