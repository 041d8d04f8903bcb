use std::collections::BTreeMap;
use std::sync::Mutex;

use super::*;
use crate::exec::BoxFuture;

fn local(files: &[(&str, &[u8])]) -> (tempfile::TempDir, AgentTools) {
  let d = tempfile::tempdir().unwrap();
  for (p, c) in files {
    let full = d.path().join(p);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, c).unwrap();
  }
  let env = vec![("PATH".to_string(), std::env::var("PATH").unwrap_or_default())];
  let sb = Arc::new(LocalSandbox::create(d.path(), env).unwrap());
  (d, AgentTools::new(Arc::new(sb), None))
}

fn cfg(t: &AgentTools) -> Tool {
  t.tool(ToolConfig::default()).unwrap()
}

fn read_input(p: &str) -> ReadInput {
  ReadInput {
    file_path: p.into(),
    ..Default::default()
  }
}

/// An in-memory sandbox with bashkit's interface only (no native paths).
#[derive(Default)]
struct Fake {
  files: Mutex<BTreeMap<String, String>>,
  execs: Mutex<Vec<String>>,
  hang_reads: bool,
}

impl Sandbox for Fake {
  fn exec(&self, call: ExecCall) -> BoxFuture<SbResult<ExecReply>> {
    self.execs.lock().unwrap().push(call.command.clone());
    let out = if let Some(p) = call.command.strip_prefix("rm -- ") {
      self.files.lock().unwrap().remove(p.trim_matches('\''));
      String::new()
    } else {
      "x".repeat(50)
    };
    Box::pin(async move {
      Ok(ExecReply {
        stdout: out,
        stderr: String::new(),
        exit_code: Some(0),
        duration_ms: Some(1.0),
        interrupted: Some(false),
      })
    })
  }
  fn read_file(&self, path: String) -> BoxFuture<SbResult<String>> {
    let r = self
      .files
      .lock()
      .unwrap()
      .get(&path)
      .cloned()
      .ok_or_else(|| SandboxError::new("ENOENT"));
    let hang = self.hang_reads;
    Box::pin(async move {
      if hang {
        std::future::pending::<()>().await;
      }
      r
    })
  }
  fn write_file(&self, path: String, content: String) -> BoxFuture<SbResult<()>> {
    self.files.lock().unwrap().insert(path, content);
    Box::pin(async { Ok(()) })
  }
  fn read_dir(&self, path: String) -> BoxFuture<SbResult<Vec<String>>> {
    let prefix = format!("{path}/");
    let names = self
      .files
      .lock()
      .unwrap()
      .keys()
      .filter_map(|k| k.strip_prefix(&prefix).map(str::to_string))
      .collect();
    Box::pin(async { Ok(names) })
  }
  fn file_exists(&self, path: String) -> BoxFuture<SbResult<bool>> {
    let files = self.files.lock().unwrap();
    let yes = files.contains_key(&path) || files.keys().any(|k| k.starts_with(&format!("{path}/")));
    Box::pin(async move { Ok(yes) })
  }
  fn is_directory(&self, path: String) -> BoxFuture<SbResult<bool>> {
    let yes = self
      .files
      .lock()
      .unwrap()
      .keys()
      .any(|k| k.starts_with(&format!("{path}/")));
    Box::pin(async move { Ok(yes) })
  }
  fn delete_file(&self, _path: String) -> Option<BoxFuture<SbResult<()>>> {
    None
  }
  fn rg_path(&self) -> BoxFuture<Option<String>> {
    Box::pin(async { None })
  }
  fn working_directory(&self) -> Option<String> {
    Some("/w".into())
  }
}

fn fake(files: &[(&str, &str)]) -> (Arc<Fake>, AgentTools) {
  let f = Arc::new(Fake::default());
  for (p, c) in files {
    f.files.lock().unwrap().insert(p.to_string(), c.to_string());
  }
  (f.clone(), AgentTools::new(f, None))
}

#[tokio::test]
async fn read_text_directory_missing_guard_and_binary() {
  let (_d, t) = local(&[
    ("a.txt", b"a\nb\n"),
    ("src/x.rs", b"x"),
    ("img.png", b"\x89PNG\0\0"),
    ("big.txt", "l\n".repeat(600).as_bytes()),
  ]);
  let tool = cfg(&t);
  let ReadOutput::Text {
    content,
    lines,
    total_lines,
  } = t.read(&tool, read_input("a.txt")).await.unwrap()
  else {
    panic!()
  };
  assert_eq!((content.as_str(), total_lines), ("a\nb\n", 3));
  assert_eq!(lines[1], (2, "b".to_string()));
  assert_eq!(
    t.read(&tool, read_input("src")).await.unwrap(),
    ReadOutput::Directory {
      entries: vec!["x.rs".into()]
    }
  );
  assert_eq!(
    t.read(&tool, read_input("nope")).await.unwrap_err(),
    "Path not found: nope"
  );
  assert!(t
    .read(&tool, read_input("big.txt"))
    .await
    .unwrap_err()
    .starts_with("File is large (601 lines)"));
  assert!(t
    .read(&tool, read_input("img.png"))
    .await
    .unwrap_err()
    .starts_with(
      "Cannot read binary file: img.png (file exists, 6 bytes). Use appropriate tools to process PNG files"
    ));
  assert!(t
    .read(&tool, read_input("../x"))
    .await
    .unwrap_err()
    .starts_with("Path is outside the working directory ("));
}

