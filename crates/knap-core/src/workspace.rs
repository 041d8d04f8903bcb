//! The workspace boundary. Exactly one implementation of "open this path inside the workspace".
//!
//! Three layers. First [`check_path`], the one validator every tool path goes through: a NUL
//! byte, more than 4096 bytes or more than 1024 components is `cave_path_invalid`. Then the
//! reference's check: a candidate is resolved against the canonical workspace, its deepest
//! existing ancestor is canonicalized (every symlink on the existing part followed) and the
//! result must stay inside, else `caveman-code: path escapes the workspace: <p>`. knap does that
//! canonicalization in one pass over descriptors (`openat` per component, at most 40 symlinks),
//! so it costs one step per component however deep the path (a realpath per popped component
//! made a 3,000-deep path take seconds).
//! Then, unlike the reference (whose realpath-then-open is racy), the file is opened relative to
//! a descriptor of the workspace with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: if a
//! directory is swapped for an outward symlink between the check and the open, the kernel refuses
//! to leave the workspace. Kernels without `openat2` get an `O_NOFOLLOW` walk, component by
//! component, over the canonical (symlink-free) relative path. A read of a path with no symlink on
//! it does both in one `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` ([`open_plain`]): its
//! realpath is its lexical form, so the check has nothing to add; anything else takes the two steps.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::error::{Caveman, PathProblem, ToolError};
use crate::limits::{PATH_MAX_BYTES, PATH_MAX_COMPONENTS, PATH_MAX_SYMLINKS, WRITE_CHUNK_BYTES};

/// Steps (system calls) a path resolution may take on the calling thread: enough for every
/// ordinary path, far below what a deep or symlink-heavy one costs.
pub const INLINE_RESOLVE_STEPS: usize = 64;

/// The containment check against an opened root; `None` when it would take more than
/// `max_steps` steps.
fn resolve_in(root: &Root, candidate: &str, max_steps: usize) -> Result<Option<Resolved>, ToolError> {
  // Names shown with escaped bytes (see `name_text`) are addressed by those bytes.
  let given = PathBuf::from(std::ffi::OsString::from_vec(name_bytes(candidate).into_owned()));
  let joined = if given.is_absolute() { given } else { root.path.join(given) };
  let lexical = normalize(&joined);
  let Some(full) = canonicalize_bounded(root, &lexical, max_steps)
    .map_err(|e| ToolError::from_io(&e, "realpath", &lexical))?
  else {
    return Ok(None);
  };
  match full.strip_prefix(&root.path) {
    Ok(rel) => Ok(Some(Resolved {
      rel: rel.to_path_buf(),
      abs: full.clone(),
    })),
    Err(_) => Err(escape_error(candidate)),
  }
}

/// How [`Workspace::open_read`] opens: `O_NONBLOCK` keeps the open of a FIFO from waiting for a
/// writer (the caller then refuses it as not a regular file); it changes nothing for regular files.
const READ_FLAGS: i32 = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC;

/// The containment check and the open in one system call, for the common case: a candidate that
/// is lexically inside the root, opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`.
/// When that open succeeds no component was a symlink, so the reference's answer (the realpath of
/// the lexical path) is the lexical path itself, and the descriptor is what [`open_beneath`] of
/// that path opens. Any failure (a symlink on the way: `ELOOP`; missing; not permitted; more than
/// `max_components`; no openat2) is `None`, and the caller takes the two-step path, which gives
/// every error and every symlink case exactly as before. [`check_path`] must have passed.
fn open_plain(root: &Root, candidate: &str, flags: i32, max_components: usize) -> Option<(Resolved, OwnedFd)> {
  let given = name_bytes(candidate);
  let given = Path::new(OsStr::from_bytes(&given));
  let lexical = normalize(&if given.is_absolute() { given.to_path_buf() } else { root.path.join(given) });
  let rel = lexical.strip_prefix(&root.path).ok()?;
  if rel.components().count() > max_components {
    return None;
  }
  let rel_c = CString::new(if rel.as_os_str().is_empty() { OsStr::new(".") } else { rel.as_os_str() }.as_bytes()).ok()?;
  let fd = openat2_resolve(root.dir.as_raw_fd(), &rel_c, flags | libc::O_NOFOLLOW, 0, RESOLVE_NO_SYMLINKS).ok()?;
  let rel = rel.to_path_buf();
  Some((Resolved { abs: lexical, rel }, fd))
}

/// The canonical root and a descriptor of it.
pub struct Root {
  pub path: PathBuf,
  dir: OwnedFd,
  /// [`Root::settled_dev`], looked up once.
  settled: std::sync::OnceLock<Option<u64>>,
}

/// Whether grep may keep contents between calls, given `KNAP_GREP_KEEP`: on unless it is `0`.
fn keeping_enabled(var: Option<&OsStr>) -> bool {
  var.is_none_or(|v| v != "0")
}

impl Root {
  /// The root's device if it is on a local file system that stamps every change of a
  /// file's contents with a fine-grained change time (`ctime`): ext4, xfs, btrfs, tmpfs, overlayfs,
  /// f2fs. There a file whose (device, inode, size, mtime, ctime) did not move has the same
  /// contents, which lets grep keep small files' contents ([`crate::search`]). `None` elsewhere
  /// (network and FUSE file systems cache attributes; FAT has coarse or no change times). One `fstat`
  /// and one `fstatfs`, on first use; the open root keeps that file system (and so its device
  /// number) in place. Files on other devices below the root (mounts) are not covered.
  /// `KNAP_GREP_KEEP=0` in the environment turns the keeping off (every search reads every file).
  pub fn settled_dev(&self) -> Option<u64> {
    *self.settled.get_or_init(|| {
      if !cfg!(target_os = "linux") || !keeping_enabled(std::env::var_os("KNAP_GREP_KEEP").as_deref()) {
        return None;
      }
      const LOCAL: [i64; 6] = [
        0xEF53,     // ext2/3/4
        0x5846_5342, // xfs
        0x9123_683E, // btrfs
        0x0102_1994, // tmpfs
        0x794C_7630, // overlayfs
        0xF2F5_2010, // f2fs
      ];
      let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
      let mut st: libc::stat = unsafe { std::mem::zeroed() };
      // SAFETY: valid descriptor, writable buffers.
      let ok = unsafe { libc::fstatfs(self.dir.as_raw_fd(), &mut fs) == 0 && libc::fstat(self.dir.as_raw_fd(), &mut st) == 0 };
      (ok && LOCAL.contains(&(fs.f_type as i64))).then_some(st.st_dev as u64)
    })
  }

  /// Opens `rel` (relative to the root) for reading without ever leaving the root
  /// (`openat2(RESOLVE_BENEATH)`, or the `O_NOFOLLOW` walk), following no final symlink
  /// (`O_NOFOLLOW`) and never waiting (`O_NONBLOCK`: a FIFO swapped in opens at once). `None` for
  /// anything but a regular file (checked with `fstat` on the descriptor, not on the path).
  pub fn open_regular(&self, rel: &Path) -> io::Result<Option<Opened>> {
    let fd = open_beneath(
      self,
      rel,
      libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC,
      0,
    )?;
    Ok(regular(fd))
  }
}

/// A directory descriptor beneath the root, for walking it (grep, Glob): the root's own
/// directory or the scope opened with [`Root::open_dir`], then each subdirectory opened by one name
/// from its parent's listing. Everything opened through a `Dir` is either one name with
/// `O_NOFOLLOW` (a name never contains `/`, and `.`/`..` are never listed to the walk) or a
/// relative path resolved beneath this directory (`RESOLVE_BENEATH`), so a walk that starts
/// beneath the root stays there however its directories are swapped for symlinks meanwhile: it
/// keeps reading the directories it opened, never a path.
pub struct Dir {
  fd: OwnedFd,
}

/// An opened regular file and its `fstat` (size, identity), as [`Dir::open_file`] found it.
pub struct Opened {
  pub file: File,
  pub stat: libc::stat,
}

impl Dir {
  fn new(fd: OwnedFd) -> Self {
    Self { fd }
  }

  pub fn as_raw_fd(&self) -> RawFd {
    self.fd.as_raw_fd()
  }

  /// The subdirectory `name` (one component), for listing; a symlink there is refused (`ELOOP` or
  /// `ENOTDIR`).
  pub fn open_dir(&self, name: &CStr) -> io::Result<Dir> {
    let fd = openat(self.as_raw_fd(), name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0)?;
    Ok(Dir::new(fd))
  }

  /// The file `name` (one component), never through a symlink, never waiting (`O_NONBLOCK`);
  /// `None` for anything but a regular file (checked with `fstat` on the descriptor).
  pub fn open_file(&self, name: &CStr) -> io::Result<Option<Opened>> {
    let fd = openat(self.as_raw_fd(), name, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0)?;
    Ok(regular(fd))
  }

