//! `bash` with a command-session runtime: the five input shapes and their exact texts.

use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::command_session::{CommandSessionRuntime, RuntimeOptions};

fn coding_runtime() -> Arc<CommandSessionRuntime> {
  CommandSessionRuntime::new(RuntimeOptions {
    max_sessions: 8,
    ..Default::default()
  })
}

fn tools(dir: &tempfile::TempDir, rt: &Arc<CommandSessionRuntime>, names: Option<Vec<&str>>) -> ShellTools {
  let mut config = ShellToolsConfig::new(dir.path());
  config.command_sessions = Some(rt.clone());
  config.tools = names.map(|n| n.into_iter().map(String::from).collect());
  ShellTools::new(config).unwrap()
}

async fn bash(t: &ShellTools, input: Value) -> Result<ToolOutput, ToolError> {
  t.execute("bash", &input, CancellationToken::new()).await
}

async fn text(t: &ShellTools, input: Value) -> String {
  match bash(t, input.clone()).await {
    Ok(o) => o.text,
    Err(e) => panic!("bash({input}) failed: {}", e.message),
  }
}

fn id_of(page: &str) -> String {
  page.split_whitespace().nth(1).unwrap().to_string()
}

#[tokio::test]
async fn start_list_read_write_kill() {
  let dir = tempfile::tempdir().unwrap();
  let rt = coding_runtime();
  let t = tools(&dir, &rt, None);
  let spec = t.spec(ShellToolName::Bash);
  assert!(spec
    .description
    .starts_with("Run shell command in the workspace and return combined stdout/stderr."));
  assert!(spec
    .description
    .ends_with("Hard timeout is 120000 ms; output is capped at 24000 bytes."));
  assert_eq!(spec.input["anyOf"].as_array().unwrap().len(), 5);
  assert_eq!(
    text(&t, json!({"action": "list"})).await,
    "command sessions: none"
  );
  // Without yieldTimeMs: the one-shot format.
  let out = bash(&t, json!({"command": "echo hi"})).await.unwrap();
  assert_eq!(out.text, "exit 0\nhi\n");
  assert_eq!(out.label.as_deref(), Some("bash:echo hi"));
  let e = bash(&t, json!({"command": "exit 127"})).await.unwrap_err();
  assert_eq!(e.message, "caveman-code: host command shell is not available");
  assert_eq!(
    text(&t, json!({"command": "sleep 5", "timeoutMs": 200})).await,
    "exit timeout after 200ms\n(no output)"
  );

  // With yieldTimeMs and still running: a session page.
  let page = text(
    &t,
    json!({"command": "echo ready; while read l; do echo \"> $l\"; done", "yieldTimeMs": 300}),
  )
  .await;
  let id = id_of(&page);
  assert_eq!(
    page,
    format!("session {id} · running\nbytes 0-6 of 6 · next cursor 6\nready\n\n[still running; read again at cursor 6]")
  );
  let w = bash(
    &t,
    json!({"sessionId": id, "action": "write", "input": "hi\n", "waitMs": 5000}),
  )
  .await
  .unwrap();
  assert_eq!(w.label.as_deref(), Some(format!("bash:write:{id}").as_str()));
  assert_eq!(
    w.text,
    format!("session {id} · running\nstdin accepted 3 bytes\nbytes 6-11 of 11 · next cursor 11\n> hi\n\n[still running; read again at cursor 11]")
  );
  let r = text(&t, json!({"sessionId": id, "action": "read", "query": "> hi"})).await;
  assert_eq!(
    r,
    format!("session {id} · running\nliteral match at byte 6 · bytes 6-11 of 11 · next cursor 11\n> hi\n\n[still running; read again at cursor 11]")
  );
  let miss = text(
    &t,
    json!({"sessionId": id, "action": "read", "query": "zzz", "cursor": 2}),
  )
  .await;
  assert_eq!(
    miss,
    format!("session {id} · running\nsearched retained bytes 2-11 of 11\n(no literal match)\n[still running; search again at cursor 11]")
  );
  let r = text(&t, json!({"sessionId": id, "action": "read", "limit": 3})).await;
  assert_eq!(
    r,
    format!("session {id} · running\nbytes 0-3 of 11 · next cursor 3\nrea\n[continue at cursor 3]")
  );
  let list = text(&t, json!({"action": "list"})).await;
  assert!(
    list.starts_with("command sessions: 4 retained · oldest first\n"),
    "{list}"
  );
  assert!(
    list.ends_with(&format!("{id} · running · stdin open · retained bytes 0-11")),
    "{list}"
  );
  assert!(
    list.contains(" · exited · exit 0 · stdin closed · retained bytes 0-3\n"),
    "{list}"
  );
  let closed = text(
    &t,
    json!({"sessionId": id, "action": "write", "input": "", "closeStdin": true, "waitMs": 5000}),
  )
  .await;
  assert_eq!(
    closed,
    format!("session {id} · exited · exit 0\nstdin accepted 0 bytes · stdin closed\nbytes 11-11 of 11 · next cursor 11\n(no new output)")
  );
  let late = text(&t, json!({"sessionId": id, "action": "write", "input": "x"})).await;
  assert!(late.contains("\nstdin not accepted · exited\n"), "{late}");

  let page = text(&t, json!({"command": "echo up; sleep 600", "yieldTimeMs": 200})).await;
  let id = id_of(&page);
  let killed = bash(&t, json!({"sessionId": id, "action": "kill"}))
    .await
    .unwrap();
  assert_eq!(
    killed.text,
    format!("session {id} · killed · killed\nbytes 0-3 of 3 · next cursor 3\nup\n")
  );
  assert_eq!(killed.label.as_deref(), Some(format!("bash:kill:{id}").as_str()));

  let unknown = "cmd_00000000000000000000000000000000";
  assert_eq!(
    text(&t, json!({"sessionId": unknown, "action": "read"})).await,
    format!("session {unknown} · unknown_after_restart\nsession belongs to another or closed runtime; process adoption is disabled")
  );
  rt.close().await;
}

