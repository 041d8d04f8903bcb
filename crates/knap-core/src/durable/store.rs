//! The store interface (`load`, `append`, `acquire`, `close`, `list`) and the embedded default,
//! the disk store: one directory per run, `journal.jsonl` appended and `fdatasync`ed before an
//! append resolves, 0700/0600 permissions, a `lock.d` directory naming the owner pid with
//! takeover of owners proven dead, and a torn last line (a crash mid-write) cut off on load once
//! the lines before it validate. Nothing inside the root is reached through a symlink: every
//! name is opened relative to its directory's descriptor with `O_NOFOLLOW`.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::canonical::sha256_hex;
use super::{valid_run_id, DurableError};
use crate::exec::BoxFuture;
use crate::limits::{
  DURABLE_LIST_FIRST_LINE_BYTES, DURABLE_LOCK_OWNER_MAX_BYTES, DURABLE_LOCK_SETTLE, DURABLE_MAX_EVENT_BYTES,
  DURABLE_MAX_JOURNAL_BYTES,
};
use crate::workspace::openat;

pub trait DurableStore: Send + Sync {
  /// The journal's lines in append order; `[]` when there is none.
  fn load(&self, run_id: &str) -> BoxFuture<Result<Vec<String>, DurableError>>;
  /// Appends newline-terminated lines; durable when the future resolves.
  fn append(&self, run_id: &str, data: String) -> BoxFuture<Result<(), DurableError>>;
  /// Takes the exclusive per-run lock, or fails with `cave_durable_run_locked`.
  fn acquire(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>>;
  /// Gives the lock back.
  fn release(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>>;
  /// Releases open handles; idempotent.
  fn close(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>>;
  /// Every run id with a journal, when the store can list.
  fn list(&self) -> Option<BoxFuture<Result<Vec<String>, DurableError>>>;
}

pub fn locked_error(run_id: &str) -> DurableError {
  DurableError::coded(
    "cave_durable_run_locked",
    format!("run \"{run_id}\" is held by another live process"),
  )
}

fn io_error(code: &str, what: &str, e: &std::io::Error) -> DurableError {
  DurableError::coded(code, format!("{what}: {e}"))
}

pub struct DiskStore {
  root: PathBuf,
  files: Mutex<HashMap<String, Arc<Mutex<File>>>>,
}

static REAP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The locks this process holds, by run directory (device, inode): the `owner.json` of each,
/// kept open with an exclusive `flock` for as long as the lock is held. The kernel drops the
/// `flock` when the process dies, which is how a contender proves a knap owner dead (no pid
/// lookups, so pid reuse and pid namespaces cannot fool it).
static HELD: Mutex<Option<HashMap<(u64, u64), File>>> = Mutex::new(None);

fn held_key(dir: &OwnedFd) -> Option<(u64, u64)> {
  stat_fd(dir.as_raw_fd()).map(|st| (st.st_dev as u64, st.st_ino as u64))
}

fn holds(dir: &OwnedFd) -> bool {
  let Some(key) = held_key(dir) else { return false };
  HELD
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .as_ref()
    .is_some_and(|m| m.contains_key(&key))
}

/// `owner.json` of a knap owner: the reference's `pid`, and `flock: true` saying the owner holds
/// an `flock` on this file while it lives.
fn owner_json() -> String {
  format!("{{\"pid\":{},\"flock\":true}}", std::process::id())
}

impl DiskStore {
  pub fn new(root: impl Into<PathBuf>) -> Self {
    Self {
      root: root.into(),
      files: Mutex::default(),
    }
  }

  pub fn root(&self) -> &Path {
    &self.root
  }

  fn run_dir_name(run_id: &str) -> String {
    format!("{run_id}-{}", &sha256_hex(run_id.as_bytes())[..10])
  }

  /// `<root>/<runId>-<first 10 hex of sha256(runId)>`.
  pub fn run_dir(&self, run_id: &str) -> PathBuf {
    self.root.join(Self::run_dir_name(run_id))
  }

  /// The run's directory, opened without following a symlink in its place (the root itself is
  /// the caller's path and is followed). `None` when it does not exist and `create` is false.
  fn open_run_dir(&self, run_id: &str, create: bool) -> Result<Option<OwnedFd>, DurableError> {
    if create {
      fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&self.root)
        .map_err(|e| io_error("cave_durable_store_failed", "mkdir", &e))?;
    }
    let root = match open_path(&self.root, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) {
      Ok(fd) => fd,
      Err(e) if !create && e.kind() == io::ErrorKind::NotFound => return Ok(None),
      Err(e) => return Err(io_error("cave_durable_store_failed", "open store root", &e)),
    };
    let name = cname(&Self::run_dir_name(run_id));
    if create {
      // SAFETY: valid dirfd and NUL-terminated name.
      if unsafe { libc::mkdirat(root.as_raw_fd(), name.as_ptr(), 0o700) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
          return Err(io_error("cave_durable_store_failed", "mkdir", &e));
        }
      }
    }
    match open_dir_at(root.as_raw_fd(), &name) {
      Ok(fd) => Ok(Some(fd)),
      Err(e) if !create && e.kind() == io::ErrorKind::NotFound => Ok(None),
      Err(e) => Err(not_followed(root.as_raw_fd(), &name, "run directory", e)),
    }
  }

  /// The journal's lines. Anything after the last newline is cut (under this process's lock
  /// only, so a reader never truncates a live writer's append), and only when it is provably a
  /// torn append: every line before it validates and it is a JSON object cut short. Anything else
  /// is `cave_durable_journal_corrupt` and the file is left byte for byte as it was.
  pub fn load_sync(&self, run_id: &str) -> Result<Vec<String>, DurableError> {
    super::check_run_id(run_id)?;
    let Some(dir) = self.open_run_dir(run_id, false)? else {
      return Ok(Vec::new());
    };
    let file = match open_journal(&dir, libc::O_RDONLY) {
      Ok(f) => f,
      Err(e) if e.code == "ENOENT" => return Ok(Vec::new()),
      Err(e) => return Err(e),
    };
    let len = file
      .metadata()
      .map_err(|e| io_error("cave_durable_store_failed", "stat", &e))?
      .len();
    if len as usize > DURABLE_MAX_JOURNAL_BYTES {
      return Err(journal_limit(false));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file
      .take(DURABLE_MAX_JOURNAL_BYTES as u64 + 1)
      .read_to_end(&mut bytes)
      .map_err(|e| io_error("cave_durable_store_failed", "read", &e))?;
    if bytes.len() > DURABLE_MAX_JOURNAL_BYTES {
      return Err(journal_limit(false));
    }
    if let Some(keep) = torn_tail(&bytes)? {
      bytes.truncate(keep);
      if holds(&dir) {
        cut_journal(&dir, keep as u64)?;
      }
    }
    journal_text_lines(bytes)
  }

  fn file_for(&self, run_id: &str) -> Result<Arc<Mutex<File>>, DurableError> {
    let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = files.get(run_id) {
      return Ok(f.clone());
    }
    let dir = self
      .open_run_dir(run_id, true)?
      .ok_or_else(|| DurableError::coded("cave_durable_store_failed", "run directory vanished"))?;
    let file = open_journal(&dir, libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT)?;
    // A torn tail left by a crash is cut (or the append refused) before the first append, so
    // a new line is never glued to half of an old one, even by a caller that never loaded.
    let mut probe = Vec::new();
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > 0 {
      let reader = open_journal(&dir, libc::O_RDONLY)?;
      let last = read_last_byte(&reader, size);
      if last != Some(b'\n') {
        reader
          .take(DURABLE_MAX_JOURNAL_BYTES as u64 + 1)
          .read_to_end(&mut probe)
          .map_err(|e| io_error("cave_durable_store_failed", "read", &e))?;
        if let Some(keep) = torn_tail(&probe)? {
          cut_journal(&dir, keep as u64)?;
        }
      }
    }
    let f = Arc::new(Mutex::new(file));
    files.insert(run_id.to_string(), f.clone());
    Ok(f)
  }

  pub fn append_sync(&self, run_id: &str, data: &str) -> Result<(), DurableError> {
    super::check_run_id(run_id)?;
    let file = self.file_for(run_id)?;
    let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    if size as usize + data.len() > DURABLE_MAX_JOURNAL_BYTES {
      return Err(journal_limit(true));
    }
    f.write_all(data.as_bytes())
      .map_err(|e| io_error("cave_durable_store_failed", "append", &e))?;
    f.sync_data()
      .map_err(|e| io_error("cave_durable_store_failed", "fdatasync", &e))
  }

  /// Takes the run's lock: `lock.d/owner.json` naming this pid. Of several contenders, exactly
  /// one wins, stale locks of dead owners included: every knap contender checks and changes
  /// `lock.d` only while holding an exclusive `flock` on `lock.mutex` (released by the kernel if
  /// the holder dies, so it can never go stale itself), and a new `lock.d` appears complete, by
  /// renaming a directory that already holds `owner.json` into place. The owner keeps an `flock`
  /// on its `owner.json` while it holds the lock (see [`lock_state`] for how owners are judged).
  pub fn acquire_sync(&self, run_id: &str) -> Result<(), DurableError> {
    super::check_run_id(run_id)?;
    let dir = self
      .open_run_dir(run_id, true)?
      .ok_or_else(|| DurableError::coded("cave_durable_store_failed", "run directory vanished"))?;
    let _mutex = LockMutex::take(&dir)?;
    remove_leftover_temp_dirs(&dir);
    match lock_state(&dir) {
      LockState::Free => {}
      LockState::Alive => return Err(locked_error(run_id)),
      LockState::Stale => move_aside_and_remove(&dir, "lock.reaped").map_err(|_| locked_error(run_id))?,
    }
    let n = REAP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = cname(&format!("lock.tmp-{}-{n}", std::process::id()));
    let staged = stage_owner(&dir, &tmp);
    let owner = match staged {
      Ok(f) => f,
      Err(e) => {
        remove_tree_at(dir.as_raw_fd(), &tmp, 0);
        return Err(io_error("cave_durable_store_failed", "write lock owner", &e));
      }
    };
    let lock = cname("lock.d");
    // SAFETY: both names are relative to the same valid directory descriptor.
    if unsafe { libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), lock.as_ptr()) } != 0 {
      let e = io::Error::last_os_error();
      remove_tree_at(dir.as_raw_fd(), &tmp, 0);
      // Someone outside the mutex (another implementation) created lock.d meanwhile.
      return if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST)) {
        Err(locked_error(run_id))
      } else {
        Err(io_error("cave_durable_store_failed", "install lock", &e))
      };
    }
    if let Some(key) = held_key(&dir) {
      HELD
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, owner);
    }
    Ok(())
  }

  /// Gives the lock back if this process owns it (moved aside atomically, then deleted).
  pub fn release_sync(&self, run_id: &str) -> Result<(), DurableError> {
    super::check_run_id(run_id)?;
    let Some(dir) = self.open_run_dir(run_id, false)? else {
      return Ok(());
    };
    let me = Some(std::process::id() as i64);
    if read_owner(&dir).and_then(|o| o.pid) != me {
      return Ok(());
    }
    let _mutex = LockMutex::take(&dir)?;
    if read_owner(&dir).and_then(|o| o.pid) == me {
      move_aside_and_remove(&dir, "lock.released")
        .map_err(|e| io_error("cave_durable_store_failed", "remove lock", &e))?;
    }
    forget_held(&dir);
    Ok(())
  }

  /// The manual override for a lock knap cannot prove stale (a garbage `owner.json` that keeps
  /// changing, `{"pid":1}`, an owner of another implementation whose pid is still in use):
  /// removes `lock.d` unless a live knap process holds it (its `flock` proves it alive; breaking
  /// that would let two processes drive the run). Returns whether a lock was removed. Call it
  /// only when you know no process is driving the run.
  pub fn break_lock_sync(&self, run_id: &str) -> Result<bool, DurableError> {
    super::check_run_id(run_id)?;
    let Some(dir) = self.open_run_dir(run_id, false)? else {
      return Ok(false);
    };
    let _mutex = LockMutex::take(&dir)?;
    if !exists_at(dir.as_raw_fd(), &cname("lock.d")) {
      return Ok(false);
    }
    if owner_flock_held(&dir) {
      return Err(DurableError::coded(
        "cave_durable_run_locked",
        format!("run \"{run_id}\" is held by a live knap process (its owner.json flock is held); not broken"),
      ));
    }
    move_aside_and_remove(&dir, "lock.broken")
      .map_err(|e| io_error("cave_durable_store_failed", "break lock", &e))?;
    Ok(true)
  }

  pub fn close_sync(&self, run_id: &str) {
    self
      .files
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .remove(run_id);
  }

  pub fn list_sync(&self) -> Result<Vec<String>, DurableError> {
    let entries = match fs::read_dir(&self.root) {
      Ok(e) => e,
      Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
      Err(e) => return Err(io_error("cave_durable_store_failed", "list", &e)),
    };
    let root = open_path(&self.root, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC)
      .map_err(|e| io_error("cave_durable_store_failed", "list", &e))?;
    let mut ids = Vec::new();
    for entry in entries.flatten() {
      let Ok(name) = CString::new(entry.file_name().as_bytes()) else { continue };
      let Ok(dir) = open_dir_at(root.as_raw_fd(), &name) else { continue };
      let Ok(mut f) = open_journal(&dir, libc::O_RDONLY) else { continue };
      let mut buf = vec![0u8; DURABLE_LIST_FIRST_LINE_BYTES];
      let n = f.read(&mut buf).unwrap_or(0);
      let first = buf[..n].split(|b| *b == b'\n').next().unwrap_or_default();
      let id = serde_json::from_slice::<serde_json::Value>(first)
        .ok()
        .filter(|v| v["type"] == "run_started")
        .and_then(|v| v["runId"].as_str().map(str::to_string));
      if let Some(id) = id.filter(|i| valid_run_id(i)) {
        ids.push(id);
      }
    }
    ids.sort();
    Ok(ids)
  }
}

