//! Where shell commands run and files are read and written: the `ExecutionBackend` seam of the
//! reference (`exec`, `readFile`, `writeFile`). `LocalBackend` is this host: a command runs
//! under a launcher ([`crate::launch`]) with stdin closed and exactly the given environment;
//! everything it started (daemons that `setsid` or double-fork included) is killed on timeout,
//! abort, `close()` and when its shell exits; at most `max_output_bytes` of stdout+stderr are
//! kept while both pipes are drained to EOF. Other backends (HTTP, a user's JS object) implement
//! the same trait in the binding.

use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::launch::{self, Contained, Lifetime};
use crate::limits::{
  EXEC_MAX_OUTPUT_BYTES, EXEC_MAX_TIMEOUT_MS, LAUNCHER_EXIT_GRACE, LOCAL_READ_FILE_MAX_BYTES,
  PIPE_DRAIN_AFTER_EXIT, READ_CHUNK_BYTES,
};

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

#[derive(Debug, Clone)]
pub struct ExecRequest {
  pub command: String,
  pub args: Vec<String>,
  pub cwd: PathBuf,
  /// Exactly the environment the process sees (nothing is inherited).
  pub env: Vec<(String, String)>,
  pub timeout: Duration,
  /// One budget shared by stdout and stderr.
  pub max_output_bytes: usize,
  pub cancel: CancellationToken,
}

