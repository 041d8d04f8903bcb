//! The journal: event envelopes, strict validation on load, the writer that batches events
//! into flushes, and the analysis that tells a fresh, completed, failed or pending run apart
//! and rebuilds a pending one.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use super::canonical::idempotency_key;
use super::store::DurableStore;
use super::DurableError;
use crate::limits::{
  DURABLE_JOURNAL_VERSION, DURABLE_MAX_EVENT_BYTES, DURABLE_MAX_JOURNAL_BYTES, DURABLE_MAX_JOURNAL_EVENTS,
};

/// Required and optional keys of each event type (besides `v`, `at`, `type`).
fn key_sets(kind: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
  const TOOL: &[&str] = &["path", "toolCallId", "name", "effect", "argsSha256", "idempotencyKey"];
  Some(match kind {
    "run_started" => (
      &["runId", "agentId", "definitionSha256", "input", "sessionId", "denomination", "budgetSha256", "pid"][..],
      &["budgetMax", "conversation"][..],
    ),
    "resumed" => (&["attempt", "unmatchedIntents", "pid"][..], &[][..]),
    "meter_call" => (&["path", "atCall"][..], &[][..]),
    "call_started" => (&["path", "kind", "provider", "model"][..], &[][..]),
    "call_settled" => (&["path", "kind", "call"][..], &["settledAmount"][..]),
    "call_abandoned" => (&["path"][..], &[][..]),
    "tool_intent" => (TOOL, &[][..]),
    "tool_settled" => (
      &["path", "toolCallId", "name", "effect", "argsSha256", "idempotencyKey", "outcome"][..],
      &["value", "error"][..],
    ),
    "turn" | "snapshot" => (&["messages"][..], &[][..]),
    "tranche" => (&["amount", "reason", "atCall"][..], &[][..]),
    "cancel_requested" => (&["reason"][..], &[][..]),
    "sleep_scheduled" => (&["wakeAt", "reason"][..], &[][..]),
    "run_completed" => (&["result"][..], &["conversation"][..]),
    "run_failed" => (&["code", "message", "receipt"][..], &[][..]),
    _ => return None,
  })
}

fn corrupt(detail: impl std::fmt::Display) -> DurableError {
  DurableError::new("cave_durable_journal_corrupt", format!("cave_durable_journal_corrupt: {detail}"))
}

/// `new Date(ms).toISOString()`.
pub fn iso_now() -> String {
  let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
  iso_from_ms(ms)
}

pub fn iso_from_ms(ms: i64) -> String {
  let days = ms.div_euclid(86_400_000);
  let rem = ms.rem_euclid(86_400_000);
  // Civil-from-days (Howard Hinnant's algorithm).
  let z = days + 719_468;
  let era = z.div_euclid(146_097);
  let doe = z.rem_euclid(146_097);
  let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
  let y = yoe + era * 400;
  let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  let mp = (5 * doy + 2) / 153;
  let d = doy - (153 * mp + 2) / 5 + 1;
  let m = if mp < 10 { mp + 3 } else { mp - 9 };
  let y = if m <= 2 { y + 1 } else { y };
  format!(
    "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
    rem / 3_600_000,
    rem / 60_000 % 60,
    rem / 1000 % 60,
    rem % 1000
  )
}

/// Canonical ISO timestamps only (what `toISOString` produces).
fn valid_timestamp(at: &str) -> bool {
  let b = at.as_bytes();
  at.len() == 24
    && b[4] == b'-'
    && b[7] == b'-'
    && b[10] == b'T'
    && b[13] == b':'
    && b[16] == b':'
    && b[19] == b'.'
    && b[23] == b'Z'
    && b.iter().enumerate().all(|(i, c)| matches!(i, 4 | 7 | 10 | 13 | 16 | 19 | 23) || c.is_ascii_digit())
}

/// Builds an event with the envelope.
pub fn event(kind: &str, fields: Value) -> Value {
  let mut map = Map::new();
  map.insert("v".into(), json!(DURABLE_JOURNAL_VERSION));
  map.insert("at".into(), json!(iso_now()));
  map.insert("type".into(), json!(kind));
  if let Value::Object(f) = fields {
    for (k, v) in f {
      if !v.is_null() || !matches!(k.as_str(), "budgetMax" | "conversation" | "settledAmount" | "value" | "error") {
        map.insert(k, v);
      }
    }
  }
  Value::Object(map)
}

