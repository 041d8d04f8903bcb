//! `NativeExecutionBackend`: a core `ExecutionBackend` as a JS handle. Either this host's
//! backend (`knap_core::exec::LocalBackend`, what `localExecutionBackend()` wraps), or a JS
//! object with `exec`/`readFile`/`writeFile` (the HTTP client, a user's Docker backend) as the
//! core trait over typed weak threadsafe functions: Rust calls JS and awaits the returned
//! Promise without ever blocking the JS thread.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use indexmap::IndexMap;
use knap_core::exec::{
  max_output_from, timeout_from_ms, BoxFuture, ExecRequest, ExecResult, ExecutionBackend, LocalBackend,
};
use knap_core::limits::JS_BACKEND_ABORT_GRACE;
use knap_core::ToolError;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::{async_error, CancelToken};

/// An `ExecRequest` without its `signal` (cancellation crosses separately).
#[napi(object)]
pub struct BindingExecRequest {
  pub command: String,
  pub args: Vec<String>,
  pub cwd: String,
  pub env: IndexMap<String, String>,
  pub timeout_ms: f64,
  pub max_output_bytes: f64,
}

/// An `ExecResult`; `code` is `null` when the process died of a signal or was stopped.
#[napi(object)]
pub struct BindingBackendExecResult {
  pub stdout: String,
  pub stderr: String,
  pub code: Option<f64>,
  pub timed_out: bool,
  pub truncated: bool,
  pub start_failed: Option<bool>,
}

/// What Rust asks a JS backend's `exec`: `callId` names the call for `abort(callId)`.
#[napi(object)]
pub struct BindingJsExecCall {
  pub call_id: u32,
  pub request: BindingExecRequest,
}

#[napi(object)]
pub struct BindingJsReadCall {
  pub path: String,
  pub max_bytes: Option<f64>,
}

#[napi(object)]
pub struct BindingJsWriteCall {
  pub path: String,
  pub data: Buffer,
}

/// How a JS backend call settled. The JS side never rejects: a thrown error arrives as
/// `ok: false` with its `code` and `message`, so `ENOENT`/`EISDIR` keep their meaning in Rust.
#[napi(object)]
pub struct BindingBackendReply {
  pub ok: bool,
  pub code: Option<String>,
  pub message: Option<String>,
  pub exec: Option<BindingBackendExecResult>,
  pub data: Option<Buffer>,
}

#[napi]
pub type JsBackendExecFn =
  ThreadsafeFunction<BindingJsExecCall, Promise<BindingBackendReply>, BindingJsExecCall, Status, false, true>;
#[napi]
pub type JsBackendReadFn =
  ThreadsafeFunction<BindingJsReadCall, Promise<BindingBackendReply>, BindingJsReadCall, Status, false, true>;
#[napi]
pub type JsBackendWriteFn = ThreadsafeFunction<
  BindingJsWriteCall,
  Promise<BindingBackendReply>,
  BindingJsWriteCall,
  Status,
  false,
  true,
>;
/// `abort(callId)`: aborts the `AbortSignal` the JS `exec` call was given. Must not throw.
#[napi]
pub type JsBackendAbortFn = ThreadsafeFunction<u32, (), u32, Status, false, true>;

/// Calls `abort(callId)` when dropped before [`AbortOnDrop::settled`]: a caller that gives up on a
/// JS call (a timeout, a dropped future) stops it on the JS side too.
/// (The durable store's `JsHttpAbortFn` is the same type.)
pub struct AbortOnDrop(Option<Arc<JsBackendAbortFn>>, u32);

impl AbortOnDrop {
  pub fn new(abort: Arc<JsBackendAbortFn>, call_id: u32) -> Self {
    Self(Some(abort), call_id)
  }

  /// The call answered: nothing to abort.
  pub fn settled(&mut self) {
    self.0.take();
  }
}

impl Drop for AbortOnDrop {
  fn drop(&mut self) {
    if let Some(f) = self.0.take() {
      f.call(self.1, ThreadsafeFunctionCallMode::NonBlocking);
    }
  }
}

/// A JS object implementing `ExecutionBackend`.
struct JsBackend {
  id: String,
  exec: Arc<JsBackendExecFn>,
  read: Arc<JsBackendReadFn>,
  write: Arc<JsBackendWriteFn>,
  abort: Arc<JsBackendAbortFn>,
  next_call: AtomicU32,
}

fn bridge_error(e: napi::Error) -> ToolError {
  ToolError::new(
    "cave_execution_backend_call_failed",
    format!("cave_execution_backend_call_failed: {}", e.reason),
  )
}

