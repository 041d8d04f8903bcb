//! The one searcher: an in-process ripgrep with several printers, as ripgrep's printer crate
//! separates them. The walk is the descriptor walk ([`crate::walk`]) with rg's filter rules
//! ([`crate::rg_rules`]: `.gitignore`, `.ignore`, `.git/info/exclude` and git's global excludes
//! with rg's rule that the git ones apply only inside a git repository, the ancestors' ignore
//! files, hidden-file rules, `-g` globs, `-t` types), the matcher is rg's (`grep-regex`; `-i`,
//! `-U --multiline-dotall`), and `grep-searcher` finds the lines, detects binary files and keeps
//! `-A/-B/-C` context.
//!
//! Nothing is opened by path: the scope is opened beneath the workspace's root descriptor
//! (`openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, or the `O_NOFOLLOW` walk), every
//! directory below it by name from its parent's descriptor, every file by name from its
//! directory's descriptor with `O_NOFOLLOW | O_NONBLOCK`, searched only if `fstat` on that
//! descriptor says it is a regular file, and the ignore files through the same descriptors. A
//! directory swapped for an outward symlink while the walk runs cannot lead a listing, an ignore
//! file or a read out of the workspace, and a FIFO swapped in cannot hang the search.
//!
//! Printers ([`Printer`]):
//! * `PathLine` (shellTools' `grep`): `path:line:text` (`line:text` for a single-file scope), at
//!   most `max_per_file` lines per file (rg's `--max-count`), walk and read errors as rg prints
//!   them;
//! * `Files` (`files_with_matches`): each file stops at its first match;
//! * `Counts` (`count`): matches per file (every match, several per line if so, as rg's
//!   `stats.matches`);
//! * `Content` (`content`): matching lines with their context; a context line goes to the match
//!   it belongs to in rg's own grouping (lines after a match within `-A` are its `after_context`,
//!   lines before the next match within `-B` are that match's `before_context`).
//!
//! Results are sorted by path (and line), so the same tree gives the same answer and pages
//! (`offset`, `head_limit`) are stable; when a page is asked for, only the first
//! `offset + head_limit` entries are kept while searching. The walk starts on the calling
//! thread and spreads to more threads past `WALK_SPREAD_AFTER_ENTRIES` entries; a bounded search
//! ([`search_small`]) stays on the calling thread and gives up past its bounds.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
  BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};

use crate::limits::WALK_SPREAD_AFTER_ENTRIES;
use crate::rg_rules::{RgRules, RuleError};
use crate::truncate::cut_line;
use crate::walk::{self, At};
use crate::workspace::{name_text, path_text, Dir, Opened, Root, Scope};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Printer {
  PathLine { max_per_file: u64 },
  Files,
  Counts,
  Content,
}

/// The AI SDK Grep's `output_mode` names for the three printers it uses.
pub type OutputMode = Printer;

pub struct SearchRequest {
  pub pattern: String,
  /// The workspace: every file is opened beneath it; `glob` is relative to it (rg's cwd).
  pub root: Arc<Root>,
  /// The canonical file or directory to search (inside the root).
  pub scope: PathBuf,
  /// How the scope is printed before each file's relative path (`.`, `src`, `/abs/dir`).
  pub display: String,
  pub glob: Option<String>,
  pub file_type: Option<String>,
  pub case_insensitive: bool,
  pub multiline: bool,
  pub before: usize,
  pub after: usize,
  pub printer: Printer,
  pub offset: usize,
  pub head_limit: Option<usize>,
  /// Lines (and context lines) longer than this many UTF-16 units are cut and end with `…`
  /// (not for `PathLine`, which prints lines as rg does).
  pub max_line_length: usize,
  pub threads: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentMatch {
  pub file: String,
  pub line_number: u64,
  pub line: String,
  pub before_context: Vec<String>,
  pub after_context: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchOutput {
  /// `PathLine`: the kept lines, the errors, and how many lines and bytes there were in all.
  Lines {
    lines: Vec<String>,
    errors: Vec<String>,
    total: usize,
    bytes: usize,
  },
  Files(Vec<String>),
  Counts(Vec<(String, u64)>),
  Content(Vec<ContentMatch>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
  pub output: SearchOutput,
  /// The search was stopped early (timeout or cancellation): the result is partial.
  pub stopped: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchError {
  Regex(String),
  Glob(String),
  Type(String),
}

impl SearchError {
  /// The underlying message, as rg prints it.
  pub fn message(&self) -> &str {
    match self {
      SearchError::Regex(m) | SearchError::Glob(m) | SearchError::Type(m) => m,
    }
  }
}

impl std::fmt::Display for SearchError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match self {
      SearchError::Regex(m) => write!(f, "invalid regex: {m}"),
      SearchError::Glob(m) => write!(f, "invalid glob: {m}"),
      SearchError::Type(m) => write!(f, "{m}"),
    }
  }
}

/// Threads for a parallel walk: the machine's, at most 8. Asked once: `available_parallelism`
/// reads the cgroup's CPU quota from `/proc` and `/sys` (a dozen system calls) every time.
pub fn walk_threads() -> usize {
  static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
  *THREADS.get_or_init(|| {
    std::thread::available_parallelism()
      .map(|n| n.get())
      .unwrap_or(2)
      .min(8)
  })
}

/// Sets `stop` (the flag a search or a glob walk polls) when `cancel` fires or `timeout_ms`
/// pass (0: no timeout); abort the returned task once the work is done.
pub fn stop_on(
  stop: Arc<AtomicBool>,
  cancel: tokio_util::sync::CancellationToken,
  timeout_ms: u64,
) -> tokio::task::JoinHandle<()> {
  tokio::spawn(async move {
    if timeout_ms > 0 {
      tokio::select! {
        _ = cancel.cancelled() => {}
        _ = tokio::time::sleep(std::time::Duration::from_millis(timeout_ms)) => {}
      }
    } else {
      cancel.cancelled().await;
    }
    stop.store(true, Ordering::Relaxed);
  })
}

fn line_text(bytes: &[u8], max: usize) -> String {
  let b = bytes.strip_suffix(b"\n").unwrap_or(bytes);
  let b = b.strip_suffix(b"\r").unwrap_or(b);
  cut_line(&String::from_utf8_lossy(b), max)
}

/// What one file produced, keyed by line for sorting.
enum Item {
  Line(String),
  Count(u64),
  Matched,
  Content(ContentMatch),
}

struct FileSink<'a> {
  matcher: &'a RegexMatcher,
  printer: Printer,
  file: &'a str,
  show_path: bool,
  max_line: usize,
  matched: bool,
  count: u64,
  items: Vec<(u64, Item)>,
  bytes: usize,
  /// Before-context lines waiting for the next match.
  pending_before: Vec<String>,
}

impl Sink for FileSink<'_> {
  type Error = std::io::Error;

  fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
    self.matched = true;
    let number = m.line_number().unwrap_or(0);
    match self.printer {
      Printer::Files => Ok(false),
      Printer::Counts => {
        let mut n = 0u64;
        let _ = self.matcher.find_iter(m.bytes(), |_| {
          n += 1;
          true
        });
        self.count += n.max(1);
        Ok(true)
      }
      Printer::PathLine { .. } => {
        let raw = m.bytes();
        let content = String::from_utf8_lossy(raw.strip_suffix(b"\n").unwrap_or(raw));
        let text = if self.show_path {
          format!("{}:{number}:{content}", self.file)
        } else {
          format!("{number}:{content}")
        };
        self.bytes += text.len() + 1;
        self.items.push((number, Item::Line(text)));
        Ok(true)
      }
      Printer::Content => {
        self.items.push((
          number,
          Item::Content(ContentMatch {
            file: self.file.to_string(),
            line_number: number,
            line: line_text(m.bytes(), self.max_line),
            before_context: std::mem::take(&mut self.pending_before),
            after_context: Vec::new(),
          }),
        ));
        Ok(true)
      }
    }
  }

  fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
    let text = line_text(c.bytes(), self.max_line);
    match (c.kind(), self.items.last_mut()) {
      (SinkContextKind::After, Some((_, Item::Content(last)))) => last.after_context.push(text),
      _ => self.pending_before.push(text),
    }
    Ok(true)
  }
}

/// Keeps entries sorted by (path, line), bounded to the first `keep` when a page is asked for.
#[derive(Default)]
struct Collector {
  items: Vec<(Arc<str>, u64, Item)>,
  keep: Option<usize>,
  /// Entries seen in all, and their printed bytes (`PathLine`).
  count: usize,
  bytes: usize,
  errors: Vec<String>,
}

impl Collector {
  fn add(&mut self, path: &Arc<str>, items: Vec<(u64, Item)>, bytes: usize) {
    self.count += items.len();
    self.bytes += bytes;
    for (line, item) in items {
      self.items.push((path.clone(), line, item));
    }
    if let Some(k) = self.keep {
      if self.items.len() > k.saturating_mul(2).max(1024) {
        self.shrink();
      }
    }
  }

  fn shrink(&mut self) {
    self
      .items
      .sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    if let Some(k) = self.keep {
      self.items.truncate(k);
    }
  }

  fn error(&mut self, text: String) {
    if self.errors.len() < 20 {
      self.errors.push(text);
    }
  }
}

/// First read per searched file; larger files continue with the searcher's own reads.
const SEARCH_READ_BYTES: usize = 16 * 1024;

thread_local! {
  /// The read buffer, kept per thread from search to search.
  static READ_BUFFER: std::cell::Cell<Option<Box<[u8]>>> = const { std::cell::Cell::new(None) };
}

/// What one walking thread keeps from file to file: its searcher and its read buffer.
struct Local {
  searcher: Searcher,
  buf: Box<[u8]>,
}

/// A file read as far as its size when it was opened (`fstat`): after that many bytes it says
/// end-of-file without asking (one system call less per file; a file growing meanwhile is searched
/// as it was when opened). A size of 0 (what `/proc` reports) reads to the real end. Reads go
/// through `buf` as `BufReader` would: the searcher's first tiny read (its BOM check) fetches a
/// small file whole, larger reads go straight to the file.
struct SizedReader<'a> {
  file: std::fs::File,
  /// Bytes still expected (`None`: unknown, read until the file says end).
  remaining: Option<u64>,
  buf: &'a mut [u8],
  pos: usize,
  filled: usize,
}

impl std::io::Read for SizedReader<'_> {
  fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
    if self.pos == self.filled {
      let want = match self.remaining {
        Some(0) => return Ok(0),
        Some(r) => usize::try_from(r).unwrap_or(usize::MAX),
        None => usize::MAX,
      };
      if out.len() >= self.buf.len() {
        // Large read with nothing buffered: straight into the caller's buffer.
        let len = out.len().min(want);
        let n = self.file.read(&mut out[..len])?;
        self.account(n);
        return Ok(n);
      }
      let len = self.buf.len().min(want);
      let n = self.file.read(&mut self.buf[..len])?;
      self.account(n);
      self.pos = 0;
      self.filled = n;
    }
    let n = out.len().min(self.filled - self.pos);
    out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
    self.pos += n;
    Ok(n)
  }
}

