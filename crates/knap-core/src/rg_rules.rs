//! rg's filter rules for the descriptor walk ([`crate::walk`]), as the `ignore` crate's walker
//! (0.4, `WalkBuilder` defaults: what `rg` does without flags) applies them, so grep's output is
//! what it was when it walked with that crate:
//!
//! * `.ignore` files always; `.gitignore`, `.git/info/exclude` and git's global excludes file
//!   (`core.excludesFile`, else `$XDG_CONFIG_HOME/git/ignore`) only inside a git repository (a
//!   `.git` or `.jj` in the directory or an ancestor); a `.gitignore` above a nested repository's
//!   root does not reach into it; `.ignore` rules beat `.gitignore` rules beat `exclude` beat the
//!   global file, whatever their depth; the nearest directory's matching line wins within a kind;
//! * the ignore files of every ancestor of the searched directory (rg's `parents`), the workspace
//!   root's ancestors included;
//! * `-g` globs (overrides) first: a match decides alone; with a whitelist glob, a file matching
//!   none is skipped; `-t` types after the ignore files;
//! * hidden entries (a name starting with `.`) skipped unless a glob, type or ignore file
//!   whitelisted them; the searched path itself is never filtered.
//!
//! The files are read through descriptors: in a listed directory, by name with `O_NOFOLLOW`
//! (a symlinked one is followed only while it stays beneath the directory, or else the workspace:
//! `RESOLVE_BENEATH`); in the directories between the root and the searched one, beneath the root;
//! above the root, through `..` from the root's descriptor ([`crate::workspace::Ancestor`]). The one
//! read by path is git's own directory named by a `.git` *file* (a linked worktree or submodule):
//! its `commondir` and `info/exclude`, which git keeps outside the work tree.
//!
//! Compiled matchers are cached per file, keyed by the directory, the file and its identity
//! (`dev`, `ino`, size, `mtime`, `ctime` from `fstat`): a repeated search re-reads no unchanged
//! ignore file and recompiles nothing; the global excludes file is cached the same way, keyed by
//! the git config files it came from. `-g` and `-t` matchers are kept for the last few requests.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};

use crate::kept::{identity, Identity};
use crate::walk::{At, Listing, Rules};
use crate::workspace::{Ancestor, Dir, Opened, Root};

/// A compiled ignore file and the errors rg would report for it (`None`: none).
pub struct Compiled {
  gi: Gitignore,
  err: Option<String>,
}

/// One directory's rules, pointing to its parent's.
pub struct Node {
  parent: Option<Arc<Node>>,
  ignore: Option<Arc<Compiled>>,
  gitignore: Option<Arc<Compiled>>,
  exclude: Option<Arc<Compiled>>,
  has_git: bool,
  /// This directory or an ancestor is a repository root (rg's `require_git`).
  any_git: bool,
  /// Some matcher in this chain, or the global one within a repository, is not empty: entries
  /// must be matched against paths (else only the hidden rule applies).
  any_rules: bool,
}

impl Node {
  fn base() -> Arc<Node> {
    Arc::new(Node {
      parent: None,
      ignore: None,
      gitignore: None,
      exclude: None,
      has_git: false,
      any_git: false,
      any_rules: false,
    })
  }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum M {
  None,
  Ignore,
  Whitelist,
}

fn m<T>(x: ignore::Match<T>) -> M {
  if x.is_ignore() {
    M::Ignore
  } else if x.is_whitelist() {
    M::Whitelist
  } else {
    M::None
  }
}

fn or(a: M, b: impl FnOnce() -> M) -> M {
  if a == M::None {
    b()
  } else {
    a
  }
}

/// A bad `-g` glob or `-t` type: rg's message.
#[derive(Debug)]
pub enum RuleError {
  Glob(String),
  Type(String),
}

pub struct RgRules {
  root: Arc<Root>,
  overrides: Option<Arc<Override>>,
  types: Option<Arc<Types>>,
  /// Git's global excludes, built on first use (it applies only inside a repository).
  global: OnceLock<Arc<Gitignore>>,
}

impl RgRules {
  /// The rules of one search: `glob` is relative to the root (rg's cwd), `file_type` one of rg's
  /// type names.
  pub fn new(root: Arc<Root>, glob: Option<&str>, file_type: Option<&str>) -> Result<Self, RuleError> {
    let overrides = match glob {
      Some(g) => Some(cached_override(&root.path, g)?),
      None => None,
    };
    let types = match file_type {
      Some(t) => Some(cached_types(t)?),
      None => None,
    };
    Ok(Self {
      root,
      overrides,
      types,
      global: OnceLock::new(),
    })
  }

