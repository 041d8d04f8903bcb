//! `NativeDiskStore`: the embedded disk store, for JS callers of the store interface. Runs
//! started with a `DiskDurableStore` use the same store inside Rust, with no round trips.

use std::sync::Arc;

use knap_core::durable::store::{DiskStore, DurableStore};
use knap_core::durable::{summary, DurableError};
use napi_derive::napi;

use crate::async_error;

pub(crate) fn js_error(e: DurableError) -> napi::Error {
  async_error(e.code.as_str(), &e.message)
}

/// The journal byte limit (`MAX_JOURNAL_BYTES`, 256 MiB), for stores written in JS.
#[napi]
pub const DURABLE_MAX_JOURNAL_BYTES: u32 = knap_core::limits::DURABLE_MAX_JOURNAL_BYTES as u32;

#[napi]
pub struct NativeDiskStore {
  inner: Arc<DiskStore>,
}

#[napi]
impl NativeDiskStore {
  #[napi(constructor)]
  pub fn new(root: String) -> Self {
    Self {
      inner: Arc::new(DiskStore::new(root)),
    }
  }

  #[napi(getter)]
  pub fn root(&self) -> String {
    self.inner.root().to_string_lossy().into_owned()
  }

  /// The run's directory (`<root>/<runId>-<sha256(runId)[..10]>`).
  #[napi]
  pub fn run_dir(&self, run_id: String) -> String {
    self.inner.run_dir(&run_id).to_string_lossy().into_owned()
  }

  #[napi]
  pub async fn load(&self, run_id: String) -> napi::Result<Vec<String>> {
    self.inner.load(&run_id).await.map_err(js_error)
  }

  #[napi]
  pub async fn append(&self, run_id: String, data: String) -> napi::Result<()> {
    self.inner.append(&run_id, data).await.map_err(js_error)
  }

  #[napi]
  pub async fn acquire(&self, run_id: String) -> napi::Result<()> {
    self.inner.acquire(&run_id).await.map_err(js_error)
  }

  #[napi]
  pub async fn release(&self, run_id: String) -> napi::Result<()> {
    self.inner.release(&run_id).await.map_err(js_error)
  }

  /// Removes a lock knap cannot prove stale, unless a live knap process holds it.
  #[napi]
  pub async fn break_lock(&self, run_id: String) -> napi::Result<bool> {
    let s = self.inner.clone();
    tokio::task::spawn_blocking(move || s.break_lock_sync(&run_id))
      .await
      .map_err(|e| async_error("cave_durable_store_failed", &e.to_string()))?
      .map_err(js_error)
  }

  #[napi]
  pub async fn close(&self, run_id: String) -> napi::Result<()> {
    self.inner.close(&run_id).await.map_err(js_error)
  }

  #[napi]
  pub async fn list(&self) -> napi::Result<Vec<String>> {
    match self.inner.list() {
      Some(f) => f.await.map_err(js_error),
      None => Ok(Vec::new()),
    }
  }
}

/// `durableRunSummary` plus what the serve sweep needs: `{summary, sessionId, baseValid,
/// checkpoint}` as JSON (`checkpoint`: the session's restore point, `null` if none, `false` if
/// its digest does not recompute). Runs on a worker: a long journal is parsed off the event loop.
#[napi]
pub async fn durable_inspect(lines: Vec<String>) -> napi::Result<String> {
  let out = tokio::task::spawn_blocking(move || summary::inspect(&lines))
    .await
    .map_err(|e| async_error("cave_durable_store_failed", &e.to_string()))?
    .map_err(js_error)?;
  let checkpoint = match out.checkpoint {
    None => serde_json::Value::Null,
    Some(Err(())) => serde_json::Value::Bool(false),
    Some(Ok(c)) => c,
  };
  Ok(
    serde_json::json!({"summary": out.summary, "sessionId": out.session_id, "baseValid": out.base_valid, "checkpoint": checkpoint})
      .to_string(),
  )
}

/// The `cancel_requested` line for `requestDurableCancel` (throws `cave_durable_cancel_reason_invalid`).
#[napi]
pub fn durable_cancel_requested_line(reason: String) -> napi::Result<String, crate::ErrorCode> {
  summary::cancel_requested_line(&reason).map_err(sync_error)
}

/// The terminal `run_failed` line of a cancelled run (`settleCancelledRun`).
#[napi]
pub fn durable_cancelled_line(reason: String) -> String {
  summary::cancelled_line(&reason)
}

/// The `sleep_scheduled` line for `scheduleDurableWake`.
#[napi]
pub fn durable_sleep_line(
  wake_at_ms: i64,
  now_ms: i64,
  reason: String,
) -> napi::Result<String, crate::ErrorCode> {
  summary::sleep_line(wake_at_ms, now_ms, &reason).map_err(sync_error)
}

/// `DurableConversationCheckpoint` of `messages` (JSON text): `{sessionId, messagesSha256, messages}`.
#[napi]
pub fn durable_conversation_checkpoint(
  session_id: String,
  messages_json: String,
) -> napi::Result<String, crate::ErrorCode> {
  let messages: serde_json::Value = serde_json::from_str(&messages_json).map_err(|_| {
    sync_error(DurableError::coded(
      "cave_durable_conversation_invalid",
      "messages are not JSON",
    ))
  })?;
  if !messages.is_array() {
    return Err(sync_error(DurableError::coded(
      "cave_durable_conversation_invalid",
      "messages must be an array",
    )));
  }
  summary::checkpoint(&session_id, &messages)
    .map(|c| c.to_string())
    .ok_or_else(|| {
      sync_error(DurableError::coded(
        "cave_durable_conversation_invalid",
        "messages do not canonicalize",
      ))
    })
}

pub(crate) fn sync_error(e: DurableError) -> napi::Error<crate::ErrorCode> {
  napi::Error::new(crate::ErrorCode(e.code.to_string()), e.message)
}

/// `MAX_DURABLE_SLEEP_MS` (30 days).
#[napi]
pub const MAX_DURABLE_SLEEP_MS: f64 = knap_core::limits::DURABLE_MAX_SLEEP_MS as f64;
