//! How every command knap runs on this host is started, contained and ended: one mechanism
//! for `bash`, the AI SDK sandbox's `exec` and command sessions.
//!
//! The process knap spawns is a small **launcher** (forked from knap, never exec'd) that runs the
//! real program as its only child and supervises it:
//!
//! - it is a child subreaper (`PR_SET_CHILD_SUBREAPER`), so everything the command starts stays
//!   below it: a daemon that `setsid`s, `setsid -f`s or double-forks is re-parented to the
//!   launcher when its parent exits, never to init;
//! - when the command's shell exits ([`Lifetime::Call`]), when knap drops or kills the
//!   [`Contained`] handle (timeout, abort, `close()`), or when knap itself dies, it SIGKILLs its
//!   children until none is left (each killed child's own children are re-parented to it, so the
//!   sweep reaches the whole tree), then exits as the shell did (same code or signal);
//! - [`Lifetime::Background`] keeps the command's processes alive after the shell exits, until
//!   the handle is killed or dropped (explicitly backgrounded runs);
//! - it writes one byte on the handle's socket once its sweep is done, so knap knows no process of
//!   the command can still hold its output pipes and drains them to EOF without a deadline.
//!
//! Secrets: the launcher and knap's own process are made non-dumpable (`PR_SET_DUMPABLE` 0), so a
//! command cannot read their `/proc/<pid>/environ` or memory (`cat /proc/$PPID/environ`, `ps e`,
//! `/proc/<pid>/mem`), and a command that runs as root loses the capabilities that would get
//! around that (`CAP_SYS_PTRACE`, `CAP_SYS_ADMIN`, `CAP_BPF`, `CAP_PERFMON`, `CAP_SYS_MODULE`,
//! `CAP_SYS_RAWIO`, `CAP_CHECKPOINT_RESTORE`) from its bounding set. `KNAP_DUMPABLE=1` in
//! knap's environment keeps knap's process dumpable (for debuggers; commands can then read it).
//!
//! Everything the launcher does after the fork is a plain system call on memory prepared before
//! it (no allocation, no locks), as a forked copy of a multi-threaded process requires.

use std::ffi::{c_char, c_int, c_void, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, Once};

/// Whether a command's processes may outlive its shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
  /// Everything the command started dies when its shell exits (and on kill/drop).
  Call,
  /// The command's processes outlive its shell, until the handle is killed or dropped.
  Background,
}

/// knap's end of a running command. Dropping it (or [`Contained::kill`]) makes the launcher
/// SIGKILL every process the command started.
#[derive(Debug)]
pub struct Contained {
  sock: OwnedFd,
  /// The launcher's pid (the process knap spawned).
  pid: u32,
  swept: std::sync::atomic::AtomicBool,
}

impl Contained {
  pub fn pid(&self) -> u32 {
    self.pid
  }

  /// Kills the command and everything it started (idempotent). The launcher does the killing
  /// and then exits; wait for the spawned child as usual.
  pub fn kill(&self) {
    // End of stream on the launcher's side; knap's side stays readable for the report.
    // SAFETY: valid socket descriptor.
    unsafe { libc::shutdown(self.sock.as_raw_fd(), libc::SHUT_WR) };
    // A launcher stopped by the command (`kill -STOP $PPID`) would never see the hangup.
    // SAFETY: plain syscall on the launcher's pid, which cannot be reused before it is reaped.
    unsafe { libc::kill(self.pid as i32, libc::SIGCONT) };
  }

  /// True once the launcher reported that no process of the command is left (so nobody else
  /// holds the output pipes). Call after the spawned child has exited.
  pub fn swept(&self) -> bool {
    use std::sync::atomic::Ordering;
    if self.swept.load(Ordering::Acquire) {
      return true;
    }
    let mut b = [0u8; 1];
    // SAFETY: valid fd, 1-byte buffer; non-blocking read.
    let n = unsafe { libc::recv(self.sock.as_raw_fd(), b.as_mut_ptr().cast(), 1, libc::MSG_DONTWAIT) };
    let swept = n == 1 && b[0] == SWEPT;
    if swept {
      self.swept.store(true, Ordering::Release);
    }
    swept
  }
}

