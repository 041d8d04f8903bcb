//! `ShellTools::execute` end to end on temporary workspaces: every tool's exact output text and
//! error (message and code), as `@caveman-ai/agent` 0.2.0 §5 words them.

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::*;

struct Ws {
  dir: tempfile::TempDir,
  tools: ShellTools,
}

impl Ws {
  /// The workspace root as the tools see it (canonical).
  fn root(&self) -> PathBuf {
    self.dir.path().join("ws").canonicalize().unwrap()
  }

  fn path(&self, rel: &str) -> PathBuf {
    self.dir.path().join("ws").join(rel)
  }

  /// A directory next to the workspace (outside it).
  fn outside(&self) -> PathBuf {
    self.dir.path().to_path_buf()
  }

  fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
    let p = self.path(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
  }

  fn read(&self, rel: &str) -> String {
    std::fs::read_to_string(self.path(rel)).unwrap()
  }

  async fn run(&self, name: &str, input: Value) -> Result<ToolOutput, ToolError> {
    self.tools.execute(name, &input, CancellationToken::new()).await
  }

  async fn ok(&self, name: &str, input: Value) -> String {
    match self.run(name, input.clone()).await {
      Ok(out) => out.text,
      Err(e) => panic!("{name}({input}) failed: {} ({})", e.message, e.code),
    }
  }

  async fn err(&self, name: &str, input: Value) -> ToolError {
    match self.run(name, input.clone()).await {
      Ok(out) => panic!("{name}({input}) should fail, returned {:?}", out.text),
      Err(e) => e,
    }
  }
}

fn workspace_with(tools: Option<&[&str]>, caps: &[(&str, f64)]) -> Ws {
  let dir = tempfile::tempdir().unwrap();
  std::fs::create_dir(dir.path().join("ws")).unwrap();
  let mut config = ShellToolsConfig::new(dir.path().join("ws"));
  config.tools = tools.map(|t| t.iter().map(|s| s.to_string()).collect());
  config.output_caps = caps.iter().map(|(k, v)| (k.to_string(), *v)).collect();
  let tools = ShellTools::new(config).unwrap();
  Ws { dir, tools }
}

fn workspace() -> Ws {
  workspace_with(None, &[])
}

/// `line 0` .. `line 3999` joined by `\n`: the seed's 4,000-line file, 38,889 bytes.
fn four_thousand_lines() -> String {
  (0..4000)
    .map(|i| format!("line {i}"))
    .collect::<Vec<_>>()
    .join("\n")
}

/// The `tool_<32 lowercase hex>` handle in a capped marker, checking its shape.
fn handle_in(text: &str) -> String {
  const LEAD: &str = "use read_tool_output with handle ";
  let at = text.rfind(LEAD).expect("marker with a handle") + LEAD.len();
  let handle = &text[at..at + 37];
  assert!(handle.starts_with("tool_"), "{handle}");
  assert!(
    handle[5..]
      .bytes()
      .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
    "{handle}"
  );
  assert_eq!(&text[at + 37..], "]", "the marker ends the text");
  handle.to_string()
}

// ---------------------------------------------------------------- selection and properties

#[test]
fn default_selection_order_and_properties() {
  let ws = workspace();
  let specs = ws.tools.specs();
  let names: Vec<_> = specs.iter().map(|s| s.name).collect();
  assert_eq!(
    names,
    [
      "read_file",
      "grep",
      "bash",
      "write_file",
      "edit_file",
      "read_tool_output"
    ]
  );
  let table: Vec<_> = specs
    .iter()
    .map(|s| (s.name, s.effect, s.speculative, s.timeout_ms))
    .collect();
  assert_eq!(
    table,
    [
      ("read_file", "read", true, 30_000),
      ("grep", "read", true, 30_000),
      ("bash", "external", false, 120_000),
      ("write_file", "write", false, 30_000),
      ("edit_file", "write", false, 30_000),
      ("read_tool_output", "read", false, 30_000),
    ]
  );
  let caps: Vec<_> = ShellToolName::ALL.iter().map(|&t| ws.tools.cap(t)).collect();
  assert_eq!(caps, [24_000, 16_000, 24_000, 2_000, 2_000, 24_000]);
  assert_eq!(
    specs[0].description,
    "Read a UTF-8 file from the workspace. Optional offset/limit read a line range. Each returned line starts with \
     its 1-based line number and a tab. These prefixes are not file content; remove the leading number and tab from \
     each line before copying content into another file. Output is capped at 24000 bytes."
  );
  assert_eq!(
    specs[1].description,
    "Search the workspace for a regular expression with ripgrep (grep fallback). Returns at most 200 matches, capped \
     at 16000 bytes."
  );
  assert_eq!(
    specs[2].description,
    "Run one shell command in the workspace; hard timeout 120000 ms; output capped at 24000 bytes. Interactive \
     sessions are unavailable."
  );
  assert_eq!(
    specs[3].description,
    "Create a UTF-8 file in the workspace. Refuses an existing path unless overwrite is true. Parent directory must \
     already exist."
  );
  assert_eq!(
    specs[4].description,
    "Replace an exact string in a workspace file. The old string must appear exactly once unless replace_all is set. \
     Writes to disk."
  );
  assert_eq!(
    specs[5].description,
    "Read captured output from this active agent by opaque handle. Uses zero-based byte offset and bounded byte \
     limit, or finds a literal query without rerunning the original tool."
  );
  assert_eq!(
    specs[0].input,
    json!({"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"},
      "limit": {"type": "integer"}}, "required": ["path"]})
  );
  assert_eq!(
    specs[4].input["required"],
    json!(["path", "old_string", "new_string"])
  );
  // The JSON text keeps the reference's (TypeBox) property order: serde_json's preserve_order.
  assert_eq!(
    specs[4].input.to_string(),
    r#"{"type":"object","properties":{"path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["path","old_string","new_string"]}"#
  );
  assert!(
    ws.tools.store().is_some(),
    "read_tool_output selected: the store is active"
  );
}

