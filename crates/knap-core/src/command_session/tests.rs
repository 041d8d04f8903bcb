//! Command sessions on real processes: ids, cursors, waits, queries, stdin, kills, eviction,
//! spill, validation codes, and no surviving process.

use super::*;
use serde_json::json;

fn env() -> Value {
  json!({ "PATH": std::env::var("PATH").unwrap_or_default() })
}

fn sh(script: &str) -> Value {
  json!({ "command": "/bin/sh", "args": ["-c", script], "cwd": "/tmp", "env": env(), "timeoutMs": 20_000 })
}

fn runtime() -> Arc<CommandSessionRuntime> {
  CommandSessionRuntime::new(RuntimeOptions::default())
}

fn read(id: &str, extra: Value) -> ReadSpec {
  let mut o = json!({ "sessionId": id });
  for (k, v) in extra.as_object().unwrap() {
    o[k] = v.clone();
  }
  runtime().parse_read(&o, false).unwrap()
}

async fn finish(rt: &CommandSessionRuntime, id: &str) {
  let deadline = Instant::now() + Duration::from_secs(20);
  rt.wait_ended(id, deadline, &CancellationToken::new())
    .await
    .unwrap();
  // Finalized after the exit grace.
  for _ in 0..100 {
    if rt
      .list()
      .iter()
      .any(|s| s.session_id == id && s.state != State::Running)
    {
      break;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
}

fn gone(pid: i32) -> bool {
  crate::exec::tests_support::gone_eventually(pid)
}

#[tokio::test]
async fn one_merged_stream_read_by_cursor() {
  let rt = runtime();
  let started = rt
    .start_json(
      &sh("printf out; sleep 0.2; printf err >&2; sleep 0.2; printf more"),
      None,
    )
    .await
    .unwrap();
  assert!(valid_session_id(&started.session_id), "{}", started.session_id);
  assert_eq!(started.state, State::Running);
  finish(&rt, &started.session_id).await;
  let r = rt
    .read(read(&started.session_id, json!({})), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!(r.output, "outerrmore");
  assert_eq!((r.output_start, r.next_cursor, r.available_to), (0, 10, 10));
  assert_eq!(r.state, State::Exited);
  assert_eq!(r.exit_code, Some(0));
  assert!(!r.has_more);
  // No server-side position: the same read gives the same page; a cursor pages on.
  let again = rt
    .read(read(&started.session_id, json!({})), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!(again, r);
  let page = rt
    .read(
      read(&started.session_id, json!({"cursor": 3, "limit": 3})),
      &CancellationToken::new(),
    )
    .await
    .unwrap();
  assert_eq!(
    (page.output.as_str(), page.next_cursor, page.has_more),
    ("err", 6, true)
  );
  let e = rt
    .read(
      read(&started.session_id, json!({"cursor": 11})),
      &CancellationToken::new(),
    )
    .await
    .unwrap_err();
  assert_eq!(e.code, "command_session_cursor_beyond_output");
}

#[tokio::test]
async fn wait_query_write_and_close_stdin() {
  let rt = runtime();
  let mut o = sh("echo ready; while read line; do echo \"> $line\"; done; echo bye");
  o["stdin"] = json!("pipe");
  let id = rt.start_json(&o, None).await.unwrap().session_id;
  let r = rt
    .read(
      read(&id, json!({"query": "ready", "waitMs": 10_000})),
      &CancellationToken::new(),
    )
    .await
    .unwrap();
  assert_eq!(r.match_start, Some(Some(0)));
  assert_eq!(r.state, State::Running);
  let w = rt
    .write(&id, b"hello\n", false, &CancellationToken::new())
    .await
    .unwrap();
  assert!(w.accepted);
  assert_eq!((w.bytes, w.output_cursor), (6, 6));
  let r = rt
    .read(
      read(&id, json!({"cursor": 6, "query": "> hello", "waitMs": 10_000})),
      &CancellationToken::new(),
    )
    .await
    .unwrap();
  assert_eq!(r.match_start, Some(Some(6)));
  assert_eq!(r.output, "> hello\n");
  let miss = rt
    .read(read(&id, json!({"query": "nothing"})), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!(
    (miss.match_start, miss.output.as_str(), miss.next_cursor),
    (Some(None), "", 14)
  );
  let w = rt.write(&id, b"", true, &CancellationToken::new()).await.unwrap();
  assert!(w.accepted);
  finish(&rt, &id).await;
  let r = rt
    .read(read(&id, json!({"cursor": 14})), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!(r.output, "bye\n");
  let w = rt
    .write(&id, b"late", false, &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!((w.accepted, w.bytes, w.state), (false, 0, State::Exited));
  assert!(!rt.list()[0].stdin_open);
}

#[tokio::test]
async fn kill_timeout_and_close_leave_no_process_behind() {
  let rt = runtime();
  let dir = tempfile::tempdir().unwrap();
  let pids = dir.path().join("pids");
  let script = format!(
    "sleep 600 & echo $! >> {p}; (sleep 600 & echo $! >> {p}); nohup sleep 600 >/dev/null 2>&1 & echo $! >> {p}; setsid sleep 600 & echo $! >> {p}; echo started; wait",
    p = pids.display()
  );
  let id = rt.start_json(&sh(&script), None).await.unwrap().session_id;
  let r = rt
    .read(
      read(&id, json!({"query": "started", "waitMs": 10_000})),
      &CancellationToken::new(),
    )
    .await
    .unwrap();
  assert!(r.match_start.flatten().is_some());
  let killed = rt.kill(&id).await.unwrap();
  assert_eq!(killed.state, State::Killed);
  assert_eq!(killed.exit_code, None);
  assert_eq!(killed.exit_signal.as_deref(), Some("SIGKILL"));
  for pid in std::fs::read_to_string(&pids).unwrap().lines() {
    assert!(gone(pid.parse().unwrap()), "{pid} survived kill");
  }

  let mut o = sh(&format!(
    "sleep 600 & echo $! > {}; wait",
    dir.path().join("t").display()
  ));
  o["timeoutMs"] = json!(300);
  let id = rt.start_json(&o, None).await.unwrap().session_id;
  finish(&rt, &id).await;
  assert_eq!(rt.summary(&id).unwrap().state, State::TimedOut);
  let pid: i32 = std::fs::read_to_string(dir.path().join("t"))
    .unwrap()
    .trim()
    .parse()
    .unwrap();
  assert!(gone(pid));

  // Exit: background children are not kept.
  let id = rt
    .start_json(
      &sh(&format!(
        "sleep 600 & echo $! > {}",
        dir.path().join("x").display()
      )),
      None,
    )
    .await
    .unwrap()
    .session_id;
  finish(&rt, &id).await;
  let pid: i32 = std::fs::read_to_string(dir.path().join("x"))
    .unwrap()
    .trim()
    .parse()
    .unwrap();
  assert!(gone(pid));

  // The start signal and close().
  let signal = CancellationToken::new();
  let a = rt
    .start_json(&sh("sleep 600"), Some(signal.clone()))
    .await
    .unwrap()
    .session_id;
  let b = rt
    .start_json(
      &sh(&format!(
        "sleep 600 & echo $! > {}; wait",
        dir.path().join("c").display()
      )),
      None,
    )
    .await
    .unwrap()
    .session_id;
  signal.cancel();
  finish(&rt, &a).await;
  assert_eq!(rt.summary(&a).unwrap().state, State::Killed);
  while !dir.path().join("c").exists() {
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
  tokio::time::sleep(Duration::from_millis(50)).await;
  rt.close().await;
  rt.close().await;
  assert!(rt.list().is_empty());
  assert!(rt.summary(&b).is_none());
  let pid: i32 = std::fs::read_to_string(dir.path().join("c"))
    .unwrap()
    .trim()
    .parse()
    .unwrap();
  assert!(gone(pid));
  let e = rt.start_json(&sh("true"), None).await.unwrap_err();
  assert_eq!(e.code, "command_session_runtime_closed");
}

#[tokio::test]
async fn ring_evicts_oldest_bytes_on_character_boundaries_and_pool_evicts_finished_sessions() {
  let rt = CommandSessionRuntime::new(RuntimeOptions {
    max_sessions: 2,
    max_output_bytes: 9,
    ..Default::default()
  });
  // 'é' is two bytes: an eviction that splits one drops its continuation byte too.
  let id = rt
    .start_json(&sh("printf 'aéééééééé'"), None)
    .await
    .unwrap()
    .session_id;
  finish(&rt, &id).await;
  let r = rt
    .read(read(&id, json!({})), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!(r.available_to, 17);
  // 8 bytes evicted end inside a character; its continuation byte goes too.
  assert_eq!(r.available_from, 9);
  assert_eq!(r.output, "éééé");
  assert!(r.truncated_before_cursor);
  let second = rt.start_json(&sh("sleep 600"), None).await.unwrap().session_id;
  // Full: the finished one is evicted.
  let third = rt.start_json(&sh("sleep 600"), None).await.unwrap().session_id;
  let ids: Vec<_> = rt.list().into_iter().map(|s| s.session_id).collect();
  assert_eq!(ids, vec![second.clone(), third.clone()]);
  let e = rt.start_json(&sh("true"), None).await.unwrap_err();
  assert_eq!(e.code, "command_session_limit_reached");
  let unknown = rt
    .read(read(&id, json!({"cursor": 4})), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!(unknown.state, State::UnknownAfterRestart);
  assert_eq!(
    (unknown.output_start, unknown.next_cursor, unknown.available_to),
    (4, 4, 4)
  );
  rt.close().await;
}

#[tokio::test]
async fn split_characters_and_binary_pages() {
  let rt = runtime();
  let id = rt
    .start_json(&sh("printf 'ab€'; printf '\\377\\376'"), None)
    .await
    .unwrap()
    .session_id;
  finish(&rt, &id).await;
  // A page ending inside '€' is pulled back to the character boundary.
  let r = rt
    .read(read(&id, json!({"limit": 4})), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!(
    (r.output.as_str(), r.next_cursor, r.output_encoding),
    ("ab", 2, "utf8")
  );
  let r = rt
    .read(read(&id, json!({"cursor": 5})), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!((r.output.as_str(), r.output_encoding), ("//4=", "base64"));
}

#[tokio::test]
async fn spill_keeps_older_output_in_an_unlinked_file() {
  let dir = tempfile::tempdir().unwrap();
  let rt = CommandSessionRuntime::new(RuntimeOptions {
    max_output_bytes: 8,
    spill: Some(SpillOptions {
      directory: dir.path().to_path_buf(),
      max_bytes: 12,
    }),
    ..Default::default()
  });
  let id = rt
    .start_json(&sh("printf 0123456789abcdefghijklmnopqrstuvwxyz"), None)
    .await
    .unwrap()
    .session_id;
  finish(&rt, &id).await;
  let r = rt
    .read(read(&id, json!({})), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!((r.available_from, r.available_to), (16, 36));
  assert_eq!(r.output, "ghijklmnopqrstuvwxyz");
  let q = rt
    .read(read(&id, json!({"query": "ijk"})), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!(q.match_start, Some(Some(18)));
  assert_eq!(
    std::fs::read_dir(dir.path()).unwrap().count(),
    0,
    "the spill file is unlinked at once"
  );
  rt.close().await;
}

#[tokio::test]
async fn validation_codes_in_order() {
  let rt = runtime();
  let bad = |o: Value| {
    let rt = rt.clone();
    async move { rt.start_json(&o, None).await.unwrap_err().code }
  };
  assert_eq!(
    bad(json!({"command": ""})).await,
    "command_session_command_invalid"
  );
  assert_eq!(
    bad(json!({"command": "x", "args": [1]})).await,
    "command_session_args_invalid"
  );
  assert_eq!(
    bad(json!({"command": "x", "cwd": "rel"})).await,
    "command_session_cwd_must_be_absolute"
  );
  assert_eq!(
    bad(json!({"command": "x", "cwd": "/"})).await,
    "command_session_explicit_env_required"
  );
  assert_eq!(
    bad(json!({"command": "x", "cwd": "/", "env": {}, "stdin": "tty"})).await,
    "command_session_stdin_invalid"
  );
  assert_eq!(
    bad(json!({"command": "x", "cwd": "/", "env": {}, "timeoutMs": 0})).await,
    "command_session_timeoutMs_invalid"
  );
  assert_eq!(
    bad(json!({"command": "x", "cwd": "/", "env": {}, "timeoutMs": 120_001})).await,
    "command_session_timeoutMs_invalid"
  );
  assert_eq!(
    bad(json!({"command": "x", "cwd": "/", "env": {"A=B": "1"}, "timeoutMs": 1})).await,
    "command_session_env_invalid"
  );
  assert_eq!(
    bad(json!({"command": "x", "cwd": "/", "env": {}, "timeoutMs": 1, "shell": true})).await,
    "command_session_start_option_unknown:shell"
  );
  let id = "cmd_0123456789abcdef0123456789abcdef";
  let parse = |o: Value, aborted: bool| rt.parse_read(&o, aborted).unwrap_err().code;
  assert_eq!(
    parse(json!({"sessionId": id, "cursor": -1}), false),
    "command_session_cursor_invalid"
  );
  assert_eq!(
    parse(json!({"sessionId": id, "limit": 65_537}), false),
    "command_session_limit_invalid"
  );
  assert_eq!(
    parse(json!({"sessionId": id, "waitMs": 30_001}), false),
    "command_session_waitMs_invalid"
  );
  assert_eq!(
    parse(json!({"sessionId": id}), true),
    "command_session_operation_aborted"
  );
  assert_eq!(
    parse(json!({"sessionId": "cmd_XYZ"}), false),
    "command_session_id_invalid"
  );
  assert_eq!(
    parse(json!({"sessionId": id.to_uppercase()}), false),
    "command_session_id_invalid"
  );
  let w = |o: Value| {
    let rt = rt.clone();
    async move {
      rt.write_json(&o, &CancellationToken::new())
        .await
        .unwrap_err()
        .code
    }
  };
  assert_eq!(w(json!({"sessionId": "x"})).await, "command_session_id_invalid");
  assert_eq!(
    w(json!({"sessionId": id, "input": 5})).await,
    "command_session_input_must_be_string"
  );
  assert_eq!(
    w(json!({"sessionId": id, "input": "", "closeStdin": 1})).await,
    "command_session_close_stdin_must_be_boolean"
  );
  assert_eq!(
    w(json!({"sessionId": id, "input": "x".repeat(65_537)})).await,
    "command_session_input_limit_exceeded"
  );
  let unknown = rt
    .write_json(&json!({"sessionId": id, "input": "x"}), &CancellationToken::new())
    .await
    .unwrap();
  assert_eq!(
    (unknown.state, unknown.accepted, unknown.output_cursor),
    (State::UnknownAfterRestart, false, 0)
  );
  for (o, code) in [
    (json!({"maxSessions": 0}), "command_session_maxSessions_invalid"),
    (json!({"maxWaitMs": 1.5}), "command_session_maxWaitMs_invalid"),
    (
      json!({"spill": {"directory": "rel", "maxBytes": 1}}),
      "command_session_spill_directory_invalid",
    ),
    (
      json!({"spill": {"directory": "/tmp", "maxBytes": -1}}),
      "command_session_spill_maxBytes_invalid",
    ),
    (json!({"spill": 5}), "command_session_spill_invalid"),
    (
      json!({"maxSesions": 1}),
      "command_session_option_unknown:maxSesions",
    ),
  ] {
    assert_eq!(RuntimeOptions::from_json(&o).unwrap_err().code, code);
  }
  let e = RuntimeOptions::from_json(&json!({"maxSesions": 1})).unwrap_err();
  assert_eq!(
    e.message,
    "command_session_option_unknown:maxSesions\nhint: did you mean \"maxSessions\"? the options are maxSessions, maxOutputBytes, maxReadBytes, maxInputBytes, maxTimeoutMs, maxWaitMs, spill"
  );
  // A missing command is a session that ended with a spawn error.
  let mut o = sh("");
  o["command"] = json!("/definitely/not/here");
  let id = rt.start_json(&o, None).await.unwrap().session_id;
  let s = rt.summary(&id).unwrap();
  assert_eq!(
    (s.state, s.exit_code, s.spawn_error.as_deref()),
    (State::Exited, None, Some("spawn /definitely/not/here ENOENT"))
  );
}

#[test]
fn a_full_ring_holds_its_cap_not_twice_it() {
  let cap = 4 * 1024 * 1024;
  let mut out = Output::new(cap, None, "cmd_test".into());
  let chunk = vec![b'x'; 64 * 1024];
  for _ in 0..200 {
    out.push(&chunk);
  }
  assert_eq!(out.mem.len(), cap);
  assert_eq!(out.total, 200 * 64 * 1024);
  assert_eq!(out.mem_from, out.total - cap as u64);
  // Left to `extend`, the buffer doubled to 8 MiB once it passed the cap.
  assert!(
    out.mem.capacity() <= cap + chunk.len(),
    "capacity {}",
    out.mem.capacity()
  );
  // One push larger than the cap keeps its last `cap` bytes.
  let big: Vec<u8> = (0..(cap + 10)).map(|i| (i % 251) as u8 % 128).collect();
  out.push(&big);
  assert_eq!(out.mem.len(), cap);
  assert_eq!(out.bytes(out.mem_from, out.total).unwrap(), big[10..].to_vec());
}
