//! Journal v2's records, typed: the 15 event types of the reference's `DurableJournalEvent`
//! union, how each becomes a line (envelope `v`, `at`, `type` first), and the strict reading of
//! a line back (exact key set per type, canonical timestamps, limits). Big members (messages,
//! results, inputs) stay raw JSON text while reading, so a 10,000-event journal costs one scan
//! plus the few members replay needs.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::DurableError;
use crate::code::Code;
use crate::limits::{
  DURABLE_JOURNAL_VERSION, DURABLE_MAX_EVENT_BYTES, DURABLE_MAX_JOURNAL_BYTES, DURABLE_MAX_JOURNAL_EVENTS,
};

/// Opaque JSON carried by a record: owned when written, borrowed from the line when read.
pub type Json<'a> = Cow<'a, RawValue>;

/// JSON text of `v` as a [`Json`] (for records being written).
pub fn json<T: Serialize + ?Sized>(v: &T) -> Json<'static> {
  Cow::Owned(serde_json::value::to_raw_value(v).unwrap_or_else(|_| null()))
}

fn null() -> Box<RawValue> {
  RawValue::from_string("null".into()).expect("null is JSON")
}

/// A journaled tool call's identity: `{path, toolCallId, name, effect, argsSha256, idempotencyKey}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolIdentity {
  pub path: String,
  pub tool_call_id: String,
  pub name: String,
  pub effect: String,
  pub args_sha256: String,
  pub idempotency_key: String,
}

/// `"returned"` or `"threw"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
  Returned,
  Threw,
}

/// `tool_settled.value`: the tool's result value as canonical JSON (`{encoding: "json", json}`),
/// or `{encoding: "undefined"}`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "encoding", rename_all = "lowercase")]
pub enum SettledValue<'a> {
  Json { json: Json<'a> },
  Undefined,
}

/// `tool_settled.error`: `{name, message}` (first line, bounded).
#[derive(Debug, Clone, Serialize)]
pub struct SettledError<'a> {
  pub name: Cow<'a, str>,
  pub message: Cow<'a, str>,
}

/// One journal record. Strings are `Cow` so a record read from a line borrows from it.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record<'a> {
  #[serde(rename_all = "camelCase")]
  RunStarted {
    run_id: Cow<'a, str>,
    agent_id: Cow<'a, str>,
    definition_sha256: Cow<'a, str>,
    input: Json<'a>,
    session_id: Cow<'a, str>,
    denomination: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget_max: Option<f64>,
    budget_sha256: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation: Option<Json<'a>>,
    pid: u64,
  },
  #[serde(rename_all = "camelCase")]
  Resumed {
    attempt: u64,
    unmatched_intents: u64,
    pid: u64,
  },
  #[serde(rename_all = "camelCase")]
  MeterCall {
    path: Cow<'a, str>,
    at_call: Json<'a>,
  },
  CallStarted {
    path: Cow<'a, str>,
    kind: Cow<'a, str>,
    provider: Cow<'a, str>,
    model: Cow<'a, str>,
  },
  #[serde(rename_all = "camelCase")]
  CallSettled {
    path: Cow<'a, str>,
    kind: Cow<'a, str>,
    /// `JournaledCallUsage`.
    call: Json<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    settled_amount: Option<Json<'a>>,
  },
  CallAbandoned {
    path: Cow<'a, str>,
  },
  ToolIntent(Cow<'a, ToolIdentity>),
  ToolSettled {
    #[serde(flatten)]
    identity: Cow<'a, ToolIdentity>,
    outcome: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<Json<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Json<'a>>,
  },
  Turn {
    messages: Json<'a>,
  },
  Snapshot {
    messages: Json<'a>,
  },
  #[serde(rename_all = "camelCase")]
  Tranche {
    amount: Json<'a>,
    reason: Json<'a>,
    at_call: Json<'a>,
  },
  CancelRequested {
    reason: Json<'a>,
  },
  #[serde(rename_all = "camelCase")]
  SleepScheduled {
    wake_at: Json<'a>,
    reason: Json<'a>,
  },
  RunCompleted {
    result: Json<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation: Option<Json<'a>>,
  },
  RunFailed {
    code: Cow<'a, str>,
    message: Cow<'a, str>,
    receipt: Json<'a>,
  },
}

