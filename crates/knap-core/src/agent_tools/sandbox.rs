//! The `Sandbox` trait: bashkit's interface (`exec`, `readFile`, `writeFile`, `readDir`,
//! `fileExists`, `isDirectory`, optional `deleteFile`/`rename`/`rgPath`). The AI SDK tools are
//! written against it. [`LocalSandbox`] implements it in Rust and also offers the native fast
//! paths (a streaming Read, the in-process searcher, the descriptor-walking glob, a head+tail
//! Bash capture); a user's own JS sandbox object implements it in the binding, over typed
//! threadsafe functions.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::exec::BoxFuture;
use crate::sandbox::{ExecOptions, LocalSandbox};
use crate::workspace::normalize;

/// A failed sandbox call: its message (what the tool reports) and, when the sandbox gave one,
/// its code (`ENOENT`, `cave_workspace_escape`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxError {
  pub code: Option<String>,
  pub message: String,
}

impl SandboxError {
  pub fn new(message: impl Into<String>) -> Self {
    Self {
      code: None,
      message: message.into(),
    }
  }

  pub fn is_escape(&self) -> bool {
    self.code.as_deref() == Some("cave_workspace_escape") || self.message.contains("escapes the workspace")
  }
}

impl From<ToolError> for SandboxError {
  fn from(e: ToolError) -> Self {
    Self {
      code: Some(e.code),
      message: e.message,
    }
  }
}

pub type SbResult<T> = Result<T, SandboxError>;

/// `sandbox.exec(command, { timeout })`.
#[derive(Debug, Clone)]
pub struct ExecCall {
  pub command: String,
  pub timeout_ms: Option<u64>,
  /// Bash with `onProgress`: where the sandbox hands its output while the command runs (a JS
  /// sandbox through `exec(cmd, { onOutput })`). The caller closes it after `exec` returns.
  pub progress: Option<Arc<crate::progress::Progress>>,
}

/// bashkit's `ExecResult`. A user's sandbox may leave fields out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecReply {
  pub stdout: String,
  pub stderr: String,
  pub exit_code: Option<i32>,
  pub duration_ms: Option<f64>,
  pub interrupted: Option<bool>,
}

pub trait Sandbox: Send + Sync {
  fn exec(&self, call: ExecCall) -> BoxFuture<SbResult<ExecReply>>;
  fn read_file(&self, path: String) -> BoxFuture<SbResult<String>>;
  fn write_file(&self, path: String, content: String) -> BoxFuture<SbResult<()>>;
  fn read_dir(&self, path: String) -> BoxFuture<SbResult<Vec<String>>>;
  fn file_exists(&self, path: String) -> BoxFuture<SbResult<bool>>;
  fn is_directory(&self, path: String) -> BoxFuture<SbResult<bool>>;
  /// `None` when the sandbox has no `deleteFile` (Patch then runs `rm --`).
  fn delete_file(&self, path: String) -> Option<BoxFuture<SbResult<()>>>;
  /// The ripgrep binary Grep runs in a sandbox that is not knap's (read at call time, as
  /// `ensureSandboxTools` may set it late).
  fn rg_path(&self) -> BoxFuture<Option<String>>;
  /// The directory relative tool paths are relative to, when the sandbox says.
  fn working_directory(&self) -> Option<String>;
  /// knap's own sandbox: the native fast paths.
  fn local(&self) -> Option<Arc<LocalSandbox>> {
    None
  }

  /// The absolute form of a tool path, for `allowedPaths` and cache dependencies; `None` when
  /// it is outside the sandbox. knap's sandbox resolves it (realpath of the existing part, so a
  /// symlink is judged by where it leads); another sandbox's path is joined lexically.
  fn absolute(&self, path: &str) -> Option<String> {
    let p = if path.is_empty() { "." } else { path };
    if let Some(local) = self.local() {
      return local
        .resolve(p)
        .ok()
        .map(|r| crate::workspace::path_text(&r.abs).into_owned());
    }
    let joined = match self.working_directory() {
      Some(root) => std::path::Path::new(&root).join(p),
      None => std::path::PathBuf::from(p),
    };
    let lexical = if joined.is_absolute() {
      normalize(&joined)
    } else {
      // posix.normalize of a relative path keeps it relative.
      return Some(relative_normalize(&joined.to_string_lossy()));
    };
    Some(lexical.to_string_lossy().into_owned())
  }
}