fn reply_error(reply: &BindingBackendReply) -> ToolError {
  let message = reply.message.clone().unwrap_or_default();
  let code = reply.code.clone().unwrap_or_else(|| message.clone());
  ToolError::new(code, message)
}

impl JsBackend {
  fn settle(
    reply: std::result::Result<BindingBackendReply, napi::Error>,
  ) -> std::result::Result<BindingBackendReply, ToolError> {
    let reply = reply.map_err(bridge_error)?;
    if !reply.ok {
      return Err(reply_error(&reply));
    }
    Ok(reply)
  }
}

fn to_binding_request(r: &ExecRequest) -> BindingExecRequest {
  BindingExecRequest {
    command: r.command.clone(),
    args: r.args.clone(),
    cwd: r.cwd.to_string_lossy().into_owned(),
    env: r.env.iter().cloned().collect(),
    timeout_ms: r.timeout.as_millis() as f64,
    max_output_bytes: r.max_output_bytes as f64,
  }
}

/// A JS exec result as a core one, held to the request's budget.
fn from_binding_result(
  r: BindingBackendExecResult,
  max: usize,
) -> std::result::Result<ExecResult, ToolError> {
  let code = match r.code {
    None => None,
    Some(c) if c.is_finite() && c.fract() == 0.0 && c.abs() <= i32::MAX as f64 => Some(c as i32),
    Some(_) => return Err(ToolError::coded("cave_execution_backend_exec_result_invalid")),
  };
  let mut out = ExecResult {
    stdout: r.stdout.into_bytes(),
    stderr: r.stderr.into_bytes(),
    code,
    timed_out: r.timed_out,
    truncated: r.truncated,
    start_failed: r.start_failed == Some(true),
    aborted: false,
  };
  out.enforce_budget(max);
  Ok(out)
}

impl ExecutionBackend for JsBackend {
  fn id(&self) -> &str {
    &self.id
  }

  fn exec(&self, request: ExecRequest) -> BoxFuture<std::result::Result<ExecResult, ToolError>> {
    let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
    let exec = self.exec.clone();
    let abort = self.abort.clone();
    let max = request.max_output_bytes;
    let cancel = request.cancel.clone();
    let call = BindingJsExecCall {
      call_id,
      request: to_binding_request(&request),
    };
    Box::pin(async move {
      // Dropped before the reply (the caller gave up): the JS call is aborted too.
      let mut guard = AbortOnDrop::new(abort.clone(), call_id);
      let reply = async move {
        match exec.call_async_catch(call).await {
          Err(e) => Err(e),
          Ok(promise) => promise.await,
        }
      };
      tokio::pin!(reply);
      let settled = tokio::select! {
        r = &mut reply => r,
        _ = cancel.cancelled() => {
          guard.settled();
          abort.call(call_id, ThreadsafeFunctionCallMode::NonBlocking);
          // The JS side settles after its own clean-up (the HTTP client posts `/cancel`).
          match tokio::time::timeout(JS_BACKEND_ABORT_GRACE, &mut reply).await {
            Ok(r) => r,
            Err(_) => return Ok(ExecResult { aborted: true, ..Default::default() }),
          }
        }
      };
      guard.settled();
      let reply = JsBackend::settle(settled)?;
      let result = reply
        .exec
        .ok_or_else(|| ToolError::coded("cave_execution_backend_exec_result_invalid"))?;
      let mut out = from_binding_result(result, max)?;
      out.aborted = cancel.is_cancelled();
      Ok(out)
    })
  }

  fn read_file(
    &self,
    path: String,
    max_bytes: Option<u64>,
  ) -> BoxFuture<std::result::Result<Vec<u8>, ToolError>> {
    let read = self.read.clone();
    Box::pin(async move {
      let call = BindingJsReadCall {
        path,
        max_bytes: max_bytes.map(|m| m as f64),
      };
      let reply = match read.call_async_catch(call).await {
        Err(e) => Err(e),
        Ok(promise) => promise.await,
      };
      let reply = JsBackend::settle(reply)?;
      let mut data = reply
        .data
        .map(|b| b.to_vec())
        .ok_or_else(|| ToolError::coded("cave_execution_backend_read_result_invalid"))?;
      if let Some(max) = max_bytes {
        data.truncate(max.min(usize::MAX as u64) as usize);
      }
      Ok(data)
    })
  }

