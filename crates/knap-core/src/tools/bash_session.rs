//! `bash` with a command-session runtime: the five input shapes (start with an optional
//! `yieldTimeMs`, `list`, `read`, `write`, `kill`) and their exact page formats.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::args::{is_safe_integer, Args};
use super::bash::format_ms;
use super::{aborted, process_env, ShellToolName, ShellTools, ToolOutput};
use crate::cap::{cap_output, cap_tool_output_from, CapRequest, Direction, Recovery};
use crate::command_session::{CommandSessionRuntime, ReadResult, StartSpec, State, Summary};
use crate::error::{Caveman, ToolError};
use crate::limits::{
  BASH_SESSION_MAX_WAIT_MS, BASH_SESSION_QUERY_MAX_BYTES, BASH_SESSION_READ_CHUNK_BYTES, BASH_TIMEOUT_MS,
  READ_TOOL_OUTPUT_PAGE_OVERHEAD,
};
use crate::text;
use crate::truncate::utf16_prefix;

fn invalid(message: String) -> ToolError {
  ToolError::new("cave_bash_session_input_invalid", message)
}

/// The largest page the tool shows: `min(65536, floor(max(1, cap − 512)·3/4))`.
pub fn page_limit(cap: usize) -> u64 {
  let room = cap.saturating_sub(READ_TOOL_OUTPUT_PAGE_OVERHEAD).max(1) as u64;
  (BASH_SESSION_READ_CHUNK_BYTES as u64).min(room * 3 / 4)
}

struct Inputs<'a> {
  args: Args<'a>,
  page_max: u64,
}

impl Inputs<'_> {
  fn wait(&self, name: &str) -> Result<Option<u64>, ToolError> {
    if !self.args.has(name) {
      return Ok(None);
    }
    match self.args.raw(name).and_then(Value::as_f64) {
      Some(f) if is_safe_integer(f) && (0.0..=BASH_SESSION_MAX_WAIT_MS as f64).contains(&f) => {
        Ok(Some(f as u64))
      }
      _ => Err(invalid(format!(
        "caveman-code: {name} must be an integer from 0 to {BASH_SESSION_MAX_WAIT_MS}"
      ))),
    }
  }

  fn cursor(&self) -> Result<Option<u64>, ToolError> {
    if !self.args.has("cursor") {
      return Ok(None);
    }
    match self.args.raw("cursor").and_then(Value::as_f64) {
      Some(f) if is_safe_integer(f) && f >= 0.0 => Ok(Some(f as u64)),
      _ => Err(invalid(
        "caveman-code: bash session cursor must be a non-negative integer".into(),
      )),
    }
  }

  fn limit(&self) -> Result<u64, ToolError> {
    if !self.args.has("limit") {
      return Ok(self.page_max);
    }
    match self.args.raw("limit").and_then(Value::as_f64) {
      Some(f) if is_safe_integer(f) && f >= 1.0 && f <= self.page_max as f64 => Ok(f as u64),
      _ => Err(invalid(format!(
        "caveman-code: bash session limit must be an integer from 1 to {}",
        self.page_max
      ))),
    }
  }

  fn query(&self) -> Result<Option<String>, ToolError> {
    if !self.args.has("query") {
      return Ok(None);
    }
    match self.args.raw("query").and_then(Value::as_str) {
      Some(q) if !q.is_empty() && q.len() <= BASH_SESSION_QUERY_MAX_BYTES => Ok(Some(q.to_string())),
      _ => Err(invalid(format!(
        "caveman-code: bash session query must be 1 to {BASH_SESSION_QUERY_MAX_BYTES} UTF-8 bytes"
      ))),
    }
  }

  /// The `sessionId` as given (the runtime checks its shape).
  fn session_id(&self) -> Value {
    self.args.raw("sessionId").cloned().unwrap_or(Value::Null)
  }
}

