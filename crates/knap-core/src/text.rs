//! Every user-visible text of the shell tools, worded as the reference words it, so matching
//! `@caveman-ai/agent` is checked in one place.

use crate::limits::{BASH_TIMEOUT_MS, GREP_MAX_MATCHES};

pub fn read_file_description(cap: usize) -> String {
  format!(
    "Read a UTF-8 file from the workspace. Optional offset/limit read a line range. Each returned line starts \
     with its 1-based line number and a tab. These prefixes are not file content; remove the leading number \
     and tab from each line before copying content into another file. Output is capped at {cap} bytes."
  )
}

pub fn grep_description(cap: usize) -> String {
  format!(
    "Search the workspace for a regular expression with ripgrep (grep fallback). Returns at most \
     {GREP_MAX_MATCHES} matches, capped at {cap} bytes."
  )
}

pub fn bash_description(cap: usize) -> String {
  format!(
    "Run one shell command in the workspace; hard timeout {BASH_TIMEOUT_MS} ms; output capped at {cap} bytes. \
     Interactive sessions are unavailable."
  )
}

pub fn bash_session_description(cap: usize) -> String {
  format!(
    "Run shell command in the workspace and return combined stdout/stderr. Set yieldTimeMs to keep a still-running \
     command as an inspectable session. List sessions; read pages or use query + waitMs for literal output, write \
     resumes stdin or closes it for EOF, and kill stops one. Cursors never rerun commands. Hard timeout is \
     {BASH_TIMEOUT_MS} ms; output is capped at {cap} bytes."
  )
}

pub const WRITE_FILE_DESCRIPTION: &str =
  "Create a UTF-8 file in the workspace. Refuses an existing path unless \
  overwrite is true. Parent directory must already exist.";

pub const EDIT_FILE_DESCRIPTION: &str =
  "Replace an exact string in a workspace file. The old string must appear \
  exactly once unless replace_all is set. Writes to disk.";

pub const READ_TOOL_OUTPUT_DESCRIPTION: &str = "Read captured output from this active agent by opaque handle. \
  Uses zero-based byte offset and bounded byte limit, or finds a literal query without rerunning the original tool.";

/// Marker source when the whole output was captured.
pub const SOURCE_COMPLETE: &str = "captured bytes";
/// Marker source when capture stopped early.
pub const SOURCE_PARTIAL: &str = "captured bytes; later process output unavailable";

pub const RECOVERY_TOO_LARGE: &str = "result too large for recovery store; narrow original request";
pub const RECOVERY_NOT_EXPOSED: &str = "recovery paging is not exposed; narrow original request";

pub fn recovery_handle(handle: &str) -> String {
  format!("use read_tool_output with handle {handle}")
}

pub fn capped_marker(total_bytes: usize, source: &str, recovery: &str) -> String {
  format!("\n[caveman-code: output capped from {total_bytes} {source}; {recovery}]")
}

pub fn capped_at_marker(max_bytes: usize, total: usize) -> String {
  format!("\n[caveman-code: output capped at {max_bytes} of {total} bytes; narrow the request]")
}

pub fn grep_matches_limited() -> String {
  format!("\n[caveman-code: matches limited to first {GREP_MAX_MATCHES}; narrow pattern or path]")
}

pub const GREP_NO_MATCHES: &str = "no matches";
pub const BASH_NO_OUTPUT: &str = "(no output)";

/// Programmatic cells: the first line of the cell tool's description.
pub const PROGRAM_DESCRIPTION_HEAD: &str = "Bounded async JS cell. Tools are direct functions and under tools.";
/// What a cell that printed and returned nothing reports.
pub const PROGRAM_EMPTY_OUTPUT: &str = "ok";

/// The marker between the head and tail of an over-long cell output (always `caveman_code`,
/// whatever the cell tool is called).
pub fn program_truncated_marker(total_bytes: usize) -> String {
  format!("\n... caveman_code output truncated ({total_bytes} bytes) ...\n")
}

