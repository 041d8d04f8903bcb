//! The shell tools over a non-local backend (a fake one that records every call): the exact
//! requests the reference sends and how it reads the answers (caveman-code.md §5.1).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::exec::{BoxFuture, ExecRequest, ExecResult, ExecutionBackend};

type Responder = Box<dyn Fn(&ExecRequest) -> ExecResult + Send + Sync>;

#[derive(Default)]
struct Fake {
  files: Mutex<HashMap<String, Vec<u8>>>,
  dirs: Vec<String>,
  calls: Mutex<Vec<String>>,
  requests: Mutex<Vec<ExecRequest>>,
  responder: Option<Responder>,
}

impl ExecutionBackend for Fake {
  fn id(&self) -> &str {
    // Even a backend calling itself "local" is not local without the marker.
    "local"
  }

  fn exec(&self, request: ExecRequest) -> BoxFuture<Result<ExecResult, ToolError>> {
    self
      .calls
      .lock()
      .unwrap()
      .push(format!("exec {} {}", request.command, request.args.join(" ")));
    let result = self.responder.as_ref().map(|r| r(&request)).unwrap_or_default();
    self.requests.lock().unwrap().push(request);
    Box::pin(async move { Ok(result) })
  }

  fn read_file(&self, path: String, max_bytes: Option<u64>) -> BoxFuture<Result<Vec<u8>, ToolError>> {
    self
      .calls
      .lock()
      .unwrap()
      .push(format!("read {path} {max_bytes:?}"));
    let result = if self.dirs.contains(&path) {
      Err(ToolError::new(
        "EISDIR",
        "cave_execution_backend_http_read_failed:422",
      ))
    } else {
      match self.files.lock().unwrap().get(&path) {
        Some(data) => Ok(data[..data.len().min(max_bytes.unwrap_or(u64::MAX) as usize)].to_vec()),
        None => Err(ToolError::new(
          "ENOENT",
          "cave_execution_backend_http_read_failed:404",
        )),
      }
    };
    Box::pin(async move { result })
  }

  fn write_file(&self, path: String, data: Vec<u8>) -> BoxFuture<Result<(), ToolError>> {
    self
      .calls
      .lock()
      .unwrap()
      .push(format!("write {path} {}", data.len()));
    self.files.lock().unwrap().insert(path, data);
    Box::pin(async move { Ok(()) })
  }
}

const ROOT: &str = "/remote/ws";

fn tools_over(fake: Fake) -> (ShellTools, Arc<Fake>) {
  let fake = Arc::new(fake);
  let mut config = ShellToolsConfig::new(format!("{ROOT}/sub/.."));
  config.backend = fake.clone();
  (ShellTools::new(config).unwrap(), fake)
}

fn result(stdout: &str, stderr: &str, code: Option<i32>) -> ExecResult {
  ExecResult {
    stdout: stdout.as_bytes().to_vec(),
    stderr: stderr.as_bytes().to_vec(),
    code,
    ..Default::default()
  }
}

async fn run(tools: &ShellTools, name: &str, input: Value) -> Result<String, ToolError> {
  tools
    .execute(name, &input, CancellationToken::new())
    .await
    .map(|o| o.text)
}

#[tokio::test]
async fn bash_runs_sh_c_with_the_remote_environment() {
  let (tools, fake) = tools_over(Fake {
    responder: Some(Box::new(|_| result("out", "err", Some(0)))),
    ..Default::default()
  });
  assert!(!tools.is_local());
  assert_eq!(
    run(&tools, "bash", json!({"command": "echo hi"})).await.unwrap(),
    "exit 0\nout\nerr"
  );
  let req = fake.requests.lock().unwrap()[0].clone();
  assert_eq!(req.command, "sh");
  assert_eq!(req.args, vec!["-c", "echo hi"]);
  assert_eq!(req.cwd, std::path::PathBuf::from(ROOT));
  assert_eq!(req.max_output_bytes, 4 * 1024 * 1024);
  assert_eq!(req.timeout, std::time::Duration::from_millis(120_000));
  for (k, _) in &req.env {
    assert!(
      ["LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"].contains(&k.as_str()),
      "{k} reached the backend"
    );
  }
  let e = run(
    &tools,
    "bash",
    json!({"command": "x", "timeoutMs": 500, "yieldTimeMs": 10}),
  )
  .await
  .unwrap_err();
  assert_eq!(e.message, "cave_execution_backend_command_sessions_local_only");
  let e = run(&tools, "bash", json!({"action": "list"})).await.unwrap_err();
  assert_eq!(e.message, "cave_execution_backend_command_sessions_local_only");
  assert_eq!(
    fake.calls.lock().unwrap().len(),
    1,
    "refused inputs reach no backend"
  );
}