/// Validates one parsed event.
pub fn validate_event(e: &Value) -> Result<(), DurableError> {
  let Some(obj) = e.as_object() else { return Err(corrupt("malformed journal event")) };
  let Some(kind) = obj.get("type").and_then(Value::as_str) else { return Err(corrupt("malformed journal event")) };
  match obj.get("v").and_then(Value::as_u64) {
    Some(DURABLE_JOURNAL_VERSION) => {}
    _ => {
      let v = obj.get("v").map(|v| v.to_string()).unwrap_or_else(|| "?".into());
      return Err(DurableError::new(
        "cave_durable_journal_version_unsupported",
        format!("cave_durable_journal_version_unsupported: journal v{v}, this runtime reads v2"),
      ));
    }
  }
  if !obj.get("at").and_then(Value::as_str).is_some_and(valid_timestamp) {
    return Err(corrupt("malformed event timestamp"));
  }
  let Some((required, optional)) = key_sets(kind) else {
    return Err(DurableError::new("cave_durable_journal_event_unknown", format!("cave_durable_journal_event_unknown: {kind}")));
  };
  let keys_ok = required.iter().all(|k| obj.contains_key(*k))
    && obj.keys().all(|k| matches!(k.as_str(), "v" | "at" | "type") || required.contains(&k.as_str()) || optional.contains(&k.as_str()));
  if !keys_ok {
    return Err(corrupt(format!("malformed {kind} fields")));
  }
  Ok(())
}

/// Parses and validates journal lines (the torn tail was already dropped by the store).
pub fn parse_lines(lines: &[String]) -> Result<Vec<Value>, DurableError> {
  if lines.len() > DURABLE_MAX_JOURNAL_EVENTS {
    return Err(corrupt("journal event limit exceeded"));
  }
  let mut total = 0usize;
  let mut events = Vec::with_capacity(lines.len());
  for line in lines {
    total += line.len() + 1;
    if line.len() > DURABLE_MAX_EVENT_BYTES || total > DURABLE_MAX_JOURNAL_BYTES {
      return Err(corrupt("journal byte limit exceeded"));
    }
    let e: Value = serde_json::from_str(line).map_err(|_| corrupt("unparseable journal line"))?;
    validate_event(&e)?;
    events.push(e);
  }
  Ok(events)
}

/// The writer: `emit` validates and queues, `flush` appends the queue as one store call. A
/// failed append is sticky: every later flush fails with it, so no run goes on over a hole.
pub struct Journal {
  store: Arc<dyn DurableStore>,
  run_id: String,
  queue: Vec<String>,
  failed: Option<DurableError>,
  events: usize,
  bytes: usize,
}

impl Journal {
  pub fn new(store: Arc<dyn DurableStore>, run_id: &str, existing_events: usize, existing_bytes: usize) -> Self {
    Self { store, run_id: run_id.into(), queue: Vec::new(), failed: None, events: existing_events, bytes: existing_bytes }
  }

  pub fn emit(&mut self, kind: &str, fields: Value) -> Result<(), DurableError> {
    let e = event(kind, fields);
    validate_event(&e).map_err(|_| DurableError::new("cave_durable_event_not_serializable", format!("cave_durable_event_not_serializable: {kind}")))?;
    let line = e.to_string();
    if line.len() > DURABLE_MAX_EVENT_BYTES {
      return Err(DurableError::new("cave_durable_event_limit", format!("cave_durable_event_limit: {kind}")));
    }
    if self.events + 1 > DURABLE_MAX_JOURNAL_EVENTS || self.bytes + line.len() + 1 > DURABLE_MAX_JOURNAL_BYTES {
      return Err(DurableError::new("cave_durable_journal_limit", "cave_durable_journal_limit"));
    }
    self.events += 1;
    self.bytes += line.len() + 1;
    self.queue.push(line);
    Ok(())
  }

  pub async fn flush(&mut self) -> Result<(), DurableError> {
    if let Some(e) = &self.failed {
      return Err(e.clone());
    }
    if self.queue.is_empty() {
      return Ok(());
    }
    let mut data = String::new();
    for line in self.queue.drain(..) {
      data.push_str(&line);
      data.push('\n');
    }
    match self.store.append(&self.run_id, data).await {
      Ok(()) => Ok(()),
      Err(e) => {
        self.failed = Some(e.clone());
        Err(e)
      }
    }
  }