impl ExecRequest {
  /// Checks what a caller outside Rust sent (a JS `exec` call, an exec-server request): every
  /// problem is `cave_execution_backend_exec_request_invalid:<field>`.
  pub fn validate(&self) -> Result<(), ToolError> {
    let bad = |field: &str| {
      Err(ToolError::coded(format!(
        "cave_execution_backend_exec_request_invalid:{field}"
      )))
    };
    if self.command.is_empty() || self.command.contains('\0') {
      return bad("command");
    }
    if self.args.iter().any(|a| a.contains('\0')) {
      return bad("args");
    }
    let cwd = self.cwd.as_os_str().as_encoded_bytes();
    if cwd.is_empty() || cwd.contains(&0) {
      return bad("cwd");
    }
    if self
      .env
      .iter()
      .any(|(k, v)| k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0'))
    {
      return bad("env");
    }
    if self.timeout > Duration::from_millis(EXEC_MAX_TIMEOUT_MS) {
      return bad("timeoutMs");
    }
    if self.max_output_bytes > EXEC_MAX_OUTPUT_BYTES {
      return bad("maxOutputBytes");
    }
    Ok(())
  }
}

/// `timeoutMs` as sent by JS or JSON: a finite number from 0 to [`EXEC_MAX_TIMEOUT_MS`].
pub fn timeout_from_ms(ms: f64) -> Result<Duration, ToolError> {
  if !ms.is_finite() || ms < 0.0 || ms > EXEC_MAX_TIMEOUT_MS as f64 {
    return Err(ToolError::coded(
      "cave_execution_backend_exec_request_invalid:timeoutMs",
    ));
  }
  Ok(Duration::from_millis(ms as u64))
}

/// `maxOutputBytes` as sent by JS or JSON: an integer from 0 to [`EXEC_MAX_OUTPUT_BYTES`].
pub fn max_output_from(n: f64) -> Result<usize, ToolError> {
  if !n.is_finite() || n < 0.0 || n.fract() != 0.0 || n > EXEC_MAX_OUTPUT_BYTES as f64 {
    return Err(ToolError::coded(
      "cave_execution_backend_exec_request_invalid:maxOutputBytes",
    ));
  }
  Ok(n as usize)
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecResult {
  pub stdout: Vec<u8>,
  pub stderr: Vec<u8>,
  /// Exit code; `None` when killed by a signal or timed out.
  pub code: Option<i32>,
  pub timed_out: bool,
  /// Output went over `max_output_bytes`; the rest was read and dropped.
  pub truncated: bool,
  pub start_failed: bool,
  /// The request's cancellation token fired and the process group was killed.
  pub aborted: bool,
}

impl ExecResult {
  /// Holds a result another backend produced to the request's budget: stdout is cut to
  /// `max` bytes and stderr to what is left (`truncated` when anything was cut), as the
  /// reference's HTTP client does. A backend written in JS cannot make Rust keep more.
  pub fn enforce_budget(&mut self, max: usize) {
    if self.stdout.len() > max {
      self.stdout.truncate(max);
      self.truncated = true;
    }
    let rest = max - self.stdout.len();
    if self.stderr.len() > rest {
      self.stderr.truncate(rest);
      self.truncated = true;
    }
  }
}

/// Where the shell tools run. `is_local` is the reference's local marker: only this host's
/// backend has it, and only then do the tools use the in-process paths (containment through
/// `openat2`, the in-process grep, streamed reads); every other backend gets `exec`,
/// `read_file` and `write_file` calls with lexically contained absolute paths.
pub trait ExecutionBackend: Send + Sync {
  /// `"local"` for this host; other backends name themselves.
  fn id(&self) -> &str;
  fn is_local(&self) -> bool {
    false
  }
  /// Runs one command. `Err` is a backend failure (an HTTP status, a throwing JS backend); a
  /// command that cannot start is `Ok` with `start_failed` and code 127.
  fn exec(&self, request: ExecRequest) -> BoxFuture<Result<ExecResult, ToolError>>;
  /// Reads a file, at most `max_bytes` of it. Errors carry `ENOENT`/`EISDIR` codes.
  fn read_file(&self, path: String, max_bytes: Option<u64>) -> BoxFuture<Result<Vec<u8>, ToolError>>;
  /// Creates or replaces a file.
  fn write_file(&self, path: String, data: Vec<u8>) -> BoxFuture<Result<(), ToolError>>;
}

/// Runs commands and touches files on this host.
#[derive(Debug, Default)]
pub struct LocalBackend {
  /// Fires on `close()`: every running command is killed, later calls are refused.
  closed: CancellationToken,
}

impl LocalBackend {
  pub fn new() -> Self {
    Self::default()
  }

  /// Kills every command still running on this backend and refuses later calls.
  pub fn close(&self) {
    self.closed.cancel();
  }

  fn refuse_closed(&self) -> Result<(), ToolError> {
    if self.closed.is_cancelled() {
      return Err(ToolError::coded("cave_execution_backend_closed"));
    }
    Ok(())
  }
}

impl ExecutionBackend for LocalBackend {
  fn id(&self) -> &str {
    "local"
  }

  fn is_local(&self) -> bool {
    true
  }

  fn exec(&self, mut request: ExecRequest) -> BoxFuture<Result<ExecResult, ToolError>> {
    if let Err(e) = self.refuse_closed() {
      return Box::pin(async move { Err(e) });
    }
    // One token for the caller's abort and the backend's close.
    let linked = crate::launch::link(&request.cancel, &self.closed);
    request.cancel = linked.token.clone();
    Box::pin(async move { Ok(linked.watch(exec_local(request)).await) })
  }

  fn read_file(&self, path: String, max_bytes: Option<u64>) -> BoxFuture<Result<Vec<u8>, ToolError>> {
    let closed = self.refuse_closed();
    Box::pin(async move {
      closed?;
      blocking(move || read_host_file(Path::new(&path), max_bytes)).await
    })
  }

  fn write_file(&self, path: String, data: Vec<u8>) -> BoxFuture<Result<(), ToolError>> {
    let closed = self.refuse_closed();
    Box::pin(async move {
      closed?;
      blocking(move || write_host_file(Path::new(&path), &data)).await
    })
  }
}

/// Runs blocking file work off the async workers (the backend's and the shell tools').
pub(crate) async fn blocking<T: Send + 'static>(
  f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
  tokio::task::spawn_blocking(f)
    .await
    .unwrap_or_else(|e| Err(ToolError::new("cave_internal", e.to_string())))
}

/// `fs.readFile` of a host path, streamed and stopped at `max_bytes` (the reference reads the
/// whole file and cuts it). Without `max_bytes`, a file over 2 GiB is refused as Node does.
pub fn read_host_file(path: &Path, max_bytes: Option<u64>) -> Result<Vec<u8>, ToolError> {
  let file = std::fs::File::open(path).map_err(|e| ToolError::from_io(&e, "open", path))?;
  let meta = file
    .metadata()
    .map_err(|e| ToolError::from_io(&e, "fstat", path))?;
  if meta.is_dir() {
    return Err(ToolError::new(
      "EISDIR",
      "EISDIR: illegal operation on a directory, read",
    ));
  }
  read_capped(file, meta.len(), max_bytes, path)
}

/// Reads at most `max_bytes` (or the whole reader up to [`LOCAL_READ_FILE_MAX_BYTES`]).
pub fn read_capped(
  file: impl Read,
  size_hint: u64,
  max_bytes: Option<u64>,
  path: &Path,
) -> Result<Vec<u8>, ToolError> {
  let limit = match max_bytes {
    Some(max) => max,
    None => {
      if size_hint > LOCAL_READ_FILE_MAX_BYTES {
        return Err(file_too_large(size_hint));
      }
      LOCAL_READ_FILE_MAX_BYTES + 1
    }
  };
  let mut out = Vec::with_capacity(size_hint.min(limit).min(64 << 20) as usize);
  file
    .take(limit)
    .read_to_end(&mut out)
    .map_err(|e| match e.raw_os_error() {
      Some(libc::EISDIR) => ToolError::new("EISDIR", "EISDIR: illegal operation on a directory, read"),
      _ => ToolError::from_io(&e, "read", path),
    })?;
  if max_bytes.is_none() && out.len() as u64 > LOCAL_READ_FILE_MAX_BYTES {
    return Err(file_too_large(out.len() as u64));
  }
  Ok(out)
}

fn file_too_large(size: u64) -> ToolError {
  ToolError::new(
    "ERR_FS_FILE_TOO_LARGE",
    format!("File size ({size}) is greater than 2 GiB"),
  )
}

/// `fs.writeFile` of a host path (flag `w`: create or truncate).
pub fn write_host_file(path: &Path, data: &[u8]) -> Result<(), ToolError> {
  use std::io::Write;
  let mut file = std::fs::OpenOptions::new()
    .write(true)
    .create(true)
    .truncate(true)
    .open(path)
    .map_err(|e| ToolError::from_io(&e, "open", path))?;
  file
    .write_all(data)
    .map_err(|e| ToolError::from_io(&e, "write", path))
}

/// Receives the bytes drained from a child's stdout and stderr. One sink serves both streams
/// (behind one mutex), so a sink may share a budget between them.
pub trait OutputSink: Send + 'static {
  fn push(&mut self, is_stdout: bool, bytes: &[u8]);
}