#[tokio::test]
async fn bash_exit_127_is_the_missing_shell_and_timeouts_read_as_such() {
  let (tools, _) = tools_over(Fake {
    responder: Some(Box::new(|r| match r.args[1].as_str() {
      "missing" => result("", "sh: missing: not found", Some(127)),
      "slow" => ExecResult {
        timed_out: true,
        ..Default::default()
      },
      _ => result("", "", None),
    })),
    ..Default::default()
  });
  let e = run(&tools, "bash", json!({"command": "missing"}))
    .await
    .unwrap_err();
  assert_eq!(e.message, "caveman-code: host command shell is not available");
  let out = run(&tools, "bash", json!({"command": "slow", "timeoutMs": 250}))
    .await
    .unwrap();
  assert_eq!(out, "exit timeout after 250ms\n(no output)");
  assert_eq!(
    run(&tools, "bash", json!({"command": "sig"})).await.unwrap(),
    "exit null\n(no output)"
  );
}

#[tokio::test]
async fn read_file_over_read_file_with_lexical_containment() {
  let fake = Fake {
    dirs: vec![format!("{ROOT}/dir")],
    ..Default::default()
  };
  fake
    .files
    .lock()
    .unwrap()
    .insert(format!("{ROOT}/a.txt"), b"alpha\nbeta\n".to_vec());
  let (tools, fake) = tools_over(fake);
  assert_eq!(
    run(&tools, "read_file", json!({"path": "a.txt"})).await.unwrap(),
    "1\talpha\n2\tbeta\n3\t"
  );
  assert_eq!(
    run(
      &tools,
      "read_file",
      json!({"path": format!("{ROOT}/x/../a.txt"), "offset": 2, "limit": 1})
    )
    .await
    .unwrap(),
    "2\tbeta"
  );
  let e = run(&tools, "read_file", json!({"path": "dir"}))
    .await
    .unwrap_err();
  assert_eq!(e.message, "caveman-code: not a file: dir");
  let e = run(&tools, "read_file", json!({"path": "gone.txt"}))
    .await
    .unwrap_err();
  assert_eq!(
    (e.code.as_str(), e.message.as_str()),
    ("ENOENT", "cave_execution_backend_http_read_failed:404")
  );
  for bad in ["../secret.txt", "/etc/passwd", "sub/../../x", "/remote/wsx/a"] {
    let e = run(&tools, "read_file", json!({"path": bad})).await.unwrap_err();
    assert_eq!(
      e.message,
      format!("caveman-code: path escapes the workspace: {bad}")
    );
  }
  let calls = fake.calls.lock().unwrap().clone();
  assert_eq!(
    calls,
    vec![
      format!("read {ROOT}/a.txt None"),
      format!("read {ROOT}/a.txt None"),
      format!("read {ROOT}/dir None"),
      format!("read {ROOT}/gone.txt None"),
    ],
    "escapes reach no backend"
  );
}