  fn global(&self) -> &Arc<Gitignore> {
    self.global.get_or_init(global_excludes)
  }

  /// The node above the searched directory `scope_rel` (relative to the root): one node per
  /// ancestor, `/` first, each with its ignore files read (rg's `add_parents`). The second value is
  /// rg's error report for those files (bad globs), if any.
  pub fn parents(&self, scope_rel: &Path) -> (Arc<Node>, Option<String>) {
    let mut node = Node::base();
    let mut errors: Vec<String> = Vec::new();
    let settled = self.root.settled_dev();
    for a in self.root.ancestors().iter().rev() {
      // Its kept listing, when it can have one: which of rg's names are there, with no probe.
      let listing = settled.and_then(|dev| crate::walk::Listing::kept_of_path_fd(a.as_raw_fd(), dev));
      node = self.node_for(&node, &Place::Outside(a, listing.as_deref()), &mut errors);
    }
    // The root and the directories between it and the scope (the scope is the walk's start).
    let parts: Vec<&OsStr> = scope_rel.iter().collect();
    for depth in 0..parts.len() {
      let rel: PathBuf = parts[..depth].iter().collect();
      let abs = self.root.path.join(&rel);
      node = match self.root.open_dir(&rel) {
        Ok(dir) => self.node_for(
          &node,
          &Place::Inside {
            dir: &dir,
            abs: &abs,
            rel: &rel,
            listing: None,
          },
          &mut errors,
        ),
        // Gone or swapped meanwhile: no rules from it (rg ignores I/O errors on ignore files).
        Err(_) => self.child(&node, None, None, None, false),
      };
    }
    let err = (!errors.is_empty()).then(|| errors.join("\n"));
    (node, err)
  }

  fn child(
    &self,
    parent: &Arc<Node>,
    ignore: Option<Arc<Compiled>>,
    gitignore: Option<Arc<Compiled>>,
    exclude: Option<Arc<Compiled>>,
    has_git: bool,
  ) -> Arc<Node> {
    let any_git = has_git || parent.any_git;
    let own = ignore.is_some() || gitignore.is_some() || exclude.is_some();
    let global = any_git && !parent.any_git && !self.global().is_empty();
    Arc::new(Node {
      parent: Some(parent.clone()),
      ignore,
      gitignore,
      exclude,
      has_git,
      any_git,
      any_rules: parent.any_rules || own || global || self.overrides.is_some() || self.types.is_some(),
    })
  }

  /// rg's `add_child_path`: the repository markers and ignore files of one directory.
  fn node_for(&self, parent: &Arc<Node>, place: &Place<'_>, errors: &mut Vec<String>) -> Arc<Node> {
    let git_kind = place.kind_if_there(".git");
    let has_jj = place.kind_if_there(".jj").is_some();
    let has_git = git_kind.is_some() || has_jj;
    let ignore = if place.listed(b".ignore") {
      self.load(place, ".ignore", errors)
    } else {
      None
    };
    let gitignore = if place.listed(b".gitignore") {
      self.load(place, ".gitignore", errors)
    } else {
      None
    };
    // (rg also looks for `.git/info/exclude` when `.git` cannot be looked at; nothing can be
    // found below it then.)
    let exclude = match git_kind {
      None => None,
      Some(libc::S_IFREG) => worktree_exclude(place, errors),
      Some(_) => self.load(place, ".git/info/exclude", errors),
    };
    self.child(parent, ignore, gitignore, exclude, has_git)
  }

