//! `analyzeJournal`: a typed fold over a journal's records that tells a fresh, completed, failed
//! or pending run apart, checks the journal's integrity and identity in the reference's order,
//! and rebuilds a pending run (transcript, prior spend, the replay cursor's records).

use std::collections::{HashMap, VecDeque};

use serde_json::value::RawValue;
use serde_json::Value;

use super::canonical::idempotency_key;
use super::record::{corrupt, read_records, Json, Record, ToolIdentity};
use super::DurableError;
use crate::code::Code;
use crate::kernel::message::Message;

/// How a journaled tool call settled.
#[derive(Debug, Clone, PartialEq)]
pub enum Settlement {
  /// The result value as journaled (`value` member; `None` when absent).
  Returned(Option<Value>),
  /// `error.message`.
  Threw(String),
}

impl Settlement {
  /// What the model reads on replay, and whether it is an error. Reads both value shapes: the
  /// tool's result value (`{content: [{type: "text", text}], details}`, what the reference and
  /// knap write now) and the bare text knap journaled before (`json` a string).
  pub fn replayed(&self) -> (String, bool) {
    match self {
      Settlement::Threw(message) => (message.clone(), true),
      Settlement::Returned(value) => {
        let json = value
          .as_ref()
          .filter(|v| v.get("encoding").and_then(Value::as_str) == Some("json"))
          .and_then(|v| v.get("json"));
        let text = match json {
          None => "null".to_string(),
          Some(Value::String(text)) => text.clone(),
          Some(v @ Value::Object(o)) => match o.get("content").and_then(Value::as_array) {
            Some(parts) => parts
              .iter()
              .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
              .filter_map(|p| p.get("text").and_then(Value::as_str))
              .collect(),
            None => v.to_string(),
          },
          Some(other) => other.to_string(),
        };
        (text, false)
      }
    }
  }
}

/// A journaled tool call not yet covered by a turn checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRecord {
  pub identity: ToolIdentity,
  pub settled: Option<Settlement>,
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
  /// The transcript the next call continues from: the latest `snapshot` (knap writes one after
  /// each compaction: the provider-visible context) plus the `turn` events after it, else every
  /// `turn` (the reference's rebuild).
  pub messages: Vec<Message>,
  /// With a `snapshot`: the append-only transcript, every `turn` event (what the host and a
  /// bound Conversation keep). `None` when it is `messages`.
  pub transcript: Option<Vec<Message>>,
  /// `snapshot` records: the root's journaled compactions.
  pub compactions: u64,
  pub discarded_partial_turn: bool,
  pub prior_root_model_calls: u64,
  pub prior_settled: f64,
  /// Journaled budget releases, in order (restored before the settled spend).
  pub prior_tranches: Vec<crate::kernel::budget::Tranche>,
  /// The root meter's reservation counter: root provider intents (working and compaction), or
  /// the highest tranche `atCall` when that is more.
  pub prior_root_meter_calls: u64,
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

fn parse<T: serde::de::DeserializeOwned>(json: &Json) -> Option<T> {
  serde_json::from_str(json.get()).ok()
}

/// `run_started` against what the caller expects, in the reference's order.
fn check_identity(first: &Record, expected: &Expected) -> Result<String, DurableError> {
  let Record::RunStarted {
    run_id,
    agent_id,
    definition_sha256,
    input,
    session_id,
    denomination,
    budget_max,
    budget_sha256,
    ..
  } = first
  else {
    return Err(corrupt("journal does not begin with run_started"));
  };
  if *run_id != expected.run_id {
    return Err(corrupt("journaled runId mismatch"));
  }
  if *definition_sha256 != expected.definition_sha256 {
    return Err(DurableError::new(
      Code::DurableDefinitionChanged,
      "cave_durable_definition_changed: the agent definition differs from the journaled run; resume with the original definition, or use a new durable.runId",
    ));
  }
  if *agent_id != expected.agent_id {
    return Err(DurableError::coded(
      Code::DurableAgentMismatch,
      "the journaled run belongs to another agent",
    ));
  }
  if parse::<Value>(input).as_ref() != Some(&expected.input) {
    return Err(DurableError::coded(
      Code::DurableInputMismatch,
      "the input differs from the journaled run; a new task needs a new runId",
    ));
  }
  if *denomination != expected.denomination
    || *budget_max != expected.budget_max
    || *budget_sha256 != expected.budget_sha256
  {
    return Err(DurableError::coded(
      Code::DurableBudgetChanged,
      "the budget differs from the journaled run; a resume continues the original money contract",
    ));
  }
  Ok(session_id.to_string())
}