#[test]
fn selection_keeps_the_given_order_and_rejects_unknown_and_duplicates() {
  let ws = workspace_with(Some(&["bash", "read_file"]), &[]);
  let names: Vec<_> = ws.tools.specs().iter().map(|s| s.name).collect();
  assert_eq!(names, ["bash", "read_file"]);
  assert!(ws.tools.store().is_none(), "no read_tool_output, no store");

  let build = |names: &[&str]| {
    let mut config = ShellToolsConfig::new("/nonexistent-is-fine-until-first-use");
    config.tools = Some(names.iter().map(|s| s.to_string()).collect());
    ShellTools::new(config).err().expect("construction error")
  };
  let e = build(&["read_file", "nope"]);
  assert_eq!(
    (e.code.as_str(), e.message.as_str()),
    (
      "cave_shell_tool_unknown:nope",
      "cave_shell_tool_unknown:nope\nhint: the tools are read_file, grep, bash, write_file, edit_file, read_tool_output"
    )
  );
  let e = build(&["Read_File"]);
  assert_eq!(e.code, "cave_shell_tool_unknown:Read_File");
  assert!(
    e.message
      .starts_with("cave_shell_tool_unknown:Read_File\nhint: did you mean \"read_file\"? the tools are "),
    "{}",
    e.message
  );
  let e = build(&["grep", "bash", "grep"]);
  assert_eq!(
    (e.code.as_str(), e.message.as_str()),
    ("cave_shell_tool_duplicate:grep", "cave_shell_tool_duplicate:grep")
  );
  assert!(ShellTools::new({
    let mut c = ShellToolsConfig::new("/x");
    c.tools = Some(vec![]);
    c
  })
  .unwrap()
  .specs()
  .is_empty());
}

#[tokio::test]
async fn a_tool_that_was_not_selected_cannot_run() {
  let ws = workspace_with(Some(&["read_file"]), &[]);
  let e = ws.err("bash", json!({"command": "echo hi"})).await;
  assert_eq!(e.code, "cave_shell_tool_unknown:bash");
}

#[tokio::test]
async fn output_caps_override_descriptions_and_caps() {
  let ws = workspace_with(None, &[("grep", 1234.0), ("write_file", 10.0)]);
  assert!(ws.tools.specs()[1].description.ends_with("capped at 1234 bytes."));
  assert_eq!(ws.tools.cap(ShellToolName::Grep), 1234);
  assert_eq!(
    ws.tools.cap(ShellToolName::ReadFile),
    24_000,
    "others keep their defaults"
  );
  // capOutput's marker on a write result longer than the cap.
  let text = ws
    .ok("write_file", json!({"path": "a.txt", "content": "hello"}))
    .await;
  assert_eq!(
    text,
    "wrote a.tx\n[caveman-code: output capped at 10 of 20 bytes; narrow the request]"
  );
}

// ---------------------------------------------------------------- read_file

#[tokio::test]
async fn read_file_numbers_lines() {
  let ws = workspace();
  ws.write("a.txt", "a\nb\n");
  ws.write("greek.txt", "alpha\nbeta\ngamma\n");
  assert_eq!(
    ws.ok("read_file", json!({"path": "a.txt"})).await,
    "1\ta\n2\tb\n3\t"
  );
  assert_eq!(
    ws.ok("read_file", json!({"path": "greek.txt", "offset": 2, "limit": 1}))
      .await,
    "2\tbeta"
  );
  assert_eq!(
    ws.ok("read_file", json!({"path": "greek.txt", "offset": 3}))
      .await,
    "3\tgamma\n4\t"
  );
  // offset = max(1, offset); limit = max(1, limit)
  assert_eq!(
    ws.ok(
      "read_file",
      json!({"path": "greek.txt", "offset": -5, "limit": 0})
    )
    .await,
    "1\talpha"
  );
  assert_eq!(
    ws.ok("read_file", json!({"path": "greek.txt", "offset": 99}))
      .await,
    ""
  );
  let out = ws
    .run("read_file", json!({"path": "./greek.txt", "limit": 1}))
    .await
    .unwrap();
  assert_eq!(
    out.label.as_deref(),
    Some("read_file:./greek.txt"),
    "label keeps the path as given"
  );
  // An absolute path inside the workspace is allowed.
  let abs = ws.root().join("a.txt");
  assert_eq!(
    ws.ok("read_file", json!({"path": abs.to_str().unwrap(), "limit": 1}))
      .await,
    "1\ta"
  );
}

#[tokio::test]
async fn read_file_reads_small_files_inline_and_streams_large_ones_to_the_same_text() {
  use futures::FutureExt;
  let ws = workspace();
  let max = crate::limits::INLINE_READ_MAX_BYTES as usize;
  // Around the inline limit and well past it: the same numbering either way.
  for size in [max - 1, max, max + 1, 3 * max + 5] {
    let mut content = String::new();
    let mut i = 0;
    while content.len() < size {
      content.push_str(&format!("line {i:07}\n"));
      i += 1;
    }
    content.truncate(size);
    let name = format!("f{size}.txt");
    ws.write(&name, &content);
    let lines: Vec<&str> = content.split('\n').collect();
    let n = lines.len();
    let expect = (n - 2..=n)
      .map(|k| format!("{k}\t{}", lines[k - 1]))
      .collect::<Vec<_>>()
      .join("\n");
    let got = ws
      .ok("read_file", json!({"path": name, "offset": n - 2, "limit": 3}))
      .await;
    assert_eq!(got, expect, "file of {size} bytes");
  }
  // A small file is answered in the tool's first poll: no hop to the blocking pool and back.
  ws.write("small.txt", "x\ny\n");
  let input = json!({"path": "small.txt"});
  let first = ws
    .tools
    .execute("read_file", &input, CancellationToken::new())
    .now_or_never()
    .expect("a small read_file completes without waiting on another thread");
  assert_eq!(first.unwrap().text, "1\tx\n2\ty\n3\t");
}

/// A small file is read as far as its `fstat` size; a file whose size says 0 but holds text
/// (`/proc`) is read to its real end. A path through an inward symlink (which the one-step open
/// refuses) gives the same text as the plain path.
#[tokio::test]
async fn read_file_reads_to_the_real_end_when_the_size_says_zero() {
  let tools = ShellTools::new(ShellToolsConfig::new("/proc/self")).unwrap();
  let out = tools
    .execute(
      "read_file",
      &json!({"path": "status", "limit": 1}),
      CancellationToken::new(),
    )
    .await
    .unwrap();
  assert!(out.text.starts_with("1\tName:"), "{}", out.text);
  let ws = workspace();
  ws.write("d/a.txt", "one\ntwo\n");
  symlink("d", ws.path("link")).unwrap();
  let plain = ws.ok("read_file", json!({"path": "d/a.txt"})).await;
  assert_eq!(plain, "1\tone\n2\ttwo\n3\t");
  assert_eq!(ws.ok("read_file", json!({"path": "link/a.txt"})).await, plain);
  assert_eq!(
    ws.ok("read_file", json!({"path": "link/../d/./a.txt"})).await,
    plain
  );
}

/// A shell tool call joins its abort with the tool set's `close()` without a task on the
/// runtime (a spawned link task cost two cross-thread wakes per call): a small read completes in
/// its first poll with no tokio runtime at all (`tokio::spawn` would panic here).
#[test]
fn a_small_read_file_needs_no_runtime_and_spawns_nothing() {
  use futures::FutureExt;
  let ws = workspace();
  ws.write("small.txt", "a\nb\n");
  let input = json!({"path": "small.txt"});
  let out = ws
    .tools
    .execute("read_file", &input, CancellationToken::new())
    .now_or_never()
    .expect("completes in its first poll");
  assert_eq!(out.unwrap().text, "1\ta\n2\tb\n3\t");
}