#[tokio::test]
async fn write_edit_literal_and_byte_exact() {
  let (d, t) = local(&[("a.txt", b"alpha BETA \xff gamma\n")]);
  let tool = cfg(&t);
  let (w, fx) = t.write(&tool, "n/new.txt".into(), "héllo".into()).await;
  assert_eq!(w.unwrap().bytes_written, 6);
  assert_eq!(fx.touched.len(), 1);
  let edit = |old: &str, new: &str| EditInput {
    file_path: "a.txt".into(),
    old_string: old.into(),
    new_string: new.into(),
    replace_all: false,
  };
  let (e, _) = t.edit(&tool, edit("BETA", "[$&]")).await;
  assert_eq!(e.unwrap().replacements, 1);
  assert_eq!(
    std::fs::read(d.path().join("a.txt")).unwrap(),
    b"alpha [$&] \xff gamma\n"
  );
  assert_eq!(
    t.edit(&tool, edit("nope", "x")).await.0.unwrap_err(),
    "String not found in file: \"nope\""
  );
  assert_eq!(
    t.edit(&tool, edit("a", "a")).await.0.unwrap_err(),
    "old_string and new_string must be different"
  );
  assert_eq!(
    t.edit(&tool, edit("a", "b"))
      .await
      .0
      .unwrap_err()
      .split('.')
      .next()
      .unwrap(),
    "String appears 4 times in file"
  );
  let small = t
    .tool(ToolConfig {
      max_file_size: Some(3),
      ..Default::default()
    })
    .unwrap();
  assert_eq!(
    t.write(&small, "b.txt".into(), "toolong".into())
      .await
      .0
      .unwrap_err(),
    "File content exceeds maximum size of 3 bytes (got 7)"
  );
}

#[tokio::test]
async fn glob_and_grep_natively_with_allowed_paths() {
  let (_d, t) = local(&[
    ("src/a.ts", b"needle\n"),
    ("src/b.ts", b"x\n"),
    ("docs/n.md", b"needle\n"),
    (".hidden/h.ts", b"needle\n"),
  ]);
  let tool = cfg(&t);
  let mut g = t
    .glob(&tool, "*.ts".into(), None, CancellationToken::new())
    .await
    .unwrap()
    .matches;
  g.sort();
  assert_eq!(g, vec!["./.hidden/h.ts", "./src/a.ts", "./src/b.ts"]);
  let only_src = t
    .tool(ToolConfig {
      allowed_paths: Some(vec!["src".into()]),
      ..Default::default()
    })
    .unwrap();
  let input = GrepInput {
    pattern: "needle".into(),
    ..Default::default()
  };
  assert_eq!(
    t.grep(&tool, input.clone(), CancellationToken::new())
      .await
      .unwrap()
      .output,
    GrepOutput::Files(vec!["./docs/n.md".into(), "./src/a.ts".into()])
  );
  assert_eq!(
    t.grep(&only_src, input.clone(), CancellationToken::new())
      .await
      .unwrap()
      .output,
    GrepOutput::Files(vec!["./src/a.ts".into()])
  );
  let docs = GrepInput {
    path: Some("docs".into()),
    ..input.clone()
  };
  assert_eq!(
    t.grep(&only_src, docs, CancellationToken::new())
      .await
      .unwrap_err(),
    "Path not allowed: docs"
  );
  let bad = GrepInput {
    pattern: "(".into(),
    ..input
  };
  assert!(t
    .grep(&tool, bad, CancellationToken::new())
    .await
    .unwrap_err()
    .starts_with("Invalid regex: "));
  assert!(t
    .glob(&tool, "src/[a".into(), None, CancellationToken::new())
    .await
    .unwrap_err()
    .starts_with("Invalid glob pattern: "));
  assert_eq!(
    t.glob(
      &tool,
      "*".into(),
      Some("missing".into()),
      CancellationToken::new()
    )
    .await
    .unwrap_err(),
    "Path not found: missing"
  );
}