/// `cave_durable_journal_limit`: a journal over 256 MiB, or an append that would take it there.
pub(crate) fn journal_limit(append: bool) -> DurableError {
  let what = if append { "journal would exceed 256 MiB" } else { "journal exceeds 256 MiB" };
  DurableError::coded("cave_durable_journal_limit", what)
}

/// A journal's bytes (whole lines) as its lines: what every store's `load` returns.
pub(crate) fn journal_text_lines(bytes: Vec<u8>) -> Result<Vec<String>, DurableError> {
  let text = String::from_utf8(bytes).map_err(|_| unparseable())?;
  Ok(text.lines().map(str::to_string).collect())
}

/// A journal that arrives as one text (an HTTP body, the concatenated chunks of an object store)
/// as its lines. Over 256 MiB is `cave_durable_journal_limit`. A store that is not a local file
/// cannot have a torn tail repaired (cut under the run's lock, as [`torn_tail`] allows the disk
/// store), so text after the last newline is refused as corrupt rather than dropped: an append
/// after it would glue the next line to it.
pub fn remote_journal_lines(bytes: Vec<u8>, source: &str) -> Result<Vec<String>, DurableError> {
  if bytes.len() > DURABLE_MAX_JOURNAL_BYTES {
    return Err(journal_limit(false));
  }
  if !bytes.is_empty() && bytes.last() != Some(&b'\n') {
    return Err(DurableError::new(
      "cave_durable_journal_corrupt",
      format!("cave_durable_journal_corrupt: unparseable journal line\nhint: the journal {source} ends without a newline (a partial append); it was left untouched"),
    ));
  }
  journal_text_lines(bytes)
}

