//! The descriptor walk with rg's rules against the `ignore` crate's own walker (what grep used
//! before, and what `rg` does) as the oracle: random trees of directories, hidden entries,
//! symlinks, `.gitignore`/`.ignore` files (some symlinked, some with bad globs), `.git`
//! directories and worktree `.git` files with `info/exclude`, `.jj`, ignore files above the
//! workspace root, searched from the root and from subdirectories with and without `-g` globs and
//! `-t` types. Both must keep exactly the same files and report the same errors.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use crate::rg_rules::RgRules;
use crate::walk::{self, At};
use crate::workspace::{Dir, Workspace};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
  fn next(&mut self) -> u64 {
    self.0 ^= self.0 >> 12;
    self.0 ^= self.0 << 25;
    self.0 ^= self.0 >> 27;
    self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
  }
  fn below(&mut self, n: usize) -> usize {
    (self.next() % n as u64) as usize
  }
  fn chance(&mut self, percent: u64) -> bool {
    self.next() % 100 < percent
  }
  fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
    xs[self.below(xs.len())]
  }
}

const DIRS: &[&str] = &["a", "b", ".h", "node_modules", "src", "build", "x.y", "deep"];
const FILES: &[&str] = &[
  "f.txt",
  "g.rs",
  ".hidden",
  "h.js",
  "README.md",
  "k.log",
  "keep.log",
  "m.tmp",
  "x.y",
  "lib.rs",
];
const LINES: &[&str] = &[
  "*.log",
  "!keep.log",
  "build/",
  "/src",
  "*.rs",
  "!*.rs",
  ".h",
  "a/",
  "**/x.y",
  "f.txt",
  "#comment",
  "",
  "node_modules",
  "\\!x",
  "*.tmp",
  "!/f.txt",
  "g.*",
  "{bad",
  "deep/**",
  "!.hidden",
  "*.md",
  "b",
  "/a/f.txt",
  "src/*.rs",
  "!src/",
  " ",
  "*.js ",
];
const GLOBS: &[&str] = &[
  "*.rs",
  "!*.log",
  "*.{rs,txt}",
  "src/**",
  "!build/",
  ".h/*",
  "*.tmp",
  "!a/**",
  "**/deep/*",
];
const TYPES: &[&str] = &["rust", "js", "md", "txt"];

fn ignore_text(rng: &mut Rng) -> String {
  let n = 1 + rng.below(4);
  (0..n).map(|_| rng.pick(LINES)).collect::<Vec<_>>().join("\n") + "\n"
}

/// A random tree below `dir` (depth at most `depth`).
fn tree(rng: &mut Rng, dir: &Path, depth: usize) {
  // A name already taken by a file (or picked twice) keeps what it is.
  if std::fs::create_dir_all(dir).is_err() {
    return;
  }
  for _ in 0..rng.below(5) {
    let f = rng.pick(FILES);
    let _ = std::fs::write(dir.join(f), "x\n");
  }
  if rng.chance(30) {
    let _ = std::fs::write(dir.join(".gitignore"), ignore_text(rng));
  }
  if rng.chance(20) {
    // (Without openat2 — `--cfg knap_portable` — symlinked ignore files are not followed at all.)
    if rng.chance(30) && dir.join(".gitignore").exists() && !cfg!(knap_portable) {
      let _ = symlink(".gitignore", dir.join(".ignore"));
    } else {
      let _ = std::fs::write(dir.join(".ignore"), ignore_text(rng));
    }
  }
  if rng.chance(10) && depth < 3 && !dir.join(".gitignore").exists() && !cfg!(knap_portable) {
    // A symlinked ignore file leading to the parent's (out of its own directory, still inside).
    let _ = symlink("../.gitignore", dir.join(".gitignore"));
  }
  if rng.chance(12) {
    let _ = std::fs::create_dir_all(dir.join(".git/info"));
    if rng.chance(60) {
      let _ = std::fs::write(dir.join(".git/info/exclude"), ignore_text(rng));
    }
  } else if rng.chance(5) {
    let _ = std::fs::create_dir_all(dir.join(".jj"));
  }
  if rng.chance(8) {
    let _ = symlink("f.txt", dir.join("link.txt"));
  }
  if rng.chance(8) {
    let _ = symlink(".", dir.join("loop"));
  }
  if depth == 0 {
    return;
  }
  for _ in 0..rng.below(4) {
    let d = rng.pick(DIRS);
    tree(rng, &dir.join(d), depth - 1);
  }
}

