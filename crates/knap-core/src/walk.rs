//! The one directory walk, shared by grep (both printers) and Glob: descriptor-relative from
//! start to end. The start directory is opened beneath the workspace root
//! ([`crate::workspace::Root::open_dir`]); every directory below it is opened by one name from its
//! parent's listing with `O_NOFOLLOW` ([`Dir::open_dir`]) and read with `getdents64`; entry types
//! come from `d_type` (`fstatat(AT_SYMLINK_NOFOLLOW)` where the file system leaves it unknown).
//! No path is resolved again after the start, so a directory swapped for a symlink while the walk
//! runs never leads it out of the tree it started in: it goes on reading the directories it
//! opened. Symlinks, FIFOs, sockets and devices are never entered or visited.
//!
//! What is skipped is the caller's [`Rules`] (rg's ignore rules for grep, none for Glob), asked
//! once per listed directory for a node its entries are matched against. Regular files go to the
//! caller's [`Visitor`] with the directory they were listed in, to be opened through it.
//!
//! A walk starts on the calling thread; once it has seen `spread_after` entries it starts
//! `threads - 1` helpers on the same queue (starting threads costs more than walking a small
//! tree).

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::kept::Kept;
use crate::limits::WALK_LISTINGS_MAX_BYTES;
use crate::workspace::Dir;

/// Where a directory is: its absolute path (what rg matches ignore rules against and prints in
/// errors) and its path relative to the walk's start as tools show it
/// ([`crate::workspace::name_text`]), `/`-terminated (empty for the start).
#[derive(Clone, Debug)]
pub struct At {
  pub abs: PathBuf,
  pub rel: String,
}

impl At {
  fn child(&self, name: &[u8]) -> At {
    let shown = crate::workspace::name_text(name);
    let mut rel = String::with_capacity(self.rel.len() + shown.len() + 1);
    rel.push_str(&self.rel);
    rel.push_str(&shown);
    rel.push('/');
    At {
      abs: self.abs.join(std::ffi::OsStr::from_bytes(name)),
      rel,
    }
  }
}

/// What an entry is, as far as the walk cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
  Dir,
  File,
  /// A symlink (never followed: rg without `-L`, `find` without `-L`).
  Link,
  /// A FIFO, socket or device.
  Other,
}

/// Listings kept from walk to walk ([`Listing::read_kept`]).
static LISTINGS: Kept<Listing> = Kept::new(WALK_LISTINGS_MAX_BYTES);

/// Test hook: whether the listing of the directory `st` describes is kept as it is now.
#[cfg(test)]
pub(crate) fn listing_kept(st: &libc::stat) -> bool {
  LISTINGS.get(st, libc::S_IFDIR).is_some()
}

/// One directory's entries as `getdents64` returned them (`.` and `..` left out): the names in
/// one buffer.
#[derive(Default)]
pub struct Listing {
  names: Vec<u8>,
  entries: Vec<(u32, u32, u8)>,
}