fn unparseable() -> DurableError {
  DurableError::coded("cave_durable_journal_corrupt", "unparseable journal line")
}

/// Where the journal should end when it does not end on a newline: `Some(len)` of the part to
/// keep when the bytes after the last newline are provably a torn append (the lines before
/// them validate as events, and they are a JSON object cut short, or complete but for its
/// newline), `None` when there is nothing to cut. Anything else is corrupt, never cut: a
/// kilobyte of garbage without a newline is not a crash mid-write.
pub(crate) fn torn_tail(bytes: &[u8]) -> Result<Option<usize>, DurableError> {
  let keep = bytes
    .iter()
    .rposition(|b| *b == b'\n')
    .map(|i| i + 1)
    .unwrap_or(0);
  if keep == bytes.len() {
    return Ok(None);
  }
  if !is_torn_append(&bytes[keep..]) {
    return Err(DurableError::new(
      "cave_durable_journal_corrupt",
      "cave_durable_journal_corrupt: unparseable journal line\nthe last line is not a torn append (not a JSON object cut short); the journal was left untouched",
    ));
  }
  let text = std::str::from_utf8(&bytes[..keep]).map_err(|_| unparseable())?;
  let lines: Vec<String> = text.lines().map(str::to_string).collect();
  super::journal::parse_lines(&lines)?;
  Ok(Some(keep))
}