/// A set of running commands that can all be killed at once: a `shellTools()` tool set's or a
/// sandbox's `close()`.
#[derive(Debug, Default, Clone)]
pub struct Scope {
  inner: Arc<Mutex<ScopeState>>,
}

#[derive(Debug, Default)]
struct ScopeState {
  closed: bool,
  /// Held strongly: dropping a handle kills its command.
  live: Vec<Arc<Contained>>,
}

impl Scope {
  pub fn new() -> Self {
    Self::default()
  }

  /// Keeps a running command until [`Scope::forget`] or [`Scope::close`]; false (and the
  /// command is killed) when the scope is closed.
  pub fn adopt(&self, c: &Arc<Contained>) -> bool {
    let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
    if s.closed {
      c.kill();
      return false;
    }
    s.live.push(c.clone());
    true
  }

  /// Lets go of a command whose launcher has exited.
  pub fn forget(&self, c: &Arc<Contained>) {
    let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
    s.live.retain(|x| !Arc::ptr_eq(x, c));
  }

  /// Kills every command of the scope still running and refuses new ones.
  pub fn close(&self) {
    let live = {
      let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
      s.closed = true;
      std::mem::take(&mut s.live)
    };
    for c in &live {
      c.kill();
    }
  }

  pub fn is_closed(&self) -> bool {
    self.inner.lock().unwrap_or_else(|e| e.into_inner()).closed
  }
}

/// A token cancelled when either of two is: a call's abort joined with its tool set's `close()`.
///
/// The call's side is the token tree (`token` is a child of the call's token). The `close()`
/// side is watched inside the call's own future ([`Linked::watch`]), not by a spawned task:
/// spawning and aborting a task per call woke a runtime worker twice per tool call (an eventfd
/// write and futex hand-offs), which cost more than a small `read_file` itself.
pub struct Linked {
  pub token: tokio_util::sync::CancellationToken,
  closed: tokio_util::sync::CancellationToken,
}

/// Joins `call` and `closed`.
pub fn link(
  call: &tokio_util::sync::CancellationToken,
  closed: &tokio_util::sync::CancellationToken,
) -> Linked {
  let token = call.child_token();
  if closed.is_cancelled() {
    token.cancel();
  }
  Linked {
    token,
    closed: closed.clone(),
  }
}

impl Linked {
  /// Runs `work` while watching `closed`: when it fires, `token` is cancelled and `work` is
  /// still polled to its end (a command kills its process group and reports the abort).
  pub async fn watch<T>(&self, work: impl std::future::Future<Output = T>) -> T {
    let fire = async {
      self.closed.cancelled().await;
      self.token.cancel();
      std::future::pending::<()>().await
    };
    tokio::pin!(work);
    tokio::pin!(fire);
    tokio::select! {
      biased;
      out = &mut work => out,
      _ = &mut fire => unreachable!("`fire` never completes"),
    }
  }

  /// Keeps the link after the call (for a token that outlives it, such as the one a command
  /// session watches): a task watches `closed` until either token fires (needs a tokio runtime).
  pub fn detach(self) {
    let Linked { token, closed } = self;
    if token.is_cancelled() {
      return;
    }
    tokio::spawn(async move {
      tokio::select! {
        _ = closed.cancelled() => token.cancel(),
        _ = token.cancelled() => {}
      }
    });
  }
}

/// What the launcher writes once its sweep is done.
const SWEPT: u8 = b'S';

/// Capabilities a root command loses: each would let it read a non-dumpable process's memory
/// or environment, or undo that protection.
const DROPPED_CAPS: [c_int; 7] = [
  16, // CAP_SYS_MODULE
  17, // CAP_SYS_RAWIO
  19, // CAP_SYS_PTRACE
  21, // CAP_SYS_ADMIN
  38, // CAP_PERFMON
  39, // CAP_BPF
  40, // CAP_CHECKPOINT_RESTORE
];

static HIDE_KNAP: Once = Once::new();

/// Makes knap's own process non-dumpable (once), unless `KNAP_DUMPABLE=1`. Also called before
/// sandbox worker processes start (lib/sandbox.mjs): a worker of the same (non-root) user then
/// cannot read knap's `/proc/<pid>/environ` or memory either.
pub fn hide_knap_process() {
  HIDE_KNAP.call_once(|| {
    if std::env::var_os("KNAP_DUMPABLE").is_some_and(|v| v == "1") {
      return;
    }
    // SAFETY: plain prctl on this process.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
  });
}