/// `close()` still aborts a call in progress: the call's future watches the tool set's token.
#[tokio::test]
async fn close_aborts_a_running_bash_call() {
  let ws = workspace();
  let input = json!({"command": "echo 1 > ready; sleep 300"});
  let call = ws.tools.execute("bash", &input, CancellationToken::new());
  let closer = async {
    while !ws.path("ready").exists() {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
    ws.tools.close();
  };
  let (out, ()) = tokio::join!(call, closer);
  let e = out.expect_err("a closed tool set aborts the running call");
  assert_eq!(e.code, "ABORT_ERR", "{}", e.message);
}

#[tokio::test]
async fn read_file_errors() {
  let ws = workspace();
  std::fs::create_dir(ws.path("dir")).unwrap();
  let e = ws.err("read_file", json!({"path": "dir"})).await;
  assert_eq!(e.message, "caveman-code: not a file: dir");
  assert_eq!(e.code, "cave_not_a_file");
  let e = ws.err("read_file", json!({"path": "."})).await;
  assert_eq!(e.message, "caveman-code: not a file: .");

  let e = ws.err("read_file", json!({"path": "missing.txt"})).await;
  assert_eq!(e.code, "ENOENT");
  assert_eq!(
    e.message,
    format!(
      "ENOENT: no such file or directory, stat '{}'",
      ws.root().join("missing.txt").display()
    )
  );

  // A FIFO is refused without waiting for a writer.
  let fifo = std::ffi::CString::new(ws.path("fifo").to_str().unwrap()).unwrap();
  // SAFETY: valid NUL-terminated path.
  assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
  let e = tokio::time::timeout(
    Duration::from_secs(60),
    ws.run("read_file", json!({"path": "fifo"})),
  )
  .await
  .expect("read_file of a FIFO must not block")
  .unwrap_err();
  assert_eq!(e.message, "caveman-code: not a file: fifo");

  let e = ws.err("read_file", json!({})).await;
  assert_eq!(e.code, "cave_tool_input_schema_mismatch:read_file");
  let e = ws.err("read_file", json!({"path": 5})).await;
  assert_eq!(e.code, "cave_tool_input_schema_mismatch:read_file");
  let e = ws.err("read_file", json!("a.txt")).await;
  assert_eq!(e.code, "cave_tool_arguments_invalid");
}

#[tokio::test]
async fn read_and_write_refuse_escapes() {
  let ws = workspace();
  std::fs::write(ws.outside().join("secret.txt"), "secret").unwrap();
  std::fs::create_dir(ws.path("nested")).unwrap();
  symlink(ws.outside(), ws.path("nested/escape")).unwrap();
  let outside_abs = ws.outside().join("secret.txt");
  let candidates = [
    "../secret.txt",
    "nested/escape/secret.txt",
    "nested/../../secret.txt",
    outside_abs.to_str().unwrap(),
  ];
  for path in candidates {
    let e = ws.err("read_file", json!({"path": path})).await;
    assert_eq!(
      e.message,
      format!("caveman-code: path escapes the workspace: {path}")
    );
    assert_eq!(e.code, "cave_workspace_escape");
    let e = ws
      .err(
        "write_file",
        json!({"path": path, "content": "pwned", "overwrite": true}),
      )
      .await;
    assert_eq!(
      e.message,
      format!("caveman-code: path escapes the workspace: {path}")
    );
    let e = ws
      .err(
        "edit_file",
        json!({"path": path, "old_string": "secret", "new_string": "pwned"}),
      )
      .await;
    assert_eq!(
      e.message,
      format!("caveman-code: path escapes the workspace: {path}")
    );
    let e = ws.err("grep", json!({"pattern": "secret", "path": path})).await;
    assert_eq!(e.code, "cave_workspace_escape");
  }
  // A new file under an outward symlinked directory is refused too.
  let e = ws
    .err(
      "write_file",
      json!({"path": "nested/escape/new.txt", "content": "x"}),
    )
    .await;
  assert_eq!(e.code, "cave_workspace_escape");
  assert!(!ws.outside().join("new.txt").exists());
  assert_eq!(std::fs::read_to_string(&outside_abs).unwrap(), "secret");
  // A symlink that stays inside is followed.
  ws.write("real.txt", "inside\n");
  symlink(ws.path("real.txt"), ws.path("link.txt")).unwrap();
  assert_eq!(
    ws.ok("read_file", json!({"path": "link.txt"})).await,
    "1\tinside\n2\t"
  );
}

#[tokio::test]
async fn capped_read_file_pages_through_read_tool_output() {
  let ws = workspace_with(None, &[("read_file", 512.0), ("read_tool_output", 1024.0)]);
  let mut content = String::from("HEAD_SENTINEL\n");
  for i in 0..400 {
    content.push_str(&format!("filler line {i}\n"));
  }
  content.push_str("TAIL_SENTINEL\n");
  ws.write("big.txt", &content);
  let out = ws.run("read_file", json!({"path": "big.txt"})).await.unwrap();
  let numbered: String = content
    .split('\n')
    .enumerate()
    .map(|(i, l)| format!("{}\t{l}", i + 1))
    .collect::<Vec<_>>()
    .join("\n");
  let total = numbered.len();
  assert_eq!(out.label.as_deref(), Some("read_file:big.txt"));
  assert!(
    out.text.starts_with("1\tHEAD_SENTINEL\n2\tfiller line 0\n"),
    "head preview"
  );
  let marker_start = format!(
    "\n[caveman-code: output capped from {total} captured bytes; use read_tool_output with handle tool_"
  );
  assert!(out.text.contains(&marker_start), "{}", out.text);
  assert_eq!(out.text.len(), 512, "preview + marker fill the cap exactly");
  let handle = handle_in(&out.text);

  let page = ws
    .ok(
      "read_tool_output",
      json!({"handle": handle, "offset": 0, "limit": 64}),
    )
    .await;
  assert_eq!(
    page,
    format!(
      "read_file:big.txt · bytes 0-64 of {total} · complete capture\n{}\n[next offset: 64]",
      &numbered[..64]
    )
  );
  let next: usize = page
    .rsplit("[next offset: ")
    .next()
    .unwrap()
    .trim_end_matches(']')
    .parse()
    .unwrap();
  let found = ws
    .ok(
      "read_tool_output",
      json!({"handle": handle, "offset": next, "query": "TAIL_SENTINEL"}),
    )
    .await;
  let at = numbered.find("TAIL_SENTINEL").unwrap();
  assert_eq!(
    found,
    format!(
      "read_file:big.txt · bytes {at}-{total} of {total} · complete capture\n{}",
      &numbered[at..]
    )
  );
  assert!(
    !found.contains("[next offset"),
    "the last page has no next offset"
  );

  // The default page is min(8000, cap - 512) = 512 bytes here.
  let page = ws.ok("read_tool_output", json!({"handle": handle})).await;
  assert!(page.starts_with(&format!(
    "read_file:big.txt · bytes 0-512 of {total} · complete capture\n"
  )));
  assert!(page.ends_with("\n[next offset: 512]"));
  // An explicit limit is bounded by cap - 512 too.
  let page = ws
    .ok(
      "read_tool_output",
      json!({"handle": handle, "offset": 10, "limit": 100_000}),
    )
    .await;
  assert!(page.starts_with(&format!("read_file:big.txt · bytes 10-522 of {total} · ")));
  // An offset past the end reads an empty page at the end.
  let page = ws
    .ok(
      "read_tool_output",
      json!({"handle": handle, "offset": total + 50}),
    )
    .await;
  assert_eq!(
    page,
    format!("read_file:big.txt · bytes {total}-{total} of {total} · complete capture\n")
  );
  // No match at or after the start.
  let none = ws
    .ok(
      "read_tool_output",
      json!({"handle": handle, "offset": at + 1, "query": "TAIL_SENTINEL"}),
    )
    .await;
  assert_eq!(
    none,
    format!(
      "no literal match in read_file:big.txt at or after byte {}",
      at + 1
    )
  );
}

#[tokio::test]
async fn capped_read_file_without_read_tool_output_is_not_recoverable() {
  let ws = workspace_with(Some(&["read_file"]), &[("read_file", 512.0)]);
  ws.write("big.txt", "x".repeat(5000));
  let text = ws.ok("read_file", json!({"path": "big.txt"})).await;
  assert!(
    text.ends_with("\n[caveman-code: output capped from 5002 captured bytes; recovery paging is not exposed; narrow original request]"),
    "{text}"
  );
  assert!(text.starts_with("1\txxxx"));
  assert_eq!(text.len(), 512);
}

// ---------------------------------------------------------------- read_tool_output

#[tokio::test]
async fn read_tool_output_errors() {
  let ws = workspace_with(None, &[("bash", 200.0)]);
  let e = ws
    .err(
      "read_tool_output",
      json!({"handle": "tool_00000000000000000000000000000000"}),
    )
    .await;
  assert_eq!(
    e.message,
    "caveman-code: tool output handle is unknown or evicted"
  );
  assert_eq!(e.code, "cave_tool_output_handle_unknown");
  let text = ws.ok("bash", json!({"command": "seq 1 500"})).await;
  let handle = handle_in(&text);
  for offset in [
    json!(-1),
    json!(1.5),
    json!("3"),
    json!(9_007_199_254_740_992.0_f64),
  ] {
    let e = ws
      .err("read_tool_output", json!({"handle": handle, "offset": offset}))
      .await;
    assert_eq!(
      e.message, "caveman-code: read_tool_output offset must be a non-negative integer",
      "{offset}"
    );
    assert_eq!(e.code, "cave_tool_output_offset_invalid");
  }
  for limit in [json!(0), json!(-3), json!(2.5), json!(true)] {
    let e = ws
      .err("read_tool_output", json!({"handle": handle, "limit": limit}))
      .await;
    assert_eq!(
      e.message, "caveman-code: read_tool_output limit must be a positive integer",
      "{limit}"
    );
    assert_eq!(e.code, "cave_tool_output_limit_invalid");
  }
  let e = ws
    .err("read_tool_output", json!({"handle": handle, "query": ""}))
    .await;
  assert_eq!(
    e.message,
    "caveman-code: read_tool_output query must not be empty"
  );
  assert_eq!(e.code, "cave_tool_output_query_empty");
  // The store holds bash's body without the status line.
  let body: String = (1..=500).map(|i| format!("{i}\n")).collect();
  let page = ws
    .ok(
      "read_tool_output",
      json!({"handle": handle, "offset": 0, "limit": 10}),
    )
    .await;
  assert_eq!(
    page,
    format!(
      "bash:seq 1 500 · bytes 0-10 of {} · complete capture\n1\n2\n3\n4\n5\n\n[next offset: 10]",
      body.len()
    )
  );
  // Handles do not cross shellTools() instances.
  let other = workspace();
  let e = other.err("read_tool_output", json!({"handle": handle})).await;
  assert_eq!(e.code, "cave_tool_output_handle_unknown");
}

// ---------------------------------------------------------------- grep

#[tokio::test]
async fn grep_lines_scope_and_no_matches() {
  let ws = workspace();
  ws.write("a.txt", "needle one\nhay\nneedle two\n");
  ws.write("src/b.rs", "fn needle() {}\n");
  let out = ws.run("grep", json!({"pattern": "needle"})).await.unwrap();
  assert_eq!(
    out.text,
    "./a.txt:1:needle one\n./a.txt:3:needle two\n./src/b.rs:1:fn needle() {}\n"
  );
  assert_eq!(out.label.as_deref(), Some("grep:needle"));
  assert_eq!(
    ws.ok("grep", json!({"pattern": "needle", "path": "src"})).await,
    "src/b.rs:1:fn needle() {}\n"
  );
  // A single file is searched without a path prefix, as rg prints it.
  assert_eq!(
    ws.ok("grep", json!({"pattern": "two", "path": "a.txt"})).await,
    "3:needle two\n"
  );
  assert_eq!(
    ws.ok("grep", json!({"pattern": "absent_[0-9]+"})).await,
    "no matches"
  );
  assert_eq!(
    ws.ok("grep", json!({"pattern": "ne+dle (one|two)$"})).await,
    "./a.txt:1:needle one\n./a.txt:3:needle two\n"
  );
}

#[tokio::test]
async fn grep_honours_ignore_files_hidden_files_and_glob() {
  let ws = workspace();
  ws.write("keep.txt", "needle\n");
  ws.write("ignored-by-git.txt", "needle\n");
  ws.write("ignored-by-dotignore.txt", "needle\n");
  ws.write(".hidden.txt", "needle\n");
  ws.write(".hiddendir/inner.txt", "needle\n");
  ws.write("code.rs", "needle\n");
  ws.write(".gitignore", "ignored-by-git.txt\n");
  ws.write(".ignore", "ignored-by-dotignore.txt\n");
  // Outside a git repository rg does not apply .gitignore (but always applies .ignore).
  assert_eq!(
    ws.ok("grep", json!({"pattern": "needle"})).await,
    "./code.rs:1:needle\n./ignored-by-git.txt:1:needle\n./keep.txt:1:needle\n"
  );
  std::fs::create_dir(ws.path(".git")).unwrap();
  assert_eq!(
    ws.ok("grep", json!({"pattern": "needle"})).await,
    "./code.rs:1:needle\n./keep.txt:1:needle\n"
  );
  assert_eq!(
    ws.ok("grep", json!({"pattern": "needle", "glob": "*.rs"})).await,
    "./code.rs:1:needle\n"
  );
  assert_eq!(
    ws.ok("grep", json!({"pattern": "needle", "glob": "!*.rs"})).await,
    "./keep.txt:1:needle\n"
  );
  // An explicitly named hidden file is searched.
  assert_eq!(
    ws.ok("grep", json!({"pattern": "needle", "path": ".hidden.txt"}))
      .await,
    "1:needle\n"
  );
}

/// A small scope is searched on the calling thread: the call completes in its first poll with no
/// tokio runtime (no blocking-pool hop, no timeout task); the same search past either inline bound
/// (entries, bytes) goes to the pool and prints the same lines.
#[test]
fn a_small_grep_is_searched_inline_and_a_large_one_on_the_pool_with_the_same_output() {
  use crate::limits::{GREP_INLINE_MAX_BYTES, GREP_INLINE_MAX_ENTRIES};
  use futures::FutureExt;
  use std::sync::atomic::AtomicBool;
  let ws = workspace();
  ws.write("a.txt", "needle one\nhay\n");
  ws.write("src/b.rs", "fn needle() {}\n");
  let out = ws
    .tools
    .execute("grep", &json!({"pattern": "needle"}), CancellationToken::new())
    .now_or_never()
    .expect("a small grep completes without waiting on another thread");
  assert_eq!(out.unwrap().text, "./a.txt:1:needle one\n./src/b.rs:1:fn needle() {}\n");
  let root = ws.tools.workspace().root().unwrap();
  let opts = |pattern: &str| GrepOptions {
    pattern: pattern.into(),
    root: root.clone(),
    scope: root.path.clone(),
    display: ".".into(),
    glob: None,
    max_lines: 200,
    threads: 2,
  };
  let pooled = |pattern: &str| grep_search(&opts(pattern), &AtomicBool::new(false)).text;
  assert_eq!(grep_search_small(&opts("needle")).unwrap().text, pooled("needle"));
  // A bad pattern is the same text either way.
  assert_eq!(grep_search_small(&opts("(")).unwrap().text, pooled("("));
  // Past the entry bound: no inline search, and the pool finds every file.
  for i in 0..GREP_INLINE_MAX_ENTRIES {
    ws.write(&format!("many/f{i:03}.txt"), "needle\n");
  }
  assert!(grep_search_small(&opts("needle")).is_none());
  let text = pooled("needle");
  assert_eq!(text.lines().count(), 2 + GREP_INLINE_MAX_ENTRIES);
  assert!(text.contains("./many/f063.txt:1:needle\n"), "{text}");
  // Past the byte bound with few entries.
  std::fs::remove_dir_all(ws.path("many")).unwrap();
  assert!(grep_search_small(&opts("needle")).is_some());
  ws.write("big.txt", format!("{}needle big\n", "x".repeat(GREP_INLINE_MAX_BYTES as usize)));
  assert!(grep_search_small(&opts("needle")).is_none());
  let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
  let out = rt.block_on(ws.tools.execute("grep", &json!({"pattern": "needle"}), CancellationToken::new()));
  // (The tool's text is the same lines, head-capped: the long line exceeds grep's cap.)
  assert!(out.unwrap().text.starts_with("./a.txt:1:needle one\n./big.txt:1:xxx"));
  assert!(pooled("needle").ends_with("needle big\n./src/b.rs:1:fn needle() {}\n"));
}

/// A deep `path` is resolved on the blocking pool, as the other tools resolve theirs: the call's
/// first poll (on the JS thread inside a run) does not walk it. With the only blocking thread
/// held busy, the first poll must come back pending; once the pool is free the search finishes.
#[test]
fn grep_resolves_a_deep_path_off_the_polling_thread() {
  use futures::FutureExt;
  let ws = workspace();
  let deep = vec!["d"; 100].join("/");
  ws.write(&format!("{deep}/f.txt"), "needle\n");
  // A short name that expands to the deep path (the symlink's target counts as steps too).
  std::os::unix::fs::symlink(&deep, ws.path("short")).unwrap();
  let rt = tokio::runtime::Builder::new_current_thread()
    .max_blocking_threads(1)
    .enable_all()
    .build()
    .unwrap();
  for path in [deep.clone(), "short".to_string()] {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, running) = std::sync::mpsc::channel::<()>();
    let blocker = rt.spawn_blocking(move || {
      started.send(()).unwrap();
      held.recv().ok();
    });
    running.recv().unwrap();
    let input = json!({"pattern": "needle", "path": path});
    let mut call = Box::pin(ws.tools.execute("grep", &input, CancellationToken::new()));
    {
      let _runtime = rt.enter();
      assert!(
        (&mut call).now_or_never().is_none(),
        "{path}: resolved on the polling thread"
      );
    }
    release.send(()).unwrap();
    rt.block_on(blocker).unwrap();
    let out = rt.block_on(call).unwrap();
    // Printed as the resolved path (the symlink followed), as before.
    assert_eq!(out.text, format!("{deep}/f.txt:1:needle\n"));
  }
}