/// A prefix of one journal line as an append writes it: a JSON object that is either complete
/// or valid up to the point where the bytes stop.
pub(crate) fn is_torn_append(tail: &[u8]) -> bool {
  if tail.first() != Some(&b'{') || tail.len() > DURABLE_MAX_EVENT_BYTES {
    return false;
  }
  match serde_json::from_slice::<serde::de::IgnoredAny>(tail) {
    Ok(_) => true,
    Err(e) if e.is_eof() => true,
    // serde_json calls a number cut after `-`, `.`, `e` or `e+` "invalid number", not EOF.
    // Such a prefix is valid exactly when it stays valid with one more digit (a digit may
    // follow each of them, and adding bytes never repairs an earlier error).
    Err(_) if matches!(tail.last(), Some(b'-' | b'+' | b'.' | b'e' | b'E')) => {
      let mut more = tail.to_vec();
      more.push(b'0');
      match serde_json::from_slice::<serde::de::IgnoredAny>(&more) {
        Ok(_) => true,
        Err(e) => e.is_eof(),
      }
    }
    Err(_) => false,
  }
}

fn read_last_byte(f: &File, size: u64) -> Option<u8> {
  use std::os::unix::fs::FileExt;
  let mut b = [0u8; 1];
  (f.read_at(&mut b, size - 1).ok()? == 1).then_some(b[0])
}

fn cut_journal(dir: &OwnedFd, keep: u64) -> Result<(), DurableError> {
  let f = open_journal(dir, libc::O_WRONLY)?;
  f.set_len(keep)
    .map_err(|e| io_error("cave_durable_store_failed", "truncate torn tail", &e))?;
  f.sync_data()
    .map_err(|e| io_error("cave_durable_store_failed", "fdatasync", &e))
}

fn cname(s: &str) -> CString {
  CString::new(s).expect("store names are built without NUL")
}

fn open_path(path: &Path, flags: i32) -> io::Result<OwnedFd> {
  let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
  // SAFETY: NUL-terminated path; the fd is owned by the caller.
  let fd = unsafe { libc::open(c.as_ptr(), flags) };
  if fd < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: fresh descriptor.
  Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn open_dir_at(dirfd: RawFd, name: &CString) -> io::Result<OwnedFd> {
  openat(
    dirfd,
    name,
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
    0,
  )
}

fn stat_fd(fd: RawFd) -> Option<libc::stat> {
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: valid descriptor, writable buffer.
  (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

fn lstat_at(dirfd: RawFd, name: &CString) -> Option<libc::stat> {
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: valid dirfd, NUL-terminated name, writable buffer.
  (unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0).then_some(st)
}

fn exists_at(dirfd: RawFd, name: &CString) -> bool {
  lstat_at(dirfd, name).is_some()
}

/// The error for a name that could not be opened: a symlink or other non-directory where the
/// store expects its own entry is refused, never followed.
fn not_followed(dirfd: RawFd, name: &CString, what: &str, e: io::Error) -> DurableError {
  match lstat_at(dirfd, name).map(|st| st.st_mode & libc::S_IFMT) {
    Some(libc::S_IFLNK) => DurableError::coded(
      "cave_durable_store_failed",
      format!("{what} {} is a symbolic link; the store does not follow links", name.to_string_lossy()),
    ),
    _ => io_error("cave_durable_store_failed", &format!("open {what}"), &e),
  }
}

/// `journal.jsonl`, opened without following a symlink and refused unless a regular file
/// (`O_NONBLOCK`: a FIFO in its place cannot hang the open). `ENOENT` keeps its code.
fn open_journal(dir: &OwnedFd, flags: i32) -> Result<File, DurableError> {
  let name = cname("journal.jsonl");
  let fd = openat(
    dir.as_raw_fd(),
    &name,
    flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
    0o600,
  )
  .map_err(|e| {
    if e.kind() == io::ErrorKind::NotFound {
      DurableError::new("ENOENT", "journal.jsonl does not exist")
    } else {
      not_followed(dir.as_raw_fd(), &name, "journal", e)
    }
  })?;
  if stat_fd(fd.as_raw_fd()).map(|st| st.st_mode & libc::S_IFMT) != Some(libc::S_IFREG) {
    return Err(DurableError::coded(
      "cave_durable_store_failed",
      "journal.jsonl is not a regular file",
    ));
  }
  Ok(File::from(fd))
}

/// Makes `<tmp>/owner.json` complete, durable and `flock`ed, ready to be renamed into place.
fn stage_owner(dir: &OwnedFd, tmp: &CString) -> io::Result<File> {
  // SAFETY: valid dirfd and NUL-terminated name.
  if unsafe { libc::mkdirat(dir.as_raw_fd(), tmp.as_ptr(), 0o700) } != 0 {
    return Err(io::Error::last_os_error());
  }
  let tmp_dir = open_dir_at(dir.as_raw_fd(), tmp)?;
  let fd = openat(
    tmp_dir.as_raw_fd(),
    &cname("owner.json"),
    libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
    0o600,
  )?;
  let mut f = File::from(fd);
  f.write_all(owner_json().as_bytes())?;
  f.sync_all()?;
  flock(&f, libc::LOCK_EX)?;
  Ok(f)
}

fn flock(f: &File, op: i32) -> io::Result<()> {
  loop {
    // SAFETY: a valid fd owned by `f`.
    if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
      return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.kind() != io::ErrorKind::Interrupted {
      return Err(e);
    }
  }
}

fn forget_held(dir: &OwnedFd) {
  if let Some(key) = held_key(dir) {
    if let Some(m) = HELD.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
      m.remove(&key);
    }
  }
}

/// Renames `lock.d` to `<prefix>-<pid>-<n>` (atomic: exactly one contender moves it) and
/// deletes it.
fn move_aside_and_remove(dir: &OwnedFd, prefix: &str) -> io::Result<()> {
  let n = REAP_COUNTER.fetch_add(1, Ordering::Relaxed);
  let aside = cname(&format!("{prefix}-{}-{n}", std::process::id()));
  let lock = cname("lock.d");
  // SAFETY: both names are relative to the same valid directory descriptor.
  if unsafe { libc::renameat(dir.as_raw_fd(), lock.as_ptr(), dir.as_raw_fd(), aside.as_ptr()) } != 0 {
    return Err(io::Error::last_os_error());
  }
  remove_tree_at(dir.as_raw_fd(), &aside, 0);
  Ok(())
}

/// Deletes `name` under `dirfd` without following symlinks (a link is removed, not entered).
/// Best effort: what cannot be removed is left for the next sweep.
fn remove_tree_at(dirfd: RawFd, name: &CString, depth: usize) {
  // SAFETY: valid dirfd and NUL-terminated name.
  if unsafe { libc::unlinkat(dirfd, name.as_ptr(), 0) } == 0 {
    return;
  }
  if depth < 16 {
    if let Ok(sub) = open_dir_at(dirfd, name) {
      for child in dir_entries(&sub) {
        remove_tree_at(sub.as_raw_fd(), &child, depth + 1);
      }
    }
  }
  // SAFETY: as above.
  unsafe { libc::unlinkat(dirfd, name.as_ptr(), libc::AT_REMOVEDIR) };
}

/// The names in an open directory, `.` and `..` excluded.
fn dir_entries(dir: &OwnedFd) -> Vec<CString> {
  // SAFETY: dup gives fdopendir a descriptor of its own to close.
  let fd = unsafe { libc::dup(dir.as_raw_fd()) };
  if fd < 0 {
    return Vec::new();
  }
  // SAFETY: `fd` is a valid directory descriptor; ownership passes to the DIR stream.
  let d = unsafe { libc::fdopendir(fd) };
  if d.is_null() {
    // SAFETY: fdopendir failed, so `fd` is still ours.
    unsafe { libc::close(fd) };
    return Vec::new();
  }
  let mut names = Vec::new();
  loop {
    // SAFETY: `d` is a valid open DIR stream.
    let ent = unsafe { libc::readdir(d) };
    if ent.is_null() {
      break;
    }
    // SAFETY: d_name is NUL-terminated within the dirent.
    let name = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) };
    if name.to_bytes() != b"." && name.to_bytes() != b".." {
      names.push(name.to_owned());
    }
  }
  // SAFETY: closes the stream and its descriptor.
  unsafe { libc::closedir(d) };
  names
}

