//! An in-process ripgrep with three output modes, for the AI SDK `Grep` tool: the same walk
//! as `rg` (the `ignore` crate honouring `.gitignore`, `.ignore` and hidden-file rules, `-g`
//! globs and `-t` types), the same matcher (`grep-regex`, `-i`, `-U --multiline-dotall`), and
//! `grep-searcher` for the lines, binary detection and `-A/-B/-C` context.
//!
//! * `files_with_matches`: each file stops at its first match;
//! * `count`: matches per file (every match, several per line if so, as rg's `stats.matches`);
//! * `content`: matching lines with their context; a context line goes to the match it belongs
//!   to in rg's own grouping (lines after a match within `-A` are its `after_context`, lines
//!   before the next match within `-B` are that match's `before_context`).
//!
//! Results are sorted by path (and line), so pages (`offset`, `head_limit`) are stable; when a
//! page is asked for, only the first `offset + head_limit` entries are kept while searching.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
  BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::{WalkBuilder, WalkState};

use crate::sandbox::{utf16_len, utf16_prefix};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
  Content,
  FilesWithMatches,
  Count,
}

pub struct SearchRequest {
  pub pattern: String,
  /// The canonical file or directory to search.
  pub scope: PathBuf,
  /// How the scope is printed before each file's relative path (`.`, `src`, `/abs/dir`).
  pub display: String,
  /// Base directory of `glob` (rg's working directory: the workspace).
  pub base: PathBuf,
  pub glob: Option<String>,
  pub file_type: Option<String>,
  pub case_insensitive: bool,
  pub multiline: bool,
  pub before: usize,
  pub after: usize,
  pub mode: OutputMode,
  pub offset: usize,
  pub head_limit: Option<usize>,
  /// Lines (and context lines) longer than this many UTF-16 units are cut and end with `…`.
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

impl std::fmt::Display for SearchError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match self {
      SearchError::Regex(m) => write!(f, "invalid regex: {m}"),
      SearchError::Glob(m) => write!(f, "invalid glob: {m}"),
      SearchError::Type(m) => write!(f, "{m}"),
    }
  }
}

/// rg prints a path as the scope it was given joined with the path below it (`./a.txt`); a
/// single file is printed as given.
pub fn display_path(display: &str, scope: &Path, path: &Path) -> String {
  match path.strip_prefix(scope) {
    Ok(rel) if !rel.as_os_str().is_empty() => {
      if display.ends_with('/') {
        format!("{display}{}", rel.to_string_lossy())
      } else {
        format!("{display}/{}", rel.to_string_lossy())
      }
    }
    _ => display.to_string(),
  }
}

/// rg's walk of `scope`: its default filters, `-g` globs relative to `base`, `-t` types.
pub fn rg_walk(
  scope: &Path,
  base: &Path,
  glob: Option<&str>,
  file_type: Option<&str>,
  threads: usize,
) -> Result<WalkBuilder, SearchError> {
  let mut walk = WalkBuilder::new(scope);
  walk.threads(threads.max(1));
  if let Some(glob) = glob {
    let mut ob = OverrideBuilder::new(base);
    let ov = ob
      .add(glob)
      .and_then(|b| b.build())
      .map_err(|e| SearchError::Glob(e.to_string()))?;
    walk.overrides(ov);
  }
  if let Some(t) = file_type {
    let mut tb = TypesBuilder::new();
    tb.add_defaults();
    tb.select(t);
    let types = tb.build().map_err(|e| SearchError::Type(e.to_string()))?;
    walk.types(types);
  }
  Ok(walk)
}

fn cut(s: &str, max: usize) -> String {
  if utf16_len(s) > max {
    let mut out = utf16_prefix(s, max).to_string();
    out.push('…');
    out
  } else {
    s.to_string()
  }
}

fn line_text(bytes: &[u8], max: usize) -> String {
  let b = bytes.strip_suffix(b"\n").unwrap_or(bytes);
  let b = b.strip_suffix(b"\r").unwrap_or(b);
  cut(&String::from_utf8_lossy(b), max)
}

/// One file's findings.
enum FileFindings {
  Matched,
  Count(u64),
}

struct FileSink<'a> {
  matcher: &'a RegexMatcher,
  mode: OutputMode,
  file: &'a str,
  max_line: usize,
  matched: bool,
  count: u64,
  matches: Vec<ContentMatch>,
  /// Before-context lines waiting for the next match.
  pending_before: Vec<String>,
}