#[tokio::test]
async fn grep_limits_to_200_matches() {
  let ws = workspace();
  let many: String = (0..150).map(|i| format!("match {i}\n")).collect();
  ws.write("a.txt", &many);
  ws.write("b.txt", &many);
  let text = ws.ok("grep", json!({"pattern": "match"})).await;
  let (lines, marker) = text.rsplit_once('\n').unwrap();
  assert_eq!(
    marker,
    "[caveman-code: matches limited to first 200; narrow pattern or path]"
  );
  let lines: Vec<_> = lines.split('\n').collect();
  assert_eq!(lines.len(), 200);
  assert_eq!(lines[0], "./a.txt:1:match 0");
  assert_eq!(lines[149], "./a.txt:150:match 149");
  assert_eq!(lines[199], "./b.txt:50:match 49");
  // rg's --max-count 200 is per file: one file of 300 matches gives exactly 200 lines, no marker.
  let ws = workspace();
  ws.write(
    "c.txt",
    (0..300).map(|i| format!("match {i}\n")).collect::<String>(),
  );
  let text = ws.ok("grep", json!({"pattern": "match"})).await;
  assert_eq!(text.lines().count(), 200);
  assert!(!text.contains("matches limited"));
}

#[tokio::test]
async fn grep_regex_error_is_text_and_output_is_capped() {
  let ws = workspace();
  ws.write("a.txt", "x\n");
  let out = ws
    .run("grep", json!({"pattern": "(unclosed"}))
    .await
    .expect("a regex error is a result, not an error");
  assert!(out.text.contains("regex parse error"), "{}", out.text);
  assert!(out.text.contains("unclosed group"), "{}", out.text);

  let ws = workspace_with(None, &[("grep", 300.0)]);
  ws.write(
    "a.txt",
    (0..100)
      .map(|i| format!("long matching line number {i}\n"))
      .collect::<String>(),
  );
  let text = ws.ok("grep", json!({"pattern": "matching"})).await;
  assert_eq!(text.len(), 300);
  assert!(text.starts_with("./a.txt:1:long matching line number 0\n"));
  assert!(text.contains("; use read_tool_output with handle tool_"));
  handle_in(&text);
}