#[tokio::test]
async fn write_file_emulates_exclusive_create_and_edit_reads_then_writes() {
  let (tools, fake) = tools_over(Fake::default());
  assert_eq!(
    run(&tools, "write_file", json!({"path": "n.txt", "content": "héllo"}))
      .await
      .unwrap(),
    "wrote n.txt: 6 bytes"
  );
  let e = run(&tools, "write_file", json!({"path": "n.txt", "content": "x"}))
    .await
    .unwrap_err();
  assert_eq!(e.code, "EEXIST");
  assert_eq!(
    e.message,
    format!("EEXIST: file already exists, open '{ROOT}/n.txt'")
  );
  run(
    &tools,
    "write_file",
    json!({"path": "n.txt", "content": "a a", "overwrite": true}),
  )
  .await
  .unwrap();
  let e = run(
    &tools,
    "edit_file",
    json!({"path": "n.txt", "old_string": "a", "new_string": "b"}),
  )
  .await
  .unwrap_err();
  assert_eq!(
    e.message,
    "caveman-code: old_string appears 2 times in n.txt; add surrounding context or pass replace_all"
  );
  assert_eq!(
    run(
      &tools,
      "edit_file",
      json!({"path": "n.txt", "old_string": "a", "new_string": "b", "replace_all": true})
    )
    .await
    .unwrap(),
    "edited n.txt: 2 replacements"
  );
  assert_eq!(fake.files.lock().unwrap()[&format!("{ROOT}/n.txt")], b"b b");
  let e = run(&tools, "write_file", json!({"path": "../n.txt", "content": "x"}))
    .await
    .unwrap_err();
  assert_eq!(e.message, "caveman-code: path escapes the workspace: ../n.txt");
  assert_eq!(
    fake.calls.lock().unwrap().clone(),
    vec![
      format!("read {ROOT}/n.txt Some(1)"),
      format!("write {ROOT}/n.txt 6"),
      format!("read {ROOT}/n.txt Some(1)"),
      format!("write {ROOT}/n.txt 3"),
      format!("read {ROOT}/n.txt None"),
      format!("read {ROOT}/n.txt None"),
      format!("write {ROOT}/n.txt 3"),
    ]
  );
}

#[tokio::test]
async fn grep_runs_rg_then_grep_and_joins_the_streams() {
  let (tools, fake) = tools_over(Fake {
    responder: Some(Box::new(|r| {
      result("source.txt:1:needle", "warning", Some(0)).with_command(r)
    })),
    ..Default::default()
  });
  let out = run(
    &tools,
    "grep",
    json!({"pattern": "needle", "path": "src", "glob": "*.rs"}),
  )
  .await
  .unwrap();
  assert_eq!(out, "source.txt:1:needle\nwarning");
  let req = fake.requests.lock().unwrap()[0].clone();
  assert_eq!(req.command, "rg");
  assert_eq!(
    req.args,
    [
      "--line-number",
      "--no-heading",
      "--color",
      "never",
      "--max-count",
      "200",
      "--glob",
      "*.rs",
      "--regexp",
      "needle",
      "--",
      "src"
    ]
  );
  assert_eq!(req.timeout, std::time::Duration::from_millis(30_000));

  let (tools, fake) = tools_over(Fake {
    responder: Some(Box::new(|r| {
      if r.command == "rg" {
        ExecResult {
          code: Some(127),
          start_failed: true,
          ..Default::default()
        }
      } else {
        result(&"./a:1:x\n".repeat(201), "", Some(0))
      }
    })),
    ..Default::default()
  });
  let out = run(&tools, "grep", json!({"pattern": "x", "glob": "*.rs"}))
    .await
    .unwrap();
  assert!(out.ends_with("./a:1:x\n[caveman-code: matches limited to first 200; narrow pattern or path]"));
  let req = fake.requests.lock().unwrap()[1].clone();
  assert_eq!(
    (req.command.as_str(), req.args.clone()),
    (
      "grep",
      ["-rnI", "-m", "200", "-E", "-e", "x", "--", "."]
        .map(String::from)
        .to_vec()
    )
  );

  let (tools, _) = tools_over(Fake {
    responder: Some(Box::new(|_| ExecResult {
      code: Some(127),
      ..Default::default()
    })),
    ..Default::default()
  });
  let e = run(&tools, "grep", json!({"pattern": "x"})).await.unwrap_err();
  assert_eq!(e.message, "caveman-code: neither rg nor grep is available");

  let (tools, _) = tools_over(Fake {
    responder: Some(Box::new(|_| result("  \n", "", Some(1)))),
    ..Default::default()
  });
  assert_eq!(
    run(&tools, "grep", json!({"pattern": "x", "path": "."}))
      .await
      .unwrap(),
    "no matches"
  );
}

trait WithCommand {
  fn with_command(self, r: &ExecRequest) -> Self;
}

impl WithCommand for ExecResult {
  /// The scripted answer only for `rg` (a `grep` call would be a test failure).
  fn with_command(self, r: &ExecRequest) -> Self {
    assert_eq!(r.command, "rg");
    self
  }
}