/// Everything the launcher and the command's exec need, built before the fork.
struct Spec {
  program: CString,
  argv: Vec<*const c_char>,
  envp: Vec<*const c_char>,
  _strings: Vec<CString>,
  sock: RawFd,
  lifetime: Lifetime,
  drop_caps: bool,
  /// The stack the command's process runs on between `clone` and `execve`.
  stack: Vec<u8>,
}

// SAFETY: the raw pointers point into `_strings`, owned by the same value, and are only read.
unsafe impl Send for Spec {}
unsafe impl Sync for Spec {}

/// Prepares `cmd` (already given its stdio, cwd, process group) to run `program args` with
/// exactly `env`, contained by a launcher. Spawn `cmd` next, then call [`Pending::started`]
/// with the child's pid.
pub fn contain(
  cmd: &mut tokio::process::Command,
  program: &Path,
  args: &[String],
  env: &[(String, String)],
  lifetime: Lifetime,
) -> io::Result<Pending> {
  hide_knap_process();
  let invalid = || io::Error::from_raw_os_error(libc::EINVAL);
  let program_c = CString::new(program.as_os_str().as_bytes()).map_err(|_| invalid())?;
  let mut strings = Vec::with_capacity(args.len() + env.len() + 1);
  strings.push(program_c.clone());
  for a in args {
    strings.push(CString::new(a.as_bytes()).map_err(|_| invalid())?);
  }
  let argc = strings.len();
  for (k, v) in env {
    strings.push(CString::new(format!("{k}={v}")).map_err(|_| invalid())?);
  }
  let mut argv: Vec<*const c_char> = strings[..argc].iter().map(|s| s.as_ptr()).collect();
  argv.push(std::ptr::null());
  let mut envp: Vec<*const c_char> = strings[argc..].iter().map(|s| s.as_ptr()).collect();
  envp.push(std::ptr::null());
  let mut fds = [0 as c_int; 2];
  // SAFETY: fds is a writable array of two ints.
  if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: fresh descriptors owned from here on.
  let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
  let spec = Arc::new(Spec {
    program: program_c,
    argv,
    envp,
    _strings: strings,
    sock: theirs.as_raw_fd(),
    lifetime,
    // SAFETY: plain syscall.
    drop_caps: unsafe { libc::geteuid() } == 0,
    stack: vec![0u8; 64 * 1024],
  });
  let in_child = spec.clone();
  // SAFETY: the closure runs in the forked child and never returns: it only makes system calls
  // on memory prepared above (see `launcher`).
  unsafe {
    cmd.pre_exec(move || launcher(&in_child));
  }
  Ok(Pending {
    ours,
    _theirs: theirs,
    _spec: spec,
  })
}

/// A command prepared by [`contain`], not spawned yet.
pub struct Pending {
  ours: OwnedFd,
  /// The launcher's end, closed in knap once the spawn is done.
  _theirs: OwnedFd,
  _spec: Arc<Spec>,
}

impl Pending {
  /// The spawn succeeded: the handle of the running command.
  pub fn started(self, pid: u32) -> Arc<Contained> {
    Arc::new(Contained {
      sock: self.ours,
      pid,
      swept: Default::default(),
    })
  }
}

fn blocked_signals() -> libc::sigset_t {
  // SAFETY: sigset manipulation on a local value.
  unsafe {
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    for s in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
      libc::sigaddset(&mut set, s);
    }
    set
  }
}