// ---------------------------------------------------------------- bash

#[tokio::test]
async fn bash_status_and_body() {
  let ws = workspace();
  let out = ws.run("bash", json!({"command": "echo hi"})).await.unwrap();
  assert_eq!(out.text, "exit 0\nhi\n");
  assert_eq!(out.label.as_deref(), Some("bash:echo hi"));
  assert_eq!(
    ws.ok("bash", json!({"command": "printf out; printf err >&2"}))
      .await,
    "exit 0\nout\nerr"
  );
  assert_eq!(
    ws.ok("bash", json!({"command": "echo out; echo err >&2; exit 3"}))
      .await,
    "exit 3\nout\nerr\n"
  );
  assert_eq!(
    ws.ok("bash", json!({"command": "exit 4"})).await,
    "exit 4\n(no output)"
  );
  assert_eq!(
    ws.ok("bash", json!({"command": "printf '  \\n'"})).await,
    "exit 0\n(no output)"
  );
  assert_eq!(
    ws.ok("bash", json!({"command": "kill -9 $$"})).await,
    "exit null\n(no output)"
  );
  // It runs in the canonical workspace with stdin closed.
  assert_eq!(
    ws.ok("bash", json!({"command": "pwd -P"})).await,
    format!("exit 0\n{}\n", ws.root().display())
  );
  assert_eq!(
    ws.ok("bash", json!({"command": "cat; echo done"})).await,
    "exit 0\ndone\n"
  );
  // The label is the first 60 UTF-16 units of the command.
  let long = format!("echo {}", "é".repeat(80));
  let out = ws.run("bash", json!({"command": long})).await.unwrap();
  assert_eq!(out.label.unwrap(), format!("bash:echo {}", "é".repeat(55)));
}