  pub async fn emit_flush(&mut self, kind: &str, fields: Value) -> Result<(), DurableError> {
    self.emit(kind, fields)?;
    self.flush().await
  }
}

/// A journaled tool call not yet covered by a turn checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRecord {
  pub path: String,
  pub tool_call_id: String,
  pub name: String,
  pub effect: String,
  pub args_sha256: String,
  pub idempotency_key: String,
  /// `(outcome, value, error)` once settled.
  pub settled: Option<Value>,
}

impl ToolRecord {
  fn from_event(e: &Value) -> Self {
    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    Self {
      path: s("path"),
      tool_call_id: s("toolCallId"),
      name: s("name"),
      effect: s("effect"),
      args_sha256: s("argsSha256"),
      idempotency_key: s("idempotencyKey"),
      settled: None,
    }
  }

  fn same_identity(&self, e: &Value) -> bool {
    let other = ToolRecord::from_event(e);
    self.path == other.path
      && self.tool_call_id == other.tool_call_id
      && self.name == other.name
      && self.effect == other.effect
      && self.args_sha256 == other.args_sha256
      && self.idempotency_key == other.idempotency_key
  }
}

/// Usage and money carried over from earlier attempts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriorTotals {
  pub input: u64,
  pub output: u64,
  pub cache_read: u64,
  pub cache_write: u64,
  pub reasoning: u64,
  pub estimated_usd: f64,
  pub unpriced: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ResumeState {
  pub attempts: u64,
  pub session_id: String,
  pub has_completed_turn: bool,
  pub messages: Vec<Value>,
  pub discarded_partial_turn: bool,
  pub prior_root_model_calls: u64,
  pub prior_settled: f64,
  pub prior_calls: u64,
  pub prior_totals: PriorTotals,
  pub possible_double_count: u64,
  /// `(name, isError)` of every checkpointed tool call.
  pub prior_tool_events: Vec<(String, bool)>,
  pub replay: Vec<ToolRecord>,
  pub events: usize,
  pub bytes: usize,
}

#[derive(Debug, Clone)]
pub enum JournalState {
  Fresh,
  Completed { result: Value },
  Failed { code: String, message: String, receipt: Value },
  Pending(Box<ResumeState>),
}

/// What a resume must agree with.
#[derive(Debug, Clone)]
pub struct Expected {
  pub run_id: String,
  pub agent_id: String,
  pub definition_sha256: String,
  pub input: Value,
  pub denomination: String,
  pub budget_max: Option<f64>,
  pub budget_sha256: String,
}

