//! One error type with a stable code. The binding turns it into a JS `Error` whose `message`
//! is the reference's text and whose `code` is `code`.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
  /// Stable code: a `cave_*` code (see [`Caveman`]) or an errno name (`ENOENT`, `EEXIST`).
  pub code: String,
  /// The exact message the reference produces.
  pub message: String,
}

impl ToolError {
  pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
    Self {
      code: code.into(),
      message: message.into(),
    }
  }

  /// A `caveman-code: …` tool error: the reference's text with its own stable code.
  pub fn caveman(error: Caveman) -> Self {
    Self::new(error.code(), format!("caveman-code: {}", error.text()))
  }

  /// An error whose message is its own code (`cave_shell_tool_unknown:x`, …).
  pub fn coded(code: impl Into<String>) -> Self {
    let code = code.into();
    Self {
      message: code.clone(),
      code,
    }
  }

  /// Adds what to do as a second message line, `hint: …` (JS `error.hint`); the first line,
  /// the reference's text, stays as it is.
  pub fn with_hint(mut self, hint: impl AsRef<str>) -> Self {
    self.message.push_str("\nhint: ");
    self.message.push_str(hint.as_ref());
    self
  }

  /// Node-style errno error: `ENOENT: no such file or directory, open '<path>'`.
  pub fn from_io(err: &std::io::Error, syscall: &str, path: &std::path::Path) -> Self {
    let (code, text) = errno_text(err);
    Self::new(code, format!("{code}: {text}, {syscall} '{}'", crate::workspace::path_text(path)))
  }
}

/// Every `caveman-code: …` error the shell tools raise. Each has a stable `code` (what JS sees as
/// `error.code`) and the reference's exact text (the `message` after `caveman-code: `).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caveman {
  /// `path escapes the workspace: <path as given>`
  WorkspaceEscape(String),
  /// `not a file: <path as given>` (read_file of a directory, FIFO, device)
  NotAFile(String),
  /// knap only (Node rejects a NUL before any syscall; the rest are knap's limits): a path no
  /// tool accepts, with a second line saying what to do. One code for every tool.
  PathInvalid(PathProblem),
  /// `old_string and new_string are identical`
  EditIdentical,
  /// `old_string not found in <path>`
  EditNotFound(String),
  /// `old_string appears <n> times in <path>; add surrounding context or pass replace_all`
  EditAmbiguous { path: String, count: usize },
  /// `old_string must not be empty` (knap only: the reference does not guard it)
  EditEmptyOldString,
  /// `file too large to edit: <path> (<n> bytes)` (knap only: edits are held in memory)
  EditFileTooLarge { path: String, bytes: u64 },
  /// `tool output handle is unknown or evicted`
  ToolOutputHandleUnknown,
  /// `read_tool_output offset must be a non-negative integer`
  ToolOutputOffsetInvalid,
  /// `read_tool_output limit must be a positive integer`
  ToolOutputLimitInvalid,
  /// `read_tool_output query must not be empty`
  ToolOutputQueryEmpty,
  /// `host command shell is not available`
  ShellUnavailable,
  /// `neither rg nor grep is available` (grep on a non-local backend)
  SearchUnavailable,
}

/// Why a path was refused before any file system call (`cave_path_invalid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathProblem {
  /// A NUL byte: no system call can take it.
  Nul,
  /// More than [`crate::limits::PATH_MAX_BYTES`] bytes.
  TooLong { bytes: usize },
  /// More than [`crate::limits::PATH_MAX_COMPONENTS`] components.
  TooDeep { components: usize },
}

impl PathProblem {
  fn text(&self) -> String {
    use crate::limits::{PATH_MAX_BYTES, PATH_MAX_COMPONENTS};
    match self {
      PathProblem::Nul => "path contains a NUL byte\nhint: remove the NUL (\\0) character from the path; \
        no file name can contain one"
        .to_string(),
      PathProblem::TooLong { bytes } => format!(
        "path is too long: {bytes} bytes (at most {PATH_MAX_BYTES})\nhint: pass a shorter path, \
         relative to the workspace"
      ),
      PathProblem::TooDeep { components } => format!(
        "path has too many components: {components} (at most {PATH_MAX_COMPONENTS})\nhint: pass a \
         path with fewer directories, relative to the workspace"
      ),
    }
  }
}