impl SizedReader<'_> {
  fn account(&mut self, n: usize) {
    if let Some(r) = self.remaining.as_mut() {
      // A file that shrank ends early (its read said 0).
      *r = if n == 0 { 0 } else { r.saturating_sub(n as u64) };
    }
  }
}

/// What a file is searched from.
enum Source {
  /// The opened file, read as far as its `fstat` size.
  File(Opened),
  /// Its bytes, kept or read whole at once, and the read error that cut them short, if any.
  Bytes {
    stat: libc::stat,
    data: Arc<[u8]>,
    error: Option<std::io::Error>,
  },
}

/// Ends a byte stream the way the file's read did: with its error once, else end-of-file.
struct FailingReader(Option<std::io::Error>);

impl std::io::Read for FailingReader {
  fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
    match self.0.take() {
      Some(e) => Err(e),
      None => Ok(0),
    }
  }
}

/// Small files' contents kept from search to search ([`crate::kept`]): a hit costs one `fstatat`
/// of the name in its directory instead of `openat` + `fstat` + `read` + `close`.
mod contents {
  use std::sync::Arc;
  use std::time::SystemTime;

  use super::Source;
  use crate::kept::Kept;
  use crate::limits::{GREP_CONTENTS_FILE_MAX_BYTES, GREP_CONTENTS_MAX_BYTES};
  use crate::workspace::Opened;

  static FILES: Kept<[u8]> = Kept::new(GREP_CONTENTS_MAX_BYTES);

  /// The kept contents of the regular file `st` describes, if it has not changed since.
  pub(super) fn get(st: &libc::stat) -> Option<Arc<[u8]>> {
    FILES.get(st, libc::S_IFREG)
  }

  /// A file small enough to keep (a size of 0 may be `/proc`'s "unknown": read as before).
  pub(super) fn fits(st: &libc::stat) -> bool {
    st.st_size > 0 && st.st_size as u64 <= GREP_CONTENTS_FILE_MAX_BYTES
  }

  /// Reads a file that [`fits`] whole (as far as its `fstat` size, as the searcher's reader
  /// would) and keeps it if it was complete and settled at `opened_at` (taken before the open).
  pub(super) fn read(opened: Opened, opened_at: SystemTime) -> Source {
    let Opened { file, stat } = opened;
    let mut data = vec![0u8; stat.st_size as usize];
    let mut n = 0;
    let mut error = None;
    while n < data.len() {
      match std::io::Read::read(&mut &file, &mut data[n..]) {
        Ok(0) => break,
        Ok(k) => n += k,
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
        Err(e) => {
          error = Some(e);
          break;
        }
      }
    }
    data.truncate(n);
    let data: Arc<[u8]> = data.into();
    if error.is_none() && n as i64 == stat.st_size {
      FILES.put(&stat, data.clone(), n, opened_at);
    }
    Source::Bytes { stat, data, error }
  }

  /// Test hook: whether the file `st` describes is kept as it is now.
  #[cfg(test)]
  pub(super) fn holds(st: &libc::stat) -> bool {
    get(st).is_some()
  }

  /// Test hook: keep `data` as the contents of the file `st` describes.
  #[cfg(test)]
  pub(super) fn force(st: &libc::stat, data: &[u8]) {
    FILES.put(st, data.into(), data.len(), SystemTime::now() + std::time::Duration::from_secs(3600));
  }
}

/// What the walk does with each file: open it through its directory, search it, collect what it
/// printed. Also counts bytes for a bounded search.
struct Visitor<'a> {
  req: &'a SearchRequest,
  matcher: &'a RegexMatcher,
  show_path: bool,
  collector: Mutex<Collector>,
  /// A bounded search's byte budget: the files searched so far, and the most allowed.
  bytes: AtomicU64,
  max_bytes: Option<u64>,
  over_bytes: AtomicBool,
  /// The root's device when small files' contents may be kept (`contents`); bounded searches only.
  keep_dev: Option<u64>,
}

