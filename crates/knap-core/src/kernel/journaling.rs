//! The kernel's side of a durable run: what it journals at each barrier, and the positional
//! replay cursor over tool calls a crashed attempt journaled but never checkpointed.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

use super::message::{Message, ToolResultValue};
use super::receipt::ReceiptCall;
use super::result::{ReceiptOut, RunOutput};
use crate::code::{Code, Error};
use crate::durable::canonical::{args_sha256, canonical_json, idempotency_key};
use crate::durable::journal::{Journal, ToolRecord};
use crate::durable::record::{json, Record, SettledError, SettledValue, ToolIdentity};
use crate::durable::DurableError;
use crate::limits::{DURABLE_MAX_CODE_BYTES, DURABLE_MAX_ERROR_MESSAGE_BYTES};

/// What to do with an admitted tool call.
pub enum ToolPlan {
  /// Journal an intent, run, journal the settlement.
  Fresh(ToolIdentity),
  /// A settled record: return its journaled outcome `(text, is_error)` without running.
  Replay(String, bool),
  /// An unsettled `read`/`idempotent` record: run again (`resumed: true`), settle the old intent.
  Redrive(ToolIdentity),
  /// The call differs from the record at the cursor: the run must stop before more spend.
  Mismatch(Error),
}

/// How an executed tool call ended, as the journal records it.
pub enum Settled<'a> {
  Returned(&'a ToolResultValue),
  Threw(&'a str),
}

/// `JournaledCallUsage`: a receipt call without `clampedOutputTokens`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JournaledCallUsage<'a> {
  provider: &'a str,
  model: &'a str,
  input_tokens: u64,
  output_tokens: u64,
  cache_read_tokens: u64,
  cache_write_tokens: u64,
  reasoning_tokens: u64,
  estimated_usd: f64,
  unpriced: bool,
  usage_basis: &'a str,
}

impl<'a> From<&'a ReceiptCall> for JournaledCallUsage<'a> {
  fn from(c: &'a ReceiptCall) -> Self {
    Self {
      provider: &c.provider,
      model: &c.model,
      input_tokens: c.input_tokens,
      output_tokens: c.output_tokens,
      cache_read_tokens: c.cache_read_tokens,
      cache_write_tokens: c.cache_write_tokens,
      reasoning_tokens: c.reasoning_tokens,
      estimated_usd: c.estimated_usd,
      unpriced: c.unpriced,
      usage_basis: c.usage_basis,
    }
  }
}

struct Cursor {
  records: Vec<ToolRecord>,
  next: usize,
  fatal: Option<Error>,
  /// `(path, toolCallId)` of the tool records not yet covered by a `turn` checkpoint (the
  /// crashed attempt's included): a second intent with one of them would make the journal
  /// unreadable ("duplicate tool intent identity"), so it is refused instead.
  open: HashSet<(String, String)>,
}

impl Cursor {
  fn fail(&mut self, error: Error) -> Error {
    self.fatal.get_or_insert(error).clone()
  }
}

pub struct DurableRun {
  pub run_id: String,
  /// Emitting only queues a line (short, never across an await).
  journal: Mutex<Journal>,
  /// Held while one append is in flight; the value is the sequence number of the last event known
  /// to be durable. Events queued by concurrent callers while an append is in flight go out
  /// together in the next one (a group commit: one fsync for several events of one step).
  durable: tokio::sync::Mutex<usize>,
  cursor: Mutex<Cursor>,
  pub metered: bool,
  /// A bound Conversation: its session and the transcript so far (base + journaled turns).
  conversation: Mutex<Option<(String, Vec<Value>)>>,
}

/// The first line of `s`, at most `max` bytes (cut on a character boundary).
fn truncate_bytes(s: &str, max: usize) -> &str {
  let first = s.lines().next().unwrap_or_default();
  if first.len() <= max {
    return first;
  }
  let mut end = max;
  while !first.is_char_boundary(end) {
    end -= 1;
  }
  &first[..end]
}