  /// The ignore file `rel` of `place`, compiled (cached by identity); `None` if it is missing,
  /// not a regular file, or holds no rule.
  fn load(&self, place: &Place<'_>, rel: &str, errors: &mut Vec<String>) -> Option<Arc<Compiled>> {
    let dir_abs = place.abs();
    let file_abs = dir_abs.join(rel);
    // A regular file listed as such: its identity from one fstatat, the file read only when it is
    // not cached yet.
    if let Place::Inside {
      dir,
      listing: Some(listing),
      ..
    } = place
    {
      if !rel.contains('/') && listing.find(rel.as_bytes()) == Some(libc::DT_REG) {
        let c = CString::new(rel).ok()?;
        let st = dir.lstat(&c)?;
        if st.st_mode & libc::S_IFMT == libc::S_IFREG {
          if let Some(hit) = cache_get(&key(dir_abs, &file_abs, &st)) {
            return report(hit, errors);
          }
        }
      }
    }
    let opened = place.open(&self.root, rel)?;
    let k = key(dir_abs, &file_abs, &opened.stat);
    let compiled = match cache_get(&k) {
      Some(hit) => hit,
      None => {
        let c = Arc::new(compile(dir_abs, &file_abs, opened.file));
        cache_put(k, c.clone());
        c
      }
    };
    report(compiled, errors)
  }

  /// rg's `Ignore::matched_ignore`: the nearest match of each kind, `.ignore` first.
  fn matched_ignore(&self, node: &Node, path: &Path, is_dir: bool) -> M {
    let (mut ig, mut gi, mut ex) = (M::None, M::None, M::None);
    let any_git = node.any_git;
    let mut saw_git = false;
    let mut cur = Some(node);
    while let Some(n) = cur {
      if ig == M::None {
        if let Some(c) = &n.ignore {
          ig = m(c.gi.matched(path, is_dir));
        }
      }
      if any_git && !saw_git {
        if gi == M::None {
          if let Some(c) = &n.gitignore {
            gi = m(c.gi.matched(path, is_dir));
          }
        }
        if ex == M::None {
          if let Some(c) = &n.exclude {
            ex = m(c.gi.matched(path, is_dir));
          }
        }
      }
      saw_git = saw_git || n.has_git;
      cur = n.parent.as_deref();
    }
    or(ig, || {
      or(gi, || {
        or(ex, || {
          if any_git {
            m(self.global().matched(path, is_dir))
          } else {
            M::None
          }
        })
      })
    })
  }
}

impl Rules for RgRules {
  type Node = Node;

  fn node(&self, parent: &Arc<Node>, dir: &Dir, at: &At, listing: &Listing) -> Arc<Node> {
    let rel = at.abs.strip_prefix(&self.root.path).unwrap_or(Path::new(""));
    // Errors in a searched directory's own ignore files are not reported (rg's walker attaches
    // them to the directory's entry, which the searcher never prints).
    let mut errors = Vec::new();
    self.node_for(
      parent,
      &Place::Inside {
        dir,
        abs: &at.abs,
        rel,
        listing: Some(listing),
      },
      &mut errors,
    )
  }

  /// rg's `Ignore::matched` then its hidden rule.
  fn skip(&self, node: &Node, at: &At, name: &[u8], is_dir: bool) -> bool {
    let hidden = name.first() == Some(&b'.');
    if !node.any_rules {
      return hidden;
    }
    let path = at.abs.join(OsStr::from_bytes(name));
    if let Some(ov) = &self.overrides {
      match m(ov.matched(&path, is_dir)) {
        M::Ignore => return true,
        M::Whitelist => return false,
        M::None => {}
      }
    }
    let mut whitelisted = false;
    match self.matched_ignore(node, &path, is_dir) {
      M::Ignore => return true,
      M::Whitelist => whitelisted = true,
      M::None => {}
    }
    if let Some(t) = &self.types {
      match m(t.matched(&path, is_dir)) {
        M::Ignore => return true,
        M::Whitelist => whitelisted = true,
        M::None => {}
      }
    }
    !whitelisted && hidden
  }
}

/// A directory whose ignore files are read.
enum Place<'a> {
  /// Beneath the root: a listed directory of the walk, or (no listing) one between the root and
  /// the searched directory. `rel` is its path relative to the root.
  Inside {
    dir: &'a Dir,
    abs: &'a Path,
    rel: &'a Path,
    listing: Option<&'a Listing>,
  },
  /// Above the root, with its listing when it was kept.
  Outside(&'a Ancestor, Option<&'a Listing>),
}