  /// The regular file at `rel` below this directory, following symlinks only while they stay
  /// below it (`RESOLVE_BENEATH`; an escaping one is `EXDEV`). For ignore files, which rg reads
  /// through symlinks (`.ignore -> .gitignore`). Without openat2 no symlink is followed.
  pub fn open_file_beneath(&self, rel: &Path) -> io::Result<Option<Opened>> {
    let fd = open_beneath_fd(self.as_raw_fd(), rel, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC, 0)?;
    Ok(regular(fd))
  }

  /// The kind (`S_IFMT`) of what `rel` names below this directory, following symlinks only while
  /// they stay below it; `None` if nothing is there (or it leads out).
  pub fn kind_beneath(&self, rel: &Path) -> Option<libc::mode_t> {
    open_beneath_fd(self.as_raw_fd(), rel, DIR_HANDLE | libc::O_CLOEXEC, 0)
      .ok()
      .and_then(|fd| fd_kind(&fd))
  }

  /// `fstatat(AT_SYMLINK_NOFOLLOW)` of one name.
  pub fn lstat(&self, name: &CStr) -> Option<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid directory descriptor, NUL-terminated name, writable stat buffer.
    (unsafe { libc::fstatat(self.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0)
      .then_some(st)
  }
}

/// What [`Root::open_scope`] found.
pub enum Scope {
  Dir(Dir),
  File(Opened),
  /// A FIFO, socket or device (opened without waiting, never read).
  Other,
}

/// A directory above the workspace root, reached through `..` from the root's descriptor. rg reads
/// the ignore files of every ancestor of the directory it searches (its `parents` rule); these lie
/// outside the workspace by definition (the workspace's contents cannot change them), so they are
/// read as rg reads them, following symlinks. Nothing else is ever opened through one.
pub struct Ancestor {
  pub path: PathBuf,
  fd: OwnedFd,
}

impl Ancestor {
  /// Its descriptor (`O_PATH`: for `fstat` and as the directory of `openat` only).
  pub fn as_raw_fd(&self) -> RawFd {
    self.fd.as_raw_fd()
  }

  /// The regular file `rel` below this directory (symlinks followed, as rg does).
  pub fn open_file(&self, rel: &CStr) -> io::Result<Option<Opened>> {
    let fd = openat(self.fd.as_raw_fd(), rel, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC, 0)?;
    Ok(regular(fd))
  }

  /// The kind (`S_IFMT`) of what `rel` names below this directory (symlinks followed).
  pub fn kind(&self, rel: &CStr) -> Option<libc::mode_t> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid directory descriptor, NUL-terminated name, writable stat buffer.
    (unsafe { libc::fstatat(self.fd.as_raw_fd(), rel.as_ptr(), &mut st, 0) } == 0).then_some(st.st_mode & libc::S_IFMT)
  }
}

impl Root {
  /// The directory `rel` (canonical, relative to the root) opened beneath the root for listing,
  /// never through a symlink at its last component.
  pub fn open_dir(&self, rel: &Path) -> io::Result<Dir> {
    let fd = open_beneath(
      self,
      rel,
      libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
      0,
    )?;
    Ok(Dir::new(fd))
  }

  /// Opens `rel` beneath the root whatever it is, in one `open` (`O_RDONLY | O_NONBLOCK`, not
  /// following its last component) and one `fstat`: a directory to list, a regular file to read,
  /// or something else (never read).
  pub fn open_scope(&self, rel: &Path) -> io::Result<Scope> {
    let fd = open_beneath(
      self,
      rel,
      libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC,
      0,
    )?;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, writable stat buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
      return Err(io::Error::last_os_error());
    }
    Ok(match st.st_mode & libc::S_IFMT {
      libc::S_IFDIR => Scope::Dir(Dir::new(fd)),
      libc::S_IFREG => Scope::File(Opened {
        file: File::from(fd),
        stat: st,
      }),
      _ => Scope::Other,
    })
  }

  /// What `rel` is, looked at beneath the root without following its last component: the kind
  /// (`S_IFMT`) of what is there now, or the open error (`ENOENT`, `EXDEV`, `ELOOP` …).
  pub fn kind_of(&self, rel: &Path) -> io::Result<libc::mode_t> {
    let fd = open_beneath(self, rel, DIR_HANDLE | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0)?;
    fd_kind(&fd).ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
  }

  /// The regular file at `rel`, following symlinks only while they stay beneath the root (rg
  /// follows a symlinked ignore file; this follows it only inside the workspace).
  pub fn open_file_beneath(&self, rel: &Path) -> io::Result<Option<Opened>> {
    let fd = open_beneath(self, rel, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC, 0)?;
    Ok(regular(fd))
  }

  /// The root's ancestors, nearest first (the parent of the canonical root up to `/`), each
  /// reached through `..` from the one before (so the first from the root's own descriptor).
  /// Stops early, without an error, at the first that cannot be opened.
  pub fn ancestors(&self) -> Vec<Ancestor> {
    let mut out: Vec<Ancestor> = Vec::new();
    for path in self.path.ancestors().skip(1) {
      let from = out.last().map_or(self.dir.as_raw_fd(), |a| a.fd.as_raw_fd());
      match openat(from, c"..", DIR_HANDLE | libc::O_DIRECTORY | libc::O_CLOEXEC, 0) {
        Ok(fd) => out.push(Ancestor {
          path: path.to_path_buf(),
          fd,
        }),
        Err(_) => break,
      }
    }
    out
  }
}

/// The descriptor if it is a regular file, with its `fstat`.
fn regular(fd: OwnedFd) -> Option<Opened> {
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: valid descriptor, writable stat buffer.
  if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
    return None;
  }
  Some(Opened {
    file: File::from(fd),
    stat: st,
  })
}

/// A candidate path after the boundary check.
#[derive(Debug, Clone)]
pub struct Resolved {
  /// Canonical absolute path (what error messages show).
  pub abs: PathBuf,
  /// Path relative to the canonical root; empty for the root itself.
  pub rel: PathBuf,
}

pub struct Workspace {
  given: PathBuf,
  root: Mutex<Option<Arc<Root>>>,
}

/// File names that are not UTF-8, as text and back. A tool shows a name as text; a byte that is
/// not part of valid UTF-8 is shown as the private-use character U+EF00 + byte (U+EF80–U+EFFF,
/// the MirBSD "OPTU-8" mapping), and a tool path given back with such characters names those
/// bytes, so every listed name can be addressed. To keep the mapping one-to-one, a name whose
/// UTF-8 holds one of those characters itself is shown with that character's bytes escaped the
/// same way. Valid UTF-8 names without them (nearly all) are shown as they are.
pub fn name_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
  use std::borrow::Cow;
  if let Ok(s) = std::str::from_utf8(bytes) {
    if !s.chars().any(is_byte_escape) {
      return Cow::Borrowed(s);
    }
  }
  let mut out = String::with_capacity(bytes.len() + 8);
  let mut rest = bytes;
  while !rest.is_empty() {
    let (valid, bad) = match std::str::from_utf8(rest) {
      Ok(s) => (s, 0),
      Err(e) => {
        // The first `valid_up_to` bytes are valid UTF-8.
        let s = std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default();
        (s, e.error_len().unwrap_or(rest.len() - e.valid_up_to()))
      }
    };
    for c in valid.chars() {
      if is_byte_escape(c) {
        let mut buf = [0u8; 4];
        out.extend(c.encode_utf8(&mut buf).bytes().map(escape_byte));
      } else {
        out.push(c);
      }
    }
    let at = valid.len();
    out.extend(rest[at..at + bad].iter().copied().map(escape_byte));
    rest = &rest[at + bad..];
  }
  Cow::Owned(out)
}

/// The bytes a tool path names: [`name_text`] undone (U+EF80–U+EFFF are bytes 0x80–0xFF).
pub fn name_bytes(text: &str) -> std::borrow::Cow<'_, [u8]> {
  use std::borrow::Cow;
  if !text.chars().any(is_byte_escape) {
    return Cow::Borrowed(text.as_bytes());
  }
  let mut out = Vec::with_capacity(text.len());
  for c in text.chars() {
    if is_byte_escape(c) {
      out.push((c as u32 - 0xEF00) as u8);
    } else {
      let mut buf = [0u8; 4];
      out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
  }
  Cow::Owned(out)
}

/// A path as tools show it ([`name_text`] over its bytes).
pub fn path_text(p: &Path) -> std::borrow::Cow<'_, str> {
  name_text(p.as_os_str().as_bytes())
}

fn is_byte_escape(c: char) -> bool {
  ('\u{EF80}'..='\u{EFFF}').contains(&c)
}

/// Only bytes 0x80–0xFF are ever escaped (an ASCII byte is always valid UTF-8).
fn escape_byte(b: u8) -> char {
  char::from_u32(0xEF00 + b as u32).unwrap_or('\u{FFFD}')
}

pub fn escape_error(candidate: &str) -> ToolError {
  ToolError::caveman(Caveman::WorkspaceEscape(candidate.to_string()))
}

