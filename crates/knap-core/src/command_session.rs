//! Interactive command sessions (`createCommandSessionRuntime`): processes that outlive one
//! tool call, each with one merged byte stream (stdout and stderr in arrival order) kept in a
//! ring of `maxOutputBytes` (older bytes optionally in a per-session spill file), read by
//! absolute cursors, written to through stdin, killed with their whole process tree.
//!
//! Every option and call is checked here, in the reference's order, with its
//! `command_session_*` code; the JS layer only passes JSON through.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::exec::{spawn_contained, ExecRequest};
use crate::launch::{Contained, Lifetime};
use crate::limits::{
  COMMAND_SESSION_FORCE_FINALIZE, MAX_SAFE_INTEGER, PIPE_DRAIN_AFTER_EXIT, READ_CHUNK_BYTES,
};

fn coded(code: &str) -> ToolError {
  ToolError::coded(code)
}

// ---------------------------------------------------------------------------------------------
// Options

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillOptions {
  pub directory: PathBuf,
  /// Extra bytes kept per session, older than the memory ring.
  pub max_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeOptions {
  pub max_sessions: usize,
  /// Bytes kept in memory per session.
  pub max_output_bytes: usize,
  pub max_read_bytes: usize,
  pub max_input_bytes: usize,
  pub max_timeout_ms: u64,
  pub max_wait_ms: u64,
  pub spill: Option<SpillOptions>,
}

impl Default for RuntimeOptions {
  /// The runtime's own defaults: 64 sessions, 4 MiB, 64 KiB, 64 KiB, 120 s, 30 s.
  fn default() -> Self {
    Self {
      max_sessions: 64,
      max_output_bytes: 4 * 1024 * 1024,
      max_read_bytes: 64 * 1024,
      max_input_bytes: 64 * 1024,
      max_timeout_ms: 120_000,
      max_wait_ms: 30_000,
      spill: None,
    }
  }
}

fn positive_safe_integer(v: &Value) -> Option<u64> {
  let f = v.as_f64()?;
  (f.is_finite() && f.fract() == 0.0 && f >= 1.0 && f <= MAX_SAFE_INTEGER).then_some(f as u64)
}

fn safe_integer_in(v: &Value, min: f64, max: f64) -> Option<u64> {
  let f = v.as_f64()?;
  (f.is_finite() && f.fract() == 0.0 && f >= min && f <= max).then_some(f as u64)
}

impl RuntimeOptions {
  /// `createCommandSessionRuntime(options)`: each limit must be a positive safe integer
  /// (`command_session_<name>_invalid`); `spill` an existing absolute directory and a byte count.
  pub fn from_json(options: &Value) -> Result<Self, ToolError> {
    let mut out = Self::default();
    let Some(map) = options.as_object() else {
      return if options.is_null() {
        Ok(out)
      } else {
        Err(coded("command_session_options_invalid"))
      };
    };
    for (key, value) in map {
      let slot: &mut dyn FnMut(u64) = match key.as_str() {
        "maxSessions" => &mut |n| out.max_sessions = n as usize,
        "maxOutputBytes" => &mut |n| out.max_output_bytes = n as usize,
        "maxReadBytes" => &mut |n| out.max_read_bytes = n as usize,
        "maxInputBytes" => &mut |n| out.max_input_bytes = n as usize,
        "maxTimeoutMs" => &mut |n| out.max_timeout_ms = n,
        "maxWaitMs" => &mut |n| out.max_wait_ms = n,
        "spill" => continue,
        other => {
          return Err(
            coded(&format!("command_session_option_unknown:{other}"))
              .with_hint(crate::suggest::unknown_hint(other, RUNTIME_KEYS, "options")),
          )
        }
      };
      let n = positive_safe_integer(value).ok_or_else(|| coded(&format!("command_session_{key}_invalid")))?;
      slot(n);
    }
    if let Some(spill) = map.get("spill") {
      out.spill = Some(parse_spill(spill)?);
    }
    Ok(out)
  }
}

fn parse_spill(v: &Value) -> Result<SpillOptions, ToolError> {
  let map = v
    .as_object()
    .ok_or_else(|| coded("command_session_spill_invalid"))?;
  if map.keys().any(|k| k != "directory" && k != "maxBytes") {
    return Err(coded("command_session_spill_invalid"));
  }
  let directory = match map.get("directory").and_then(Value::as_str) {
    Some(d) if d.starts_with('/') && !d.contains('\0') && std::path::Path::new(d).is_dir() => {
      PathBuf::from(d)
    }
    _ => return Err(coded("command_session_spill_directory_invalid")),
  };
  let max_bytes = map
    .get("maxBytes")
    .and_then(positive_safe_integer)
    .ok_or_else(|| coded("command_session_spill_maxBytes_invalid"))?;
  Ok(SpillOptions { directory, max_bytes })
}

// ---------------------------------------------------------------------------------------------
// Results

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
  Running,
  Exited,
  TimedOut,
  Killed,
  UnknownAfterRestart,
}

