//! `grep`: an in-process ripgrep. The `ignore` crate walks in parallel honouring `.gitignore`,
//! `.ignore` and hidden-file rules exactly as `rg` does by default (including rg's rule that
//! `.gitignore` applies only inside a git repository); `grep-searcher` finds at most 200
//! matching lines per file (rg's `--max-count 200`). Output is rg's `path:line:text`, sorted by
//! path so it is the same on every run, limited to the first 200 lines.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, Sink, SinkMatch};
use ignore::WalkState;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args::Args;
use super::{aborted, blocking, ShellToolName, ShellTools, ToolOutput};
use crate::cap::{cap_tool_output, CapRequest, Direction};
use crate::error::ToolError;
use crate::limits::{
  GREP_MAX_MATCHES, GREP_SEQUENTIAL_WALK_MAX_ENTRIES, GREP_TIMEOUT_MS, PROCESS_CAPTURE_MAX_BYTES,
};
use crate::search::{display_path, rg_walk, SearchError};
use crate::text;

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
    base: root.path.clone(),
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
  /// The canonical workspace (base for `glob`).
  pub base: PathBuf,
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

/// One matching line: sort key and rendered text.
struct Line {
  path: Arc<str>,
  number: u64,
  text: String,
}

#[derive(Default)]
struct Collector {
  lines: Vec<Line>,
  count: usize,
  bytes: usize,
  errors: Vec<String>,
}

impl Collector {
  /// Keeps the smallest `max` lines (path, line) so memory stays bounded on huge result sets.
  fn add(&mut self, mut batch: Vec<Line>, bytes: usize, max: usize) {
    self.count += batch.len();
    self.bytes += bytes;
    self.lines.append(&mut batch);
    if self.lines.len() > max * 4 {
      self.shrink(max);
    }
  }

  fn shrink(&mut self, max: usize) {
    self
      .lines
      .sort_unstable_by(|a, b| a.path.cmp(&b.path).then(a.number.cmp(&b.number)));
    self.lines.truncate(max);
  }
}

struct FileSink<'a> {
  path: &'a Arc<str>,
  show_path: bool,
  lines: Vec<Line>,
  bytes: usize,
}

impl Sink for FileSink<'_> {
  type Error = std::io::Error;

  fn matched(&mut self, _: &grep_searcher::Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
    let number = m.line_number().unwrap_or(0);
    let raw = m.bytes();
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let content = String::from_utf8_lossy(raw);
    let text = if self.show_path {
      format!("{}:{number}:{content}", self.path)
    } else {
      format!("{number}:{content}")
    };
    self.bytes += text.len() + 1;
    self.lines.push(Line {
      path: self.path.clone(),
      number,
      text,
    });
    Ok(true)
  }
}

/// First read per searched file; larger files continue with the searcher's own reads.
const SEARCH_READ_BYTES: usize = 16 * 1024;

fn new_searcher() -> grep_searcher::Searcher {
  SearcherBuilder::new()
    .line_number(true)
    .binary_detection(BinaryDetection::quit(b'\x00'))
    .max_matches(Some(GREP_MAX_MATCHES as u64))
    .build()
}

/// What one walk entry does: search a file, collect its lines, or note an error.
struct Visitor<'a> {
  opts: &'a GrepOptions,
  matcher: &'a grep_regex::RegexMatcher,
  single_file: bool,
  collector: Mutex<Collector>,
  stop: &'a AtomicBool,
}

