//! A real glob over a directory tree: `globset` matching over the descriptor walk
//! ([`crate::walk`], the one grep uses), no result cap. Every regular file is a candidate, hidden
//! and git-ignored ones included, as `find -type f` lists them.
//!
//! The walk starts at the search directory opened beneath the workspace root, enters a pattern's
//! literal leading directories one `O_NOFOLLOW` name at a time, and lists every directory through
//! its parent's descriptor; a match's modification time comes from
//! `fstatat(dir_fd, name, AT_SYMLINK_NOFOLLOW)`. No path is resolved after the start, so a
//! symlink (or a directory swapped for one while the walk runs) never leads it out of the tree.
//!
//! Pattern rules:
//! * no `/` in the pattern: it is matched against file names at any depth (`*.md` finds every
//!   Markdown file, as `find -name` does);
//! * otherwise it is matched against the path relative to the search directory, `*` and `?`
//!   stay within one path component and `**` spans any number of them (`src/**/*.ts`);
//! * `{a,b}` alternatives and `[...]` classes work in both forms; a leading `./` is ignored.
//!
//! Results are sorted newest first by modification time (ties by path).

use std::ffi::CString;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use globset::{GlobBuilder, GlobMatcher};

use crate::limits::WALK_SPREAD_AFTER_ENTRIES;
use crate::walk::{self, At, Everything};
use crate::workspace::{name_bytes, name_text, Dir, Root};

pub struct GlobRequest<'a> {
  /// The workspace: the walk starts beneath it.
  pub root: &'a Root,
  /// The directory to search, relative to the root (canonical; empty for the root).
  pub dir: &'a Path,
  pub pattern: &'a str,
  pub threads: usize,
  /// Set to stop the walk early (timeout or cancellation); the result is then partial.
  pub stop: &'a AtomicBool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobMatch {
  /// Path relative to the search directory (`/`-separated).
  pub rel: String,
  pub modified: Option<SystemTime>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GlobError {
  Pattern(String),
}

impl std::fmt::Display for GlobError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match self {
      GlobError::Pattern(m) => write!(f, "{m}"),
    }
  }
}

/// A compiled pattern: what it is matched against and where the walk may start.
pub struct CompiledGlob {
  matcher: GlobMatcher,
  basename_only: bool,
  /// Literal leading directories of a path pattern (`src/lib` of `src/lib/**/*.rs`): the walk
  /// starts there.
  literal_prefix: PathBuf,
}

const META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

/// A character with a meaning in a glob (`*?[]{}\\`).
pub fn is_glob_meta(c: char) -> bool {
  META.contains(&c)
}

impl CompiledGlob {
  pub fn new(pattern: &str) -> Result<Self, GlobError> {
    let mut p = pattern.trim();
    while let Some(rest) = p.strip_prefix("./") {
      p = rest;
    }
    if p.is_empty() {
      return Err(GlobError::Pattern("empty glob pattern".into()));
    }
    let basename_only = !p.contains('/');
    let matcher = GlobBuilder::new(p)
      .literal_separator(true)
      .backslash_escape(true)
      .build()
      .map_err(|e| GlobError::Pattern(e.to_string()))?
      .compile_matcher();
    let mut literal_prefix = PathBuf::new();
    if !basename_only {
      let parts: Vec<&str> = p.split('/').collect();
      // Every component but the last may be a literal directory.
      for part in &parts[..parts.len() - 1] {
        if part.is_empty() || part.contains(META) || *part == "." || *part == ".." {
          break;
        }
        literal_prefix.push(part);
      }
    }
    Ok(Self {
      matcher,
      basename_only,
      literal_prefix,
    })
  }

  pub fn is_match(&self, rel: &str) -> bool {
    if self.basename_only {
      let name = rel.rsplit('/').next().unwrap_or(rel);
      self.matcher.is_match(name)
    } else {
      self.matcher.is_match(rel)
    }
  }
}

