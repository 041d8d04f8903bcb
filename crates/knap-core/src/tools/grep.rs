//! `grep`: the one searcher (`crate::search`) with rg's `path:line:text` printer: rg's walk and
//! ignore rules, at most 200 matching lines per file (rg's `--max-count 200`), sorted by path so
//! it is the same on every run, limited to the first 200 lines.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args::Args;
use super::bash::combine;
use super::process_env;
use super::{aborted, blocking, ShellToolName, ShellTools, ToolOutput};
use crate::cap::{cap_tool_output, CapRequest, Direction};
use crate::error::{Caveman, ToolError};
use crate::exec::{ExecRequest, ExecResult};
use crate::limits::{
  GREP_INLINE_MAX_BYTES, GREP_INLINE_MAX_ENTRIES, GREP_MAX_MATCHES, GREP_TIMEOUT_MS,
  PROCESS_CAPTURE_MAX_BYTES,
};
use crate::search::{
  search, search_small, stop_on, walk_threads, Printer, SearchError, SearchOutput, SearchRequest,
  SearchResult,
};
use crate::text;
use crate::workspace::Root;

pub(super) async fn run(
  tools: &ShellTools,
  input: &Value,
  cancel: CancellationToken,
) -> Result<ToolOutput, ToolError> {
  let args = Args::new("grep", input)?;
  let pattern = args.string("pattern")?.to_string();
  let path = args.opt_string("path")?;
  let glob = args.opt_string("glob")?.map(str::to_string);
  if !tools.is_local() {
    return run_remote(tools, pattern, path, glob, cancel).await;
  }
  let root = tools.workspace().root()?;
  let (scope, display) = match path {
    None => (root.path.clone(), ".".to_string()),
    Some(p) => {
      // A deep path is walked on the blocking pool, not on the thread polling this call (a
      // run's tool calls are first polled on the JS thread).
      let r = tools.workspace().resolve_async(p).await?;
      let display = if r.rel.as_os_str().is_empty() {
        ".".to_string()
      } else {
        crate::workspace::path_text(&r.rel).into_owned()
      };
      (r.abs, display)
    }
  };
  let options = GrepOptions {
    pattern: pattern.clone(),
    root: root.clone(),
    scope,
    display,
    glob,
    max_lines: GREP_MAX_MATCHES,
    threads: walk_threads(),
  };
  // A small scope is searched here, at once: no blocking-pool hop and no timeout task (a few
  // dozen small files take far less than rg's 30 s budget and than the hop itself).
  let outcome = match grep_search_small(&options) {
    Some(_) if cancel.is_cancelled() => return Err(aborted()),
    Some(outcome) => outcome,
    None => grep_on_pool(options, &cancel).await?,
  };
  let mut body = outcome.text;
  if body.trim().is_empty() {
    body = text::GREP_NO_MATCHES.to_string();
  } else if outcome.more_lines {
    body.truncate(body.trim_end_matches('\n').len());
    body.push_str(&text::grep_matches_limited());
  }
  Ok(finish(tools, &pattern, body, !outcome.truncated))
}

/// The search on the blocking pool, stopped on abort or after rg's 30 s budget.
async fn grep_on_pool(options: GrepOptions, cancel: &CancellationToken) -> Result<GrepOutcome, ToolError> {
  let stop = Arc::new(AtomicBool::new(false));
  let watcher = stop_on(stop.clone(), cancel.clone(), GREP_TIMEOUT_MS);
  let search_stop = stop.clone();
  let outcome = blocking(move || Ok(grep_search(&options, &search_stop))).await;
  watcher.abort();
  let outcome = outcome?;
  if cancel.is_cancelled() {
    return Err(aborted());
  }
  Ok(outcome)
}

fn finish(tools: &ShellTools, pattern: &str, body: String, complete: bool) -> ToolOutput {
  let label = format!("grep:{pattern}");
  let recovery = tools.recovery();
  let cap = tools.cap(ShellToolName::Grep);
  let text = cap_tool_output(CapRequest::whole(
    body,
    cap,
    Direction::Head,
    &label,
    complete,
    recovery,
  ));
  ToolOutput {
    text,
    label: Some(label),
  }
}