impl Place<'_> {
  fn abs(&self) -> &Path {
    match self {
      Place::Inside { abs, .. } => abs,
      Place::Outside(a, _) => &a.path,
    }
  }

  /// Whether to look for `name` at all: a listed directory says; elsewhere rg probes.
  fn listed(&self, name: &[u8]) -> bool {
    match self {
      Place::Inside { listing: Some(l), .. } | Place::Outside(_, Some(l)) => l.find(name).is_some(),
      _ => true,
    }
  }

  /// What the name `name` is, if it is there (rg's `metadata()`, symlinks followed): from the
  /// listing's `d_type` when it says, else looked at.
  fn kind_if_there(&self, name: &str) -> Option<libc::mode_t> {
    if let Place::Inside { listing: Some(l), .. } | Place::Outside(_, Some(l)) = self {
      match l.find(name.as_bytes())? {
        libc::DT_DIR => return Some(libc::S_IFDIR),
        libc::DT_REG => return Some(libc::S_IFREG),
        _ => {}
      }
    }
    self.kind(name)
  }

  /// What `rel` is, symlinks followed (inside: only while they stay beneath the directory).
  fn kind(&self, rel: &str) -> Option<libc::mode_t> {
    match self {
      Place::Inside { dir, .. } => dir.kind_beneath(Path::new(rel)),
      Place::Outside(a, _) => a.kind(&CString::new(rel).ok()?),
    }
  }

  /// The regular file `rel`, symlinks followed: inside, only while they stay beneath the
  /// directory, else beneath the workspace root.
  fn open(&self, root: &Root, rel: &str) -> Option<Opened> {
    match self {
      Place::Inside {
        dir, rel: dir_rel, ..
      } => match dir.open_file_beneath(Path::new(rel)) {
        Ok(o) => o,
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
          root.open_file_beneath(&dir_rel.join(rel)).ok().flatten()
        }
        Err(_) => None,
      },
      Place::Outside(a, _) => a.open_file(&CString::new(rel).ok()?).ok().flatten(),
    }
  }
}

/// rg's `resolve_git_commondir` for a `.git` file (`gitdir: <dir>`): that directory's
/// `commondir` file names git's common directory, whose `info/exclude` applies. Git keeps both
/// outside the work tree, so they are read by path, as git and rg read them.
fn worktree_exclude(place: &Place<'_>, errors: &mut Vec<String>) -> Option<Arc<Compiled>> {
  let dir_abs = place.abs();
  let dot_git = dir_abs.join(".git");
  let opened = match place {
    Place::Inside { dir, .. } => dir.open_file_beneath(Path::new(".git")),
    Place::Outside(a, _) => a.open_file(c".git"),
  };
  let file = match opened {
    Ok(Some(o)) => o.file,
    Ok(None) => return None,
    Err(e) => {
      errors.push(format!("{}: {e}", dot_git.display()));
      return None;
    }
  };
  let first = match BufReader::new(file).lines().next() {
    Some(Ok(line)) => line,
    Some(Err(e)) => {
      errors.push(format!("{}: {e}", dot_git.display()));
      return None;
    }
    None => return None,
  };
  let real_git_dir = PathBuf::from(first.strip_prefix("gitdir: ")?);
  let commondir_file = real_git_dir.join("commondir");
  let line = match BufReader::new(std::fs::File::open(&commondir_file).ok()?)
    .lines()
    .next()
  {
    Some(Ok(line)) => line,
    Some(Err(e)) => {
      errors.push(format!("{}: {e}", commondir_file.display()));
      return None;
    }
    None => return None,
  };
  let common = if line.starts_with('.') {
    real_git_dir.join(line)
  } else {
    PathBuf::from(line)
  };
  let file_abs = common.join("info/exclude");
  let file = std::fs::File::open(&file_abs).ok()?;
  let meta = file.metadata().ok()?;
  if !meta.is_file() {
    return None;
  }
  let st = stat_of(&file)?;
  let k = key(dir_abs, &file_abs, &st);
  let compiled = match cache_get(&k) {
    Some(hit) => hit,
    None => {
      let c = Arc::new(compile(dir_abs, &file_abs, file));
      cache_put(k, c.clone());
      c
    }
  };
  report(compiled, errors)
}

