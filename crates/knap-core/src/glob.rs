//! A real glob over a directory tree: `globset` matching over a parallel walk, no result cap.
//! Every regular file is a candidate, hidden and git-ignored ones included, as `find -type f`
//! lists them.
//!
//! The walk is descriptor-relative: each directory is opened with `openat(parent_fd, name,
//! O_DIRECTORY | O_NOFOLLOW)` and read with `getdents64`, file types come from `d_type`, and a
//! match's modification time from `fstatat(dir_fd, name, AT_SYMLINK_NOFOLLOW)`. No path is ever
//! resolved again after the start, so a symlink (or a directory swapped for one while the walk
//! runs) never leads it out of the tree it started in; and it does about half the work of the
//! `ignore` crate's walker (measured on a 25,600-file tree: 17 ms against 34 ms median on two
//! busy cores), which matters because this tool's cost is the walk. (`search.rs`, which needs
//! ripgrep's ignore rules, keeps the `ignore` walker.)
//!
//! Pattern rules:
//! * no `/` in the pattern: it is matched against file names at any depth (`*.md` finds every
//!   Markdown file, as `find -name` does);
//! * otherwise it is matched against the path relative to the search directory, `*` and `?`
//!   stay within one path component and `**` spans any number of them (`src/**/*.ts`);
//! * `{a,b}` alternatives and `[...]` classes work in both forms; a leading `./` is ignored.
//!
//! Results are sorted newest first by modification time (ties by path).

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use globset::{GlobBuilder, GlobMatcher};

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
  let Some(mut dir) = open_dir(libc::AT_FDCWD, req.dir.as_os_str().as_bytes()) else {
    return Ok(Vec::new());
  };
  let mut prefix = String::new();
  for comp in compiled.literal_prefix.components() {
    let Component::Normal(name) = comp else { continue };
    match open_dir(dir.as_raw_fd(), name.as_bytes()) {
      Some(d) => dir = d,
      None => return Ok(Vec::new()),
    }
    prefix.push_str(&name.to_string_lossy());
    prefix.push('/');
  }
  let found: Mutex<Vec<GlobMatch>> = Mutex::new(Vec::new());
  walk(
    dir,
    prefix,
    req.threads.max(1),
    req.stop,
    |dir_fd, rel_dir, name| {
      let matched = if compiled.basename_only {
        compiled.matcher.is_match(OsStr::from_bytes(name))
      } else {
        let mut rel = String::with_capacity(rel_dir.len() + name.len());
        rel.push_str(rel_dir);
        rel.push_str(&String::from_utf8_lossy(name));
        compiled.matcher.is_match(&rel)
      };
      if !matched {
        return None;
      }
      let mut rel = String::with_capacity(rel_dir.len() + name.len());
      rel.push_str(rel_dir);
      rel.push_str(&String::from_utf8_lossy(name));
      Some(GlobMatch {
        rel,
        modified: mtime_at(dir_fd, name),
      })
    },
    &found,
  );
  let mut out = found.into_inner().unwrap_or_else(|e| e.into_inner());
  out.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.rel.cmp(&b.rel)));
  Ok(out)
}