impl DurableRun {
  pub fn new(run_id: &str, journal: Journal, replay: Vec<ToolRecord>, metered: bool) -> Self {
    let durable = journal.emitted();
    Self {
      run_id: run_id.into(),
      journal: Mutex::new(journal),
      durable: tokio::sync::Mutex::new(durable),
      cursor: Mutex::new(Cursor {
        open: replay
          .iter()
          .map(|r| (r.identity.path.clone(), r.identity.tool_call_id.clone()))
          .collect(),
        records: replay,
        next: 0,
        fatal: None,
      }),
      metered,
      conversation: Mutex::new(None),
    }
  }

  fn cursor(&self) -> std::sync::MutexGuard<'_, Cursor> {
    self.cursor.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// Queues one record; returns its sequence number.
  fn emit(&self, record: &Record) -> Result<usize, DurableError> {
    let mut j = self.journal.lock().unwrap_or_else(|e| e.into_inner());
    j.emit(record)?;
    Ok(j.emitted())
  }

  /// Returns once event `seq` (and so every event before it) is durable.
  async fn flush_through(&self, seq: usize) -> Result<(), DurableError> {
    let mut durable = self.durable.lock().await;
    if *durable >= seq {
      return Ok(());
    }
    // Let callers that are ready in the same poll (a parallel batch's intents) queue theirs first.
    tokio::task::yield_now().await;
    let batch = {
      let mut j = self.journal.lock().unwrap_or_else(|e| e.into_inner());
      j.take_batch().map(|b| b.map(|b| (b, j.emitted())))
    };
    let Some(((data, store, run_id), through)) = batch? else {
      return Ok(());
    };
    match store.append(&run_id, data).await {
      Ok(()) => {
        *durable = through;
        Ok(())
      }
      Err(e) => {
        self
          .journal
          .lock()
          .unwrap_or_else(|e| e.into_inner())
          .fail(e.clone());
        Err(e)
      }
    }
  }

  async fn emit_flush(&self, record: &Record<'_>) -> Result<(), DurableError> {
    let seq = self.emit(record)?;
    self.flush_through(seq).await
  }

  /// `kind` is `"model"` (a working call) or `"compaction"` (a summarizer call).
  pub async fn call_started(&self, path: &str, kind: &str, provider: &str, model: &str) -> Result<(), DurableError> {
    self
      .emit_flush(&Record::CallStarted {
        path: Cow::Borrowed(path),
        kind: Cow::Borrowed(kind),
        provider: Cow::Borrowed(provider),
        model: Cow::Borrowed(model),
      })
      .await
  }

  /// Queued: made durable by the next flush (a tool intent or the turn).
  pub fn call_settled(&self, path: &str, kind: &str, call: &ReceiptCall, amount: f64) -> Result<(), DurableError> {
    let record = Record::CallSettled {
      path: Cow::Borrowed(path),
      kind: Cow::Borrowed(kind),
      call: json(&JournaledCallUsage::from(call)),
      settled_amount: (self.metered && amount.is_finite()).then(|| json(&amount)),
    };
    self.emit(&record).map(|_| ())
  }

  /// A staged budget release. Queued: made durable by the next barrier (`call_started`, the
  /// turn, or the terminal event).
  pub fn tranche(&self, t: &super::budget::Tranche) -> Result<(), DurableError> {
    let record = Record::Tranche {
      // A whole amount as JS writes it (`199999`, not `199999.0`).
      amount: if t.amount.fract() == 0.0 && t.amount.abs() < 9.0e15 {
        json(&(t.amount as i64))
      } else {
        json(&t.amount)
      },
      reason: json(&t.reason),
      at_call: json(&t.at_call),
    };
    self.emit(&record).map(|_| ())
  }

  /// Makes every queued event durable (after a successful compaction).
  pub async fn flush(&self) -> Result<(), DurableError> {
    let seq = self.journal.lock().unwrap_or_else(|e| e.into_inner()).emitted();
    self.flush_through(seq).await
  }

  pub async fn call_abandoned(&self, path: &str) -> Result<(), DurableError> {
    self
      .emit_flush(&Record::CallAbandoned {
        path: Cow::Borrowed(path),
      })
      .await
  }

