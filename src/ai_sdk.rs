//! `NativeSandbox`: the binding of `knap_core::sandbox::LocalSandbox`, the engine behind
//! `knap/ai-sdk`'s `createLocalSandbox` (bashkit's `Sandbox` methods). The tools over it are in
//! `agent_tools.rs`. Every method runs off the JS thread. No tool logic lives here.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use knap_core::progress::{Progress, ProgressChunk, Stream};
use knap_core::sandbox::{ExecOptions, LocalSandbox};
use knap_core::ToolError;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

use crate::{async_error, coded_error, CancelToken, ErrorCode};

type Result<T> = std::result::Result<T, napi::Error<ErrorCode>>;
/// Async methods reject through `async_error` (`knap:{"code":…,"message":…}`).
fn to_async<T>(r: Result<T>) -> napi::Result<T> {
  r.map_err(|e| async_error(&e.status.0, &e.reason))
}

#[napi(object)]
pub struct BindingSandboxOptions {
  /// The working directory (`workingDirectory` / bashkit's `cwd`); created if missing.
  pub workspace: String,
  /// Variables added to the allow-listed environment commands see.
  pub env: Option<HashMap<String, String>>,
}

#[napi(object)]
pub struct BindingExecResult {
  pub stdout: String,
  pub stderr: String,
  pub exit_code: i32,
  pub duration_ms: f64,
  pub interrupted: bool,
  pub timed_out: bool,
  pub aborted: bool,
  /// A stream went over `maxOutputLength` and was middle-truncated.
  pub truncated: bool,
}

/// One chunk of a running command's output (`knap_core::progress`).
#[napi(object)]
pub struct BindingProgressChunk {
  /// `"stdout"` or `"stderr"`.
  pub stream: String,
  pub chunk: String,
  /// Bytes of this stream dropped just before this chunk (the consumer fell behind).
  pub skipped: f64,
}

impl From<ProgressChunk> for BindingProgressChunk {
  fn from(c: ProgressChunk) -> Self {
    Self {
      stream: c.stream.as_str().into(),
      chunk: c.chunk,
      skipped: c.skipped as f64,
    }
  }
}

/// The JS listener of a command's output. The JS side wraps the user's callback so it returns
/// `undefined` and never throws.
pub type ProgressFn =
  ThreadsafeFunction<BindingProgressChunk, (), BindingProgressChunk, Status, false, true>;

/// Runs `work` with a progress buffer when there is a listener, pumping its chunks to the
/// listener one at a time (each call waits for the JS callback, so a slow listener fills the
/// buffer instead of the JS queue). `work` must close the buffer on every path (the core's
/// `exec`/`bash` do); the answer comes back once every chunk has been delivered.
pub(crate) async fn with_progress<T, F: Future<Output = T>>(
  listener: Option<ProgressFn>,
  work: impl FnOnce(Option<Arc<Progress>>) -> F,
) -> T {
  let Some(listener) = listener else {
    return work(None).await;
  };
  let progress = Progress::with_default_capacity();
  let pump = async {
    while let Some(c) = progress.next().await {
      // A listener that cannot be reached (the environment is going away) ends nothing else.
      let _ = listener.call_async(c.into()).await;
    }
  };
  let (out, ()) = tokio::join!(work(Some(progress.clone())), pump);
  out
}

/// Progress buffers of JS sandboxes' running `exec` calls, by the id their `onOutput` pushes
/// to (`pushSandboxOutput`).
static SANDBOX_OUTPUT: Mutex<Option<HashMap<u32, Arc<Progress>>>> = Mutex::new(None);
static SANDBOX_OUTPUT_IDS: AtomicU32 = AtomicU32::new(1);

/// Registers a buffer for one JS `exec` call; the guard unregisters it.
pub(crate) struct SandboxOutput(pub u32);

impl SandboxOutput {
  pub(crate) fn register(p: Arc<Progress>) -> Self {
    let id = SANDBOX_OUTPUT_IDS.fetch_add(1, Ordering::Relaxed);
    let mut map = SANDBOX_OUTPUT.lock().unwrap_or_else(|e| e.into_inner());
    map.get_or_insert_with(HashMap::new).insert(id, p);
    Self(id)
  }
}

impl Drop for SandboxOutput {
  fn drop(&mut self) {
    let mut map = SANDBOX_OUTPUT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = map.as_mut() {
      m.remove(&self.0);
    }
  }
}

/// A JS sandbox's `onOutput(chunk, stream)` for the Bash call registered as `id` (a late call,
/// after `exec` returned, is ignored).
#[napi]
pub fn push_sandbox_output(id: u32, stream: String, chunk: String) {
  let p = {
    let map = SANDBOX_OUTPUT.lock().unwrap_or_else(|e| e.into_inner());
    map.as_ref().and_then(|m| m.get(&id).cloned())
  };
  if let Some(p) = p {
    let s = if stream == "stderr" { Stream::Stderr } else { Stream::Stdout };
    p.push(s, chunk.as_bytes());
  }
}

#[napi(object)]
pub struct BindingStat {
  pub exists: bool,
  pub is_directory: bool,
  pub is_file: bool,
  pub size: f64,
}

fn coded(code: &str, message: impl Into<String>) -> napi::Error<ErrorCode> {
  napi::Error::new(ErrorCode(code.to_string()), message.into())
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
  tokio::task::spawn_blocking(f)
    .await
    .unwrap_or_else(|e| Err(coded("cave_internal", e.to_string())))
}

fn core<T>(r: std::result::Result<T, ToolError>) -> Result<T> {
  r.map_err(coded_error)
}