/// The launcher: runs in the process `spawn` forked, never returns.
///
/// # Safety
/// Only call in a freshly forked child; it ends the process.
unsafe fn launcher(spec: &Spec) -> io::Result<()> {
  let me = libc::getpid();
  // Nothing of knap's but the socket and stdio stays open here (other commands' sockets, the
  // runtime's descriptors, std's exec-error pipe: closing it tells knap the spawn is done).
  close_all_but(spec.sock);
  let set = blocked_signals();
  libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
  libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
  // The command's process runs on this buffer until its exec (the launcher is suspended).
  let top = spec.stack.as_ptr().add(spec.stack.len()) as usize & !15;
  let child = libc::clone(
    command_main,
    top as *mut c_void,
    libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
    spec as *const Spec as *mut c_void,
  );
  if child < 0 {
    libc::_exit(127);
  }
  // The launcher holds neither the command's input nor its output pipes.
  let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
  if null >= 0 {
    for fd in 0..3 {
      libc::dup2(null, fd);
    }
    if null > 2 {
      libc::close(null);
    }
  }
  let sfd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
  let mut status: Option<c_int> = None;
  loop {
    let mut fds = [
      libc::pollfd {
        fd: spec.sock,
        events: libc::POLLIN,
        revents: 0,
      },
      libc::pollfd {
        fd: sfd,
        events: libc::POLLIN,
        revents: 0,
      },
    ];
    let n = libc::poll(fds.as_mut_ptr(), if sfd >= 0 { 2 } else { 1 }, if sfd >= 0 { -1 } else { 50 });
    if n < 0 {
      continue;
    }
    if fds[0].revents != 0 {
      // knap closed its end (kill, drop, close(), or knap died): sweep and go.
      sweep(me, child, &mut status);
      report_and_exit(spec.sock, libc::SIGKILL);
    }
    if sfd >= 0 && fds[1].revents & libc::POLLIN != 0 {
      let mut info: [libc::signalfd_siginfo; 8] = std::mem::zeroed();
      let r = libc::read(sfd, info.as_mut_ptr().cast(), std::mem::size_of_val(&info));
      let count = if r > 0 { r as usize / std::mem::size_of::<libc::signalfd_siginfo>() } else { 0 };
      if info[..count].iter().any(|i| i.ssi_signo as c_int != libc::SIGCHLD) {
        sweep(me, child, &mut status);
        report_and_exit(spec.sock, libc::SIGKILL);
      }
    }
    reap(child, &mut status);
    if let Some(st) = status {
      match spec.lifetime {
        Lifetime::Call => {
          sweep(me, child, &mut status);
          report_and_exit(spec.sock, st);
        }
        Lifetime::Background => {
          if no_children() {
            report_and_exit(spec.sock, st);
          }
        }
      }
    }
  }
}

/// The command's process between `clone` and `execve` (sharing the launcher's memory, which is
/// suspended until the exec).
extern "C" fn command_main(arg: *mut c_void) -> c_int {
  // SAFETY: `arg` is the `Spec` the launcher passed; only system calls follow.
  unsafe {
    let spec = &*(arg as *const Spec);
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    libc::close(spec.sock);
    // The shell leads a process group of its own (`$$` is its group id), as without a launcher.
    libc::setpgid(0, 0);
    // If the launcher is killed outright, the shell goes with it.
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    if spec.drop_caps {
      for cap in DROPPED_CAPS {
        libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
      }
    }
    libc::execve(spec.program.as_ptr(), spec.argv.as_ptr(), spec.envp.as_ptr());
    let msg = b"knap: the command's program could not be executed\n";
    libc::write(2, msg.as_ptr().cast(), msg.len());
    libc::_exit(127)
  }
}

unsafe fn close_all_but(keep: RawFd) {
  let ranges = [(3u32, keep as u32 - 1), (keep as u32 + 1, u32::MAX)];
  for (lo, hi) in ranges {
    if lo > hi {
      continue;
    }
    if libc::syscall(libc::SYS_close_range, lo, hi, 0) != 0 {
      // Kernels before 5.9: close what a process of default limits can have open.
      for fd in lo..hi.min(65_536) {
        libc::close(fd as c_int);
      }
    }
  }
}

/// Reaps every child that has exited, noting the command's status.
unsafe fn reap(child: c_int, status: &mut Option<c_int>) {
  loop {
    let mut st: c_int = 0;
    let r = libc::waitpid(-1, &mut st, libc::WNOHANG);
    if r <= 0 {
      return;
    }
    if r == child {
      *status = Some(st);
    }
  }
}

unsafe fn no_children() -> bool {
  let mut info: libc::siginfo_t = std::mem::zeroed();
  libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) != 0
    && *libc::__errno_location() == libc::ECHILD
}