/// The old walk: the `ignore` crate's walker as grep configured it (rg's defaults, `-g` relative
/// to the root, `-t`), sequential. Files (relative to the root) and error texts.
fn oracle(root: &Path, scope: &Path, glob: Option<&str>, ty: Option<&str>) -> (Vec<String>, Vec<String>) {
  let mut wb = ignore::WalkBuilder::new(scope);
  if let Some(g) = glob {
    let mut ob = ignore::overrides::OverrideBuilder::new(root);
    ob.add(g).unwrap();
    wb.overrides(ob.build().unwrap());
  }
  if let Some(t) = ty {
    let mut tb = ignore::types::TypesBuilder::new();
    tb.add_defaults();
    tb.select(t);
    wb.types(tb.build().unwrap());
  }
  let (mut files, mut errors) = (Vec::new(), Vec::new());
  for e in wb.build() {
    match e {
      Ok(e) if e.file_type().is_some_and(|t| t.is_file()) => files.push(
        e.path()
          .strip_prefix(root)
          .unwrap()
          .to_string_lossy()
          .into_owned(),
      ),
      Ok(_) => {}
      Err(e) => errors.push(e.to_string()),
    }
  }
  files.sort();
  errors.sort();
  (files, errors)
}

struct Collect {
  files: Mutex<Vec<String>>,
  scope_rel: String,
}

impl walk::Visitor for Collect {
  type Local = ();
  fn local(&self) {}
  fn file(&self, _: &mut (), _: &Dir, at: &At, name: &[u8]) -> bool {
    let mut p = self.scope_rel.clone();
    p.push_str(&at.rel);
    p.push_str(&String::from_utf8_lossy(name));
    self.files.lock().unwrap().push(p);
    true
  }
  fn dir_error(&self, _: &mut (), _: &At, e: std::io::Error) -> bool {
    panic!("unexpected directory error {e}")
  }
  fn done(&self, _: ()) {}
}

/// The new walk, through the same entry points the searcher uses.
fn ours(
  ws: &Workspace,
  scope_rel: &Path,
  glob: Option<&str>,
  ty: Option<&str>,
  threads: usize,
) -> (Vec<String>, Vec<String>) {
  let root = ws.root().unwrap();
  let rules = RgRules::new(root.clone(), glob, ty).unwrap_or_else(|_| panic!("rules"));
  let (node, err) = rules.parents(scope_rel);
  let dir = root.open_dir(scope_rel).unwrap();
  let prefix = if scope_rel.as_os_str().is_empty() {
    String::new()
  } else {
    format!("{}/", scope_rel.display())
  };
  let visitor = Collect {
    files: Mutex::new(Vec::new()),
    scope_rel: prefix,
  };
  let stop = AtomicBool::new(false);
  let at = At {
    abs: root.path.join(scope_rel),
    rel: String::new(),
  };
  let opts = walk::Options {
    threads,
    spread_after: 3,
    stop: &stop,
    max_entries: None,
    settled_dev: None,
  };
  walk::walk(dir, at, node, &rules, &visitor, &opts);
  let mut files = visitor.files.into_inner().unwrap();
  files.sort();
  (files, err.into_iter().collect())
}

fn dirs_below(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
  out.push(rel.to_path_buf());
  let Ok(rd) = std::fs::read_dir(root.join(rel)) else {
    return;
  };
  let mut names: Vec<_> = rd.filter_map(|e| e.ok()).collect();
  names.sort_by_key(|e| e.file_name());
  for e in names {
    if e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != ".git" {
      dirs_below(root, &rel.join(e.file_name()), out);
    }
  }
}

