//! `edit_file`: exact, literal string replacement.

use std::io::Read;

use serde_json::Value;

use super::args::Args;
use super::{blocking, ShellToolName, ShellTools, ToolOutput};
use crate::edit::{replace_literal, Miss, LOSSY_HINT};
use crate::error::{Caveman, ToolError};
use crate::limits::EDIT_FILE_MAX_BYTES;
use crate::workspace::replace_atomically;

pub(super) async fn run(
  tools: &ShellTools,
  input: &Value,
  cancel: tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, ToolError> {
  let (path, old, new, replace_all) = parse(input)?;
  if !tools.is_local() {
    return run_remote(tools, path, old, new, replace_all).await;
  }
  let resolved = tools.workspace().resolve_async(&path).await?;
  let file = tools.workspace().open_read(&path, &resolved, "open")?;
  let (dir, name) = tools.workspace().open_parent(&path, &resolved)?;
  let shown = path.clone();
  let replacements = blocking(move || {
    let meta = file
      .metadata()
      .map_err(|e| ToolError::from_io(&e, "stat", &resolved.abs))?;
    if meta.is_dir() {
      // Node's `readFile` of a directory: the read fails, and its message names no path.
      return Err(ToolError::new(
        "EISDIR",
        "EISDIR: illegal operation on a directory, read",
      ));
    }
    if !meta.is_file() {
      // A FIFO or device: the reference's `readFile` would wait on it forever.
      return Err(ToolError::caveman(Caveman::NotAFile(shown)));
    }
    if meta.len() > EDIT_FILE_MAX_BYTES as u64 {
      return Err(ToolError::caveman(Caveman::EditFileTooLarge {
        path: shown,
        bytes: meta.len(),
      }));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file
      .take(EDIT_FILE_MAX_BYTES as u64 + 1)
      .read_to_end(&mut bytes)
      .map_err(|e| ToolError::from_io(&e, "read", &resolved.abs))?;
    let (updated, count) = apply(&bytes, &old, &new, replace_all, shown)?;
    replace_atomically(&dir, &name, &updated, &resolved, &cancel)?;
    Ok(count)
  })
  .await?;
  Ok(edited(tools, &path, replacements))
}

/// Reads the arguments and refuses the edits no backend is asked about.
fn parse(input: &Value) -> Result<(String, String, String, bool), ToolError> {
  let args = Args::new("edit_file", input)?;
  let path = args.string("path")?.to_string();
  let old = args.string("old_string")?.to_string();
  let new = args.string("new_string")?.to_string();
  let replace_all = args.opt_bool("replace_all")? == Some(true);
  if old == new {
    return Err(ToolError::caveman(Caveman::EditIdentical));
  }
  if old.is_empty() {
    // The reference does not guard this and would insert `new_string` between every character.
    return Err(ToolError::caveman(Caveman::EditEmptyOldString));
  }
  Ok((path, old, new, replace_all))
}

/// The replacement on any backend. Byte-exact and literal: no `$&`-style patterns, and bytes
/// that are not UTF-8 outside the replaced spans are written back as they were. Returns the new
/// bytes and the count the result reports.
fn apply(
  bytes: &[u8],
  old: &str,
  new: &str,
  replace_all: bool,
  shown: String,
) -> Result<(Vec<u8>, usize), ToolError> {
  match replace_literal(bytes, old, new, replace_all) {
    Ok(r) => Ok((r.bytes, r.count)),
    Err(Miss::NotFound { lossy }) => {
      let mut e = ToolError::caveman(Caveman::EditNotFound(shown));
      if lossy {
        e.message = format!("{}\n{LOSSY_HINT}", e.message);
      }
      Err(e)
    }
    Err(Miss::Ambiguous(count)) => Err(ToolError::caveman(Caveman::EditAmbiguous { path: shown, count })),
  }
}

fn edited(tools: &ShellTools, path: &str, replacements: usize) -> ToolOutput {
  let plural = if replacements == 1 { "" } else { "s" };
  tools.short_output(
    ShellToolName::EditFile,
    &format!("edited {path}: {replacements} replacement{plural}"),
  )
}

/// On a non-local backend: `readFile(abs)`, then `writeFile(abs, bytes)`.
async fn run_remote(
  tools: &ShellTools,
  path: String,
  old: String,
  new: String,
  replace_all: bool,
) -> Result<ToolOutput, ToolError> {
  let abs = tools.remote_path(&path)?;
  let bytes = tools.backend.read_file(abs.clone(), None).await?;
  if bytes.len() > EDIT_FILE_MAX_BYTES {
    return Err(ToolError::caveman(Caveman::EditFileTooLarge {
      path,
      bytes: bytes.len() as u64,
    }));
  }
  let (updated, replacements) = apply(&bytes, &old, &new, replace_all, path.clone())?;
  tools.backend.write_file(abs, updated).await?;
  Ok(edited(tools, &path, replacements))
}