/// SIGKILLs children until none is left: each one killed hands its own children to this
/// subreaper, so the whole tree goes, whatever sessions and groups it moved to.
unsafe fn sweep(me: c_int, child: c_int, status: &mut Option<c_int>) {
  let mut pids = [0 as c_int; 512];
  loop {
    reap(child, status);
    if no_children() {
      return;
    }
    let n = children_of(me, &mut pids);
    if n == 0 {
      // Children exist but /proc cannot name them (not mounted): wait for one to go.
      let mut st: c_int = 0;
      let r = libc::waitpid(-1, &mut st, 0);
      if r == child {
        *status = Some(st);
      }
      if r < 0 {
        return;
      }
      continue;
    }
    for &pid in &pids[..n] {
      libc::kill(pid, libc::SIGKILL);
    }
    for &pid in &pids[..n] {
      let mut st: c_int = 0;
      if libc::waitpid(pid, &mut st, 0) == child {
        *status = Some(st);
      }
    }
  }
}

/// Exits as the command did (its code, or its signal re-raised), after writing the report.
unsafe fn report_and_exit(sock: RawFd, st: c_int) -> ! {
  let b = [SWEPT];
  libc::send(sock, b.as_ptr().cast(), 1, libc::MSG_NOSIGNAL);
  if libc::WIFEXITED(st) {
    libc::_exit(libc::WEXITSTATUS(st));
  }
  let sig = if libc::WIFSIGNALED(st) { libc::WTERMSIG(st) } else { libc::SIGKILL };
  libc::signal(sig, libc::SIG_DFL);
  let mut one: libc::sigset_t = std::mem::zeroed();
  libc::sigemptyset(&mut one);
  libc::sigaddset(&mut one, sig);
  libc::sigprocmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
  libc::kill(libc::getpid(), sig);
  libc::_exit(128 + sig)
}

/// The pids whose parent is `me`, read from `/proc/<pid>/stat` (at most `out.len()`).
unsafe fn children_of(me: c_int, out: &mut [c_int]) -> usize {
  let dir = libc::open(c"/proc".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
  if dir < 0 {
    return 0;
  }
  let mut found = 0;
  let mut buf = [0u8; 8192];
  'outer: loop {
    let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
    if n <= 0 {
      break;
    }
    let mut off = 0usize;
    while off < n as usize {
      // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
      let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
      let name = &buf[off + 19..off + reclen];
      off += reclen;
      let len = name.iter().position(|b| *b == 0).unwrap_or(name.len());
      let name = &name[..len];
      let Some(pid) = parse_int(name) else { continue };
      if pid == me {
        continue;
      }
      if parent_of(pid) == Some(me) {
        out[found] = pid;
        found += 1;
        if found == out.len() {
          break 'outer;
        }
      }
    }
  }
  libc::close(dir);
  found
}

fn parse_int(s: &[u8]) -> Option<c_int> {
  if s.is_empty() || s.len() > 9 || !s.iter().all(u8::is_ascii_digit) {
    return None;
  }
  Some(s.iter().fold(0, |acc, d| acc * 10 + (d - b'0') as c_int))
}

/// The ppid field of `/proc/<pid>/stat` (`pid (comm) state ppid …`; comm may hold anything, so
/// the fields start after the last `)`).
unsafe fn parent_of(pid: c_int) -> Option<c_int> {
  let mut path = *b"/proc/\0\0\0\0\0\0\0\0\0\0/stat\0\0";
  let mut digits = [0u8; 10];
  let mut n = 0;
  let mut p = pid;
  loop {
    digits[n] = b'0' + (p % 10) as u8;
    n += 1;
    p /= 10;
    if p == 0 {
      break;
    }
  }
  let mut at = 6;
  for i in (0..n).rev() {
    path[at] = digits[i];
    at += 1;
  }
  for &b in b"/stat\0" {
    path[at] = b;
    at += 1;
  }
  let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
  if fd < 0 {
    return None;
  }
  let mut buf = [0u8; 1024];
  let r = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
  libc::close(fd);
  if r <= 0 {
    return None;
  }
  let text = &buf[..r as usize];
  let close = text.iter().rposition(|b| *b == b')')?;
  // ") S 1234 "
  let rest = text.get(close + 2..)?;
  let rest = rest.get(2..)?;
  let end = rest.iter().position(|b| *b == b' ')?;
  parse_int(&rest[..end])
}

#[cfg(test)]
mod tests;
