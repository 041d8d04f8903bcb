//! The HTTP execution-backend protocol for one workspace (caveman-code.md §5.3): `/exec`,
//! `/read`, `/write`, `/cancel`, `/prepare` (`/snapshot` and `/restore` answer 501).
//!
//! Order of every request: route → method → bearer token (constant-time) → a slot (`/exec`:
//! refused with 429 when all are taken; `/read`, `/write`: wait for one) → body within its
//! limit → JSON with exactly the known keys → path mapped from the client's workspace to this
//! one and contained by knap-core's workspace code (realpath check, then `openat2` beneath the
//! root) → the work. Nothing before the token check reads the body, touches a file or starts a
//! process.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, Response, StatusCode};
use base64::Engine as _;
use bytes::Bytes;
use knap_core::exec::{max_output_from, timeout_from_ms, ExecRequest, ExecutionBackend, LocalBackend};
use knap_core::workspace::{normalize, replace_atomically, Resolved, Workspace};
use knap_core::ToolError;
use serde_json::{json, Map, Value};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Body limit of the small endpoints (`/cancel`, `/prepare`, `/snapshot`, `/restore`).
const SMALL_BODY_BYTES: usize = 64 * 1024;
/// `/read` encodes this much per chunk: a multiple of 3, so chunks are whole base64 quads.
const READ_CHUNK_BYTES: usize = 48 * 1024;
/// How long `/cancel` waits for the cancelled command's process group to be gone.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

pub struct Limits {
  /// Largest request body (a `/write` carries base64 data).
  pub max_request_bytes: usize,
  /// Largest file `/read` sends (before base64).
  pub max_read_bytes: u64,
  /// Largest `maxOutputBytes` an `/exec` may ask for.
  pub max_output_bytes: usize,
  /// Largest `timeoutMs` an `/exec` may ask for.
  pub max_timeout_ms: u64,
  /// `/exec` calls running at once; more are refused with 429.
  pub max_concurrency: usize,
  /// `/read` and `/write` calls at once; more wait. Memory for bodies stays below
  /// `max_transfers × max_request_bytes`.
  pub max_transfers: usize,
}

impl Default for Limits {
  fn default() -> Self {
    Self {
      max_request_bytes: 64 * 1024 * 1024,
      max_read_bytes: 48 * 1024 * 1024,
      max_output_bytes: 16 * 1024 * 1024,
      max_timeout_ms: 600_000,
      max_concurrency: 16,
      max_transfers: 4,
    }
  }
}

/// An `/exec` in flight, findable by `/cancel`.
struct Running {
  cancel: CancellationToken,
  done: Arc<Notify>,
  finished: Arc<AtomicBool>,
}

pub struct Server {
  workspace: Workspace,
  /// The client's workspace root: request paths are absolute paths under it.
  client_root: PathBuf,
  token: Vec<u8>,
  limits: Limits,
  backend: LocalBackend,
  exec_slots: Arc<Semaphore>,
  transfer_slots: Arc<Semaphore>,
  running: Arc<Mutex<HashMap<String, Running>>>,
  /// Fired at shutdown: running commands are killed.
  stopping: CancellationToken,
}

/// A reply: status, JSON body, and what the log line adds.
struct Reply {
  status: StatusCode,
  body: Body,
  note: String,
}

fn json_reply(status: StatusCode, body: Value, note: String) -> Reply {
  Reply {
    status,
    body: Body::from(body.to_string()),
    note,
  }
}

fn error(status: StatusCode, code: &str) -> Reply {
  json_reply(status, json!({ "error": code }), code.to_string())
}

fn bad(field: &str) -> Reply {
  error(StatusCode::BAD_REQUEST, &format!("cave_exec_server_request_invalid:{field}"))
}

/// A workspace error as the contract's status: escapes are 403, missing paths 404.
fn fs_error(e: &ToolError, what: &str) -> Reply {
  match e.code.as_str() {
    "cave_workspace_escape" => error(StatusCode::FORBIDDEN, "path_escapes_workspace"),
    "ENOENT" | "ENOTDIR" => error(StatusCode::NOT_FOUND, "not_found"),
    "EISDIR" => error(StatusCode::UNPROCESSABLE_ENTITY, "not_a_file"),
    _ => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("cave_exec_server_{what}_failed")),
  }
}