/// A `call_settled.call` (`JournaledCallUsage`) as replay needs it.
struct CallEvidence {
  provider: Option<String>,
  model: Option<String>,
  totals: PriorTotals,
}

fn read_call(call: &Json) -> Result<CallEvidence, DurableError> {
  let call: Value = parse(call).unwrap_or(Value::Null);
  let tokens = |k: &str| {
    call
      .get(k)
      .and_then(Value::as_u64)
      .ok_or_else(|| corrupt("malformed call usage"))
  };
  let text = |k: &str| call.get(k).and_then(Value::as_str).map(str::to_string);
  Ok(CallEvidence {
    provider: text("provider"),
    model: text("model"),
    totals: PriorTotals {
      input: tokens("inputTokens")?,
      output: tokens("outputTokens")?,
      cache_read: tokens("cacheReadTokens")?,
      cache_write: tokens("cacheWriteTokens")?,
      reasoning: tokens("reasoningTokens")?,
      estimated_usd: call.get("estimatedUsd").and_then(Value::as_f64).unwrap_or(0.0),
      unpriced: call.get("unpriced").and_then(Value::as_bool).unwrap_or(false),
    },
  })
}

/// The fold's state between records.
struct Replay<'a> {
  run_id: &'a str,
  state: ResumeState,
  /// Provider intents not yet settled, by `(path, kind)`: the `(provider, model)` of each.
  pending_calls: HashMap<(String, String), VecDeque<(String, String)>>,
  records: Vec<ToolRecord>,
  record_keys: HashMap<(String, String), usize>,
  /// The transcript's `turn`/`snapshot` message arrays, parsed only if the run is pending.
  base: Vec<&'a RawValue>,
  /// Every `turn` array (the append-only transcript, when a snapshot reset `base`).
  turns: Vec<&'a RawValue>,
  terminal: Option<&'a Record<'a>>,
  last_attempt: u64,
  /// Root provider intents, working and compaction (the meter's reservations).
  root_intents: u64,
}