/// `path.posix.normalize` of a relative path.
fn relative_normalize(p: &str) -> String {
  let mut out: Vec<&str> = Vec::new();
  for part in p.split('/') {
    match part {
      "" | "." => {}
      ".." => {
        if matches!(out.last(), Some(last) if *last != "..") {
          out.pop();
        } else {
          out.push("..");
        }
      }
      other => out.push(other),
    }
  }
  if out.is_empty() {
    ".".into()
  } else {
    out.join("/")
  }
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> SbResult<T> + Send + 'static) -> SbResult<T> {
  super::blocking(f).await.and_then(|r| r)
}

impl Sandbox for Arc<LocalSandbox> {
  fn exec(&self, call: ExecCall) -> BoxFuture<SbResult<ExecReply>> {
    let sb = self.clone();
    Box::pin(async move {
      let out = LocalSandbox::exec(
        &sb,
        ExecOptions {
          command: call.command,
          cwd: None,
          timeout: Duration::from_millis(call.timeout_ms.unwrap_or(24 * 3600 * 1000)),
          max_output_units: crate::limits::AI_EXEC_MAX_OUTPUT_LENGTH,
          cancel: CancellationToken::new(),
          progress: call.progress,
        },
      )
      .await?;
      Ok(ExecReply {
        stdout: out.stdout,
        stderr: out.stderr,
        exit_code: Some(out.exit_code),
        duration_ms: Some(out.duration_ms as f64),
        interrupted: Some(out.interrupted),
      })
    })
  }

  fn read_file(&self, path: String) -> BoxFuture<SbResult<String>> {
    let sb = self.clone();
    Box::pin(async move {
      super::blocking_cancellable(move |cancel| Ok(sb.read_to_string(&path, cancel)?))
        .await
        .and_then(|r| r)
    })
  }

  fn write_file(&self, path: String, content: String) -> BoxFuture<SbResult<()>> {
    let sb = self.clone();
    Box::pin(async move {
      super::blocking_cancellable(move |cancel| Ok(sb.write(&path, content.as_bytes(), cancel)?))
        .await
        .and_then(|r| r)
    })
  }

  fn read_dir(&self, path: String) -> BoxFuture<SbResult<Vec<String>>> {
    let sb = self.clone();
    Box::pin(blocking(move || Ok(LocalSandbox::read_dir(&sb, &path)?)))
  }

  fn file_exists(&self, path: String) -> BoxFuture<SbResult<bool>> {
    let sb = self.clone();
    Box::pin(blocking(move || Ok(sb.stat(&path)?.exists)))
  }

  fn is_directory(&self, path: String) -> BoxFuture<SbResult<bool>> {
    let sb = self.clone();
    Box::pin(blocking(move || Ok(sb.stat(&path)?.is_dir)))
  }

  fn delete_file(&self, path: String) -> Option<BoxFuture<SbResult<()>>> {
    let sb = self.clone();
    Some(Box::pin(blocking(move || Ok(sb.delete(&path)?))))
  }

  fn rg_path(&self) -> BoxFuture<Option<String>> {
    Box::pin(async { None })
  }

  fn working_directory(&self) -> Option<String> {
    LocalSandbox::workspace(self)
      .root()
      .ok()
      .map(|r| crate::workspace::path_text(&r.path).into_owned())
  }

  fn local(&self) -> Option<Arc<LocalSandbox>> {
    Some(self.clone())
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn relative_paths_normalize_like_posix() {
    assert_eq!(relative_normalize("a/./b/../c"), "a/c");
    assert_eq!(relative_normalize("../x"), "../x");
    assert_eq!(relative_normalize("."), ".");
  }
}