/// The one path validator: every tool path (shellTools, the AI SDK tools, a non-local backend's
/// lexical check) passes here before any system call, so a bad path gets one code from every
/// tool. Components are the non-empty, non-`.` parts between slashes (`..` counts: it is work).
pub fn check_path(candidate: &str) -> Result<(), ToolError> {
  let problem = if candidate.as_bytes().contains(&0) {
    Some(PathProblem::Nul)
  } else if candidate.len() > PATH_MAX_BYTES {
    Some(PathProblem::TooLong { bytes: candidate.len() })
  } else {
    let components = candidate.split('/').filter(|p| !p.is_empty() && *p != ".").count();
    (components > PATH_MAX_COMPONENTS).then_some(PathProblem::TooDeep { components })
  };
  match problem {
    Some(p) => Err(ToolError::caveman(Caveman::PathInvalid(p))),
    None => Ok(()),
  }
}

impl Workspace {
  /// The workspace is canonicalized lazily, so it need not exist when the tools are built.
  pub fn new(given: impl Into<PathBuf>) -> Self {
    Self {
      given: given.into(),
      root: Mutex::new(None),
    }
  }

  pub fn given(&self) -> &Path {
    &self.given
  }

  /// The canonical root, opened on first use (a missing workspace is `ENOENT` then).
  pub fn root(&self) -> Result<Arc<Root>, ToolError> {
    let mut slot = self.root.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(root) = slot.as_ref() {
      return Ok(root.clone());
    }
    let absolute = absolutize(&self.given);
    let path = std::fs::canonicalize(&absolute).map_err(|e| {
      let error = ToolError::from_io(&e, "realpath", &absolute);
      // The reference resolves the workspace lazily too (a raw ENOENT); say what to do, on
      // every path that reaches it (direct calls, runs, the AI SDK sandbox, the exec server).
      if e.kind() == std::io::ErrorKind::NotFound {
        error.with_hint(format!(
          "the workspace {:?} does not exist: create it (mkdir -p, or fs.mkdirSync(dir, {{ recursive: true }})) or pass an existing directory",
          self.given.display().to_string()
        ))
      } else {
        error
      }
    })?;
    let dir = open_path(&path, DIR_HANDLE | libc::O_DIRECTORY | libc::O_CLOEXEC)
      .map_err(|e| ToolError::from_io(&e, "open", &path))?;
    let root = Arc::new(Root {
      path,
      dir,
      settled: std::sync::OnceLock::new(),
    });
    *slot = Some(root.clone());
    Ok(root)
  }

  /// The reference's containment check (`resolvePath`), after [`check_path`].
  pub fn resolve(&self, candidate: &str) -> Result<Resolved, ToolError> {
    check_path(candidate)?;
    let root = self.root()?;
    let resolved = resolve_in(&root, candidate, usize::MAX)?;
    Ok(resolved.expect("an unbounded resolution always finishes"))
  }

  /// [`Self::resolve`] on the calling thread when it takes at most [`INLINE_RESOLVE_STEPS`]
  /// steps (one system call each), `None` otherwise: a tool call's first poll may run on the JS
  /// thread, which must not walk a deep path (up to 1,024 components, and 40 symlinks whose
  /// targets add more) there.
  pub fn resolve_inline(&self, candidate: &str) -> Result<Option<Resolved>, ToolError> {
    check_path(candidate)?;
    let root = self.root()?;
    resolve_in(&root, candidate, INLINE_RESOLVE_STEPS)
  }

  /// [`Self::resolve`] without blocking the calling thread on a long walk: cheap resolutions
  /// inline, the rest on the blocking pool.
  pub async fn resolve_async(&self, candidate: &str) -> Result<Resolved, ToolError> {
    if let Some(r) = self.resolve_inline(candidate)? {
      return Ok(r);
    }
    let root = self.root()?;
    let c = candidate.to_string();
    let r = tokio::task::spawn_blocking(move || resolve_in(&root, &c, usize::MAX))
      .await
      .map_err(|e| ToolError::new("cave_internal", e.to_string()))??;
    Ok(r.expect("an unbounded resolution always finishes"))
  }

  /// `path.resolve(workspace)`: the root the tools use on a non-local backend. Lexical: the
  /// backend is never asked.
  pub fn lexical_root(&self) -> PathBuf {
    absolutize(&self.given)
  }

  /// The containment check on a non-local backend: a lexical resolve against
  /// [`Self::lexical_root`] and the same escape test and message as [`Self::resolve`].
  pub fn resolve_lexical(&self, candidate: &str) -> Result<PathBuf, ToolError> {
    check_path(candidate)?;
    let root = self.lexical_root();
    let full = normalize(&root.join(candidate));
    if full.starts_with(&root) {
      Ok(full)
    } else {
      Err(escape_error(candidate))
    }
  }

  /// The one-step form of [`Self::resolve`] then [`Self::open_read`] ([`open_plain`]): `None`
  /// when it does not apply or fails, and the caller takes the two steps (which give every error).
  /// The errors here are the ones `resolve` gives first: [`check_path`]'s and the root's.
  pub fn open_read_plain(&self, candidate: &str) -> Result<Option<(Resolved, File)>, ToolError> {
    check_path(candidate)?;
    let root = self.root()?;
    Ok(open_plain(&root, candidate, READ_FLAGS, usize::MAX).map(|(r, fd)| (r, File::from(fd))))
  }

  /// [`Self::resolve`] then [`Self::open_read`], in one `openat2` when it can be.
  pub fn resolve_open_read(&self, candidate: &str, syscall: &str) -> Result<(Resolved, File), ToolError> {
    if let Some(done) = self.open_read_plain(candidate)? {
      return Ok(done);
    }
    let r = self.resolve(candidate)?;
    let file = self.open_read(candidate, &r, syscall)?;
    Ok((r, file))
  }

  /// [`Self::resolve_open_read`] without blocking the calling thread on a long walk: the one-step
  /// open for a path of at most [`INLINE_RESOLVE_STEPS`] components, else [`Self::resolve_async`].
  pub async fn resolve_open_read_async(&self, candidate: &str, syscall: &str) -> Result<(Resolved, File), ToolError> {
    check_path(candidate)?;
    let root = self.root()?;
    if let Some((r, fd)) = open_plain(&root, candidate, READ_FLAGS, INLINE_RESOLVE_STEPS) {
      return Ok((r, File::from(fd)));
    }
    let r = self.resolve_async(candidate).await?;
    let file = self.open_read(candidate, &r, syscall)?;
    Ok((r, file))
  }

  /// Opens an existing path for reading (files and directories) inside the workspace
  /// ([`READ_FLAGS`]).
  pub fn open_read(&self, candidate: &str, resolved: &Resolved, syscall: &str) -> Result<File, ToolError> {
    let root = self.root()?;
    let fd = open_beneath(&root, &resolved.rel, READ_FLAGS, 0)
      .map_err(|e| map_open_error(e, candidate, syscall, &resolved.abs))?;
    Ok(File::from(fd))
  }

  /// Opens the parent directory of `resolved` inside the workspace, for creating or replacing
  /// its last component with `*at` calls. Returns the directory and the file name.
  pub fn open_parent(&self, candidate: &str, resolved: &Resolved) -> Result<(OwnedFd, CString), ToolError> {
    let root = self.root()?;
    let name = resolved.rel.file_name().ok_or_else(|| {
      ToolError::from_io(&io::Error::from_raw_os_error(libc::EISDIR), "open", &resolved.abs)
    })?;
    let parent = resolved.rel.parent().unwrap_or(Path::new(""));
    let fd = open_beneath(
      &root,
      parent,
      DIR_HANDLE | libc::O_DIRECTORY | libc::O_CLOEXEC,
      0,
    )
    .map_err(|e| map_open_error(e, candidate, "open", &resolved.abs))?;
    Ok((fd, cstring(name)?))
  }
}

/// What [`Workspace::stat`] saw: the target's kind and size, never a symlink's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
  pub kind: Kind,
  pub size: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
  File,
  Dir,
  /// A FIFO, socket or device: never opened for I/O by any tool.
  Special,
}