macro_rules! log {
  ($($arg:tt)*) => { $crate::server::log_line(format_args!($($arg)*)) };
}
pub(crate) use log;

/// One log line on stderr, `knap-exec-server: ` first. Never panics: a closed stderr must not
/// take a handler (or the command's bookkeeping) down.
pub fn log_line(line: std::fmt::Arguments) {
  use std::io::Write;
  let _ = writeln!(std::io::stderr().lock(), "knap-exec-server: {line}");
}

/// Compares in time that depends only on the lengths (the token's length is not secret).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
  if a.len() != b.len() {
    return false;
  }
  a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Server {
  pub fn new(workspace: PathBuf, client_root: PathBuf, token: Vec<u8>, limits: Limits) -> Result<Arc<Self>, ToolError> {
    let ws = Workspace::new(&workspace);
    ws.root()?;
    Ok(Arc::new(Self {
      workspace: ws,
      client_root: normalize(&client_root),
      token,
      exec_slots: Arc::new(Semaphore::new(limits.max_concurrency)),
      transfer_slots: Arc::new(Semaphore::new(limits.max_transfers)),
      limits,
      backend: LocalBackend::new(),
      running: Arc::new(Mutex::new(HashMap::new())),
      stopping: CancellationToken::new(),
    }))
  }

  fn authorized(&self, headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()) else {
      return false;
    };
    // The scheme is case-insensitive (RFC 9110 §11.1); the token is compared whole.
    let Some((scheme, given)) = value.split_at_checked(7) else {
      return false;
    };
    scheme.eq_ignore_ascii_case(b"bearer ") && same_secret(given, &self.token)
  }

  /// Kills every running command (shutdown).
  pub fn stop(&self) {
    self.stopping.cancel();
    self.backend.close();
  }

  pub async fn handle(self: Arc<Self>, req: Request<Body>) -> Response<Body> {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let reply = self.route(req).await;
    log!(
      "{method} {path} {} {}ms{}{}",
      reply.status.as_u16(),
      started.elapsed().as_millis(),
      if reply.note.is_empty() { "" } else { " " },
      reply.note
    );
    Response::builder()
      .status(reply.status)
      .header(header::CONTENT_TYPE, "application/json")
      .body(reply.body)
      .unwrap_or_default()
  }

  async fn route(self: &Arc<Self>, req: Request<Body>) -> Reply {
    let endpoint = match req.uri().path() {
      p @ ("/exec" | "/read" | "/write" | "/cancel" | "/prepare" | "/snapshot" | "/restore") => &p[1..],
      _ => return error(StatusCode::NOT_FOUND, "cave_exec_server_endpoint_unknown"),
    };
    let endpoint = endpoint.to_string();
    if req.method() != Method::POST {
      return error(StatusCode::METHOD_NOT_ALLOWED, "cave_exec_server_method_not_allowed");
    }
    if !self.authorized(req.headers()) {
      return error(StatusCode::UNAUTHORIZED, "cave_exec_server_unauthorized");
    }
    // The slot is taken before the body is read, so bodies in memory are bounded too.
    let (slot, body_limit) = match endpoint.as_str() {
      "exec" => match self.exec_slots.clone().try_acquire_owned() {
        Ok(slot) => (Some(slot), self.limits.max_request_bytes),
        Err(_) => return error(StatusCode::TOO_MANY_REQUESTS, "cave_exec_server_busy"),
      },
      "read" | "write" => match self.transfer_slots.clone().acquire_owned().await {
        Ok(slot) => (Some(slot), self.limits.max_request_bytes),
        Err(_) => return error(StatusCode::SERVICE_UNAVAILABLE, "cave_exec_server_stopping"),
      },
      _ => (None, SMALL_BODY_BYTES),
    };
    let body = match axum::body::to_bytes(req.into_body(), body_limit).await {
      Ok(b) => b,
      Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, "cave_exec_server_request_too_large"),
    };
    let map = match parse_object(&body) {
      Ok(map) => map,
      Err(r) => return r,
    };
    match endpoint.as_str() {
      "exec" => self.exec(map).await,
      "read" => self.clone().read(map, slot).await,
      "write" => self.clone().write(map).await,
      "cancel" => self.cancel(map).await,
      "prepare" => match only(&map, &[]) {
        Err(r) => r,
        Ok(()) => json_reply(StatusCode::OK, json!({}), String::new()),
      },
      _ => error(StatusCode::NOT_IMPLEMENTED, "cave_exec_server_snapshot_unsupported"),
    }
  }

  /// A client path (absolute, under the client's workspace) as a contained path of this one.
  /// Blocking (realpath): call it off the async workers.
  fn contain(&self, given: Option<&Value>, field: &str) -> Result<Resolved, Reply> {
    let Some(p) = given.and_then(Value::as_str).filter(|p| p.starts_with('/') && !p.contains('\0')) else {
      return Err(bad(field));
    };
    let client = normalize(Path::new(p));
    let Ok(rel) = client.strip_prefix(&self.client_root) else {
      return Err(error(StatusCode::FORBIDDEN, "path_escapes_workspace"));
    };
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    self.workspace.resolve(&rel.to_string_lossy()).map_err(|e| match e.code.as_str() {
      "cave_workspace_escape" => error(StatusCode::FORBIDDEN, "path_escapes_workspace"),
      // Over the workspace's path limits (bytes, components): the request is at fault.
      "cave_path_invalid" => bad(field),
      _ => error(StatusCode::INTERNAL_SERVER_ERROR, "cave_exec_server_workspace_unavailable"),
    })
  }

  async fn exec(self: &Arc<Self>, map: Map<String, Value>) -> Reply {
    let (exec_id, request) = match self.exec_request(map).await {
      Ok(x) => x,
      Err(r) => return r,
    };
    let cancel = request.cancel.clone();
    let budget = request.max_output_bytes;
    let done = Arc::new(Notify::new());
    let finished = Arc::new(AtomicBool::new(false));
    {
      let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
      if running.contains_key(&exec_id) {
        return error(StatusCode::CONFLICT, "cave_exec_server_exec_id_in_use");
      }
      let entry = Running {
        cancel: cancel.clone(),
        done: done.clone(),
        finished: finished.clone(),
      };
      running.insert(exec_id.clone(), entry);
    }
    // A client that goes away drops this handler: the guard then cancels the command, whose
    // task (below) still kills the process group and frees the id.
    let client_gone = Arc::new(AtomicBool::new(false));
    let mut guard = CancelOnDrop(Some(cancel.clone()), client_gone.clone());
    let stopping = self.stopping.clone();
    let watch = {
      let cancel = cancel.clone();
      tokio::spawn(async move {
        stopping.cancelled().await;
        cancel.cancel();
      })
    };
    let running = self.running.clone();
    let exec = self.backend.exec(request);
    let id = exec_id.clone();
    let task = tokio::spawn(async move {
      let started = Instant::now();
      let result = exec.await;
      watch.abort();
      if client_gone.load(Ordering::SeqCst) {
        log!("POST /exec - {}ms exec={id} client gone, cancelled", started.elapsed().as_millis());
      }
      running.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
      finished.store(true, Ordering::SeqCst);
      done.notify_waiters();
      result
    });
    let result = task.await;
    // Answered: the guard has nothing left to cancel.
    guard.0 = None;
    let r = match result {
      Ok(Ok(r)) => r,
      _ => return error(StatusCode::INTERNAL_SERVER_ERROR, "cave_exec_server_exec_failed"),
    };
    // The client reads at most 2·maxOutputBytes + 4096 bytes: escapes must fit in that too.
    let (stdout, stderr, cut) = fit_json(&r.stdout, &r.stderr, 2 * budget);
    let mut body = json!({
      "stdout": stdout,
      "stderr": stderr,
      "code": r.code,
      "timedOut": r.timed_out,
      "truncated": r.truncated || cut,
    });
    if r.start_failed {
      body["startFailed"] = json!(true);
    }
    let note = format!(
      "exec={exec_id} code={}{}{}{}",
      r.code.map_or("null".to_string(), |c| c.to_string()),
      if r.timed_out { " timed_out" } else { "" },
      if r.aborted { " cancelled" } else { "" },
      if r.truncated || cut { " truncated" } else { "" }
    );
    json_reply(StatusCode::OK, body, note)
  }

  /// Checks an `/exec` body and builds the request: cwd mapped and contained, the server's
  /// PATH/HOME/TMPDIR/USER and PWD (= cwd) under the request's env.
  async fn exec_request(self: &Arc<Self>, map: Map<String, Value>) -> Result<(String, ExecRequest), Reply> {
    only(&map, &["execId", "command", "args", "cwd", "env", "timeoutMs", "maxOutputBytes"])?;
    let exec_id = map
      .get("execId")
      .and_then(Value::as_str)
      .filter(|id| !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)))
      .map(str::to_string)
      .ok_or_else(|| bad("execId"))?;
    let command = map.get("command").and_then(Value::as_str).map(str::to_string).ok_or_else(|| bad("command"))?;
    let args = match map.get("args") {
      Some(Value::Array(a)) => a.iter().map(|v| v.as_str().map(str::to_string)).collect::<Option<Vec<_>>>(),
      _ => None,
    }
    .ok_or_else(|| bad("args"))?;
    let env = match map.get("env") {
      Some(Value::Object(e)) => e
        .iter()
        .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
        .collect::<Option<Vec<_>>>(),
      _ => None,
    }
    .ok_or_else(|| bad("env"))?;
    let timeout = map
      .get("timeoutMs")
      .and_then(Value::as_f64)
      .and_then(|ms| timeout_from_ms(ms).ok())
      .ok_or_else(|| bad("timeoutMs"))?;
    let max_output_bytes = map
      .get("maxOutputBytes")
      .and_then(Value::as_f64)
      .and_then(|n| max_output_from(n).ok())
      .ok_or_else(|| bad("maxOutputBytes"))?;
    if timeout > Duration::from_millis(self.limits.max_timeout_ms) {
      return Err(error(StatusCode::BAD_REQUEST, "cave_exec_server_timeout_too_long"));
    }
    if max_output_bytes > self.limits.max_output_bytes {
      return Err(error(StatusCode::BAD_REQUEST, "cave_exec_server_max_output_bytes_too_large"));
    }
    let cwd = {
      let server = self.clone();
      let cwd = map.get("cwd").cloned();
      blocking(move || server.contain(cwd.as_ref(), "cwd")).await?.abs
    };
    let mut full: Vec<(String, String)> = ["PATH", "HOME", "TMPDIR", "USER"]
      .iter()
      .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
      .collect();
    full.push(("PWD".into(), cwd.to_string_lossy().into_owned()));
    for (k, v) in env {
      full.retain(|(key, _)| key != &k);
      full.push((k, v));
    }
    let request = ExecRequest {
      command,
      args,
      cwd,
      env: full,
      timeout,
      max_output_bytes,
      cancel: CancellationToken::new(),
    };
    if let Err(e) = request.validate() {
      return Err(bad(e.code.rsplit(':').next().unwrap_or("request")));
    }
    Ok((exec_id, request))
  }

  /// Cancels the matching `/exec` and answers once its process group is gone (or after 5 s);
  /// unknown ids are ignored.
  async fn cancel(&self, map: Map<String, Value>) -> Reply {
    if let Err(r) = only(&map, &["execId"]) {
      return r;
    }
    let Some(id) = map.get("execId").and_then(Value::as_str) else {
      return bad("execId");
    };
    let found = {
      let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
      running.get(id).map(|r| (r.cancel.clone(), r.done.clone(), r.finished.clone()))
    };
    let Some((cancel, done, finished)) = found else {
      return json_reply(StatusCode::OK, json!({}), format!("exec={id} unknown"));
    };
    let notified = done.notified();
    tokio::pin!(notified);
    notified.as_mut().enable();
    cancel.cancel();
    if !finished.load(Ordering::SeqCst) {
      let _ = tokio::time::timeout(CANCEL_WAIT, notified).await;
    }
    json_reply(StatusCode::OK, json!({}), format!("exec={id} cancelled"))
  }

  /// Streams the file as `{"data":"<base64>"}` in chunks: memory stays bounded whatever the
  /// file; a file over the read limit (and no `maxBytes` below it) is refused with 413.
  async fn read(self: Arc<Self>, map: Map<String, Value>, slot: Option<OwnedSemaphorePermit>) -> Reply {
    if let Err(r) = only(&map, &["path", "maxBytes"]) {
      return r;
    }
    let max = match map.get("maxBytes") {
      None => None,
      Some(v) => match v.as_f64().filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0) {
        Some(f) => Some(f as u64),
        None => return bad("maxBytes"),
      },
    };
    let server = self.clone();
    let opened = blocking(move || {
      let resolved = server.contain(map.get("path"), "path")?;
      let candidate = resolved.rel.to_string_lossy().into_owned();
      let file = server.workspace.open_read(&candidate, &resolved, "open").map_err(|e| fs_error(&e, "read"))?;
      let meta = file.metadata().map_err(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "cave_exec_server_read_failed"))?;
      if !meta.is_file() {
        return Err(error(StatusCode::UNPROCESSABLE_ENTITY, "not_a_file"));
      }
      Ok((file, meta.len()))
    })
    .await;
    let (file, size) = match opened {
      Ok(x) => x,
      Err(r) => return r,
    };
    let want = max.map_or(size, |m| m.min(size));
    if want > self.limits.max_read_bytes {
      return error(StatusCode::PAYLOAD_TOO_LARGE, "cave_exec_server_read_too_large");
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(2);
    tokio::task::spawn_blocking(move || {
      let mut reader = file.take(want);
      let mut buf = vec![0u8; READ_CHUNK_BYTES];
      if tx.blocking_send(Ok(Bytes::from_static(b"{\"data\":\""))).is_err() {
        return;
      }
      loop {
        let mut filled = 0;
        while filled < buf.len() {
          match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
              let _ = tx.blocking_send(Err(e));
              return;
            }
          }
        }
        if filled > 0 && tx.blocking_send(Ok(Bytes::from(B64.encode(&buf[..filled])))).is_err() {
          return;
        }
        if filled < buf.len() {
          break;
        }
      }
      // Freed before the last bytes go out: a client that saw the whole body finds it free.
      drop(slot);
      let _ = tx.blocking_send(Ok(Bytes::from_static(b"\"}")));
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    Reply {
      status: StatusCode::OK,
      body: Body::from_stream(stream),
      note: format!("bytes={want}"),
    }
  }

  async fn write(self: Arc<Self>, map: Map<String, Value>) -> Reply {
    if let Err(r) = only(&map, &["path", "data"]) {
      return r;
    }
    let Some(data) = map.get("data").and_then(Value::as_str).and_then(|d| B64.decode(d).ok()) else {
      return bad("data");
    };
    let n = data.len();
    let server = self.clone();
    let written = blocking(move || {
      let resolved = server.contain(map.get("path"), "path")?;
      let candidate = resolved.rel.to_string_lossy().into_owned();
      let (dir, name) = server.workspace.open_parent(&candidate, &resolved).map_err(|e| fs_error(&e, "write"))?;
      // Never cancelled: the body is already here (under the endpoint's limit), and a write
      // stopped halfway would answer nobody; the temporary-then-rename keeps it atomic anyway.
      replace_atomically(&dir, &name, &data, &resolved, &CancellationToken::new()).map_err(|e| fs_error(&e, "write"))
    })
    .await;
    match written {
      Ok(()) => json_reply(StatusCode::OK, json!({}), format!("bytes={n}")),
      Err(r) => r,
    }
  }
}