/// Lists the regular files under `req.dir` that match, newest first.
pub fn glob(req: &GlobRequest<'_>) -> Result<Vec<GlobMatch>, GlobError> {
  let compiled = CompiledGlob::new(req.pattern)?;
  let Ok(mut dir) = req.root.open_dir(req.dir) else {
    return Ok(Vec::new());
  };
  let mut prefix = String::new();
  for comp in compiled.literal_prefix.components() {
    let Component::Normal(name) = comp else { continue };
    // The pattern is text: a directory named with escaped bytes is opened by those bytes.
    let text = name.to_str().unwrap_or_default();
    let Ok(c) = CString::new(name_bytes(text).into_owned()) else {
      return Ok(Vec::new());
    };
    match dir.open_dir(&c) {
      Ok(d) => dir = d,
      Err(_) => return Ok(Vec::new()),
    }
    prefix.push_str(text);
    prefix.push('/');
  }
  let visitor = Matches {
    compiled: &compiled,
    prefix: &prefix,
    found: Mutex::new(Vec::new()),
  };
  let at = At {
    abs: PathBuf::new(),
    rel: String::new(),
  };
  let opts = walk::Options {
    threads: req.threads.max(1),
    spread_after: WALK_SPREAD_AFTER_ENTRIES,
    stop: req.stop,
    max_entries: None,
    settled_dev: None,
  };
  walk::walk(dir, at, Arc::new(()), &Everything, &visitor, &opts);
  let mut out = visitor.found.into_inner().unwrap_or_else(|e| e.into_inner());
  out.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.rel.cmp(&b.rel)));
  Ok(out)
}

/// Keeps the files that match, with their modification times (one list per thread, merged).
struct Matches<'a> {
  compiled: &'a CompiledGlob,
  /// The literal leading directories the walk started in (`src/lib/`).
  prefix: &'a str,
  found: Mutex<Vec<GlobMatch>>,
}

impl walk::Visitor for Matches<'_> {
  type Local = Vec<GlobMatch>;

  fn local(&self) -> Vec<GlobMatch> {
    Vec::new()
  }

  fn file(&self, kept: &mut Vec<GlobMatch>, dir: &Dir, at: &At, name: &[u8]) -> bool {
    // Matched and printed as tools show names, so what is printed can be given back to a tool.
    let shown = name_text(name);
    let full_rel = || {
      let mut rel = String::with_capacity(self.prefix.len() + at.rel.len() + shown.len());
      rel.push_str(self.prefix);
      rel.push_str(&at.rel);
      rel.push_str(&shown);
      rel
    };
    let (matched, rel) = if self.compiled.basename_only {
      (self.compiled.matcher.is_match(&*shown), None)
    } else {
      let r = full_rel();
      (self.compiled.matcher.is_match(&r), Some(r))
    };
    if matched {
      let modified = CString::new(name).ok().and_then(|c| dir.lstat(&c)).and_then(|st| mtime(&st));
      kept.push(GlobMatch {
        rel: rel.unwrap_or_else(full_rel),
        modified,
      });
    }
    true
  }

  /// A directory that cannot be read is left out, as `find` would (with a message Glob does not
  /// show).
  fn dir_error(&self, _: &mut Vec<GlobMatch>, _: &At, _: std::io::Error) -> bool {
    true
  }

  fn done(&self, mut kept: Vec<GlobMatch>) {
    if !kept.is_empty() {
      self.found.lock().unwrap_or_else(|e| e.into_inner()).append(&mut kept);
    }
  }
}

