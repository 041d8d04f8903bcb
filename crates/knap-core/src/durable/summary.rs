//! Read-only views of a journal and the control events written without the run's lock: the
//! reference's `durableRunSummary`, `requestDurableCancel` / `settleCancelledRun`,
//! `scheduleDurableWake` / `durableRunIsDue`, and what the serve recovery sweep needs to know
//! about a run (its session and conversation checkpoints).

use serde_json::{json, Map, Value};

use super::canonical::{canonical_json, sha256_hex};
use super::journal::{event, parse_lines};
use super::DurableError;
use crate::limits::{DURABLE_MAX_CONTROL_REASON_BYTES, DURABLE_MAX_SLEEP_MS};

/// `MULTIMODAL_DURABLE_INPUT_PREFIX`: a journaled input that is a digest, not the input itself.
pub const MULTIMODAL_DURABLE_INPUT_PREFIX: &str = "\u{0000}cave.multimodal.v1:";

/// `durableInputIsReplayable(input)`.
pub fn input_is_replayable(input: &str) -> bool {
  !input.starts_with(MULTIMODAL_DURABLE_INPUT_PREFIX)
}

/// `durableRunSummary(lines)`: `missing`, `pending`, `completed` or `failed`, with the
/// reference's fields (what serve answers for a run).
pub fn summarize(lines: &[String]) -> Result<Value, DurableError> {
  inspect(lines).map(|i| i.summary)
}

/// `DURABLE_CANCELLED_CODE`.
pub const CANCELLED_CODE: &str = "cave_durable_run_cancelled";

/// What one journal says, for `durableRunSummary` and the recovery sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
  /// The `DurableRunSummary` JSON.
  pub summary: Value,
  /// `run_started.sessionId` (empty for a missing run).
  pub session_id: String,
  /// The checkpoint a session resumes from: pending → base; failed → terminal, else base;
  /// completed → terminal. `None` when there is none; `Some(Err)` when its digest does not
  /// recompute (`cave_session_conversation_unrecoverable`).
  pub checkpoint: Option<Result<Value, ()>>,
  /// Whether `run_started` carries a valid base checkpoint.
  pub base_valid: bool,
}

/// `sha256(canonical JSON of messages)`.
pub fn messages_sha256(messages: &Value) -> Option<String> {
  canonical_json(messages).ok().map(|c| sha256_hex(c.as_bytes()))
}

/// A `DurableConversationCheckpoint`: `{sessionId, messagesSha256, messages}`.
pub fn checkpoint(session_id: &str, messages: &Value) -> Option<Value> {
  Some(json!({"sessionId": session_id, "messagesSha256": messages_sha256(messages)?, "messages": messages}))
}

/// A checkpoint whose digest recomputes.
fn valid_checkpoint(v: Option<&Value>) -> Option<Result<Value, ()>> {
  let c = v?;
  let ok = c
    .get("sessionId")
    .and_then(Value::as_str)
    .is_some_and(|s| !s.is_empty() && s.len() <= 1024)
    && c.get("messages").is_some_and(Value::is_array)
    && c.get("messagesSha256").and_then(Value::as_str)
      == c.get("messages").and_then(messages_sha256).as_deref();
  Some(if ok { Ok(c.clone()) } else { Err(()) })
}