impl Listing {
  /// Reads every entry of the directory `fd` (`buf` is scratch space for `getdents64`).
  pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<Listing> {
    let mut out = Listing::default();
    loop {
      // SAFETY: valid directory descriptor and a writable buffer of the given length.
      let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
      if n < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
          continue;
        }
        return Err(err);
      }
      if n == 0 {
        return Ok(out);
      }
      let n = n as usize;
      let mut off = 0usize;
      // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
      while off + 19 <= n {
        let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
        if reclen == 0 || off + reclen > n {
          break;
        }
        let d_type = buf[off + 18];
        let raw = &buf[off + 19..off + reclen];
        let name = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
        off += reclen;
        if name == b"." || name == b".." || name.is_empty() {
          continue;
        }
        out
          .entries
          .push((out.names.len() as u32, name.len() as u32, d_type));
        out.names.extend_from_slice(name);
      }
    }
  }

  /// [`Listing::read`], or the listing kept from an earlier walk when the directory (on the
  /// device `settled_dev`, see [`crate::kept`]) has not changed since: its entries cannot have
  /// changed without its ctime moving. One `fstat` instead of two `getdents64` on a hit.
  pub fn read_kept(dir: &Dir, buf: &mut [u8], settled_dev: Option<u64>) -> io::Result<Arc<Listing>> {
    let fd = dir.as_raw_fd();
    let Some(dev) = settled_dev else {
      return Listing::read(fd, buf).map(Arc::new);
    };
    let looked_at = crate::kept::now();
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, writable stat buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_dev as u64 != dev {
      return Listing::read(fd, buf).map(Arc::new);
    }
    if let Some(kept) = LISTINGS.get(&st, libc::S_IFDIR) {
      return Ok(kept);
    }
    let listing = Arc::new(Listing::read(fd, buf)?);
    let cost = listing.names.len() + listing.entries.len() * std::mem::size_of::<(u32, u32, u8)>() + 64;
    LISTINGS.put(&st, listing.clone(), cost, looked_at);
    Ok(listing)
  }

  /// The kept listing of the directory `fd` (which may be an `O_PATH` descriptor) on the device
  /// `settled_dev`, read now (through a readable descriptor of `.`) if it is not kept but will be
  /// (settled, and small: at most 256 KiB of directory); `None` otherwise (another device, no read
  /// permission, changing, large): the caller then probes the few names it needs, which costs
  /// less than listing a busy directory such as `/tmp` again and again.
  pub fn kept_of_path_fd(fd: RawFd, settled_dev: u64) -> Option<Arc<Listing>> {
    let looked_at = crate::kept::now();
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, writable stat buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_dev as u64 != settled_dev {
      return None;
    }
    if let Some(kept) = LISTINGS.get(&st, libc::S_IFDIR) {
      return Some(kept);
    }
    if !crate::kept::settled(&st, looked_at) || st.st_size > 256 * 1024 {
      return None;
    }
    // SAFETY: valid directory descriptor, NUL-terminated name.
    let rd = unsafe { libc::openat(fd, c".".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if rd < 0 {
      return None;
    }
    // SAFETY: `rd` was just returned by openat and is owned here.
    let rd = unsafe { std::os::fd::OwnedFd::from_raw_fd(rd) };
    let mut buf = vec![0u8; 16 * 1024];
    let listing = Arc::new(Listing::read(std::os::fd::AsRawFd::as_raw_fd(&rd), &mut buf).ok()?);
    let cost = listing.names.len() + listing.entries.len() * std::mem::size_of::<(u32, u32, u8)>() + 64;
    LISTINGS.put(&st, listing.clone(), cost, looked_at);
    Some(listing)
  }

  pub fn len(&self) -> usize {
    self.entries.len()
  }

  pub fn is_empty(&self) -> bool {
    self.entries.is_empty()
  }

  /// Each name with its `d_type`.
  pub fn iter(&self) -> impl Iterator<Item = (&[u8], u8)> + '_ {
    self
      .entries
      .iter()
      .map(|&(at, len, t)| (&self.names[at as usize..(at + len) as usize], t))
  }

  /// The `d_type` of `name` if it is listed.
  pub fn find(&self, name: &[u8]) -> Option<u8> {
    self.iter().find(|(n, _)| *n == name).map(|(_, t)| t)
  }
}

/// The kind of a listed entry: `d_type`, or `fstatat(AT_SYMLINK_NOFOLLOW)` when it is unknown.
pub fn kind_of(dir: &Dir, name: &[u8], d_type: u8) -> Kind {
  let from_mode = |m: libc::mode_t| match m & libc::S_IFMT {
    libc::S_IFDIR => Kind::Dir,
    libc::S_IFREG => Kind::File,
    libc::S_IFLNK => Kind::Link,
    _ => Kind::Other,
  };
  match d_type {
    libc::DT_DIR => Kind::Dir,
    libc::DT_REG => Kind::File,
    libc::DT_LNK => Kind::Link,
    libc::DT_UNKNOWN => match CString::new(name).ok().and_then(|c| dir.lstat(&c)) {
      Some(st) => from_mode(st.st_mode),
      None => Kind::Other,
    },
    _ => Kind::Other,
  }
}

/// What the walk skips, and what it needs per directory to decide.
pub trait Rules: Sync {
  type Node: Send + Sync;
  /// The node for a directory just listed (`parent`: its parent's node, or the start's given node).
  fn node(&self, parent: &Arc<Self::Node>, dir: &Dir, at: &At, listing: &Listing) -> Arc<Self::Node>;
  /// Whether the entry `name` (a directory or a regular file) of a directory with node `node` is
  /// left out.
  fn skip(&self, node: &Self::Node, at: &At, name: &[u8], is_dir: bool) -> bool;
}

/// No rules: every regular file, hidden and ignored ones included (Glob, as `find -type f`).
pub struct Everything;

impl Rules for Everything {
  type Node = ();
  fn node(&self, parent: &Arc<()>, _: &Dir, _: &At, _: &Listing) -> Arc<()> {
    parent.clone()
  }
  fn skip(&self, _: &(), _: &At, _: &[u8], _: bool) -> bool {
    false
  }
}

