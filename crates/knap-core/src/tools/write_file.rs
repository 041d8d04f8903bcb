//! `write_file` and the one atomic-replace helper `edit_file` shares.

use std::os::fd::AsRawFd;

use tokio_util::sync::CancellationToken;

use serde_json::Value;

use super::args::Args;
use super::{blocking, ShellToolName, ShellTools, ToolOutput};
use crate::error::ToolError;
use crate::workspace::{openat, replace_atomically, write_cancellable};

pub(super) async fn run(tools: &ShellTools, input: &Value, cancel: CancellationToken) -> Result<ToolOutput, ToolError> {
  let args = Args::new("write_file", input)?;
  let path = args.string("path")?.to_string();
  let content = args.string("content")?.to_string();
  let overwrite = args.opt_bool("overwrite")? == Some(true);
  if !tools.is_local() {
    return run_remote(tools, path, content, overwrite).await;
  }
  let resolved = tools.workspace().resolve_async(&path).await?;
  let (dir, name) = tools.workspace().open_parent(&path, &resolved)?;
  let bytes = content.len();
  blocking(move || {
    if overwrite {
      replace_atomically(&dir, &name, content.as_bytes(), &resolved, &cancel)
    } else {
      // `wx`: exclusive create; an existing path is EEXIST.
      let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW;
      let fd = openat(dir.as_raw_fd(), &name, flags, 0o666)
        .map_err(|e| ToolError::from_io(&e, "open", &resolved.abs))?;
      let file = std::fs::File::from(fd);
      write_cancellable(&file, content.as_bytes(), &cancel, &resolved.abs).inspect_err(|_| {
        // The file is ours (created exclusively just now): a failed or cancelled write removes
        // it rather than leave a truncated file that looks written.
        // SAFETY: valid directory descriptor and NUL-terminated name.
        unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
      })
    }
  })
  .await?;
  Ok(wrote(tools, &path, bytes))
}

fn wrote(tools: &ShellTools, path: &str, bytes: usize) -> ToolOutput {
  tools.short_output(ShellToolName::WriteFile, &format!("wrote {path}: {bytes} bytes"))
}

/// On a non-local backend exclusivity is emulated as the reference does: a one-byte
/// `readFile` that fails with `ENOENT` means the path is free.
async fn run_remote(
  tools: &ShellTools,
  path: String,
  content: String,
  overwrite: bool,
) -> Result<ToolOutput, ToolError> {
  let abs = tools.remote_path(&path)?;
  if !overwrite {
    match tools.backend.read_file(abs.clone(), Some(1)).await {
      Err(e) if e.code == "ENOENT" => {}
      Err(e) => return Err(e),
      Ok(_) => {
        return Err(ToolError::new(
          "EEXIST",
          format!("EEXIST: file already exists, open '{abs}'"),
        ))
      }
    }
  }
  let bytes = content.len();
  tools.backend.write_file(abs, content.into_bytes()).await?;
  Ok(wrote(tools, &path, bytes))
}
