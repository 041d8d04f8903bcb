//! The kernel's side of a durable run: what it journals at each barrier, and the positional
//! replay cursor over tool calls a crashed attempt journaled but never checkpointed.

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::{json, Value};

use crate::durable::canonical::{args_sha256, idempotency_key};
use crate::durable::journal::{Journal, ToolRecord};
use crate::durable::DurableError;
use crate::limits::{DURABLE_MAX_CODE_BYTES, DURABLE_MAX_ERROR_MESSAGE_BYTES};

/// A tool call's durable identity.
#[derive(Debug, Clone)]
pub struct ToolIdentity {
  pub path: String,
  pub tool_call_id: String,
  pub name: String,
  pub effect: String,
  pub args_sha256: String,
  pub idempotency_key: String,
}

impl ToolIdentity {
  fn fields(&self) -> serde_json::Map<String, Value> {
    let v = json!({
      "path": self.path, "toolCallId": self.tool_call_id, "name": self.name, "effect": self.effect,
      "argsSha256": self.args_sha256, "idempotencyKey": self.idempotency_key
    });
    match v {
      Value::Object(m) => m,
      _ => serde_json::Map::new(),
    }
  }
}

/// What to do with an admitted tool call.
pub enum ToolPlan {
  /// Journal an intent, run, journal the settlement.
  Fresh(ToolIdentity),
  /// A settled record: return its journaled outcome `(text, is_error)` without running.
  Replay(String, bool),
  /// An unsettled `read`/`idempotent` record: run again (`resumed: true`), settle the old intent.
  Redrive(ToolIdentity),
  /// The call differs from the record at the cursor: the run must stop before more spend.
  Mismatch(String),
}

struct Cursor {
  records: Vec<ToolRecord>,
  next: usize,
  fatal: Option<String>,
  /// `(path, toolCallId)` of the tool records not yet covered by a `turn` checkpoint (the
  /// crashed attempt's included): a second intent with one of them would make the journal
  /// unreadable ("duplicate tool intent identity"), so it is refused instead.
  open: HashSet<(String, String)>,
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
}

