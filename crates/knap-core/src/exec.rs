//! Where shell commands run. `ExecutionBackend` is the seam (the reference's
//! `ExecutionBackend.exec`); `LocalBackend` runs `/bin/sh -c` on this host:
//! its own process group, stdin closed, the whole group killed on timeout or abort, at most
//! `max_output_bytes` of stdout+stderr kept while both pipes are drained to EOF, and a short
//! grace period after exit for pipes held open by background children.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::limits::{PIPE_DRAIN_AFTER_EXIT, READ_CHUNK_BYTES};

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

#[derive(Debug, Clone)]
pub struct ExecRequest {
  pub command: String,
  pub args: Vec<String>,
  pub cwd: PathBuf,
  pub env: Vec<(String, String)>,
  pub timeout: Duration,
  /// One budget shared by stdout and stderr.
  pub max_output_bytes: usize,
  pub cancel: CancellationToken,
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

pub trait ExecutionBackend: Send + Sync {
  /// `"local"` for this host; other backends name themselves.
  fn id(&self) -> &str;
  fn exec(&self, request: ExecRequest) -> BoxFuture<ExecResult>;
}

/// Runs commands on this host.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalBackend;

impl ExecutionBackend for LocalBackend {
  fn id(&self) -> &str {
    "local"
  }

  fn exec(&self, request: ExecRequest) -> BoxFuture<ExecResult> {
    Box::pin(exec_local(request))
  }
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

fn kill_group(pid: Option<u32>) {
  if let Some(pid) = pid {
    // SAFETY: plain syscall; a negative pid addresses the process group the child leads.
    unsafe {
      libc::kill(-(pid as i32), libc::SIGKILL);
    }
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

/// Runs `req` on this host as `LocalBackend` does (own process group, stdin closed, env
/// cleared to `req.env`, the group killed on timeout or cancellation, both pipes drained to
/// EOF with a short grace period after exit) and feeds every output byte to `sink`.
/// `req.max_output_bytes` is not used here: bounding memory is the sink's job.
pub async fn run_local<S: OutputSink>(req: &ExecRequest, sink: Arc<Mutex<S>>) -> LocalRun {
  let mut cmd = tokio::process::Command::new(&req.command);
  cmd
    .args(&req.args)
    .current_dir(&req.cwd)
    .env_clear()
    .envs(req.env.iter().map(|(k, v)| (k, v)))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
  let mut child = match cmd.spawn() {
    Ok(child) => child,
    Err(err) => {
      return LocalRun {
        spawn_error: Some(err.to_string()),
        ..Default::default()
      }
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
    kill_group(pid);
    let _ = child.wait().await;
  }
  // Background children may hold the pipes open after the shell exits: wait briefly, then stop.
  let drain_all = futures_join(readers);
  if tokio::time::timeout(PIPE_DRAIN_AFTER_EXIT, drain_all.0)
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
mod tests {
  use super::*;

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

  /// True once `pid` no longer runs (absent or a zombie awaiting its reaper); polls up to 5 s.
  pub(crate) fn gone_eventually(pid: i32) -> bool {
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

  #[tokio::test]
  async fn exit_code_and_streams() {
    let r = LocalBackend
      .exec(sh("printf out; printf err >&2; exit 3", 5_000, 1024))
      .await;
    assert_eq!(r.code, Some(3));
    assert_eq!(r.stdout, b"out");
    assert_eq!(r.stderr, b"err");
    assert!(!r.truncated);
  }

  #[tokio::test]
  async fn shared_budget_truncates() {
    let r = LocalBackend.exec(sh("printf 'out\\n'; exit 3", 5_000, 4)).await;
    assert_eq!(r.code, Some(3));
    assert!(!r.truncated);
    let r = LocalBackend.exec(sh("printf 'outx\\n'; exit 3", 5_000, 4)).await;
    assert!(r.truncated);
    assert_eq!(r.stdout, b"outx");
  }

  #[tokio::test]
  async fn drains_huge_output_with_bounded_memory() {
    let r = LocalBackend
      .exec(sh("head -c 50000000 /dev/zero", 30_000, 1000))
      .await;
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
    let r = LocalBackend.exec(sh(&cmd, 300, 1024)).await;
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
    let r = tokio::time::timeout(Duration::from_secs(300), LocalBackend.exec(req))
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
    let h = tokio::spawn(LocalBackend.exec(req));
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
    let r = LocalBackend.exec(req).await;
    assert_eq!(r.code, Some(127));
    assert!(r.start_failed);
  }
}
