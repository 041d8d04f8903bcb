// `durableRunSummary(lines)` and `durableInputIsReplayable(input)`, computed by the core's journal reader.
import { native, codedError } from "./native.mjs";

/** `missing`, `pending`, `completed` or `failed`, from a journal's JSONL lines. */
export function durableRunSummary(lines) {
  if (!Array.isArray(lines) || !lines.every((l) => typeof l === "string")) {
    throw codedError("cave_durable_journal_corrupt", "cave_durable_journal_corrupt: journal lines must be strings");
  }
  try {
    return JSON.parse(native.durableRunSummaryJson(lines));
  } catch (error) {
    throw codedError(error.code ?? "cave_durable_journal_corrupt", error.message);
  }
}

/** False exactly for a journaled multimodal input digest (`"\u0000cave.multimodal.v1:…"`). */
export function durableInputIsReplayable(input) {
  return native.durableInputIsReplayable(String(input));
}
