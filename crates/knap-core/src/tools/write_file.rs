//! `write_file` and the one atomic-replace helper `edit_file` shares.

use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

use serde_json::Value;

use super::args::Args;
use super::{blocking, ShellToolName, ShellTools, ToolOutput};
use crate::cap::cap_output;
use crate::error::{Caveman, ToolError};
use crate::workspace::{openat, Resolved};

pub(super) async fn run(tools: &ShellTools, input: &Value) -> Result<ToolOutput, ToolError> {
  let args = Args::new("write_file", input)?;
  let path = args.string("path")?.to_string();
  let content = args.string("content")?.to_string();
  let overwrite = args.opt_bool("overwrite")? == Some(true);
  let resolved = tools.workspace().resolve(&path)?;
  let (dir, name) = tools.workspace().open_parent(&path, &resolved)?;
  let bytes = content.len();
  blocking(move || {
    if overwrite {
      replace_atomically(&dir, &name, content.as_bytes(), &resolved)
    } else {
      // `wx`: exclusive create; an existing path is EEXIST.
      let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW;
      let fd = openat(dir.as_raw_fd(), &name, flags, 0o666).map_err(|e| ToolError::from_io(&e, "open", &resolved.abs))?;
      write_all(fd, content.as_bytes(), &resolved)
    }
  })
  .await?;
  let text = cap_output(&format!("wrote {path}: {bytes} bytes"), tools.cap(ShellToolName::WriteFile));
  Ok(ToolOutput { text, label: None })
}

fn write_all(fd: OwnedFd, data: &[u8], resolved: &Resolved) -> Result<(), ToolError> {
  let mut file = std::fs::File::from(fd);
  file.write_all(data).map_err(|e| ToolError::from_io(&e, "write", &resolved.abs))
}

/// Writes `data` to a temporary sibling and renames it over `name`, so a crash or a full disk
/// never leaves a half-written file. An existing file keeps its permission bits.
pub(super) fn replace_atomically(dir: &OwnedFd, name: &CString, data: &[u8], resolved: &Resolved) -> Result<(), ToolError> {
  let io_err = |e: std::io::Error, syscall: &str| ToolError::from_io(&e, syscall, &resolved.abs);
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: valid dirfd, NUL-terminated name, writable stat buffer.
  let exists = unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0;
  if exists && (st.st_mode & libc::S_IFMT) == libc::S_IFDIR {
    return Err(io_err(std::io::Error::from_raw_os_error(libc::EISDIR), "open"));
  }
  let is_regular = exists && (st.st_mode & libc::S_IFMT) == libc::S_IFREG;
  // A regular file keeps its permission bits; anything else (a dangling symlink, which this
  // replaces instead of following out of the workspace) gets a new file's default mode.
  let mode = if is_regular { st.st_mode & 0o7777 } else { 0o666 };
  let tmp = CString::new(format!(".{}.knap-{}", name.to_string_lossy(), uuid::Uuid::new_v4().simple()))
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
  write_all(fd, data, resolved).map_err(cleanup)?;
  // SAFETY: both names are relative to the same valid directory descriptor.
  let rc = unsafe { libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), name.as_ptr()) };
  if rc != 0 {
    return Err(cleanup(io_err(std::io::Error::last_os_error(), "rename")));
  }
  Ok(())
}
