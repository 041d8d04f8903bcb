//! The workspace boundary. Exactly one implementation of "open this path inside the workspace".
//!
//! Two layers. First the reference's check: a candidate is resolved against the canonical
//! workspace, its deepest existing ancestor is canonicalized (every symlink on the existing part
//! followed) and the result must stay inside, else `caveman-code: path escapes the workspace: <p>`.
//! Then, unlike the reference (whose realpath-then-open is racy), the file is opened relative to
//! a descriptor of the workspace with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: if a
//! directory is swapped for an outward symlink between the check and the open, the kernel refuses
//! to leave the workspace. Kernels without `openat2` get an `O_NOFOLLOW` walk, component by
//! component, over the canonical (symlink-free) relative path.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Caveman, ToolError};

/// The canonical root and a descriptor of it.
pub struct Root {
  pub path: PathBuf,
  dir: OwnedFd,
}

impl Root {
  /// Opens `rel` (relative to the root) for reading without ever leaving the root
  /// (`openat2(RESOLVE_BENEATH)`, or the `O_NOFOLLOW` walk), following no final symlink
  /// (`O_NOFOLLOW`) and never waiting (`O_NONBLOCK`: a FIFO swapped in opens at once). `None` for
  /// anything but a regular file (checked with `fstat` on the descriptor, not on the path).
  pub fn open_regular(&self, rel: &Path) -> io::Result<Option<File>> {
    let fd = open_beneath(
      self,
      rel,
      libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC,
      0,
    )?;
    Ok((fd_kind(&fd) == Some(libc::S_IFREG)).then(|| File::from(fd)))
  }
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

pub fn escape_error(candidate: &str) -> ToolError {
  ToolError::caveman(Caveman::WorkspaceEscape(candidate.to_string()))
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
    let path = std::fs::canonicalize(&absolute).map_err(|e| ToolError::from_io(&e, "realpath", &absolute))?;
    let dir = open_path(&path, DIR_HANDLE | libc::O_DIRECTORY | libc::O_CLOEXEC)
      .map_err(|e| ToolError::from_io(&e, "open", &path))?;
    let root = Arc::new(Root { path, dir });
    *slot = Some(root.clone());
    Ok(root)
  }

  /// The reference's containment check (`resolvePath`).
  pub fn resolve(&self, candidate: &str) -> Result<Resolved, ToolError> {
    let root = self.root()?;
    let joined = if Path::new(candidate).is_absolute() {
      PathBuf::from(candidate)
    } else {
      root.path.join(candidate)
    };
    let full = canonicalize_existing_prefix(&normalize(&joined));
    match full.strip_prefix(&root.path) {
      Ok(rel) => Ok(Resolved {
        rel: rel.to_path_buf(),
        abs: full.clone(),
      }),
      Err(_) => Err(escape_error(candidate)),
    }
  }

  /// `path.resolve(workspace)`: the root the tools use on a non-local backend. Lexical: the
  /// backend is never asked.
  pub fn lexical_root(&self) -> PathBuf {
    absolutize(&self.given)
  }

  /// The containment check on a non-local backend: a lexical resolve against
  /// [`Self::lexical_root`] and the same escape test and message as [`Self::resolve`].
  pub fn resolve_lexical(&self, candidate: &str) -> Result<PathBuf, ToolError> {
    let root = self.lexical_root();
    let full = normalize(&root.join(candidate));
    if full.starts_with(&root) {
      Ok(full)
    } else {
      Err(escape_error(candidate))
    }
  }

  /// Opens an existing path for reading (files and directories) inside the workspace.
  /// `O_NONBLOCK` keeps the open of a FIFO from waiting for a writer (the caller then refuses
  /// it as not a regular file); it changes nothing for regular files.
  pub fn open_read(&self, candidate: &str, resolved: &Resolved, syscall: &str) -> Result<File, ToolError> {
    let root = self.root()?;
    let fd = open_beneath(
      &root,
      &resolved.rel,
      libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
      0,
    )
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

fn map_open_error(err: io::Error, candidate: &str, syscall: &str, abs: &Path) -> ToolError {
  match err.raw_os_error() {
    // EXDEV: openat2 refused to leave the root; ELOOP: the O_NOFOLLOW walk met a symlink that
    // was not there when the path was checked.
    Some(libc::EXDEV) | Some(libc::ELOOP) => escape_error(candidate),
    _ => ToolError::from_io(&err, syscall, abs),
  }
}

fn cstring(s: &OsStr) -> Result<CString, ToolError> {
  CString::new(s.as_bytes()).map_err(|_| ToolError::caveman(Caveman::PathInvalid))
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

/// The deepest existing ancestor goes through realpath; the missing tail is re-attached.
fn canonicalize_existing_prefix(full: &Path) -> PathBuf {
  let mut existing = full.to_path_buf();
  let mut tail: Vec<std::ffi::OsString> = Vec::new();
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
  let rel_c = if rel.as_os_str().is_empty() {
    CString::new(".").map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?
  } else {
    CString::new(rel.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?
  };
  match openat2_beneath(root.dir.as_raw_fd(), &rel_c, flags, mode) {
    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
      walk_nofollow(root.dir.as_raw_fd(), rel, flags, mode)
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
#[cfg(all(target_os = "linux", not(knap_portable)))]
const RESOLVE_BENEATH: u64 = 0x08;

/// Where there is no openat2 (macOS, other Unixes; or Linux built with `--cfg knap_portable`, which
/// CI uses to test this path), say so: `open_beneath` then walks with `O_NOFOLLOW`. Limit of that
/// walk: it refuses a symlink swapped in at any component, but cannot refuse a hard link or a
/// bind mount inside the workspace that points elsewhere (openat2 cannot either).
#[cfg(any(not(target_os = "linux"), knap_portable))]
fn openat2_beneath(_dirfd: RawFd, _rel: &CString, _flags: i32, _mode: u32) -> io::Result<OwnedFd> {
  Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

#[cfg(all(target_os = "linux", not(knap_portable)))]
fn openat2_beneath(dirfd: RawFd, rel: &CString, flags: i32, mode: u32) -> io::Result<OwnedFd> {
  let how = OpenHow {
    flags: flags as u64,
    mode: if flags & libc::O_CREAT != 0 {
      mode as u64
    } else {
      0
    },
    resolve: RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
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

pub(crate) fn openat(dirfd: RawFd, name: &CString, flags: i32, mode: u32) -> io::Result<OwnedFd> {
  // SAFETY: valid dirfd and NUL-terminated name; fd ownership passes to the caller.
  let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags, mode as libc::c_uint) };
  if fd < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: fresh descriptor from openat.
  Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Writes `data` to a temporary sibling and renames it over `name`, so a crash or a full disk
/// never leaves a half-written file. An existing file keeps its permission bits.
pub fn replace_atomically(
  dir: &OwnedFd,
  name: &CString,
  data: &[u8],
  resolved: &Resolved,
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
  .map_err(|_| ToolError::caveman(Caveman::PathInvalid))?;
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
  let mut file = File::from(fd);
  file.write_all(data).map_err(|e| cleanup(io_err(e, "write")))?;
  drop(file);
  // SAFETY: both names are relative to the same valid directory descriptor.
  let rc = unsafe { libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), name.as_ptr()) };
  if rc != 0 {
    return Err(cleanup(io_err(std::io::Error::last_os_error(), "rename")));
  }
  Ok(())
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
  }
}