/// `LocalBackend`'s capture: the head of stdout+stderr under one shared byte budget.
#[derive(Default)]
struct Capture {
  stdout: Vec<u8>,
  stderr: Vec<u8>,
  used: usize,
  limit: usize,
  truncated: bool,
}

impl OutputSink for Capture {
  fn push(&mut self, is_stdout: bool, bytes: &[u8]) {
    let n = bytes.len();
    let room = self.limit.saturating_sub(self.used);
    let take = room.min(n);
    if take < n {
      self.truncated = true;
    }
    if take > 0 {
      self.used += take;
      let target = if is_stdout {
        &mut self.stdout
      } else {
        &mut self.stderr
      };
      target.extend_from_slice(&bytes[..take]);
    }
  }
}

async fn drain<R: AsyncRead + Unpin, S: OutputSink>(mut pipe: R, sink: Arc<Mutex<S>>, is_stdout: bool) {
  let mut buf = vec![0u8; READ_CHUNK_BYTES];
  loop {
    let n = match pipe.read(&mut buf).await {
      Ok(0) | Err(_) => return,
      Ok(n) => n,
    };
    sink
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .push(is_stdout, &buf[..n]);
  }
}

/// The backstop when a launcher does not exit after being told to kill: its process group.
fn kill_group(pid: Option<u32>) {
  if let Some(pid) = pid {
    // SAFETY: plain syscall; a negative pid addresses the process group the launcher leads.
    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
  }
}

