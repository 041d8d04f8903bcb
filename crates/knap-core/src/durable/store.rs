//! The store interface (`load`, `append`, `acquire`, `close`, `list`) and the embedded default,
//! the disk store: one directory per run, `journal.jsonl` appended and `fdatasync`ed before an
//! append resolves, 0700/0600 permissions, a `lock.d` directory naming the owner pid with
//! takeover of dead owners, and a torn last line (a crash mid-write) cut off on load.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::canonical::sha256_hex;
use super::{valid_run_id, DurableError};
use crate::exec::BoxFuture;
use crate::limits::{DURABLE_LIST_FIRST_LINE_BYTES, DURABLE_MAX_JOURNAL_BYTES};

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

  /// `<root>/<runId>-<first 10 hex of sha256(runId)>`.
  pub fn run_dir(&self, run_id: &str) -> PathBuf {
    self
      .root
      .join(format!("{run_id}-{}", &sha256_hex(run_id.as_bytes())[..10]))
  }

  fn check(run_id: &str) -> Result<(), DurableError> {
    if valid_run_id(run_id) {
      Ok(())
    } else {
      Err(super::run_id_error())
    }
  }

  fn ensure_dir(&self, run_id: &str) -> Result<PathBuf, DurableError> {
    let dir = self.run_dir(run_id);
    fs::DirBuilder::new()
      .recursive(true)
      .mode(0o700)
      .create(&dir)
      .map_err(|e| io_error("cave_durable_store_failed", "mkdir", &e))?;
    Ok(dir)
  }

  pub fn load_sync(&self, run_id: &str) -> Result<Vec<String>, DurableError> {
    Self::check(run_id)?;
    let path = self.run_dir(run_id).join("journal.jsonl");
    let mut file = match OpenOptions::new().read(true).write(true).open(&path) {
      Ok(f) => f,
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
      Err(e) => return Err(io_error("cave_durable_store_failed", "open journal", &e)),
    };
    let len = file
      .metadata()
      .map_err(|e| io_error("cave_durable_store_failed", "stat", &e))?
      .len();
    if len as usize > DURABLE_MAX_JOURNAL_BYTES {
      return Err(DurableError::coded(
        "cave_durable_journal_limit",
        "journal exceeds 256 MiB",
      ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file
      .read_to_end(&mut bytes)
      .map_err(|e| io_error("cave_durable_store_failed", "read", &e))?;
    // Anything after the last newline is a write the crash interrupted: cut it so the next
    // append starts on a clean line.
    let keep = bytes
      .iter()
      .rposition(|b| *b == b'\n')
      .map(|i| i + 1)
      .unwrap_or(0);
    if keep < bytes.len() {
      file
        .set_len(keep as u64)
        .map_err(|e| io_error("cave_durable_store_failed", "truncate torn tail", &e))?;
      file
        .sync_data()
        .map_err(|e| io_error("cave_durable_store_failed", "fdatasync", &e))?;
      bytes.truncate(keep);
    }
    let text = String::from_utf8(bytes)
      .map_err(|_| DurableError::coded("cave_durable_journal_corrupt", "unparseable journal line"))?;
    Ok(text.lines().map(str::to_string).collect())
  }

  fn file_for(&self, run_id: &str) -> Result<Arc<Mutex<File>>, DurableError> {
    let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = files.get(run_id) {
      return Ok(f.clone());
    }
    let dir = self.ensure_dir(run_id)?;
    let file = OpenOptions::new()
      .create(true)
      .append(true)
      .mode(0o600)
      .open(dir.join("journal.jsonl"))
      .map_err(|e| io_error("cave_durable_store_failed", "open journal", &e))?;
    let f = Arc::new(Mutex::new(file));
    files.insert(run_id.to_string(), f.clone());
    Ok(f)
  }

  pub fn append_sync(&self, run_id: &str, data: &str) -> Result<(), DurableError> {
    Self::check(run_id)?;
    let file = self.file_for(run_id)?;
    let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    if size as usize + data.len() > DURABLE_MAX_JOURNAL_BYTES {
      return Err(DurableError::coded(
        "cave_durable_journal_limit",
        "journal would exceed 256 MiB",
      ));
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
  /// renaming a directory that already holds `owner.json` into place.
  pub fn acquire_sync(&self, run_id: &str) -> Result<(), DurableError> {
    Self::check(run_id)?;
    let dir = self.ensure_dir(run_id)?;
    let lock = dir.join("lock.d");
    let _mutex = LockMutex::take(&dir)?;
    remove_leftover_temp_dirs(&dir);
    if fs::symlink_metadata(&lock).is_ok() {
      if !owner_is_dead(&lock) {
        return Err(locked_error(run_id));
      }
      // Move the stale lock aside (atomic), then delete it.
      let n = REAP_COUNTER.fetch_add(1, Ordering::Relaxed);
      let aside = dir.join(format!("lock.reaped-{}-{n}", std::process::id()));
      fs::rename(&lock, &aside).map_err(|_| locked_error(run_id))?;
      let _ = fs::remove_dir_all(&aside);
    }
    let n = REAP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("lock.tmp-{}-{n}", std::process::id()));
    let owner = format!("{{\"pid\":{}}}", std::process::id());
    let staged = fs::DirBuilder::new().mode(0o700).create(&tmp).and_then(|_| {
      OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(tmp.join("owner.json"))
        .and_then(|mut f| f.write_all(owner.as_bytes()).and_then(|_| f.sync_all()))
    });
    if let Err(e) = staged {
      let _ = fs::remove_dir_all(&tmp);
      return Err(io_error("cave_durable_store_failed", "write lock owner", &e));
    }
    match fs::rename(&tmp, &lock) {
      Ok(()) => Ok(()),
      Err(e) => {
        let _ = fs::remove_dir_all(&tmp);
        // Someone outside the mutex (another implementation) created lock.d meanwhile.
        if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST)) {
          Err(locked_error(run_id))
        } else {
          Err(io_error("cave_durable_store_failed", "install lock", &e))
        }
      }
    }
  }

  /// Gives the lock back if this process owns it (moved aside atomically, then deleted).
  pub fn release_sync(&self, run_id: &str) -> Result<(), DurableError> {
    Self::check(run_id)?;
    let dir = self.run_dir(run_id);
    let lock = dir.join("lock.d");
    if owner_pid(&lock) != Some(std::process::id() as i64) {
      return Ok(());
    }
    let _mutex = LockMutex::take(&dir)?;
    if owner_pid(&lock) == Some(std::process::id() as i64) {
      let n = REAP_COUNTER.fetch_add(1, Ordering::Relaxed);
      let aside = dir.join(format!("lock.released-{}-{n}", std::process::id()));
      fs::rename(&lock, &aside).map_err(|e| io_error("cave_durable_store_failed", "remove lock", &e))?;
      let _ = fs::remove_dir_all(&aside);
    }
    Ok(())
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
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
      Err(e) => return Err(io_error("cave_durable_store_failed", "list", &e)),
    };
    let mut ids = Vec::new();
    for entry in entries.flatten() {
      let Ok(mut f) = File::open(entry.path().join("journal.jsonl")) else {
        continue;
      };
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

/// An exclusive `flock` on `<runDir>/lock.mutex`, held while `lock.d` is checked or changed.
struct LockMutex {
  /// Closing the file releases the `flock`.
  _held: File,
}

impl LockMutex {
  fn take(dir: &Path) -> Result<Self, DurableError> {
    use std::os::unix::io::AsRawFd;
    let f = OpenOptions::new()
      .create(true)
      .truncate(false)
      .read(true)
      .write(true)
      .mode(0o600)
      .open(dir.join("lock.mutex"))
      .map_err(|e| io_error("cave_durable_store_failed", "open lock mutex", &e))?;
    loop {
      // SAFETY: a valid fd owned by `f`.
      if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
        return Ok(Self { _held: f });
      }
      let e = std::io::Error::last_os_error();
      if e.kind() != std::io::ErrorKind::Interrupted {
        return Err(io_error("cave_durable_store_failed", "flock lock mutex", &e));
      }
    }
  }
}

/// `lock.tmp-*` (an acquire that died before installing), `lock.reaped-*` and `lock.released-*`
/// left by a crash: garbage once the mutex is held, since they are only made under it.
fn remove_leftover_temp_dirs(dir: &Path) {
  let Ok(entries) = fs::read_dir(dir) else { return };
  for entry in entries.flatten() {
    let name = entry.file_name();
    let name = name.to_string_lossy();
    if name.starts_with("lock.tmp-") || name.starts_with("lock.reaped-") || name.starts_with("lock.released-")
    {
      let _ = fs::remove_dir_all(entry.path());
    }
  }
}

fn owner_pid(lock: &Path) -> Option<i64> {
  let text = fs::read_to_string(lock.join("owner.json")).ok()?;
  serde_json::from_str::<serde_json::Value>(&text)
    .ok()?
    .get("pid")?
    .as_i64()
}

/// Dead only when `kill(pid, 0)` says `ESRCH`; an unreadable owner counts as alive (fail closed).
fn owner_is_dead(lock: &Path) -> bool {
  let Some(pid) = owner_pid(lock) else { return false };
  if pid <= 0 || pid > i32::MAX as i64 {
    return false;
  }
  // SAFETY: signal 0 only probes for existence.
  let rc = unsafe { libc::kill(pid as i32, 0) };
  rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
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
  use std::os::unix::fs::PermissionsExt;

  #[test]
  fn append_load_torn_tail_and_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let s = DiskStore::new(dir.path().join("durable"));
    assert!(s.load_sync("r1").unwrap().is_empty());
    s.append_sync("r1", "{\"a\":1}\n{\"b\":2}\n").unwrap();
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
    assert_eq!(s.load_sync("r1").unwrap(), vec!["{\"a\":1}", "{\"b\":2}"]);
    s.close_sync("r1");
    s.append_sync("r1", "{\"d\":4}\n").unwrap();
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
    // An unreadable owner file counts as alive.
    s.release_sync("r1").unwrap();
    fs::create_dir_all(&lock).unwrap();
    fs::write(lock.join("owner.json"), "garbage").unwrap();
    assert_eq!(s.acquire_sync("r1").unwrap_err().code, "cave_durable_run_locked");
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