#[tokio::test]
async fn bash_errors() {
  let ws = workspace();
  for command in ["exit 127", "definitely_not_a_command_knap_test"] {
    let e = ws.err("bash", json!({"command": command})).await;
    assert_eq!(e.message, "caveman-code: host command shell is not available");
    assert_eq!(e.code, "cave_shell_unavailable");
  }
  let e = ws
    .err("bash", json!({"command": "echo hi", "yieldTimeMs": 10}))
    .await;
  assert_eq!(e.code, "cave_execution_backend_command_sessions_disabled");
  assert_eq!(e.message, "cave_execution_backend_command_sessions_disabled");
  let e = ws.err("bash", json!({"timeoutMs": 10})).await;
  assert_eq!(e.code, "cave_tool_input_schema_mismatch:bash");
}

#[tokio::test]
async fn bash_seed_capped_cat_example() {
  let ws = workspace();
  let content = four_thousand_lines();
  assert_eq!(content.len(), 38_889);
  ws.write("big.txt", &content);
  let out = ws.run("bash", json!({"command": "cat big.txt"})).await.unwrap();
  assert!(out.text.starts_with("exit 0\n"));
  let (before, marker) = out.text.rsplit_once('\n').unwrap();
  assert!(before.ends_with("\nline 3998\nline 3999"), "tail preview");
  assert!(marker.starts_with(
    "[caveman-code: output capped from 38889 captured bytes; use read_tool_output with handle tool_"
  ));
  assert_eq!(
    out.text.len(),
    24_000,
    "status + tail preview + marker fill the bash cap exactly"
  );
  let handle = handle_in(&out.text);
  // The handle pages the full body (without the status line).
  let page = ws
    .ok(
      "read_tool_output",
      json!({"handle": handle, "offset": 0, "limit": 14}),
    )
    .await;
  assert_eq!(
    page,
    "bash:cat big.txt · bytes 0-14 of 38889 · complete capture\nline 0\nline 1\n\n[next offset: 14]"
  );

  // Without read_tool_output the same run says recovery paging is not exposed.
  let ws2 = workspace_with(Some(&["bash"]), &[]);
  ws2.write("big.txt", &content);
  let text = ws2.ok("bash", json!({"command": "cat big.txt"})).await;
  assert!(text.ends_with(
    "\nline 3998\nline 3999\n[caveman-code: output capped from 38889 captured bytes; recovery paging is not exposed; narrow original request]"
  ));
  assert_eq!(text.len(), 24_000);
}

#[tokio::test]
async fn bash_capture_limit_marks_partial_output() {
  let ws = workspace();
  let text = ws
    .ok(
      "bash",
      json!({"command": "head -c 6000000 /dev/zero | tr '\\000' x; echo; echo TAIL"}),
    )
    .await;
  assert!(text.starts_with("exit 0\n"));
  // 4 MiB were captured of more; the tail preview is the end of what was captured.
  assert!(
    text.contains("\n[caveman-code: output capped from 4194304 captured bytes; later process output unavailable; use read_tool_output with handle tool_"),
    "{}",
    &text[text.len() - 200..]
  );
  assert!(!text.contains("TAIL"));
  let handle = handle_in(&text);
  let page = ws
    .ok("read_tool_output", json!({"handle": handle, "limit": 5}))
    .await;
  assert_eq!(page, "bash:head -c 6000000 /dev/zero | tr '\\000' x; echo; echo TAIL · bytes 0-5 of 4194304 · partial capture; later process output was unavailable\nxxxxx\n[next offset: 5]");
}

#[tokio::test]
async fn bash_env_is_the_allow_list_only() {
  // Rust's env functions share one lock, so this is safe next to other tests.
  std::env::set_var("ANTHROPIC_API_KEY", "sk-knap-test-should-not-leak");
  std::env::set_var("CAVE_API_KEY", "cave-knap-test-should-not-leak");
  let ws = workspace();
  let text = ws.ok("bash", json!({"command": "env"})).await;
  assert!(!text.contains("should-not-leak"), "{text}");
  assert!(!text.contains("ANTHROPIC_API_KEY"));
  let names: Vec<&str> = text
    .lines()
    .skip(1)
    .filter_map(|l| l.split_once('=').map(|(k, _)| k))
    .collect();
  for name in &names {
    // /bin/sh adds PWD, SHLVL, OLDPWD and `_` on its own.
    assert!(
      bash::LOCAL_ENV_ALLOW_LIST.contains(name) || ["SHLVL", "OLDPWD", "_"].contains(name),
      "unexpected variable {name} in {text}"
    );
  }
  if std::env::var("PATH").is_ok() {
    assert!(names.contains(&"PATH"), "PATH is passed on");
  }
}