impl State {
  pub fn as_str(self) -> &'static str {
    match self {
      State::Running => "running",
      State::Exited => "exited",
      State::TimedOut => "timed_out",
      State::Killed => "killed",
      State::UnknownAfterRestart => "unknown_after_restart",
    }
  }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartResult {
  pub session_id: String,
  pub state: State,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResult {
  pub session_id: String,
  pub state: State,
  pub cursor: u64,
  pub output_start: u64,
  pub next_cursor: u64,
  pub output_encoding: &'static str,
  pub output: String,
  pub available_from: u64,
  pub available_to: u64,
  pub truncated_before_cursor: bool,
  pub has_more: bool,
  /// Present when the read had a `query`: the absolute start of the match, or `null`.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub match_start: Option<Option<u64>>,
  pub exit_code: Option<i32>,
  pub exit_signal: Option<String>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub spawn_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteResult {
  pub session_id: String,
  pub state: State,
  pub accepted: bool,
  pub bytes: u64,
  pub output_cursor: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
  pub session_id: String,
  pub state: State,
  pub available_from: u64,
  pub available_to: u64,
  pub stdin_open: bool,
  pub exit_code: Option<i32>,
  pub exit_signal: Option<String>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub spawn_error: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// The retained output: a memory ring, and older bytes in a circular spill file

struct Spill {
  file: File,
  cap: u64,
  /// Absolute offset of the oldest byte the file still holds (it holds `from..mem_from`).
  from: u64,
}

struct Output {
  mem: VecDeque<u8>,
  mem_cap: usize,
  /// Absolute offset of `mem[0]`.
  mem_from: u64,
  /// Every byte ever produced (`availableTo`).
  total: u64,
  spill_cfg: Option<SpillOptions>,
  spill: Option<Spill>,
  session_id: String,
}

impl Output {
  fn new(mem_cap: usize, spill_cfg: Option<SpillOptions>, session_id: String) -> Self {
    Self {
      mem: VecDeque::new(),
      mem_cap,
      mem_from: 0,
      total: 0,
      spill_cfg,
      spill: None,
      session_id,
    }
  }

  fn available_from(&self) -> u64 {
    self.spill.as_ref().map_or(self.mem_from, |s| s.from)
  }

  fn push(&mut self, bytes: &[u8]) {
    self.total += bytes.len() as u64;
    let need = self.mem.len() + bytes.len();
    if need > self.mem.capacity() {
      // Grow geometrically, but never past the cap plus this chunk: left to `extend`, a full
      // ring's buffer doubles to twice `mem_cap` (8 sessions × 4 MiB held 64 MiB, not 32).
      let target = need.max(self.mem.capacity() * 2).min(need.max(self.mem_cap));
      self.mem.reserve_exact(target - self.mem.len());
    }
    self.mem.extend(bytes);
    if self.mem.len() <= self.mem_cap {
      return;
    }
    let evict = self.mem.len() - self.mem_cap;
    let first = self.mem_from;
    if self.spill_cfg.is_some() {
      let evicted: Vec<u8> = self.mem.drain(..evict).collect();
      self.mem_from += evict as u64;
      self.spill_out(first, &evicted);
    } else {
      self.mem.drain(..evict);
      self.mem_from += evict as u64;
    }
    self.trim_leading_continuations();
  }

  /// Bytes leaving memory go to the spill file (opened at the first eviction); a failure
  /// disables the spill for this session and drops what it held.
  fn spill_out(&mut self, first: u64, bytes: &[u8]) {
    let Some(cfg) = self.spill_cfg.clone() else {
      return;
    };
    if self.spill.is_none() {
      match open_spill(&cfg, &self.session_id) {
        Some(file) => {
          self.spill = Some(Spill {
            file,
            cap: cfg.max_bytes,
            from: first,
          })
        }
        None => {
          self.spill_cfg = None;
          return;
        }
      }
    }
    let spill = self.spill.as_mut().expect("opened above");
    let keep = (bytes.len() as u64).min(spill.cap) as usize;
    let tail = &bytes[bytes.len() - keep..];
    let start = first + (bytes.len() - keep) as u64;
    if write_circular(&spill.file, spill.cap, start, tail).is_err() {
      self.spill = None;
      self.spill_cfg = None;
      return;
    }
    spill.from = spill.from.max(self.mem_from.saturating_sub(spill.cap));
  }

  /// After an eviction the retained text starts on a character boundary: up to 3 leading
  /// UTF-8 continuation bytes are dropped too.
  fn trim_leading_continuations(&mut self) {
    for _ in 0..3 {
      let from = self.available_from();
      if from >= self.total {
        return;
      }
      let Ok(b) = self.bytes(from, from + 1) else {
        return;
      };
      if b.first().is_none_or(|b| b & 0xC0 != 0x80) {
        return;
      }
      match self.spill.as_mut() {
        Some(s) if s.from < self.mem_from => s.from += 1,
        Some(_) | None => {
          self.mem.pop_front();
          self.mem_from += 1;
          if let Some(s) = self.spill.as_mut() {
            s.from = self.mem_from;
          }
        }
      }
    }
  }

  /// The retained bytes `start..end` (both within `available_from..total`).
  fn bytes(&self, start: u64, end: u64) -> Result<Vec<u8>, ToolError> {
    let mut out = Vec::with_capacity((end - start) as usize);
    if let Some(spill) = &self.spill {
      let spill_end = end.min(self.mem_from);
      if start < spill_end {
        let mut buf = vec![0u8; (spill_end - start) as usize];
        read_circular(&spill.file, spill.cap, start, &mut buf)
          .map_err(|_| coded("command_session_spill_read_failed"))?;
        out.extend_from_slice(&buf);
      }
    }
    let mem_start = start.max(self.mem_from);
    if mem_start < end {
      let a = (mem_start - self.mem_from) as usize;
      let b = (end - self.mem_from) as usize;
      let (x, y) = self.mem.as_slices();
      if a < x.len() {
        out.extend_from_slice(&x[a..b.min(x.len())]);
      }
      if b > x.len() {
        out.extend_from_slice(&y[a.saturating_sub(x.len())..b - x.len()]);
      }
    }
    Ok(out)
  }

  /// Where `needle` first occurs at or after `start` (absolute).
  fn find(&self, start: u64, needle: &[u8]) -> Result<Option<u64>, ToolError> {
    let hay = self.bytes(start, self.total)?;
    Ok(memchr::memmem::find(&hay, needle).map(|i| start + i as u64))
  }

  fn clear(&mut self) {
    self.mem = VecDeque::new();
    self.spill = None;
    self.spill_cfg = None;
  }
}

fn open_spill(cfg: &SpillOptions, session_id: &str) -> Option<File> {
  let name = format!(".command-session-{session_id}-{}.spill", uuid::Uuid::new_v4());
  let path = cfg.directory.join(name);
  let file = std::fs::OpenOptions::new()
    .read(true)
    .write(true)
    .create_new(true)
    .mode(0o600)
    .open(&path)
    .ok()?;
  // Kept alive by the descriptor alone: nothing is left behind if the process dies.
  let _ = std::fs::remove_file(&path);
  Some(file)
}

fn write_circular(file: &File, cap: u64, start: u64, mut bytes: &[u8]) -> std::io::Result<()> {
  let mut pos = start;
  while !bytes.is_empty() {
    let at = pos % cap;
    let n = ((cap - at) as usize).min(bytes.len());
    file.write_all_at(&bytes[..n], at)?;
    bytes = &bytes[n..];
    pos += n as u64;
  }
  Ok(())
}

fn read_circular(file: &File, cap: u64, start: u64, buf: &mut [u8]) -> std::io::Result<()> {
  let mut pos = start;
  let mut done = 0;
  while done < buf.len() {
    let at = pos % cap;
    let n = ((cap - at) as usize).min(buf.len() - done);
    file.read_exact_at(&mut buf[done..done + n], at)?;
    done += n;
    pos += n as u64;
  }
  Ok(())
}

// ---------------------------------------------------------------------------------------------
// Sessions

struct Status {
  state: State,
  exit_code: Option<i32>,
  exit_signal: Option<String>,
  spawn_error: Option<String>,
  stdin_open: bool,
  /// Pipes destroyed, the process group gone: nothing will change any more.
  finalized: bool,
}

struct Session {
  id: String,
  out: Mutex<Output>,
  status: Mutex<Status>,
  /// Woken on every new byte and every state change.
  changed: Notify,
  stdin: tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
  /// Fired by `kill(id)` and `close()`.
  kill: CancellationToken,
}

impl Session {
  fn lock_out(&self) -> std::sync::MutexGuard<'_, Output> {
    self.out.lock().unwrap_or_else(|e| e.into_inner())
  }

  fn lock_status(&self) -> std::sync::MutexGuard<'_, Status> {
    self.status.lock().unwrap_or_else(|e| e.into_inner())
  }

  fn running(&self) -> bool {
    self.lock_status().state == State::Running
  }

  fn finalized(&self) -> bool {
    self.lock_status().finalized
  }

  fn summary(&self) -> Summary {
    let out = self.lock_out();
    let st = self.lock_status();
    Summary {
      session_id: self.id.clone(),
      state: st.state,
      available_from: out.available_from(),
      available_to: out.total,
      stdin_open: st.state == State::Running && st.stdin_open,
      exit_code: st.exit_code,
      exit_signal: st.exit_signal.clone(),
      spawn_error: st.spawn_error.clone(),
    }
  }

  /// Waits until `ready()` holds, the session is finalized, `deadline` passes or `cancel` fires
  /// (`Err` = aborted).
  async fn wait_until(
    &self,
    deadline: Instant,
    cancel: &CancellationToken,
    ready: impl Fn(&Session) -> bool,
  ) -> Result<(), ToolError> {
    loop {
      let notified = self.changed.notified();
      tokio::pin!(notified);
      notified.as_mut().enable();
      if ready(self) || self.finalized() {
        return Ok(());
      }
      let now = Instant::now();
      if now >= deadline {
        return Ok(());
      }
      tokio::select! {
        _ = &mut notified => {}
        _ = tokio::time::sleep(deadline - now) => return Ok(()),
        _ = cancel.cancelled() => return Err(coded("command_session_operation_aborted")),
      }
    }
  }

  fn page(&self, cursor: u64, limit: u64, query: Option<&[u8]>) -> Result<ReadResult, ToolError> {
    let out = self.lock_out();
    let st = self.lock_status();
    let from = out.available_from();
    let to = out.total;
    let mut match_start = None;
    let (start, mut end) = match query {
      Some(q) => {
        // A match may straddle the cursor (it arrived in pieces): scan from `len - 1` before it.
        let scan = cursor.saturating_sub(q.len() as u64 - 1).max(from);
        match out.find(scan, q)? {
          Some(at) => {
            match_start = Some(Some(at));
            (at, to.min(at + limit))
          }
          None => {
            match_start = Some(None);
            (cursor.max(from), to)
          }
        }
      }
      None => {
        let start = cursor.max(from);
        (start, to.min(start + limit))
      }
    };
    let missed = match_start == Some(None);
    let (encoding, output) = if missed {
      ("utf8", String::new())
    } else {
      let bytes = out.bytes(start, end)?;
      match page_text(&bytes) {
        Some((text, kept)) => {
          end = start + kept as u64;
          ("utf8", text)
        }
        None => ("base64", base64::engine::general_purpose::STANDARD.encode(&bytes)),
      }
    };
    Ok(ReadResult {
      session_id: self.id.clone(),
      state: st.state,
      cursor,
      output_start: start,
      next_cursor: end,
      output_encoding: encoding,
      output,
      available_from: from,
      available_to: to,
      truncated_before_cursor: cursor < from,
      has_more: end < to,
      match_start,
      exit_code: st.exit_code,
      exit_signal: st.exit_signal.clone(),
      spawn_error: st.spawn_error.clone(),
    })
  }
}

/// A page as UTF-8 text: whole, or with its end pulled back 1–3 bytes out of a character it
/// splits. `None`: the page is not text (it goes out as base64).
fn page_text(bytes: &[u8]) -> Option<(String, usize)> {
  for cut in 0..=3usize.min(bytes.len()) {
    let kept = bytes.len() - cut;
    if cut > 0 && kept == 0 {
      break;
    }
    if let Ok(s) = std::str::from_utf8(&bytes[..kept]) {
      return Some((s.to_string(), kept));
    }
  }
  None
}

fn signal_name(sig: i32) -> String {
  let name = match sig {
    libc::SIGHUP => "SIGHUP",
    libc::SIGINT => "SIGINT",
    libc::SIGQUIT => "SIGQUIT",
    libc::SIGILL => "SIGILL",
    libc::SIGTRAP => "SIGTRAP",
    libc::SIGABRT => "SIGABRT",
    libc::SIGBUS => "SIGBUS",
    libc::SIGFPE => "SIGFPE",
    libc::SIGKILL => "SIGKILL",
    libc::SIGUSR1 => "SIGUSR1",
    libc::SIGSEGV => "SIGSEGV",
    libc::SIGUSR2 => "SIGUSR2",
    libc::SIGPIPE => "SIGPIPE",
    libc::SIGALRM => "SIGALRM",
    libc::SIGTERM => "SIGTERM",
    libc::SIGXCPU => "SIGXCPU",
    libc::SIGXFSZ => "SIGXFSZ",
    _ => return format!("SIG{sig}"),
  };
  name.to_string()
}

// ---------------------------------------------------------------------------------------------
// Requests, validated in the reference's order

/// `start`'s options after validation.
#[derive(Debug, Clone)]
pub struct StartSpec {
  pub command: String,
  pub args: Vec<String>,
  pub cwd: PathBuf,
  pub env: Vec<(String, String)>,
  pub stdin_pipe: bool,
  pub timeout: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct ReadSpec {
  pub session_id: String,
  pub cursor: u64,
  pub limit: Option<u64>,
  pub wait_ms: u64,
  pub query: Option<Vec<u8>>,
}

const ID_PREFIX: &str = "cmd_";

pub fn valid_session_id(id: &str) -> bool {
  id.len() == 36
    && id.starts_with(ID_PREFIX)
    && id[4..]
      .bytes()
      .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn session_id_of(v: Option<&Value>) -> Result<String, ToolError> {
  match v.and_then(Value::as_str) {
    Some(id) if valid_session_id(id) => Ok(id.to_string()),
    _ => Err(coded("command_session_id_invalid")),
  }
}

const RUNTIME_KEYS: &[&str] =
  &["maxSessions", "maxOutputBytes", "maxReadBytes", "maxInputBytes", "maxTimeoutMs", "maxWaitMs", "spill"];
const START_KEYS: &[&str] = &["command", "args", "cwd", "env", "stdin", "timeoutMs"];
const READ_KEYS: &[&str] = &["sessionId", "cursor", "query", "limit", "waitMs"];
const WRITE_KEYS: &[&str] = &["sessionId", "input", "closeStdin"];

fn refuse_unknown(map: &serde_json::Map<String, Value>, known: &[&str], op: &str) -> Result<(), ToolError> {
  match map.keys().find(|k| !known.contains(&k.as_str())) {
    Some(k) => Err(
      coded(&format!("command_session_{op}_option_unknown:{k}"))
        .with_hint(crate::suggest::unknown_hint(k, known, "options")),
    ),
    None => Ok(()),
  }
}

pub struct CommandSessionRuntime {
  options: RuntimeOptions,
  inner: Mutex<Pool>,
}

#[derive(Default)]
struct Pool {
  closed: bool,
  /// In start order.
  sessions: Vec<Arc<Session>>,
}

impl CommandSessionRuntime {
  pub fn new(options: RuntimeOptions) -> Arc<Self> {
    Arc::new(Self {
      options,
      inner: Mutex::new(Pool::default()),
    })
  }

  pub fn options(&self) -> &RuntimeOptions {
    &self.options
  }

  fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
    self.inner.lock().unwrap_or_else(|e| e.into_inner())
  }

  fn find(&self, id: &str) -> Option<Arc<Session>> {
    self.pool().sessions.iter().find(|s| s.id == id).cloned()
  }

  /// Checks `start`'s options in the reference's order up to the pool limit; `env` itself is
  /// checked after it (as the reference does).
  pub fn parse_start(&self, o: &Value) -> Result<(StartSpec, Option<Value>), ToolError> {
    if self.pool().closed {
      return Err(coded("command_session_runtime_closed"));
    }
    let map = o
      .as_object()
      .ok_or_else(|| coded("command_session_command_invalid"))?;
    let command = match map.get("command").and_then(Value::as_str) {
      Some(c) if !c.is_empty() && !c.contains('\0') => c.to_string(),
      _ => return Err(coded("command_session_command_invalid")),
    };
    let args = match map.get("args") {
      None => Vec::new(),
      Some(Value::Array(a)) => a
        .iter()
        .map(|v| v.as_str().filter(|s| !s.contains('\0')).map(str::to_string))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| coded("command_session_args_invalid"))?,
      Some(_) => return Err(coded("command_session_args_invalid")),
    };
    let cwd = match map.get("cwd").and_then(Value::as_str) {
      Some(c) if c.starts_with('/') && !c.contains('\0') => PathBuf::from(c),
      _ => return Err(coded("command_session_cwd_must_be_absolute")),
    };
    let env = match map.get("env") {
      Some(v @ Value::Object(_)) => v.clone(),
      _ => return Err(coded("command_session_explicit_env_required")),
    };
    let stdin_pipe = match map.get("stdin").map(|v| v.as_str()) {
      None | Some(Some("closed")) => false,
      Some(Some("pipe")) => true,
      Some(_) => return Err(coded("command_session_stdin_invalid")),
    };
    let timeout = map
      .get("timeoutMs")
      .and_then(|v| safe_integer_in(v, 1.0, self.options.max_timeout_ms as f64))
      .ok_or_else(|| coded("command_session_timeoutMs_invalid"))?;
    refuse_unknown(map, START_KEYS, "start")?;
    Ok((
      StartSpec {
        command,
        args,
        cwd,
        env: Vec::new(),
        stdin_pipe,
        timeout: Duration::from_millis(timeout),
      },
      Some(env),
    ))
  }

  /// `start(options)` from JSON (the JS surface).
  pub async fn start_json(
    self: &Arc<Self>,
    o: &Value,
    cancel: Option<CancellationToken>,
  ) -> Result<StartResult, ToolError> {
    let (mut spec, env) = self.parse_start(o)?;
    self.make_room()?;
    spec.env = parse_env(env.as_ref())?;
    self.start(spec, cancel).await
  }

  /// Drops the oldest finished sessions while the pool is full; none finished is
  /// `command_session_limit_reached`.
  fn make_room(&self) -> Result<(), ToolError> {
    let mut pool = self.pool();
    while pool.sessions.len() >= self.options.max_sessions {
      let Some(i) = pool.sessions.iter().position(|s| s.finalized()) else {
        return Err(coded("command_session_limit_reached"));
      };
      let gone = pool.sessions.remove(i);
      gone.lock_out().clear();
    }
    Ok(())
  }

  /// Starts a validated session. `cancel` (the caller's signal) kills it whenever it fires,
  /// for the session's whole life.
  pub async fn start(
    self: &Arc<Self>,
    spec: StartSpec,
    cancel: Option<CancellationToken>,
  ) -> Result<StartResult, ToolError> {
    if self.pool().closed {
      return Err(coded("command_session_runtime_closed"));
    }
    self.make_room()?;
    let id = format!("{ID_PREFIX}{}", uuid::Uuid::new_v4().simple());
    let session = Arc::new(Session {
      id: id.clone(),
      out: Mutex::new(Output::new(
        self.options.max_output_bytes,
        self.options.spill.clone(),
        id.clone(),
      )),
      status: Mutex::new(Status {
        state: State::Running,
        exit_code: None,
        exit_signal: None,
        spawn_error: None,
        stdin_open: spec.stdin_pipe,
        finalized: false,
      }),
      changed: Notify::new(),
      stdin: tokio::sync::Mutex::new(None),
      kill: CancellationToken::new(),
    });
    // The launcher (crate::launch) kills everything the session started when it ends.
    let req = ExecRequest {
      command: spec.command.clone(),
      args: spec.args.clone(),
      cwd: spec.cwd.clone(),
      env: spec.env.clone(),
      timeout: spec.timeout,
      max_output_bytes: 0,
      cancel: CancellationToken::new(),
    };
    let stdin = if spec.stdin_pipe { Stdio::piped() } else { Stdio::null() };
    match spawn_contained(&req, Lifetime::Call, [stdin, Stdio::piped(), Stdio::piped()]) {
      Ok((mut child, handle)) => {
        *session.stdin.lock().await = child.stdin.take();
        self.pool().sessions.push(session.clone());
        tokio::spawn(supervise(session, child, handle, spec.timeout, cancel));
      }
      Err(err) => {
        let name = crate::error::errno_name(&err);
        if !matches!(
          err.raw_os_error(),
          Some(libc::ENOENT | libc::EACCES | libc::ENOTDIR | libc::ENOEXEC)
        ) {
          return Err(coded(&format!("command_session_spawn_failed:{err}")));
        }
        // As Node reports a missing command: a session that ended with a spawn error.
        {
          let mut st = session.lock_status();
          st.state = State::Exited;
          st.spawn_error = Some(format!("spawn {} {name}", spec.command));
          st.stdin_open = false;
          st.finalized = true;
        }
        self.pool().sessions.push(session);
      }
    }
    Ok(StartResult {
      session_id: id,
      state: State::Running,
    })
  }

  pub fn list(&self) -> Vec<Summary> {
    self.pool().sessions.iter().map(|s| s.summary()).collect()
  }

  /// `read(options)` from JSON, checked in the reference's order.
  pub fn parse_read(&self, o: &Value, aborted: bool) -> Result<ReadSpec, ToolError> {
    let map = o.as_object().ok_or_else(|| coded("command_session_id_invalid"))?;
    let cursor = match map.get("cursor") {
      None => 0,
      Some(v) => {
        safe_integer_in(v, 0.0, MAX_SAFE_INTEGER).ok_or_else(|| coded("command_session_cursor_invalid"))?
      }
    };
    let limit = match map.get("limit") {
      None => None,
      Some(v) => Some(
        safe_integer_in(v, 1.0, self.options.max_read_bytes as f64)
          .ok_or_else(|| coded("command_session_limit_invalid"))?,
      ),
    };
    let wait_ms = match map.get("waitMs") {
      None => 0,
      Some(v) => safe_integer_in(v, 0.0, self.options.max_wait_ms as f64)
        .ok_or_else(|| coded("command_session_waitMs_invalid"))?,
    };
    let query = match map.get("query") {
      None => None,
      Some(Value::String(q)) if !q.is_empty() => Some(q.as_bytes().to_vec()),
      Some(_) => return Err(coded("command_session_query_invalid")),
    };
    if aborted {
      return Err(coded("command_session_operation_aborted"));
    }
    let session_id = session_id_of(map.get("sessionId"))?;
    refuse_unknown(map, READ_KEYS, "read")?;
    Ok(ReadSpec {
      session_id,
      cursor,
      limit,
      wait_ms,
      query,
    })
  }

  pub async fn read(&self, spec: ReadSpec, cancel: &CancellationToken) -> Result<ReadResult, ToolError> {
    let Some(session) = self.find(&spec.session_id) else {
      return Ok(unknown_read(&spec.session_id, spec.cursor, spec.query.is_some()));
    };
    if spec.cursor > session.lock_out().total {
      return Err(coded("command_session_cursor_beyond_output"));
    }
    let limit = spec.limit.unwrap_or(self.options.max_read_bytes as u64);
    if spec.wait_ms > 0 {
      let deadline = Instant::now() + Duration::from_millis(spec.wait_ms);
      let cursor = spec.cursor;
      match &spec.query {
        Some(q) => {
          let q = q.clone();
          session
            .wait_until(deadline, cancel, move |s| {
              !s.running()
                || matches!(
                  s.page(cursor, limit, Some(&q)).map(|r| r.match_start),
                  Ok(Some(Some(_))) | Err(_)
                )
            })
            .await?
        }
        None => {
          session
            .wait_until(deadline, cancel, move |s| {
              !s.running() || s.lock_out().total > cursor
            })
            .await?
        }
      }
    }
    session.page(spec.cursor, limit, spec.query.as_deref())
  }

  /// `write(options)`: validated in the reference's order, then written to stdin while the
  /// session runs with stdin open. An aborted write never kills the session.
  pub async fn write_json(&self, o: &Value, cancel: &CancellationToken) -> Result<WriteResult, ToolError> {
    if cancel.is_cancelled() {
      return Err(coded("command_session_operation_aborted"));
    }
    let map = o.as_object().ok_or_else(|| coded("command_session_id_invalid"))?;
    let id = session_id_of(map.get("sessionId"))?;
    let input = match map.get("input") {
      Some(Value::String(s)) => s.clone(),
      _ => return Err(coded("command_session_input_must_be_string")),
    };
    let close = match map.get("closeStdin") {
      None => false,
      Some(Value::Bool(b)) => *b,
      Some(_) => return Err(coded("command_session_close_stdin_must_be_boolean")),
    };
    if input.len() > self.options.max_input_bytes {
      return Err(coded("command_session_input_limit_exceeded"));
    }
    refuse_unknown(map, WRITE_KEYS, "write")?;
    self.write(&id, input.as_bytes(), close, cancel).await
  }

  pub async fn write(
    &self,
    id: &str,
    input: &[u8],
    close_stdin: bool,
    cancel: &CancellationToken,
  ) -> Result<WriteResult, ToolError> {
    let Some(session) = self.find(id) else {
      return Ok(WriteResult {
        session_id: id.to_string(),
        state: State::UnknownAfterRestart,
        accepted: false,
        bytes: 0,
        output_cursor: 0,
      });
    };
    let output_cursor = session.lock_out().total;
    let mut accepted = false;
    {
      let mut stdin = session.stdin.lock().await;
      let open = session.running() && session.lock_status().stdin_open;
      if let (true, Some(pipe)) = (open, stdin.as_mut()) {
        tokio::select! {
          r = async { pipe.write_all(input).await?; pipe.flush().await } => accepted = r.is_ok(),
          _ = cancel.cancelled() => return Err(coded("command_session_operation_aborted")),
          _ = session.kill.cancelled() => {}
        }
        if close_stdin {
          *stdin = None;
          session.lock_status().stdin_open = false;
        }
      }
    }
    session.changed.notify_waiters();
    let state = session.lock_status().state;
    Ok(WriteResult {
      session_id: id.to_string(),
      state,
      accepted,
      bytes: if accepted { input.len() as u64 } else { 0 },
      output_cursor,
    })
  }

  /// `kill(id)`: kills the process tree, waits until the session is finalized, and returns a
  /// read at `availableTo`.
  pub async fn kill_json(&self, id: &Value) -> Result<ReadResult, ToolError> {
    let id = session_id_of(Some(id))?;
    self.kill(&id).await
  }

  pub async fn kill(&self, id: &str) -> Result<ReadResult, ToolError> {
    let Some(session) = self.find(id) else {
      return Ok(unknown_read(id, 0, false));
    };
    session.kill.cancel();
    wait_finalized(&session).await;
    let to = session.lock_out().total;
    session.page(to, self.options.max_read_bytes as u64, None)
  }

  /// Waits for `id` to stop (or `deadline`).
  pub async fn wait_ended(
    &self,
    id: &str,
    deadline: Instant,
    cancel: &CancellationToken,
  ) -> Result<(), ToolError> {
    if let Some(session) = self.find(id) {
      session.wait_until(deadline, cancel, |s| !s.running()).await?;
    }
    Ok(())
  }

  /// Every retained byte of a session, and where it starts.
  pub fn capture(&self, id: &str) -> Result<Option<(Summary, Vec<u8>)>, ToolError> {
    let Some(session) = self.find(id) else {
      return Ok(None);
    };
    let summary = session.summary();
    let bytes = session
      .lock_out()
      .bytes(summary.available_from, summary.available_to)?;
    Ok(Some((summary, bytes)))
  }

  pub fn summary(&self, id: &str) -> Option<Summary> {
    self.find(id).map(|s| s.summary())
  }

  /// Marks the runtime closed, kills live sessions, waits for them, and forgets every session.
  /// Idempotent.
  pub async fn close(&self) {
    let sessions = {
      let mut pool = self.pool();
      pool.closed = true;
      std::mem::take(&mut pool.sessions)
    };
    for s in &sessions {
      s.kill.cancel();
    }
    for s in &sessions {
      wait_finalized(s).await;
      s.lock_out().clear();
    }
  }
}

async fn wait_finalized(session: &Session) {
  let never = CancellationToken::new();
  let far = Instant::now() + Duration::from_secs(3600);
  let _ = session.wait_until(far, &never, |s| s.finalized()).await;
}

fn parse_env(env: Option<&Value>) -> Result<Vec<(String, String)>, ToolError> {
  let map = env
    .and_then(Value::as_object)
    .ok_or_else(|| coded("command_session_explicit_env_required"))?;
  map
    .iter()
    .map(|(k, v)| match v.as_str() {
      Some(v) if !k.is_empty() && !k.contains('=') && !k.contains('\0') && !v.contains('\0') => {
        Ok((k.clone(), v.to_string()))
      }
      _ => Err(coded("command_session_env_invalid")),
    })
    .collect()
}

/// The read a session unknown to this runtime gets (`unknown_after_restart`).
pub fn unknown_page(id: &str, cursor: u64) -> ReadResult {
  unknown_read(id, cursor, false)
}

fn unknown_read(id: &str, cursor: u64, had_query: bool) -> ReadResult {
  ReadResult {
    session_id: id.to_string(),
    state: State::UnknownAfterRestart,
    cursor,
    output_start: cursor,
    next_cursor: cursor,
    output_encoding: "utf8",
    output: String::new(),
    available_from: cursor,
    available_to: cursor,
    truncated_before_cursor: false,
    has_more: false,
    match_start: had_query.then_some(None),
    exit_code: None,
    exit_signal: None,
    spawn_error: None,
  }
}

async fn pump(session: Arc<Session>, mut pipe: impl tokio::io::AsyncRead + Unpin) {
  let mut buf = vec![0u8; READ_CHUNK_BYTES];
  loop {
    match pipe.read(&mut buf).await {
      Ok(0) | Err(_) => return,
      Ok(n) => {
        session.lock_out().push(&buf[..n]);
        session.changed.notify_waiters();
      }
    }
  }
}

/// Runs one session to its end: exit (its launcher has then killed what the command left
/// behind, so the output is read to EOF), hard timeout, `kill`/`close`, or the start signal.
async fn supervise(
  session: Arc<Session>,
  mut child: tokio::process::Child,
  handle: Arc<Contained>,
  timeout: Duration,
  cancel: Option<CancellationToken>,
) {
  let mut readers = Vec::new();
  if let Some(out) = child.stdout.take() {
    readers.push(tokio::spawn(pump(session.clone(), out)));
  }
  if let Some(err) = child.stderr.take() {
    readers.push(tokio::spawn(pump(session.clone(), err)));
  }
  let signal = cancel.unwrap_or_default();
  enum End {
    Exit(Option<std::process::ExitStatus>),
    Stop(State),
  }
  let end = tokio::select! {
    s = child.wait() => End::Exit(s.ok()),
    _ = tokio::time::sleep(timeout) => End::Stop(State::TimedOut),
    _ = session.kill.cancelled() => End::Stop(State::Killed),
    _ = signal.cancelled() => End::Stop(State::Killed),
  };
  let aborts: Vec<_> = readers.iter().map(|r| r.abort_handle()).collect();
  let drained = async {
    for r in readers {
      let _ = r.await;
    }
  };
  let (state, code, sig) = match end {
    End::Exit(status) => {
      // No process of the command is left once the launcher says so: read to EOF. Otherwise
      // (it was killed from outside) trailing output gets a short grace.
      if handle.swept() {
        drained.await;
      } else {
        let _ = tokio::time::timeout(PIPE_DRAIN_AFTER_EXIT, drained).await;
      }
      let code = status.and_then(|s| s.code());
      let sig = status
        .and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s))
        .map(signal_name);
      (State::Exited, code, sig)
    }
    End::Stop(state) => {
      {
        let mut st = session.lock_status();
        st.state = state;
      }
      handle.kill();
      let _ = tokio::time::timeout(COMMAND_SESSION_FORCE_FINALIZE, child.wait()).await;
      let _ = tokio::time::timeout(PIPE_DRAIN_AFTER_EXIT, drained).await;
      (state, None, Some(signal_name(libc::SIGKILL)))
    }
  };
  for a in aborts {
    a.abort();
  }
  *session.stdin.lock().await = None;
  {
    let mut st = session.lock_status();
    st.state = state;
    st.exit_code = code;
    st.exit_signal = sig;
    st.stdin_open = false;
    st.finalized = true;
  }
  session.changed.notify_waiters();
}

#[cfg(test)]
mod tests;