pub(super) async fn run(
  tools: &ShellTools,
  rt: &Arc<CommandSessionRuntime>,
  input: &Value,
  cancel: CancellationToken,
) -> Result<ToolOutput, ToolError> {
  let cap = tools.cap(ShellToolName::Bash);
  let inputs = Inputs {
    args: Args::new("bash", input)?,
    page_max: page_limit(cap),
  };
  let action = inputs.args.opt_string("action")?;
  let (text, label) = match action {
    None => return start(tools, rt, &inputs, cancel).await,
    Some("list") => (list(rt, cap), "bash:list".to_string()),
    Some(action @ ("read" | "write" | "kill")) => {
      let text = match action {
        "read" => read(rt, &inputs, &cancel).await?,
        "write" => write(rt, &inputs, &cancel).await?,
        _ => kill(rt, &inputs).await?,
      };
      let id = inputs.session_id();
      let id = id.as_str().unwrap_or_default();
      (cap_output(&text, cap), format!("bash:{action}:{id}"))
    }
    Some(other) => {
      return Err(invalid(format!(
        "caveman-code: bash action must be list, read, write or kill (got {other})"
      )))
    }
  };
  Ok(ToolOutput {
    text,
    label: Some(label),
  })
}

fn suffix(state: State, exit_code: Option<i32>) -> String {
  match state {
    State::Exited => format!(
      " · exit {}",
      exit_code.map_or("null".to_string(), |c| c.to_string())
    ),
    State::TimedOut => " · hard timeout".to_string(),
    State::Killed => " · killed".to_string(),
    State::Running | State::UnknownAfterRestart => String::new(),
  }
}

fn list(rt: &CommandSessionRuntime, cap: usize) -> String {
  let sessions = rt.list();
  if sessions.is_empty() {
    return "command sessions: none".to_string();
  }
  let mut lines = vec![format!(
    "command sessions: {} retained · oldest first",
    sessions.len()
  )];
  for s in &sessions {
    let exit = if s.state == State::Exited {
      suffix(s.state, s.exit_code)
    } else {
      String::new()
    };
    let stdin = if s.stdin_open {
      "stdin open"
    } else {
      "stdin closed"
    };
    lines.push(format!(
      "{} · {}{exit} · {stdin} · retained bytes {}-{}",
      s.session_id,
      s.state.as_str(),
      s.available_from,
      s.available_to
    ));
  }
  cap_output(&lines.join("\n"), cap)
}

/// A session page (before `capOutput`).
fn page(r: &ReadResult, prefix: Option<String>) -> String {
  if r.state == State::UnknownAfterRestart {
    return format!(
      "session {} · unknown_after_restart\nsession belongs to another or closed runtime; process adoption is disabled",
      r.session_id
    );
  }
  let mut lines = vec![format!(
    "session {} · {}{}",
    r.session_id,
    r.state.as_str(),
    suffix(r.state, r.exit_code)
  )];
  lines.extend(prefix);
  let running = r.state == State::Running;
  let discarded = format!("older output discarded before absolute byte {}", r.available_from);
  if r.match_start == Some(None) {
    lines.push(format!(
      "searched retained bytes {}-{} of {}",
      r.cursor.max(r.available_from),
      r.next_cursor,
      r.available_to
    ));
    if r.truncated_before_cursor {
      lines.push(discarded);
    }
    lines.push("(no literal match)".to_string());
    if r.has_more {
      lines.push(format!("[continue search at cursor {}]", r.next_cursor));
    } else if running {
      lines.push(format!(
        "[still running; search again at cursor {}]",
        r.next_cursor
      ));
    }
    return lines.join("\n");
  }
  let mut position = Vec::new();
  if let Some(Some(m)) = r.match_start {
    position.push(format!("literal match at byte {m}"));
  }
  position.push(format!(
    "bytes {}-{} of {}",
    r.output_start, r.next_cursor, r.available_to
  ));
  position.push(format!("next cursor {}", r.next_cursor));
  if r.truncated_before_cursor {
    position.push(discarded);
  }
  lines.push(position.join(" · "));
  lines.push(if r.output.is_empty() {
    "(no new output)".to_string()
  } else if r.output_encoding == "base64" {
    format!(
      "[base64 bytes {}-{}]\n{}",
      r.output_start, r.next_cursor, r.output
    )
  } else {
    r.output.clone()
  });
  if r.has_more {
    lines.push(format!("[continue at cursor {}]", r.next_cursor));
  } else if running {
    lines.push(format!("[still running; read again at cursor {}]", r.next_cursor));
  }
  lines.join("\n")
}

fn read_spec(
  rt: &CommandSessionRuntime,
  inputs: &Inputs<'_>,
  cursor: u64,
  limit: u64,
  wait_ms: u64,
  query: Option<String>,
) -> Result<crate::command_session::ReadSpec, ToolError> {
  let mut o = Map::new();
  o.insert("sessionId".into(), inputs.session_id());
  o.insert("cursor".into(), json!(cursor));
  o.insert(
    "limit".into(),
    json!(limit.min(rt.options().max_read_bytes as u64)),
  );
  o.insert("waitMs".into(), json!(wait_ms.min(rt.options().max_wait_ms)));
  if let Some(q) = query {
    o.insert("query".into(), json!(q));
  }
  rt.parse_read(&Value::Object(o), false)
}

