//! `durableRunSummary(lines)`: the read-only view of a journal (what serve answers for a run).

use serde_json::{json, Map, Value};

use super::journal::parse_lines;
use super::DurableError;

/// `MULTIMODAL_DURABLE_INPUT_PREFIX`: a journaled input that is a digest, not the input itself.
pub const MULTIMODAL_DURABLE_INPUT_PREFIX: &str = "\u{0000}cave.multimodal.v1:";

/// `durableInputIsReplayable(input)`.
pub fn input_is_replayable(input: &str) -> bool {
  !input.starts_with(MULTIMODAL_DURABLE_INPUT_PREFIX)
}

/// `missing`, `pending`, `completed` or `failed`, with the reference's fields.
pub fn summarize(lines: &[String]) -> Result<Value, DurableError> {
  if lines.is_empty() {
    return Ok(json!({ "status": "missing" }));
  }
  let events = parse_lines(lines)?;
  let first = &events[0];
  if first["type"] != "run_started" {
    return Err(DurableError::new(
      "cave_durable_journal_corrupt",
      "cave_durable_journal_corrupt: journal does not begin with run_started",
    ));
  }
  let run_id = first["runId"].clone();
  let agent_id = first["agentId"].clone();
  if let Some(terminal) = events.iter().find(|e| e["type"] == "run_completed" || e["type"] == "run_failed") {
    return Ok(if terminal["type"] == "run_completed" {
      json!({ "status": "completed", "runId": run_id, "agentId": agent_id, "result": terminal["result"], "settledAt": terminal["at"] })
    } else {
      json!({
        "status": "failed", "runId": run_id, "agentId": agent_id, "code": terminal["code"],
        "message": terminal["message"], "receipt": terminal["receipt"], "settledAt": terminal["at"],
      })
    });
  }
  let mut out = Map::new();
  out.insert("status".into(), json!("pending"));
  out.insert("runId".into(), run_id);
  out.insert("agentId".into(), agent_id);
  out.insert("input".into(), first["input"].clone());
  out.insert("startedAt".into(), first["at"].clone());
  let attempts = 1 + events.iter().filter(|e| e["type"] == "resumed").count();
  out.insert("attempts".into(), json!(attempts));
  if let Some(cancel) = events.iter().find(|e| e["type"] == "cancel_requested") {
    out.insert("cancelRequested".into(), json!({ "reason": cancel["reason"], "at": cancel["at"] }));
  }
  if let Some(sleep) = events.iter().rev().find(|e| e["type"] == "sleep_scheduled") {
    out.insert("wakeAt".into(), sleep["wakeAt"].clone());
    out.insert("sleepReason".into(), sleep["reason"].clone());
  }
  Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::durable::journal::event;

  fn line(kind: &str, fields: Value) -> String {
    event(kind, fields).to_string()
  }

  fn started() -> String {
    line(
      "run_started",
      json!({"runId":"r","agentId":"a","definitionSha256":"0".repeat(64),"input":"hi","sessionId":"s","denomination":"none","budgetSha256":"0".repeat(64),"pid":1}),
    )
  }

  #[test]
  fn missing_pending_completed() {
    assert_eq!(summarize(&[]).unwrap(), json!({"status":"missing"}));
    let mut lines = vec![started(), line("resumed", json!({"attempt":2,"unmatchedIntents":0,"pid":2}))];
    lines.push(line("sleep_scheduled", json!({"wakeAt":"2030-01-01T00:00:00.000Z","reason":"later"})));
    let s = summarize(&lines).unwrap();
    assert_eq!(s["status"], "pending");
    assert_eq!(s["attempts"], 2);
    assert_eq!(s["wakeAt"], "2030-01-01T00:00:00.000Z");
    assert_eq!(s["sleepReason"], "later");
    lines.push(line("run_completed", json!({"result":{"text":"ok"}})));
    let s = summarize(&lines).unwrap();
    assert_eq!(s["status"], "completed");
    assert_eq!(s["result"]["text"], "ok");
    let bad = vec![line("resumed", json!({"attempt":2,"unmatchedIntents":0,"pid":2}))];
    assert_eq!(summarize(&bad).unwrap_err().code, "cave_durable_journal_corrupt");
    assert!(!input_is_replayable("\u{0000}cave.multimodal.v1:abc"));
    assert!(input_is_replayable("hello"));
  }
}