impl Workspace {
  /// `stat` of a resolved path without following anything: the parent is opened beneath the
  /// root and the last component looked at with `fstatat(AT_SYMLINK_NOFOLLOW)`, so a symlink
  /// swapped in after the check reveals nothing about its target (it is an escape), and a FIFO
  /// or device is never opened. `None` when it does not exist.
  pub fn stat(&self, candidate: &str, resolved: &Resolved) -> Result<Option<Meta>, ToolError> {
    let root = self.root()?;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let rc = match resolved.rel.file_name() {
      // The root itself: its own descriptor.
      None => unsafe { libc::fstat(root.dir.as_raw_fd(), &mut st) },
      Some(name) => {
        let parent = resolved.rel.parent().unwrap_or(Path::new(""));
        let dir = match open_beneath(&root, parent, DIR_HANDLE | libc::O_DIRECTORY | libc::O_CLOEXEC, 0) {
          Ok(d) => d,
          Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => return Ok(None),
          Err(e) => return Err(map_open_error(e, candidate, "stat", &resolved.abs)),
        };
        let c = cstring(name)?;
        // SAFETY: valid dirfd, NUL-terminated name, writable stat buffer.
        unsafe { libc::fstatat(dir.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) }
      }
    };
    if rc != 0 {
      let e = io::Error::last_os_error();
      return match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => Ok(None),
        _ => Err(ToolError::from_io(&e, "stat", &resolved.abs)),
      };
    }
    let kind = match st.st_mode & libc::S_IFMT {
      libc::S_IFREG => Kind::File,
      libc::S_IFDIR => Kind::Dir,
      // `resolve` followed every symlink it met: one here was swapped in since.
      libc::S_IFLNK => return Err(escape_error(candidate)),
      _ => Kind::Special,
    };
    Ok(Some(Meta {
      kind,
      size: st.st_size as u64,
    }))
  }

  /// Creates the missing directories of the resolved path's parent, one component at a time
  /// from the root's descriptor (`openat(O_NOFOLLOW)` / `mkdirat`: a symlink met on the way is
  /// an escape), and returns the parent's descriptor and the file name, as
  /// [`Workspace::open_parent`] does. The returned [`CreatedDirs`] removes the directories this
  /// call made (deepest first, only while empty) when dropped, unless [`CreatedDirs::keep`] is
  /// called: a write that fails leaves no directory chain behind.
  pub fn create_parents(
    &self,
    candidate: &str,
    resolved: &Resolved,
  ) -> Result<(OwnedFd, CString, CreatedDirs), ToolError> {
    let root = self.root()?;
    let name = resolved.rel.file_name().ok_or_else(|| {
      ToolError::from_io(&io::Error::from_raw_os_error(libc::EISDIR), "open", &resolved.abs)
    })?;
    let name = cstring(name)?;
    let mut created = CreatedDirs {
      root: root.clone(),
      base: None,
      names: Vec::new(),
    };
    let mut cur = dup_dir(&root.dir).map_err(|e| ToolError::from_io(&e, "open", &root.path))?;
    let mut rel_so_far = PathBuf::new();
    let fail = |e: io::Error| map_open_error(e, candidate, "mkdir", &resolved.abs);
    for part in component_names(resolved.rel.parent().unwrap_or(Path::new(""))) {
      let c = cstring(&part)?;
      let flags = DIR_HANDLE | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
      // Two rounds: a directory another process creates between our open and our mkdir
      // (EEXIST) is opened the second time.
      let mut next = None;
      for _ in 0..2 {
        match openat(cur.as_raw_fd(), &c, flags, 0) {
          Ok(fd) => {
            next = Some(fd);
            break;
          }
          Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            // SAFETY: valid directory descriptor and NUL-terminated name.
            if unsafe { libc::mkdirat(cur.as_raw_fd(), c.as_ptr(), 0o777) } == 0 {
              created.record(&rel_so_far, &part);
            } else {
              let e = io::Error::last_os_error();
              if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(fail(e));
              }
            }
          }
          Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) && is_symlink_at(cur.as_raw_fd(), &c) => {
            return Err(fail(io::Error::from_raw_os_error(libc::ELOOP)));
          }
          Err(e) => return Err(fail(e)),
        }
      }
      cur = next.ok_or_else(|| fail(io::Error::from_raw_os_error(libc::ENOENT)))?;
      rel_so_far.push(&part);
    }
    Ok((cur, name, created))
  }
}

/// The directories one [`Workspace::create_parents`] made: a chain below `base` (each the
/// previous one's child, as a missing tail is created top down). Dropping it removes them.
pub struct CreatedDirs {
  root: Arc<Root>,
  /// The parent (relative to the root) of the first directory made.
  base: Option<PathBuf>,
  names: Vec<std::ffi::OsString>,
}

impl CreatedDirs {
  fn record(&mut self, parent: &Path, name: &OsStr) {
    if self.base.is_none() {
      self.base = Some(parent.to_path_buf());
    }
    self.names.push(name.to_os_string());
  }

  /// How many directories were made.
  pub fn len(&self) -> usize {
    self.names.len()
  }

  pub fn is_empty(&self) -> bool {
    self.names.is_empty()
  }

  /// The write succeeded: the directories stay.
  pub fn keep(mut self) {
    self.names.clear();
  }
}

impl Drop for CreatedDirs {
  fn drop(&mut self) {
    let Some(base) = self.base.take() else { return };
    // Deepest first; each parent reopened beneath the root (never through a symlink).
    // `AT_REMOVEDIR` only removes an empty directory: one another process filled stays.
    for k in (0..self.names.len()).rev() {
      let mut parent = base.clone();
      for n in &self.names[..k] {
        parent.push(n);
      }
      let Ok(dir) = open_beneath(&self.root, &parent, DIR_HANDLE | libc::O_DIRECTORY | libc::O_CLOEXEC, 0) else {
        return;
      };
      let Ok(c) = CString::new(self.names[k].as_bytes()) else { return };
      // SAFETY: valid directory descriptor and NUL-terminated name.
      if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
        return;
      }
    }
  }
}

fn map_open_error(err: io::Error, candidate: &str, syscall: &str, abs: &Path) -> ToolError {
  match err.raw_os_error() {
    // EXDEV: openat2 refused to leave the root; ELOOP: the O_NOFOLLOW walk met a symlink that
    // was not there when the path was checked.
    Some(libc::EXDEV) | Some(libc::ELOOP) => escape_error(candidate),
    _ => ToolError::from_io(&err, syscall, abs),
  }
}

fn cstring(s: &OsStr) -> Result<CString, ToolError> {
  CString::new(s.as_bytes()).map_err(|_| ToolError::caveman(Caveman::PathInvalid(PathProblem::Nul)))
}

/// `path.resolve`: make absolute against the process cwd.
pub fn absolutize(p: &Path) -> PathBuf {
  if p.is_absolute() {
    normalize(p)
  } else {
    normalize(
      &std::env::current_dir()
        .unwrap_or_else(|_| PathBuf::from("/"))
        .join(p),
    )
  }
}

/// Lexical normalization of `.` and `..` (as Node's `path.resolve` does).
pub fn normalize(p: &Path) -> PathBuf {
  let mut out = PathBuf::from("/");
  for c in p.components() {
    match c {
      Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
      Component::ParentDir => {
        out.pop();
      }
      Component::Normal(n) => out.push(n),
    }
  }
  out
}

/// realpath of the deepest existing ancestor with the missing tail re-attached (what the
/// reference computes), in one pass: a descriptor of the current real directory steps one
/// component at a time (`openat` + `fstat`, never following a symlink by itself); a symlink's
/// target is read (`readlinkat`) and spliced in front of what is left, an absolute one restarting
/// at `/`, at most [`PATH_MAX_SYMLINKS`] times (then `ELOOP`). The first component that does not
/// exist (or cannot be entered) ends the existing part; the rest is appended as it is, with its
/// `..` applied lexically. The result is only the *check*: every open afterwards goes through
/// [`open_beneath`], which refuses whatever changed in between.
#[cfg(test)]
pub(crate) fn canonicalize_existing_prefix(root: &Root, full: &Path) -> io::Result<PathBuf> {
  Ok(canonicalize_bounded(root, full, usize::MAX)?.expect("unbounded"))
}

