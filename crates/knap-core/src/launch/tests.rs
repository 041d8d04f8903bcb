use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::*;

struct Running {
  child: tokio::process::Child,
  handle: Arc<Contained>,
}

fn start(script: &str, lifetime: Lifetime) -> Running {
  let mut cmd = tokio::process::Command::new("/bin/sh");
  cmd
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
  let env = vec![("PATH".to_string(), std::env::var("PATH").unwrap_or_default())];
  let pending = contain(&mut cmd, Path::new("/bin/sh"), &["-c".into(), script.into()], &env, lifetime).unwrap();
  let child = cmd.spawn().unwrap();
  let handle = pending.started(child.id().unwrap());
  Running { child, handle }
}

impl Running {
  /// Waits for the launcher, then reads all output (to EOF).
  async fn finish(mut self) -> (std::process::ExitStatus, String, Arc<Contained>) {
    let mut out = self.child.stdout.take().unwrap();
    let reader = tokio::spawn(async move {
      let mut s = String::new();
      out.read_to_string(&mut s).await.unwrap();
      s
    });
    let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
      .await
      .expect("the launcher exits")
      .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(60), reader)
      .await
      .expect("the pipes reach EOF")
      .unwrap();
    (status, out, self.handle)
  }
}

fn alive(pid: i32) -> bool {
  // Zombies do not count: a process the launcher killed is reaped by it.
  match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
    Ok(s) => !matches!(s.rsplit(')').next().map(|r| r.trim_start().as_bytes()[0]), Some(b'Z') | Some(b'X')),
    Err(_) => false,
  }
}

fn pids(out: &str) -> Vec<i32> {
  out.split_whitespace().filter_map(|w| w.parse().ok()).collect()
}

/// Daemons of every kind: `&`, `setsid`, `setsid -f`, a double fork, a `nohup` in a subshell.
const DAEMONS: &str = "sleep 300 & echo $!; \
  setsid sleep 301 & echo $!; \
  (setsid -f sh -c 'echo $$; exec sleep 302'); \
  (sh -c 'sleep 303 & echo $!' &) ; \
  (nohup sleep 304 >/dev/null 2>&1 & echo $!); sleep 0.3";

#[tokio::test]
async fn exit_code_and_signal_are_mirrored() {
  let (status, out, handle) = start("echo hi; exit 7", Lifetime::Call).finish().await;
  assert_eq!(status.code(), Some(7));
  assert_eq!(out, "hi\n");
  assert!(handle.swept(), "the launcher reports its sweep");
  let (status, _, _) = start("kill -TERM $$", Lifetime::Call).finish().await;
  assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGTERM));
}

#[tokio::test]
async fn daemons_die_when_the_shell_exits() {
  let (status, out, _) = start(DAEMONS, Lifetime::Call).finish().await;
  assert_eq!(status.code(), Some(0));
  let started = pids(&out);
  assert_eq!(started.len(), 5, "{out}");
  for pid in started {
    assert!(!alive(pid), "pid {pid} survived its call");
  }
}

#[tokio::test]
async fn kill_ends_daemons_of_a_running_command() {
  let mut r = start(&format!("{DAEMONS}; echo ready; sleep 600"), Lifetime::Call);
  let mut out = r.child.stdout.take().unwrap();
  let mut seen = String::new();
  let mut buf = [0u8; 256];
  while !seen.contains("ready") {
    let n = out.read(&mut buf).await.unwrap();
    assert!(n > 0);
    seen.push_str(std::str::from_utf8(&buf[..n]).unwrap());
  }
  r.handle.kill();
  let status = tokio::time::timeout(Duration::from_secs(60), r.child.wait()).await.unwrap().unwrap();
  assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));
  for pid in pids(&seen) {
    assert!(!alive(pid), "pid {pid} survived the kill");
  }
  assert!(r.handle.swept());
}

#[tokio::test]
async fn background_processes_outlive_the_shell_until_killed() {
  let mut r = start("setsid sleep 305 >/dev/null 2>&1 & echo $!", Lifetime::Background);
  let mut out = r.child.stdout.take().unwrap();
  let mut s = String::new();
  out.read_to_string(&mut s).await.unwrap();
  let pid = pids(&s)[0];
  // The shell has exited; the launcher stays while the daemon lives.
  tokio::time::sleep(Duration::from_millis(200)).await;
  assert!(alive(pid));
  assert!(r.child.try_wait().unwrap().is_none(), "the launcher waits for its survivors");
  r.handle.kill();
  tokio::time::timeout(Duration::from_secs(60), r.child.wait()).await.unwrap().unwrap();
  assert!(!alive(pid));
}

#[tokio::test]
async fn dropping_the_handle_kills() {
  let mut r = start("sleep 600 & echo $!; wait", Lifetime::Call);
  let mut out = r.child.stdout.take().unwrap();
  let mut buf = [0u8; 64];
  let n = out.read(&mut buf).await.unwrap();
  let pid = pids(std::str::from_utf8(&buf[..n]).unwrap())[0];
  drop(r.handle);
  tokio::time::timeout(Duration::from_secs(60), r.child.wait()).await.unwrap().unwrap();
  assert!(!alive(pid));
}

#[tokio::test]
async fn a_scope_closes_all_its_commands() {
  let scope = Scope::new();
  let mut a = start("sleep 600", Lifetime::Call);
  let mut b = start("sleep 600", Lifetime::Background);
  assert!(scope.adopt(&a.handle) && scope.adopt(&b.handle));
  scope.close();
  for child in [&mut a.child, &mut b.child] {
    tokio::time::timeout(Duration::from_secs(60), child.wait()).await.unwrap().unwrap();
  }
  let c = start("sleep 600", Lifetime::Call);
  assert!(!scope.adopt(&c.handle), "a closed scope refuses and kills");
  c.finish().await;
}

#[tokio::test]
async fn the_command_cannot_read_its_launchers_or_knaps_environment() {
  // This process holds a secret in its environment block (set by the parent of `cargo test`
  // or not: the check is on what the files give, not on their content).
  let me = std::process::id();
  let script = format!(
    "for p in $PPID {me}; do if cat /proc/$p/environ >/dev/null 2>&1; then echo readable $p; fi; \
     if head -c 1 /proc/$p/mem >/dev/null 2>&1; then echo mem $p; fi; done; echo done"
  );
  let (_, out, _) = start(&script, Lifetime::Call).finish().await;
  assert_eq!(out.trim(), "done", "{out}");
  // And nothing outside the bounding set comes back as root.
  let (_, caps, _) = start("grep CapBnd /proc/self/status", Lifetime::Call).finish().await;
  if unsafe { libc::geteuid() } == 0 {
    let bnd = u64::from_str_radix(caps.split_whitespace().nth(1).unwrap(), 16).unwrap();
    assert_eq!(bnd & (1 << 19), 0, "CAP_SYS_PTRACE dropped: {caps}");
    assert_eq!(bnd & (1 << 21), 0, "CAP_SYS_ADMIN dropped: {caps}");
  }
}

#[tokio::test]
async fn a_missing_program_exits_127() {
  let mut cmd = tokio::process::Command::new("/nonexistent/knap-shell");
  cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
  let pending = contain(&mut cmd, Path::new("/nonexistent/knap-shell"), &[], &[], Lifetime::Call).unwrap();
  let mut child = cmd.spawn().unwrap();
  let _h = pending.started(child.id().unwrap());
  assert_eq!(child.wait().await.unwrap().code(), Some(127));
}
