//! What the walk keeps from one search to the next, by file identity: a small file's contents
//! (grep reads the same files at every agent step) and a directory's listing. An entry is keyed
//! by (device, inode) and valid while the file's size, mtime and ctime are those it had when it
//! was read; a change to a file's contents, or to a directory's entries (a name added, removed or
//! renamed), moves its ctime.
//!
//! Sound only where that holds and the stamps are fine-grained: the workspace root's file system
//! must be one of those [`crate::workspace::Root::settled_dev`] lists, the file on that device,
//! and its last change at least [`GREP_CONTENTS_SETTLED`] old when it was looked at (the racy-git
//! rule: a change within the same clock tick as the read could leave the stamp as it was). Known
//! gap, as for git's index: a change that leaves all three as they were (a write through a shared
//! `mmap` to a page already dirty, a clock stepped back) is not seen until the file changes again.
//! Every containment check stays where it was: an entry is only ever looked up for a name the walk
//! found in a directory it opened beneath the root, after `fstatat(AT_SYMLINK_NOFOLLOW)` (or
//! `fstat` of the opened directory) showed the kept identity.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::limits::GREP_CONTENTS_SETTLED;

/// A file's identity: device, inode, size, modification and change times (ns). A rewrite in place
/// moves the times (and usually the size); a replacement changes the inode. The one identity of
/// everything kept by file (these contents and listings, and `rg_rules`' compiled ignore files).
pub type Identity = [i64; 7];

pub fn identity(st: &libc::stat) -> Identity {
  [
    st.st_dev as i64,
    st.st_ino as i64,
    st.st_size,
    st.st_mtime,
    st.st_mtime_nsec,
    st.st_ctime,
    st.st_ctime_nsec,
  ]
}

struct Entries<T: ?Sized> {
  map: HashMap<(u64, u64), (Identity, Arc<T>, usize)>,
  bytes: usize,
}

/// Values kept by file identity, at most `max_bytes` (by the costs given to [`Kept::put`]) in all:
/// past that, everything is dropped and filling starts again.
pub struct Kept<T: ?Sized> {
  entries: Mutex<Option<Entries<T>>>,
  max_bytes: usize,
}

impl<T: ?Sized> Kept<T> {
  pub const fn new(max_bytes: usize) -> Self {
    Self {
      entries: Mutex::new(None),
      max_bytes,
    }
  }

  fn lock(&self) -> std::sync::MutexGuard<'_, Option<Entries<T>>> {
    self.entries.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// The value kept for the file `st` describes (of kind `kind`, `S_IFREG` or `S_IFDIR`), if it
  /// has not changed since.
  pub fn get(&self, st: &libc::stat, kind: libc::mode_t) -> Option<Arc<T>> {
    if st.st_mode & libc::S_IFMT != kind {
      return None;
    }
    let g = self.lock();
    let (s, v, _) = g.as_ref()?.map.get(&(st.st_dev as u64, st.st_ino as u64))?;
    (*s == identity(st)).then(|| v.clone())
  }

  /// Keeps `value` for the file `st` describes if its last change was settled at `looked_at`
  /// (taken before the `stat` and the read).
  pub fn put(&self, st: &libc::stat, value: Arc<T>, cost: usize, looked_at: SystemTime) {
    if !settled(st, looked_at) || cost > self.max_bytes {
      return;
    }
    let mut g = self.lock();
    let e = g.get_or_insert_with(|| Entries {
      map: HashMap::new(),
      bytes: 0,
    });
    if e.bytes + cost > self.max_bytes {
      e.map.clear();
      e.bytes = 0;
    }
    e.bytes += cost;
    if let Some((_, _, old)) = e.map.insert((st.st_dev as u64, st.st_ino as u64), (identity(st), value, cost)) {
      e.bytes -= old;
    }
  }
}

/// The file's last change was at least [`GREP_CONTENTS_SETTLED`] before `looked_at`.
pub fn settled(st: &libc::stat, looked_at: SystemTime) -> bool {
  let ctime = UNIX_EPOCH.checked_add(Duration::new(
    st.st_ctime.max(0) as u64,
    st.st_ctime_nsec.clamp(0, 999_999_999) as u32,
  ));
  ctime.is_some_and(|c| c + GREP_CONTENTS_SETTLED <= looked_at)
}

/// The wall clock change times are compared with (moved forward in tests, which cannot age a
/// file's ctime).
pub fn now() -> SystemTime {
  #[cfg(test)]
  {
    SystemTime::now() + NOW_AHEAD.with(|a| a.get())
  }
  #[cfg(not(test))]
  SystemTime::now()
}

#[cfg(test)]
thread_local! {
  pub static NOW_AHEAD: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}