struct CancelOnDrop(Option<CancellationToken>, Arc<AtomicBool>);

impl Drop for CancelOnDrop {
  fn drop(&mut self) {
    if let Some(token) = self.0.take() {
      if !token.is_cancelled() {
        self.1.store(true, Ordering::SeqCst);
      }
      token.cancel();
    }
  }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, Reply> + Send + 'static) -> Result<T, Reply> {
  tokio::task::spawn_blocking(f)
    .await
    .unwrap_or_else(|_| Err(error(StatusCode::INTERNAL_SERVER_ERROR, "cave_exec_server_internal")))
}

fn parse_object(body: &[u8]) -> Result<Map<String, Value>, Reply> {
  if body.is_empty() {
    return Ok(Map::new());
  }
  match serde_json::from_slice(body) {
    Ok(Value::Object(map)) => Ok(map),
    _ => Err(error(StatusCode::BAD_REQUEST, "cave_exec_server_request_invalid:json")),
  }
}

/// Refuses keys the endpoint does not act on.
fn only(map: &Map<String, Value>, known: &[&str]) -> Result<(), Reply> {
  match map.keys().find(|k| !known.contains(&k.as_str())) {
    Some(k) => Err(bad(k)),
    None => Ok(()),
  }
}

/// The output as JSON strings whose encoded length (escapes included) is at most `budget`:
/// stdout first, stderr in what is left; `true` when anything was cut. Invalid UTF-8 becomes
/// U+FFFD as in the reference's `Buffer#toString`.
fn fit_json(stdout: &[u8], stderr: &[u8], budget: usize) -> (String, String, bool) {
  let mut left = budget;
  let mut cut = false;
  let mut fit = |bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    let mut end = 0;
    for (i, c) in text.char_indices() {
      let cost = match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
      };
      if cost > left {
        cut = true;
        break;
      }
      left -= cost;
      end = i + c.len_utf8();
    }
    text[..end].to_string()
  };
  let out = fit(stdout);
  let err = fit(stderr);
  (out, err, cut)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn tokens_compare_whole() {
    assert!(same_secret(b"0123456789abcdef", b"0123456789abcdef"));
    assert!(!same_secret(b"0123456789abcdef", b"0123456789abcdeF"));
    assert!(!same_secret(b"0123456789abcdef", b"0123456789abcde"));
    assert!(!same_secret(b"", b"x"));
  }

  #[test]
  fn bearer_scheme_is_case_insensitive_and_the_token_exact() {
    let dir = temp_dir("auth");
    let server = Server::new(dir.clone(), dir.clone(), b"0123456789abcdef".to_vec(), Limits::default()).unwrap();
    let with = |v: &str| {
      let mut h = HeaderMap::new();
      h.insert(header::AUTHORIZATION, v.parse().unwrap());
      server.authorized(&h)
    };
    assert!(with("Bearer 0123456789abcdef"));
    assert!(with("bearer 0123456789abcdef"));
    for v in ["Bearer  0123456789abcdef", "Bearer 0123456789abcdef ", "Basic 0123456789abcdef", "Bearer", "0123456789abcdef"] {
      assert!(!with(v), "{v}");
    }
    assert!(!server.authorized(&HeaderMap::new()));
    let _ = std::fs::remove_dir_all(dir);
  }

  #[test]
  fn client_paths_map_into_the_workspace_or_are_refused() {
    let dir = temp_dir("paths");
    std::fs::write(dir.join("a.txt"), "a").unwrap();
    let server = Server::new(dir.clone(), "/client/ws".into(), b"0123456789abcdef".to_vec(), Limits::default()).unwrap();
    let ok = server.contain(Some(&json!("/client/ws/sub/../a.txt")), "path").ok().unwrap();
    assert_eq!(ok.abs, dir.canonicalize().unwrap().join("a.txt"));
    for bad in ["/client/wsx/a.txt", "/client/ws/../x", "/etc/passwd"] {
      let r = server.contain(Some(&json!(bad)), "path").err().unwrap();
      assert_eq!(r.status, StatusCode::FORBIDDEN, "{bad}");
    }
    assert_eq!(server.contain(Some(&json!("rel")), "path").err().unwrap().status, StatusCode::BAD_REQUEST);
    let _ = std::fs::remove_dir_all(dir);
  }

  #[test]
  fn output_fits_the_clients_cap_after_escaping() {
    assert_eq!(fit_json(b"abc", b"de", 10), ("abc".into(), "de".into(), false));
    // NULs cost six bytes each as JSON: only one fits in 8, stderr gets the remaining 2.
    assert_eq!(fit_json(b"\0\0", b"xyz", 8), ("\0".into(), "xy".into(), true));
    // A multi-byte character is kept whole or dropped whole.
    assert_eq!(fit_json("aé".as_bytes(), b"", 2), ("a".into(), "".into(), true));
    // Invalid UTF-8 is U+FFFD (three bytes).
    assert_eq!(fit_json(b"\xff", b"", 3), ("\u{fffd}".into(), "".into(), false));
  }

  fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("knap-exec-server-test-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
  }
}