impl Visitor<'_> {
  fn searcher(&self) -> Searcher {
    let (before, after) = if self.req.printer == Printer::Content {
      (self.req.before, self.req.after)
    } else {
      (0, 0)
    };
    let max = match self.req.printer {
      Printer::PathLine { max_per_file } => Some(max_per_file),
      _ => None,
    };
    SearcherBuilder::new()
      .line_number(true)
      .multi_line(self.req.multiline)
      .before_context(before)
      .after_context(after)
      .max_matches(max)
      .binary_detection(BinaryDetection::quit(b'\x00'))
      .build()
  }

  fn lines_printer(&self) -> bool {
    matches!(self.req.printer, Printer::PathLine { .. })
  }

  /// Notes a walk or read error, as rg prints it (`PathLine` only: the other printers never
  /// show errors).
  fn error(&self, text: impl FnOnce() -> String) {
    if self.lines_printer() {
      self.lock().error(text());
    }
  }

  /// Searches one opened file (`file`: its printed path). `false`: a bounded search went over its
  /// byte budget (nothing of this file was searched).
  fn local(&self) -> Local {
    Local {
      searcher: self.searcher(),
      buf: READ_BUFFER
        .with(|b| b.take())
        .unwrap_or_else(|| vec![0u8; SEARCH_READ_BYTES].into_boxed_slice()),
    }
  }

  /// The thread's read buffer goes back for its next search.
  fn done(&self, local: Local) {
    READ_BUFFER.with(|b| b.set(Some(local.buf)));
  }

  fn search_file(&self, local: &mut Local, file: Arc<str>, opened: Opened) -> bool {
    self.search_source(local, file, Source::File(opened))
  }

  fn search_source(&self, local: &mut Local, file: Arc<str>, source: Source) -> bool {
    let st_size = match &source {
      Source::File(opened) => opened.stat.st_size,
      Source::Bytes { stat, .. } => stat.st_size,
    };
    if let Some(max) = self.max_bytes {
      let size = st_size.max(0) as u64;
      if self.bytes.fetch_add(size, Ordering::Relaxed) + size > max {
        self.over_bytes.store(true, Ordering::Relaxed);
        return false;
      }
    }
    let req = self.req;
    let mut sink = FileSink {
      matcher: self.matcher,
      printer: req.printer,
      file: &file,
      show_path: self.show_path,
      max_line: req.max_line_length,
      matched: false,
      count: 0,
      items: Vec::new(),
      bytes: 0,
      pending_before: Vec::new(),
    };
    let searched = match source {
      Source::File(opened) => {
        let size = st_size.max(0) as u64;
        let reader = SizedReader {
          file: opened.file,
          remaining: (size > 0).then_some(size),
          buf: &mut local.buf,
          pos: 0,
          filled: 0,
        };
        local.searcher.search_reader(self.matcher, reader, &mut sink)
      }
      // The same byte stream the file gives (and its read error at the same place).
      Source::Bytes { data, error, .. } => {
        let reader = std::io::Read::chain(&data[..], FailingReader(error));
        local.searcher.search_reader(self.matcher, reader, &mut sink)
      }
    };
    if let Err(err) = searched {
      self.error(|| format!("grep: {file}: {err}"));
    }
    if !sink.matched {
      return true;
    }
    let items = match req.printer {
      Printer::Files => vec![(0, Item::Matched)],
      Printer::Counts => vec![(0, Item::Count(sink.count))],
      _ => sink.items,
    };
    let bytes = sink.bytes;
    self.lock().add(&file, items, bytes);
    true
  }

  fn lock(&self) -> std::sync::MutexGuard<'_, Collector> {
    self.collector.lock().unwrap_or_else(|e| e.into_inner())
  }
}

/// An open that failed because the name changed since it was listed (removed, or swapped for a
/// symlink or something else): the entry is skipped without a word, as the walk never shows what
/// is there now.
fn vanished(err: &std::io::Error) -> bool {
  matches!(
    err.raw_os_error(),
    Some(libc::EXDEV) | Some(libc::ELOOP) | Some(libc::ENOENT) | Some(libc::ENOTDIR)
  )
}

impl walk::Visitor for Visitor<'_> {
  type Local = Local;

  fn local(&self) -> Local {
    Visitor::local(self)
  }

  fn file(&self, local: &mut Local, dir: &Dir, at: &At, name: &[u8]) -> bool {
    let shown = name_text(name);
    let display = &self.req.display;
    let sep = if display.ends_with('/') { "" } else { "/" };
    let file: Arc<str> = Arc::from(format!("{display}{sep}{}{shown}", at.rel));
    let Ok(c) = CString::new(name) else { return true };
    // A small file already read, unchanged since (same identity, looked at without following a
    // symlink): its kept contents, with no open or read. Anything else (a miss, a symlink or
    // FIFO swapped in, an error) takes the open below, which words every case as before.
    let settled = self.keep_dev;
    if let Some(dev) = settled {
      if let Some(st) = dir.lstat(&c).filter(|st| st.st_dev as u64 == dev) {
        if let Some(data) = contents::get(&st) {
          return self.search_source(local, file, Source::Bytes { stat: st, data, error: None });
        }
      }
    }
    let opened_at = crate::kept::now();
    match dir.open_file(&c) {
      Ok(Some(opened)) if settled == Some(opened.stat.st_dev as u64) && contents::fits(&opened.stat) => {
        let source = contents::read(opened, opened_at);
        self.search_source(local, file, source)
      }
      Ok(Some(opened)) => self.search_source(local, file, Source::File(opened)),
      // Replaced by something that is not a regular file since it was listed.
      Ok(None) => true,
      Err(err) if vanished(&err) => true,
      Err(err) => {
        self.error(|| format!("grep: {file}: {err}"));
        true
      }
    }
  }

  fn dir_error(&self, _: &mut Local, at: &At, err: std::io::Error) -> bool {
    // rg's walker (walkdir) words a directory it cannot read this way.
    let p = path_text(&at.abs);
    self.error(|| format!("grep: {p}: IO error for operation on {p}: {err}"));
    true
  }

  fn done(&self, local: Local) {
    Visitor::done(self, local)
  }
}

/// rg's matcher for a pattern. Compiling one costs more than searching a small tree, so the last
/// few are kept (a matcher is immutable and depends only on these three inputs). Shared, not
/// cloned: a cloned regex starts with empty caches (its lazy DFA is rebuilt on every search),
/// a shared one keeps them warm from call to call.
fn matcher(pattern: &str, case_insensitive: bool, multiline: bool) -> Result<Arc<RegexMatcher>, SearchError> {
  type Key = (String, bool, bool);
  type Recent = Vec<(Key, Arc<RegexMatcher>)>;
  static RECENT: Mutex<Recent> = Mutex::new(Vec::new());
  const KEEP: usize = 16;
  let lock = || RECENT.lock().unwrap_or_else(|e| e.into_inner());
  if let Some((_, m)) = lock()
    .iter()
    .find(|((p, i, m), _)| p == pattern && *i == case_insensitive && *m == multiline)
  {
    return Ok(m.clone());
  }
  let mut mb = RegexMatcherBuilder::new();
  mb.case_insensitive(case_insensitive);
  if multiline {
    mb.multi_line(true).dot_matches_new_line(true);
  } else {
    mb.line_terminator(Some(b'\n'));
  }
  let built = Arc::new(mb.build(pattern).map_err(|e| SearchError::Regex(e.to_string()))?);
  let mut recent = lock();
  if recent.len() >= KEEP {
    recent.remove(0);
  }
  recent.push(((pattern.to_string(), case_insensitive, multiline), built.clone()));
  Ok(built)
}