async fn read(
  rt: &CommandSessionRuntime,
  inputs: &Inputs<'_>,
  cancel: &CancellationToken,
) -> Result<String, ToolError> {
  let wait_ms = inputs.wait("waitMs")?.unwrap_or(0);
  let cursor = inputs.cursor()?.unwrap_or(0);
  let limit = inputs.limit()?;
  let query = inputs.query()?;
  let spec = read_spec(rt, inputs, cursor, limit, wait_ms, query)?;
  Ok(page(&rt.read(spec, cancel).await?, None))
}

async fn write(
  rt: &CommandSessionRuntime,
  inputs: &Inputs<'_>,
  cancel: &CancellationToken,
) -> Result<String, ToolError> {
  let wait_ms = inputs.wait("waitMs")?.unwrap_or(0);
  let cursor = inputs.cursor()?;
  let limit = inputs.limit()?;
  let mut o = Map::new();
  for key in ["sessionId", "input", "closeStdin"] {
    if let Some(v) = inputs.args.raw(key) {
      o.insert(key.into(), v.clone());
    }
  }
  o.entry("sessionId").or_insert(Value::Null);
  let close = inputs.args.raw("closeStdin") == Some(&Value::Bool(true));
  let written = rt.write_json(&Value::Object(o), cancel).await?;
  if written.state == State::UnknownAfterRestart {
    return Ok(page(
      &crate::command_session::unknown_page(&written.session_id, cursor.unwrap_or(0)),
      None,
    ));
  }
  let prefix = if written.accepted {
    format!(
      "stdin accepted {} bytes{}",
      written.bytes,
      if close { " · stdin closed" } else { "" }
    )
  } else {
    format!("stdin not accepted · {}", written.state.as_str())
  };
  let mut read_wait = wait_ms;
  if close && wait_ms > 0 {
    rt.wait_ended(
      &written.session_id,
      Instant::now() + Duration::from_millis(wait_ms),
      cancel,
    )
    .await?;
    read_wait = 0;
  }
  let spec = read_spec(
    rt,
    inputs,
    cursor.unwrap_or(written.output_cursor),
    limit,
    read_wait,
    None,
  )?;
  Ok(page(&rt.read(spec, cancel).await?, Some(prefix)))
}

async fn kill(rt: &CommandSessionRuntime, inputs: &Inputs<'_>) -> Result<String, ToolError> {
  let cursor = inputs.cursor()?.unwrap_or(0);
  let limit = inputs.limit()?;
  let killed = rt.kill_json(&inputs.session_id()).await?;
  if killed.state == State::UnknownAfterRestart {
    return Ok(page(&killed, None));
  }
  let spec = read_spec(rt, inputs, cursor, limit, 0, None)?;
  Ok(page(&rt.read(spec, &CancellationToken::new()).await?, None))
}