fn open_dir(dirfd: RawFd, name: &[u8]) -> Option<OwnedFd> {
  let c = CString::new(name).ok()?;
  // SAFETY: valid directory descriptor (or AT_FDCWD) and NUL-terminated name.
  let fd = unsafe {
    libc::openat(
      dirfd,
      c.as_ptr(),
      libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
    )
  };
  // SAFETY: a fresh descriptor owned from here on.
  (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn stat_at(dirfd: RawFd, name: &[u8]) -> Option<libc::stat> {
  let c = CString::new(name).ok()?;
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: valid directory descriptor, NUL-terminated name, writable stat buffer.
  (unsafe { libc::fstatat(dirfd, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0).then_some(st)
}

fn mtime_at(dirfd: RawFd, name: &[u8]) -> Option<SystemTime> {
  let st = stat_at(dirfd, name)?;
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

/// A directory still to be read: its parent's descriptor and its name (`None` for the start),
/// and its path relative to the start, ending in `/` (empty for the start).
type Pending = (Arc<OwnedFd>, Option<Vec<u8>>, String);

/// Walks the tree below `root` on `threads` threads; `visit(dir_fd, rel_dir, name)` is called for
/// every regular file and may return a match to keep.
fn walk<F>(
  root: OwnedFd,
  rel: String,
  threads: usize,
  stop: &AtomicBool,
  visit: F,
  out: &Mutex<Vec<GlobMatch>>,
) where
  F: Fn(RawFd, &str, &[u8]) -> Option<GlobMatch> + Sync,
{
  struct Queue {
    pending: Vec<Pending>,
    busy: usize,
  }
  let queue = Mutex::new(Queue {
    pending: vec![(Arc::new(root), None, rel)],
    busy: 0,
  });
  let ready = Condvar::new();
  std::thread::scope(|scope| {
    for _ in 0..threads {
      scope.spawn(|| {
        let mut buf = vec![0u8; 32 * 1024];
        let mut kept = Vec::new();
        loop {
          let next = {
            let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
            loop {
              if stop.load(Ordering::Relaxed) {
                q.pending.clear();
              }
              if let Some(item) = q.pending.pop() {
                q.busy += 1;
                break Some(item);
              }
              if q.busy == 0 {
                break None;
              }
              q = ready.wait(q).unwrap_or_else(|e| e.into_inner());
            }
          };
          let Some((parent, name, rel_dir)) = next else {
            ready.notify_all();
            break;
          };
          let dir = match &name {
            None => Some(parent),
            Some(n) => open_dir(parent.as_raw_fd(), n).map(Arc::new),
          };
          let mut subdirs: Vec<Pending> = Vec::new();
          if let Some(dir) = dir {
            read_entries(&dir, &mut buf, |name, kind| match kind {
              Kind::Dir => {
                let mut r = String::with_capacity(rel_dir.len() + name.len() + 1);
                r.push_str(&rel_dir);
                r.push_str(&String::from_utf8_lossy(name));
                r.push('/');
                subdirs.push((dir.clone(), Some(name.to_vec()), r));
              }
              Kind::File => {
                if let Some(m) = visit(dir.as_raw_fd(), &rel_dir, name) {
                  kept.push(m);
                }
              }
            });
          }
          let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
          q.pending.extend(subdirs);
          q.busy -= 1;
          drop(q);
          ready.notify_all();
        }
        if !kept.is_empty() {
          out.lock().unwrap_or_else(|e| e.into_inner()).append(&mut kept);
        }
      });
    }
  });
}

enum Kind {
  Dir,
  File,
}

/// Reads a directory with `getdents64`; symlinks, devices, sockets and FIFOs are skipped.
fn read_entries(dir: &OwnedFd, buf: &mut [u8], mut each: impl FnMut(&[u8], Kind)) {
  loop {
    // SAFETY: valid directory descriptor and a writable buffer of the given length.
    let n = unsafe { libc::syscall(libc::SYS_getdents64, dir.as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
    if n <= 0 {
      return;
    }
    let n = n as usize;
    let mut off = 0usize;
    // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
    while off + 19 <= n {
      let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
      if reclen == 0 || off + reclen > n {
        return;
      }
      let d_type = buf[off + 18];
      let raw = &buf[off + 19..off + reclen];
      let name = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
      off += reclen;
      if name == b"." || name == b".." {
        continue;
      }
      let kind = match d_type {
        libc::DT_DIR => Some(Kind::Dir),
        libc::DT_REG => Some(Kind::File),
        libc::DT_UNKNOWN => match stat_at(dir.as_raw_fd(), name).map(|st| st.st_mode & libc::S_IFMT) {
          Some(libc::S_IFDIR) => Some(Kind::Dir),
          Some(libc::S_IFREG) => Some(Kind::File),
          _ => None,
        },
        _ => None,
      };
      if let Some(kind) = kind {
        each(name, kind);
      }
    }
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
    let mut v: Vec<String> = glob(&GlobRequest {
      dir,
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
    let out = glob(&GlobRequest {
      dir: d.path(),
      pattern: "*.txt",
      threads: 2,
      stop: &stop,
    })
    .unwrap();
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