  /// Matches an admitted call against the replay cursor (call order = journal order).
  pub fn plan(&self, path: &str, tool_call_id: &str, name: &str, effect: &str, args: &Value) -> ToolPlan {
    let digest = match args_sha256(args) {
      Ok(d) => d,
      Err(e) => {
        let code = Code::parse(&e.0).unwrap_or(Code::DurableValueLimit);
        return ToolPlan::Mismatch(Error::bare(code));
      }
    };
    let mut c = self.cursor();
    if c.next < c.records.len() {
      let rec = c.records[c.next].clone();
      let id = &rec.identity;
      if id.path != path || id.name != name || id.effect != effect || id.args_sha256 != digest {
        let e = Error::tagged(Code::DurableToolReplayMismatch, &[&id.name, &id.tool_call_id]);
        return ToolPlan::Mismatch(c.fail(e));
      }
      c.next += 1;
      return match &rec.settled {
        Some(s) => {
          let (text, is_error) = s.replayed();
          ToolPlan::Replay(text, is_error)
        }
        None => ToolPlan::Redrive(rec.identity),
      };
    }
    if !c.open.insert((path.to_string(), tool_call_id.to_string())) {
      // The provider reused a call id within one step.
      let e = Error::tagged(Code::DurableToolCallIdReused, &[name, tool_call_id]);
      return ToolPlan::Mismatch(c.fail(e));
    }
    let key = idempotency_key(&self.run_id, path, tool_call_id, name, &digest);
    ToolPlan::Fresh(ToolIdentity {
      path: path.into(),
      tool_call_id: tool_call_id.into(),
      name: name.into(),
      effect: effect.into(),
      args_sha256: digest,
      idempotency_key: key,
    })
  }

  /// A journal write failed mid-run: no further provider call may happen.
  pub fn set_fatal(&self, error: Error) {
    self.cursor().fail(error);
  }

  pub fn fatal(&self) -> Option<Error> {
    self.cursor().fatal.clone()
  }

  /// The first record the attempt never reached, if any (`cave_durable_tool_replay_incomplete`).
  pub fn incomplete(&self) -> Option<Error> {
    let c = self.cursor();
    c.records.get(c.next).map(|r| {
      Error::tagged(
        Code::DurableToolReplayIncomplete,
        &[&r.identity.name, &r.identity.tool_call_id],
      )
    })
  }

  pub async fn tool_intent(&self, id: &ToolIdentity) -> Result<(), DurableError> {
    self.emit_flush(&Record::ToolIntent(Cow::Borrowed(id))).await
  }

  /// `tool_settled`: a returned call journals its result value as Pi sees it, in canonical JSON
  /// (`{content: [{type: "text", text}], details}`); a thrown one its first message line.
  pub async fn tool_settled(&self, id: &ToolIdentity, settled: Settled<'_>) -> Result<(), DurableError> {
    let (outcome, value, error) = match settled {
      Settled::Returned(result) => {
        let value = serde_json::to_value(result).unwrap_or(Value::Null);
        let canonical = canonical_json(&value)
          .map_err(|e| Error::bare(Code::parse(&e.0).unwrap_or(Code::DurableValueLimit)))?;
        let raw = serde_json::value::RawValue::from_string(canonical)
          .map_err(|_| Error::coded(Code::DurableEventNotSerializable, "tool_settled"))?;
        let value = SettledValue::Json {
          json: Cow::Owned(raw),
        };
        ("returned", Some(json(&value)), None)
      }
      Settled::Threw(message) => {
        let error = SettledError {
          name: Cow::Borrowed("Error"),
          message: Cow::Borrowed(truncate_bytes(message, DURABLE_MAX_ERROR_MESSAGE_BYTES)),
        };
        ("threw", None, Some(json(&error)))
      }
    };
    self
      .emit_flush(&Record::ToolSettled {
        identity: Cow::Borrowed(id),
        outcome: Cow::Borrowed(outcome),
        value,
        error,
      })
      .await
  }