/// What the walk does with what it finds. One `Local` per thread.
pub trait Visitor: Sync {
  type Local;
  fn local(&self) -> Self::Local;
  /// A regular file (as listed) of the directory `dir`; `false` ends the walk.
  fn file(&self, local: &mut Self::Local, dir: &Dir, at: &At, name: &[u8]) -> bool;
  /// A directory that could not be opened or read (`at` is that directory); `false` ends the walk.
  fn dir_error(&self, local: &mut Self::Local, at: &At, err: io::Error) -> bool;
  /// The thread is done; merge what it kept.
  fn done(&self, local: Self::Local);
}

/// `getdents64` scratch space, kept per thread from walk to walk (a walk of a small tree costs
/// about as much as zeroing a fresh one).
const LIST_BUFFER_BYTES: usize = 32 * 1024;

thread_local! {
  static LIST_BUFFER: std::cell::Cell<Option<Box<[u8]>>> = const { std::cell::Cell::new(None) };
}

fn take_buffer() -> Box<[u8]> {
  LIST_BUFFER
    .with(|b| b.take())
    .unwrap_or_else(|| vec![0u8; LIST_BUFFER_BYTES].into_boxed_slice())
}

fn give_buffer(buf: Box<[u8]>) {
  LIST_BUFFER.with(|b| b.set(Some(buf)));
}

/// How a walk runs.
pub struct Options<'a> {
  /// Threads in all, the calling one included.
  pub threads: usize,
  /// Entries the calling thread walks alone before the other threads start.
  pub spread_after: usize,
  /// Set from outside (timeout, cancellation) to end the walk early.
  pub stop: &'a AtomicBool,
  /// End the walk (with [`End::OverLimit`]) once more entries than this were found.
  pub max_entries: Option<usize>,
  /// The workspace root's device when its listings may be kept from walk to walk
  /// ([`crate::workspace::Root::settled_dev`], [`crate::kept`]); `None` reads every directory.
  pub settled_dev: Option<u64>,
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
  /// Every directory was read (or `stop` was set).
  Done,
  /// The visitor asked to stop.
  Visitor,
  /// More entries than [`Options::max_entries`].
  OverLimit,
}

/// A directory waiting to be read: opened already (the start) or to be opened by name from its
/// parent.
enum Source {
  Open(Dir),
  Child(Arc<Dir>, CString),
}

struct Pending<N> {
  source: Source,
  at: At,
  /// The parent's node (the start's: the node given to [`walk`]).
  parent: Arc<N>,
}

struct Queue<N> {
  pending: Vec<Pending<N>>,
  busy: usize,
  ended: bool,
  /// Threads waiting for work (a wake-up is a system call: none when nobody waits).
  waiting: usize,
}

/// Walks the tree below `start` (located at `at`), whose own node's parent is `node`. An entry
/// counts (for `spread_after` and `max_entries`) when the rules keep it.
pub fn walk<R: Rules, V: Visitor>(
  start: Dir,
  at: At,
  node: Arc<R::Node>,
  rules: &R,
  visitor: &V,
  opts: &Options<'_>,
) -> End {
  let queue = Mutex::new(Queue {
    pending: vec![Pending {
      source: Source::Open(start),
      at,
      parent: node,
    }],
    busy: 0,
    ended: false,
    waiting: 0,
  });
  let ready = Condvar::new();
  let ended_by_visitor = AtomicBool::new(false);
  let shared = Shared {
    queue: &queue,
    ready: &ready,
    rules,
    visitor,
    stop: opts.stop,
    ended_by_visitor: &ended_by_visitor,
    seen: AtomicUsize::new(0),
    max_entries: opts.max_entries,
    over_limit: AtomicBool::new(false),
    settled_dev: opts.settled_dev,
  };
  std::thread::scope(|scope| {
    let mut spread = opts.threads > 1;
    let mut local = visitor.local();
    shared.work(&mut local, &mut || {
      if spread && shared.seen.load(Ordering::Relaxed) > opts.spread_after {
        spread = false;
        for _ in 1..opts.threads {
          scope.spawn(|| {
            let mut local = visitor.local();
            shared.work(&mut local, &mut || {});
            visitor.done(local);
          });
        }
      }
    });
    visitor.done(local);
  });
  if shared.over_limit.load(Ordering::Relaxed) {
    End::OverLimit
  } else if ended_by_visitor.load(Ordering::Relaxed) {
    End::Visitor
  } else {
    End::Done
  }
}