/// Every text of the AI SDK tool set (`knap/ai-sdk`), worded as bashkit 0.7.1 words it.
pub mod ai {
  pub const EDIT_SAME: &str = "old_string and new_string must be different";
  pub const EDIT_EMPTY: &str = "old_string must not be empty";
  pub const PATCH_EMPTY: &str = "Patch contains no operations";
  pub const RG_MISSING: &str =
    "Ripgrep not available. Call ensureSandboxTools(sandbox) before using Grep with remote sandboxes.";

  pub fn timed_out(tool: &str, ms: u64) -> String {
    format!("{tool} timed out after {ms}ms")
  }
  pub fn aborted(tool: &str) -> String {
    format!("{tool} was aborted")
  }
  pub fn outside(root: &str, path: &str) -> String {
    format!("Path is outside the working directory ({root}): {path}")
  }
  pub fn not_allowed(path: &str) -> String {
    format!("Path not allowed: {path}")
  }
  pub fn path_not_found(path: &str) -> String {
    format!("Path not found: {path}")
  }
  pub fn not_a_directory(path: &str) -> String {
    format!("Not a directory: {path}")
  }
  pub fn file_not_found(path: &str) -> String {
    format!("File not found: {path}")
  }
  pub fn command_blocked(what: &str) -> String {
    format!("Command blocked: contains '{what}'")
  }
  /// Where a background command's output goes.
  pub fn background_log(pid: u32, n: u64) -> String {
    format!("/tmp/knap-bash-bg_{pid}_{n}.log")
  }
  pub fn background_failed(why: &str) -> String {
    format!("Failed to start the command in the background: {why}")
  }
  pub fn background_started(pid: u32, log: &str) -> String {
    format!(
      "Started in the background (pid {pid}). Its output goes to {log}: read it with Bash (for example `tail -n 50 {log}`); stop it with `kill {pid}`."
    )
  }
  pub fn file_too_large(lines: u64) -> String {
    format!(
      "File is large ({lines} lines). Use 'offset' and 'limit' to read in chunks. Example: offset=1, limit=100 for first 100 lines."
    )
  }
  pub fn binary_file(path: &str, size: u64, ext: &str) -> String {
    format!(
      "Cannot read binary file: {path} (file exists, {size} bytes). Use appropriate tools to process {} files (e.g., Python scripts for PDFs).",
      ext.to_uppercase()
    )
  }
  pub fn content_too_large(max: u64, got: u64) -> String {
    format!("File content exceeds maximum size of {max} bytes (got {got})")
  }
  pub fn wrote(path: &str) -> String {
    format!("Successfully wrote to {path}")
  }
  pub fn edited(path: &str) -> String {
    format!("Successfully edited {path}")
  }
  pub fn string_not_found(old: &str) -> String {
    format!("String not found in file: \"{old}\"")
  }
  pub fn string_ambiguous(n: usize) -> String {
    format!("String appears {n} times in file. Use replace_all=true to replace all, or provide a more unique string.")
  }
  pub fn invalid_glob_pattern(why: &str) -> String {
    format!("Invalid glob pattern: {why}")
  }
  pub fn invalid_regex(why: &str) -> String {
    format!("Invalid regex: {why}")
  }
  pub fn invalid_glob(why: &str) -> String {
    format!("Invalid glob: {why}")
  }
  pub fn delete_failed(path: &str, stderr: &str) -> String {
    format!("Failed to delete {path}: {stderr}")
  }