  /// The `turn` checkpoint. It commits every journaled tool record before it, so it must not be
  /// written while a replayed attempt's unsettled record is still waiting for its call (the
  /// journal would read back as corrupt): the run fails with the first unreconciled record instead.
  pub async fn turn(&self, messages: &[Message]) -> Result<(), DurableError> {
    {
      let mut c = self.cursor();
      if let Some(r) = c.records[c.next..].iter().find(|r| r.settled.is_none()) {
        let e = Error::tagged(
          Code::DurableToolReplayIncomplete,
          &[&r.identity.name, &r.identity.tool_call_id],
        );
        return Err(c.fail(e));
      }
      c.open.clear();
    }
    if let Some((_, t)) = self.conversation.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
      t.extend(messages.iter().map(|m| serde_json::to_value(m).unwrap_or(Value::Null)));
    }
    self
      .emit_flush(&Record::Turn {
        messages: json(messages),
      })
      .await
  }

  /// After a compaction: the provider-visible context as a `snapshot` (the reference's record for
  /// a rewritten transcript), so a resume goes on from it instead of paying to compact again.
  /// The conversation's terminal checkpoint keeps the whole transcript (`turn` events only).
  /// Queued: the caller flushes.
  pub fn snapshot(&self, messages: &[Message]) -> Result<(), DurableError> {
    self
      .emit(&Record::Snapshot {
        messages: json(messages),
      })
      .map(|_| ())
  }

  /// Binds a Conversation: `run_completed` then carries its terminal checkpoint.
  pub fn bind_conversation(&self, session_id: &str, transcript: Vec<Value>) {
    *self.conversation.lock().unwrap_or_else(|e| e.into_inner()) = Some((session_id.to_string(), transcript));
  }

  pub async fn completed(&self, result: &RunOutput) -> Result<(), DurableError> {
    let conversation = self
      .conversation
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .as_ref()
      .and_then(|(s, t)| crate::durable::summary::checkpoint(s, &Value::Array(t.clone())));
    self
      .emit_flush(&Record::RunCompleted {
        result: json(result),
        conversation: conversation.as_ref().map(json),
      })
      .await
  }

  pub async fn failed(&self, code: &str, message: &str, receipt: &ReceiptOut) -> Result<(), DurableError> {
    self
      .emit_flush(&Record::RunFailed {
        code: Cow::Borrowed(truncate_bytes(code, DURABLE_MAX_CODE_BYTES)),
        message: Cow::Borrowed(truncate_bytes(message, DURABLE_MAX_ERROR_MESSAGE_BYTES)),
        receipt: json(receipt),
      })
      .await
  }
}

#[cfg(test)]
mod tests {
  use std::sync::atomic::{AtomicUsize, Ordering};
  use std::sync::Arc;

  use super::*;
  use crate::durable::store::{DiskStore, DurableStore};
  use crate::exec::BoxFuture;
  use crate::kernel::message::{Part, TextPart, ToolResultDetails};

  /// The disk store, counting appends; `fail_from` makes the n-th append and later ones fail.
  struct Counting {
    inner: Arc<DiskStore>,
    appends: AtomicUsize,
    fail_from: usize,
  }

  impl DurableStore for Counting {
    fn load(&self, run_id: &str) -> BoxFuture<Result<Vec<String>, DurableError>> {
      self.inner.load(run_id)
    }
    fn append(&self, run_id: &str, data: String) -> BoxFuture<Result<(), DurableError>> {
      let n = self.appends.fetch_add(1, Ordering::SeqCst) + 1;
      if n >= self.fail_from {
        return Box::pin(async { Err(DurableError::coded(Code::DurableStoreFailed, "disk full")) });
      }
      self.inner.append(run_id, data)
    }
    fn acquire(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>> {
      self.inner.acquire(run_id)
    }
    fn release(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>> {
      self.inner.release(run_id)
    }
    fn close(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>> {
      self.inner.close(run_id)
    }
    fn list(&self) -> Option<BoxFuture<Result<Vec<String>, DurableError>>> {
      None
    }
  }

  fn identity(i: usize) -> ToolIdentity {
    let digest = args_sha256(&serde_json::json!({"q": i})).unwrap();
    ToolIdentity {
      path: String::new(),
      tool_call_id: format!("c{i}"),
      name: "lookup".into(),
      effect: "read".into(),
      idempotency_key: idempotency_key("r1", "", &format!("c{i}"), "lookup", &digest),
      args_sha256: digest,
    }
  }

  fn run_with(fail_from: usize) -> (tempfile::TempDir, Arc<Counting>, DurableRun) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Counting {
      inner: Arc::new(DiskStore::new(dir.path())),
      appends: AtomicUsize::new(0),
      fail_from,
    });
    let journal = Journal::new(store.clone(), "r1", 0, 0);
    (dir, store, DurableRun::new("r1", journal, Vec::new(), false))
  }