async fn exec_local(req: ExecRequest) -> ExecResult {
  let capture = Arc::new(Mutex::new(Capture {
    limit: req.max_output_bytes,
    ..Default::default()
  }));
  let run = run_local(&req, capture.clone()).await;
  let c = std::mem::take(&mut *capture.lock().unwrap_or_else(|e| e.into_inner()));
  if let Some(err) = run.spawn_error {
    return ExecResult {
      code: Some(127),
      start_failed: true,
      stderr: err.into_bytes(),
      ..Default::default()
    };
  }
  ExecResult {
    stdout: c.stdout,
    stderr: c.stderr,
    code: run.code,
    timed_out: run.timed_out,
    truncated: c.truncated,
    start_failed: false,
    aborted: run.aborted,
  }
}

/// How a local process ended (its output went to the sink).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalRun {
  /// Exit code; `None` when killed by a signal, timed out or aborted.
  pub code: Option<i32>,
  /// The terminating signal, when the process died of one (before any timeout or abort).
  pub signal: Option<i32>,
  pub timed_out: bool,
  pub aborted: bool,
  /// The spawn failed with this error; nothing ran.
  pub spawn_error: Option<String>,
}

/// Runs `req` on this host as `LocalBackend` does and feeds every output byte to `sink`: a
/// launcher ([`crate::launch`]) runs the program with stdin closed and exactly `req.env`, and on
/// timeout, cancellation or the shell's exit kills everything the command started (daemons that
/// `setsid` or double-fork included). Both pipes are drained to EOF: once the launcher reports
/// that none of the command's processes is left, nothing else can hold them, so there is no
/// deadline (no output is lost however loaded the machine); only when it cannot say so (it was
/// killed from outside) does a short grace period apply.
/// `req.max_output_bytes` is not used here: bounding memory is the sink's job.
pub async fn run_local<S: OutputSink>(req: &ExecRequest, sink: Arc<Mutex<S>>) -> LocalRun {
  if req.cancel.is_cancelled() {
    // Aborted before it started: nothing runs.
    return LocalRun {
      aborted: true,
      ..Default::default()
    };
  }
  let stdio = [Stdio::null(), Stdio::piped(), Stdio::piped()];
  let (mut child, handle) = match spawn_contained(req, Lifetime::Call, stdio) {
    Ok(pair) => pair,
    Err(err) => {
      return LocalRun {
        // Node's wording (`spawn /bin/sh ENOENT`), which the reference passes on as stderr.
        spawn_error: Some(format!(
          "spawn {} {}",
          req.command,
          crate::error::errno_name(&err)
        )),
        ..Default::default()
      };
    }
  };
  let pid = child.id();
  let mut readers = Vec::new();
  if let Some(out) = child.stdout.take() {
    readers.push(tokio::spawn(drain(out, sink.clone(), true)));
  }
  if let Some(err) = child.stderr.take() {
    readers.push(tokio::spawn(drain(err, sink.clone(), false)));
  }

  let mut timed_out = false;
  let mut aborted = false;
  let status = tokio::select! {
    status = child.wait() => status.ok(),
    _ = tokio::time::sleep(req.timeout) => { timed_out = true; None }
    _ = req.cancel.cancelled() => { aborted = true; None }
  };
  if status.is_none() {
    handle.kill();
    // The launcher sweeps and exits at once; one stopped or stuck gets its group killed.
    if tokio::time::timeout(LAUNCHER_EXIT_GRACE, child.wait()).await.is_err() {
      kill_group(pid);
      let _ = child.wait().await;
    }
  }
  let drain_all = futures_join(readers);
  if handle.swept() {
    drain_all.0.await;
  } else if tokio::time::timeout(PIPE_DRAIN_AFTER_EXIT, drain_all.0)
    .await
    .is_err()
  {
    for handle in drain_all.1 {
      handle.abort();
    }
  }
  let code = if timed_out || aborted {
    None
  } else {
    status.and_then(|s| s.code())
  };
  let signal = if timed_out || aborted {
    None
  } else {
    status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s))
  };
  LocalRun {
    code,
    signal,
    timed_out,
    aborted,
    spawn_error: None,
  }
}