struct Shared<'a, R: Rules, V> {
  queue: &'a Mutex<Queue<R::Node>>,
  ready: &'a Condvar,
  rules: &'a R,
  visitor: &'a V,
  stop: &'a AtomicBool,
  ended_by_visitor: &'a AtomicBool,
  /// Entries kept so far, all threads together.
  seen: AtomicUsize,
  max_entries: Option<usize>,
  over_limit: AtomicBool,
  settled_dev: Option<u64>,
}

impl<R: Rules, V: Visitor> Shared<'_, R, V> {
  fn lock(&self) -> std::sync::MutexGuard<'_, Queue<R::Node>> {
    self.queue.lock().unwrap_or_else(|e| e.into_inner())
  }

  fn end(&self) {
    let mut q = self.lock();
    q.ended = true;
    q.pending.clear();
  }

  /// Takes directories off the queue until none is left and no thread is reading one (then every
  /// thread ends). `progress()` is called after each directory.
  fn work(&self, local: &mut V::Local, progress: &mut dyn FnMut()) {
    let mut buf = take_buffer();
    let mut subdirs: Vec<Pending<R::Node>> = Vec::new();
    loop {
      let next = {
        let mut q = self.lock();
        loop {
          if self.stop.load(Ordering::Relaxed) {
            q.ended = true;
            q.pending.clear();
          }
          if let Some(item) = q.pending.pop() {
            q.busy += 1;
            break Some(item);
          }
          if q.busy == 0 || q.ended {
            break None;
          }
          q.waiting += 1;
          q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner());
          q.waiting -= 1;
        }
      };
      let Some(item) = next else {
        if self.lock().waiting > 0 {
          self.ready.notify_all();
        }
        give_buffer(buf);
        return;
      };
      self.read(local, item, &mut buf, &mut subdirs);
      let mut q = self.lock();
      if !q.ended {
        q.pending.append(&mut subdirs);
      }
      subdirs.clear();
      q.busy -= 1;
      let wake = q.waiting > 0;
      drop(q);
      if wake {
        self.ready.notify_all();
      }
      progress();
    }
  }

  /// Counts a kept entry; `false` once past `max_entries` (the walk is then ended).
  fn count(&self) -> bool {
    let n = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
    if self.max_entries.is_some_and(|max| n > max) {
      self.over_limit.store(true, Ordering::Relaxed);
      self.end();
      return false;
    }
    true
  }

  /// Opens and lists one directory, visits its files and queues its subdirectories (in
  /// `subdirs`).
  fn read(
    &self,
    local: &mut V::Local,
    item: Pending<R::Node>,
    buf: &mut [u8],
    subdirs: &mut Vec<Pending<R::Node>>,
  ) {
    let Pending { source, at, parent } = item;
    let dir = match source {
      Source::Open(d) => d,
      Source::Child(p, name) => match p.open_dir(&name) {
        Ok(d) => d,
        // Removed, or swapped for a symlink or a file since it was listed: it is no longer this
        // directory, and whatever is there now is not walked.
        Err(e)
          if matches!(
            e.raw_os_error(),
            Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ELOOP)
          ) =>
        {
          return
        }
        Err(e) => {
          if !self.visitor.dir_error(local, &at, e) {
            self.ended_by_visitor.store(true, Ordering::Relaxed);
            self.end();
          }
          return;
        }
      },
    };
    let listing = match Listing::read_kept(&dir, buf, self.settled_dev) {
      Ok(l) => l,
      Err(e) => {
        if !self.visitor.dir_error(local, &at, e) {
          self.ended_by_visitor.store(true, Ordering::Relaxed);
          self.end();
        }
        return;
      }
    };
    let node = self.rules.node(&parent, &dir, &at, &listing);
    let dir = Arc::new(dir);
    for (name, d_type) in listing.iter() {
      if self.stop.load(Ordering::Relaxed) {
        self.end();
        break;
      }
      let kind = kind_of(&dir, name, d_type);
      match kind {
        Kind::Dir if !self.rules.skip(&node, &at, name, true) => {
          if !self.count() {
            break;
          }
          let Ok(c) = CString::new(name) else { continue };
          subdirs.push(Pending {
            source: Source::Child(dir.clone(), c),
            at: at.child(name),
            parent: node.clone(),
          });
        }
        Kind::File if !self.rules.skip(&node, &at, name, false) => {
          if !self.count() {
            break;
          }
          if !self.visitor.file(local, &dir, &at, name) {
            self.ended_by_visitor.store(true, Ordering::Relaxed);
            self.end();
            break;
          }
        }
        _ => {}
      }
    }
  }
}
