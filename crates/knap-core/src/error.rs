//! One error type with a stable code. The binding turns it into a JS `Error` whose `message`
//! is the reference's text and whose `code` is `code`.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
  /// Stable code: a `cave_*` code, an errno name (`ENOENT`, `EEXIST`), or `caveman_code`.
  pub code: String,
  /// The exact message the reference produces.
  pub message: String,
}

impl ToolError {
  pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
    Self { code: code.into(), message: message.into() }
  }

  /// A `caveman-code: …` tool error (reference texts thrown by the shell tools).
  pub fn caveman(message: impl fmt::Display) -> Self {
    Self::new("caveman_code", format!("caveman-code: {message}"))
  }

  /// An error whose message is its own code (`cave_shell_tool_unknown:x`, …).
  pub fn coded(code: impl Into<String>) -> Self {
    let code = code.into();
    Self { message: code.clone(), code }
  }

  /// Node-style errno error: `ENOENT: no such file or directory, open '<path>'`.
  pub fn from_io(err: &std::io::Error, syscall: &str, path: &std::path::Path) -> Self {
    let (code, text) = errno_text(err);
    Self::new(code, format!("{code}: {text}, {syscall} '{}'", path.display()))
  }
}

impl fmt::Display for ToolError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(&self.message)
  }
}

impl std::error::Error for ToolError {}

/// libuv's errno names and texts, so file errors read like Node's `fs` errors.
fn errno_text(err: &std::io::Error) -> (&'static str, String) {
  let raw = err.raw_os_error().unwrap_or(0);
  let pair = match raw {
    libc::ENOENT => ("ENOENT", "no such file or directory"),
    libc::EEXIST => ("EEXIST", "file already exists"),
    libc::EISDIR => ("EISDIR", "illegal operation on a directory"),
    libc::ENOTDIR => ("ENOTDIR", "not a directory"),
    libc::EACCES => ("EACCES", "permission denied"),
    libc::EPERM => ("EPERM", "operation not permitted"),
    libc::ELOOP => ("ELOOP", "too many symbolic links encountered"),
    libc::ENOSPC => ("ENOSPC", "no space left on device"),
    libc::EROFS => ("EROFS", "read-only file system"),
    libc::ENAMETOOLONG => ("ENAMETOOLONG", "name too long"),
    libc::EMFILE => ("EMFILE", "too many open files"),
    _ => ("EIO", ""),
  };
  if pair.1.is_empty() {
    ("EIO", err.to_string())
  } else {
    (pair.0, pair.1.to_string())
  }
}