impl Record<'_> {
  pub fn kind(&self) -> &'static str {
    match self {
      Record::RunStarted { .. } => "run_started",
      Record::Resumed { .. } => "resumed",
      Record::MeterCall { .. } => "meter_call",
      Record::CallStarted { .. } => "call_started",
      Record::CallSettled { .. } => "call_settled",
      Record::CallAbandoned { .. } => "call_abandoned",
      Record::ToolIntent(_) => "tool_intent",
      Record::ToolSettled { .. } => "tool_settled",
      Record::Turn { .. } => "turn",
      Record::Snapshot { .. } => "snapshot",
      Record::Tranche { .. } => "tranche",
      Record::CancelRequested { .. } => "cancel_requested",
      Record::SleepScheduled { .. } => "sleep_scheduled",
      Record::RunCompleted { .. } => "run_completed",
      Record::RunFailed { .. } => "run_failed",
    }
  }

  /// The record as one journal line: `{"v":2,"at":<now>,"type":…,…}`.
  pub fn to_line(&self) -> Result<String, DurableError> {
    let body = serde_json::to_string(self)
      .map_err(|_| DurableError::coded(Code::DurableEventNotSerializable, self.kind()))?;
    let mut line = String::with_capacity(body.len() + 40);
    line.push_str("{\"v\":");
    line.push_str(&DURABLE_JOURNAL_VERSION.to_string());
    line.push_str(",\"at\":\"");
    line.push_str(&iso_now());
    line.push_str("\",");
    line.push_str(&body[1..]);
    Ok(line)
  }
}

/// An event built from loose fields, with the envelope (`v`, `at`, `type` first): for tools and
/// tests that write journal lines by hand. The kernel writes [`Record`]s.
pub fn event(kind: &str, fields: Value) -> Value {
  let mut map = serde_json::Map::new();
  map.insert("v".into(), Value::from(DURABLE_JOURNAL_VERSION));
  map.insert("at".into(), Value::from(iso_now()));
  map.insert("type".into(), Value::from(kind));
  if let Value::Object(f) = fields {
    map.extend(f);
  }
  Value::Object(map)
}

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

pub(crate) fn corrupt(detail: impl std::fmt::Display) -> DurableError {
  DurableError::coded(Code::DurableJournalCorrupt, detail)
}

/// `Date.now()`: wall-clock milliseconds since the epoch (the one clock of journal times,
/// message timestamps and lease expiries, which other processes compare).
pub fn now_ms() -> u64 {
  std::time::SystemTime::now()
    .duration_since(std::time::UNIX_EPOCH)
    .map(|d| d.as_millis() as u64)
    .unwrap_or(0)
}

