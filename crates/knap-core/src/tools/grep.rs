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
use super::{aborted, blocking, ShellToolName, ShellTools, ToolOutput};
use crate::cap::{cap_tool_output, CapRequest, Direction};
use crate::error::ToolError;
use crate::limits::{GREP_MAX_MATCHES, GREP_TIMEOUT_MS, PROCESS_CAPTURE_MAX_BYTES};
use crate::search::{search, Printer, SearchOutput, SearchRequest, SearchResult};
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
  let root = tools.workspace().root()?;
  let (scope, display) = match path {
    None => (root.path.clone(), ".".to_string()),
    Some(p) => {
      let r = tools.workspace().resolve(p)?;
      let display = if r.rel.as_os_str().is_empty() {
        ".".to_string()
      } else {
        r.rel.to_string_lossy().into_owned()
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
    threads: std::thread::available_parallelism()
      .map(|n| n.get())
      .unwrap_or(2)
      .min(8),
  };
  // Cancel on abort or after rg's 30 s budget.
  let stop = Arc::new(AtomicBool::new(false));
  let watcher = {
    let stop = stop.clone();
    let cancel = cancel.clone();
    tokio::spawn(async move {
      tokio::select! {
        _ = cancel.cancelled() => {}
        _ = tokio::time::sleep(Duration::from_millis(GREP_TIMEOUT_MS)) => {}
      }
      stop.store(true, Ordering::Relaxed);
    })
  };
  let search_stop = stop.clone();
  let outcome = blocking(move || Ok(grep_search(&options, &search_stop))).await;
  watcher.abort();
  let outcome = outcome?;
  if cancel.is_cancelled() {
    return Err(aborted());
  }
  let mut body = outcome.text;
  if body.trim().is_empty() {
    body = text::GREP_NO_MATCHES.to_string();
  } else if outcome.more_lines {
    body.truncate(body.trim_end_matches('\n').len());
    body.push_str(&text::grep_matches_limited());
  }
  let label = format!("grep:{pattern}");
  let recovery = tools.recovery();
  let cap = tools.cap(ShellToolName::Grep);
  let complete = !outcome.truncated;
  let text = cap_tool_output(CapRequest::whole(
    body,
    cap,
    Direction::Head,
    &label,
    complete,
    recovery,
  ));
  Ok(ToolOutput {
    text,
    label: Some(label),
  })
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
  let req = SearchRequest {
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
  };
  let (lines, errors, total, bytes) = match search(&req, stop) {
    Ok(SearchResult {
      output: SearchOutput::Lines {
        lines,
        errors,
        total,
        bytes,
      },
      ..
    }) => (lines, errors, total, bytes),
    Ok(_) => Default::default(),
    // rg prints a bad pattern or glob and exits; the reference returns that text, not an error.
    Err(e) => {
      return GrepOutcome {
        text: format!("{}\n", e.message()),
        ..Default::default()
      }
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
  GrepOutcome {
    text,
    more_lines: total + errors.len() > max,
    truncated: bytes > PROCESS_CAPTURE_MAX_BYTES || stop.load(Ordering::Relaxed),
  }
}