impl Visitor<'_> {
  fn visit(
    &self,
    searcher: &mut grep_searcher::Searcher,
    entry: Result<ignore::DirEntry, ignore::Error>,
  ) -> WalkState {
    if self.stop.load(Ordering::Relaxed) {
      return WalkState::Quit;
    }
    let entry = match entry {
      Ok(e) => e,
      Err(err) => {
        self.error(format!("grep: {err}"));
        return WalkState::Continue;
      }
    };
    if !entry.file_type().is_some_and(|t| t.is_file()) {
      return WalkState::Continue;
    }
    let display: Arc<str> =
      Arc::from(display_path(&self.opts.display, &self.opts.scope, entry.path()).as_str());
    let mut sink = FileSink {
      path: &display,
      show_path: !self.single_file,
      lines: Vec::new(),
      bytes: 0,
    };
    // `search_path` minus one syscall per file: its BOM sniffing first reads 3 bytes from the
    // file; through a small BufReader that read fetches the whole (typical) file at once.
    let searched = std::fs::File::open(entry.path()).and_then(|file| {
      searcher.search_reader(
        self.matcher,
        std::io::BufReader::with_capacity(SEARCH_READ_BYTES, file),
        &mut sink,
      )
    });
    if let Err(err) = searched {
      self.error(format!("grep: {display}: {err}"));
    }
    if !sink.lines.is_empty() {
      let bytes = sink.bytes;
      self
        .collector
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .add(sink.lines, bytes, self.opts.max_lines);
    }
    WalkState::Continue
  }

  fn error(&self, text: String) {
    let mut c = self.collector.lock().unwrap_or_else(|e| e.into_inner());
    if c.errors.len() < 20 {
      c.errors.push(text);
    }
  }
}

/// The search itself: synchronous, bounded by `max_lines`, stoppable through `stop`.
pub fn grep_search(opts: &GrepOptions, stop: &AtomicBool) -> GrepOutcome {
  let matcher = match RegexMatcherBuilder::new()
    .line_terminator(Some(b'\n'))
    .build(&opts.pattern)
  {
    Ok(m) => m,
    // rg prints the parse error and exits; the reference returns that text, not an error.
    Err(e) => {
      return GrepOutcome {
        text: format!("{e}\n"),
        ..Default::default()
      }
    }
  };
  // rg's walk (shared with the AI SDK Grep in `search.rs`); a bad glob is printed as rg prints it.
  let walk = match rg_walk(&opts.scope, &opts.base, opts.glob.as_deref(), None, opts.threads) {
    Ok(walk) => walk,
    Err(SearchError::Glob(e) | SearchError::Regex(e) | SearchError::Type(e)) => {
      return GrepOutcome {
        text: format!("{e}\n"),
        ..Default::default()
      }
    }
  };
  let visitor = Visitor {
    opts,
    matcher: &matcher,
    single_file: opts.scope.is_file(),
    collector: Mutex::new(Collector::default()),
    stop,
  };
  let max = opts.max_lines;
  // A small scope is walked and searched on this thread: starting the parallel walker's threads
  // costs more than searching a few hundred files. A larger one is walked again, in parallel.
  let mut first: Vec<Result<ignore::DirEntry, ignore::Error>> = Vec::new();
  let mut small = true;
  for entry in walk.build() {
    first.push(entry);
    if first.len() > GREP_SEQUENTIAL_WALK_MAX_ENTRIES {
      small = false;
      break;
    }
  }
  if small {
    let mut searcher = new_searcher();
    for entry in first {
      if visitor.visit(&mut searcher, entry) == WalkState::Quit {
        break;
      }
    }
  } else {
    drop(first);
    walk.build_parallel().run(|| {
      let visitor = &visitor;
      let mut searcher = new_searcher();
      Box::new(move |entry| visitor.visit(&mut searcher, entry))
    });
  }
  let collector = visitor.collector;
  let mut c = collector.into_inner().unwrap_or_else(|e| e.into_inner());
  c.shrink(max);
  let mut text = String::new();
  for line in &c.lines {
    text.push_str(&line.text);
    text.push('\n');
  }
  // Walk errors follow the matches, as rg's stderr follows its stdout.
  let mut lines_out = c.lines.len();
  for err in &c.errors {
    if lines_out >= max {
      break;
    }
    text.push_str(err);
    text.push('\n');
    lines_out += 1;
  }
  GrepOutcome {
    text,
    more_lines: c.count + c.errors.len() > max,
    truncated: c.bytes > PROCESS_CAPTURE_MAX_BYTES || stop.load(Ordering::Relaxed),
  }
}