fn exec_option_invalid(name: &str, want: &str, got: f64) -> napi::Error {
  let got = if got.is_nan() {
    "NaN".to_string()
  } else if got.is_infinite() {
    (if got > 0.0 { "Infinity" } else { "-Infinity" }).to_string()
  } else {
    format!("{got}")
  };
  crate::async_error(
    "cave_sandbox_exec_option_invalid",
    &format!("cave_sandbox_exec_option_invalid: exec {name} must be {want}, received {got}"),
  )
}

fn non_negative(v: Option<f64>) -> Option<u64> {
  v.filter(|x| x.is_finite()).map(|x| x.max(0.0).floor() as u64)
}

#[napi]
pub struct NativeSandbox {
  inner: Arc<LocalSandbox>,
}

impl NativeSandbox {
  /// The core sandbox (for the tool set).
  pub(crate) fn core(&self) -> Arc<LocalSandbox> {
    self.inner.clone()
  }
}

#[napi]
impl NativeSandbox {
  #[napi(constructor)]
  pub fn new(options: BindingSandboxOptions) -> Result<Self> {
    let mut env = knap_core::tools::process_env(true);
    for (k, v) in options.env.unwrap_or_default() {
      env.retain(|(key, _)| key != &k);
      env.push((k, v));
    }
    let inner = core(LocalSandbox::create(Path::new(&options.workspace), env))?;
    Ok(Self {
      inner: Arc::new(inner),
    })
  }

  /// The canonical workspace directory.
  #[napi(getter)]
  pub fn root(&self) -> Result<String> {
    Ok(
      core(self.inner.workspace().root())?
        .path
        .to_string_lossy()
        .into_owned(),
    )
  }

  /// Kills every command still running (background runs included, with everything they
  /// started), removes the background log files, refuses later commands.
  #[napi]
  pub fn destroy(&self) {
    self.inner.destroy();
  }

  /// Runs `/bin/sh -c command`; each stream comes back through `middleTruncate` at
  /// `maxOutputLength` UTF-16 code units (only a head and a tail are ever held). `on_output`
  /// receives the output in chunks while it runs (`exec({ onOutput })`).
  #[napi]
  pub async fn exec(
    &self,
    command: String,
    timeout_ms: Option<f64>,
    cwd: Option<String>,
    max_output_length: Option<f64>,
    cancel: Option<&CancelToken>,
    #[napi(ts_arg_type = "((chunk: BindingProgressChunk) => void) | undefined | null")] on_output: Option<ProgressFn>,
  ) -> napi::Result<BindingExecResult> {
    let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
    // NaN, Infinity or a timeout of 0 or less would mean "no timeout" or "kill at once".
    if let Some(t) = timeout_ms.filter(|t| !(t.is_finite() && *t > 0.0)) {
      return Err(exec_option_invalid("timeout", "a positive number of milliseconds", t));
    }
    if let Some(m) = max_output_length.filter(|m| !(m.is_finite() && *m >= 0.0)) {
      return Err(exec_option_invalid("maxOutputLength", "a non-negative number of characters", m));
    }
    let timeout = timeout_ms
      .map(|t| Duration::from_millis(t.ceil() as u64))
      .unwrap_or(Duration::from_secs(24 * 3600));
    let max = non_negative(max_output_length)
      .unwrap_or(knap_core::limits::AI_EXEC_MAX_OUTPUT_LENGTH as u64)
      .min(1 << 30) as usize;
    let inner = self.inner.clone();
    let out = with_progress(on_output, |progress| async move {
      inner
        .exec(ExecOptions {
          command,
          cwd,
          timeout,
          max_output_units: max,
          cancel: token,
          progress,
        })
        .await
    })
    .await;
    let out = to_async(core(out))?;
    Ok(BindingExecResult {
      stdout: out.stdout,
      stderr: out.stderr,
      exit_code: out.exit_code,
      duration_ms: out.duration_ms as f64,
      interrupted: out.interrupted,
      timed_out: out.timed_out,
      aborted: out.aborted,
      truncated: out.truncated,
    })
  }

  /// `cancel` (the caller's AbortSignal) stops the read between 1 MiB pieces: `ABORT_ERR`.
  #[napi]
  pub async fn read_file(&self, path: String, cancel: Option<&CancelToken>) -> napi::Result<String> {
    let sb = self.inner.clone();
    let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
    to_async(blocking(move || core(sb.read_to_string(&path, &token))).await)
  }

  /// `cancel` stops the write between 1 MiB pieces (`ABORT_ERR`; the file is left as it was:
  /// the new content goes to a temporary that is then removed).
  #[napi]
  pub async fn write_file(&self, path: String, content: String, cancel: Option<&CancelToken>) -> napi::Result<()> {
    let sb = self.inner.clone();
    let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
    to_async(blocking(move || core(sb.write(&path, content.as_bytes(), &token))).await)
  }

  #[napi]
  pub async fn read_dir(&self, path: String) -> napi::Result<Vec<String>> {
    let sb = self.inner.clone();
    to_async(blocking(move || core(sb.read_dir(&path))).await)
  }

  #[napi]
  pub async fn stat(&self, path: String) -> napi::Result<BindingStat> {
    let sb = self.inner.clone();
    to_async(
      blocking(move || {
        let s = core(sb.stat(&path))?;
        Ok(BindingStat {
          exists: s.exists,
          is_directory: s.is_dir,
          is_file: s.is_file,
          size: s.size as f64,
        })
      })
      .await,
    )
  }

  #[napi]
  pub async fn delete_file(&self, path: String) -> napi::Result<()> {
    let sb = self.inner.clone();
    to_async(blocking(move || core(sb.delete(&path))).await)
  }

  #[napi]
  pub async fn rename(&self, from: String, to: String) -> napi::Result<()> {
    let sb = self.inner.clone();
    to_async(blocking(move || core(sb.rename(&from, &to))).await)
  }
}