/// Runs the search. `stop` ends it early (the result is then marked `stopped`).
pub fn search(req: &SearchRequest, stop: &AtomicBool) -> Result<SearchResult, SearchError> {
  Ok(search_within(req, stop, None)?.expect("an unbounded search always runs"))
}

/// Runs the search only if the scope is small: at most `max_entries` walk entries whose regular
/// files hold at most `max_bytes` together (the caller runs it on a thread that must not wait
/// long). `Ok(None)`: the scope is larger and nothing was searched; run [`search`] elsewhere.
pub fn search_small(
  req: &SearchRequest,
  stop: &AtomicBool,
  max_entries: usize,
  max_bytes: u64,
) -> Result<Option<SearchResult>, SearchError> {
  search_within(req, stop, Some((max_entries, max_bytes)))
}

fn search_within(
  req: &SearchRequest,
  stop: &AtomicBool,
  bound: Option<(usize, u64)>,
) -> Result<Option<SearchResult>, SearchError> {
  let matcher = matcher(&req.pattern, req.case_insensitive, req.multiline)?;
  let rules = RgRules::new(req.root.clone(), req.glob.as_deref(), req.file_type.as_deref()).map_err(|e| match e {
    RuleError::Glob(m) => SearchError::Glob(m),
    RuleError::Type(m) => SearchError::Type(m),
  })?;
  let keep = match req.printer {
    Printer::PathLine { .. } => req.head_limit,
    _ => req
      .head_limit
      .filter(|&h| h > 0)
      .map(|h| req.offset.saturating_add(h)),
  };
  // The scope as it is now, opened beneath the root without following it (one open for a
  // directory to walk or a file to search). It cannot be opened (a permission): looked at to word
  // the error as rg does for a file or a directory.
  let scope_rel = req.scope.strip_prefix(&req.root.path).ok();
  let opened = match scope_rel {
    Some(rel) => req.root.open_scope(rel),
    // Not below the root (cannot happen for a resolved scope): never opened.
    None => Err(std::io::Error::from_raw_os_error(libc::EXDEV)),
  };
  let unreadable_file = match (&opened, scope_rel) {
    (Err(e), Some(rel)) if e.raw_os_error() == Some(libc::EACCES) => {
      req.root.kind_of(rel).ok() == Some(libc::S_IFREG)
    }
    _ => false,
  };
  // Kept contents and listings (`crate::kept`) serve the small searches an agent repeats at every
  // step; a large tree would only churn them (it does not fit, and every miss costs a `stat`).
  let keep_dev = bound.and_then(|_| req.root.settled_dev());
  let visitor = Visitor {
    req,
    matcher: &matcher,
    show_path: !(matches!(opened, Ok(Scope::File(_))) || unreadable_file),
    collector: Mutex::new(Collector {
      keep,
      ..Default::default()
    }),
    bytes: AtomicU64::new(0),
    max_bytes: bound.map(|(_, b)| b),
    keep_dev,
    over_bytes: AtomicBool::new(false),
  };
  match opened {
    // One file: searched whatever the rules say (rg never filters a path it is given).
    Ok(Scope::File(opened)) => {
      let mut local = visitor.local();
      visitor.search_file(&mut local, Arc::from(req.display.as_str()), opened);
      visitor.done(local);
    }
    Ok(Scope::Dir(dir)) => {
      let rel = scope_rel.unwrap_or(Path::new(""));
      let (node, parents_error) = rules.parents(rel);
      if let Some(e) = parents_error {
        visitor.error(|| format!("grep: {e}"));
      }
      let at = At {
        abs: req.scope.clone(),
        rel: String::new(),
      };
      let opts = walk::Options {
        threads: if bound.is_some() { 1 } else { req.threads.max(1) },
        spread_after: WALK_SPREAD_AFTER_ENTRIES,
        stop,
        max_entries: bound.map(|(n, _)| n),
        settled_dev: keep_dev,
      };
      if walk::walk(dir, at, node, &rules, &visitor, &opts) == walk::End::OverLimit {
        return Ok(None);
      }
    }
    // A FIFO, socket or device named as the scope: nothing to search (rg skips it too).
    Ok(Scope::Other) => {}
    Err(err) if unreadable_file => visitor.error(|| format!("grep: {}: {err}", req.display)),
    // Swapped for a symlink since it was checked: not searched, without a word.
    Err(err) if matches!(err.raw_os_error(), Some(libc::ELOOP) | Some(libc::EXDEV)) => {}
    // Missing, not a directory, unreadable: as rg's walker words it.
    Err(err) => {
      let p = path_text(&req.scope);
      visitor.error(|| format!("grep: {p}: IO error for operation on {p}: {err}"));
    }
  }
  if visitor.over_bytes.load(Ordering::Relaxed) {
    return Ok(None);
  }
  let mut c = visitor.collector.into_inner().unwrap_or_else(|e| e.into_inner());
  c.shrink();
  let stopped = stop.load(Ordering::Relaxed);
  let output = match req.printer {
    Printer::PathLine { .. } => SearchOutput::Lines {
      lines: c
        .items
        .into_iter()
        .filter_map(|(_, _, i)| match i {
          Item::Line(t) => Some(t),
          _ => None,
        })
        .collect(),
      errors: c.errors,
      total: c.count,
      bytes: c.bytes,
    },
    printer => {
      let len = c.items.len();
      let from = req.offset.min(len);
      let to = req
        .head_limit
        .filter(|&h| h > 0)
        .map(|h| from.saturating_add(h).min(len))
        .unwrap_or(len);
      let page = c.items.drain(from..to);
      match printer {
        Printer::Content => SearchOutput::Content(
          page
            .filter_map(|(_, _, i)| match i {
              Item::Content(m) => Some(m),
              _ => None,
            })
            .collect(),
        ),
        Printer::Counts => SearchOutput::Counts(
          page
            .map(|(p, _, i)| (p.to_string(), if let Item::Count(n) = i { n } else { 0 }))
            .collect(),
        ),
        _ => SearchOutput::Files(page.map(|(p, _, _)| p.to_string()).collect()),
      }
    }
  };
  Ok(Some(SearchResult { output, stopped }))
}