fn mtime(st: &libc::stat) -> Option<SystemTime> {
  let secs = st.st_mtime;
  let nanos = st.st_mtime_nsec as u32;
  if secs >= 0 {
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs as u64, nanos))
  } else {
    SystemTime::UNIX_EPOCH
      .checked_sub(Duration::from_secs(secs.unsigned_abs()))
      .map(|t| t + Duration::from_nanos(nanos as u64))
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for f in [
      "a.md",
      "src/b.ts",
      "src/c.tsx",
      "src/deep/d.ts",
      ".hidden/e.ts",
      "node/f.md",
      "g.txt",
    ] {
      let p = d.path().join(f);
      std::fs::create_dir_all(p.parent().unwrap()).unwrap();
      std::fs::write(&p, f).unwrap();
    }
    std::fs::write(d.path().join(".gitignore"), "node\n").unwrap();
    d
  }

  fn run(dir: &Path, pattern: &str) -> Vec<String> {
    let stop = AtomicBool::new(false);
    let root = crate::workspace::Workspace::new(dir).root().unwrap();
    let mut v: Vec<String> = glob(&GlobRequest {
      root: &root,
      dir: Path::new(""),
      pattern,
      threads: 2,
      stop: &stop,
    })
    .unwrap()
    .into_iter()
    .map(|m| m.rel)
    .collect();
    v.sort();
    v
  }

  #[test]
  fn basename_patterns_match_at_any_depth() {
    let d = tree();
    assert_eq!(run(d.path(), "*.md"), vec!["a.md", "node/f.md"]);
    assert_eq!(
      run(d.path(), "*.{ts,tsx}"),
      vec![".hidden/e.ts", "src/b.ts", "src/c.tsx", "src/deep/d.ts"]
    );
  }

  #[test]
  fn path_patterns_are_anchored_and_star_stays_in_a_component() {
    let d = tree();
    assert_eq!(run(d.path(), "src/*.ts"), vec!["src/b.ts"]);
    assert_eq!(run(d.path(), "src/**/*.ts"), vec!["src/b.ts", "src/deep/d.ts"]);
    assert_eq!(
      run(d.path(), "**/*.ts"),
      vec![".hidden/e.ts", "src/b.ts", "src/deep/d.ts"]
    );
    assert_eq!(run(d.path(), "./src/deep/*"), vec!["src/deep/d.ts"]);
    assert!(run(d.path(), "nope/**/*").is_empty());
  }

  #[test]
  fn no_cap_and_newest_first() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..1500 {
      std::fs::write(d.path().join(format!("f{i}.txt")), "x").unwrap();
    }
    assert_eq!(run(d.path(), "*.txt").len(), 1500);
    let old = d.path().join("f0.txt");
    let f = std::fs::File::options().write(true).open(&old).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(10))
      .unwrap();
    let newest = d.path().join("f1.txt");
    let f = std::fs::File::options().write(true).open(&newest).unwrap();
    f.set_modified(SystemTime::now() + std::time::Duration::from_secs(3600))
      .unwrap();
    let stop = AtomicBool::new(false);
    let root = crate::workspace::Workspace::new(d.path()).root().unwrap();
    let out = glob(&GlobRequest {
      root: &root,
      dir: Path::new(""),
      pattern: "*.txt",
      threads: 2,
      stop: &stop,
    })
    .unwrap();
    assert_eq!(out[0].rel, "f1.txt");
    assert_eq!(out.last().unwrap().rel, "f0.txt");
  }

  #[test]
  fn names_that_are_not_utf8_are_matched_and_printed_as_tools_show_them() {
    use std::os::unix::ffi::OsStrExt;
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join(std::ffi::OsStr::from_bytes(b"d\xe9"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), "x").unwrap();
    let shown = "d\u{EFE9}/caf\u{EFE9}.txt";
    assert_eq!(run(d.path(), "*.txt"), vec![shown]);
    assert_eq!(run(d.path(), "**/*.txt"), vec![shown]);
    // The shown text is what a pattern matches, literal leading directory included.
    assert_eq!(run(d.path(), "caf\u{EFE9}.*"), vec![shown]);
    assert_eq!(run(d.path(), "d\u{EFE9}/*.txt"), vec![shown]);
    assert!(run(d.path(), "caf\u{FFFD}.*").is_empty());
    let r = crate::workspace::Workspace::new(d.path()).resolve(shown).unwrap();
    assert_eq!(std::fs::read_to_string(&r.abs).unwrap(), "x");
  }

  #[test]
  fn bad_pattern_is_an_error() {
    assert!(CompiledGlob::new("src/[a").is_err());
    assert!(CompiledGlob::new("").is_err());
  }

  #[test]
  fn symlinks_are_not_followed() {
    let d = tree();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.ts"), "x").unwrap();
    std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();
    assert!(!run(d.path(), "**/*.ts").iter().any(|p| p.contains("secret")));
  }
}
