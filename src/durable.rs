//! `NativeDiskStore`: the embedded disk store, for JS callers of the store interface. Runs
//! started with a `DiskDurableStore` use the same store inside Rust, with no round trips.

use std::sync::Arc;

use knap_core::durable::store::{DiskStore, DurableStore};
use knap_core::durable::DurableError;
use napi_derive::napi;

use crate::async_error;

fn js_error(e: DurableError) -> napi::Error {
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
