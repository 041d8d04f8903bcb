//! `bash` (one-shot mode): `/bin/sh -c` in the workspace through the execution backend.

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args::Args;
use super::{aborted, ShellToolName, ShellTools, ToolOutput};
use crate::cap::{cap_tool_output, CapRequest, Direction};
use crate::error::{Caveman, ToolError};
use crate::exec::ExecRequest;
use crate::limits::{BASH_TIMEOUT_MS, PROCESS_CAPTURE_MAX_BYTES};
use crate::text;
use crate::truncate::utf16_prefix;

/// The only variables a command sees (`buildCodingProcessEnv`, local backend): never the
/// caller's API keys.
pub const LOCAL_ENV_ALLOW_LIST: &[&str] = &[
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LC_ALL",
  "LC_CTYPE",
  "TZ",
  "TERM",
  "TMPDIR",
  "PWD",
  "ComSpec",
  "PATHEXT",
  "SystemRoot",
  "TEMP",
  "TMP",
  "USERPROFILE",
  "APPDATA",
  "LOCALAPPDATA",
];
/// Non-local backends get only locale and terminal settings.
pub const REMOTE_ENV_ALLOW_LIST: &[&str] = &["LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"];

pub fn process_env(local: bool) -> Vec<(String, String)> {
  let list = if local {
    LOCAL_ENV_ALLOW_LIST
  } else {
    REMOTE_ENV_ALLOW_LIST
  };
  list
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
    .collect()
}

pub(super) async fn run(
  tools: &ShellTools,
  input: &Value,
  cancel: CancellationToken,
) -> Result<ToolOutput, ToolError> {
  if let Some(rt) = tools.sessions() {
    return super::bash_session::run(tools, rt, input, cancel).await;
  }
  let args = Args::new("bash", input)?;
  let local = tools.is_local();
  // Session inputs (`action`, `sessionId`) and `yieldTimeMs` need a command-session runtime.
  if !args.has("command") && (args.has("action") || args.has("sessionId")) {
    return Err(ToolError::coded(
      "cave_execution_backend_command_sessions_local_only",
    ));
  }
  if args.has("yieldTimeMs") {
    return Err(ToolError::coded(if local {
      "cave_execution_backend_command_sessions_disabled"
    } else {
      "cave_execution_backend_command_sessions_local_only"
    }));
  }
  let command = args.string("command")?.to_string();
  let timeout_ms = args
    // `min(timeoutMs, 120000)` as the reference; a zero or negative timeout (the reference has no lower
    // bound; such a timeout can only end the command at once) is refused.
    .opt_integer_from("timeoutMs", 1.0)?
    .map(|t| t.min(BASH_TIMEOUT_MS as f64))
    .unwrap_or(BASH_TIMEOUT_MS as f64);
  let cwd = if local {
    tools.workspace().root()?.path.clone()
  } else {
    tools.workspace().lexical_root()
  };
  let (shell, flag) = if local { ("/bin/sh", "-c") } else { ("sh", "-c") };
  let result = tools
    .backend
    .exec(ExecRequest {
      command: shell.to_string(),
      args: vec![flag.to_string(), command.clone()],
      cwd,
      env: process_env(local),
      timeout: Duration::from_millis(timeout_ms as u64),
      max_output_bytes: PROCESS_CAPTURE_MAX_BYTES,
      cancel: cancel.clone(),
    })
    .await?;
  if result.aborted || cancel.is_cancelled() {
    return Err(aborted());
  }
  if result.start_failed || result.code == Some(127) {
    return Err(ToolError::caveman(Caveman::ShellUnavailable));
  }
  let status = if result.timed_out {
    format!("exit timeout after {}ms", format_ms(timeout_ms))
  } else {
    match result.code {
      Some(code) => format!("exit {code}"),
      None => "exit null".to_string(),
    }
  };
  let mut body = combine(&result.stdout, &result.stderr);
  if body.trim().is_empty() {
    body = text::BASH_NO_OUTPUT.to_string();
  }
  let label = format!("bash:{}", utf16_prefix(&command, 60));
  let cap = tools.cap(ShellToolName::Bash);
  let max_bytes = cap.saturating_sub(status.len() + 1).max(1);
  let recovery = tools.recovery();
  let capped = cap_tool_output(CapRequest::whole(
    body,
    max_bytes,
    Direction::Tail,
    &label,
    !result.truncated,
    recovery,
  ));
  Ok(ToolOutput {
    text: format!("{status}\n{capped}"),
    label: Some(label),
  })
}

/// stdout then stderr, with a newline between them only when stdout lacks one.
pub(crate) fn combine(stdout: &[u8], stderr: &[u8]) -> String {
  let mut out = String::from_utf8_lossy(stdout).into_owned();
  let err = String::from_utf8_lossy(stderr);
  if !out.is_empty() && !out.ends_with('\n') && !err.is_empty() {
    out.push('\n');
  }
  out.push_str(&err);
  out
}

pub(crate) fn format_ms(ms: f64) -> String {
  if ms.fract() == 0.0 {
    format!("{}", ms as u64)
  } else {
    format!("{ms}")
  }
}