fn num(e: &Value, k: &str) -> f64 {
  e.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// `analyzeJournal`: integrity, identity checks in the reference order, and reconstruction.
pub fn analyze(lines: &[String], expected: &Expected) -> Result<JournalState, DurableError> {
  if lines.is_empty() {
    return Ok(JournalState::Fresh);
  }
  let events = parse_lines(lines)?;
  let first = &events[0];
  if first["type"] != "run_started" {
    return Err(corrupt("journal does not begin with run_started"));
  }
  if first["runId"] != expected.run_id.as_str() {
    return Err(corrupt("journaled runId mismatch"));
  }
  if first["definitionSha256"] != expected.definition_sha256.as_str() {
    return Err(DurableError::new(
      "cave_durable_definition_changed",
      "cave_durable_definition_changed: the agent definition differs from the journaled run; resume with the original definition, or use a new durable.runId",
    ));
  }
  if first["agentId"] != expected.agent_id.as_str() {
    return Err(DurableError::new("cave_durable_agent_mismatch", "cave_durable_agent_mismatch: the journaled run belongs to another agent"));
  }
  if first["input"] != expected.input {
    return Err(DurableError::new(
      "cave_durable_input_mismatch",
      "cave_durable_input_mismatch: the input differs from the journaled run; a new task needs a new runId",
    ));
  }
  let journaled_max = first.get("budgetMax").and_then(Value::as_f64);
  if first["denomination"] != expected.denomination.as_str()
    || journaled_max != expected.budget_max
    || first["budgetSha256"] != expected.budget_sha256.as_str()
  {
    return Err(DurableError::new(
      "cave_durable_budget_changed",
      "cave_durable_budget_changed: the budget differs from the journaled run; a resume continues the original money contract",
    ));
  }

  let mut state = ResumeState {
    attempts: 1,
    session_id: first["sessionId"].as_str().unwrap_or_default().to_string(),
    events: events.len(),
    bytes: lines.iter().map(|l| l.len() + 1).sum(),
    ..Default::default()
  };
  let mut pending_calls: HashMap<(String, String), VecDeque<(String, String)>> = HashMap::new();
  let mut records: Vec<ToolRecord> = Vec::new();
  let mut record_keys: HashMap<(String, String), usize> = HashMap::new();
  let mut base: Vec<Value> = Vec::new();
  let mut terminal: Option<&Value> = None;
  let mut last_attempt = 1u64;

  for (i, e) in events.iter().enumerate().skip(1) {
    if terminal.is_some() {
      return Err(corrupt("events follow terminal outcome"));
    }
    let kind = e["type"].as_str().unwrap_or_default();
    let path = e.get("path").and_then(Value::as_str).unwrap_or_default().to_string();
    match kind {
      "run_started" => return Err(corrupt(format!("second run_started at event {i}"))),
      "resumed" => {
        let attempt = e["attempt"].as_u64().unwrap_or(0);
        if attempt != last_attempt + 1 {
          return Err(corrupt("non-monotonic resumed.attempt"));
        }
        last_attempt = attempt;
        // Intents a crashed attempt never settled were possibly billed; they are counted once
        // and cleared here, so a run that later completes still reads back cleanly (the
        // reference keeps them pending and would read its own completed journal as corrupt).
        for queue in pending_calls.values_mut() {
          state.possible_double_count += queue.len() as u64;
          queue.clear();
        }
      }
      "meter_call" | "cancel_requested" | "sleep_scheduled" | "tranche" => {}
      "call_started" => {
        let kind = e["kind"].as_str().unwrap_or_default().to_string();
        if path.is_empty() && kind == "model" {
          state.prior_root_model_calls += 1;
        }
        let who = (e["provider"].as_str().unwrap_or_default().to_string(), e["model"].as_str().unwrap_or_default().to_string());
        pending_calls.entry((path, kind)).or_default().push_back(who);
      }
      "call_settled" | "call_abandoned" => {
        let call_kind = e.get("kind").and_then(Value::as_str).unwrap_or("model").to_string();
        let key = (path.clone(), call_kind.clone());
        let queue = pending_calls.get_mut(&key);
        let who = match queue.and_then(|q| q.pop_front()) {
          Some(w) => w,
          None if kind == "call_abandoned" => {
            // An abandon closes whichever kind is open on the path.
            let alt = pending_calls.iter_mut().find(|((p, _), q)| *p == path && !q.is_empty());
            match alt.and_then(|(_, q)| q.pop_front()) {
              Some(w) => w,
              None => return Err(corrupt("call_abandoned without intent")),
            }
          }
          None => return Err(corrupt("call_settled without intent")),
        };
        if kind == "call_abandoned" {
          if path.is_empty() && call_kind == "model" {
            state.prior_root_model_calls = state.prior_root_model_calls.saturating_sub(1);
          }
          continue;
        }
        let call = &e["call"];
        if call["provider"].as_str() != Some(who.0.as_str()) || call["model"].as_str() != Some(who.1.as_str()) {
          return Err(corrupt("call_settled identity differs from its intent"));
        }
        let tokens = |k: &str| call.get(k).and_then(Value::as_u64).ok_or_else(|| corrupt("malformed call usage"));
        let t = &mut state.prior_totals;
        t.input += tokens("inputTokens")?;
        t.output += tokens("outputTokens")?;
        t.cache_read += tokens("cacheReadTokens")?;
        t.cache_write += tokens("cacheWriteTokens")?;
        t.reasoning += tokens("reasoningTokens")?;
        t.estimated_usd += num(call, "estimatedUsd");
        t.unpriced |= call["unpriced"].as_bool().unwrap_or(false);
        let amount = num(e, "settledAmount");
        if !amount.is_finite() || amount < 0.0 {
          return Err(corrupt("invalid settledAmount"));
        }
        state.prior_settled += amount;
        state.prior_calls += 1;
      }
      "tool_intent" => {
        let key = (path.clone(), e["toolCallId"].as_str().unwrap_or_default().to_string());
        if record_keys.contains_key(&key) {
          return Err(corrupt("duplicate tool intent identity"));
        }
        let rec = ToolRecord::from_event(e);
        if idempotency_key(&expected.run_id, &rec.path, &rec.tool_call_id, &rec.name, &rec.args_sha256) != rec.idempotency_key {
          return Err(corrupt("tool idempotency identity mismatch"));
        }
        record_keys.insert(key, records.len());
        records.push(rec);
      }
      "tool_settled" => {
        let key = (path.clone(), e["toolCallId"].as_str().unwrap_or_default().to_string());
        let Some(&idx) = record_keys.get(&key) else { return Err(corrupt("tool settlement without matching intent")) };
        if !records[idx].same_identity(e) || records[idx].settled.is_some() {
          return Err(corrupt("tool settlement without matching intent"));
        }
        let outcome = e["outcome"].as_str().unwrap_or_default();
        if outcome != "returned" && outcome != "threw" {
          return Err(corrupt("malformed tool outcome"));
        }
        records[idx].settled = Some(json!({"outcome": outcome, "value": e.get("value"), "error": e.get("error")}));
      }
      "turn" | "snapshot" => {
        let Some(msgs) = e["messages"].as_array() else { return Err(corrupt(format!("malformed {kind} messages"))) };
        if kind == "snapshot" {
          base.clear();
        }
        base.extend(msgs.iter().cloned());
        state.has_completed_turn = true;
        for rec in records.drain(..) {
          let Some(s) = &rec.settled else { return Err(corrupt("turn checkpoint crosses unsettled tool intent")) };
          state.prior_tool_events.push((rec.name.clone(), s["outcome"] == "threw"));
        }
        record_keys.clear();
      }
      "run_completed" | "run_failed" => terminal = Some(e),
      other => return Err(DurableError::new("cave_durable_journal_event_unknown", format!("cave_durable_journal_event_unknown: {other}"))),
    }
  }
  let unmatched: u64 = pending_calls.values().map(|q| q.len() as u64).sum();
  state.attempts = last_attempt;
  if let Some(t) = terminal {
    if unmatched > 0 {
      return Err(corrupt("terminal run crosses unsettled provider intent"));
    }
    // A failed run may end on an intent it refused to re-run blind (`tool_effect_uncertain`);
    // only a completed run must have settled every tool call.
    if t["type"] == "run_completed" && records.iter().any(|r| r.settled.is_none()) {
      return Err(corrupt("completed run crosses unsettled tool intent"));
    }
    return Ok(if t["type"] == "run_completed" {
      JournalState::Completed { result: t["result"].clone() }
    } else {
      JournalState::Failed {
        code: t["code"].as_str().unwrap_or_default().to_string(),
        message: t["message"].as_str().unwrap_or_default().to_string(),
        receipt: t["receipt"].clone(),
      }
    });
  }
  state.possible_double_count += unmatched;
  // Cut a trailing partial turn so the transcript ends where the loop can go on.
  if state.has_completed_turn {
    let keep = base
      .iter()
      .rposition(|m| matches!(m.get("role").and_then(Value::as_str), Some("user") | Some("toolResult")))
      .map(|i| i + 1)
      .unwrap_or(0);
    state.discarded_partial_turn = keep < base.len();
    base.truncate(keep);
  }
  state.messages = base;
  state.replay = records;
  Ok(JournalState::Pending(Box::new(state)))
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn iso_round_trip_shape() {
    assert_eq!(iso_from_ms(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(iso_from_ms(1_764_700_000_123), "2025-12-02T18:26:40.123Z");
    assert!(valid_timestamp(&iso_now()));
    assert!(!valid_timestamp("2025-12-02 18:26:40"));
  }

  #[test]
  fn validation_codes() {
    let bad_v = r#"{"v":1,"at":"2025-12-02T18:26:40.123Z","type":"turn","messages":[]}"#.to_string();
    assert_eq!(parse_lines(&[bad_v]).unwrap_err().code, "cave_durable_journal_version_unsupported");
    let unknown = r#"{"v":2,"at":"2025-12-02T18:26:40.123Z","type":"mystery"}"#.to_string();
    assert_eq!(parse_lines(&[unknown]).unwrap_err().code, "cave_durable_journal_event_unknown");
    let extra = r#"{"v":2,"at":"2025-12-02T18:26:40.123Z","type":"turn","messages":[],"x":1}"#.to_string();
    assert_eq!(parse_lines(&[extra]).unwrap_err().message, "cave_durable_journal_corrupt: malformed turn fields");
    assert_eq!(parse_lines(&["{nope".to_string()]).unwrap_err().message, "cave_durable_journal_corrupt: unparseable journal line");
  }
}