/// Spawns `req` contained by a launcher with the given lifetime and stdin/stdout/stderr (only
/// `command`, `args`, `cwd` and `env` are read): the one way
/// knap starts a local command (`bash`, the AI SDK sandbox, command sessions). Keep the returned
/// handle while the command may run: dropping it or [`Contained::kill`] kills the command and
/// everything it started. A program that does not exist or cannot be executed is an `Err`, as a
/// failed exec would be.
pub fn spawn_contained(
  req: &ExecRequest,
  lifetime: Lifetime,
  [stdin, stdout, stderr]: [Stdio; 3],
) -> std::io::Result<(tokio::process::Child, Arc<Contained>)> {
  let program = resolve_program(&req.command, &req.env)?;
  let mut cmd = tokio::process::Command::new(&program);
  cmd
    .args(&req.args)
    .current_dir(&req.cwd)
    .env_clear()
    .stdin(stdin)
    .stdout(stdout)
    .stderr(stderr)
    .process_group(0);
  let pending = launch::contain(&mut cmd, &program, &req.args, &req.env, lifetime)?;
  let child = cmd.spawn()?;
  let pid = child.id().unwrap_or(0);
  Ok((child, pending.started(pid)))
}

/// The program `execvp` would run: a path with a `/` as given, else the first executable match
/// on the request's `PATH` (`/usr/bin:/bin` without one). The launcher execs it directly.
fn resolve_program(command: &str, env: &[(String, String)]) -> std::io::Result<PathBuf> {
  let executable = |p: &Path| {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
      return false;
    };
    // SAFETY: NUL-terminated path.
    p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
  };
  if command.contains('/') {
    let p = PathBuf::from(command);
    return if executable(&p) {
      Ok(p)
    } else if p.exists() {
      Err(std::io::Error::from_raw_os_error(libc::EACCES))
    } else {
      Err(std::io::Error::from_raw_os_error(libc::ENOENT))
    };
  }
  let path = env
    .iter()
    .rev()
    .find(|(k, _)| k == "PATH")
    .map(|(_, v)| v.as_str())
    .unwrap_or("/usr/bin:/bin");
  path
    .split(':')
    .map(|dir| Path::new(if dir.is_empty() { "." } else { dir }).join(command))
    .find(|p| executable(p))
    .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))
}

/// Awaits every reader; returns the join future and abort handles for the ones still running.
fn futures_join(
  handles: Vec<tokio::task::JoinHandle<()>>,
) -> (impl Future<Output = ()>, Vec<tokio::task::AbortHandle>) {
  let aborts = handles.iter().map(|h| h.abort_handle()).collect();
  let fut = async move {
    for h in handles {
      let _ = h.await;
    }
  };
  (fut, aborts)
}

#[cfg(test)]
pub(crate) mod tests_support {
  use std::time::Duration;

/// True once `pid` no longer runs (absent or a zombie awaiting its reaper); polls up to 5 s.
pub fn gone_eventually(pid: i32) -> bool {
  for _ in 0..100 {
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    match state {
      None => return true,
      Some(s) if s.contains(") Z") => return true,
      Some(_) => std::thread::sleep(Duration::from_millis(50)),
    }
  }
  false
}

}