  /// `buildSystemContext`: the heading and tags around the discovered instructions.
  pub fn project_instructions(text: &str) -> String {
    format!("# Project Instructions\n<INSTRUCTIONS>\n{text}\n</INSTRUCTIONS>")
  }
  /// `discoverInstructions`: between two instruction files.
  pub const PROJECT_DOC_SEPARATOR: &str = "\n\n--- project-doc ---\n\n";
  /// `buildToolGuidance`: the headings.
  pub const TOOL_GUIDANCE_HEADING: &str = "## Available Tools";
  pub const TOOL_GUIDELINES_HEADING: &str = "## Guidelines";
  /// `buildToolGuidance`: the one-line hint of each tool bashkit knows.
  pub const TOOL_HINTS: &[(&str, &str)] = &[
    ("Bash", "Execute shell commands. Prefer Read/Grep/Glob over bash for file exploration."),
    ("Read", "Read files or list directories. Use offset/limit for large files."),
    ("Write", "Create or overwrite files. Read first before overwriting."),
    ("Edit", "Replace exact strings in files. Prefer over Write for modifications."),
    (
      "Patch",
      "Apply multi-hunk, multi-file edits in apply-patch format. Use for bulk edits, file additions/deletions, and renames.",
    ),
    ("Glob", "Find files by pattern. Faster than bash find."),
    ("Grep", "Search file contents with regex. Faster than bash grep."),
    ("WebSearch", "Search the web. Use for current information."),
    ("WebFetch", "Fetch and analyze a URL."),
    ("Task", "Spawn sub-agents for complex parallel work."),
    ("TodoWrite", "Track multi-step task progress."),
  ];
}

/// `cave_workspace_not_directory`: a workspace path that names a file.
pub fn workspace_not_directory(dir: &str, owner: crate::tools::WorkspaceOwner) -> String {
  use crate::tools::WorkspaceOwner;
  let dir = serde_json::Value::from(dir);
  match owner {
    WorkspaceOwner::ShellTools => format!(
      "cave_workspace_not_directory: shellTools workspace {dir} is not a directory\nhint: pass the directory the tools may work in (e.g. process.cwd())"
    ),
    WorkspaceOwner::LocalSandbox => format!(
      "cave_workspace_not_directory: createLocalSandbox workingDirectory {dir} is not a directory\nhint: pass a directory (or a path that does not exist yet: it is created)"
    ),
  }
}

/// The last thing the model reads from a Glob / Grep result that was cut at `shown` entries.
/// `total` is the full count when known, `None` when the search stopped early.
pub fn search_truncated_note(tool: &str, shown: usize, total: Option<usize>) -> String {
  let n = group_thousands;
  match (tool, total) {
    ("Glob", Some(total)) => format!(
      "Showing the {} newest of {} matching paths ({} more not listed). Narrow the pattern (e.g. \"src/**/*.ts\") or set path to a subdirectory; tools.Glob.maxResults raises the limit.",
      n(shown),
      n(total),
      n(total.saturating_sub(shown))
    ),
    (_, Some(total)) => format!(
      "Showing {} of {} results ({} more not listed). Narrow the search with path, glob or type, or page with offset and head_limit; tools.{tool}.maxResults raises the limit.",
      n(shown),
      n(total),
      n(total.saturating_sub(shown))
    ),
    (_, None) => format!(
      "Showing the first {} results; more matched. Narrow the search with path, glob or type, or page with offset and head_limit.",
      n(shown)
    ),
  }
}

fn group_thousands(v: usize) -> String {
  let digits = v.to_string();
  let mut out = String::with_capacity(digits.len() + digits.len() / 3);
  for (i, c) in digits.chars().enumerate() {
    if i > 0 && (digits.len() - i) % 3 == 0 {
      out.push(',');
    }
    out.push(c);
  }
  out
}

#[cfg(test)]
mod search_note_tests {
  use super::*;

  #[test]
  fn glob_note_counts_what_was_left_out() {
    assert_eq!(
      search_truncated_note("Glob", 1000, Some(5708)),
      "Showing the 1,000 newest of 5,708 matching paths (4,708 more not listed). Narrow the pattern (e.g. \"src/**/*.ts\") or set path to a subdirectory; tools.Glob.maxResults raises the limit."
    );
    assert!(search_truncated_note("Grep", 1000, None).starts_with("Showing the first 1,000 results; more matched."));
    assert_eq!(group_thousands(1234567), "1,234,567");
    assert_eq!(group_thousands(999), "999");
  }
}