/// An exclusive `flock` on `<runDir>/lock.mutex`, held while `lock.d` is checked or changed.
struct LockMutex {
  /// Closing the file releases the `flock`.
  _held: File,
}

impl LockMutex {
  fn take(dir: &OwnedFd) -> Result<Self, DurableError> {
    let name = cname("lock.mutex");
    let fd = openat(
      dir.as_raw_fd(),
      &name,
      libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
      0o600,
    )
    .map_err(|e| not_followed(dir.as_raw_fd(), &name, "lock mutex", e))?;
    let f = File::from(fd);
    flock(&f, libc::LOCK_EX).map_err(|e| io_error("cave_durable_store_failed", "flock lock mutex", &e))?;
    Ok(Self { _held: f })
  }
}

/// `lock.tmp-*` (an acquire that died before installing), `lock.reaped-*`, `lock.released-*`
/// and `lock.broken-*` left by a crash: garbage once the mutex is held, since they are only
/// made under it.
fn remove_leftover_temp_dirs(dir: &OwnedFd) {
  for name in dir_entries(dir) {
    let b = name.to_bytes();
    if [&b"lock.tmp-"[..], b"lock.reaped-", b"lock.released-", b"lock.broken-"]
      .iter()
      .any(|p| b.starts_with(p))
    {
      remove_tree_at(dir.as_raw_fd(), &name, 0);
    }
  }
}

#[derive(Debug, PartialEq, Eq)]
enum LockState {
  Free,
  Alive,
  Stale,
}

struct Owner {
  pid: Option<i64>,
  /// Written by knap: the owner holds an `flock` on `owner.json` while it lives.
  flock: bool,
}

fn open_owner(dir: &OwnedFd) -> Option<File> {
  let lock = open_dir_at(dir.as_raw_fd(), &cname("lock.d")).ok()?;
  let fd = openat(
    lock.as_raw_fd(),
    &cname("owner.json"),
    libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
    0,
  )
  .ok()?;
  (stat_fd(fd.as_raw_fd())?.st_mode & libc::S_IFMT == libc::S_IFREG).then(|| File::from(fd))
}

fn read_owner(dir: &OwnedFd) -> Option<Owner> {
  let f = open_owner(dir)?;
  let mut text = Vec::new();
  f.take(DURABLE_LOCK_OWNER_MAX_BYTES as u64).read_to_end(&mut text).ok()?;
  let v = serde_json::from_slice::<serde_json::Value>(&text).ok()?;
  Some(Owner {
    pid: v.get("pid").and_then(serde_json::Value::as_i64),
    flock: v.get("flock") == Some(&serde_json::Value::Bool(true)),
  })
}