impl Caveman {
  pub fn code(&self) -> &'static str {
    match self {
      Caveman::WorkspaceEscape(_) => "cave_workspace_escape",
      Caveman::NotAFile(_) => "cave_not_a_file",
      Caveman::PathInvalid(_) => "cave_path_invalid",
      Caveman::EditIdentical => "cave_edit_identical",
      Caveman::EditNotFound(_) => "cave_edit_not_found",
      Caveman::EditAmbiguous { .. } => "cave_edit_ambiguous",
      Caveman::EditEmptyOldString => "cave_edit_empty_old_string",
      Caveman::EditFileTooLarge { .. } => "cave_edit_file_too_large",
      Caveman::ToolOutputHandleUnknown => "cave_tool_output_handle_unknown",
      Caveman::ToolOutputOffsetInvalid => "cave_tool_output_offset_invalid",
      Caveman::ToolOutputLimitInvalid => "cave_tool_output_limit_invalid",
      Caveman::ToolOutputQueryEmpty => "cave_tool_output_query_empty",
      Caveman::ShellUnavailable => "cave_shell_unavailable",
      Caveman::SearchUnavailable => "cave_search_unavailable",
    }
  }

  /// The reference's text, without the `caveman-code: ` prefix.
  pub fn text(&self) -> String {
    match self {
      Caveman::WorkspaceEscape(path) => format!("path escapes the workspace: {path}"),
      Caveman::NotAFile(path) => format!("not a file: {path}"),
      Caveman::PathInvalid(problem) => problem.text(),
      Caveman::EditIdentical => "old_string and new_string are identical".to_string(),
      Caveman::EditNotFound(path) => format!("old_string not found in {path}"),
      Caveman::EditAmbiguous { path, count } => {
        format!("old_string appears {count} times in {path}; add surrounding context or pass replace_all")
      }
      Caveman::EditEmptyOldString => "old_string must not be empty".to_string(),
      Caveman::EditFileTooLarge { path, bytes } => format!("file too large to edit: {path} ({bytes} bytes)"),
      Caveman::ToolOutputHandleUnknown => "tool output handle is unknown or evicted".to_string(),
      Caveman::ToolOutputOffsetInvalid => {
        "read_tool_output offset must be a non-negative integer".to_string()
      }
      Caveman::ToolOutputLimitInvalid => "read_tool_output limit must be a positive integer".to_string(),
      Caveman::ToolOutputQueryEmpty => "read_tool_output query must not be empty".to_string(),
      Caveman::ShellUnavailable => "host command shell is not available".to_string(),
      Caveman::SearchUnavailable => "neither rg nor grep is available".to_string(),
    }
  }
}

impl From<Caveman> for ToolError {
  fn from(error: Caveman) -> Self {
    ToolError::caveman(error)
  }
}

impl fmt::Display for ToolError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(&self.message)
  }
}

impl std::error::Error for ToolError {}

/// libuv's name of an errno (`ENOENT`), as Node puts it in `error.code`.
pub fn errno_name(err: &std::io::Error) -> &'static str {
  errno_text(err).0
}

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
    libc::EINVAL => ("EINVAL", "invalid argument"),
    libc::EBUSY => ("EBUSY", "resource busy or locked"),
    libc::ETXTBSY => ("ETXTBSY", "text file is busy"),
    libc::EXDEV => ("EXDEV", "cross-device link not permitted"),
    libc::EIO => ("EIO", "i/o error"),
    // libuv's name for an error it has no name for; the OS text says what happened.
    _ => ("UNKNOWN", ""),
  };
  if pair.1.is_empty() {
    (pair.0, err.to_string())
  } else {
    (pair.0, pair.1.to_string())
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn caveman_errors_have_distinct_stable_codes_and_reference_texts() {
    let all = [
      Caveman::WorkspaceEscape("../x".into()),
      Caveman::NotAFile("d".into()),
      Caveman::PathInvalid(PathProblem::Nul),
      Caveman::EditIdentical,
      Caveman::EditNotFound("a.txt".into()),
      Caveman::EditAmbiguous {
        path: "a.txt".into(),
        count: 2,
      },
      Caveman::EditEmptyOldString,
      Caveman::EditFileTooLarge {
        path: "a".into(),
        bytes: 9,
      },
      Caveman::ToolOutputHandleUnknown,
      Caveman::ToolOutputOffsetInvalid,
      Caveman::ToolOutputLimitInvalid,
      Caveman::ToolOutputQueryEmpty,
      Caveman::ShellUnavailable,
      Caveman::SearchUnavailable,
    ];
    let codes: std::collections::HashSet<_> = all.iter().map(|e| e.code()).collect();
    assert_eq!(codes.len(), all.len(), "every error has its own code");
    assert!(codes
      .iter()
      .all(|c| c.starts_with("cave_") && c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
    let e = ToolError::from(Caveman::EditAmbiguous {
      path: "a.txt".into(),
      count: 2,
    });
    assert_eq!(e.code, "cave_edit_ambiguous");
    assert_eq!(
      e.message,
      "caveman-code: old_string appears 2 times in a.txt; add surrounding context or pass replace_all"
    );
    let e = ToolError::from(Caveman::WorkspaceEscape("../secret.txt".into()));
    assert_eq!(
      e.message,
      "caveman-code: path escapes the workspace: ../secret.txt"
    );
  }

  #[test]
  fn errno_errors_read_like_node() {
    let e = ToolError::from_io(
      &std::io::Error::from_raw_os_error(libc::EEXIST),
      "open",
      std::path::Path::new("/w/a"),
    );
    assert_eq!(e.code, "EEXIST");
    assert_eq!(e.message, "EEXIST: file already exists, open '/w/a'");
    let e = ToolError::from_io(
      &std::io::Error::from_raw_os_error(libc::ENOENT),
      "stat",
      std::path::Path::new("/w/b"),
    );
    assert_eq!(e.message, "ENOENT: no such file or directory, stat '/w/b'");
  }
}