  fn call() -> ReceiptCall {
    ReceiptCall {
      provider: "anthropic".into(),
      model: "faux-1".into(),
      input_tokens: 1,
      output_tokens: 1,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      reasoning_tokens: 0,
      estimated_usd: 0.0,
      unpriced: true,
      usage_basis: "provider_reported",
      clamped_output_tokens: Some(3),
    }
  }

  fn ok() -> ToolResultValue {
    ToolResultValue {
      content: vec![Part::Text(TextPart::new("ok"))],
      details: ToolResultDetails::Produced {
        effect: "read".into(),
        result_policy: "auto".into(),
      },
    }
  }

  #[tokio::test]
  async fn concurrent_events_of_one_step_share_one_append() {
    let (_dir, store, run) = run_with(usize::MAX);
    run.call_settled("", "model", &call(), 0.0).unwrap();
    // A parallel batch: every intent is durable before its tool runs, all in one append.
    let ids: Vec<ToolIdentity> = (0..6).map(identity).collect();
    let results = futures::future::join_all(ids.iter().map(|id| run.tool_intent(id))).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(
      store.appends.load(Ordering::SeqCst),
      1,
      "one fsync for the queued settlement and six intents"
    );
    let lines = store.inner.load_sync("r1").unwrap();
    assert_eq!(lines.len(), 7);
    assert!(
      !lines[0].contains("clampedOutputTokens") && lines[0].contains("\"usageBasis\":\"provider_reported\""),
      "{}",
      lines[0]
    );
    // Settlements: in order, each durable when its call returns.
    let value = ok();
    let settled = futures::future::join_all(
      ids
        .iter()
        .map(|id| run.tool_settled(id, Settled::Returned(&value))),
    )
    .await;
    assert!(settled.iter().all(Result::is_ok));
    let lines = store.inner.load_sync("r1").unwrap();
    assert_eq!(lines.len(), 13);
    assert!(
      lines[7].ends_with(r#""outcome":"returned","value":{"encoding":"json","json":{"content":[{"text":"ok","type":"text"}],"details":{"effect":"read","resultPolicy":"auto"}}}}"#),
      "{}",
      lines[7]
    );
    assert!(store.appends.load(Ordering::SeqCst) <= 3);
    // A lone event still gets its own append.
    run.turn(&[]).await.unwrap();
    assert_eq!(store.inner.load_sync("r1").unwrap().len(), 14);
  }

  #[tokio::test]
  async fn a_failed_append_fails_every_caller_and_stays_failed() {
    let (_dir, store, run) = run_with(2);
    run.tool_intent(&identity(0)).await.unwrap();
    let ids: Vec<ToolIdentity> = (1..4).map(identity).collect();
    let results = futures::future::join_all(ids.iter().map(|id| run.tool_intent(id))).await;
    assert!(results.iter().all(|r| r
      .as_ref()
      .is_err_and(|e| e.message == "cave_durable_store_failed: disk full")));
    let appends = store.appends.load(Ordering::SeqCst);
    assert_eq!(
      run.turn(&[]).await.unwrap_err().message,
      "cave_durable_store_failed: disk full"
    );
    assert_eq!(
      store.appends.load(Ordering::SeqCst),
      appends,
      "no append after the failure"
    );
    assert_eq!(
      store.inner.load_sync("r1").unwrap().len(),
      1,
      "only what was acknowledged"
    );
  }

  #[tokio::test]
  async fn thrown_settlements_journal_the_first_line_only() {
    let (_dir, store, run) = run_with(usize::MAX);
    let id = identity(0);
    run.tool_intent(&id).await.unwrap();
    run
      .tool_settled(&id, Settled::Threw("boom\nstack line"))
      .await
      .unwrap();
    let lines = store.inner.load_sync("r1").unwrap();
    assert!(
      lines[1].ends_with(r#""outcome":"threw","error":{"name":"Error","message":"boom"}}"#),
      "{}",
      lines[1]
    );
  }
}