/// Whether a live process holds the `flock` on `lock.d/owner.json` (only knap owners take it).
fn owner_flock_held(dir: &OwnedFd) -> bool {
  let Some(f) = open_owner(dir) else { return false };
  // SAFETY: a valid fd owned by `f`; the probe's shared lock is dropped with `f`.
  let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
  rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

/// Judges `lock.d`. Stale only when a check proves its owner gone, else alive (fail closed):
/// - the `flock` on `owner.json` is held: a live knap process owns it (alive);
/// - `owner.json` says `"flock": true` (written by knap) and nobody holds the `flock`: the
///   kernel released it when the owner died (stale), whatever became of its pid;
/// - `{"pid": n}` of another implementation, `n ≥ 1`: stale only when `kill(n, 0)` fails with
///   `ESRCH` (the reference's rule; `pid` 1 always exists, so it stays alive);
/// - no `owner.json`, garbage, or a pid that no process can have (≤ 0, beyond `pid_t`): stale
///   when no knap process holds it and nothing in `lock.d` changed for
///   [`DURABLE_LOCK_SETTLE`] (a writer of another implementation between creating `lock.d` and
///   writing its owner gets that long).
///
/// What stays locked can be broken by hand: [`DiskStore::break_lock_sync`]
/// (`DiskDurableStore#breakLock`), or deleting `lock.d` when no process drives the run.
fn lock_state(dir: &OwnedFd) -> LockState {
  let lock = cname("lock.d");
  let Some(st) = lstat_at(dir.as_raw_fd(), &lock) else {
    return LockState::Free;
  };
  if owner_flock_held(dir) {
    return LockState::Alive;
  }
  let owner = read_owner(dir);
  if let Some(o) = &owner {
    if o.flock {
      return LockState::Stale;
    }
    if let Some(pid) = o.pid.filter(|p| (1..=i32::MAX as i64).contains(p)) {
      // SAFETY: signal 0 only probes for existence.
      let rc = unsafe { libc::kill(pid as i32, 0) };
      let dead = rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
      return if dead { LockState::Stale } else { LockState::Alive };
    }
  }
  let mut newest = st.st_mtime;
  if let Some(f) = open_owner(dir) {
    if let Some(ost) = stat_fd(f.as_raw_fd()) {
      newest = newest.max(ost.st_mtime);
    }
  }
  let now = (super::record::now_ms() / 1000) as i64;
  if now - (newest as i64) > DURABLE_LOCK_SETTLE.as_secs() as i64 {
    LockState::Stale
  } else {
    LockState::Alive
  }
}

async fn blocking<T: Send + 'static>(
  f: impl FnOnce() -> Result<T, DurableError> + Send + 'static,
) -> Result<T, DurableError> {
  tokio::task::spawn_blocking(f)
    .await
    .unwrap_or_else(|e| Err(DurableError::coded("cave_durable_store_failed", e)))
}

impl DurableStore for Arc<DiskStore> {
  fn load(&self, run_id: &str) -> BoxFuture<Result<Vec<String>, DurableError>> {
    let (s, id) = (self.clone(), run_id.to_string());
    Box::pin(blocking(move || s.load_sync(&id)))
  }

  fn append(&self, run_id: &str, data: String) -> BoxFuture<Result<(), DurableError>> {
    let (s, id) = (self.clone(), run_id.to_string());
    Box::pin(blocking(move || s.append_sync(&id, &data)))
  }