fn truncate_bytes(s: &str, max: usize) -> String {
  let first = s.lines().next().unwrap_or_default();
  if first.len() <= max {
    return first.to_string();
  }
  let mut end = max;
  while !first.is_char_boundary(end) {
    end -= 1;
  }
  first[..end].to_string()
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
          .map(|r| (r.path.clone(), r.tool_call_id.clone()))
          .collect(),
        records: replay,
        next: 0,
        fatal: None,
      }),
      metered,
    }
  }

  /// Queues one event; returns its sequence number.
  fn emit(&self, kind: &str, fields: Value) -> Result<usize, DurableError> {
    let mut j = self.journal.lock().unwrap_or_else(|e| e.into_inner());
    j.emit(kind, fields)?;
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

  async fn emit_flush(&self, kind: &str, fields: Value) -> Result<(), DurableError> {
    let seq = self.emit(kind, fields)?;
    self.flush_through(seq).await
  }

  pub async fn call_started(&self, path: &str, provider: &str, model: &str) -> Result<(), DurableError> {
    self
      .emit_flush(
        "call_started",
        json!({"path": path, "kind": "model", "provider": provider, "model": model}),
      )
      .await
  }

  /// Queued: made durable by the next flush (a tool intent or the turn).
  pub async fn call_settled(&self, path: &str, call: Value, amount: f64) -> Result<(), DurableError> {
    let mut fields = json!({"path": path, "kind": "model", "call": call});
    if self.metered {
      fields["settledAmount"] = json!(amount);
    }
    self.emit("call_settled", fields).map(|_| ())
  }

  pub async fn call_abandoned(&self, path: &str) -> Result<(), DurableError> {
    self.emit_flush("call_abandoned", json!({"path": path})).await
  }

  /// Matches an admitted call against the replay cursor (call order = journal order).
  pub fn plan(&self, path: &str, tool_call_id: &str, name: &str, effect: &str, args: &Value) -> ToolPlan {
    let digest = match args_sha256(args) {
      Ok(d) => d,
      Err(e) => return ToolPlan::Mismatch(e.0),
    };
    let mut c = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
    if c.next < c.records.len() {
      let rec = c.records[c.next].clone();
      if rec.path != path || rec.name != name || rec.effect != effect || rec.args_sha256 != digest {
        let text = format!(
          "cave_durable_tool_replay_mismatch:{}:{}",
          rec.name, rec.tool_call_id
        );
        c.fatal.get_or_insert(text.clone());
        return ToolPlan::Mismatch(text);
      }
      c.next += 1;
      let identity = ToolIdentity {
        path: rec.path.clone(),
        tool_call_id: rec.tool_call_id.clone(),
        name: rec.name.clone(),
        effect: rec.effect.clone(),
        args_sha256: rec.args_sha256.clone(),
        idempotency_key: rec.idempotency_key.clone(),
      };
      return match &rec.settled {
        Some(s) if s["outcome"] == "threw" => {
          let msg = s["error"]["message"]
            .as_str()
            .unwrap_or("tool failed")
            .to_string();
          ToolPlan::Replay(msg, true)
        }
        Some(s) => {
          let text = match &s["value"] {
            Value::Object(v) if v.get("encoding") == Some(&json!("json")) => match &v["json"] {
              Value::String(t) => t.clone(),
              other => other.to_string(),
            },
            _ => "null".to_string(),
          };
          ToolPlan::Replay(text, false)
        }
        None => ToolPlan::Redrive(identity),
      };
    }
    if !c.open.insert((path.to_string(), tool_call_id.to_string())) {
      // The provider reused a call id within one step (`cave_durable_tool_call_id_reused`).
      let text = format!("cave_durable_tool_call_id_reused:{name}:{tool_call_id}");
      c.fatal.get_or_insert(text.clone());
      return ToolPlan::Mismatch(text);
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
  pub fn set_fatal(&self, message: String) {
    self
      .cursor
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .fatal
      .get_or_insert(message);
  }

  pub fn fatal(&self) -> Option<String> {
    self
      .cursor
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .fatal
      .clone()
  }

  /// The first record the attempt never reached, if any (`cave_durable_tool_replay_incomplete`).
  pub fn incomplete(&self) -> Option<String> {
    let c = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
    c.records.get(c.next).map(|r| {
      format!(
        "cave_durable_tool_replay_incomplete:{}:{}",
        r.name, r.tool_call_id
      )
    })
  }

  pub async fn tool_intent(&self, id: &ToolIdentity) -> Result<(), DurableError> {
    self.emit_flush("tool_intent", Value::Object(id.fields())).await
  }

  pub async fn tool_settled(
    &self,
    id: &ToolIdentity,
    text: &str,
    is_error: bool,
  ) -> Result<(), DurableError> {
    let mut fields = id.fields();
    if is_error {
      fields.insert("outcome".into(), json!("threw"));
      fields.insert(
        "error".into(),
        json!({"name": "Error", "message": truncate_bytes(text, DURABLE_MAX_ERROR_MESSAGE_BYTES)}),
      );
    } else {
      fields.insert("outcome".into(), json!("returned"));
      fields.insert("value".into(), json!({"encoding": "json", "json": text}));
    }
    self.emit_flush("tool_settled", Value::Object(fields)).await
  }

  /// The `turn` checkpoint. It commits every journaled tool record before it, so it must not be
  /// written while a replayed attempt's unsettled record is still waiting for its call (the
  /// journal would read back as corrupt): the run fails with the first unreconciled record instead.
  pub async fn turn(&self, messages: Vec<Value>) -> Result<(), DurableError> {
    {
      let mut c = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
      if let Some(r) = c.records[c.next..].iter().find(|r| r.settled.is_none()) {
        let text = format!(
          "cave_durable_tool_replay_incomplete:{}:{}",
          r.name, r.tool_call_id
        );
        let text = c.fatal.get_or_insert(text).clone();
        let code = text
          .split(':')
          .next()
          .unwrap_or("cave_durable_tool_replay_incomplete")
          .to_string();
        return Err(DurableError::new(code, text));
      }
      c.open.clear();
    }
    self.emit_flush("turn", json!({"messages": messages})).await
  }

  pub async fn completed(&self, result: &Value) -> Result<(), DurableError> {
    self.emit_flush("run_completed", json!({"result": result})).await
  }

  pub async fn failed(&self, code: &str, message: &str, receipt: &Value) -> Result<(), DurableError> {
    let fields = json!({
      "code": truncate_bytes(code, DURABLE_MAX_CODE_BYTES),
      "message": truncate_bytes(message, DURABLE_MAX_ERROR_MESSAGE_BYTES),
      "receipt": receipt
    });
    self.emit_flush("run_failed", fields).await
  }
}

/// The reference's coarse `errorCode()`.
pub fn error_code(message: &str) -> &'static str {
  for code in [
    "cave_cache_prefix_drift",
    "cave_tool_policy_failed",
    "cave_tool_policy_decision_invalid",
    "cave_tool_policy_reason_invalid",
  ] {
    if message.starts_with(code) {
      return code;
    }
  }
  if message.contains("credential") {
    return "cave_provider_credentials";
  }
  "cave_agent_run_failed"
}

#[cfg(test)]
mod tests {
  use std::sync::atomic::{AtomicUsize, Ordering};
  use std::sync::Arc;

  use super::*;
  use crate::durable::store::{DiskStore, DurableStore};
  use crate::exec::BoxFuture;

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
        return Box::pin(async { Err(DurableError::coded("cave_durable_store_failed", "disk full")) });
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
    let digest = args_sha256(&json!({"q": i})).unwrap();
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

  #[tokio::test]
  async fn concurrent_events_of_one_step_share_one_append() {
    let (_dir, store, run) = run_with(usize::MAX);
    run.call_settled("", json!({}), 0.0).await.unwrap();
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
    // Settlements: in order, each durable when its call returns.
    let settled = futures::future::join_all(ids.iter().map(|id| run.tool_settled(id, "ok", false))).await;
    assert!(settled.iter().all(Result::is_ok));
    assert_eq!(store.inner.load_sync("r1").unwrap().len(), 13);
    assert!(store.appends.load(Ordering::SeqCst) <= 3);
    // A lone event still gets its own append.
    run.turn(vec![]).await.unwrap();
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
      run.turn(vec![]).await.unwrap_err().message,
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
}