#[tokio::test]
async fn bash_blocked_truncated_and_background() {
  let (d, t) = local(&[]);
  let tool = t
    .tool(ToolConfig {
      blocked_commands: vec!["rm -rf".into()],
      max_output_length: Some(20),
      ..Default::default()
    })
    .unwrap();
  let run = |command: &str, bg: bool| BashInput {
    command: command.into(),
    timeout_ms: None,
    run_in_background: bg,
  };
  assert_eq!(
    t.bash(&tool, run("rm -rf /", false), CancellationToken::new(), None)
      .await
      .0
      .unwrap_err(),
    "Command blocked: contains 'rm -rf'"
  );
  let (out, fx) = t
    .bash(&tool, run("seq 1 100; exit 3", false), CancellationToken::new(), None)
    .await;
  let out = out.unwrap();
  assert!(fx.all);
  assert_eq!(out.exit_code, Some(3));
  assert!(out.stdout.starts_with("[Total output lines: 101]"));
  let (bg, _) = t
    .bash(&tool, run("sleep 30", true), CancellationToken::new(), None)
    .await;
  let bg = bg.unwrap().background.unwrap();
  assert!(bg.output_file.starts_with("/tmp/knap-bash-bg_"));
  // SAFETY: signal 0 only checks that the process exists.
  assert_eq!(unsafe { libc::kill(bg.pid as i32, 0) }, 0);
  t.sandbox().local().unwrap().destroy();
  let _ = std::fs::remove_file(&bg.output_file);
  drop(d);
}

#[tokio::test]
async fn patch_through_the_native_sandbox() {
  let (d, t) = local(&[("a.txt", b"one\ntwo\n")]);
  let tool = cfg(&t);
  let (out, fx) = t
    .patch(
      &tool,
      "*** Begin Patch\n*** Update File: a.txt\n-two\n+TWO\n*** Add File: b/c.txt\n+new\n*** End Patch"
        .into(),
    )
    .await;
  let out = out.unwrap();
  assert_eq!(out.message, "Successfully patched 2 files");
  assert_eq!(
    out.files,
    vec![
      ("modified", "a.txt".to_string()),
      ("added", "b/c.txt".to_string())
    ]
  );
  assert_eq!(fx.touched.len(), 2);
  assert_eq!(
    std::fs::read_to_string(d.path().join("a.txt")).unwrap(),
    "one\nTWO\n"
  );
  assert_eq!(
    std::fs::read_to_string(d.path().join("b/c.txt")).unwrap(),
    "new\n"
  );
}

#[tokio::test]
async fn another_sandbox_goes_through_its_interface() {
  let (f, t) = fake(&[("a.txt", "x\ny\n"), ("d/e.txt", "e"), ("gone.txt", "g\n")]);
  let tool = cfg(&t);
  let ReadOutput::Text {
    content, total_lines, ..
  } = t.read(&tool, read_input("a.txt")).await.unwrap()
  else {
    panic!()
  };
  assert_eq!((content.as_str(), total_lines), ("x\ny\n", 3));
  assert_eq!(
    t.read(&tool, read_input("d")).await.unwrap(),
    ReadOutput::Directory {
      entries: vec!["e.txt".into()]
    }
  );
  let (out, _) = t
    .edit(
      &tool,
      EditInput {
        file_path: "a.txt".into(),
        old_string: "y".into(),
        new_string: "$1".into(),
        replace_all: false,
      },
    )
    .await;
  assert_eq!(out.unwrap().replacements, 1);
  assert_eq!(f.files.lock().unwrap()["a.txt"], "x\n$1\n");
  // No deleteFile: Patch removes with `rm --`.
  let (p, fx) = t
    .patch(
      &tool,
      "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch".into(),
    )
    .await;
  assert_eq!(p.unwrap().message, "Successfully patched gone.txt");
  assert_eq!(fx.touched, vec!["/w/gone.txt"]);
  assert!(f.execs.lock().unwrap().iter().any(|c| c == "rm -- 'gone.txt'"));
  // Bash output is middle-truncated here (knap's sandbox truncates while capturing).
  let small = t
    .tool(ToolConfig {
      max_output_length: Some(10),
      ..Default::default()
    })
    .unwrap();
  let b = BashInput {
    command: "anything".into(),
    ..Default::default()
  };
  assert!(t
    .bash(&small, b, CancellationToken::new(), None)
    .await
    .0
    .unwrap()
    .stdout
    .contains("…40 chars truncated…"));
  let g = GrepInput {
    pattern: "x".into(),
    ..Default::default()
  };
  assert_eq!(
    t.grep(&tool, g, CancellationToken::new()).await.unwrap_err(),
    text::RG_MISSING
  );
  assert_eq!(t.absolute("src/../a.txt").as_deref(), Some("/w/a.txt"));
}