/// Live (non-zombie) processes whose process group is `pgid`.
fn live_group_members(pgid: i32) -> Vec<i32> {
  let mut out = Vec::new();
  for entry in std::fs::read_dir("/proc").unwrap().flatten() {
    let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
      continue;
    };
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
      continue;
    };
    let Some((_, rest)) = stat.rsplit_once(") ") else {
      continue;
    };
    let fields: Vec<&str> = rest.split(' ').collect();
    // state ppid pgrp ...
    if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
      out.push(pid);
    }
  }
  out
}

/// Polls until the group has no live member (bounded: a liveness wait, not a timing check).
fn group_gone(pgid: i32) -> bool {
  for _ in 0..200 {
    if live_group_members(pgid).is_empty() {
      return true;
    }
    std::thread::sleep(Duration::from_millis(25));
  }
  false
}

#[tokio::test]
async fn bash_timeout_kills_the_whole_group() {
  let ws = workspace();
  let text = ws.ok("bash", json!({"command": "echo $$ > group.pid; (sleep 300; echo never) & sleep 300 & echo started; wait", "timeoutMs": 500})).await;
  assert_eq!(text, "exit timeout after 500ms\nstarted\n");
  let pgid: i32 = ws.read("group.pid").trim().parse().unwrap();
  assert!(
    group_gone(pgid),
    "survivors in process group {pgid}: {:?}",
    live_group_members(pgid)
  );
}