/// `new Date().toISOString()`.
pub fn iso_now() -> String {
  iso_from_ms(now_ms() as i64)
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

/// An event's exact key set: the type must be known, every required key present, no other key.
fn check_keys<'k>(
  kind: &str,
  has: impl Fn(&str) -> bool,
  mut keys: impl Iterator<Item = &'k str>,
) -> Result<(), DurableError> {
  let Some((required, optional)) = key_sets(kind) else {
    return Err(DurableError::coded(Code::DurableJournalEventUnknown, kind));
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

/// A journal line's members with the values left as raw JSON text (validated, not built into
/// trees), each parsed only when asked for.
pub struct Line<'a> {
  fields: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> Line<'a> {
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

  /// A string member, `""` when absent or not a string (the checks after reading say why).
  fn string(&self, key: &str) -> Cow<'a, str> {
    self.str(key).unwrap_or(Cow::Borrowed(""))
  }

  fn u64(&self, key: &str) -> Option<u64> {
    serde_json::from_str(self.raw(key)?.get()).ok()
  }

  fn f64(&self, key: &str) -> Option<f64> {
    serde_json::from_str(self.raw(key)?.get()).ok()
  }

  fn json(&self, key: &str) -> Option<Json<'a>> {
    self.raw(key).map(Cow::Borrowed)
  }

  fn json_or_null(&self, key: &str) -> Json<'a> {
    self.json(key).unwrap_or_else(|| Cow::Owned(null()))
  }

  /// The envelope and the key set.
  fn validate(&self) -> Result<Cow<'a, str>, DurableError> {
    let Some(kind) = self.str("type") else {
      return Err(corrupt("malformed journal event"));
    };
    if self.u64("v") != Some(DURABLE_JOURNAL_VERSION) {
      let v = self
        .raw("v")
        .map(|v| v.get().to_string())
        .unwrap_or_else(|| "?".into());
      return Err(DurableError::coded(
        Code::DurableJournalVersionUnsupported,
        format!("journal v{v}, this runtime reads v2"),
      ));
    }
    if !self.str("at").is_some_and(|at| valid_timestamp(&at)) {
      return Err(corrupt("malformed event timestamp"));
    }
    check_keys(
      &kind,
      |k| self.raw(k).is_some(),
      self.fields.iter().map(|(k, _)| k.as_ref()),
    )?;
    Ok(kind)
  }

  fn identity(&self) -> ToolIdentity {
    ToolIdentity {
      path: self.string("path").into_owned(),
      tool_call_id: self.string("toolCallId").into_owned(),
      name: self.string("name").into_owned(),
      effect: self.string("effect").into_owned(),
      args_sha256: self.string("argsSha256").into_owned(),
      idempotency_key: self.string("idempotencyKey").into_owned(),
    }
  }

  /// The typed record (after `validate`: the key set is exact). Members of the wrong JSON type
  /// read as empty strings / zero, which the replay checks then report.
  fn record(&self, kind: &str) -> Record<'a> {
    match kind {
      "run_started" => Record::RunStarted {
        run_id: self.string("runId"),
        agent_id: self.string("agentId"),
        definition_sha256: self.string("definitionSha256"),
        input: self.json_or_null("input"),
        session_id: self.string("sessionId"),
        denomination: self.string("denomination"),
        budget_max: self.f64("budgetMax"),
        budget_sha256: self.string("budgetSha256"),
        conversation: self.json("conversation"),
        pid: self.u64("pid").unwrap_or(0),
      },
      "resumed" => Record::Resumed {
        attempt: self.u64("attempt").unwrap_or(0),
        unmatched_intents: self.u64("unmatchedIntents").unwrap_or(0),
        pid: self.u64("pid").unwrap_or(0),
      },
      "meter_call" => Record::MeterCall {
        path: self.string("path"),
        at_call: self.json_or_null("atCall"),
      },
      "call_started" => Record::CallStarted {
        path: self.string("path"),
        kind: self.string("kind"),
        provider: self.string("provider"),
        model: self.string("model"),
      },
      "call_settled" => Record::CallSettled {
        path: self.string("path"),
        kind: self.str("kind").unwrap_or(Cow::Borrowed("model")),
        call: self.json_or_null("call"),
        settled_amount: self.json("settledAmount"),
      },
      "call_abandoned" => Record::CallAbandoned {
        path: self.string("path"),
      },
      "tool_intent" => Record::ToolIntent(Cow::Owned(self.identity())),
      "tool_settled" => Record::ToolSettled {
        identity: Cow::Owned(self.identity()),
        outcome: self.string("outcome"),
        value: self.json("value"),
        error: self.json("error"),
      },
      "turn" => Record::Turn {
        messages: self.json_or_null("messages"),
      },
      "snapshot" => Record::Snapshot {
        messages: self.json_or_null("messages"),
      },
      "tranche" => Record::Tranche {
        amount: self.json_or_null("amount"),
        reason: self.json_or_null("reason"),
        at_call: self.json_or_null("atCall"),
      },
      "cancel_requested" => Record::CancelRequested {
        reason: self.json_or_null("reason"),
      },
      "sleep_scheduled" => Record::SleepScheduled {
        wake_at: self.json_or_null("wakeAt"),
        reason: self.json_or_null("reason"),
      },
      "run_completed" => Record::RunCompleted {
        result: self.json_or_null("result"),
        conversation: self.json("conversation"),
      },
      _ => Record::RunFailed {
        code: self.string("code"),
        message: self.string("message"),
        receipt: self.json_or_null("receipt"),
      },
    }
  }
}

/// Reads journal lines as typed records, with the reference's validation and codes (the torn
/// tail was already dropped by the store).
pub fn read_records(lines: &[String]) -> Result<Vec<Record<'_>>, DurableError> {
  check_journal_limits(lines)?;
  let mut records = Vec::with_capacity(lines.len());
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
    let line = Line { fields };
    let kind = line.validate()?;
    records.push(line.record(&kind));
  }
  Ok(records)
}