  fn acquire(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>> {
    let (s, id) = (self.clone(), run_id.to_string());
    Box::pin(blocking(move || s.acquire_sync(&id)))
  }

  fn release(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>> {
    let (s, id) = (self.clone(), run_id.to_string());
    Box::pin(blocking(move || s.release_sync(&id)))
  }

  fn close(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>> {
    let (s, id) = (self.clone(), run_id.to_string());
    Box::pin(async move {
      s.close_sync(&id);
      Ok(())
    })
  }

  fn list(&self) -> Option<BoxFuture<Result<Vec<String>, DurableError>>> {
    let s = self.clone();
    Some(Box::pin(blocking(move || s.list_sync())))
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::fs::OpenOptions;
  use std::os::unix::fs::PermissionsExt;

  #[test]
  fn remote_journal_text_needs_whole_lines() {
    assert_eq!(remote_journal_lines(Vec::new(), "x").unwrap(), Vec::<String>::new());
    assert_eq!(
      remote_journal_lines(b"{\"a\":1}\n{}\n".to_vec(), "x").unwrap(),
      vec!["{\"a\":1}", "{}"]
    );
    let e = remote_journal_lines(b"{}\n{\"v\":2,".to_vec(), "at x").unwrap_err();
    assert_eq!(e.code, "cave_durable_journal_corrupt");
    assert!(e.message.starts_with("cave_durable_journal_corrupt: unparseable journal line\nhint: the journal at x "));
    assert_eq!(remote_journal_lines(vec![0xff, b'\n'], "x").unwrap_err().code, "cave_durable_journal_corrupt");
    let e = remote_journal_lines(vec![b'\n'; DURABLE_MAX_JOURNAL_BYTES + 1], "x").unwrap_err();
    assert_eq!(e.message, "cave_durable_journal_limit: journal exceeds 256 MiB");
  }

  fn owner_pid(lock: &Path) -> Option<i64> {
    let text = fs::read_to_string(lock.join("owner.json")).ok()?;
    serde_json::from_str::<serde_json::Value>(&text).ok()?.get("pid")?.as_i64()
  }

  /// Sets `path`'s modification time `secs` seconds into the past.
  fn age(path: &Path, secs: u64) {
    let t = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
    File::options().read(true).open(path).unwrap().set_modified(t).unwrap();
  }

  #[test]
  fn append_load_torn_tail_and_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let s = DiskStore::new(dir.path().join("durable"));
    assert!(s.load_sync("r1").unwrap().is_empty());
    let line = valid_line();
    s.append_sync("r1", &format!("{line}{line}")).unwrap();
    let journal = s.run_dir("r1").join("journal.jsonl");
    assert_eq!(
      fs::metadata(&journal).unwrap().permissions().mode() & 0o777,
      0o600
    );
    assert_eq!(
      fs::metadata(s.run_dir("r1")).unwrap().permissions().mode() & 0o777,
      0o700
    );
    // A crash mid-write leaves a partial line.
    OpenOptions::new()
      .append(true)
      .open(&journal)
      .unwrap()
      .write_all(b"{\"c\":")
      .unwrap();
    assert_eq!(s.load_sync("r1").unwrap(), vec![line.trim_end(), line.trim_end()]);
    s.close_sync("r1");
    s.append_sync("r1", &line).unwrap();
    assert_eq!(
      s.load_sync("r1").unwrap().len(),
      3,
      "the torn tail was cut, not glued to the next line"
    );
    assert!(s
      .run_dir("r1")
      .file_name()
      .unwrap()
      .to_str()
      .unwrap()
      .starts_with("r1-"));
  }

  #[test]
  fn lock_is_exclusive_and_dead_owners_are_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let s = DiskStore::new(dir.path());
    s.acquire_sync("r1").unwrap();
    assert_eq!(s.acquire_sync("r1").unwrap_err().code, "cave_durable_run_locked");
    s.release_sync("r1").unwrap();
    s.acquire_sync("r1").unwrap();
    s.release_sync("r1").unwrap();
    // Plant a lock owned by a pid that cannot exist.
    let lock = s.run_dir("r1").join("lock.d");
    fs::create_dir_all(&lock).unwrap();
    fs::write(lock.join("owner.json"), "{\"pid\":2147483000}").unwrap();
    s.acquire_sync("r1").unwrap();
    assert_eq!(owner_pid(&lock), Some(std::process::id() as i64));
    // knap's own owner file says it holds an flock on it.
    assert_eq!(
      fs::read_to_string(lock.join("owner.json")).unwrap(),
      format!("{{\"pid\":{},\"flock\":true}}", std::process::id())
    );
    s.release_sync("r1").unwrap();
    // A garbage owner file that just appeared counts as alive (a foreign writer may be between
    // mkdir and writing it); once it has not changed for the settle time, it is stale.
    fs::create_dir_all(&lock).unwrap();
    fs::write(lock.join("owner.json"), "garbage").unwrap();
    assert_eq!(s.acquire_sync("r1").unwrap_err().code, "cave_durable_run_locked");
    age(&lock.join("owner.json"), 60);
    age(&lock, 60);
    s.acquire_sync("r1").unwrap();
    s.release_sync("r1").unwrap();
  }

  #[test]
  fn pid_zero_one_and_missing_owners_follow_the_liveness_rules() {
    let dir = tempfile::tempdir().unwrap();
    let s = DiskStore::new(dir.path());
    s.acquire_sync("r1").unwrap();
    s.release_sync("r1").unwrap();
    let lock = s.run_dir("r1").join("lock.d");
    for (label, owner) in [("pid 0", Some("{\"pid\":0}")), ("pid -5", Some("{\"pid\":-5}")), ("no owner file", None)] {
      fs::create_dir_all(&lock).unwrap();
      if let Some(o) = owner {
        fs::write(lock.join("owner.json"), o).unwrap();
      }
      assert_eq!(s.acquire_sync("r1").unwrap_err().code, "cave_durable_run_locked", "{label}: fresh");
      if owner.is_some() {
        age(&lock.join("owner.json"), 60);
      }
      age(&lock, 60);
      s.acquire_sync("r1").unwrap_or_else(|e| panic!("{label}: settled and unheld is stale: {e}"));
      s.release_sync("r1").unwrap();
    }
    // pid 1 always exists: alive, however old; the manual override breaks it.
    fs::create_dir_all(&lock).unwrap();
    fs::write(lock.join("owner.json"), "{\"pid\":1}").unwrap();
    age(&lock.join("owner.json"), 600);
    age(&lock, 600);
    assert_eq!(s.acquire_sync("r1").unwrap_err().code, "cave_durable_run_locked");
    assert!(s.break_lock_sync("r1").unwrap());
    assert!(!s.break_lock_sync("r1").unwrap(), "nothing left to break");
    s.acquire_sync("r1").unwrap();
    // A lock held by a live knap owner is never broken, by hand or otherwise.
    let other = DiskStore::new(dir.path());
    assert_eq!(other.break_lock_sync("r1").unwrap_err().code, "cave_durable_run_locked");
    assert_eq!(other.acquire_sync("r1").unwrap_err().code, "cave_durable_run_locked");
    s.release_sync("r1").unwrap();
  }

  #[test]
  fn a_knap_owner_whose_flock_is_gone_is_stale_whatever_its_pid() {
    let dir = tempfile::tempdir().unwrap();
    let s = DiskStore::new(dir.path());
    s.acquire_sync("r1").unwrap();
    s.release_sync("r1").unwrap();
    let lock = s.run_dir("r1").join("lock.d");
    // A dead knap owner whose pid was reused by a live process (here: this one, and pid 1).
    for pid in [std::process::id(), 1] {
      fs::create_dir_all(&lock).unwrap();
      fs::write(lock.join("owner.json"), format!("{{\"pid\":{pid},\"flock\":true}}")).unwrap();
      s.acquire_sync("r1").unwrap_or_else(|e| panic!("pid {pid}: {e}"));
      s.release_sync("r1").unwrap();
    }
  }

  #[test]
  fn garbage_without_a_newline_is_corrupt_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let s = DiskStore::new(dir.path());
    s.acquire_sync("r1").unwrap();
    let journal = s.run_dir("r1").join("journal.jsonl");
    let garbage: Vec<u8> = (0..1024u32).map(|i| (i * 7 + 13) as u8 | 0x80).collect();
    fs::write(&journal, &garbage).unwrap();
    let e = s.load_sync("r1").unwrap_err();
    assert_eq!(e.code, "cave_durable_journal_corrupt");
    assert!(e.message.starts_with("cave_durable_journal_corrupt: unparseable journal line\n"));
    assert_eq!(fs::read(&journal).unwrap(), garbage, "not wiped");
    // An append refuses too, rather than gluing a line to the garbage.
    assert_eq!(s.append_sync("r1", "{}\n").unwrap_err().code, "cave_durable_journal_corrupt");
    assert_eq!(fs::read(&journal).unwrap(), garbage);
    // A JSON-ish line that is not an object, or is followed by junk, is not a torn append either.
    for tail in ["[1,2", "{\"a\":1} x", "{\"a\":tx"] {
      fs::write(&journal, tail).unwrap();
      assert_eq!(s.load_sync("r1").unwrap_err().code, "cave_durable_journal_corrupt", "{tail}");
      assert_eq!(fs::read_to_string(&journal).unwrap(), tail);
    }
    s.release_sync("r1").unwrap();
  }

  #[test]
  fn a_line_torn_inside_a_number_is_a_torn_append() {
    // Found by the journal property test: serde_json reports these cuts as "invalid number".
    for tail in ["{\"a\":3.", "{\"a\":3.5e", "{\"a\":3.5e+", "{\"a\":-", "{\"a\":-0.", "{\"a\":[1,-"] {
      assert!(is_torn_append(tail.as_bytes()), "{tail}");
    }
    for tail in ["{\"a\":3.-", "{\"a\":e", "{\"a\":tru-", "{\"a\":\"x\"-", "{\"a\":1 -"] {
      assert!(!is_torn_append(tail.as_bytes()), "{tail}");
    }
  }

  fn valid_line() -> String {
    let e = crate::durable::journal::event("cancel_requested", serde_json::json!({"reason": "x"}));
    format!("{}\n", serde_json::to_string(&e).unwrap())
  }

  #[test]
  fn a_torn_tail_is_cut_only_after_the_lines_before_it_validate_and_only_under_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let s = DiskStore::new(dir.path());
    let line = valid_line();
    s.append_sync("r1", &line).unwrap();
    s.close_sync("r1");
    let journal = s.run_dir("r1").join("journal.jsonl");
    let torn = format!("{line}{}", &line[..20]);
    fs::write(&journal, &torn).unwrap();
    // Without the lock: the tail is dropped from what load returns, the file is not touched.
    assert_eq!(s.load_sync("r1").unwrap(), vec![line.trim_end()]);
    assert_eq!(fs::read_to_string(&journal).unwrap(), torn);
    // A corrupt line before the tail: corrupt, nothing cut, even under the lock.
    s.acquire_sync("r1").unwrap();
    let corrupt = format!("{}\n{}", line.replace("\"v\":2", "\"v\":2,\"extra\":1").trim_end(), &line[..20]);
    fs::write(&journal, &corrupt).unwrap();
    assert_eq!(s.load_sync("r1").unwrap_err().code, "cave_durable_journal_corrupt");
    assert_eq!(fs::read_to_string(&journal).unwrap(), corrupt);
    // A valid prefix: cut under the lock.
    fs::write(&journal, &torn).unwrap();
    assert_eq!(s.load_sync("r1").unwrap(), vec![line.trim_end()]);
    assert_eq!(fs::read_to_string(&journal).unwrap(), line);
    // A complete line short of its newline is a torn append too; so is a torn first line.
    fs::write(&journal, format!("{line}{}", line.trim_end())).unwrap();
    assert_eq!(s.load_sync("r1").unwrap().len(), 1);
    fs::write(&journal, &line[..30]).unwrap();
    assert!(s.load_sync("r1").unwrap().is_empty());
    assert_eq!(fs::read_to_string(&journal).unwrap(), "");
    s.release_sync("r1").unwrap();
  }

