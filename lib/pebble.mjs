// Pebble v1, the turn events of `streamCodingTurn` and the frames `serve` streams: the protocol
// version and how a run's stop reason becomes a turn's.

/** `PROTOCOL_VERSION` of the Pebble v1 turn events knap emits. */
export const PEBBLE_PROTOCOL_VERSION = 1;

/** A run's `stopReason` → the `turn.end` frame's `stopReason`. */
export const PEBBLE_STOP_REASONS = Object.freeze({
  complete: "end_turn",
  budget_exhausted: "budget_paused",
  wallet_revoked: "budget_paused",
  deadline: "interrupted",
  loop_detected: "interrupted",
  no_progress: "interrupted",
  call_budget_exhausted: "interrupted",
});