/// Parses and validates journal lines into values (tests, tools reading a journal).
pub fn parse_lines(lines: &[String]) -> Result<Vec<Value>, DurableError> {
  read_records(lines)?;
  lines
    .iter()
    .map(|l| serde_json::from_str(l).map_err(|_| corrupt("unparseable journal line")))
    .collect()
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

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  const AT: &str = "2025-12-02T18:26:40.123Z";

  #[test]
  fn iso_round_trip_shape() {
    assert_eq!(iso_from_ms(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(iso_from_ms(1_764_700_000_123), "2025-12-02T18:26:40.123Z");
    assert!(valid_timestamp(&iso_now()));
    assert!(!valid_timestamp("2025-12-02 18:26:40"));
  }

  #[test]
  fn validation_codes_and_messages() {
    let cases = [
      (
        "{nope".to_string(),
        "cave_durable_journal_corrupt: unparseable journal line",
      ),
      (
        "[1,2]".to_string(),
        "cave_durable_journal_corrupt: malformed journal event",
      ),
      (
        "\"turn\"".to_string(),
        "cave_durable_journal_corrupt: malformed journal event",
      ),
      (
        "{\"v\":2,\"at\":\"x\",\"type\":\"turn\",\"messages\":[]}".to_string(),
        "cave_durable_journal_corrupt: malformed event timestamp",
      ),
      (
        format!("{{\"v\":2.0,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[]}}"),
        "cave_durable_journal_version_unsupported: journal v2.0, this runtime reads v2",
      ),
      (
        format!("{{\"v\":1,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[]}}"),
        "cave_durable_journal_version_unsupported: journal v1, this runtime reads v2",
      ),
      (
        format!("{{\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[]}}"),
        "cave_durable_journal_version_unsupported: journal v?, this runtime reads v2",
      ),
      (
        format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"mystery\"}}"),
        "cave_durable_journal_event_unknown: mystery",
      ),
      (
        format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[],\"x\":1}}"),
        "cave_durable_journal_corrupt: malformed turn fields",
      ),
      (
        format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"turn\"}}"),
        "cave_durable_journal_corrupt: malformed turn fields",
      ),
      (
        format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[}}"),
        "cave_durable_journal_corrupt: unparseable journal line",
      ),
      (
        format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":7,\"messages\":[]}}"),
        "cave_durable_journal_corrupt: malformed journal event",
      ),
    ];
    for (line, message) in cases {
      let e = read_records(std::slice::from_ref(&line)).err().expect(&line);
      assert_eq!(e.message, message, "{line}");
      assert!(e.message.starts_with(e.code.as_str()));
    }
    // Escaped keys and repeated keys read as JSON says (the last duplicate wins).
    let line = format!("{{\"v\":1,\"v\":2,\"\\u0061t\":\"{AT}\",\"type\":\"tu\\u0072n\",\"messages\":[]}}");
    let records = read_records(std::slice::from_ref(&line)).unwrap();
    assert!(matches!(records[0], Record::Turn { .. }));
  }

  #[test]
  fn records_write_the_envelope_first_and_read_back() {
    let identity = ToolIdentity {
      path: String::new(),
      tool_call_id: "c1".into(),
      name: "lookup".into(),
      effect: "read".into(),
      args_sha256: "a".repeat(64),
      idempotency_key: "cave-k".into(),
    };
    let value = SettledValue::Json {
      json: json(&json!({"content": [{"text": "echo", "type": "text"}], "details": {}})),
    };
    let record = Record::ToolSettled {
      identity: Cow::Borrowed(&identity),
      outcome: Cow::Borrowed("returned"),
      value: Some(json(&value)),
      error: None,
    };
    let line = record.to_line().unwrap();
    assert!(line.starts_with("{\"v\":2,\"at\":\""), "{line}");
    assert!(
      line.ends_with(r#","type":"tool_settled","path":"","toolCallId":"c1","name":"lookup","effect":"read","argsSha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","idempotencyKey":"cave-k","outcome":"returned","value":{"encoding":"json","json":{"content":[{"text":"echo","type":"text"}],"details":{}}}}"#),
      "{line}"
    );
    let lines = vec![line];
    let read = read_records(&lines).unwrap();
    let Record::ToolSettled {
      identity: got,
      outcome,
      value,
      ..
    } = &read[0]
    else {
      panic!("tool_settled")
    };
    assert_eq!(**got, identity);
    assert_eq!(outcome, "returned");
    assert!(value.as_ref().unwrap().get().contains("\"encoding\":\"json\""));
    let started = Record::Resumed {
      attempt: 2,
      unmatched_intents: 0,
      pid: 7,
    };
    assert!(started
      .to_line()
      .unwrap()
      .ends_with(r#","type":"resumed","attempt":2,"unmatchedIntents":0,"pid":7}"#));
  }
}