fn stat_of(file: &std::fs::File) -> Option<libc::stat> {
  use std::os::fd::AsRawFd;
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: valid descriptor, writable stat buffer.
  (unsafe { libc::fstat(file.as_raw_fd(), &mut st) } == 0).then_some(st)
}

/// Notes a compiled file's errors; `None` for a file without rules (nothing to match).
fn report(c: Arc<Compiled>, errors: &mut Vec<String>) -> Option<Arc<Compiled>> {
  if let Some(e) = &c.err {
    errors.push(e.clone());
  }
  (!c.gi.is_empty()).then_some(c)
}

/// rg's `GitignoreBuilder::add` and `create_gitignore` over an open file: lines (a UTF-8 BOM
/// dropped from the first), each added as a glob; errors tagged with the file and line. As there,
/// a lone I/O error is dropped and every other error kept.
fn compile(dir: &Path, path: &Path, file: std::fs::File) -> Compiled {
  let mut builder = GitignoreBuilder::new(dir);
  let mut add_errs: Vec<ignore::Error> = Vec::new();
  let tagged = |err: ignore::Error, line: u64| ignore::Error::WithPath {
    path: path.to_path_buf(),
    err: Box::new(ignore::Error::WithLineNumber {
      line,
      err: Box::new(err),
    }),
  };
  for (i, line) in BufReader::new(file).lines().enumerate() {
    let lineno = (i + 1) as u64;
    let line = match line {
      Ok(line) => line,
      Err(err) => {
        let kind = err.kind();
        add_errs.push(tagged(ignore::Error::Io(err), lineno));
        if kind == std::io::ErrorKind::InvalidData {
          continue;
        }
        break;
      }
    };
    let line = if i == 0 {
      line.trim_start_matches('\u{feff}')
    } else {
      &line
    };
    if let Err(err) = builder.add_line(Some(path.to_path_buf()), line) {
      add_errs.push(tagged(err, lineno));
    }
  }
  let mut errs: Vec<String> = Vec::new();
  if !(add_errs.len() == 1 && add_errs[0].is_io()) {
    errs.extend(add_errs.iter().map(|e| e.to_string()));
  }
  let gi = match builder.build() {
    Ok(gi) => gi,
    Err(err) => {
      errs.push(err.to_string());
      Gitignore::empty()
    }
  };
  Compiled {
    gi,
    err: (!errs.is_empty()).then(|| errs.join("\n")),
  }
}

// ------------------------------------------------------------------------------------ caches

/// The matcher's directory, the file, and the file's identity.
type Key = (PathBuf, PathBuf, Identity);

fn key(dir: &Path, file: &Path, st: &libc::stat) -> Key {
  (dir.to_path_buf(), file.to_path_buf(), identity(st))
}

/// Compiled ignore files. Bounded: past this many it starts over (a changed file leaves its old
/// entry behind until then).
const CACHE_MAX: usize = 4096;

fn cache() -> &'static Mutex<HashMap<Key, Arc<Compiled>>> {
  static CACHE: OnceLock<Mutex<HashMap<Key, Arc<Compiled>>>> = OnceLock::new();
  CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn cache_get(k: &Key) -> Option<Arc<Compiled>> {
  cache().lock().unwrap_or_else(|e| e.into_inner()).get(k).cloned()
}

fn cache_put(k: Key, c: Arc<Compiled>) {
  let mut map = cache().lock().unwrap_or_else(|e| e.into_inner());
  if map.len() >= CACHE_MAX {
    map.clear();
  }
  map.insert(k, c);
}