impl Sink for FileSink<'_> {
  type Error = std::io::Error;

  fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
    self.matched = true;
    match self.mode {
      OutputMode::FilesWithMatches => Ok(false),
      OutputMode::Count => {
        let mut n = 0u64;
        let _ = self.matcher.find_iter(m.bytes(), |_| {
          n += 1;
          true
        });
        self.count += n.max(1);
        Ok(true)
      }
      OutputMode::Content => {
        self.matches.push(ContentMatch {
          file: self.file.to_string(),
          line_number: m.line_number().unwrap_or(0),
          line: line_text(m.bytes(), self.max_line),
          before_context: std::mem::take(&mut self.pending_before),
          after_context: Vec::new(),
        });
        Ok(true)
      }
    }
  }

  fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
    let text = line_text(c.bytes(), self.max_line);
    match c.kind() {
      SinkContextKind::After => match self.matches.last_mut() {
        Some(last) => last.after_context.push(text),
        None => self.pending_before.push(text),
      },
      _ => self.pending_before.push(text),
    }
    Ok(true)
  }
}

/// Keeps entries sorted by (path, line), bounded to the first `keep` when a page is asked for.
struct Collector<T> {
  items: Vec<(Arc<str>, u64, T)>,
  keep: Option<usize>,
}

impl<T> Collector<T> {
  fn add(&mut self, path: &Arc<str>, line: u64, item: T) {
    self.items.push((path.clone(), line, item));
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
}

/// First read per searched file; larger files continue with the searcher's own reads.
const SEARCH_READ_BYTES: usize = 16 * 1024;

/// Runs the search. `stop` ends it early (the result is then marked `stopped`).
pub fn search(req: &SearchRequest, stop: &AtomicBool) -> Result<SearchResult, SearchError> {
  let mut mb = RegexMatcherBuilder::new();
  mb.case_insensitive(req.case_insensitive);
  if req.multiline {
    mb.multi_line(true).dot_matches_new_line(true);
  } else {
    mb.line_terminator(Some(b'\n'));
  }
  let matcher = mb
    .build(&req.pattern)
    .map_err(|e| SearchError::Regex(e.to_string()))?;
  let walk = rg_walk(
    &req.scope,
    &req.base,
    req.glob.as_deref(),
    req.file_type.as_deref(),
    req.threads,
  )?;
  let keep = req
    .head_limit
    .filter(|&h| h > 0)
    .map(|h| req.offset.saturating_add(h));
  let collector: Mutex<Collector<FileFindings>> = Mutex::new(Collector {
    items: Vec::new(),
    keep,
  });
  let content_collector: Mutex<Collector<ContentMatch>> = Mutex::new(Collector {
    items: Vec::new(),
    keep,
  });
  let (before, after) = if req.mode == OutputMode::Content {
    (req.before, req.after)
  } else {
    (0, 0)
  };

  walk.build_parallel().run(|| {
    let matcher = matcher.clone();
    let collector = &collector;
    let content_collector = &content_collector;
    let mut searcher = SearcherBuilder::new()
      .line_number(true)
      .multi_line(req.multiline)
      .before_context(before)
      .after_context(after)
      .binary_detection(BinaryDetection::quit(b'\x00'))
      .build();
    Box::new(move |entry| {
      if stop.load(Ordering::Relaxed) {
        return WalkState::Quit;
      }
      let Ok(entry) = entry else {
        return WalkState::Continue;
      };
      if !entry.file_type().is_some_and(|t| t.is_file()) {
        return WalkState::Continue;
      }
      let file: Arc<str> = Arc::from(display_path(&req.display, &req.scope, entry.path()).as_str());
      let mut sink = FileSink {
        matcher: &matcher,
        mode: req.mode,
        file: &file,
        max_line: req.max_line_length,
        matched: false,
        count: 0,
        matches: Vec::new(),
        pending_before: Vec::new(),
      };
      // `search_path` minus one syscall per file (its BOM sniffing reads 3 bytes first; through
      // a small BufReader that read fetches a typical source file whole).
      let searched = std::fs::File::open(entry.path()).and_then(|file| {
        searcher.search_reader(
          &matcher,
          std::io::BufReader::with_capacity(SEARCH_READ_BYTES, file),
          &mut sink,
        )
      });
      if searched.is_err() || !sink.matched {
        return WalkState::Continue;
      }
      match req.mode {
        OutputMode::Content => {
          let mut c = content_collector.lock().unwrap_or_else(|e| e.into_inner());
          for m in sink.matches {
            let line = m.line_number;
            c.add(&file, line, m);
          }
        }
        OutputMode::Count => {
          collector
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(&file, 0, FileFindings::Count(sink.count))
        }
        OutputMode::FilesWithMatches => {
          collector
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(&file, 0, FileFindings::Matched)
        }
      }
      WalkState::Continue
    })
  });

  let page = |len: usize| {
    let from = req.offset.min(len);
    let to = req
      .head_limit
      .filter(|&h| h > 0)
      .map(|h| from.saturating_add(h).min(len))
      .unwrap_or(len);
    (from, to)
  };
  let output = match req.mode {
    OutputMode::Content => {
      let mut c = content_collector.into_inner().unwrap_or_else(|e| e.into_inner());
      c.shrink();
      let (from, to) = page(c.items.len());
      SearchOutput::Content(c.items.drain(from..to).map(|(_, _, m)| m).collect())
    }
    mode => {
      let mut c = collector.into_inner().unwrap_or_else(|e| e.into_inner());
      c.shrink();
      let (from, to) = page(c.items.len());
      let items = c.items.drain(from..to);
      if mode == OutputMode::Count {
        SearchOutput::Counts(
          items
            .map(|(p, _, f)| {
              let n = if let FileFindings::Count(n) = f { n } else { 0 };
              (p.to_string(), n)
            })
            .collect(),
        )
      } else {
        SearchOutput::Files(items.map(|(p, _, _)| p.to_string()).collect())
      }
    }
  };
  Ok(SearchResult {
    output,
    stopped: stop.load(Ordering::Relaxed),
  })
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
    SearchRequest {
      pattern: pattern.into(),
      scope: d.to_path_buf(),
      display: ".".into(),
      base: d.to_path_buf(),
      glob: None,
      file_type: None,
      case_insensitive: false,
      multiline: false,
      before: 0,
      after: 0,
      mode,
      offset: 0,
      head_limit: None,
      max_line_length: 2000,
      threads: 2,
    }
  }