/// A command: a session running `/bin/sh -c`, waited for (the one-shot format), or yielded
/// after `yieldTimeMs` as a session page when it still runs.
async fn start(
  tools: &ShellTools,
  rt: &Arc<CommandSessionRuntime>,
  inputs: &Inputs<'_>,
  cancel: CancellationToken,
) -> Result<ToolOutput, ToolError> {
  let command = inputs.args.string("command")?.to_string();
  let yield_ms = inputs.wait("yieldTimeMs")?;
  let timeout_ms = inputs
    .args
    // `min(timeoutMs, 120000)` as the reference; a zero or negative timeout (the reference has no lower
    // bound; such a timeout can only end the command at once) is refused.
    .opt_integer_from("timeoutMs", 1.0)?
    .map(|t| t.min(BASH_TIMEOUT_MS as f64))
    .unwrap_or(BASH_TIMEOUT_MS as f64);
  let root = tools.workspace().root()?;
  let spec = StartSpec {
    command: "/bin/sh".into(),
    args: vec!["-c".into(), command.clone()],
    cwd: root.path.clone(),
    env: process_env(true),
    stdin_pipe: yield_ms.is_some(),
    timeout: Duration::from_millis((timeout_ms as u64).max(1)),
  };
  let label = format!("bash:{}", utf16_prefix(&command, 60));
  let id = match rt.start(spec, Some(cancel.clone())).await {
    Ok(started) => started.session_id,
    Err(e) if e.code == "command_session_limit_reached" => {
      return Err(ToolError::new(
        e.code,
        format!(
          "caveman-code: all {} command sessions are still live; kill one with bash({{action:\"kill\",sessionId}}) before starting another",
          rt.options().max_sessions
        ),
      ))
    }
    Err(e) if e.code.starts_with("command_session_spawn_failed") || e.code.starts_with("command_session_launch_invalid") => {
      let reason = e.message.split_once(':').map_or(e.message.as_str(), |(_, r)| r).to_string();
      return Err(shell_unavailable(&reason));
    }
    Err(e) => return Err(ToolError::new(e.code.clone(), format!("caveman-code: bash could not start: {}", e.message))),
  };
  let wait = match yield_ms {
    Some(y) => Duration::from_millis(y),
    None => Duration::from_millis(timeout_ms as u64 + 1000),
  };
  rt.wait_ended(&id, Instant::now() + wait, &cancel)
    .await
    .map_err(|_| aborted())?;
  if cancel.is_cancelled() {
    return Err(aborted());
  }
  let running = rt.summary(&id).is_some_and(|s| s.state == State::Running);
  let cap = tools.cap(ShellToolName::Bash);
  if running && yield_ms.is_some() {
    let mut o = Map::new();
    o.insert("sessionId".into(), json!(id));
    o.insert(
      "limit".into(),
      json!(page_limit(cap).min(rt.options().max_read_bytes as u64)),
    );
    let spec = rt.parse_read(&Value::Object(o), false)?;
    let text = cap_output(&page(&rt.read(spec, &cancel).await?, None), cap);
    return Ok(ToolOutput {
      text,
      label: Some(label),
    });
  }
  if running {
    // Past its own timeout and the grace: stop it and report what it left.
    rt.kill(&id).await?;
  }
  let Some((summary, bytes)) = rt.capture(&id)? else {
    return Err(ToolError::new("cave_internal", "the bash session disappeared"));
  };
  one_shot(tools, &id, &summary, bytes, timeout_ms, &label).map(|text| ToolOutput {
    text,
    label: Some(label),
  })
}

fn shell_unavailable(reason: &str) -> ToolError {
  let e = ToolError::caveman(Caveman::ShellUnavailable);
  ToolError::new(e.code, format!("{}: {reason}", e.message))
}

/// The one-shot format over a finished session's capture.
fn one_shot(
  tools: &ShellTools,
  id: &str,
  s: &Summary,
  bytes: Vec<u8>,
  timeout_ms: f64,
  label: &str,
) -> Result<String, ToolError> {
  if let Some(reason) = &s.spawn_error {
    return Err(shell_unavailable(reason));
  }
  let status = match s.state {
    State::TimedOut => format!("exit timeout after {}ms", format_ms(timeout_ms)),
    State::Killed => "exit killed".to_string(),
    _ => match s.exit_code {
      // 127 means "shell missing" to the tool, even when the command itself exited so.
      Some(127) => return Err(ToolError::caveman(Caveman::ShellUnavailable)),
      Some(code) => format!("exit {code}"),
      None => "exit null".to_string(),
    },
  };
  let mut body = match String::from_utf8(bytes) {
    Ok(text) => text,
    Err(e) => format!(
      "[base64 command output]\n{}",
      base64::engine::general_purpose::STANDARD.encode(e.as_bytes())
    ),
  };
  if body.trim().is_empty() {
    body = text::BASH_NO_OUTPUT.to_string();
  }
  let (from, to) = (s.available_from, s.available_to);
  let recovery = match tools.store() {
    Some(store) => Recovery::Store(store),
    None => Recovery::Resume(format!(
      "resume retained output with bash({{\"sessionId\":\"{id}\",\"action\":\"read\",\"cursor\":{from}}})"
    )),
  };
  let source = (from > 0)
    .then(|| format!("retained bytes {from}-{to}; older output discarded before absolute byte {from}"));
  let cap = tools.cap(ShellToolName::Bash);
  let capped = cap_tool_output_from(
    CapRequest::whole(
      body,
      cap.saturating_sub(status.len() + 1).max(1),
      Direction::Tail,
      label,
      from == 0,
      recovery,
    ),
    source.as_deref(),
  );
  Ok(format!("{status}\n{capped}"))
}
