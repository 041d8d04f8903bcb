//! The journal: event envelopes, strict validation on load, the writer that batches events
//! into flushes, and the analysis that tells a fresh, completed, failed or pending run apart
//! and rebuilds a pending one.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::canonical::idempotency_key;
use super::store::DurableStore;
use super::DurableError;
use crate::limits::{
  DURABLE_JOURNAL_VERSION, DURABLE_MAX_EVENT_BYTES, DURABLE_MAX_JOURNAL_BYTES, DURABLE_MAX_JOURNAL_EVENTS,
};

/// Required and optional keys of each event type (besides `v`, `at`, `type`).
fn key_sets(kind: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
  const TOOL: &[&str] = &[
    "path",
    "toolCallId",
    "name",
    "effect",
    "argsSha256",
    "idempotencyKey",
  ];
  Some(match kind {
    "run_started" => (
      &[
        "runId",
        "agentId",
        "definitionSha256",
        "input",
        "sessionId",
        "denomination",
        "budgetSha256",
        "pid",
      ][..],
      &["budgetMax", "conversation"][..],
    ),
    "resumed" => (&["attempt", "unmatchedIntents", "pid"][..], &[][..]),
    "meter_call" => (&["path", "atCall"][..], &[][..]),
    "call_started" => (&["path", "kind", "provider", "model"][..], &[][..]),
    "call_settled" => (&["path", "kind", "call"][..], &["settledAmount"][..]),
    "call_abandoned" => (&["path"][..], &[][..]),
    "tool_intent" => (TOOL, &[][..]),
    "tool_settled" => (
      &[
        "path",
        "toolCallId",
        "name",
        "effect",
        "argsSha256",
        "idempotencyKey",
        "outcome",
      ][..],
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
  DurableError::new(
    "cave_durable_journal_corrupt",
    format!("cave_durable_journal_corrupt: {detail}"),
  )
}

/// `new Date(ms).toISOString()`.
pub fn iso_now() -> String {
  let ms = SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map(|d| d.as_millis() as i64)
    .unwrap_or(0);
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
    && b
      .iter()
      .enumerate()
      .all(|(i, c)| matches!(i, 4 | 7 | 10 | 13 | 16 | 19 | 23) || c.is_ascii_digit())
}

/// Builds an event with the envelope.
pub fn event(kind: &str, fields: Value) -> Value {
  let mut map = Map::new();
  map.insert("v".into(), json!(DURABLE_JOURNAL_VERSION));
  map.insert("at".into(), json!(iso_now()));
  map.insert("type".into(), json!(kind));
  if let Value::Object(f) = fields {
    for (k, v) in f {
      if !v.is_null()
        || !matches!(
          k.as_str(),
          "budgetMax" | "conversation" | "settledAmount" | "value" | "error"
        )
      {
        map.insert(k, v);
      }
    }
  }
  Value::Object(map)
}

/// Validates one parsed event.
pub fn validate_event(e: &Value) -> Result<(), DurableError> {
  let Some(obj) = e.as_object() else {
    return Err(corrupt("malformed journal event"));
  };
  let Some(kind) = obj.get("type").and_then(Value::as_str) else {
    return Err(corrupt("malformed journal event"));
  };
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
  check_keys(kind, |k| obj.contains_key(k), obj.keys().map(String::as_str))
}

/// An event's exact key set: the type must be known, every required key present, no other key.
fn check_keys<'k>(
  kind: &str,
  has: impl Fn(&str) -> bool,
  mut keys: impl Iterator<Item = &'k str>,
) -> Result<(), DurableError> {
  let Some((required, optional)) = key_sets(kind) else {
    return Err(DurableError::new(
      "cave_durable_journal_event_unknown",
      format!("cave_durable_journal_event_unknown: {kind}"),
    ));
  };
  let keys_ok = required.iter().all(|k| has(k))
    && keys.all(|k| matches!(k, "v" | "at" | "type") || required.contains(&k) || optional.contains(&k));
  if !keys_ok {
    return Err(corrupt(format!("malformed {kind} fields")));
  }
  Ok(())
}

/// The journal's event, line and byte limits, as read.
fn check_journal_limits(lines: &[String]) -> Result<(), DurableError> {
  if lines.len() > DURABLE_MAX_JOURNAL_EVENTS {
    return Err(corrupt("journal event limit exceeded"));
  }
  let mut total = 0usize;
  for line in lines {
    total += line.len() + 1;
    if line.len() > DURABLE_MAX_EVENT_BYTES || total > DURABLE_MAX_JOURNAL_BYTES {
      return Err(corrupt("journal byte limit exceeded"));
    }
  }
  Ok(())
}

/// Parses and validates journal lines (the torn tail was already dropped by the store).
pub fn parse_lines(lines: &[String]) -> Result<Vec<Value>, DurableError> {
  check_journal_limits(lines)?;
  let mut events = Vec::with_capacity(lines.len());
  for line in lines {
    let e: Value = serde_json::from_str(line).map_err(|_| corrupt("unparseable journal line"))?;
    validate_event(&e)?;
    events.push(e);
  }
  Ok(events)
}

/// A journal line as `analyze` reads it: its members with the values left as raw JSON text
/// (validated, not built into trees), each parsed only when `analyze` asks for it. A 10,000-event
/// journal then costs one scan plus the few fields replay needs, not a `Value` per event.
struct Parsed<'a> {
  fields: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> Parsed<'a> {
  fn raw(&self, key: &str) -> Option<&'a RawValue> {
    self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
  }

  /// A string member (borrowed unless it has escapes).
  fn str(&self, key: &str) -> Option<Cow<'a, str>> {
    let raw = self.raw(key)?.get();
    match serde_json::from_str::<&'a str>(raw) {
      Ok(s) => Some(Cow::Borrowed(s)),
      Err(_) => serde_json::from_str::<String>(raw).ok().map(Cow::Owned),
    }
  }

  fn string(&self, key: &str) -> String {
    self.str(key).map(Cow::into_owned).unwrap_or_default()
  }

  fn u64(&self, key: &str) -> Option<u64> {
    serde_json::from_str(self.raw(key)?.get()).ok()
  }

  fn value(&self, key: &str) -> Option<Value> {
    serde_json::from_str(self.raw(key)?.get()).ok()
  }

  /// What `validate_event` checks, on the raw members.
  fn validate(&self) -> Result<(), DurableError> {
    let Some(kind) = self.str("type") else {
      return Err(corrupt("malformed journal event"));
    };
    if self.u64("v") != Some(DURABLE_JOURNAL_VERSION) {
      let v = self
        .raw("v")
        .map(|v| v.get().to_string())
        .unwrap_or_else(|| "?".into());
      return Err(DurableError::new(
        "cave_durable_journal_version_unsupported",
        format!("cave_durable_journal_version_unsupported: journal v{v}, this runtime reads v2"),
      ));
    }
    if !self.str("at").is_some_and(|at| valid_timestamp(&at)) {
      return Err(corrupt("malformed event timestamp"));
    }
    check_keys(
      &kind,
      |k| self.raw(k).is_some(),
      self.fields.iter().map(|(k, _)| k.as_ref()),
    )
  }
}