#[cfg(test)]
mod tests {
  use super::*;

  async fn local(req: ExecRequest) -> ExecResult {
    LocalBackend::new().exec(req).await.unwrap()
  }

  fn sh(command: &str, timeout_ms: u64, max: usize) -> ExecRequest {
    ExecRequest {
      command: "/bin/sh".into(),
      args: vec!["-c".into(), command.into()],
      cwd: std::env::temp_dir(),
      env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
      timeout: Duration::from_millis(timeout_ms),
      max_output_bytes: max,
      cancel: CancellationToken::new(),
    }
  }

  use super::tests_support::gone_eventually;

  #[tokio::test]
  async fn exit_code_and_streams() {
    let r = local(sh("printf out; printf err >&2; exit 3", 5_000, 1024)).await;
    assert_eq!(r.code, Some(3));
    assert_eq!(r.stdout, b"out");
    assert_eq!(r.stderr, b"err");
    assert!(!r.truncated);
  }

  #[tokio::test]
  async fn shared_budget_truncates() {
    let r = local(sh("printf 'out\\n'; exit 3", 5_000, 4)).await;
    assert_eq!(r.code, Some(3));
    assert!(!r.truncated);
    let r = local(sh("printf 'outx\\n'; exit 3", 5_000, 4)).await;
    assert!(r.truncated);
    assert_eq!(r.stdout, b"outx");
  }

  #[tokio::test]
  async fn drains_huge_output_with_bounded_memory() {
    let r = local(sh("head -c 50000000 /dev/zero", 30_000, 1000)).await;
    assert_eq!(
      r.code,
      Some(0),
      "the writer finished because the pipe was drained"
    );
    assert!(r.truncated);
    assert_eq!(r.stdout.len(), 1000);
  }

  #[tokio::test]
  async fn timeout_kills_the_group() {
    let marker = format!("knap-core-timeout-{}", std::process::id());
    let cmd = format!("sleep 30 & echo $! > /tmp/{marker}.pid; wait");
    let r = local(sh(&cmd, 300, 1024)).await;
    assert!(r.timed_out);
    assert_eq!(r.code, None);
    let pid: i32 = std::fs::read_to_string(format!("/tmp/{marker}.pid"))
      .unwrap()
      .trim()
      .parse()
      .unwrap();
    let _ = std::fs::remove_file(format!("/tmp/{marker}.pid"));
    assert!(
      gone_eventually(pid),
      "background child {pid} survived the timeout"
    );
  }

  #[tokio::test]
  async fn background_child_holding_pipe_does_not_hang() {
    // The background sleep keeps stdout open for 10 minutes; a hang would trip the outer guard.
    let req = sh("sleep 600 & echo $!", 10_000, 1024);
    let r = tokio::time::timeout(Duration::from_secs(300), local(req))
      .await
      .expect("exec hung");
    assert_eq!(r.code, Some(0));
    let pid: i32 = String::from_utf8_lossy(&r.stdout).trim().parse().unwrap();
    // SAFETY: cleanup of the background child this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
  }

  #[tokio::test]
  async fn cancellation_kills() {
    let req = sh("sleep 30", 60_000, 1024);
    let token = req.cancel.clone();
    let h = tokio::spawn(local(req));
    tokio::time::sleep(Duration::from_millis(100)).await;
    token.cancel();
    let r = h.await.unwrap();
    assert!(r.aborted);
    assert_eq!(r.code, None);
  }

  #[tokio::test]
  async fn spawn_failure_is_127() {
    let mut req = sh("", 1000, 10);
    req.command = "/nonexistent/shell".into();
    let r = local(req).await;
    assert_eq!(r.code, Some(127));
    assert!(r.start_failed);
  }
}