#[test]
fn the_descriptor_walk_keeps_exactly_what_the_ignore_crate_keeps() {
  let trees = std::env::var("KNAP_WALK_TREES")
    .ok()
    .and_then(|v| v.parse().ok())
    .unwrap_or(60u64);
  let mut compared = 0;
  let mut kept = 0;
  for seed in 1..=trees {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0x1234_5678_9abc_def1));
    let base = tempfile::tempdir().unwrap();
    let outer = base.path().canonicalize().unwrap().join("outer");
    let ws_dir = outer.join("ws");
    // Ignore files (and sometimes a repository) above the workspace root.
    std::fs::create_dir_all(&ws_dir).unwrap();
    if rng.chance(40) {
      std::fs::write(outer.join(".gitignore"), ignore_text(&mut rng)).unwrap();
    }
    if rng.chance(30) {
      std::fs::write(outer.join(".ignore"), ignore_text(&mut rng)).unwrap();
    }
    if rng.chance(30) {
      std::fs::create_dir_all(outer.join(".git")).unwrap();
    }
    tree(&mut rng, &ws_dir, 3);
    if rng.chance(25) {
      // A linked worktree: `.git` is a file naming git's directory, whose `commondir` names the
      // directory holding `info/exclude`.
      let _ = std::fs::remove_dir_all(ws_dir.join(".git"));
      let common = base.path().join("main.git");
      let wt = common.join("worktrees/ws");
      std::fs::create_dir_all(&wt).unwrap();
      std::fs::create_dir_all(common.join("info")).unwrap();
      std::fs::write(common.join("info/exclude"), ignore_text(&mut rng)).unwrap();
      std::fs::write(wt.join("commondir"), "../..\n").unwrap();
      std::fs::write(ws_dir.join(".git"), format!("gitdir: {}\n", wt.display())).unwrap();
    }
    let ws = Workspace::new(&ws_dir);
    let root_path = ws.root().unwrap().path.clone();
    let mut scopes = Vec::new();
    dirs_below(&root_path, Path::new(""), &mut scopes);
    for scope in scopes.iter().take(6) {
      for round in 0..3 {
        let glob = (round == 1).then(|| rng.pick(GLOBS));
        let ty = (round == 2).then(|| rng.pick(TYPES));
        let want = oracle(&root_path, &root_path.join(scope), glob, ty);
        for threads in [1, 3] {
          let got = ours(&ws, scope, glob, ty, threads);
          assert_eq!(
            got, want,
            "seed {seed}, scope {scope:?}, glob {glob:?}, type {ty:?}, threads {threads}"
          );
        }
        compared += 1;
        kept += want.0.len();
      }
    }
  }
  eprintln!("walk oracle: {compared} searches compared, {kept} files kept in all");
  assert!(
    compared > 100 && kept > 100,
    "the trees were too small to mean anything"
  );
}

/// A second search sees an edited ignore file (same size, new content): the compiled-matcher
/// cache is keyed by the file's identity, not its path.
#[test]
fn an_edited_ignore_file_is_read_again() {
  let d = tempfile::tempdir().unwrap();
  let ws = Workspace::new(d.path());
  std::fs::write(d.path().join("a.txt"), "x\n").unwrap();
  std::fs::write(d.path().join("b.txt"), "x\n").unwrap();
  std::fs::write(d.path().join(".ignore"), "a.txt\n").unwrap();
  let files = |ws: &Workspace| ours(ws, Path::new(""), None, None, 1).0;
  assert_eq!(files(&ws), vec!["b.txt"]);
  assert_eq!(files(&ws), vec!["b.txt"], "cached");
  // Same size, same second: the nanosecond mtime and ctime still differ.
  std::fs::write(d.path().join(".ignore"), "b.txt\n").unwrap();
  assert_eq!(files(&ws), vec!["a.txt"]);
  std::fs::remove_file(d.path().join(".ignore")).unwrap();
  assert_eq!(files(&ws), vec!["a.txt", "b.txt"]);
}