/// [`canonicalize_existing_prefix`], giving up (`None`) after `max_steps` components walked.
fn canonicalize_bounded(root: &Root, full: &Path, max_steps: usize) -> io::Result<Option<PathBuf>> {
  // Start at the workspace's own descriptor when the path is lexically inside it (the common
  // case: no walk over the workspace's ancestors), else at `/`.
  let (mut cur, mut real, start) = match full.strip_prefix(&root.path) {
    Ok(rel) => (dup_dir(&root.dir)?, root.path.clone(), rel),
    Err(_) => (open_path(Path::new("/"), DIR_HANDLE | libc::O_DIRECTORY | libc::O_CLOEXEC)?, PathBuf::from("/"), full),
  };
  // Components still to walk, last first (so a symlink's target is pushed in front cheaply).
  let mut pending: Vec<std::ffi::OsString> = component_names(start).into_iter().rev().collect();
  let mut links = 0usize;
  // The bottom `orig_left` entries of `pending` are the candidate's own components; above them
  // sit the expansions of the symlink being followed. realpath fails on a path whose symlink
  // leads nowhere (dangling, or through a file), and the reference then falls back to the
  // ancestor before that symlink: `checkpoint` is the real path there and the candidate's
  // components from the symlink on.
  let mut orig_left = pending.len();
  let mut checkpoint: Option<(PathBuf, Vec<std::ffi::OsString>)> = None;
  let mut steps = 0usize;
  while let Some(name) = pending.pop() {
    steps += 1;
    if steps > max_steps {
      return Ok(None);
    }
    let original = pending.len() < orig_left;
    if original {
      orig_left -= 1;
      checkpoint = None;
    }
    match name.as_bytes() {
      b"" | b"." => continue,
      // Only a symlink's target brings `..` (the candidate was normalized): physical, as
      // realpath's is, so the parent of the real directory.
      b".." => {
        if real.pop() {
          cur = openat(cur.as_raw_fd(), &c_dotdot(), DIR_HANDLE | libc::O_DIRECTORY | libc::O_CLOEXEC, 0)?;
        }
        continue;
      }
      _ => {}
    }
    let c = CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let expanding = pending.len() > orig_left;
    match step(cur.as_raw_fd(), &c) {
      Step::Dir(fd) => {
        cur = fd;
        real.push(&name);
      }
      Step::Link => {
        links += 1;
        if links > PATH_MAX_SYMLINKS {
          return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        if original {
          let mut rest = vec![name.clone()];
          rest.extend(pending[..orig_left].iter().rev().cloned());
          checkpoint = Some((real.clone(), rest));
        }
        let target = match readlinkat(cur.as_raw_fd(), &c) {
          Ok(t) => t,
          // Swapped for something else between the look and the read: look again (each
          // retry counts against the symlink limit, so a flipping name cannot spin forever).
          Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            if original {
              orig_left += 1;
              checkpoint = None;
            }
            pending.push(name);
            continue;
          }
          Err(e) => return Err(e),
        };
        if target.is_absolute() {
          cur = open_path(Path::new("/"), DIR_HANDLE | libc::O_DIRECTORY | libc::O_CLOEXEC)?;
          real = PathBuf::from("/");
        }
        pending.extend(component_names(&target).into_iter().rev());
      }
      // A file (or FIFO, device…): the existing part ends with it; anything after it cannot
      // exist (the open will say ENOTDIR).
      Step::Other if !expanding => {
        real.push(&name);
        break;
      }
      // Missing, or not enterable (EACCES): the existing part ends before it.
      Step::Missing if !original && checkpoint.is_none() => {
        pending.push(name);
        break;
      }
      Step::Missing if original => {
        pending.push(name);
        break;
      }
      // Inside a symlink's expansion: that symlink does not resolve, so it counts as missing.
      Step::Other | Step::Missing => {
        let (at, rest) = checkpoint.take().expect("an expansion has a checkpoint");
        real = at;
        pending = rest.into_iter().rev().collect();
        break;
      }
    }
  }
  for name in pending.into_iter().rev() {
    match name.as_bytes() {
      b"" | b"." => {}
      b".." => {
        real.pop();
      }
      _ => real.push(name),
    }
  }
  Ok(Some(real))
}

/// What one component of the walk is.
enum Step {
  Dir(OwnedFd),
  Link,
  Other,
  Missing,
}

/// Looks at `name` in the directory `dirfd` without following it. Linux: one `O_PATH |
/// O_NOFOLLOW` open (a FIFO or device is never opened for I/O) and `fstat` on it, so what is
/// entered is what was looked at. Elsewhere: `fstatat`, then an `O_NOFOLLOW` open of a directory.
fn step(dirfd: RawFd, name: &CString) -> Step {
  #[cfg(target_os = "linux")]
  {
    match openat(dirfd, name, libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0) {
      Err(_) => Step::Missing,
      Ok(fd) => match fd_kind(&fd) {
        Some(libc::S_IFDIR) => Step::Dir(fd),
        Some(libc::S_IFLNK) => Step::Link,
        Some(_) => Step::Other,
        None => Step::Missing,
      },
    }
  }
  #[cfg(not(target_os = "linux"))]
  {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid dirfd, NUL-terminated name, writable stat buffer.
    if unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
      return Step::Missing;
    }
    match st.st_mode & libc::S_IFMT {
      libc::S_IFLNK => Step::Link,
      libc::S_IFDIR => match openat(dirfd, name, DIR_HANDLE | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0) {
        Ok(fd) => Step::Dir(fd),
        // Swapped for a symlink in between: look again next time round is not possible here;
        // the existing part ends (the open afterwards refuses the symlink).
        Err(_) => Step::Missing,
      },
      _ => Step::Other,
    }
  }
}

fn c_dotdot() -> CString {
  CString::new("..").expect("no NUL")
}

/// The names between slashes, as given (`.`/`..`/empty filtered by the walk).
fn component_names(p: &Path) -> Vec<std::ffi::OsString> {
  p.as_os_str()
    .as_bytes()
    .split(|b| *b == b'/')
    .filter(|s| !s.is_empty())
    .map(|s| OsStr::from_bytes(s).to_os_string())
    .collect()
}

