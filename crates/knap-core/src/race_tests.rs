//! The symlink-swap race suite (issue 13's probe, in the repository): a thread flips a directory
//! with an outward symlink, a file with a symlink to an outside file and a file with a FIFO
//! (`renameat2(RENAME_EXCHANGE)`, so each name always exists) while every tool that reads, lists,
//! searches, stats or writes runs against those names. Nothing outside may show through: no
//! outside content (`SECRET`), no outside-only name (`outside_only`), nothing written outside,
//! and no call may block on the FIFO (a hang never finishes the test).
//!
//! Bounded by a number of calls, not by time: `KNAP_RACE_ROUNDS` rounds (default 150; each round
//! is 14 calls), and the rounds go on until the flipper has done at least `KNAP_RACE_ROUNDS * 4`
//! flips, so the race really ran. `cargo test -p knap-core race -- --nocapture` prints the counts.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::agent_tools::{AgentTools, GrepInput, ReadInput, ToolConfig};
use crate::sandbox::LocalSandbox;
use crate::tools::{ShellTools, ShellToolsConfig};

pub(crate) fn cpath(p: &Path) -> CString {
  CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// Swaps two names atomically; both exist before and after.
pub(crate) fn exchange(a: &CString, b: &CString) -> bool {
  // SAFETY: valid NUL-terminated paths; RENAME_EXCHANGE only swaps the two directory entries.
  unsafe {
    libc::syscall(
      libc::SYS_renameat2,
      libc::AT_FDCWD,
      a.as_ptr(),
      libc::AT_FDCWD,
      b.as_ptr(),
      libc::RENAME_EXCHANGE,
    ) == 0
  }
}

pub(crate) fn rounds() -> u64 {
  std::env::var("KNAP_RACE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(150)
}

struct Setup {
  _dir: tempfile::TempDir,
  ws: PathBuf,
  out: PathBuf,
}

/// `ws/` holds `d/x` (a directory), `f` (a file), `g` (a file) and their swap partners `alt` ->
/// the outside directory, `fl` -> the outside file, `p` (a FIFO); `out/` holds `x` and
/// `outside_only.txt`, both with `SECRET needle`.
fn setup() -> Setup {
  let dir = tempfile::tempdir().unwrap();
  let base = dir.path().canonicalize().unwrap();
  let ws = base.join("ws");
  let out = base.join("out");
  std::fs::create_dir_all(ws.join("d")).unwrap();
  std::fs::create_dir_all(&out).unwrap();
  std::fs::write(ws.join("d/x"), "inside needle\n").unwrap();
  std::fs::write(ws.join("f"), "inside needle\n").unwrap();
  std::fs::write(ws.join("g"), "inside needle\n").unwrap();
  std::fs::write(out.join("x"), "SECRET needle\n").unwrap();
  std::fs::write(out.join("outside_only.txt"), "SECRET needle\n").unwrap();
  // One relative and one absolute outward link: both forms must be refused.
  symlink("../out", ws.join("alt")).unwrap();
  symlink(out.join("x"), ws.join("fl")).unwrap();
  let fifo = cpath(&ws.join("p"));
  // SAFETY: valid path.
  assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
  Setup { _dir: dir, ws, out }
}

/// Flips the three pairs until `stop`; counts successful exchanges.
fn flipper(ws: &Path, stop: Arc<AtomicBool>, flips: Arc<AtomicU64>) -> std::thread::JoinHandle<()> {
  let pairs: Vec<(CString, CString)> = [("d", "alt"), ("f", "fl"), ("g", "p")]
    .iter()
    .map(|(a, b)| (cpath(&ws.join(a)), cpath(&ws.join(b))))
    .collect();
  std::thread::spawn(move || {
    while !stop.load(Ordering::Relaxed) {
      for (a, b) in &pairs {
        if exchange(a, b) {
          flips.fetch_add(1, Ordering::Relaxed);
        }
      }
    }
  })
}

#[derive(Default, Debug)]
struct Tally {
  calls: u64,
  /// Calls whose answer showed the inside content (the race did not always lose).
  saw_inside: u64,
  errors: u64,
  leaks: Vec<String>,
}

impl Tally {
  fn record(&mut self, what: &str, text: String, is_err: bool) {
    self.calls += 1;
    if is_err {
      self.errors += 1;
    }
    if text.contains("inside needle") {
      self.saw_inside += 1;
    }
    if text.contains("SECRET") || text.contains("outside_only") {
      self.leaks.push(format!("{what}: {text}"));
    }
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_and_fifo_swaps_never_show_the_outside() {
  let s = setup();
  let shell = ShellTools::new(ShellToolsConfig::new(&s.ws)).unwrap();
  let env = vec![("PATH".to_string(), std::env::var("PATH").unwrap_or_default())];
  let sandbox = Arc::new(LocalSandbox::create(&s.ws, env).unwrap());
  let ai = AgentTools::new(Arc::new(sandbox.clone()), None);
  let tool = ai.tool(ToolConfig::default()).unwrap();

  let stop = Arc::new(AtomicBool::new(false));
  let flips = Arc::new(AtomicU64::new(0));
  let flipping = flipper(&s.ws, stop.clone(), flips.clone());

  let n = rounds();
  let mut t = Tally::default();
  let mut round = 0u64;
  while round < n || flips.load(Ordering::Relaxed) < n * 4 {
    round += 1;
    let cancel = CancellationToken::new;
    for input in [
      json!({"pattern": "needle"}),
      json!({"pattern": "needle", "path": "d"}),
      json!({"pattern": "needle", "path": "f"}),
    ] {
      let r = shell.execute("grep", &input, cancel()).await;
      let is_err = r.is_err();
      t.record("grep", r.map(|o| o.text).unwrap_or_else(|e| e.message), is_err);
    }
    for path in ["d/x", "f", "g"] {
      let r = shell.execute("read_file", &json!({ "path": path }), cancel()).await;
      let is_err = r.is_err();
      t.record("read_file", r.map(|o| o.text).unwrap_or_else(|e| e.message), is_err);
    }
    let r = shell
      .execute("write_file", &json!({"path": "d/w", "content": "w"}), cancel())
      .await;
    t.record("write_file", format!("{r:?}"), r.is_err());
    let r = ai
      .grep(
        &tool,
        GrepInput {
          pattern: "needle".into(),
          output_mode: Some("content".into()),
          ..Default::default()
        },
        cancel(),
      )
      .await;
    t.record("Grep", format!("{r:?}"), r.is_err());
    let r = ai.glob(&tool, "**/*".into(), None, cancel()).await;
    t.record("Glob", format!("{r:?}"), r.is_err());
    let r = ai.glob(&tool, "*".into(), Some("d".into()), cancel()).await;
    t.record("Glob d", format!("{r:?}"), r.is_err());
    for path in ["d/x", "f"] {
      let r = ai
        .read(
          &tool,
          ReadInput {
            file_path: path.into(),
            ..Default::default()
          },
        )
        .await;
      t.record("Read", format!("{r:?}"), r.is_err());
    }
    let r = sandbox.read_dir("d");
    t.record("readDir", format!("{r:?}"), r.is_err());
    // stat reveals existence, kind and size: `outside_only.txt` exists only outside, so any
    // answer that finds it is an outside read (its error texts name it: they are the candidate).
    let r = sandbox.stat("d/outside_only.txt");
    let found = matches!(&r, Ok(st) if st.exists);
    t.record("stat", if found { format!("outside_only found: {r:?}") } else { String::new() }, r.is_err());
  }
  stop.store(true, Ordering::Relaxed);
  flipping.join().unwrap();

  // Nothing was created outside (a write through the swapped directory would leave `w` there).
  let mut outside: Vec<_> = std::fs::read_dir(&s.out)
    .unwrap()
    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
    .collect();
  outside.sort();
  eprintln!(
    "race: {} rounds, {} calls, {} flips, {} answers showed the inside, {} errors, {} leaks",
    round,
    t.calls,
    flips.load(Ordering::Relaxed),
    t.saw_inside,
    t.errors,
    t.leaks.len()
  );
  assert_eq!(outside, vec!["outside_only.txt", "x"], "nothing written outside");
  assert!(t.leaks.is_empty(), "{} outside reads, first: {:?}", t.leaks.len(), &t.leaks[..t.leaks.len().min(3)]);
  assert!(t.saw_inside > 0, "the tools never saw the inside: the race did not run as meant");
}

/// The same swaps with grep's kept contents and listings in play: the files are aged as if
/// settled (so everything is kept after the first search, and the rule that keeps a change in the
/// same clock tick from going unseen is off: listings may be stale here). A kept entry is only
/// used for a name that still is a regular file (or a directory just opened with `O_NOFOLLOW`)
/// with the kept identity, so no answer shows the outside and none blocks on the FIFO.
#[test]
fn kept_contents_and_listings_never_show_the_outside() {
  use crate::search::{search_small, Printer, SearchOutput, SearchRequest};
  let s = setup();
  crate::kept::NOW_AHEAD.with(|a| a.set(std::time::Duration::from_secs(120)));
  let root = crate::workspace::Workspace::new(&s.ws).root().unwrap();
  let request = |scope: PathBuf, display: &str| SearchRequest {
    pattern: "needle".into(),
    root: root.clone(),
    scope,
    display: display.into(),
    glob: None,
    file_type: None,
    case_insensitive: false,
    multiline: false,
    before: 0,
    after: 0,
    printer: Printer::PathLine { max_per_file: 200 },
    offset: 0,
    head_limit: None,
    max_line_length: 2000,
    threads: 1,
  };
  let requests = [request(root.path.clone(), "."), request(root.path.join("d"), "d")];
  let grep = |r: &SearchRequest| match search_small(r, &AtomicBool::new(false), 64, 256 * 1024) {
    Ok(Some(out)) => match out.output {
      SearchOutput::Lines { lines, errors, .. } => format!("{lines:?} {errors:?}"),
      other => format!("{other:?}"),
    },
    other => format!("{other:?}"),
  };
  // Kept before the flipping starts.
  for r in &requests {
    assert!(grep(r).contains("inside needle"));
  }
  let stop = Arc::new(AtomicBool::new(false));
  let flips = Arc::new(AtomicU64::new(0));
  let flipping = flipper(&s.ws, stop.clone(), flips.clone());
  let n = rounds() * 4;
  let mut t = Tally::default();
  let mut round = 0u64;
  while round < n || flips.load(Ordering::Relaxed) < n {
    round += 1;
    for r in &requests {
      t.record("grep (kept)", grep(r), false);
    }
  }
  stop.store(true, Ordering::Relaxed);
  flipping.join().unwrap();
  crate::kept::NOW_AHEAD.with(|a| a.set(std::time::Duration::ZERO));
  eprintln!(
    "race (kept): {} rounds, {} calls, {} flips, {} answers showed the inside, {} leaks",
    round,
    t.calls,
    flips.load(Ordering::Relaxed),
    t.saw_inside,
    t.leaks.len()
  );
  assert!(t.leaks.is_empty(), "{} outside reads, first: {:?}", t.leaks.len(), &t.leaks[..t.leaks.len().min(3)]);
  assert!(t.saw_inside > 0, "the search never saw the inside: the race did not run as meant");
}

/// The ignore files a search applies come from the directory it lists. `ws/d` holds `hidden.txt`
/// (hidden by `d/.ignore`), `shown.txt` and `other.txt`; the outside directory's `.ignore` hides
/// `shown.txt` instead. While `d` flips with an outward symlink, every answer that lists the real
/// directory (it may be called `d` or `alt` at that moment: `other.txt` shows it was listed) must
/// show `shown.txt` and never `hidden.txt`. The walk that listed directories by path read `.ignore`
/// and the listing at different moments, so an outside `.ignore` could hide `shown.txt` and reveal
/// `hidden.txt` (an outside file deciding what is shown inside).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_files_come_from_the_directory_that_is_listed() {
  let dir = tempfile::tempdir().unwrap();
  let base = dir.path().canonicalize().unwrap();
  let (ws, out) = (base.join("ws"), base.join("out"));
  std::fs::create_dir_all(ws.join("d")).unwrap();
  std::fs::create_dir_all(&out).unwrap();
  for name in ["hidden.txt", "shown.txt", "other.txt"] {
    std::fs::write(ws.join("d").join(name), "needle\n").unwrap();
    std::fs::write(out.join(name), "needle\n").unwrap();
  }
  std::fs::write(ws.join("d/.ignore"), "hidden.txt\n").unwrap();
  std::fs::write(out.join(".ignore"), "shown.txt\n").unwrap();
  symlink("../out", ws.join("alt")).unwrap();
  let shell = ShellTools::new(ShellToolsConfig::new(&ws)).unwrap();
  let env = vec![("PATH".to_string(), std::env::var("PATH").unwrap_or_default())];
  let sandbox = Arc::new(LocalSandbox::create(&ws, env).unwrap());
  let ai = AgentTools::new(Arc::new(sandbox), None);
  let tool = ai.tool(ToolConfig::default()).unwrap();

  let stop = Arc::new(AtomicBool::new(false));
  let flips = Arc::new(AtomicU64::new(0));
  let flipping = {
    let (a, b) = (cpath(&ws.join("d")), cpath(&ws.join("alt")));
    let (stop, flips) = (stop.clone(), flips.clone());
    std::thread::spawn(move || {
      while !stop.load(Ordering::Relaxed) {
        if exchange(&a, &b) {
          flips.fetch_add(1, Ordering::Relaxed);
        }
      }
    })
  };
  // Every file an answer lists, as `dir/name` (`./d/x` and `d/x` alike).
  let check = |what: &str, files: Vec<String>, bad: &mut Vec<String>, listed: &mut u64| {
    for dir in ["d", "alt"] {
      let has = |name: &str| files.iter().any(|f| f.trim_start_matches("./") == format!("{dir}/{name}"));
      if has("other.txt") {
        *listed += 1;
        if has("hidden.txt") || !has("shown.txt") {
          bad.push(format!("{what}: {files:?}"));
        }
      }
    }
  };
  let n = rounds();
  let (mut bad, mut listed, mut round) = (Vec::new(), 0u64, 0u64);
  while round < n * 4 || flips.load(Ordering::Relaxed) < n * 4 {
    round += 1;
    let text = shell
      .execute("grep", &json!({"pattern": "needle"}), CancellationToken::new())
      .await
      .map(|o| o.text)
      .unwrap_or_default();
    let files = text.lines().filter_map(|l| l.split(':').next()).map(str::to_string).collect();
    check("grep", files, &mut bad, &mut listed);
    let r = ai
      .grep(
        &tool,
        GrepInput {
          pattern: "needle".into(),
          ..Default::default()
        },
        CancellationToken::new(),
      )
      .await;
    if let Ok(page) = r {
      if let crate::agent_tools::GrepOutput::Files(files) = page.output {
        check("Grep", files, &mut bad, &mut listed);
      }
    }
  }
  stop.store(true, Ordering::Relaxed);
  flipping.join().unwrap();
  eprintln!(
    "ignore race: {round} rounds, {} flips, {listed} answers listed the directory, {} wrong",
    flips.load(Ordering::Relaxed),
    bad.len()
  );
  assert!(bad.is_empty(), "{} answers used another directory's .ignore, first: {:?}", bad.len(), &bad[..bad.len().min(3)]);
  assert!(listed > 0, "no answer listed the directory: the race did not run as meant");
}