  #[test]
  fn symlinks_inside_the_store_are_never_followed() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside.txt");
    fs::write(&outside, "keep me\nlast line without newline").unwrap();
    let s = DiskStore::new(dir.path().join("store"));
    s.acquire_sync("r1").unwrap();
    let journal = s.run_dir("r1").join("journal.jsonl");
    symlink(&outside, &journal).unwrap();
    for e in [s.load_sync("r1").unwrap_err(), s.append_sync("r1", "{}\n").unwrap_err()] {
      assert_eq!(e.code, "cave_durable_store_failed");
      assert!(e.message.contains("symbolic link"), "{}", e.message);
    }
    assert_eq!(fs::read_to_string(&outside).unwrap(), "keep me\nlast line without newline");
    s.release_sync("r1").unwrap();
    // The run directory itself as a symlink.
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::write(elsewhere.join("journal.jsonl"), "{\"a\":").unwrap();
    symlink(&elsewhere, s.run_dir("r2")).unwrap();
    assert!(s.load_sync("r2").unwrap_err().message.contains("symbolic link"));
    assert!(s.acquire_sync("r2").unwrap_err().message.contains("symbolic link"));
    assert_eq!(fs::read_to_string(elsewhere.join("journal.jsonl")).unwrap(), "{\"a\":");
    assert!(!elsewhere.join("lock.d").exists());
    // A FIFO as the journal is refused without hanging.
    let fifo = s.run_dir("r3");
    fs::create_dir_all(&fifo).unwrap();
    let c = CString::new(fifo.join("journal.jsonl").as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    assert!(s.load_sync("r3").unwrap_err().message.contains("not a regular file"));
  }

  #[test]
  fn stale_lock_takeover_has_exactly_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(DiskStore::new(dir.path()));
    let lock = s.run_dir("r1").join("lock.d");
    for round in 0..300 {
      fs::create_dir_all(&lock).unwrap();
      fs::write(lock.join("owner.json"), "{\"pid\":2147483000}").unwrap();
      let gate = Arc::new(std::sync::Barrier::new(6));
      let threads: Vec<_> = (0..6)
        .map(|_| {
          let (s, gate) = (s.clone(), gate.clone());
          std::thread::spawn(move || {
            gate.wait();
            s.acquire_sync("r1").is_ok()
          })
        })
        .collect();
      let winners = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|w| *w)
        .count();
      assert_eq!(
        winners, 1,
        "round {round}: {winners} contenders took the stale lock"
      );
      s.release_sync("r1").unwrap();
    }
  }

  #[test]
  fn list_reads_run_started() {
    let dir = tempfile::tempdir().unwrap();
    let s = DiskStore::new(dir.path());
    s.append_sync("b-run", "{\"type\":\"run_started\",\"runId\":\"b-run\"}\n")
      .unwrap();
    s.append_sync("a-run", "{\"type\":\"run_started\",\"runId\":\"a-run\"}\n")
      .unwrap();
    assert_eq!(s.list_sync().unwrap(), vec!["a-run", "b-run"]);
  }
}