#[tokio::test]
async fn validation_texts_and_the_pool_limit() {
  let dir = tempfile::tempdir().unwrap();
  let rt = coding_runtime();
  let t = tools(&dir, &rt, None);
  let id = "cmd_00000000000000000000000000000000";
  for (input, message) in [
    (
      json!({"command": "x", "yieldTimeMs": 30_001}),
      "caveman-code: yieldTimeMs must be an integer from 0 to 30000",
    ),
    (
      json!({"sessionId": id, "action": "read", "waitMs": -1}),
      "caveman-code: waitMs must be an integer from 0 to 30000",
    ),
    (
      json!({"sessionId": id, "action": "read", "cursor": 1.5}),
      "caveman-code: bash session cursor must be a non-negative integer",
    ),
    (
      json!({"sessionId": id, "action": "read", "limit": 17_617}),
      "caveman-code: bash session limit must be an integer from 1 to 17616",
    ),
    (
      json!({"sessionId": id, "action": "read", "query": ""}),
      "caveman-code: bash session query must be 1 to 4096 UTF-8 bytes",
    ),
    (
      json!({"sessionId": id, "action": "read", "query": "x".repeat(4097)}),
      "caveman-code: bash session query must be 1 to 4096 UTF-8 bytes",
    ),
    (
      json!({"sessionId": "nope", "action": "read"}),
      "command_session_id_invalid",
    ),
    (
      json!({"sessionId": id, "action": "write", "input": 5}),
      "command_session_input_must_be_string",
    ),
    (
      json!({"sessionId": "x", "action": "kill"}),
      "command_session_id_invalid",
    ),
  ] {
    assert_eq!(
      bash(&t, input.clone()).await.unwrap_err().message,
      message,
      "{input}"
    );
  }
  let mut ids = Vec::new();
  for _ in 0..8 {
    ids.push(id_of(
      &text(&t, json!({"command": "sleep 600", "yieldTimeMs": 0})).await,
    ));
  }
  let e = bash(&t, json!({"command": "true"})).await.unwrap_err();
  assert_eq!(
    e.message,
    "caveman-code: all 8 command sessions are still live; kill one with bash({action:\"kill\",sessionId}) before starting another"
  );
  bash(&t, json!({"sessionId": ids[3], "action": "kill"}))
    .await
    .unwrap();
  // The killed one is finished: the next start evicts it.
  assert!(text(&t, json!({"command": "echo ok"}))
    .await
    .starts_with("exit 0"));
  rt.close().await;
}

#[tokio::test]
async fn capture_beyond_the_ring_and_the_recovery_text() {
  let dir = tempfile::tempdir().unwrap();
  let rt = CommandSessionRuntime::new(RuntimeOptions {
    max_output_bytes: 1000,
    ..Default::default()
  });
  let t = tools(&dir, &rt, Some(vec!["bash"]));
  let out = text(&t, json!({"command": "yes x | tr -d '\\n' | head -c 5000"})).await;
  let id = rt.list()[0].session_id.clone();
  assert!(out.starts_with("exit 0\nxxxx"), "{out}");
  assert!(
    out.ends_with(&format!("\n[caveman-code: output capped from 1000 retained bytes 4000-5000; older output discarded before absolute byte 4000; resume retained output with bash({{\"sessionId\":\"{id}\",\"action\":\"read\",\"cursor\":4000}})]")),
    "{out}"
  );
  let bin = text(&t, json!({"command": "printf '\\377'"})).await;
  assert_eq!(bin, "exit 0\n[base64 command output]\n/w==");
  rt.close().await;
}

#[tokio::test]
async fn an_aborted_call_kills_its_session_and_remote_backends_refuse_sessions() {
  let dir = tempfile::tempdir().unwrap();
  let rt = coding_runtime();
  let t = tools(&dir, &rt, None);
  let cancel = CancellationToken::new();
  let page = t
    .execute(
      "bash",
      &json!({"command": "sleep 600", "yieldTimeMs": 0}),
      cancel.clone(),
    )
    .await
    .unwrap()
    .text;
  let id = id_of(&page);
  cancel.cancel();
  rt.wait_ended(
    &id,
    std::time::Instant::now() + std::time::Duration::from_secs(10),
    &CancellationToken::new(),
  )
  .await
  .unwrap();
  assert_eq!(
    rt.summary(&id).unwrap().state,
    crate::command_session::State::Killed
  );
  rt.close().await;

  struct Remote;
  impl crate::exec::ExecutionBackend for Remote {
    fn id(&self) -> &str {
      "remote"
    }
    fn exec(
      &self,
      _: crate::exec::ExecRequest,
    ) -> crate::exec::BoxFuture<Result<crate::exec::ExecResult, ToolError>> {
      Box::pin(async { Ok(Default::default()) })
    }
    fn read_file(&self, _: String, _: Option<u64>) -> crate::exec::BoxFuture<Result<Vec<u8>, ToolError>> {
      Box::pin(async { Ok(Vec::new()) })
    }
    fn write_file(&self, _: String, _: Vec<u8>) -> crate::exec::BoxFuture<Result<(), ToolError>> {
      Box::pin(async { Ok(()) })
    }
  }
  let mut config = ShellToolsConfig::new("/w");
  config.backend = Arc::new(Remote);
  config.command_sessions = Some(coding_runtime());
  assert_eq!(
    ShellTools::new(config).err().unwrap().message,
    "cave_execution_backend_command_sessions_local_only"
  );
}