#[tokio::test]
async fn timeouts_answer_errors() {
  let f = Arc::new(Fake {
    hang_reads: true,
    ..Default::default()
  });
  f.files.lock().unwrap().insert("a.txt".into(), "a".into());
  let t = AgentTools::new(f, None);
  let tool = t
    .tool(ToolConfig {
      timeout_ms: Some(50),
      ..Default::default()
    })
    .unwrap();
  assert_eq!(
    t.read(&tool, read_input("a.txt")).await.unwrap_err(),
    "Read timed out after 50ms"
  );
}

#[tokio::test]
async fn bash_progress_streams_while_the_command_runs() {
  use crate::progress::{Progress, Stream};
  let (_d, t) = local(&[]);
  let tool = cfg(&t);
  let progress = Progress::with_default_capacity();
  // The command waits for a file the consumer writes on its first chunk: it can only end if
  // that chunk arrived while it was still running.
  let dir = t.sandbox().working_directory().unwrap();
  let gate = format!("{dir}/gate");
  let input = BashInput {
    command: format!("echo first; echo oops >&2; while [ ! -e '{gate}' ]; do sleep 0.02; done; echo second"),
    timeout_ms: Some(20_000.0),
    run_in_background: false,
  };
  let consumer = {
    let progress = progress.clone();
    let gate = gate.clone();
    tokio::spawn(async move {
      let mut seen = Vec::new();
      while let Some(c) = progress.next().await {
        if seen.is_empty() {
          std::fs::write(&gate, "").unwrap();
        }
        seen.push(c);
      }
      seen
    })
  };
  let (out, _) = t.bash(&tool, input, CancellationToken::new(), Some(progress)).await;
  let out = out.unwrap();
  assert_eq!(out.stdout, "first\nsecond\n");
  assert_eq!(out.interrupted, Some(false));
  let seen = consumer.await.unwrap();
  let text = |s: Stream| seen.iter().filter(|c| c.stream == s).map(|c| c.chunk.as_str()).collect::<String>();
  assert_eq!(text(Stream::Stdout), "first\nsecond\n");
  assert_eq!(text(Stream::Stderr), "oops\n");
  assert!(seen.iter().all(|c| c.skipped == 0));
}

#[tokio::test]
async fn bash_progress_is_closed_when_the_command_is_refused() {
  let (_d, t) = local(&[]);
  let tool = t
    .tool(ToolConfig {
      blocked_commands: vec!["rm".into()],
      ..Default::default()
    })
    .unwrap();
  let progress = crate::progress::Progress::with_default_capacity();
  let input = BashInput {
    command: "rm x".into(),
    ..Default::default()
  };
  let (out, _) = t.bash(&tool, input, CancellationToken::new(), Some(progress.clone())).await;
  assert!(out.is_err());
  assert_eq!(progress.next().await, None);
}

#[tokio::test]
async fn grep_is_bounded_by_max_results_and_says_so() {
  let files: Vec<(String, Vec<u8>)> = (0..12).map(|i| (format!("f{i:02}.txt"), b"hit\nhit\n".to_vec())).collect();
  let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, c)| (p.as_str(), c.as_slice())).collect();
  let (_d, t) = local(&refs);
  let tool = t
    .tool(ToolConfig {
      max_results: Some(5),
      ..Default::default()
    })
    .unwrap();
  let input = GrepInput {
    pattern: "hit".into(),
    ..Default::default()
  };
  let page = t.grep(&tool, input.clone(), CancellationToken::new()).await.unwrap();
  match &page.output {
    GrepOutput::Files(f) => assert_eq!(f.len(), 5),
    other => panic!("{other:?}"),
  }
  assert_eq!(page.total, 12);
  assert_eq!(
    page.note.as_deref(),
    Some("Showing 5 of 12 results (7 more not listed). Narrow the search with path, glob or type, or page with offset and head_limit; tools.Grep.maxResults raises the limit.")
  );
  // Matching lines are bounded too; the model's offset reaches past the bound.
  let content = GrepInput {
    output_mode: Some("content".into()),
    offset: Some(20.0),
    ..input.clone()
  };
  let page = t.grep(&tool, content, CancellationToken::new()).await.unwrap();
  match &page.output {
    GrepOutput::Content(m) => assert_eq!(m.len(), 4),
    other => panic!("{other:?}"),
  }
  assert_eq!((page.total, page.note), (4, None));
  // The default bound is AI_SDK_SEARCH_MAX_RESULTS; 0 turns it off.
  let all = t
    .tool(ToolConfig {
      max_results: Some(0),
      ..Default::default()
    })
    .unwrap();
  let page = t.grep(&all, input.clone(), CancellationToken::new()).await.unwrap();
  assert_eq!((page.total, page.note.is_none()), (12, true));
  assert_eq!(result_limit(None), AI_SDK_SEARCH_MAX_RESULTS);
}