  fn go(r: &SearchRequest) -> SearchOutput {
    search(r, &AtomicBool::new(false)).unwrap().output
  }

  #[test]
  fn files_mode_sorted_and_binary_skipped() {
    let d = ws();
    assert_eq!(
      go(&req(d.path(), "alpha", OutputMode::FilesWithMatches)),
      SearchOutput::Files(vec!["./a.txt".into(), "./src/b.rs".into()])
    );
  }

  #[test]
  fn count_mode_counts_every_match() {
    let d = ws();
    let mut r = req(d.path(), "alpha", OutputMode::Count);
    r.case_insensitive = true;
    assert_eq!(
      go(&r),
      SearchOutput::Counts(vec![("./a.txt".into(), 2), ("./src/b.rs".into(), 3)])
    );
  }

  #[test]
  fn content_mode_with_context_and_paging() {
    let d = ws();
    let mut r = req(d.path(), "alpha", OutputMode::Content);
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
    let mut r = req(d.path(), "hit", OutputMode::Content);
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
    let mut r = req(d.path(), "const|fn", OutputMode::FilesWithMatches);
    r.file_type = Some("js".into());
    assert_eq!(go(&r), SearchOutput::Files(vec!["./src/c.js".into()]));
    let mut r = req(d.path(), r"beta\nALPHA", OutputMode::Content);
    r.multiline = true;
    let SearchOutput::Content(m) = go(&r) else {
      panic!()
    };
    assert_eq!(m[0].line, "beta\nALPHA gamma");
    assert!(matches!(
      search(&req(d.path(), "(", OutputMode::Count), &AtomicBool::new(false)),
      Err(SearchError::Regex(_))
    ));
    let mut r = req(d.path(), "a", OutputMode::Count);
    r.file_type = Some("nosuchtype".into());
    assert!(matches!(
      search(&r, &AtomicBool::new(false)),
      Err(SearchError::Type(_))
    ));
  }

  #[test]
  fn single_file_scope_prints_the_path_as_given() {
    let d = ws();
    let mut r = req(d.path(), "beta", OutputMode::FilesWithMatches);
    r.scope = d.path().join("a.txt");
    r.display = "a.txt".into();
    assert_eq!(go(&r), SearchOutput::Files(vec!["a.txt".into()]));
  }
}