  fn write_file(&self, path: String, data: Vec<u8>) -> BoxFuture<std::result::Result<(), ToolError>> {
    let write = self.write.clone();
    Box::pin(async move {
      let call = BindingJsWriteCall {
        path,
        data: data.into(),
      };
      let reply = match write.call_async_catch(call).await {
        Err(e) => Err(e),
        Ok(promise) => promise.await,
      };
      JsBackend::settle(reply).map(|_| ())
    })
  }
}

/// A core execution backend, for `localExecutionBackend()` and for `shellTools()`.
#[napi]
pub struct NativeExecutionBackend {
  pub(crate) inner: Arc<dyn ExecutionBackend>,
  local: Option<Arc<LocalBackend>>,
}

fn to_async(e: ToolError) -> napi::Error {
  async_error(&e.code, &e.message)
}

#[napi]
impl NativeExecutionBackend {
  /// This host's backend.
  #[napi(constructor)]
  pub fn new() -> Self {
    let local = Arc::new(LocalBackend::new());
    Self {
      inner: local.clone(),
      local: Some(local),
    }
  }

  /// A JS object's `exec`/`readFile`/`writeFile` as a backend the Rust tools call.
  #[napi(factory)]
  pub fn from_js(
    id: String,
    exec: Arc<JsBackendExecFn>,
    read_file: Arc<JsBackendReadFn>,
    write_file: Arc<JsBackendWriteFn>,
    abort: Arc<JsBackendAbortFn>,
  ) -> Self {
    Self {
      inner: Arc::new(JsBackend {
        id,
        exec,
        read: read_file,
        write: write_file,
        abort,
        next_call: AtomicU32::new(1),
      }),
      local: None,
    }
  }

  #[napi(getter)]
  pub fn id(&self) -> String {
    self.inner.id().to_string()
  }

  #[napi(getter)]
  pub fn local(&self) -> bool {
    self.inner.is_local()
  }

  /// `exec(request)`: the reference's result shape, built in JS from this.
  #[napi]
  pub async fn exec(
    &self,
    request: BindingExecRequest,
    cancel: Option<&CancelToken>,
  ) -> napi::Result<BindingBackendExecResult> {
    let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
    let req = ExecRequest {
      command: request.command,
      args: request.args,
      cwd: request.cwd.into(),
      env: request.env.into_iter().collect(),
      timeout: timeout_from_ms(request.timeout_ms).map_err(to_async)?,
      max_output_bytes: max_output_from(request.max_output_bytes).map_err(to_async)?,
      cancel: token,
    };
    req.validate().map_err(to_async)?;
    let r = self.inner.exec(req).await.map_err(to_async)?;
    Ok(BindingBackendExecResult {
      stdout: String::from_utf8_lossy(&r.stdout).into_owned(),
      stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
      code: r.code.map(f64::from),
      timed_out: r.timed_out,
      truncated: r.truncated,
      start_failed: r.start_failed.then_some(true),
    })
  }

  #[napi]
  pub async fn read_file(&self, path: String, max_bytes: Option<f64>) -> napi::Result<Buffer> {
    let max = match max_bytes {
      None => None,
      Some(m) if m.is_finite() && m >= 0.0 && m.fract() == 0.0 => Some(m as u64),
      Some(_) => {
        return Err(to_async(ToolError::coded(
          "cave_execution_backend_read_max_bytes_invalid",
        )))
      }
    };
    let data = self.inner.read_file(path, max).await.map_err(to_async)?;
    Ok(data.into())
  }

  #[napi]
  pub async fn write_file(&self, path: String, data: Buffer) -> napi::Result<()> {
    let bytes = data.to_vec();
    self.inner.write_file(path, bytes).await.map_err(to_async)
  }

  /// Kills every command still running on this (local) backend; later calls are refused.
  #[napi]
  pub fn close(&self) {
    if let Some(local) = &self.local {
      local.close();
    }
  }
}

impl Default for NativeExecutionBackend {
  fn default() -> Self {
    Self::new()
  }
}

/// `httpExecutionBackend`'s response caps and `/cancel` timeout (knap-core's limits).
#[napi]
pub const HTTP_BACKEND_RESPONSE_MAX_BYTES: u32 = knap_core::limits::HTTP_BACKEND_RESPONSE_MAX_BYTES as u32;
#[napi]
pub const HTTP_BACKEND_RESPONSE_SLACK_BYTES: u32 =
  knap_core::limits::HTTP_BACKEND_RESPONSE_SLACK_BYTES as u32;
#[napi]
pub const HTTP_BACKEND_CANCEL_TIMEOUT_MS: u32 = knap_core::limits::HTTP_BACKEND_CANCEL_TIMEOUT_MS as u32;