/// `durableRunSummary(lines)` plus the session facts, from validated events.
pub fn inspect(lines: &[String]) -> Result<Inspection, DurableError> {
  if lines.is_empty() {
    return Ok(Inspection {
      summary: json!({"status": "missing"}),
      session_id: String::new(),
      checkpoint: None,
      base_valid: false,
    });
  }
  let events = parse_lines(lines)?;
  let first = &events[0];
  if first["type"] != "run_started" {
    return Err(DurableError::coded(
      "cave_durable_journal_corrupt",
      "journal does not begin with run_started",
    ));
  }
  let run_id = first["runId"].clone();
  let agent_id = first["agentId"].clone();
  let session_id = first["sessionId"].as_str().unwrap_or_default().to_string();
  let base = valid_checkpoint(first.get("conversation"));
  let base_valid = matches!(base, Some(Ok(_)));
  let mut attempts = 1u64;
  let mut cancel: Option<Value> = None;
  let mut sleep: Option<(Value, Value)> = None;
  for e in &events[1..] {
    match e["type"].as_str().unwrap_or_default() {
      "run_completed" => {
        let terminal = valid_checkpoint(e.get("conversation"));
        return Ok(Inspection {
          summary: json!({"status": "completed", "runId": run_id, "agentId": agent_id, "result": e["result"], "settledAt": e["at"]}),
          session_id,
          checkpoint: terminal,
          base_valid,
        });
      }
      "run_failed" => {
        return Ok(Inspection {
          summary: json!({
            "status": "failed", "runId": run_id, "agentId": agent_id, "code": e["code"], "message": e["message"],
            "receipt": e["receipt"], "settledAt": e["at"]
          }),
          session_id,
          checkpoint: base,
          base_valid,
        });
      }
      "resumed" => attempts += 1,
      "cancel_requested" if cancel.is_none() => cancel = Some(json!({"reason": e["reason"], "at": e["at"]})),
      "sleep_scheduled" => sleep = Some((e["wakeAt"].clone(), e["reason"].clone())),
      _ => {}
    }
  }
  let mut s = Map::new();
  s.insert("status".into(), json!("pending"));
  s.insert("runId".into(), run_id);
  s.insert("agentId".into(), agent_id);
  s.insert("input".into(), first["input"].clone());
  s.insert("startedAt".into(), first["at"].clone());
  s.insert("attempts".into(), json!(attempts));
  if let Some(c) = cancel {
    s.insert("cancelRequested".into(), c);
  }
  if let Some((wake_at, reason)) = sleep {
    s.insert("wakeAt".into(), wake_at);
    s.insert("sleepReason".into(), reason);
  }
  Ok(Inspection {
    summary: Value::Object(s),
    session_id,
    checkpoint: base,
    base_valid,
  })
}

/// A resume must bring the Conversation the journal is bound to (by its base digest), or none if
/// it is bound to none: `cave_durable_conversation_mismatch` otherwise.
pub fn check_conversation_binding(first_line: &str, caller: Option<&Value>) -> Result<(), DurableError> {
  let first: Value = serde_json::from_str(first_line).unwrap_or(Value::Null);
  let journaled = first.get("conversation").and_then(|c| c.get("messagesSha256"));
  if journaled != caller.and_then(|c| c.get("messagesSha256")) {
    return Err(DurableError::coded(
      "cave_durable_conversation_mismatch",
      "the attached conversation does not match the journaled run's conversation",
    ));
  }
  Ok(())
}

/// Reasons of cancel and sleep requests: non-empty, ≤ 4096 bytes, no control characters.
fn valid_reason(reason: &str) -> bool {
  !reason.is_empty()
    && reason.len() <= DURABLE_MAX_CONTROL_REASON_BYTES
    && !reason.chars().any(char::is_control)
}

/// The `cancel_requested` line (newline-terminated) for `requestDurableCancel`.
pub fn cancel_requested_line(reason: &str) -> Result<String, DurableError> {
  if !valid_reason(reason) {
    return Err(DurableError::coded(
      "cave_durable_cancel_reason_invalid",
      "a cancel reason is 1..4096 bytes without control characters",
    ));
  }
  Ok(format!(
    "{}\n",
    event("cancel_requested", json!({"reason": reason}))
  ))
}

/// The terminal `run_failed` line of a cancelled run (`settleCancelledRun`): `receipt: null`.
pub fn cancelled_line(reason: &str) -> String {
  format!(
    "{}\n",
    event(
      "run_failed",
      json!({"code": CANCELLED_CODE, "message": reason, "receipt": Value::Null})
    )
  )
}

/// The `sleep_scheduled` line for `scheduleDurableWake(wakeAtMs)`, checked against `now_ms`.
pub fn sleep_line(wake_at_ms: i64, now_ms: i64, reason: &str) -> Result<String, DurableError> {
  if wake_at_ms - now_ms > DURABLE_MAX_SLEEP_MS as i64 {
    return Err(DurableError::coded(
      "cave_durable_sleep_wake_invalid",
      "wakeAt must be a valid date at most 30 days ahead",
    ));
  }
  if !valid_reason(reason) {
    return Err(DurableError::coded(
      "cave_durable_sleep_reason_invalid",
      "a sleep reason is 1..4096 bytes without control characters",
    ));
  }
  let wake_at = super::journal::iso_from_ms(wake_at_ms);
  Ok(format!(
    "{}\n",
    event("sleep_scheduled", json!({"wakeAt": wake_at, "reason": reason}))
  ))
}

#[cfg(test)]
mod tests {
  use super::*;