/// Swaps two names atomically (`renameat2(RENAME_EXCHANGE)`).
fn exchange(a: &Path, b: &Path) {
  use std::os::unix::ffi::OsStrExt;
  let a = std::ffi::CString::new(a.as_os_str().as_bytes()).unwrap();
  let b = std::ffi::CString::new(b.as_os_str().as_bytes()).unwrap();
  // SAFETY: valid NUL-terminated paths.
  let rc = unsafe {
    libc::syscall(
      libc::SYS_renameat2,
      libc::AT_FDCWD,
      a.as_ptr(),
      libc::AT_FDCWD,
      b.as_ptr(),
      libc::RENAME_EXCHANGE,
    )
  };
  assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

/// `ws/d` is a directory listed as one, then swapped for a symlink to an outside directory before
/// the walk enters it (the swap happens while the walk visits the first file). The descriptor walk
/// opens `d` by name from its parent's descriptor with `O_NOFOLLOW` and does not enter it; the
/// `ignore` crate's walk (the old grep walk) enters it by path and lists the outside directory,
/// reading the outside `.gitignore` on the way.
#[test]
fn a_directory_swapped_for_a_symlink_mid_walk_is_never_entered() {
  let base = tempfile::tempdir().unwrap();
  let base = base.path().canonicalize().unwrap();
  let (ws_dir, out) = (base.join("ws"), base.join("out"));
  std::fs::create_dir_all(ws_dir.join("d")).unwrap();
  std::fs::create_dir_all(&out).unwrap();
  std::fs::write(ws_dir.join("a.txt"), "x\n").unwrap();
  std::fs::write(ws_dir.join("d/inside.txt"), "x\n").unwrap();
  std::fs::write(out.join("outside_only.txt"), "x\n").unwrap();
  symlink(&out, ws_dir.join("alt")).unwrap();
  let swap = || exchange(&ws_dir.join("d"), &ws_dir.join("alt"));

  // The old walk follows the swapped name.
  let mut old = Vec::new();
  let mut swapped = false;
  for e in ignore::WalkBuilder::new(&ws_dir).build().flatten() {
    if e.depth() == 1 && !swapped {
      swap();
      swapped = true;
    }
    old.push(e.file_name().to_string_lossy().into_owned());
  }
  swap();
  assert!(
    old.iter().any(|n| n == "outside_only.txt"),
    "the old walk was expected to leak: {old:?}"
  );

  struct SwapOnFirstFile<'a> {
    swap: &'a (dyn Fn() + Sync),
    done: AtomicBool,
    names: Mutex<Vec<String>>,
  }
  impl walk::Visitor for SwapOnFirstFile<'_> {
    type Local = ();
    fn local(&self) {}
    fn file(&self, _: &mut (), _: &Dir, at: &At, name: &[u8]) -> bool {
      if !self.done.swap(true, std::sync::atomic::Ordering::Relaxed) {
        (self.swap)();
      }
      self
        .names
        .lock()
        .unwrap()
        .push(format!("{}{}", at.rel, String::from_utf8_lossy(name)));
      true
    }
    fn dir_error(&self, _: &mut (), _: &At, e: std::io::Error) -> bool {
      panic!("{e}")
    }
    fn done(&self, _: ()) {}
  }
  let ws = Workspace::new(&ws_dir);
  let root = ws.root().unwrap();
  let rules = RgRules::new(root.clone(), None, None).unwrap_or_else(|_| panic!("rules"));
  let (node, _) = rules.parents(Path::new(""));
  let visitor = SwapOnFirstFile {
    swap: &swap,
    done: AtomicBool::new(false),
    names: Mutex::new(Vec::new()),
  };
  let stop = AtomicBool::new(false);
  let opts = walk::Options {
    threads: 1,
    spread_after: usize::MAX,
    stop: &stop,
    max_entries: None,
    settled_dev: None,
  };
  let at = At {
    abs: root.path.clone(),
    rel: String::new(),
  };
  walk::walk(
    root.open_dir(Path::new("")).unwrap(),
    at,
    node,
    &rules,
    &visitor,
    &opts,
  );
  let names = visitor.names.into_inner().unwrap();
  assert_eq!(
    names,
    vec!["a.txt"],
    "only the root's file: `d` was a symlink when the walk got to it"
  );
}