#[tokio::test]
async fn bash_cancel_kills_the_whole_group() {
  let ws = workspace();
  let cancel = CancellationToken::new();
  let trigger = cancel.clone();
  let pid_file = ws.path("group.pid");
  let watcher = tokio::spawn(async move {
    // Cancel once the shell has started its children.
    while !pid_file.exists() {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    trigger.cancel();
  });
  let result = ws
    .tools
    .execute(
      "bash",
      &json!({"command": "sleep 300 & echo $$ > group.pid; wait"}),
      cancel,
    )
    .await;
  watcher.await.unwrap();
  let e = result.unwrap_err();
  assert_eq!(e.code, "ABORT_ERR");
  let pgid: i32 = ws.read("group.pid").trim().parse().unwrap();
  assert!(
    group_gone(pgid),
    "survivors in process group {pgid}: {:?}",
    live_group_members(pgid)
  );
  // An already-cancelled token never starts the tool.
  let cancel = CancellationToken::new();
  cancel.cancel();
  let e = ws
    .tools
    .execute("bash", &json!({"command": "touch started.txt"}), cancel)
    .await
    .unwrap_err();
  assert_eq!(e.code, "ABORT_ERR");
  assert!(!ws.path("started.txt").exists());
}

#[tokio::test]
async fn bash_background_child_holding_the_pipe_does_not_hang() {
  let ws = workspace();
  let run = ws.run(
    "bash",
    json!({"command": "sleep 300 & echo $! > bg.pid; echo done"}),
  );
  let text = tokio::time::timeout(Duration::from_secs(120), run)
    .await
    .expect("bash hung on a background child")
    .unwrap();
  assert_eq!(text.text, "exit 0\ndone\n");
  let pid: i32 = ws.read("bg.pid").trim().parse().unwrap();
  // SAFETY: cleanup of the background child this test started.
  unsafe { libc::kill(pid, libc::SIGKILL) };
}

// ---------------------------------------------------------------- write_file

#[tokio::test]
async fn write_file_creates_refuses_and_overwrites() {
  let ws = workspace();
  let out = ws
    .run("write_file", json!({"path": "a.txt", "content": "hello"}))
    .await
    .unwrap();
  assert_eq!(out.text, "wrote a.txt: 5 bytes");
  assert_eq!(out.label, None, "write_file does not report to onOutput");
  assert_eq!(ws.read("a.txt"), "hello");
  // UTF-8 byte length.
  assert_eq!(
    ws.ok("write_file", json!({"path": "é.txt", "content": "héllo€"}))
      .await,
    "wrote é.txt: 9 bytes"
  );

  let e = ws
    .err("write_file", json!({"path": "a.txt", "content": "again"}))
    .await;
  assert_eq!(e.code, "EEXIST");
  assert_eq!(
    e.message,
    format!(
      "EEXIST: file already exists, open '{}'",
      ws.root().join("a.txt").display()
    )
  );
  let e = ws
    .err(
      "write_file",
      json!({"path": "a.txt", "content": "again", "overwrite": false}),
    )
    .await;
  assert_eq!(e.code, "EEXIST");
  assert_eq!(ws.read("a.txt"), "hello");

  std::fs::set_permissions(ws.path("a.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
  assert_eq!(
    ws.ok(
      "write_file",
      json!({"path": "a.txt", "content": "", "overwrite": true})
    )
    .await,
    "wrote a.txt: 0 bytes"
  );
  assert_eq!(ws.read("a.txt"), "");
  let mode = std::fs::metadata(ws.path("a.txt")).unwrap().permissions().mode() & 0o777;
  assert_eq!(mode, 0o640, "overwrite keeps the permission bits");

  let e = ws
    .err("write_file", json!({"path": "missing/dir/a.txt", "content": "x"}))
    .await;
  assert_eq!(e.code, "ENOENT");
  assert_eq!(
    e.message,
    format!(
      "ENOENT: no such file or directory, open '{}'",
      ws.root().join("missing/dir/a.txt").display()
    )
  );

  std::fs::create_dir(ws.path("d")).unwrap();
  let e = ws
    .err(
      "write_file",
      json!({"path": "d", "content": "x", "overwrite": true}),
    )
    .await;
  assert_eq!(e.code, "EISDIR");
  // No temporary files are left behind.
  let names: Vec<_> = std::fs::read_dir(ws.path(""))
    .unwrap()
    .map(|e| e.unwrap().file_name().into_string().unwrap())
    .collect();
  assert!(names.iter().all(|n| !n.contains(".knap-")), "{names:?}");
}

#[tokio::test]
async fn write_file_never_follows_a_dangling_symlink_out() {
  let ws = workspace();
  let target = ws.outside().join("planted.txt");
  symlink(&target, ws.path("dangling")).unwrap();
  let e = ws
    .err("write_file", json!({"path": "dangling", "content": "x"}))
    .await;
  assert_eq!(e.code, "EEXIST", "exclusive create refuses an existing link");
  let _ = ws
    .run(
      "write_file",
      json!({"path": "dangling", "content": "x", "overwrite": true}),
    )
    .await;
  assert!(!target.exists(), "nothing was written outside the workspace");
}

// ---------------------------------------------------------------- edit_file

#[tokio::test]
async fn edit_file_replaces_exactly() {
  let ws = workspace();
  ws.write("a.txt", "one two three");
  let out = ws
    .run(
      "edit_file",
      json!({"path": "a.txt", "old_string": "two", "new_string": "2"}),
    )
    .await
    .unwrap();
  assert_eq!(out.text, "edited a.txt: 1 replacement");
  assert_eq!(out.label, None, "edit_file does not report to onOutput");
  assert_eq!(ws.read("a.txt"), "one 2 three");

  ws.write("b.txt", "x = 1; x = 1; x = 1;");
  let e = ws
    .err(
      "edit_file",
      json!({"path": "b.txt", "old_string": "x = 1", "new_string": "y"}),
    )
    .await;
  assert_eq!(
    e.message,
    "caveman-code: old_string appears 3 times in b.txt; add surrounding context or pass replace_all"
  );
  assert_eq!(e.code, "cave_edit_ambiguous");
  assert_eq!(
    ws.read("b.txt"),
    "x = 1; x = 1; x = 1;",
    "a refused edit writes nothing"
  );
  let text = ws
    .ok(
      "edit_file",
      json!({"path": "b.txt", "old_string": "x = 1", "new_string": "y", "replace_all": true}),
    )
    .await;
  assert_eq!(text, "edited b.txt: 3 replacements");
  assert_eq!(ws.read("b.txt"), "y; y; y;");
  // replace_all with a single occurrence is singular.
  assert_eq!(
    ws.ok(
      "edit_file",
      json!({"path": "b.txt", "old_string": "y; y; y;", "new_string": "z", "replace_all": true})
    )
    .await,
    "edited b.txt: 1 replacement"
  );

  ws.write("c.txt", "ab ab");
  let e = ws
    .err(
      "edit_file",
      json!({"path": "c.txt", "old_string": "ab", "new_string": "x"}),
    )
    .await;
  assert!(e.message.contains("appears 2 times"));

  // Literal replacement: `$&`, `$1` and `$$` are text, not patterns.
  ws.write("d.txt", "price: COST");
  ws.ok(
    "edit_file",
    json!({"path": "d.txt", "old_string": "COST", "new_string": "$& $1 $$ $'"}),
  )
  .await;
  assert_eq!(ws.read("d.txt"), "price: $& $1 $$ $'");
  // Non-overlapping, left to right (as split/join counts).
  ws.write("e.txt", "aaaa");
  assert_eq!(
    ws.ok(
      "edit_file",
      json!({"path": "e.txt", "old_string": "aa", "new_string": "b", "replace_all": true})
    )
    .await,
    "edited e.txt: 2 replacements"
  );
  assert_eq!(ws.read("e.txt"), "bb");
}

#[tokio::test]
async fn edit_file_errors() {
  let ws = workspace();
  ws.write("a.txt", "hello");
  let e = ws
    .err(
      "edit_file",
      json!({"path": "a.txt", "old_string": "same", "new_string": "same"}),
    )
    .await;
  assert_eq!(e.message, "caveman-code: old_string and new_string are identical");
  assert_eq!(e.code, "cave_edit_identical");
  // Identity is checked before the path: even an escaping path reports it.
  let e = ws
    .err(
      "edit_file",
      json!({"path": "../x", "old_string": "s", "new_string": "s"}),
    )
    .await;
  assert_eq!(e.code, "cave_edit_identical");
  let e = ws
    .err(
      "edit_file",
      json!({"path": "a.txt", "old_string": "absent", "new_string": "x"}),
    )
    .await;
  assert_eq!(e.message, "caveman-code: old_string not found in a.txt");
  assert_eq!(e.code, "cave_edit_not_found");
  let e = ws
    .err(
      "edit_file",
      json!({"path": "a.txt", "old_string": "", "new_string": "x"}),
    )
    .await;
  assert_eq!(e.message, "caveman-code: old_string must not be empty");
  assert_eq!(e.code, "cave_edit_empty_old_string");
  let e = ws
    .err(
      "edit_file",
      json!({"path": "nope.txt", "old_string": "a", "new_string": "b"}),
    )
    .await;
  assert_eq!(e.code, "ENOENT");
  assert_eq!(
    e.message,
    format!(
      "ENOENT: no such file or directory, open '{}'",
      ws.root().join("nope.txt").display()
    )
  );
  std::fs::create_dir(ws.path("dir")).unwrap();
  let e = ws
    .err(
      "edit_file",
      json!({"path": "dir", "old_string": "a", "new_string": "b"}),
    )
    .await;
  assert_eq!(
    (e.code.as_str(), e.message.as_str()),
    ("EISDIR", "EISDIR: illegal operation on a directory, read")
  );
  assert_eq!(ws.read("a.txt"), "hello");
}

#[tokio::test]
async fn missing_workspace_is_enoent_at_first_use() {
  let dir = tempfile::tempdir().unwrap();
  let gone = dir.path().join("not-yet");
  let tools =
    ShellTools::new(ShellToolsConfig::new(&gone)).expect("the workspace need not exist at build time");
  let e = tools
    .execute("read_file", &json!({"path": "a"}), CancellationToken::new())
    .await
    .unwrap_err();
  assert_eq!(e.code, "ENOENT");
  // Created later, it is used from then on.
  std::fs::create_dir(&gone).unwrap();
  std::fs::write(gone.join("a"), "x").unwrap();
  let out = tools
    .execute("read_file", &json!({"path": "a"}), CancellationToken::new())
    .await
    .unwrap();
  assert_eq!(out.text, "1\tx");
}

#[test]
fn a_workspace_that_names_a_file_is_refused_a_missing_one_passes() {
  let dir = tempfile::tempdir().unwrap();
  let file = dir.path().join("f.txt");
  std::fs::write(&file, "x").unwrap();
  let file = file.to_str().unwrap();
  let e = check_workspace_dir(file, WorkspaceOwner::ShellTools).unwrap_err();
  assert_eq!(e.code, "cave_workspace_not_directory");
  assert_eq!(
    e.message,
    format!("cave_workspace_not_directory: shellTools workspace \"{file}\" is not a directory\nhint: pass the directory the tools may work in (e.g. process.cwd())")
  );
  let e = check_workspace_dir(file, WorkspaceOwner::LocalSandbox).unwrap_err();
  assert!(e.message.contains("createLocalSandbox workingDirectory"), "{}", e.message);
  assert!(check_workspace_dir(dir.path().to_str().unwrap(), WorkspaceOwner::ShellTools).is_ok());
  let missing = dir.path().join("no/such");
  assert!(check_workspace_dir(missing.to_str().unwrap(), WorkspaceOwner::LocalSandbox).is_ok());
}