/// `parse_lines` for `analyze`: the same checks and codes, without building `Value`s.
fn parse_lines_lazy(lines: &[String]) -> Result<Vec<Parsed<'_>>, DurableError> {
  check_journal_limits(lines)?;
  let mut events = Vec::with_capacity(lines.len());
  for line in lines {
    let fields = if line.trim_start().starts_with('{') {
      serde_json::from_str::<LazyObject>(line)
        .map_err(|_| corrupt("unparseable journal line"))?
        .0
    } else {
      // Valid JSON that is not an object is malformed; anything else is unparseable.
      serde_json::from_str::<serde::de::IgnoredAny>(line).map_err(|_| corrupt("unparseable journal line"))?;
      return Err(corrupt("malformed journal event"));
    };
    let parsed = Parsed { fields };
    parsed.validate()?;
    events.push(parsed);
  }
  Ok(events)
}

/// A JSON object's members with raw values (a repeated key: the last one wins, as in a `Value`).
struct LazyObject<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

/// An object key, borrowed from the line unless it has escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Key<'a> {
  fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
    struct Visit<'a>(std::marker::PhantomData<&'a ()>);
    impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
      type Value = Key<'a>;
      fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string key")
      }
      fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Key(Cow::Borrowed(v)))
      }
      fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Key(Cow::Owned(v.to_string())))
      }
      fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Key(Cow::Owned(v)))
      }
    }
    d.deserialize_str(Visit(std::marker::PhantomData))
  }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for LazyObject<'a> {
  fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
    struct Visit<'a>(std::marker::PhantomData<&'a ()>);
    impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
      type Value = LazyObject<'a>;
      fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
      }
      fn visit_map<M: serde::de::MapAccess<'de>>(self, mut m: M) -> Result<Self::Value, M::Error> {
        let mut out: Vec<(Cow<'a, str>, &'a RawValue)> = Vec::with_capacity(12);
        while let Some((Key(k), v)) = m.next_entry::<Key<'a>, &'a RawValue>()? {
          match out.iter_mut().find(|(key, _)| *key == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
          }
        }
        Ok(LazyObject(out))
      }
    }
    d.deserialize_map(Visit(std::marker::PhantomData))
  }
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
  pub fn new(
    store: Arc<dyn DurableStore>,
    run_id: &str,
    existing_events: usize,
    existing_bytes: usize,
  ) -> Self {
    Self {
      store,
      run_id: run_id.into(),
      queue: Vec::new(),
      failed: None,
      events: existing_events,
      bytes: existing_bytes,
    }
  }

  pub fn emit(&mut self, kind: &str, fields: Value) -> Result<(), DurableError> {
    let e = event(kind, fields);
    validate_event(&e).map_err(|_| {
      DurableError::new(
        "cave_durable_event_not_serializable",
        format!("cave_durable_event_not_serializable: {kind}"),
      )
    })?;
    let line = e.to_string();
    if line.len() > DURABLE_MAX_EVENT_BYTES {
      return Err(DurableError::new(
        "cave_durable_event_limit",
        format!("cave_durable_event_limit: {kind}"),
      ));
    }
    if self.events + 1 > DURABLE_MAX_JOURNAL_EVENTS || self.bytes + line.len() + 1 > DURABLE_MAX_JOURNAL_BYTES
    {
      return Err(DurableError::new(
        "cave_durable_journal_limit",
        "cave_durable_journal_limit",
      ));
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

  /// Events emitted so far (the sequence number of the last one), journaled ones included.
  pub fn emitted(&self) -> usize {
    self.events
  }

  /// For a group commit that appends outside this value's lock: the queued lines as one append,
  /// the store and the run id. `Err` is the sticky failure of an earlier append.
  pub fn take_batch(&mut self) -> Result<Option<(String, Arc<dyn DurableStore>, String)>, DurableError> {
    if let Some(e) = &self.failed {
      return Err(e.clone());
    }
    if self.queue.is_empty() {
      return Ok(None);
    }
    let mut data = String::new();
    for line in self.queue.drain(..) {
      data.push_str(&line);
      data.push('\n');
    }
    Ok(Some((data, self.store.clone(), self.run_id.clone())))
  }

  /// Records a failed append: every later flush fails with it.
  pub fn fail(&mut self, e: DurableError) {
    self.failed.get_or_insert(e);
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
  fn from_event(e: &Parsed) -> Self {
    Self {
      path: e.string("path"),
      tool_call_id: e.string("toolCallId"),
      name: e.string("name"),
      effect: e.string("effect"),
      args_sha256: e.string("argsSha256"),
      idempotency_key: e.string("idempotencyKey"),
      settled: None,
    }
  }

  fn same_identity(&self, e: &Parsed) -> bool {
    let same = |mine: &str, key: &str| e.str(key).as_deref().unwrap_or_default() == mine;
    same(&self.path, "path")
      && same(&self.tool_call_id, "toolCallId")
      && same(&self.name, "name")
      && same(&self.effect, "effect")
      && same(&self.args_sha256, "argsSha256")
      && same(&self.idempotency_key, "idempotencyKey")
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
  Completed {
    result: Value,
  },
  Failed {
    code: String,
    message: String,
    receipt: Value,
  },
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
  let events = parse_lines_lazy(lines)?;
  let first = &events[0];
  if first.str("type").as_deref() != Some("run_started") {
    return Err(corrupt("journal does not begin with run_started"));
  }
  if first.str("runId").as_deref() != Some(expected.run_id.as_str()) {
    return Err(corrupt("journaled runId mismatch"));
  }
  if first.str("definitionSha256").as_deref() != Some(expected.definition_sha256.as_str()) {
    return Err(DurableError::new(
      "cave_durable_definition_changed",
      "cave_durable_definition_changed: the agent definition differs from the journaled run; resume with the original definition, or use a new durable.runId",
    ));
  }
  if first.str("agentId").as_deref() != Some(expected.agent_id.as_str()) {
    return Err(DurableError::new(
      "cave_durable_agent_mismatch",
      "cave_durable_agent_mismatch: the journaled run belongs to another agent",
    ));
  }
  if first.value("input").as_ref() != Some(&expected.input) {
    return Err(DurableError::new(
      "cave_durable_input_mismatch",
      "cave_durable_input_mismatch: the input differs from the journaled run; a new task needs a new runId",
    ));
  }
  let journaled_max = first.value("budgetMax").and_then(|v| v.as_f64());
  if first.str("denomination").as_deref() != Some(expected.denomination.as_str())
    || journaled_max != expected.budget_max
    || first.str("budgetSha256").as_deref() != Some(expected.budget_sha256.as_str())
  {
    return Err(DurableError::new(
      "cave_durable_budget_changed",
      "cave_durable_budget_changed: the budget differs from the journaled run; a resume continues the original money contract",
    ));
  }

  let mut state = ResumeState {
    attempts: 1,
    session_id: first.string("sessionId"),
    events: events.len(),
    bytes: lines.iter().map(|l| l.len() + 1).sum(),
    ..Default::default()
  };
  let mut pending_calls: HashMap<(String, String), VecDeque<(String, String)>> = HashMap::new();
  let mut records: Vec<ToolRecord> = Vec::new();
  let mut record_keys: HashMap<(String, String), usize> = HashMap::new();
  // The transcript's `turn`/`snapshot` message arrays, parsed only if the run is pending.
  let mut base: Vec<&RawValue> = Vec::new();
  let mut terminal: Option<&Parsed> = None;
  let mut last_attempt = 1u64;

  for (i, e) in events.iter().enumerate().skip(1) {
    if terminal.is_some() {
      return Err(corrupt("events follow terminal outcome"));
    }
    let kind = e.str("type").unwrap_or_default();
    let path = e.string("path");
    match kind.as_ref() {
      "run_started" => return Err(corrupt(format!("second run_started at event {i}"))),
      "resumed" => {
        let attempt = e.u64("attempt").unwrap_or(0);
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
        let call_kind = e.string("kind");
        if path.is_empty() && call_kind == "model" {
          state.prior_root_model_calls += 1;
        }
        let who = (e.string("provider"), e.string("model"));
        pending_calls.entry((path, call_kind)).or_default().push_back(who);
      }
      "call_settled" | "call_abandoned" => {
        let call_kind = e
          .str("kind")
          .map(Cow::into_owned)
          .unwrap_or_else(|| "model".to_string());
        let key = (path.clone(), call_kind.clone());
        let queue = pending_calls.get_mut(&key);
        let who = match queue.and_then(|q| q.pop_front()) {
          Some(w) => w,
          None if kind == "call_abandoned" => {
            // An abandon closes whichever kind is open on the path.
            let alt = pending_calls
              .iter_mut()
              .find(|((p, _), q)| *p == path && !q.is_empty());
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
        let call = e.value("call").unwrap_or(Value::Null);
        if call["provider"].as_str() != Some(who.0.as_str()) || call["model"].as_str() != Some(who.1.as_str())
        {
          return Err(corrupt("call_settled identity differs from its intent"));
        }
        let tokens = |k: &str| {
          call
            .get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| corrupt("malformed call usage"))
        };
        let t = &mut state.prior_totals;
        t.input += tokens("inputTokens")?;
        t.output += tokens("outputTokens")?;
        t.cache_read += tokens("cacheReadTokens")?;
        t.cache_write += tokens("cacheWriteTokens")?;
        t.reasoning += tokens("reasoningTokens")?;
        t.estimated_usd += num(&call, "estimatedUsd");
        t.unpriced |= call["unpriced"].as_bool().unwrap_or(false);
        let amount = e.value("settledAmount").and_then(|v| v.as_f64()).unwrap_or(0.0);
        if !amount.is_finite() || amount < 0.0 {
          return Err(corrupt("invalid settledAmount"));
        }
        state.prior_settled += amount;
        state.prior_calls += 1;
      }
      "tool_intent" => {
        let rec = ToolRecord::from_event(e);
        let key = (rec.path.clone(), rec.tool_call_id.clone());
        if record_keys.contains_key(&key) {
          return Err(corrupt("duplicate tool intent identity"));
        }
        if idempotency_key(
          &expected.run_id,
          &rec.path,
          &rec.tool_call_id,
          &rec.name,
          &rec.args_sha256,
        ) != rec.idempotency_key
        {
          return Err(corrupt("tool idempotency identity mismatch"));
        }
        record_keys.insert(key, records.len());
        records.push(rec);
      }
      "tool_settled" => {
        let key = (path.clone(), e.string("toolCallId"));
        let Some(&idx) = record_keys.get(&key) else {
          return Err(corrupt("tool settlement without matching intent"));
        };
        if !records[idx].same_identity(e) || records[idx].settled.is_some() {
          return Err(corrupt("tool settlement without matching intent"));
        }
        let outcome = e.str("outcome").unwrap_or_default();
        if outcome != "returned" && outcome != "threw" {
          return Err(corrupt("malformed tool outcome"));
        }
        records[idx].settled =
          Some(json!({"outcome": outcome, "value": e.value("value"), "error": e.value("error")}));
      }
      "turn" | "snapshot" => {
        let Some(msgs) = e
          .raw("messages")
          .filter(|m| m.get().trim_start().starts_with('['))
        else {
          return Err(corrupt(format!("malformed {kind} messages")));
        };
        if kind == "snapshot" {
          base.clear();
        }
        base.push(msgs);
        state.has_completed_turn = true;
        for rec in records.drain(..) {
          let Some(s) = &rec.settled else {
            return Err(corrupt("turn checkpoint crosses unsettled tool intent"));
          };
          state
            .prior_tool_events
            .push((rec.name.clone(), s["outcome"] == "threw"));
        }
        record_keys.clear();
      }
      "run_completed" | "run_failed" => terminal = Some(e),
      other => {
        return Err(DurableError::new(
          "cave_durable_journal_event_unknown",
          format!("cave_durable_journal_event_unknown: {other}"),
        ))
      }
    }
  }
  let unmatched: u64 = pending_calls.values().map(|q| q.len() as u64).sum();
  state.attempts = last_attempt;
  if let Some(t) = terminal {
    if unmatched > 0 {
      return Err(corrupt("terminal run crosses unsettled provider intent"));
    }
    let completed = t.str("type").as_deref() == Some("run_completed");
    // A failed run may end on an intent it refused to re-run blind (`tool_effect_uncertain`);
    // only a completed run must have settled every tool call.
    if completed && records.iter().any(|r| r.settled.is_none()) {
      return Err(corrupt("completed run crosses unsettled tool intent"));
    }
    return Ok(if completed {
      JournalState::Completed {
        result: t
          .value("result")
          .ok_or_else(|| corrupt("malformed run_completed fields"))?,
      }
    } else {
      JournalState::Failed {
        code: t.string("code"),
        message: t.string("message"),
        receipt: t
          .value("receipt")
          .ok_or_else(|| corrupt("malformed run_failed fields"))?,
      }
    });
  }
  state.possible_double_count += unmatched;
  let mut messages: Vec<Value> = Vec::new();
  for msgs in base {
    let parsed: Vec<Value> =
      serde_json::from_str(msgs.get()).map_err(|_| corrupt("malformed turn messages"))?;
    messages.extend(parsed);
  }
  // Cut a trailing partial turn so the transcript ends where the loop can go on.
  if state.has_completed_turn {
    let keep = messages
      .iter()
      .rposition(|m| {
        matches!(
          m.get("role").and_then(Value::as_str),
          Some("user") | Some("toolResult")
        )
      })
      .map(|i| i + 1)
      .unwrap_or(0);
    state.discarded_partial_turn = keep < messages.len();
    messages.truncate(keep);
  }
  state.messages = messages;
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
    assert_eq!(
      parse_lines(&[bad_v]).unwrap_err().code,
      "cave_durable_journal_version_unsupported"
    );
    let unknown = r#"{"v":2,"at":"2025-12-02T18:26:40.123Z","type":"mystery"}"#.to_string();
    assert_eq!(
      parse_lines(&[unknown]).unwrap_err().code,
      "cave_durable_journal_event_unknown"
    );
    let extra = r#"{"v":2,"at":"2025-12-02T18:26:40.123Z","type":"turn","messages":[],"x":1}"#.to_string();
    assert_eq!(
      parse_lines(&[extra]).unwrap_err().message,
      "cave_durable_journal_corrupt: malformed turn fields"
    );
    assert_eq!(
      parse_lines(&["{nope".to_string()]).unwrap_err().message,
      "cave_durable_journal_corrupt: unparseable journal line"
    );
  }

  /// `analyze` reads lines lazily; it must report exactly what the strict parser reports.
  #[test]
  fn lazy_reading_reports_what_the_strict_parser_does() {
    const AT: &str = "2025-12-02T18:26:40.123Z";
    let bad = [
      "{nope".to_string(),
      "[1,2]".to_string(),
      "\"turn\"".to_string(),
      "{\"v\":2,\"at\":\"x\",\"type\":\"turn\",\"messages\":[]}".to_string(),
      format!("{{\"v\":2.0,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[]}}"),
      format!("{{\"v\":1,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[]}}"),
      format!("{{\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[]}}"),
      format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"mystery\"}}"),
      format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[],\"x\":1}}"),
      format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"turn\"}}"),
      format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[}}"),
      format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":7,\"messages\":[]}}"),
    ];
    for line in bad {
      let strict = parse_lines(std::slice::from_ref(&line)).unwrap_err();
      let lazy = parse_lines_lazy(std::slice::from_ref(&line)).err().expect(&line);
      assert_eq!(
        (lazy.code.as_str(), lazy.message.as_str()),
        (strict.code.as_str(), strict.message.as_str()),
        "{line}"
      );
    }
    // Escaped keys and repeated keys read as JSON says (the last duplicate wins).
    let line = format!("{{\"v\":1,\"v\":2,\"\\u0061t\":\"{AT}\",\"type\":\"tu\\u0072n\",\"messages\":[]}}");
    parse_lines(std::slice::from_ref(&line)).unwrap();
    let lazy = parse_lines_lazy(std::slice::from_ref(&line)).unwrap();
    assert_eq!(lazy[0].str("type").as_deref(), Some("turn"));
    assert_eq!(lazy[0].u64("v"), Some(2));
  }

  #[test]
  fn pending_transcript_is_rebuilt_from_the_last_snapshot() {
    const AT: &str = "2025-12-02T18:26:40.123Z";
    let expected = Expected {
      run_id: "r1".into(),
      agent_id: "a".into(),
      definition_sha256: "d".into(),
      input: json!("go"),
      denomination: "none".into(),
      budget_max: None,
      budget_sha256: "none".into(),
    };
    let started = format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"run_started\",\"runId\":\"r1\",\"agentId\":\"a\",\"definitionSha256\":\"d\",\"input\":\"go\",\"sessionId\":\"s\",\"denomination\":\"none\",\"budgetSha256\":\"none\",\"pid\":1}}");
    let turn = |m: &str| format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":{m}}}");
    let snap = |m: &str| format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"snapshot\",\"messages\":{m}}}");
    let lines = vec![
      started,
      turn(r#"[{"role":"user","content":"old"}]"#),
      snap(
        r#"[{"role":"user","content":"go"},{"role":"assistant","content":"a1"},{"role":"toolResult","content":"r1"}]"#,
      ),
      turn(r#"[{"role":"assistant","content":"partial"}]"#),
    ];
    let JournalState::Pending(state) = analyze(&lines, &expected).unwrap() else {
      panic!("pending")
    };
    let contents: Vec<&str> = state
      .messages
      .iter()
      .map(|m| m["content"].as_str().unwrap())
      .collect();
    assert_eq!(contents, ["go", "a1", "r1"]);
    assert!(state.discarded_partial_turn);
    assert_eq!(state.session_id, "s");
    let mut bad = lines.clone();
    bad[3] = turn(r#"{"role":"assistant"}"#);
    assert_eq!(
      analyze(&bad, &expected).unwrap_err().message,
      "cave_durable_journal_corrupt: malformed turn messages"
    );
  }
}
