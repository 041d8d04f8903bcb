//! The engine behind `knap/ai-sdk`'s local sandbox (bashkit's `Sandbox` interface): file
//! operations confined to one workspace through [`Workspace`], shell commands through
//! [`crate::exec::run_local`] with a head+tail capture, and a streaming reader for the `Read`
//! tool that keeps only the lines it returns (a 100 MB file never sits in memory).
//!
//! Text lengths are counted the way JavaScript counts them (UTF-16 code units, see
//! [`crate::truncate`]), because the truncation rules being matched are JS rules.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::exec::{run_local, spawn_contained, ExecRequest, OutputSink};
use crate::launch::{Lifetime, Scope};
use crate::lines::{scan, LineSink};
use crate::progress::{Progress, Stream};
use crate::truncate::{cut_line, middle_truncate, utf16_prefix, utf16_units_of_byte, HeadTail};
use crate::workspace::{read_cancellable, replace_atomically, Kind, Resolved, Workspace};

struct StreamPair {
  stdout: HeadTail,
  stderr: HeadTail,
  /// Also hands every chunk to a live consumer (`onProgress`, `exec({ onOutput })`).
  progress: Option<Arc<Progress>>,
}

impl OutputSink for StreamPair {
  fn push(&mut self, is_stdout: bool, bytes: &[u8]) {
    if let Some(p) = &self.progress {
      p.push(if is_stdout { Stream::Stdout } else { Stream::Stderr }, bytes);
    }
    if is_stdout {
      self.stdout.push(bytes)
    } else {
      self.stderr.push(bytes)
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The sandbox

/// Exit code reported for a command stopped by its timeout (as `timeout(1)` and bashkit's
/// cloud sandboxes report it).
pub const TIMEOUT_EXIT_CODE: i32 = 124;

pub struct ExecOptions {
  pub command: String,
  /// Working directory inside the workspace (`None`: the workspace root).
  pub cwd: Option<String>,
  pub timeout: Duration,
  /// Each stream is rendered through `middleTruncate` at this many UTF-16 code units.
  pub max_output_units: usize,
  pub cancel: CancellationToken,
  /// Receives the output while the command runs; closed when it has ended.
  pub progress: Option<Arc<Progress>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
  pub stdout: String,
  pub stderr: String,
  pub exit_code: i32,
  pub duration_ms: u64,
  /// Stopped by the timeout or by cancellation.
  pub interrupted: bool,
  pub timed_out: bool,
  pub aborted: bool,
  /// A stream was longer than `max_output_units` and was middle-truncated.
  pub truncated: bool,
}

/// Directory listing, stat and read results for the `Read` tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
  pub exists: bool,
  pub is_dir: bool,
  pub is_file: bool,
  pub size: u64,
}

pub struct ReadOptions {
  /// 1-based first line (`None`/0: the first line).
  pub offset: Option<u64>,
  pub limit: Option<u64>,
  /// Without a `limit`, a file with more lines than this is refused.
  pub max_lines_without_limit: u64,
  pub max_line_length: usize,
  pub max_output_length: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ReadOutcome {
  Missing,
  Directory(Vec<String>),
  /// More than `max_lines_without_limit` lines and no `limit`.
  TooLarge {
    total_lines: u64,
  },
  /// A NUL byte among the first 1000 characters (the caller decides by extension).
  Text(ReadText),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReadText {
  pub first_line: u64,
  pub lines: Vec<String>,
  pub content: String,
  pub total_lines: u64,
  pub nul_in_head: bool,
  pub size: u64,
}

/// A workspace with bashkit's `Sandbox` operations.
pub struct LocalSandbox {
  workspace: Workspace,
  env: Vec<(String, String)>,
  /// Bash's `run_in_background` runs, kept (alive) until they end or `destroy`.
  background: Scope,
  /// Fired by `destroy`: running commands are killed, later ones refused.
  closed: CancellationToken,
  /// Log files of background runs, removed by `destroy`.
  logs: Mutex<Vec<PathBuf>>,
}

impl LocalSandbox {
  pub fn new(root: impl Into<PathBuf>, env: Vec<(String, String)>) -> Self {
    Self {
      workspace: Workspace::new(root),
      env,
      background: Scope::new(),
      closed: CancellationToken::new(),
      logs: Mutex::default(),
    }
  }

  fn refuse_closed(&self) -> Result<(), ToolError> {
    if self.closed.is_cancelled() {
      return Err(ToolError::coded("cave_sandbox_destroyed"));
    }
    Ok(())
  }

  /// `createLocalSandbox`: the directory is created if missing (bashkit's default `/tmp`), then
  /// opened as the workspace.
  pub fn create(dir: &Path, env: Vec<(String, String)>) -> Result<Self, ToolError> {
    let abs = if dir.is_absolute() {
      dir.to_path_buf()
    } else {
      std::env::current_dir()
        .unwrap_or_else(|_| PathBuf::from("/"))
        .join(dir)
    };
    std::fs::create_dir_all(&abs).map_err(|e| ToolError::from_io(&e, "mkdir", &abs))?;
    let sb = Self::new(abs, env);
    sb.workspace.root()?;
    Ok(sb)
  }

  /// Starts `/bin/sh -c command` in the background under a launcher ([`Lifetime::Background`]):
  /// stdin closed, stdout and stderr to `log` (created, 0600, never through a symlink). Returns
  /// the launcher's pid at once: `kill <pid>` (SIGTERM) stops the command and everything it
  /// started, as does [`LocalSandbox::destroy`]. Must be called inside a tokio runtime.
  pub fn spawn_background(&self, command: &str, log: &str) -> Result<u32, ToolError> {
    use std::os::unix::fs::OpenOptionsExt;
    self.refuse_closed()?;
    let root = self.workspace.root()?;
    let create = || {
      std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(log)
    };
    // A file of that name left by an earlier process (the name is pid and counter) is replaced;
    // one we may not remove (another user's, in a sticky /tmp) fails the start.
    let out = match create() {
      Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => std::fs::remove_file(log).and_then(|_| create()),
      other => other,
    }
    .map_err(|e| ToolError::from_io(&e, "open", Path::new(log)))?;
    let err = out
      .try_clone()
      .map_err(|e| ToolError::from_io(&e, "dup", Path::new(log)))?;
    self.logs.lock().unwrap_or_else(|e| e.into_inner()).push(PathBuf::from(log));
    let req = ExecRequest {
      command: "/bin/sh".into(),
      args: vec!["-c".into(), command.to_string()],
      cwd: root.path.clone(),
      env: self.env.clone(),
      timeout: Duration::MAX,
      max_output_bytes: 0,
      cancel: CancellationToken::new(),
    };
    let (mut child, handle) = spawn_contained(&req, Lifetime::Background, [std::process::Stdio::null(), out.into(), err.into()])
      .map_err(|e| ToolError::from_io(&e, "spawn", Path::new("/bin/sh")))?;
    self.background.adopt(&handle);
    let pid = handle.pid();
    // The scope keeps the handle (dropping it would kill) until the launcher ends.
    let scope = self.background.clone();
    tokio::spawn(async move {
      let _ = child.wait().await;
      scope.forget(&handle);
    });
    Ok(pid)
  }

  /// `sandbox.destroy()`: kills every command the sandbox still runs, background runs included,
  /// with everything they started; removes the background log files; refuses later commands.
  /// Idempotent.
  pub fn destroy(&self) {
    self.closed.cancel();
    self.background.close();
    for log in std::mem::take(&mut *self.logs.lock().unwrap_or_else(|e| e.into_inner())) {
      let _ = std::fs::remove_file(log);
    }
  }

  pub fn workspace(&self) -> &Workspace {
    &self.workspace
  }

  /// The canonical absolute form of `path` (relative paths are relative to the workspace);
  /// refuses paths outside it.
  pub fn resolve(&self, path: &str) -> Result<Resolved, ToolError> {
    self.workspace.resolve(path)
  }

  pub async fn exec(&self, opts: ExecOptions) -> Result<ExecOutcome, ToolError> {
    let progress = opts.progress.clone();
    let out = self.exec_inner(opts).await;
    // On every path, a refusal included: the consumer's pump ends only once this is closed.
    if let Some(p) = progress {
      p.close();
    }
    out
  }

  async fn exec_inner(&self, opts: ExecOptions) -> Result<ExecOutcome, ToolError> {
    self.refuse_closed()?;
    let linked = crate::launch::link(&opts.cancel, &self.closed);
    let root = self.workspace.root()?;
    let cwd = match &opts.cwd {
      None => root.path.clone(),
      Some(c) => {
        let r = self.workspace.resolve(c)?;
        if !r.abs.is_dir() {
          return Err(ToolError::from_io(
            &std::io::Error::from_raw_os_error(libc::ENOENT),
            "chdir",
            &r.abs,
          ));
        }
        r.abs
      }
    };
    let req = ExecRequest {
      command: "/bin/sh".into(),
      args: vec!["-c".into(), opts.command.clone()],
      cwd,
      env: self.env.clone(),
      timeout: opts.timeout,
      max_output_bytes: 0,
      cancel: linked.token.clone(),
    };
    let sink = Arc::new(Mutex::new(StreamPair {
      stdout: HeadTail::for_units(opts.max_output_units),
      stderr: HeadTail::for_units(opts.max_output_units),
      progress: opts.progress.clone(),
    }));
    let started = Instant::now();
    let run = linked.watch(run_local(&req, sink.clone())).await;
    let duration_ms = started.elapsed().as_millis() as u64;
    if let Some(err) = run.spawn_error {
      return Ok(ExecOutcome {
        stdout: String::new(),
        stderr: format!("/bin/sh: {err}"),
        exit_code: 127,
        duration_ms,
        interrupted: false,
        timed_out: false,
        aborted: false,
        truncated: false,
      });
    }
    let pair = sink.lock().unwrap_or_else(|e| e.into_inner());
    let max = opts.max_output_units;
    let truncated = pair.stdout.units() as usize > max || pair.stderr.units() as usize > max;
    let exit_code = match (run.code, run.signal) {
      (Some(c), _) => c,
      (None, Some(sig)) => 128 + sig,
      (None, None) if run.timed_out => TIMEOUT_EXIT_CODE,
      (None, None) => 128 + libc::SIGKILL,
    };
    Ok(ExecOutcome {
      stdout: pair.stdout.render(max),
      stderr: pair.stderr.render(max),
      exit_code,
      duration_ms,
      interrupted: run.timed_out || run.aborted,
      timed_out: run.timed_out,
      aborted: run.aborted,
      truncated,
    })
  }

  /// `fileExists`/`isDirectory`: looked at through the workspace's descriptors (the target of a
  /// symlink swapped in after the check is never looked at; a FIFO is never opened).
  pub fn stat(&self, path: &str) -> Result<Stat, ToolError> {
    let r = self.workspace.resolve(path)?;
    self.stat_resolved(path, &r)
  }

  /// [`Self::stat`] when the path resolves in a few steps (`Workspace::resolve_inline`), `None`
  /// otherwise: for a caller that may be on the JS thread.
  pub fn stat_inline(&self, path: &str) -> Result<Option<Stat>, ToolError> {
    match self.workspace.resolve_inline(path)? {
      Some(r) => self.stat_resolved(path, &r).map(Some),
      None => Ok(None),
    }
  }

  fn stat_resolved(&self, path: &str, r: &Resolved) -> Result<Stat, ToolError> {
    // `resolve` followed every symlink of the existing prefix, so `rel` names the target.
    Ok(match self.workspace.stat(path, r)? {
      Some(m) => Stat {
        exists: true,
        is_dir: m.kind == Kind::Dir,
        is_file: m.kind == Kind::File,
        size: m.size,
      },
      None => Stat {
        exists: false,
        is_dir: false,
        is_file: false,
        size: 0,
      },
    })
  }

  /// The file as text (invalid UTF-8 becomes U+FFFD, as `readFile(path, "utf8")` decodes).
  pub fn read_to_string(&self, path: &str, cancel: &CancellationToken) -> Result<String, ToolError> {
    Ok(match String::from_utf8(self.read_bytes(path, cancel)?) {
      Ok(s) => s,
      Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
  }

  /// The file's bytes; stops with `ABORT_ERR` when `cancel` fires.
  pub fn read_bytes(&self, path: &str, cancel: &CancellationToken) -> Result<Vec<u8>, ToolError> {
    let (r, file) = self.workspace.resolve_open_read(path, "open")?;
    let (file, _) = regular_file(file, &r)?;
    read_cancellable(&file, cancel, &r.abs)
  }

  pub fn read_dir(&self, path: &str) -> Result<Vec<String>, ToolError> {
    let (r, dir) = self.workspace.resolve_open_read(path, "scandir")?;
    list_dir(&dir, &r)
  }

  /// Writes `data` (creating missing parent directories, removed again if the write fails),
  /// replacing an existing file atomically; stops with `ABORT_ERR` when `cancel` fires.
  pub fn write(&self, path: &str, data: &[u8], cancel: &CancellationToken) -> Result<(), ToolError> {
    let r = self.workspace.resolve(path)?;
    let (dir, name, created) = self.workspace.create_parents(path, &r)?;
    replace_atomically(&dir, &name, data, &r, cancel)?;
    created.keep();
    Ok(())
  }

  pub fn delete(&self, path: &str) -> Result<(), ToolError> {
    let r = self.workspace.resolve(path)?;
    let (dir, name) = self.workspace.open_parent(path, &r)?;
    // SAFETY: valid directory descriptor and NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } != 0 {
      return Err(ToolError::from_io(
        &std::io::Error::last_os_error(),
        "unlink",
        &r.abs,
      ));
    }
    Ok(())
  }

  pub fn rename(&self, from: &str, to: &str) -> Result<(), ToolError> {
    let a = self.workspace.resolve(from)?;
    let b = self.workspace.resolve(to)?;
    let (da, na) = self.workspace.open_parent(from, &a)?;
    let (db, nb, created) = self.workspace.create_parents(to, &b)?;
    // SAFETY: valid directory descriptors and NUL-terminated names.
    if unsafe { libc::renameat(da.as_raw_fd(), na.as_ptr(), db.as_raw_fd(), nb.as_ptr()) } != 0 {
      return Err(ToolError::from_io(
        &std::io::Error::last_os_error(),
        "rename",
        &a.abs,
      ));
    }
    created.keep();
    Ok(())
  }

  /// The `Read` tool over a path: a directory listing, or the selected lines of a text file,
  /// streamed so that only those lines are kept. One descriptor is opened and looked at
  /// (`fstat`): what is listed or read is what was checked. Stops with `ABORT_ERR` when `cancel`
  /// fires.
  pub fn read(&self, path: &str, opts: &ReadOptions, cancel: &CancellationToken) -> Result<ReadOutcome, ToolError> {
    let (r, file) = match self.workspace.open_read_plain(path)? {
      Some(done) => done,
      None => {
        let r = self.workspace.resolve(path)?;
        match self.workspace.open_read(path, &r, "open") {
          Ok(f) => (r, f),
          Err(e) if e.code == "ENOENT" || e.code == "ENOTDIR" => return Ok(ReadOutcome::Missing),
          Err(e) => return Err(e),
        }
      }
    };
    let meta = file.metadata().map_err(|e| ToolError::from_io(&e, "stat", &r.abs))?;
    if meta.is_dir() {
      return Ok(ReadOutcome::Directory(list_dir(&file, &r)?));
    }
    if !meta.is_file() {
      return Err(not_regular(&r.abs));
    }
    let text = read_lines(crate::lines::buffered(Cancellable { inner: file, cancel }), opts).map_err(|e| {
      if cancel.is_cancelled() {
        crate::tools::aborted()
      } else {
        ToolError::from_io(&e, "read", &r.abs)
      }
    })?;
    Ok(match text {
      LinesResult::TooLarge(total_lines) => ReadOutcome::TooLarge { total_lines },
      LinesResult::Text(mut t) => {
        t.size = meta.len();
        ReadOutcome::Text(t)
      }
    })
  }
}

/// The opened file if it is a regular file, with its size. The type is checked with `fstat` on
/// the descriptor that is then read (a device or FIFO swapped in after any earlier look is
/// refused here, `EINVAL`, never read: `/dev/zero` would never end).
fn regular_file(file: std::fs::File, r: &Resolved) -> Result<(std::fs::File, u64), ToolError> {
  let meta = file.metadata().map_err(|e| ToolError::from_io(&e, "stat", &r.abs))?;
  if meta.is_dir() {
    return Err(ToolError::from_io(
      &std::io::Error::from_raw_os_error(libc::EISDIR),
      "read",
      &r.abs,
    ));
  }
  if !meta.is_file() {
    return Err(not_regular(&r.abs));
  }
  Ok((file, meta.len()))
}

/// `EINVAL` for a FIFO, socket or device: the sandbox reads regular files only.
fn not_regular(abs: &Path) -> ToolError {
  ToolError::new(
    "EINVAL",
    format!("EINVAL: not a regular file, open '{}'", abs.display()),
  )
}

/// The sorted entry names of a directory just opened (read through its descriptor with the
/// walk's lister: no path lookup after the check).
fn list_dir(dir: &std::fs::File, r: &Resolved) -> Result<Vec<String>, ToolError> {
  let mut buf = vec![0u8; 32 * 1024];
  let listing = crate::walk::Listing::read(dir.as_raw_fd(), &mut buf).map_err(|e| ToolError::from_io(&e, "scandir", &r.abs))?;
  let mut names: Vec<String> = listing
    .iter()
    .map(|(name, _)| crate::workspace::name_text(name).into_owned())
    .collect();
  names.sort();
  Ok(names)
}

/// A reader that fails once `cancel` fires (not with `Interrupted`, which the line reader
/// retries); the caller turns that into `ABORT_ERR`.
struct Cancellable<'a, R> {
  inner: R,
  cancel: &'a CancellationToken,
}

impl<R: Read> Read for Cancellable<'_, R> {
  fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
    if self.cancel.is_cancelled() {
      return Err(std::io::Error::other("cancelled"));
    }
    self.inner.read(buf)
  }
}

enum LinesResult {
  TooLarge(u64),
  Text(ReadText),
}

/// The Read tool over a text already in memory (a sandbox that only offers `readFile`): the
/// same line reader and window as a file.
pub fn read_text(bytes: &[u8], opts: &ReadOptions) -> std::io::Result<ReadOutcome> {
  Ok(match read_lines(bytes, opts)? {
    LinesResult::TooLarge(total_lines) => ReadOutcome::TooLarge { total_lines },
    LinesResult::Text(t) => ReadOutcome::Text(t),
  })
}

/// The Read printer over the one line reader: the lines of `[start, end)` cut at
/// `max_line_length` units plus `…`, a NUL sniff over the first 1000 characters, and the line
/// guard (without a `limit`, more than `max_lines_without_limit` lines is refused).
struct WindowSink {
  start: u64,
  end: u64,
  guard: Option<u64>,
  max_line: usize,
  /// A line of `max_line` units is at most 3 bytes a unit; a little more shows the cut.
  byte_cap: usize,
  kept: Vec<String>,
  cur: Vec<u8>,
  cut: bool,
  head_units: usize,
  nul_in_head: bool,
  over_guard: bool,
}

impl WindowSink {
  fn in_range(&mut self, line: u64) -> bool {
    if !self.over_guard && self.guard.is_some_and(|g| line >= g) {
      // More lines than a read without `limit` may have: only the count matters from here.
      self.over_guard = true;
      self.kept = Vec::new();
    }
    !self.over_guard && line >= self.start && line < self.end
  }
}

impl LineSink for WindowSink {
  fn chunk(&mut self, bytes: &[u8]) -> bool {
    for &b in bytes {
      if self.head_units >= 1000 {
        break;
      }
      if b == 0 {
        self.nul_in_head = true;
      }
      self.head_units += utf16_units_of_byte(b);
    }
    true
  }

  fn piece(&mut self, line: u64, seg: &[u8]) -> bool {
    if self.in_range(line) && !self.cut {
      let room = self.byte_cap.saturating_sub(self.cur.len());
      if seg.len() > room {
        self.cur.extend_from_slice(&seg[..room]);
        self.cut = true;
      } else {
        self.cur.extend_from_slice(seg);
      }
    }
    true
  }

  fn end_line(&mut self, line: u64) -> bool {
    if self.in_range(line) {
      let text = String::from_utf8_lossy(&self.cur);
      // A line cut while reading is longer than its kept bytes, so always over the limit.
      let s = if self.cut {
        format!("{}…", utf16_prefix(&text, self.max_line))
      } else {
        cut_line(&text, self.max_line)
      };
      self.kept.push(s);
      self.cur.clear();
      self.cut = false;
    }
    true
  }
}

/// Streams `reader` (`split("\n")` semantics: `n` newlines make `n + 1` lines), keeping the lines
/// of `[offset, offset + limit)` cut at `max_line_length` units plus `…`.
fn read_lines(reader: impl std::io::BufRead, opts: &ReadOptions) -> std::io::Result<LinesResult> {
  let start = opts.offset.unwrap_or(0).saturating_sub(1);
  let limit = opts.limit.filter(|&l| l > 0);
  let mut sink = WindowSink {
    start,
    end: limit.map(|l| start.saturating_add(l)).unwrap_or(u64::MAX),
    guard: limit.is_none().then_some(opts.max_lines_without_limit),
    max_line: opts.max_line_length,
    byte_cap: opts.max_line_length.saturating_mul(4).saturating_add(8),
    kept: Vec::new(),
    cur: Vec::new(),
    cut: false,
    head_units: 0,
    nul_in_head: false,
    over_guard: false,
  };
  let total_lines = scan(reader, &mut sink)?.lines;
  if sink.guard.is_some_and(|g| total_lines > g) {
    return Ok(LinesResult::TooLarge(total_lines));
  }
  let content = middle_truncate(&sink.kept.join("\n"), opts.max_output_length);
  Ok(LinesResult::Text(ReadText {
    first_line: start + 1,
    lines: sink.kept,
    content,
    total_lines,
    nul_in_head: sink.nul_in_head,
    size: 0,
  }))
}

#[cfg(test)]
mod tests {
  use super::*;

  fn opts() -> ReadOptions {
    ReadOptions {
      offset: None,
      limit: None,
      max_lines_without_limit: 500,
      max_line_length: 2000,
      max_output_length: 60000,
    }
  }

  fn text(r: LinesResult) -> ReadText {
    match r {
      LinesResult::Text(t) => t,
      LinesResult::TooLarge(n) => panic!("too large: {n}"),
    }
  }

  #[test]
  fn read_lines_split_semantics_and_window() {
    let t = text(read_lines(&b"a\nb\n"[..], &opts()).unwrap());
    assert_eq!(t.lines, vec!["a", "b", ""]);
    assert_eq!(t.total_lines, 3);
    assert_eq!(t.content, "a\nb\n");
    let o = ReadOptions {
      offset: Some(2),
      limit: Some(1),
      ..opts()
    };
    let t = text(read_lines(&b"a\nb\nc"[..], &o).unwrap());
    assert_eq!(
      (t.first_line, t.lines.clone(), t.total_lines),
      (2, vec!["b".to_string()], 3)
    );
    let empty = text(read_lines(&b""[..], &opts()).unwrap());
    assert_eq!(empty.lines, vec![""]);
  }

  #[test]
  fn read_lines_guard_and_long_lines() {
    let exact = ReadOptions {
      max_lines_without_limit: 3,
      ..opts()
    };
    assert_eq!(
      text(read_lines(&b"a\nb\nc"[..], &exact).unwrap()).lines,
      vec!["a", "b", "c"]
    );
    assert!(matches!(
      read_lines(&b"a\nb\nc\n"[..], &exact).unwrap(),
      LinesResult::TooLarge(4)
    ));
    let many = "x\n".repeat(600);
    match read_lines(many.as_bytes(), &opts()).unwrap() {
      LinesResult::TooLarge(n) => assert_eq!(n, 601),
      _ => panic!("expected the line guard"),
    }
    let long = "y".repeat(5000);
    let t = text(read_lines(long.as_bytes(), &opts()).unwrap());
    assert_eq!(t.lines[0], format!("{}…", "y".repeat(2000)));
    let exact = "z".repeat(2000);
    let t = text(read_lines(exact.as_bytes(), &opts()).unwrap());
    assert_eq!(t.lines[0], exact);
  }

  #[test]
  fn nul_detection_is_limited_to_the_head() {
    let t = text(read_lines(&b"ab\0cd"[..], &opts()).unwrap());
    assert!(t.nul_in_head);
    let mut late = vec![b'a'; 1500];
    late.push(0);
    let t = text(read_lines(&late[..], &opts()).unwrap());
    assert!(!t.nul_in_head);
  }

  #[tokio::test]
  async fn exec_captures_head_and_tail_and_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let sb = LocalSandbox::new(
      dir.path(),
      vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
    );
    let out = sb
      .exec(ExecOptions {
        command: "seq 1 100000; echo err >&2; exit 3".into(),
        cwd: None,
        timeout: Duration::from_secs(30),
        max_output_units: 100,
        cancel: CancellationToken::new(),
        progress: None,
      })
      .await
      .unwrap();
    assert_eq!(out.exit_code, 3);
    assert_eq!(out.stderr, "err\n");
    assert!(out.truncated);
    assert!(
      out.stdout.starts_with("[Total output lines: 100001]\n\n1\n2\n"),
      "{}",
      &out.stdout[..60]
    );
    assert!(out.stdout.ends_with("99999\n100000\n"));
    let t = sb
      .exec(ExecOptions {
        command: "sleep 20".into(),
        cwd: None,
        timeout: Duration::from_millis(200),
        max_output_units: 100,
        cancel: CancellationToken::new(),
        progress: None,
      })
      .await
      .unwrap();
    assert!(t.interrupted && t.timed_out);
    assert_eq!(t.exit_code, TIMEOUT_EXIT_CODE);
  }

  fn go() -> CancellationToken {
    CancellationToken::new()
  }

  #[test]
  fn file_ops_stay_inside_and_create_parents() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let sb = LocalSandbox::new(dir.path().join("ws"), vec![]);
    sb.write("a/b/c.txt", b"hello", &go()).unwrap();
    assert_eq!(sb.read_to_string("a/b/c.txt", &go()).unwrap(), "hello");
    assert_eq!(sb.read_dir("a").unwrap(), vec!["b"]);
    assert!(sb.stat("a").unwrap().is_dir);
    sb.rename("a/b/c.txt", "d/e.txt").unwrap();
    assert!(!sb.stat("a/b/c.txt").unwrap().exists);
    assert_eq!(sb.read_to_string("d/e.txt", &go()).unwrap(), "hello");
    sb.delete("d/e.txt").unwrap();
    assert!(!sb.stat("d/e.txt").unwrap().exists);
    assert!(sb.write("../outside.txt", b"x", &go()).is_err());
    assert!(!dir.path().join("outside.txt").exists());
    assert!(sb.read_to_string("/etc/passwd", &go()).is_err());
  }
}
