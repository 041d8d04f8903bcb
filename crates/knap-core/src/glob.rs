//! A real glob over a directory tree: the `ignore` crate's parallel walker with `globset`
//! matching, no result cap, symlinks not followed (a link never leads the walk out of the tree it
//! starts in). Every regular file is a candidate, hidden and git-ignored ones included, as `find
//! -type f` lists them.
//!
//! Pattern rules:
//! * no `/` in the pattern: it is matched against file names at any depth (`*.md` finds every
//!   Markdown file, as `find -name` does);
//! * otherwise it is matched against the path relative to the search directory, `*` and `?`
//!   stay within one path component and `**` spans any number of them (`src/**/*.ts`);
//! * `{a,b}` alternatives and `[...]` classes work in both forms; a leading `./` is ignored.
//!
//! Results are sorted newest first by modification time (ties by path).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use globset::{GlobBuilder, GlobMatcher};
use ignore::{WalkBuilder, WalkState};

pub struct GlobRequest<'a> {
  /// The canonical directory to search.
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
    Ok(Self { matcher, basename_only, literal_prefix })
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
  let start = req.dir.join(&compiled.literal_prefix);
  if !start.is_dir() {
    return Ok(Vec::new());
  }
  let found: Mutex<Vec<GlobMatch>> = Mutex::new(Vec::new());
  let mut walk = WalkBuilder::new(&start);
  walk.standard_filters(false).follow_links(false).threads(req.threads.max(1));
  let base = req.dir;
  walk.build_parallel().run(|| {
    let compiled = &compiled;
    let found = &found;
    // Flush what this worker found when it is dropped at the end of the walk.
    struct Flush<'a> {
      local: Vec<GlobMatch>,
      found: &'a Mutex<Vec<GlobMatch>>,
    }
    impl Drop for Flush<'_> {
      fn drop(&mut self) {
        if !self.local.is_empty() {
          self.found.lock().unwrap_or_else(|e| e.into_inner()).append(&mut self.local);
        }
      }
    }
    let mut flush = Flush { local: Vec::new(), found };
    Box::new(move |entry| {
      if req.stop.load(Ordering::Relaxed) {
        return WalkState::Quit;
      }
      let Ok(entry) = entry else { return WalkState::Continue };
      if !entry.file_type().is_some_and(|t| t.is_file()) {
        return WalkState::Continue;
      }
      let Ok(rel) = entry.path().strip_prefix(base) else { return WalkState::Continue };
      let rel = rel.to_string_lossy();
      if compiled.is_match(&rel) {
        let modified = entry.metadata().ok().and_then(|m| m.modified().ok());
        flush.local.push(GlobMatch { rel: rel.into_owned(), modified });
      }
      WalkState::Continue
    })
  });
  let mut out = found.into_inner().unwrap_or_else(|e| e.into_inner());
  out.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.rel.cmp(&b.rel)));
  Ok(out)
}

#[cfg(test)]
mod tests {
  use super::*;

  fn tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for f in ["a.md", "src/b.ts", "src/c.tsx", "src/deep/d.ts", ".hidden/e.ts", "node/f.md", "g.txt"] {
      let p = d.path().join(f);
      std::fs::create_dir_all(p.parent().unwrap()).unwrap();
      std::fs::write(&p, f).unwrap();
    }
    std::fs::write(d.path().join(".gitignore"), "node\n").unwrap();
    d
  }

  fn run(dir: &Path, pattern: &str) -> Vec<String> {
    let stop = AtomicBool::new(false);
    let mut v: Vec<String> =
      glob(&GlobRequest { dir, pattern, threads: 2, stop: &stop }).unwrap().into_iter().map(|m| m.rel).collect();
    v.sort();
    v
  }

  #[test]
  fn basename_patterns_match_at_any_depth() {
    let d = tree();
    assert_eq!(run(d.path(), "*.md"), vec!["a.md", "node/f.md"]);
    assert_eq!(run(d.path(), "*.{ts,tsx}"), vec![".hidden/e.ts", "src/b.ts", "src/c.tsx", "src/deep/d.ts"]);
  }

  #[test]
  fn path_patterns_are_anchored_and_star_stays_in_a_component() {
    let d = tree();
    assert_eq!(run(d.path(), "src/*.ts"), vec!["src/b.ts"]);
    assert_eq!(run(d.path(), "src/**/*.ts"), vec!["src/b.ts", "src/deep/d.ts"]);
    assert_eq!(run(d.path(), "**/*.ts"), vec![".hidden/e.ts", "src/b.ts", "src/deep/d.ts"]);
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
    f.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(10)).unwrap();
    let newest = d.path().join("f1.txt");
    let f = std::fs::File::options().write(true).open(&newest).unwrap();
    f.set_modified(SystemTime::now() + std::time::Duration::from_secs(3600)).unwrap();
    let stop = AtomicBool::new(false);
    let out = glob(&GlobRequest { dir: d.path(), pattern: "*.txt", threads: 2, stop: &stop }).unwrap();
    assert_eq!(out[0].rel, "f1.txt");
    assert_eq!(out.last().unwrap().rel, "f0.txt");
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