  fn line(kind: &str, fields: Value) -> String {
    event(kind, fields).to_string()
  }

  fn started(conversation: Option<Value>) -> String {
    let mut f = json!({
      "runId": "r1", "agentId": "a", "definitionSha256": "d", "input": "hi", "sessionId": "s.1",
      "denomination": "none", "budgetSha256": "none", "pid": 1
    });
    if let Some(c) = conversation {
      f["conversation"] = c;
    }
    line("run_started", f)
  }

  #[test]
  fn summaries_of_each_state() {
    assert_eq!(inspect(&[]).unwrap().summary, json!({"status": "missing"}));
    let mut lines = vec![
      started(None),
      line("resumed", json!({"attempt": 2, "unmatchedIntents": 0, "pid": 1})),
    ];
    lines.push(cancel_requested_line("stop").unwrap().trim_end().to_string());
    lines.push(cancel_requested_line("again").unwrap().trim_end().to_string());
    let now = 1_700_000_000_000;
    lines.push(sleep_line(now + 1000, now, "nap").unwrap().trim_end().to_string());
    let s = inspect(&lines).unwrap().summary;
    assert_eq!(s["status"], "pending");
    assert_eq!(s["attempts"], 2);
    assert_eq!(s["input"], "hi");
    assert_eq!(s["cancelRequested"]["reason"], "stop");
    assert_eq!(s["wakeAt"], "2023-11-14T22:13:21.000Z");
    assert_eq!(s["sleepReason"], "nap");
    lines.push(cancelled_line("stop").trim_end().to_string());
    let s = inspect(&lines).unwrap().summary;
    assert_eq!(s["status"], "failed");
    assert_eq!(s["code"], CANCELLED_CODE);
    assert_eq!(s["receipt"], Value::Null);
    let done = vec![
      started(None),
      line("run_completed", json!({"result": {"text": "ok"}})),
    ];
    let s = inspect(&done).unwrap().summary;
    assert_eq!(
      (s["status"].as_str(), s["result"]["text"].as_str()),
      (Some("completed"), Some("ok"))
    );
  }

  #[test]
  fn checkpoints_are_chosen_by_status_and_verified() {
    let base = checkpoint("s", &json!([{"role": "user", "content": "a"}])).unwrap();
    let terminal = checkpoint(
      "s",
      &json!([{"role": "user", "content": "a"}, {"role": "assistant"}]),
    )
    .unwrap();
    let pending = inspect(&[started(Some(base.clone()))]).unwrap();
    assert!(pending.base_valid);
    assert_eq!(pending.checkpoint, Some(Ok(base.clone())));
    let done = [
      started(Some(base.clone())),
      line("run_completed", json!({"result": {}, "conversation": terminal})),
    ];
    assert_eq!(inspect(&done).unwrap().checkpoint, Some(Ok(terminal)));
    let mut forged = base;
    forged["messages"] = json!([]);
    let bad = inspect(&[started(Some(forged))]).unwrap();
    assert!(!bad.base_valid);
    assert_eq!(bad.checkpoint, Some(Err(())));
  }

  #[test]
  fn summarize_and_replayable_inputs() {
    let lines = vec![started(None), line("run_completed", json!({"result":{"text":"ok"}}))];
    assert_eq!(summarize(&lines).unwrap()["status"], "completed");
    let bad = vec![line("resumed", json!({"attempt":2,"unmatchedIntents":0,"pid":2}))];
    assert_eq!(summarize(&bad).unwrap_err().code, "cave_durable_journal_corrupt");
    assert!(!input_is_replayable("\u{0000}cave.multimodal.v1:abc"));
    assert!(input_is_replayable("hello"));
  }

  #[test]
  fn control_requests_are_validated() {
    assert_eq!(
      cancel_requested_line("").unwrap_err().code,
      "cave_durable_cancel_reason_invalid"
    );
    assert_eq!(
      cancel_requested_line("a\nb").unwrap_err().code,
      "cave_durable_cancel_reason_invalid"
    );
    let now = 0;
    assert_eq!(
      sleep_line(DURABLE_MAX_SLEEP_MS as i64 + 1, now, "x")
        .unwrap_err()
        .code,
      "cave_durable_sleep_wake_invalid"
    );
    assert_eq!(
      sleep_line(10, now, "").unwrap_err().code,
      "cave_durable_sleep_reason_invalid"
    );
    assert!(inspect(&["{".to_string()]).is_err());
  }
}