impl<'a> Replay<'a> {
  fn apply(&mut self, i: usize, record: &'a Record<'a>) -> Result<(), DurableError> {
    if self.terminal.is_some() {
      return Err(corrupt("events follow terminal outcome"));
    }
    match record {
      Record::RunStarted { .. } => return Err(corrupt(format!("second run_started at event {i}"))),
      Record::Resumed { attempt, .. } => {
        if *attempt != self.last_attempt + 1 {
          return Err(corrupt("non-monotonic resumed.attempt"));
        }
        self.last_attempt = *attempt;
        // Intents a crashed attempt never settled were possibly billed; they are counted once
        // and cleared here, so a run that later completes still reads back cleanly (the
        // reference keeps them pending and would read its own completed journal as corrupt).
        for queue in self.pending_calls.values_mut() {
          self.state.possible_double_count += queue.len() as u64;
          queue.clear();
        }
      }
      Record::MeterCall { .. } | Record::CancelRequested { .. } | Record::SleepScheduled { .. } => {}
      Record::Tranche {
        amount,
        reason,
        at_call,
      } => {
        let amount = parse::<f64>(amount).filter(|a| a.is_finite() && *a > 0.0);
        let reason = parse::<String>(reason).filter(|r| !r.trim().is_empty());
        let at_call = parse::<u64>(at_call);
        let (Some(amount), Some(reason), Some(at_call)) = (amount, reason, at_call) else {
          return Err(corrupt("malformed tranche"));
        };
        if self
          .state
          .prior_tranches
          .last()
          .is_some_and(|t| t.at_call > at_call)
        {
          return Err(corrupt("non-monotonic tranche atCall"));
        }
        self.state.prior_root_meter_calls = self.state.prior_root_meter_calls.max(at_call);
        self.state.prior_tranches.push(crate::kernel::budget::Tranche {
          amount,
          reason,
          at_call,
        });
      }
      Record::CallStarted {
        path,
        kind,
        provider,
        model,
      } => {
        if path.is_empty() && kind == "model" {
          self.state.prior_root_model_calls += 1;
        }
        if path.is_empty() {
          self.root_intents += 1;
        }
        self
          .pending_calls
          .entry((path.to_string(), kind.to_string()))
          .or_default()
          .push_back((provider.to_string(), model.to_string()));
      }
      Record::CallAbandoned { path } => {
        // An abandon closes the model call open on the path, or whichever kind is open there.
        let key = (path.to_string(), "model".to_string());
        let closed = match self.pending_calls.get_mut(&key).and_then(VecDeque::pop_front) {
          Some(_) => Some(true),
          None => self
            .pending_calls
            .iter_mut()
            .find(|((p, _), q)| p == path && !q.is_empty())
            .and_then(|(_, q)| q.pop_front())
            .map(|_| false),
        };
        let Some(was_model) = closed else {
          return Err(corrupt("call_abandoned without intent"));
        };
        // Only a working call counted toward the root's model calls; an abandoned summarizer
        // call never did.
        if path.is_empty() && was_model {
          self.state.prior_root_model_calls = self.state.prior_root_model_calls.saturating_sub(1);
        }
      }
      Record::CallSettled {
        path,
        kind,
        call,
        settled_amount,
      } => {
        let key = (path.to_string(), kind.to_string());
        let Some(who) = self.pending_calls.get_mut(&key).and_then(VecDeque::pop_front) else {
          return Err(corrupt("call_settled without intent"));
        };
        let evidence = read_call(call)?;
        if evidence.provider.as_deref() != Some(who.0.as_str())
          || evidence.model.as_deref() != Some(who.1.as_str())
        {
          return Err(corrupt("call_settled identity differs from its intent"));
        }
        let t = &mut self.state.prior_totals;
        let e = &evidence.totals;
        t.input += e.input;
        t.output += e.output;
        t.cache_read += e.cache_read;
        t.cache_write += e.cache_write;
        t.reasoning += e.reasoning;
        t.estimated_usd += e.estimated_usd;
        t.unpriced |= e.unpriced;
        let amount = settled_amount.as_ref().and_then(parse::<f64>).unwrap_or(0.0);
        if !amount.is_finite() || amount < 0.0 {
          return Err(corrupt("invalid settledAmount"));
        }
        self.state.prior_settled += amount;
        self.state.prior_calls += 1;
      }
      Record::ToolIntent(identity) => {
        let key = (identity.path.clone(), identity.tool_call_id.clone());
        if self.record_keys.contains_key(&key) {
          return Err(corrupt("duplicate tool intent identity"));
        }
        let id = identity;
        if idempotency_key(self.run_id, &id.path, &id.tool_call_id, &id.name, &id.args_sha256)
          != id.idempotency_key
        {
          return Err(corrupt("tool idempotency identity mismatch"));
        }
        self.record_keys.insert(key, self.records.len());
        self.records.push(ToolRecord {
          identity: (**identity).clone(),
          settled: None,
        });
      }
      Record::ToolSettled {
        identity,
        outcome,
        value,
        error,
      } => {
        let key = (identity.path.clone(), identity.tool_call_id.clone());
        let Some(&idx) = self.record_keys.get(&key) else {
          return Err(corrupt("tool settlement without matching intent"));
        };
        let rec = &mut self.records[idx];
        if rec.identity != **identity || rec.settled.is_some() {
          return Err(corrupt("tool settlement without matching intent"));
        }
        rec.settled = Some(match outcome.as_ref() {
          "returned" => Settlement::Returned(value.as_ref().and_then(parse)),
          "threw" => Settlement::Threw(
            error
              .as_ref()
              .and_then(parse::<Value>)
              .and_then(|e| e.get("message").and_then(Value::as_str).map(str::to_string))
              .unwrap_or_else(|| "tool failed".to_string()),
          ),
          _ => return Err(corrupt("malformed tool outcome")),
        });
      }
      Record::Turn { messages } | Record::Snapshot { messages } => {
        let kind = record.kind();
        if !messages.get().trim_start().starts_with('[') {
          return Err(corrupt(format!("malformed {kind} messages")));
        }
        if matches!(record, Record::Snapshot { .. }) {
          self.base.clear();
          self.state.compactions += 1;
        } else {
          self.turns.push(messages);
        }
        self.base.push(messages);
        self.state.has_completed_turn = true;
        for rec in self.records.drain(..) {
          let Some(s) = &rec.settled else {
            return Err(corrupt("turn checkpoint crosses unsettled tool intent"));
          };
          self
            .state
            .prior_tool_events
            .push((rec.identity.name.clone(), matches!(s, Settlement::Threw(_))));
        }
        self.record_keys.clear();
      }
      Record::RunCompleted { .. } | Record::RunFailed { .. } => self.terminal = Some(record),
    }
    Ok(())
  }