/// On a non-local backend: `rg` through `exec`, and `grep -rnI` (which ignores `glob`) when
/// `rg` cannot start. Exit codes are not checked: a regex error comes back as text.
async fn run_remote(
  tools: &ShellTools,
  pattern: String,
  path: Option<&str>,
  glob: Option<String>,
  cancel: CancellationToken,
) -> Result<ToolOutput, ToolError> {
  let root = tools.workspace().lexical_root();
  let scope = match path {
    None => ".".to_string(),
    Some(p) => {
      let abs = tools.workspace().resolve_lexical(p)?;
      let rel = abs
        .strip_prefix(&root)
        .unwrap_or(&abs)
        .to_string_lossy()
        .into_owned();
      if rel.is_empty() {
        ".".to_string()
      } else {
        rel
      }
    }
  };
  let request = |command: &str, args: Vec<String>| ExecRequest {
    command: command.to_string(),
    args,
    cwd: root.clone(),
    env: process_env(false),
    timeout: Duration::from_millis(GREP_TIMEOUT_MS),
    max_output_bytes: PROCESS_CAPTURE_MAX_BYTES,
    cancel: cancel.clone(),
  };
  let max = GREP_MAX_MATCHES.to_string();
  let mut rg: Vec<String> = [
    "--line-number",
    "--no-heading",
    "--color",
    "never",
    "--max-count",
    &max,
  ]
  .map(String::from)
  .to_vec();
  if let Some(g) = glob {
    rg.extend(["--glob".to_string(), g]);
  }
  rg.extend([
    "--regexp".to_string(),
    pattern.clone(),
    "--".to_string(),
    scope.clone(),
  ]);
  let cannot_start = |r: &ExecResult| r.start_failed || r.code == Some(127);
  let mut result = tools.backend.exec(request("rg", rg)).await?;
  if cannot_start(&result) {
    let grep = ["-rnI", "-m", &max, "-E", "-e", &pattern, "--", &scope]
      .map(String::from)
      .to_vec();
    result = tools.backend.exec(request("grep", grep)).await?;
    if cannot_start(&result) {
      return Err(ToolError::caveman(Caveman::SearchUnavailable));
    }
  }
  if cancel.is_cancelled() {
    return Err(aborted());
  }
  let output = combine(&result.stdout, &result.stderr);
  let body = if output.trim().is_empty() {
    text::GREP_NO_MATCHES.to_string()
  } else {
    first_lines(output, GREP_MAX_MATCHES)
  };
  Ok(finish(tools, &pattern, body, !result.truncated))
}

/// The reference's `firstLines`: over `max` `\n`-separated pieces, the first `max` and the marker.
fn first_lines(text: String, max: usize) -> String {
  match text.match_indices('\n').nth(max - 1) {
    // A `max`-th newline means at least `max + 1` pieces (the last may be empty).
    Some((i, _)) => {
      let mut out = text[..i].to_string();
      out.push_str(&text::grep_matches_limited());
      out
    }
    None => text,
  }
}

pub struct GrepOptions {
  pub pattern: String,
  /// The workspace (base for `glob`; every file is opened beneath it).
  pub root: Arc<Root>,
  /// The canonical directory or file to search.
  pub scope: PathBuf,
  /// How the scope is printed before each file's relative path (`.` or `src/x`).
  pub display: String,
  pub glob: Option<String>,
  /// Lines kept (the first this many in path order).
  pub max_lines: usize,
  pub threads: usize,
}

#[derive(Debug, Default)]
pub struct GrepOutcome {
  /// The first `max_lines` output lines (or an error text, as rg prints it).
  pub text: String,
  /// More lines existed than were kept.
  pub more_lines: bool,
  /// rg's output would have exceeded the 4 MiB capture (the reference marks this partial).
  pub truncated: bool,
}

/// The search itself, through the one searcher with rg's `path:line:text` printer: synchronous,
/// bounded by `max_lines`, stoppable through `stop`.
pub fn grep_search(opts: &GrepOptions, stop: &AtomicBool) -> GrepOutcome {
  let result = search(&request(opts), stop).map(Some);
  outcome(opts, result, stop).expect("a search that ran")
}

/// [`grep_search`] if the scope is small enough to search on the calling thread
/// (`GREP_INLINE_MAX_ENTRIES` walk entries, `GREP_INLINE_MAX_BYTES` of files); `None` otherwise.
pub fn grep_search_small(opts: &GrepOptions) -> Option<GrepOutcome> {
  let stop = AtomicBool::new(false);
  let result = search_small(
    &request(opts),
    &stop,
    GREP_INLINE_MAX_ENTRIES,
    GREP_INLINE_MAX_BYTES,
  );
  outcome(opts, result, &stop)
}

fn request(opts: &GrepOptions) -> SearchRequest {
  SearchRequest {
    pattern: opts.pattern.clone(),
    root: opts.root.clone(),
    scope: opts.scope.clone(),
    display: opts.display.clone(),
    glob: opts.glob.clone(),
    file_type: None,
    case_insensitive: false,
    multiline: false,
    before: 0,
    after: 0,
    printer: Printer::PathLine {
      max_per_file: GREP_MAX_MATCHES as u64,
    },
    offset: 0,
    head_limit: Some(opts.max_lines),
    max_line_length: usize::MAX,
    threads: opts.threads,
  }
}

fn outcome(
  opts: &GrepOptions,
  result: Result<Option<SearchResult>, SearchError>,
  stop: &AtomicBool,
) -> Option<GrepOutcome> {
  let (lines, errors, total, bytes) = match result {
    Ok(None) => return None,
    Ok(Some(SearchResult {
      output: SearchOutput::Lines {
        lines,
        errors,
        total,
        bytes,
      },
      ..
    })) => (lines, errors, total, bytes),
    Ok(Some(_)) => Default::default(),
    // rg prints a bad pattern or glob and exits; the reference returns that text, not an error.
    Err(e) => {
      return Some(GrepOutcome {
        text: format!("{}\n", e.message()),
        ..Default::default()
      })
    }
  };
  let max = opts.max_lines;
  let mut text = String::new();
  for line in &lines {
    text.push_str(line);
    text.push('\n');
  }
  // Walk errors follow the matches, as rg's stderr follows its stdout.
  let mut lines_out = lines.len();
  for err in &errors {
    if lines_out >= max {
      break;
    }
    text.push_str(err);
    text.push('\n');
    lines_out += 1;
  }
  Some(GrepOutcome {
    text,
    more_lines: total + errors.len() > max,
    truncated: bytes > PROCESS_CAPTURE_MAX_BYTES || stop.load(Ordering::Relaxed),
  })
}
