//! `NativeCommandSessionRuntime`: the binding of `knap_core::command_session`. Options and
//! requests arrive as JSON text and are checked in Rust in the reference's order; results go
//! back as JSON text with the reference's exact shapes (keys present or absent as it has them).

use std::sync::Arc;

use knap_core::command_session::{CommandSessionRuntime, RuntimeOptions};
use knap_core::ToolError;
use napi_derive::napi;
use serde_json::Value;

use crate::{async_error, coded_error, CancelToken, ErrorCode};

fn parse(json: &str) -> Result<Value, ToolError> {
  serde_json::from_str(json).map_err(|_| ToolError::coded("command_session_options_invalid"))
}

fn to_async(e: ToolError) -> napi::Error {
  async_error(&e.code, &e.message)
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
  serde_json::to_string(value).unwrap_or_default()
}

#[napi]
pub struct NativeCommandSessionRuntime {
  pub(crate) inner: Arc<CommandSessionRuntime>,
}

#[napi]
impl NativeCommandSessionRuntime {
  /// Throws `command_session_<name>_invalid` (and the spill codes) with that code.
  #[napi(constructor)]
  pub fn new(options_json: String) -> napi::Result<Self, ErrorCode> {
    let options = parse(&options_json)
      .and_then(|o| RuntimeOptions::from_json(&o))
      .map_err(coded_error)?;
    Ok(Self {
      inner: CommandSessionRuntime::new(options),
    })
  }

  /// `start(options)`; `signal` kills the session whenever it fires.
  #[napi]
  pub async fn start(&self, options_json: String, signal: Option<&CancelToken>) -> napi::Result<String> {
    let options = parse(&options_json).map_err(to_async)?;
    let cancel = signal.map(|s| s.token.clone());
    let started = self.inner.start_json(&options, cancel).await.map_err(to_async)?;
    Ok(to_json(&started))
  }

  /// `list()`: summaries in start order (a lock, no waiting).
  #[napi]
  pub fn list(&self) -> String {
    to_json(&self.inner.list())
  }

  #[napi]
  pub async fn read(&self, options_json: String, signal: Option<&CancelToken>) -> napi::Result<String> {
    let options = parse(&options_json).map_err(to_async)?;
    let cancel = signal.map(|s| s.token.clone()).unwrap_or_default();
    let spec = self
      .inner
      .parse_read(&options, cancel.is_cancelled())
      .map_err(to_async)?;
    Ok(to_json(&self.inner.read(spec, &cancel).await.map_err(to_async)?))
  }

  #[napi]
  pub async fn write(&self, options_json: String, signal: Option<&CancelToken>) -> napi::Result<String> {
    let options = parse(&options_json).map_err(to_async)?;
    let cancel = signal.map(|s| s.token.clone()).unwrap_or_default();
    Ok(to_json(
      &self.inner.write_json(&options, &cancel).await.map_err(to_async)?,
    ))
  }

  /// `kill(id)` with the id as JSON (any value; a malformed one is `command_session_id_invalid`).
  #[napi]
  pub async fn kill(&self, id_json: String) -> napi::Result<String> {
    let id = serde_json::from_str(&id_json).unwrap_or(Value::Null);
    Ok(to_json(&self.inner.kill_json(&id).await.map_err(to_async)?))
  }

  #[napi]
  pub async fn close(&self) {
    self.inner.close().await;
  }
}