  fn finish(mut self) -> Result<JournalState, DurableError> {
    let unmatched: u64 = self.pending_calls.values().map(|q| q.len() as u64).sum();
    self.state.attempts = self.last_attempt;
    if let Some(t) = self.terminal {
      if unmatched > 0 {
        return Err(corrupt("terminal run crosses unsettled provider intent"));
      }
      return match t {
        Record::RunCompleted { result, .. } => {
          // A failed run may end on an intent it refused to re-run blind (`tool_effect_uncertain`);
          // only a completed run must have settled every tool call.
          if self.records.iter().any(|r| r.settled.is_none()) {
            return Err(corrupt("completed run crosses unsettled tool intent"));
          }
          Ok(JournalState::Completed {
            result: parse(result).ok_or_else(|| corrupt("malformed run_completed fields"))?,
          })
        }
        Record::RunFailed {
          code,
          message,
          receipt,
        } => Ok(JournalState::Failed {
          code: code.to_string(),
          message: message.to_string(),
          receipt: parse(receipt).ok_or_else(|| corrupt("malformed run_failed fields"))?,
        }),
        _ => unreachable!("only terminal records are kept as terminal"),
      };
    }
    let mut state = self.state;
    state.possible_double_count += unmatched;
    state.prior_root_meter_calls = state.prior_root_meter_calls.max(self.root_intents);
    let completed = state.has_completed_turn;
    let rebuild = |arrays: &[&RawValue]| -> Result<(Vec<Message>, bool), DurableError> {
      let mut messages: Vec<Message> = Vec::new();
      for msgs in arrays {
        let parsed: Vec<Message> =
          serde_json::from_str(msgs.get()).map_err(|_| corrupt("malformed turn messages"))?;
        messages.extend(parsed);
      }
      // Cut a trailing partial turn so the transcript ends where the loop can go on.
      let mut discarded = false;
      if completed {
        let keep = messages
          .iter()
          .rposition(|m| matches!(m, Message::User(_) | Message::ToolResult(_)))
          .map(|i| i + 1)
          .unwrap_or(0);
        discarded = keep < messages.len();
        messages.truncate(keep);
      }
      Ok((messages, discarded))
    };
    let (messages, discarded) = rebuild(&self.base)?;
    state.discarded_partial_turn = discarded;
    if state.compactions > 0 {
      state.transcript = Some(rebuild(&self.turns)?.0);
    }
    state.messages = messages;
    state.replay = self.records;
    Ok(JournalState::Pending(Box::new(state)))
  }
}