#[cfg(test)]
mod tests {
  use super::*;

  fn ws() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.txt"), "alpha\nbeta\nALPHA gamma\n").unwrap();
    std::fs::create_dir(d.path().join("src")).unwrap();
    std::fs::write(
      d.path().join("src/b.rs"),
      "fn alpha() {}\nfn beta() { alpha(); alpha() }\n",
    )
    .unwrap();
    std::fs::write(d.path().join("src/c.js"), "const x = 1;\n").unwrap();
    std::fs::write(d.path().join("bin.dat"), b"alpha\0\x01\x02").unwrap();
    d
  }

  fn req(d: &Path, pattern: &str, mode: OutputMode) -> SearchRequest {
    let root = crate::workspace::Workspace::new(d).root().unwrap();
    SearchRequest {
      pattern: pattern.into(),
      scope: root.path.clone(),
      root,
      display: ".".into(),
      glob: None,
      file_type: None,
      case_insensitive: false,
      multiline: false,
      before: 0,
      after: 0,
      printer: mode,
      offset: 0,
      head_limit: None,
      max_line_length: 2000,
      threads: 2,
    }
  }

  fn go(r: &SearchRequest) -> SearchOutput {
    search(r, &AtomicBool::new(false)).unwrap().output
  }

  /// A bounded search (grep's inline one), which keeps contents and listings.
  fn go_small(r: &SearchRequest) -> SearchOutput {
    search_small(r, &AtomicBool::new(false), 64, 256 * 1024).unwrap().unwrap().output
  }

  fn stat(p: &Path) -> libc::stat {
    let c = CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: NUL-terminated path, writable stat buffer.
    assert_eq!(unsafe { libc::lstat(c.as_ptr(), &mut st) }, 0);
    st
  }

  /// The kept contents (`contents`): a file changed within the settle time is not kept; a settled
  /// one is kept after one search and then served from there (a forced entry shows it); any
  /// change, of the same size too, moves the file's identity and it is searched from disk again.
  /// On a file system not listed in `Root::settled_dev` nothing is ever kept.
  #[test]
  fn kept_contents_follow_every_change() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("f.txt");
    std::fs::write(&f, "needle one\n").unwrap();
    let local = crate::workspace::Workspace::new(d.path()).root().unwrap().settled_dev().is_some();
    let lines = || match go_small(&req(d.path(), "needle", Printer::PathLine { max_per_file: 200 })) {
      SearchOutput::Lines { lines, .. } => lines,
      other => panic!("{other:?}"),
    };
    crate::kept::NOW_AHEAD.with(|a| a.set(std::time::Duration::ZERO));
    assert_eq!(lines(), vec!["./f.txt:1:needle one".to_string()]);
    assert!(!contents::holds(&stat(&f)), "a file changed just now is not kept");
    // As if two minutes had passed since the file was written.
    crate::kept::NOW_AHEAD.with(|a| a.set(std::time::Duration::from_secs(120)));
    assert_eq!(lines(), vec!["./f.txt:1:needle one".to_string()]);
    assert_eq!(contents::holds(&stat(&f)), local);
    if local {
      contents::force(&stat(&f), b"needle kept\n");
      assert_eq!(lines(), vec!["./f.txt:1:needle kept".to_string()]);
    }
    // Same size, new contents: written until the change time moves (it ticks every few ms).
    let before = stat(&f);
    for _ in 0..2000 {
      std::fs::write(&f, "needle two\n").unwrap();
      let now = stat(&f);
      if (now.st_ctime, now.st_ctime_nsec) != (before.st_ctime, before.st_ctime_nsec) {
        break;
      }
      std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(lines(), vec!["./f.txt:1:needle two".to_string()]);
    assert_eq!(contents::holds(&stat(&f)), local);
    // A larger file is never kept.
    std::fs::write(&f, format!("needle\n{}", "x".repeat(20_000))).unwrap();
    assert_eq!(lines(), vec!["./f.txt:1:needle".to_string()]);
    assert!(!contents::holds(&stat(&f)));
    // The directory's listing is kept too; a name added (or removed) moves the directory's ctime
    // and it is listed again.
    assert_eq!(crate::walk::listing_kept(&stat(d.path())), local);
    let changed = |before: &libc::stat, make: &dyn Fn()| {
      for _ in 0..2000 {
        make();
        let now = stat(d.path());
        if (now.st_ctime, now.st_ctime_nsec) != (before.st_ctime, before.st_ctime_nsec) {
          return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        let _ = std::fs::remove_file(d.path().join("scratch"));
        std::fs::write(d.path().join("scratch"), "").unwrap();
      }
    };
    let before = stat(d.path());
    changed(&before, &|| std::fs::write(d.path().join("g.txt"), "needle g\n").unwrap());
    let _ = std::fs::remove_file(d.path().join("scratch"));
    assert_eq!(lines(), vec!["./f.txt:1:needle".to_string(), "./g.txt:1:needle g".to_string()]);
    let before = stat(d.path());
    changed(&before, &|| {
      let _ = std::fs::remove_file(d.path().join("g.txt"));
    });
    let _ = std::fs::remove_file(d.path().join("scratch"));
    assert_eq!(lines(), vec!["./f.txt:1:needle".to_string()]);
    crate::kept::NOW_AHEAD.with(|a| a.set(std::time::Duration::ZERO));
  }

  /// An ancestor's listing is kept like the workspace's own (`Listing::kept_of_path_fd`): an
  /// `.ignore` added there after it was kept applies, and stops applying once it is removed.
  #[test]
  fn kept_ancestor_listings_follow_their_ignore_files() {
    let parent = tempfile::tempdir().unwrap();
    let ws = parent.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("ok.txt"), "needle\n").unwrap();
    std::fs::write(ws.join("secret.txt"), "needle\n").unwrap();
    let files = || match go_small(&req(&ws, "needle", Printer::Files)) {
      SearchOutput::Files(f) => f,
      other => panic!("{other:?}"),
    };
    let both = vec!["./ok.txt".to_string(), "./secret.txt".to_string()];
    crate::kept::NOW_AHEAD.with(|a| a.set(std::time::Duration::from_secs(120)));
    assert_eq!(files(), both);
    let local = crate::workspace::Workspace::new(&ws).root().unwrap().settled_dev().is_some();
    assert_eq!(crate::walk::listing_kept(&stat(parent.path())), local);
    // Changes the parent until its change time moves (it ticks every few ms).
    let change = |make: &dyn Fn()| {
      let before = stat(parent.path());
      for _ in 0..2000 {
        make();
        let _ = std::fs::remove_file(parent.path().join("scratch"));
        let now = stat(parent.path());
        if (now.st_ctime, now.st_ctime_nsec) != (before.st_ctime, before.st_ctime_nsec) {
          return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        std::fs::write(parent.path().join("scratch"), "").unwrap();
      }
    };
    change(&|| std::fs::write(parent.path().join(".ignore"), "secret.txt\n").unwrap());
    assert_eq!(files(), vec!["./ok.txt".to_string()]);
    change(&|| {
      let _ = std::fs::remove_file(parent.path().join(".ignore"));
    });
    assert_eq!(files(), both);
    crate::kept::NOW_AHEAD.with(|a| a.set(std::time::Duration::ZERO));
  }

  #[test]
  fn files_mode_sorted_and_binary_skipped() {
    let d = ws();
    assert_eq!(
      go(&req(d.path(), "alpha", Printer::Files)),
      SearchOutput::Files(vec!["./a.txt".into(), "./src/b.rs".into()])
    );
  }

  #[test]
  fn names_that_are_not_utf8_are_printed_so_a_tool_path_reaches_them() {
    use std::os::unix::ffi::OsStrExt;
    let d = tempfile::tempdir().unwrap();
    // Latin-1 directory "dé" holding Latin-1 "café.txt".
    let dir = d.path().join(std::ffi::OsStr::from_bytes(b"d\xe9"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), "needle\n").unwrap();
    let SearchOutput::Files(files) = go(&req(d.path(), "needle", Printer::Files)) else {
      panic!()
    };
    assert_eq!(files, vec!["./d\u{EFE9}/caf\u{EFE9}.txt".to_string()]);
    let ws = crate::workspace::Workspace::new(d.path());
    let r = ws.resolve(&files[0]).unwrap();
    assert_eq!(std::fs::read_to_string(&r.abs).unwrap(), "needle\n");
    // The scope given by that name is printed as given, its files below it the same way.
    let mut r = req(d.path(), "needle", Printer::Counts);
    r.scope = dir.clone();
    r.display = "d\u{EFE9}".into();
    assert_eq!(go(&r), SearchOutput::Counts(vec![("d\u{EFE9}/caf\u{EFE9}.txt".into(), 1)]));
  }

  #[test]
  fn count_mode_counts_every_match() {
    let d = ws();
    let mut r = req(d.path(), "alpha", Printer::Counts);
    r.case_insensitive = true;
    assert_eq!(
      go(&r),
      SearchOutput::Counts(vec![("./a.txt".into(), 2), ("./src/b.rs".into(), 3)])
    );
  }

  #[test]
  fn content_mode_with_context_and_paging() {
    let d = ws();
    let mut r = req(d.path(), "alpha", Printer::Content);
    r.case_insensitive = true;
    r.before = 1;
    r.after = 1;
    r.glob = Some("*.txt".into());
    let SearchOutput::Content(m) = go(&r) else {
      panic!()
    };
    assert_eq!(m.len(), 2);
    assert_eq!((m[0].line_number, m[0].line.as_str()), (1, "alpha"));
    assert_eq!(m[0].after_context, vec!["beta"]);
    assert!(m[1].before_context.is_empty());
    assert_eq!(m[1].line, "ALPHA gamma");
    r.offset = 1;
    r.head_limit = Some(1);
    let SearchOutput::Content(m) = go(&r) else {
      panic!()
    };
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].line_number, 3);
  }

  #[test]
  fn before_only_context_is_not_attached_as_after() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("f.txt"), "hit\nx\ny\nhit\n").unwrap();
    let mut r = req(d.path(), "hit", Printer::Content);
    r.before = 2;
    let SearchOutput::Content(m) = go(&r) else {
      panic!()
    };
    assert!(m[0].after_context.is_empty());
    assert_eq!(m[1].before_context, vec!["x", "y"]);
  }

  #[test]
  fn types_globs_multiline_and_errors() {
    let d = ws();
    let mut r = req(d.path(), "const|fn", Printer::Files);
    r.file_type = Some("js".into());
    assert_eq!(go(&r), SearchOutput::Files(vec!["./src/c.js".into()]));
    let mut r = req(d.path(), r"beta\nALPHA", Printer::Content);
    r.multiline = true;
    let SearchOutput::Content(m) = go(&r) else {
      panic!()
    };
    assert_eq!(m[0].line, "beta\nALPHA gamma");
    assert!(matches!(
      search(&req(d.path(), "(", Printer::Counts), &AtomicBool::new(false)),
      Err(SearchError::Regex(_))
    ));
    let mut r = req(d.path(), "a", Printer::Counts);
    r.file_type = Some("nosuchtype".into());
    assert!(matches!(
      search(&r, &AtomicBool::new(false)),
      Err(SearchError::Type(_))
    ));
  }

  #[test]
  fn single_file_scope_prints_the_path_as_given() {
    let d = ws();
    let mut r = req(d.path(), "beta", Printer::Files);
    r.scope = r.root.path.join("a.txt");
    r.display = "a.txt".into();
    assert_eq!(go(&r), SearchOutput::Files(vec!["a.txt".into()]));
  }

  /// Issue 13: a directory swapped for an outward symlink while the search runs must never let a
  /// file outside the workspace be read. Without the descriptor-relative open this leaks within a
  /// few hundred rounds on a busy machine.
  #[test]
  fn a_directory_swapped_for_a_symlink_never_leaks_outside_files() {
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().join("ws");
    let outside = base.path().join("outside");
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    for i in 0..20 {
      std::fs::write(ws.join("d").join(format!("f{i}.txt")), "needle public\n").unwrap();
      std::fs::write(outside.join(format!("f{i}.txt")), "needle SECRET\n").unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
      let (ws, outside, stop) = (ws.clone(), outside.clone(), stop.clone());
      std::thread::spawn(move || {
        let (real, parked) = (ws.join("d"), ws.join("d.real"));
        while !stop.load(Ordering::Relaxed) {
          // d: real directory -> symlink to outside -> real directory again.
          let _ = std::fs::rename(&real, &parked);
          let _ = std::os::unix::fs::symlink(&outside, &real);
          std::thread::yield_now();
          let _ = std::fs::remove_file(&real);
          let _ = std::fs::rename(&parked, &real);
          std::thread::yield_now();
        }
      })
    };
    let mut r = req(&ws, "needle", Printer::Content);
    r.threads = 1;
    let mut seen_public = false;
    for _ in 0..400 {
      let SearchOutput::Content(m) = go(&r) else {
        panic!()
      };
      assert!(
        m.iter().all(|m| !m.line.contains("SECRET")),
        "read outside the workspace: {m:?}"
      );
      seen_public |= !m.is_empty();
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(seen_public, "the search never ran on the real directory");
  }

  /// A file is read as far as its size when it was opened, with no end-of-file read; a size of 0
  /// (what `/proc` reports for files with content) reads to the real end. Reads bigger than the
  /// buffer go straight to the file, smaller ones through it.
  #[test]
  fn a_file_is_read_as_far_as_its_size_when_opened() {
    use std::io::{Read, Write};
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("f.txt");
    std::fs::write(&p, "needle one\n").unwrap();
    let file = std::fs::File::open(&p).unwrap();
    std::fs::OpenOptions::new().append(true).open(&p).unwrap().write_all(b"needle two\n").unwrap();
    let mut buf = vec![0u8; 4];
    let mut r = SizedReader {
      file,
      remaining: Some(11),
      buf: &mut buf,
      pos: 0,
      filled: 0,
    };
    let mut small = [0u8; 3];
    assert_eq!(r.read(&mut small).unwrap(), 3, "a small read is served from the buffer");
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).unwrap();
    assert_eq!([&small[..], &rest[..]].concat(), b"needle one\n");
    let mut unknown = SizedReader {
      file: std::fs::File::open("/proc/self/status").unwrap(),
      remaining: None,
      buf: &mut buf,
      pos: 0,
      filled: 0,
    };
    let mut text = String::new();
    unknown.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("Name:"), "{text}");
    // Through the searcher: the line appended after the open is not searched.
    let mut r = req(d.path(), "needle", Printer::Content);
    r.scope = r.root.path.join("f.txt");
    let SearchOutput::Content(m) = go(&r) else { panic!() };
    assert_eq!(m.len(), 2, "a fresh open sees both lines");
  }

  /// A FIFO swapped in for a listed file is opened without waiting and skipped.
  #[test]
  fn a_fifo_never_hangs_the_search() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.txt"), "needle\n").unwrap();
    let fifo = std::ffi::CString::new(d.path().join("p.txt").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let root = crate::workspace::Workspace::new(d.path()).root().unwrap();
    assert!(root.open_regular(Path::new("p.txt")).unwrap().is_none());
    assert!(root.open_regular(Path::new("a.txt")).unwrap().is_some());
    assert_eq!(
      go(&req(d.path(), "needle", Printer::Files)),
      SearchOutput::Files(vec!["./a.txt".into()])
    );
    let mut single = req(d.path(), "needle", Printer::Files);
    single.scope = root.path.join("p.txt");
    single.display = "p.txt".into();
    assert_eq!(go(&single), SearchOutput::Files(vec![]));
  }
}