/// Git's global excludes file as rg finds it (`GitignoreBuilder::build_global`, relative to the
/// process's cwd), rebuilt only when the cwd, the environment it depends on, a git config file or
/// the excludes file itself changed (each compared by `stat` identity).
fn global_excludes() -> Arc<Gitignore> {
  /// The cwd and each config file with its identity.
  type Sources = (Option<PathBuf>, Vec<(PathBuf, Option<Identity>)>);
  struct Last {
    sources: Sources,
    excludes: Option<PathBuf>,
    excludes_id: Option<Identity>,
    gi: Arc<Gitignore>,
  }
  static LAST: Mutex<Option<Last>> = Mutex::new(None);
  let ident = |p: &Path| -> Option<Identity> {
    let c = CString::new(p.as_os_str().as_bytes()).ok()?;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: NUL-terminated path, writable stat buffer.
    (unsafe { libc::stat(c.as_ptr(), &mut st) } == 0).then(|| identity(&st))
  };
  let cwd = std::env::current_dir().ok();
  let Some(cwd_path) = cwd.clone() else {
    // rg ignores the global file when the cwd is unknown.
    return Arc::new(Gitignore::empty());
  };
  let env_path = |var: &str| {
    std::env::var_os(var)
      .map(PathBuf::from)
      .filter(|p| !p.as_os_str().is_empty())
  };
  #[allow(deprecated)]
  let home = std::env::home_dir();
  let xdg = env_path("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
  let mut configs: Vec<PathBuf> = Vec::new();
  configs.extend(env_path("GIT_CONFIG_GLOBAL"));
  configs.extend(home.as_ref().map(|h| h.join(".gitconfig")));
  configs.extend(xdg.as_ref().map(|x| x.join("git/config")));
  configs.push(env_path("GIT_CONFIG_SYSTEM").unwrap_or_else(|| PathBuf::from("/etc/gitconfig")));
  configs.extend(xdg.as_ref().map(|x| x.join("git/ignore")));
  let sources: Sources = (cwd, configs.iter().map(|p| (p.clone(), ident(p))).collect());
  let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
  if let Some(l) = last.as_ref() {
    if l.sources == sources && l.excludes.as_deref().and_then(ident) == l.excludes_id {
      return l.gi.clone();
    }
  }
  let excludes = ignore::gitignore::gitconfig_excludes_path();
  let excludes_id = excludes.as_deref().and_then(ident);
  let (gi, _) = GitignoreBuilder::new(&cwd_path).build_global();
  let gi = Arc::new(gi);
  *last = Some(Last {
    sources,
    excludes,
    excludes_id,
    gi: gi.clone(),
  });
  gi
}

fn cached_override(base: &Path, glob: &str) -> Result<Arc<Override>, RuleError> {
  type Recent = Vec<((PathBuf, String), Arc<Override>)>;
  static RECENT: Mutex<Recent> = Mutex::new(Vec::new());
  let mut recent = RECENT.lock().unwrap_or_else(|e| e.into_inner());
  if let Some((_, o)) = recent.iter().find(|((b, g), _)| b == base && g == glob) {
    return Ok(o.clone());
  }
  let mut ob = OverrideBuilder::new(base);
  let built = ob
    .add(glob)
    .and_then(|b| b.build())
    .map_err(|e| RuleError::Glob(e.to_string()))?;
  let built = Arc::new(built);
  if recent.len() >= 16 {
    recent.remove(0);
  }
  recent.push(((base.to_path_buf(), glob.to_string()), built.clone()));
  Ok(built)
}

fn cached_types(name: &str) -> Result<Arc<Types>, RuleError> {
  static RECENT: Mutex<Vec<(String, Arc<Types>)>> = Mutex::new(Vec::new());
  let mut recent = RECENT.lock().unwrap_or_else(|e| e.into_inner());
  if let Some((_, t)) = recent.iter().find(|(n, _)| n == name) {
    return Ok(t.clone());
  }
  let mut tb = TypesBuilder::new();
  tb.add_defaults();
  tb.select(name);
  let built = Arc::new(tb.build().map_err(|e| RuleError::Type(e.to_string()))?);
  if recent.len() >= 16 {
    recent.remove(0);
  }
  recent.push((name.to_string(), built.clone()));
  Ok(built)
}