/// `analyzeJournal`: integrity, identity checks in the reference order, and reconstruction.
pub fn analyze(lines: &[String], expected: &Expected) -> Result<JournalState, DurableError> {
  if lines.is_empty() {
    return Ok(JournalState::Fresh);
  }
  let records = read_records(lines)?;
  let session_id = check_identity(&records[0], expected)?;
  let mut replay = Replay {
    run_id: &expected.run_id,
    state: ResumeState {
      attempts: 1,
      session_id,
      events: records.len(),
      bytes: lines.iter().map(|l| l.len() + 1).sum(),
      ..Default::default()
    },
    pending_calls: HashMap::new(),
    records: Vec::new(),
    record_keys: HashMap::new(),
    base: Vec::new(),
    turns: Vec::new(),
    terminal: None,
    last_attempt: 1,
    root_intents: 0,
  };
  for (i, record) in records.iter().enumerate().skip(1) {
    replay.apply(i, record)?;
  }
  let released: f64 = replay.state.prior_tranches.iter().map(|t| t.amount).sum();
  match expected.budget_max {
    _ if replay.state.prior_tranches.is_empty() => {}
    Some(max) if released <= max + 1e-9 => {}
    _ => return Err(corrupt("tranches over max")),
  }
  replay.finish()
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  const AT: &str = "2025-12-02T18:26:40.123Z";

  fn expected() -> Expected {
    Expected {
      run_id: "r1".into(),
      agent_id: "a".into(),
      definition_sha256: "d".into(),
      input: json!("go"),
      denomination: "none".into(),
      budget_max: None,
      budget_sha256: "none".into(),
    }
  }

  fn started() -> String {
    format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"run_started\",\"runId\":\"r1\",\"agentId\":\"a\",\"definitionSha256\":\"d\",\"input\":\"go\",\"sessionId\":\"s\",\"denomination\":\"none\",\"budgetSha256\":\"none\",\"pid\":1}}")
  }

  #[test]
  fn pending_transcript_is_rebuilt_from_the_last_snapshot() {
    let turn = |m: &str| format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":{m}}}");
    let snap = |m: &str| format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"snapshot\",\"messages\":{m}}}");
    let lines = vec![
      started(),
      turn(r#"[{"role":"user","content":"old"}]"#),
      snap(
        r#"[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"text","text":"a1"}],"stopReason":"toolUse"},{"role":"toolResult","toolCallId":"c1","toolName":"t","content":[{"type":"text","text":"r1"}],"isError":false}]"#,
      ),
      turn(r#"[{"role":"assistant","content":[{"type":"text","text":"partial"}],"stopReason":"stop"}]"#),
    ];
    let JournalState::Pending(state) = analyze(&lines, &expected()).unwrap() else {
      panic!("pending")
    };
    let roles: Vec<&str> = state.messages.iter().map(Message::role).collect();
    assert_eq!(roles, ["user", "assistant", "toolResult"]);
    assert!(state.discarded_partial_turn);
    // The snapshot (knap's: a compaction's context) is counted; the append-only transcript is
    // every turn, trimmed the same way.
    assert_eq!(state.compactions, 1);
    let full = state.transcript.as_ref().expect("a snapshot keeps the whole transcript apart");
    assert_eq!(full.len(), 1);
    assert_eq!(serde_json::to_value(&full[0]).unwrap()["content"], "old");
    assert_eq!(state.session_id, "s");
    let mut bad = lines.clone();
    bad[3] = turn(r#"{"role":"assistant"}"#);
    assert_eq!(
      analyze(&bad, &expected()).unwrap_err().message,
      "cave_durable_journal_corrupt: malformed turn messages"
    );
  }

  #[test]
  fn identity_checks_come_first_in_the_references_order() {
    let mut e = expected();
    e.definition_sha256 = "other".into();
    assert_eq!(
      analyze(&[started()], &e).unwrap_err().code,
      Code::DurableDefinitionChanged
    );
    let mut e = expected();
    e.input = json!("stop");
    assert_eq!(
      analyze(&[started()], &e).unwrap_err().code,
      Code::DurableInputMismatch
    );
    let mut e = expected();
    e.budget_max = Some(1.0);
    assert_eq!(
      analyze(&[started()], &e).unwrap_err().code,
      Code::DurableBudgetChanged
    );
    let turn = format!("{{\"v\":2,\"at\":\"{AT}\",\"type\":\"turn\",\"messages\":[]}}");
    assert_eq!(
      analyze(&[turn], &expected()).unwrap_err().message,
      "cave_durable_journal_corrupt: journal does not begin with run_started"
    );
  }

  #[test]
  fn settled_values_replay_in_both_shapes() {
    let new = Settlement::Returned(Some(json!({"encoding": "json", "json": {
      "content": [{"text": "echo a", "type": "text"}], "details": {"effect": "read", "resultPolicy": "auto"}}})));
    assert_eq!(new.replayed(), ("echo a".to_string(), false));
    let old = Settlement::Returned(Some(json!({"encoding": "json", "json": "echo a"})));
    assert_eq!(old.replayed(), ("echo a".to_string(), false));
    let undefined = Settlement::Returned(Some(json!({"encoding": "undefined"})));
    assert_eq!(undefined.replayed(), ("null".to_string(), false));
    assert_eq!(
      Settlement::Threw("boom".into()).replayed(),
      ("boom".to_string(), true)
    );
  }
}
