//! The race suite's second half: the tools that change files, and the readers of whole files,
//! under the same kind of swaps (`renameat2(RENAME_EXCHANGE)` in a loop). A file is flipped
//! with an outward symlink, another with a FIFO, a third with a character device (`/dev/zero`'s
//! numbers, made with `mknod` when the test runs as root), and a directory with an outward
//! symlink, while `edit_file`, `write_file`, the AI SDK `Edit`/`Write`/`Read` and the sandbox's
//! `readFile`/`writeFile` run on those names. Nothing outside may change or show through, no
//! call may hang (on the FIFO) or read without end (the device), and no answer may be large.
//!
//! Bounded by calls: `KNAP_RACE_ROUNDS` rounds (default 150) of 17 calls, and on until the flipper
//! did `rounds * 4` flips.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::agent_tools::{AgentTools, EditInput, ReadInput, ToolConfig};
use crate::race_tests::{cpath, exchange, rounds};
use crate::sandbox::LocalSandbox;
use crate::tools::{ShellTools, ShellToolsConfig};

const INSIDE: &str = "inside needle\n";
const SECRET: &str = "SECRET needle\n";

/// The outside directory's files and contents.
fn snapshot(out: &Path) -> Vec<(String, Vec<u8>)> {
  let mut v: Vec<_> = std::fs::read_dir(out)
    .unwrap()
    .map(|e| {
      let e = e.unwrap();
      (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap_or_default())
    })
    .collect();
  v.sort();
  v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_and_whole_file_readers_under_swaps_never_touch_or_show_the_outside() {
  let dir = tempfile::tempdir().unwrap();
  let base = dir.path().canonicalize().unwrap();
  let (ws, out) = (base.join("ws"), base.join("out"));
  std::fs::create_dir_all(ws.join("d")).unwrap();
  std::fs::create_dir_all(&out).unwrap();
  for f in ["d/x", "f", "g", "h"] {
    std::fs::write(ws.join(f), INSIDE).unwrap();
  }
  std::fs::write(out.join("x"), SECRET).unwrap();
  std::fs::write(out.join("outside_only.txt"), SECRET).unwrap();
  std::os::unix::fs::symlink("../out", ws.join("alt")).unwrap();
  std::os::unix::fs::symlink(out.join("x"), ws.join("fl")).unwrap();
  // SAFETY: valid NUL-terminated paths.
  assert_eq!(unsafe { libc::mkfifo(cpath(&ws.join("p")).as_ptr(), 0o600) }, 0);
  let device = unsafe { libc::mknod(cpath(&ws.join("z")).as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 5)) } == 0;
  let before = snapshot(&out);

  let shell = ShellTools::new(ShellToolsConfig::new(&ws)).unwrap();
  let sandbox = Arc::new(LocalSandbox::create(&ws, Vec::new()).unwrap());
  let ai = AgentTools::new(Arc::new(sandbox.clone()), None);
  let tool = ai.tool(ToolConfig::default()).unwrap();

  let stop = Arc::new(AtomicBool::new(false));
  let flips = Arc::new(AtomicU64::new(0));
  let mut pairs = vec![("d", "alt"), ("f", "fl"), ("g", "p")];
  if device {
    pairs.push(("h", "z"));
  }
  let pairs: Vec<_> = pairs.iter().map(|(a, b)| (cpath(&ws.join(a)), cpath(&ws.join(b)))).collect();
  let flipping = {
    let (stop, flips) = (stop.clone(), flips.clone());
    std::thread::spawn(move || {
      while !stop.load(Ordering::Relaxed) {
        for (a, b) in &pairs {
          if exchange(a, b) {
            flips.fetch_add(1, Ordering::Relaxed);
          }
        }
      }
    })
  };

  let n = rounds();
  let (mut calls, mut inside, mut round) = (0u64, 0u64, 0u64);
  let mut leaks: Vec<String> = Vec::new();
  let mut check = |what: &str, text: String| {
    calls += 1;
    if text.contains("inside needle") || text.contains("INSIDE") {
      inside += 1;
    }
    if text.contains("SECRET") || text.contains("outside_only") || text.len() > 64 * 1024 {
      leaks.push(format!("{what}: {}", &text[..text.len().min(200)]));
    }
  };
  while round < n || flips.load(Ordering::Relaxed) < n * 4 {
    round += 1;
    let c = CancellationToken::new;
    for (path, old, new) in [("f", "inside", "INSIDE"), ("f", "INSIDE", "inside"), ("g", "needle", "needle!"), ("h", "needle", "needle")] {
      let r = shell.execute("edit_file", &json!({"path": path, "old_string": old, "new_string": new, "replace_all": true}), c()).await;
      check("edit_file", r.map(|o| o.text).unwrap_or_else(|e| e.message));
    }
    for path in ["f", "g", "h", "d/x"] {
      let r = shell.execute("read_file", &json!({ "path": path }), c()).await;
      check("read_file", r.map(|o| o.text).unwrap_or_else(|e| e.message));
    }
    let r = shell.execute("write_file", &json!({"path": "d/x", "content": INSIDE, "overwrite": true}), c()).await;
    check("write_file", format!("{r:?}"));
    for path in ["f", "h"] {
      let edit = EditInput { file_path: path.into(), old_string: "needle".into(), new_string: "needle".into(), replace_all: true };
      // old == new is refused before any I/O; edit the case instead.
      let edit = EditInput { new_string: "NEEDLE".into(), ..edit };
      let (r, _) = ai.edit(&tool, edit).await;
      check("Edit", format!("{r:?}"));
      let r = ai.read(&tool, ReadInput { file_path: path.into(), ..Default::default() }).await;
      check("Read", format!("{r:?}"));
    }
    let (r, _) = ai.write(&tool, "d/w".into(), INSIDE.into()).await;
    check("Write", format!("{r:?}"));
    for path in ["f", "g", "h"] {
      let r = sandbox.read_to_string(path, &CancellationToken::new());
      check("readFile", format!("{r:?}"));
    }
    let r = sandbox.write("d/w2", INSIDE.as_bytes(), &CancellationToken::new());
    check("writeFile", format!("{r:?}"));
  }
  stop.store(true, Ordering::Relaxed);
  flipping.join().unwrap();
  eprintln!(
    "race (writers): {round} rounds, {calls} calls, {} flips, device {device}, {inside} answers showed the inside, {} leaks",
    flips.load(Ordering::Relaxed),
    leaks.len()
  );
  assert_eq!(snapshot(&out), before, "the outside directory was not changed");
  assert!(leaks.is_empty(), "{} leaks, first: {:?}", leaks.len(), &leaks[..leaks.len().min(3)]);
  assert!(inside > 0, "the tools never saw the inside: the race did not run as meant");
}