fn readlinkat(dirfd: RawFd, name: &CString) -> io::Result<PathBuf> {
  let mut buf = vec![0u8; PATH_MAX_BYTES + 1];
  // SAFETY: valid dirfd and name; the buffer is writable for its length.
  let n = unsafe { libc::readlinkat(dirfd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
  if n < 0 {
    return Err(io::Error::last_os_error());
  }
  if n as usize >= buf.len() {
    return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
  }
  buf.truncate(n as usize);
  Ok(PathBuf::from(std::ffi::OsString::from_vec(buf)))
}

fn dup_dir(fd: &OwnedFd) -> io::Result<OwnedFd> {
  fd.try_clone()
}

fn open_path(path: &Path, flags: i32) -> io::Result<OwnedFd> {
  let c =
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
  // SAFETY: `c` is a valid NUL-terminated string; the returned fd is owned by the caller.
  let fd = unsafe { libc::open(c.as_ptr(), flags) };
  if fd < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: `fd` was just returned by `open` and is not owned elsewhere.
  Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// How directories on the way are held: `O_PATH` on Linux (no read permission needed); a
/// read-only descriptor elsewhere (macOS has no `O_PATH`: a directory the user cannot read cannot
/// be walked there).
#[cfg(target_os = "linux")]
const DIR_HANDLE: i32 = libc::O_PATH;
#[cfg(not(target_os = "linux"))]
const DIR_HANDLE: i32 = libc::O_RDONLY;

/// Opens `rel` (a canonical path relative to the root) without leaving the root.
fn open_beneath(root: &Root, rel: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
  open_beneath_fd(root.dir.as_raw_fd(), rel, flags, mode)
}

/// Opens `rel` relative to the directory `dirfd` without leaving it (`openat2(RESOLVE_BENEATH)`,
/// or the `O_NOFOLLOW` walk where there is no openat2).
fn open_beneath_fd(dirfd: RawFd, rel: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
  let rel_c = if rel.as_os_str().is_empty() {
    CString::new(".").map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?
  } else {
    CString::new(rel.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?
  };
  match openat2_beneath(dirfd, &rel_c, flags, mode) {
    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
      walk_nofollow(dirfd, rel, flags, mode)
    }
    other => other,
  }
}

#[cfg(all(target_os = "linux", not(knap_portable)))]
#[repr(C)]
struct OpenHow {
  flags: u64,
  mode: u64,
  resolve: u64,
}

#[cfg(all(target_os = "linux", not(knap_portable)))]
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
#[cfg(all(target_os = "linux", not(knap_portable)))]
const RESOLVE_BENEATH: u64 = 0x08;

/// Where there is no openat2 (macOS, other Unixes; or Linux built with `--cfg knap_portable`, which
/// CI uses to test this path), say so: `open_beneath` then walks with `O_NOFOLLOW`. Limit of that
/// walk: it refuses a symlink swapped in at any component, but cannot refuse a hard link or a
/// bind mount inside the workspace that points elsewhere (openat2 cannot either).
#[cfg(any(not(target_os = "linux"), knap_portable))]
fn openat2_resolve(_dirfd: RawFd, _rel: &CString, _flags: i32, _mode: u32, _extra: u64) -> io::Result<OwnedFd> {
  Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

fn openat2_beneath(dirfd: RawFd, rel: &CString, flags: i32, mode: u32) -> io::Result<OwnedFd> {
  openat2_resolve(dirfd, rel, flags, mode, 0)
}

/// Set once the kernel answered `ENOSYS` (before 5.6): openat2 is not tried again, so each open
/// makes one system call walk, not a failed openat2 first.
#[cfg(all(target_os = "linux", not(knap_portable)))]
static NO_OPENAT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | extra)`.
#[cfg(all(target_os = "linux", not(knap_portable)))]
fn openat2_resolve(dirfd: RawFd, rel: &CString, flags: i32, mode: u32, extra: u64) -> io::Result<OwnedFd> {
  use std::sync::atomic::Ordering;
  if NO_OPENAT2.load(Ordering::Relaxed) {
    return Err(io::Error::from_raw_os_error(libc::ENOSYS));
  }
  let how = OpenHow {
    flags: flags as u64,
    mode: if flags & libc::O_CREAT != 0 {
      mode as u64
    } else {
      0
    },
    resolve: RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | extra,
  };
  loop {
    // SAFETY: arguments follow openat2(2); `how` lives across the call.
    let fd = unsafe {
      libc::syscall(
        libc::SYS_openat2,
        dirfd,
        rel.as_ptr(),
        &how as *const OpenHow,
        std::mem::size_of::<OpenHow>(),
      )
    };
    if fd >= 0 {
      // SAFETY: the kernel returned a fresh descriptor.
      return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EAGAIN) || err.raw_os_error() == Some(libc::EINTR) {
      continue;
    }
    if err.raw_os_error() == Some(libc::ENOSYS) {
      NO_OPENAT2.store(true, Ordering::Relaxed);
    }
    return Err(err);
  }
}

/// Fallback for kernels before 5.6: walk the canonical relative path one component at a time with
/// `O_NOFOLLOW`, so a symlink swapped in after the check is refused (`ELOOP`).
fn walk_nofollow(dirfd: RawFd, rel: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
  let parts: Vec<&OsStr> = rel
    .components()
    .filter_map(|c| match c {
      Component::Normal(n) => Some(n),
      _ => None,
    })
    .collect();
  if parts.is_empty() {
    let dot = CString::new(".").map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    return openat(dirfd, &dot, flags, mode);
  }
  let mut current: Option<OwnedFd> = None;
  for (i, part) in parts.iter().enumerate() {
    let c = CString::new(part.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let base = current.as_ref().map(|f| f.as_raw_fd()).unwrap_or(dirfd);
    let last = i + 1 == parts.len();
    // Directories on the way are opened without O_DIRECTORY so a symlink is seen as one (with
    // O_DIRECTORY the kernel would report ENOTDIR and hide that the path was tampered with).
    let f = if last {
      flags | libc::O_NOFOLLOW
    } else {
      DIR_HANDLE | libc::O_NOFOLLOW | libc::O_CLOEXEC
    };
    let next = match openat(base, &c, f, mode) {
      // O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR: say it was a symlink.
      Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) && is_symlink_at(base, &c) => {
        return Err(io::Error::from_raw_os_error(libc::ELOOP))
      }
      other => other?,
    };
    // An O_PATH|O_NOFOLLOW open of a symlink succeeds on the link itself; refuse it.
    let kind = fd_kind(&next);
    if kind == Some(libc::S_IFLNK) {
      return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    if !last && kind != Some(libc::S_IFDIR) {
      return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    current = Some(next);
  }
  current.ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
}

/// The `S_IFMT` bits of an open descriptor.
fn fd_kind(fd: &OwnedFd) -> Option<libc::mode_t> {
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: valid descriptor, writable stat buffer.
  (unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0).then_some(st.st_mode & libc::S_IFMT)
}

fn is_symlink_at(dirfd: RawFd, name: &CString) -> bool {
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: valid dirfd, NUL-terminated name, writable stat buffer.
  let rc = unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
  rc == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFLNK
}

pub(crate) fn openat(dirfd: RawFd, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
  loop {
    // SAFETY: valid dirfd and NUL-terminated name; fd ownership passes to the caller.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags, mode as libc::c_uint) };
    if fd >= 0 {
      // SAFETY: fresh descriptor from openat.
      return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EINTR) {
      return Err(err);
    }
  }
}

/// Writes `data` to a temporary sibling and renames it over `name`, so a crash or a full disk
/// never leaves a half-written file. An existing file keeps its permission bits.
pub fn replace_atomically(
  dir: &OwnedFd,
  name: &CString,
  data: &[u8],
  resolved: &Resolved,
  cancel: &CancellationToken,
) -> Result<(), ToolError> {
  let io_err = |e: std::io::Error, syscall: &str| ToolError::from_io(&e, syscall, &resolved.abs);
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: valid dirfd, NUL-terminated name, writable stat buffer.
  let exists =
    unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0;
  if exists && (st.st_mode & libc::S_IFMT) == libc::S_IFDIR {
    return Err(io_err(std::io::Error::from_raw_os_error(libc::EISDIR), "open"));
  }
  let is_regular = exists && (st.st_mode & libc::S_IFMT) == libc::S_IFREG;
  // A regular file keeps its permission bits; anything else (a dangling symlink, which this
  // replaces instead of following out of the workspace) gets a new file's default mode.
  let mode = if is_regular { st.st_mode & 0o7777 } else { 0o666 };
  let tmp = CString::new(format!(
    ".{}.knap-{}",
    name.to_string_lossy(),
    uuid::Uuid::new_v4().simple()
  ))
  .map_err(|_| ToolError::caveman(Caveman::PathInvalid(PathProblem::Nul)))?;
  let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW;
  let fd = openat(dir.as_raw_fd(), &tmp, flags, mode).map_err(|e| io_err(e, "open"))?;
  let cleanup = |e: ToolError| {
    // SAFETY: removes the temporary we created.
    unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
    e
  };
  if is_regular {
    // SAFETY: valid fd; restore the original permission bits despite the umask.
    unsafe { libc::fchmod(fd.as_raw_fd(), mode) };
  }
  let file = File::from(fd);
  write_cancellable(&file, data, cancel, &resolved.abs).map_err(cleanup)?;
  drop(file);
  // SAFETY: both names are relative to the same valid directory descriptor.
  let rc = unsafe { libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), name.as_ptr()) };
  if rc != 0 {
    return Err(cleanup(io_err(std::io::Error::last_os_error(), "rename")));
  }
  Ok(())
}

/// Writes `data` in [`WRITE_CHUNK_BYTES`] pieces, stopping with `ABORT_ERR` once `cancel` fires
/// (a timed-out or aborted call does not keep a thread writing for nobody).
pub fn write_cancellable(
  mut file: &File,
  data: &[u8],
  cancel: &CancellationToken,
  abs: &Path,
) -> Result<(), ToolError> {
  for piece in data.chunks(WRITE_CHUNK_BYTES) {
    if cancel.is_cancelled() {
      return Err(crate::tools::aborted());
    }
    file.write_all(piece).map_err(|e| ToolError::from_io(&e, "write", abs))?;
  }
  Ok(())
}

/// Reads a whole file in [`crate::limits::READ_CHUNK_BYTES`] pieces, stopping with
/// `ABORT_ERR` once `cancel` fires.
pub fn read_cancellable(
  mut file: &File,
  cancel: &CancellationToken,
  abs: &Path,
) -> Result<Vec<u8>, ToolError> {
  use std::io::Read;
  let mut out = Vec::new();
  let mut buf = vec![0u8; crate::limits::READ_CHUNK_BYTES];
  loop {
    if cancel.is_cancelled() {
      return Err(crate::tools::aborted());
    }
    match file.read(&mut buf) {
      Ok(0) => return Ok(out),
      Ok(n) => out.extend_from_slice(&buf[..n]),
      Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
      Err(e) => return Err(ToolError::from_io(&e, "read", abs)),
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::os::unix::fs::symlink;

  fn setup() -> (tempfile::TempDir, Workspace, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("nested")).unwrap();
    std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
    std::fs::write(ws.join("a.txt"), "a").unwrap();
    symlink(dir.path(), ws.join("nested/escape")).unwrap();
    symlink(ws.join("a.txt"), ws.join("inside-link")).unwrap();
    let w = Workspace::new(&ws);
    (dir, w, ws)
  }

  #[test]
  fn refuses_dotdot_absolute_and_outward_symlinks() {
    let (dir, w, _) = setup();
    for c in [
      "../secret.txt",
      "nested/escape/secret.txt",
      "nested/../../secret.txt",
    ] {
      let e = w.resolve(c).unwrap_err();
      assert_eq!(
        e.message,
        format!("caveman-code: path escapes the workspace: {c}")
      );
    }
    let abs = dir.path().join("secret.txt");
    assert!(w.resolve(abs.to_str().unwrap()).is_err());
  }

  #[test]
  fn allows_inside_paths_absolute_and_inward_symlinks() {
    let (_dir, w, ws) = setup();
    assert_eq!(w.resolve("a.txt").unwrap().rel, PathBuf::from("a.txt"));
    assert_eq!(w.resolve("nested/../a.txt").unwrap().rel, PathBuf::from("a.txt"));
    let abs = ws.canonicalize().unwrap().join("a.txt");
    assert_eq!(
      w.resolve(abs.to_str().unwrap()).unwrap().rel,
      PathBuf::from("a.txt")
    );
    assert_eq!(w.resolve("inside-link").unwrap().rel, PathBuf::from("a.txt"));
    assert_eq!(
      w.resolve("new/dir/file.txt").unwrap().rel,
      PathBuf::from("new/dir/file.txt")
    );
    assert_eq!(w.resolve(".").unwrap().rel, PathBuf::new());
  }

  #[test]
  fn swapped_directory_cannot_escape_at_open_time() {
    let (dir, w, ws) = setup();
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/secret.txt"), "inside").unwrap();
    let resolved = w.resolve("sub/secret.txt").unwrap();
    // The race: after the check, `sub` becomes a symlink to the directory holding secret.txt.
    std::fs::remove_dir_all(ws.join("sub")).unwrap();
    symlink(dir.path(), ws.join("sub")).unwrap();
    let err = w.open_read("sub/secret.txt", &resolved, "open").unwrap_err();
    assert_eq!(
      err.message,
      "caveman-code: path escapes the workspace: sub/secret.txt"
    );
    // The same refusal from the fallback walk.
    let root = w.root().unwrap();
    let e = walk_nofollow(root.dir.as_raw_fd(), &resolved.rel, libc::O_RDONLY, 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
  }

  #[test]
  fn missing_workspace_is_enoent_at_first_use() {
    let w = Workspace::new("/definitely/not/here/knap");
    let e = w.resolve("a").unwrap_err();
    assert_eq!(e.code, "ENOENT");
    // The reference's line first, then what to do.
    assert_eq!(
      e.message,
      "ENOENT: no such file or directory, realpath '/definitely/not/here/knap'\nhint: the workspace \"/definitely/not/here/knap\" does not exist: create it (mkdir -p, or fs.mkdirSync(dir, { recursive: true })) or pass an existing directory"
    );
  }
}

#[cfg(test)]
mod hardening_tests {
  //! The one path validator, the one-pass resolution (against the reference's
  //! realpath-of-the-deepest-existing-ancestor as an oracle), descriptor-based stat, directory
  //! rollback and cancellation.
  use super::*;
  use std::os::unix::fs::symlink;

  fn ws() -> (tempfile::TempDir, Workspace, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let w = Workspace::new(&ws);
    let canon = ws.canonicalize().unwrap();
    (dir, w, canon)
  }

  /// The reference's algorithm, kept as the oracle: realpath of the deepest existing ancestor
  /// (popping one component per failure), the missing tail re-attached.
  fn oracle(full: &Path) -> PathBuf {
    let mut existing = full.to_path_buf();
    let mut tail = Vec::new();
    loop {
      if let Ok(canon) = std::fs::canonicalize(&existing) {
        let mut out = canon;
        for part in tail.iter().rev() {
          out.push(part);
        }
        return out;
      }
      match existing.file_name() {
        Some(name) => {
          tail.push(name.to_os_string());
          existing.pop();
        }
        None => return full.to_path_buf(),
      }
    }
  }

  fn code_and_lines(e: &ToolError) -> (String, Vec<String>) {
    (e.code.clone(), e.message.lines().map(str::to_string).collect())
  }

  #[test]
  fn check_path_refuses_nul_length_and_depth_with_one_code_and_a_hint() {
    let (_d, w, _) = ws();
    let (code, lines) = code_and_lines(&w.resolve("a\0b").unwrap_err());
    assert_eq!(code, "cave_path_invalid");
    assert_eq!(lines[0], "caveman-code: path contains a NUL byte");
    assert!(lines[1].starts_with("hint: remove the NUL"), "{lines:?}");

    let long = "x".repeat(PATH_MAX_BYTES + 1);
    let (code, lines) = code_and_lines(&w.resolve(&long).unwrap_err());
    assert_eq!(code, "cave_path_invalid");
    assert_eq!(lines[0], "caveman-code: path is too long: 4097 bytes (at most 4096)");
    assert!(lines[1].starts_with("hint: pass a shorter path"), "{lines:?}");

    let deep = vec!["d"; PATH_MAX_COMPONENTS + 1].join("/");
    let (code, lines) = code_and_lines(&w.resolve(&deep).unwrap_err());
    assert_eq!(code, "cave_path_invalid");
    assert_eq!(lines[0], "caveman-code: path has too many components: 1025 (at most 1024)");
    assert!(lines[1].starts_with("hint: pass a path with fewer directories"), "{lines:?}");

    // The lexical check of a non-local backend uses the same validator.
    assert_eq!(w.resolve_lexical("a\0").unwrap_err().code, "cave_path_invalid");
    assert_eq!(w.resolve_lexical(&deep).unwrap_err().code, "cave_path_invalid");
  }

  #[test]
  fn check_path_accepts_exactly_the_limits() {
    let (_d, w, root) = ws();
    // 4096 bytes: accepted by the validator (the kernel may still say ENAMETOOLONG for a name
    // over 255 bytes; that is an errno error, not cave_path_invalid).
    let at_len = format!("{}/{}", "a".repeat(200), "b".repeat(PATH_MAX_BYTES - 201));
    assert_eq!(at_len.len(), PATH_MAX_BYTES);
    assert!(w.resolve(&at_len).is_ok());
    let at_depth = vec!["d"; PATH_MAX_COMPONENTS].join("/");
    assert_eq!(w.resolve(&at_depth).unwrap().abs, root.join(&at_depth));
    // `.` and empty parts are not components.
    let dotted = format!("{}/./", vec!["d"; PATH_MAX_COMPONENTS].join("//"));
    assert!(w.resolve(&dotted).is_ok());
    assert!(check_path(&format!("{at_depth}/..")).is_err(), "`..` counts");
  }

  #[test]
  fn one_pass_resolution_agrees_with_the_reference_on_symlinks() {
    let (dir, w, root) = ws();
    let outside = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("a/b/c")).unwrap();
    std::fs::write(root.join("a/b/c/f.txt"), "f").unwrap();
    std::fs::write(outside.join("secret"), "s").unwrap();
    // relative, absolute-inside, `..` inside the target, chains, out and back in, to a file,
    // outside, dangling.
    symlink("b/c", root.join("a/rel")).unwrap();
    symlink(root.join("a/b"), root.join("abs")).unwrap();
    symlink("../a/b/../b/c", root.join("a/up")).unwrap();
    symlink("rel", root.join("a/chain")).unwrap();
    symlink("../ws/a", root.join("outandin")).unwrap();
    symlink(outside.join("ws/a/b/c/f.txt"), root.join("absfile")).unwrap();
    symlink(&outside, root.join("out")).unwrap();
    symlink("nowhere/x", root.join("dangling")).unwrap();
    symlink("/", root.join("slash")).unwrap();
    let cases = [
      "a/rel/f.txt",
      "abs/c/f.txt",
      "a/up/f.txt",
      "a/chain/f.txt",
      "a/chain/missing/deeper",
      "outandin/b/c",
      "absfile",
      "a/b/c/f.txt/under-a-file",
      "out/secret",
      "out/ws/a/rel",
      "dangling",
      "dangling/more",
      "slash/etc",
      "missing/../a/rel",
      ".",
      "",
    ];
    for c in cases {
      let lexical = normalize(&root.join(c));
      let want = oracle(&lexical);
      let root_arc = w.root().unwrap();
      let got = canonicalize_existing_prefix(&root_arc, &lexical).unwrap();
      assert_eq!(got, want, "{c}");
      // And the containment verdict follows.
      assert_eq!(w.resolve(c).is_ok(), want.starts_with(&root), "{c}");
    }
    // An absolute candidate through an outside symlink that leads back in is inside.
    symlink(&root, outside.join("to-ws")).unwrap();
    let via = outside.join("to-ws/a/rel/f.txt");
    assert_eq!(w.resolve(via.to_str().unwrap()).unwrap().rel, PathBuf::from("a/b/c/f.txt"));
  }

  #[test]
  fn symlink_loops_and_the_forty_link_limit() {
    let (_d, w, root) = ws();
    symlink("loop2", root.join("loop1")).unwrap();
    symlink("loop1", root.join("loop2")).unwrap();
    let e = w.resolve("loop1/x").unwrap_err();
    assert_eq!(e.code, "ELOOP");
    assert!(e.message.starts_with("ELOOP: too many symbolic links encountered, realpath '"), "{}", e.message);
    // A chain of exactly 40 links resolves; 41 is ELOOP (the kernel's MAXSYMLINKS).
    std::fs::write(root.join("end"), "e").unwrap();
    let mut prev = "end".to_string();
    for i in 0..PATH_MAX_SYMLINKS + 1 {
      let name = format!("l{i}");
      symlink(&prev, root.join(&name)).unwrap();
      prev = name;
    }
    assert_eq!(w.resolve(&format!("l{}", PATH_MAX_SYMLINKS - 1)).unwrap().rel, PathBuf::from("end"));
    assert_eq!(w.resolve(&format!("l{}", PATH_MAX_SYMLINKS)).unwrap_err().code, "ELOOP");
  }

  #[test]
  fn names_that_are_not_utf8_are_shown_faithfully_and_addressed_by_what_is_shown() {
    use std::ffi::OsStr;
    use std::io::Read;
    let (_d, w, root) = ws();
    // Latin-1 "café", a lone continuation byte, and a UTF-8 name holding U+EF80 itself.
    let names: [&[u8]; 3] = [b"caf\xe9.txt", b"x\x80y", "lit\u{EF80}.txt".as_bytes()];
    for (i, raw) in names.iter().enumerate() {
      std::fs::write(root.join(OsStr::from_bytes(raw)), format!("content {i}")).unwrap();
    }
    assert_eq!(name_text(names[0]), "caf\u{EFE9}.txt");
    assert_eq!(name_text(names[1]), "x\u{EF80}y");
    assert_eq!(name_text(names[2]), "lit\u{EFEE}\u{EFBE}\u{EF80}.txt", "its own bytes escaped");
    assert_eq!(name_text(b"plain \xc3\xa9"), "plain é");
    for (i, raw) in names.iter().enumerate() {
      let shown = name_text(raw).into_owned();
      let r = w.resolve(&shown).unwrap();
      assert_eq!(r.rel.as_os_str().as_bytes(), *raw);
      let mut text = String::new();
      w.open_read(&shown, &r, "open").unwrap().read_to_string(&mut text).unwrap();
      assert_eq!(text, format!("content {i}"));
    }
    // The lossy form (U+FFFD) names no file.
    assert!(w.open_read("caf\u{FFFD}.txt", &w.resolve("caf\u{FFFD}.txt").unwrap(), "open").is_err());
    // Error messages show paths the same way (so the path in them can be used again).
    let e = w.open_read("gone\u{EFE9}", &w.resolve("gone\u{EFE9}").unwrap(), "open").unwrap_err();
    assert!(e.message.ends_with("/gone\u{EFE9}'"), "{}", e.message);
  }

  #[test]
  fn a_long_walk_is_not_done_inline() {
    let (_d, w, root) = ws();
    let deep = vec!["d"; 100].join("/");
    std::fs::create_dir_all(root.join(&deep)).unwrap();
    std::fs::write(root.join("f"), "f").unwrap();
    assert_eq!(w.resolve_inline("f").unwrap().unwrap().rel, PathBuf::from("f"));
    assert!(w.resolve_inline(&deep).unwrap().is_none(), "100 steps: not on the calling thread");
    // A short path through a symlink to the deep directory: the expansion counts.
    symlink(&deep, root.join("short")).unwrap();
    assert!(w.resolve_inline("short/x").unwrap().is_none());
    // Errors still come inline (the validator runs first).
    assert_eq!(w.resolve_inline("a\0").unwrap_err().code, "cave_path_invalid");
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let r = rt.block_on(w.resolve_async("short/x")).unwrap();
    assert_eq!(r.rel, PathBuf::from(format!("{deep}/x")));
    assert_eq!(r.abs, w.resolve("short/x").unwrap().abs);
  }

  #[test]
  fn a_thousand_deep_directory_resolves_and_opens() {
    let (_d, w, root) = ws();
    let rel = vec!["d"; 1000].join("/");
    std::fs::create_dir_all(root.join(&rel)).unwrap();
    std::fs::write(root.join(&rel).join("f"), "deep").unwrap();
    let c = format!("{rel}/f");
    let r = w.resolve(&c).unwrap();
    assert_eq!(r.rel, PathBuf::from(&c));
    let mut s = String::new();
    std::io::Read::read_to_string(&mut w.open_read(&c, &r, "open").unwrap(), &mut s).unwrap();
    assert_eq!(s, "deep");
    // Missing below it: the tail is re-attached.
    let missing = format!("{rel}/x/y");
    assert_eq!(w.resolve(&missing).unwrap().rel, PathBuf::from(&missing));
  }

  #[test]
  fn stat_is_descriptor_based_never_follows_and_never_opens_a_fifo() {
    let (dir, w, root) = ws();
    std::fs::write(root.join("f"), "12345").unwrap();
    std::fs::create_dir(root.join("d")).unwrap();
    let fifo = CString::new(root.join("p").as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let meta = |c: &str| w.stat(c, &w.resolve(c).unwrap());
    assert_eq!(meta("f").unwrap(), Some(Meta { kind: Kind::File, size: 5 }));
    assert_eq!(meta("d").unwrap().unwrap().kind, Kind::Dir);
    assert_eq!(meta("p").unwrap().unwrap().kind, Kind::Special);
    assert_eq!(meta(".").unwrap().unwrap().kind, Kind::Dir);
    assert_eq!(meta("nope").unwrap(), None);
    assert_eq!(meta("f/under-a-file").unwrap(), None);
    // The race: checked as a file, then swapped for a symlink to an outside file.
    std::fs::write(dir.path().join("secret"), "outside!").unwrap();
    let r = w.resolve("f").unwrap();
    std::fs::remove_file(root.join("f")).unwrap();
    symlink(dir.path().join("secret"), root.join("f")).unwrap();
    assert_eq!(w.stat("f", &r).unwrap_err().code, "cave_workspace_escape");
    // A checked directory swapped for an outward symlink: the parent open refuses it.
    std::fs::write(root.join("d/x"), "in").unwrap();
    let r = w.resolve("d/x").unwrap();
    std::fs::remove_dir_all(root.join("d")).unwrap();
    symlink(dir.path(), root.join("d")).unwrap();
    std::fs::write(dir.path().join("x"), "outside").unwrap();
    assert_eq!(w.stat("d/x", &r).unwrap_err().code, "cave_workspace_escape");
  }

  #[test]
  fn create_parents_makes_the_chain_and_removes_it_unless_kept() {
    let (_d, w, root) = ws();
    std::fs::create_dir(root.join("have")).unwrap();
    let r = w.resolve("have/n1/n2/n3/f.txt").unwrap();
    let (dir, name, created) = w.create_parents("have/n1/n2/n3/f.txt", &r).unwrap();
    assert_eq!(created.len(), 3);
    assert_eq!(name.as_bytes(), b"f.txt");
    assert!(root.join("have/n1/n2/n3").is_dir());
    // The descriptor is the deepest directory.
    assert_eq!(fd_kind(&dir), Some(libc::S_IFDIR));
    drop(created);
    assert!(!root.join("have/n1").exists(), "the chain is gone");
    assert!(root.join("have").is_dir(), "what existed stays");

    // Kept: stays.
    let (_, _, created) = w.create_parents("have/n1/n2/f.txt", &w.resolve("have/n1/n2/f.txt").unwrap()).unwrap();
    created.keep();
    assert!(root.join("have/n1/n2").is_dir());

    // A directory someone else filled meanwhile is not removed (nor its parents).
    let (_, _, created) = w.create_parents("k1/k2/k3/f", &w.resolve("k1/k2/k3/f").unwrap()).unwrap();
    std::fs::write(root.join("k1/k2/other"), "x").unwrap();
    drop(created);
    assert!(!root.join("k1/k2/k3").exists());
    assert!(root.join("k1/k2/other").exists());
  }

  #[test]
  fn create_parents_failing_midway_removes_what_it_made() {
    let (_d, w, root) = ws();
    // The third directory's name is over NAME_MAX: mkdirat fails after two were made.
    let c = format!("m1/m2/{}/f.txt", "n".repeat(300));
    let e = w.create_parents(&c, &w.resolve(&c).unwrap()).err().unwrap();
    assert_eq!(e.code, "ENAMETOOLONG");
    assert!(!root.join("m1").exists(), "no partial chain left");
    // A component that is a file: ENOTDIR, nothing left either.
    std::fs::write(root.join("file"), "x").unwrap();
    let r = Resolved {
      abs: root.join("z1/file/z2/f"),
      rel: PathBuf::from("z1/file/z2/f"),
    };
    std::fs::create_dir(root.join("z1")).unwrap();
    std::fs::write(root.join("z1/file"), "x").unwrap();
    assert_eq!(w.create_parents("z1/file/z2/f", &r).err().unwrap().code, "ENOTDIR");
    assert_eq!(std::fs::read_dir(root.join("z1")).unwrap().count(), 1);
  }

  #[test]
  fn create_parents_refuses_a_symlink_swapped_in_on_the_way() {
    let (dir, w, root) = ws();
    std::fs::create_dir(root.join("s")).unwrap();
    let r = w.resolve("s/new/f").unwrap();
    std::fs::remove_dir(root.join("s")).unwrap();
    symlink(dir.path(), root.join("s")).unwrap();
    let e = w.create_parents("s/new/f", &r).err().unwrap();
    assert_eq!(e.code, "cave_workspace_escape");
    assert!(!dir.path().join("new").exists(), "nothing created outside");
  }

  #[test]
  fn cancelled_writes_and_reads_stop_and_leave_the_file_as_it_was() {
    let (_d, w, root) = ws();
    std::fs::write(root.join("f"), "original").unwrap();
    let r = w.resolve("f").unwrap();
    let (dir, name) = w.open_parent("f", &r).unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let e = replace_atomically(&dir, &name, &vec![b'x'; 3 * WRITE_CHUNK_BYTES], &r, &cancel).unwrap_err();
    assert_eq!(e.code, "ABORT_ERR");
    assert_eq!(std::fs::read_to_string(root.join("f")).unwrap(), "original");
    let names: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("f")], "no temporary left");
    let file = w.open_read("f", &r, "open").unwrap();
    assert_eq!(read_cancellable(&file, &cancel, &r.abs).unwrap_err().code, "ABORT_ERR");
    let file = w.open_read("f", &r, "open").unwrap();
    assert_eq!(read_cancellable(&file, &CancellationToken::new(), &r.abs).unwrap(), b"original");
  }
}

#[cfg(test)]
mod keeping_tests {
  use super::*;

  #[test]
  fn knap_grep_keep_0_turns_keeping_off() {
    assert!(keeping_enabled(None));
    assert!(keeping_enabled(Some(OsStr::new("1"))));
    assert!(!keeping_enabled(Some(OsStr::new("0"))));
  }
}
