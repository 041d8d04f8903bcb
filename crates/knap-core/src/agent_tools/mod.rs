//! The AI SDK tool set of `knap/ai-sdk` (bashkit 0.7.1's `Bash`, `Read`, `Write`, `Edit`, `Glob`,
//! `Grep`, `Patch`, and the background runner) as operations of the core over one [`Sandbox`].
//!
//! Each operation takes bashkit's input and answers bashkit's output or `{error}` (an `Err`
//! string here), plus the [`Effects`] the cache needs (which resolved paths it may have
//! written). With knap's [`LocalSandbox`] the operations take the native paths: Read streams the
//! file keeping only the lines it returns, Grep is the in-process searcher, Glob the
//! descriptor-relative walk, Bash keeps only a head and a tail. With any other sandbox they go
//! through its interface: Read splits `readFile`, Glob lists with `find`, Grep runs
//! `sandbox.rgPath` and reads its `--json` output.
//!
//! The JS layer (`lib/ai-sdk/`) builds the AI SDK tool objects around these operations.

mod paths;
mod rg;
pub mod sandbox;
pub mod system_context;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use paths::PathPolicy;
pub use sandbox::{ExecCall, ExecReply, Sandbox, SandboxError, SbResult};

use crate::apply_patch;
use crate::edit::{replace_literal, Miss, LOSSY_HINT};
use crate::glob::{glob, CompiledGlob, GlobRequest};
use crate::limits::*;
use crate::sandbox::{ExecOptions, LocalSandbox, ReadOptions, ReadOutcome};
use crate::search::{
  search, stop_on, walk_threads, ContentMatch, Printer, SearchError, SearchOutput, SearchRequest,
};
use crate::text::ai as text;
use crate::truncate::{middle_truncate, utf16_len};

/// What a `ToolConfig` says for one tool (bashkit's names; `None`: the default).
#[derive(Debug, Clone, Default)]
pub struct ToolConfig {
  pub timeout_ms: Option<u64>,
  /// Write/Edit/Patch: bytes. Read: lines without a `limit` (bashkit reuses the name).
  pub max_file_size: Option<u64>,
  pub max_output_length: Option<usize>,
  pub max_line_length: Option<usize>,
  pub allowed_paths: Option<Vec<String>>,
  pub blocked_commands: Vec<String>,
  /// Glob: paths returned at most, newest first; Grep: files, counts or matching lines returned
  /// at most (`None`: `AI_SDK_SEARCH_MAX_RESULTS`; `Some(0)`: all). A cut list says so in its
  /// `note`.
  pub max_results: Option<usize>,
}

/// One tool's configuration, compiled.
pub struct Tool {
  config: ToolConfig,
  policy: Option<PathPolicy>,
  timeout_ms: u64,
}

/// Which resolved paths a call may have written, for the cache's invalidation log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
  pub touched: Vec<String>,
  /// Anything may have changed (Bash).
  pub all: bool,
}

/// A tool's answer: bashkit's output object, or its `{error}` text.
pub type Answer<T> = Result<T, String>;

#[derive(Debug, Clone, PartialEq)]
pub struct Background {
  pub pid: u32,
  pub output_file: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BashOutput {
  pub stdout: String,
  pub stderr: String,
  pub exit_code: Option<i32>,
  pub interrupted: Option<bool>,
  pub duration_ms: Option<f64>,
  pub background: Option<Background>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ReadOutput {
  Text {
    content: String,
    /// `(line_number, content)`.
    lines: Vec<(u64, String)>,
    total_lines: u64,
  },
  Directory {
    entries: Vec<String>,
  },
}

#[derive(Debug, Clone, PartialEq)]
pub struct WriteOutput {
  pub message: String,
  pub bytes_written: u64,
  pub file_path: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EditOutput {
  pub message: String,
  pub file_path: String,
  pub replacements: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GlobOutput {
  pub matches: Vec<String>,
  pub search_path: String,
  /// Every path that matched (more than `matches` holds when the list was cut).
  pub total: usize,
  /// Set when the list was cut: how many more matched and how to narrow (the model reads it last).
  pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GrepOutput {
  Files(Vec<String>),
  Counts(Vec<(String, u64)>),
  Content(Vec<ContentMatch>),
}

/// Grep's answer after the `maxResults` bound: the entries returned, how many this call had
/// (after `offset`/`head_limit`), and, when the bound cut them, the note the model reads last.
#[derive(Debug, Clone, PartialEq)]
pub struct GrepPage {
  pub output: GrepOutput,
  pub total: usize,
  pub note: Option<String>,
}

/// The bound of one search tool: `None` is the default, `Some(0)` no bound.
fn result_limit(max_results: Option<usize>) -> usize {
  match max_results {
    None => AI_SDK_SEARCH_MAX_RESULTS,
    Some(0) => usize::MAX,
    Some(n) => n,
  }
}

/// Cuts Grep's entries (files, counts or matching lines) at the tool's bound. A page the model
/// asked for with `head_limit` is bounded too: the bound is the application's, the model's
/// `offset` reaches the rest.
fn bound_grep(output: GrepOutput, max_results: Option<usize>) -> GrepPage {
  let limit = result_limit(max_results);
  let total = match &output {
    GrepOutput::Files(v) => v.len(),
    GrepOutput::Counts(v) => v.len(),
    GrepOutput::Content(v) => v.len(),
  };
  if total <= limit {
    return GrepPage { output, total, note: None };
  }
  let output = match output {
    GrepOutput::Files(mut v) => {
      v.truncate(limit);
      GrepOutput::Files(v)
    }
    GrepOutput::Counts(mut v) => {
      v.truncate(limit);
      GrepOutput::Counts(v)
    }
    GrepOutput::Content(mut v) => {
      v.truncate(limit);
      GrepOutput::Content(v)
    }
  };
  GrepPage {
    output,
    total,
    note: Some(crate::text::search_truncated_note("Grep", limit, Some(total))),
  }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PatchOutput {
  pub message: String,
  /// `(status, path)`: `added`, `modified`, `deleted`.
  pub files: Vec<(&'static str, String)>,
}

#[derive(Debug, Clone, Default)]
pub struct BashInput {
  pub command: String,
  pub timeout_ms: Option<f64>,
  pub run_in_background: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ReadInput {
  pub file_path: String,
  pub offset: Option<f64>,
  pub limit: Option<f64>,
}

#[derive(Debug, Clone, Default)]
pub struct EditInput {
  pub file_path: String,
  pub old_string: String,
  pub new_string: String,
  pub replace_all: bool,
}

#[derive(Debug, Clone, Default)]
pub struct GrepInput {
  pub pattern: String,
  pub path: Option<String>,
  pub glob: Option<String>,
  pub file_type: Option<String>,
  /// `content`, `files_with_matches` (default) or `count`.
  pub output_mode: Option<String>,
  pub case_insensitive: bool,
  pub before: Option<f64>,
  pub after: Option<f64>,
  pub context: Option<f64>,
  pub head_limit: Option<f64>,
  pub offset: Option<f64>,
  pub multiline: bool,
}

/// The tool set of one `createAgentTools` call (or one single-tool factory): its sandbox and
/// the default timeout.
pub struct AgentTools {
  sandbox: Arc<dyn Sandbox>,
  default_timeout_ms: u64,
}

const BINARY_EXTENSIONS: &[&str] = &[
  "pdf", "png", "jpg", "jpeg", "gif", "zip", "tar", "gz", "exe", "bin", "so", "dylib",
];

/// `path.split(".").pop().toLowerCase()`.
fn extension_of(path: &str) -> String {
  path.rsplit('.').next().unwrap_or("").to_lowercase()
}

/// `'…'` with `'` escaped, for `/bin/sh`.
pub fn shell_quote(v: &str) -> String {
  format!("'{}'", v.replace('\'', "'\\''"))
}

/// What a numeric input may hold.
#[derive(Clone, Copy)]
enum Num {
  /// A line number or a count: an integer, 0 or more (0 is bashkit's "not given", as its falsy
  /// checks read it).
  Count,
  /// Milliseconds: more than 0.
  Timeout,
}

/// bashkit's numeric inputs, checked before anything runs. Its zod schemas refuse NaN and
/// ±Infinity (which a direct `execute` can pass); a negative or fractional line number, count
/// or context size, or a timeout of 0 or less, has no meaning bashkit defines (its `slice`
/// arithmetic would read from the end, or kill the command at once), so it is an error too.
fn check_numbers(fields: &[(&str, Option<f64>, Num)]) -> Result<(), String> {
  for &(name, value, kind) in fields {
    let Some(v) = value else { continue };
    let ok = match kind {
      Num::Count => v.is_finite() && v >= 0.0 && v.fract() == 0.0,
      Num::Timeout => v.is_finite() && v > 0.0,
    };
    if !ok {
      let want = match kind {
        Num::Count => "a non-negative integer",
        Num::Timeout => "a positive number of milliseconds",
      };
      return Err(format!("Invalid \"{name}\": expected {want}, received {}", js_number(v)));
    }
  }
  Ok(())
}

/// A number as JavaScript prints it (`NaN`, `Infinity`, `-1`, `2.5`).
fn js_number(v: f64) -> String {
  if v.is_nan() {
    "NaN".into()
  } else if v.is_infinite() {
    if v > 0.0 { "Infinity".into() } else { "-Infinity".into() }
  } else {
    format!("{v}")
  }
}

fn positive_floor(v: Option<f64>) -> Option<u64> {
  v.filter(|x| x.is_finite() && *x > 0.0).map(|x| x.floor() as u64)
}

/// How a search root is printed before the paths below it: as the caller wrote it.
fn display_of(given: &str) -> String {
  let t = given.trim_end_matches('/');
  if given.is_empty() {
    ".".to_string()
  } else if t.is_empty() {
    "/".to_string()
  } else {
    t.to_string()
  }
}

/// Runs `f`, answering `{error: "<Name> timed out after N ms"}` past `ms` (0: no limit).
async fn with_timeout<T>(ms: u64, name: &str, f: impl Future<Output = Answer<T>>) -> Answer<T> {
  if ms == 0 {
    return f.await;
  }
  match tokio::time::timeout(Duration::from_millis(ms), f).await {
    Ok(r) => r,
    Err(_) => Err(text::timed_out(name, ms)),
  }
}

pub(crate) async fn blocking<T: Send + 'static>(
  f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, SandboxError> {
  tokio::task::spawn_blocking(f)
    .await
    .map_err(|e| SandboxError::new(e.to_string()))
}

/// Blocking file work that stops once nobody waits for it: when the awaiting future is dropped
/// (its tool's timeout fired, or the call was abandoned) the guard cancels the token, and the
/// read or write loop checks it between chunks.
pub(crate) async fn blocking_cancellable<T: Send + 'static>(
  f: impl FnOnce(&CancellationToken) -> T + Send + 'static,
) -> Result<T, SandboxError> {
  let token = CancellationToken::new();
  let _guard = token.clone().drop_guard();
  blocking(move || f(&token)).await
}

/// Answers `"<Name> was aborted"` as soon as `cancel` fires; the tool's future is dropped then,
/// which stops its blocking file work between pieces ([`blocking_cancellable`]) and removes an
/// unfinished atomic write's temporary. A write another sandbox's `writeFile` already started
/// cannot be called back: it may still land.
pub async fn abortable<T>(cancel: &CancellationToken, name: &str, f: impl Future<Output = Answer<T>>) -> Answer<T> {
  if cancel.is_cancelled() {
    return Err(text::aborted(name));
  }
  tokio::select! {
    biased;
    _ = cancel.cancelled() => Err(text::aborted(name)),
    r = f => r,
  }
}

impl AgentTools {
  pub fn new(sandbox: Arc<dyn Sandbox>, default_timeout_ms: Option<u64>) -> Self {
    Self {
      sandbox,
      default_timeout_ms: default_timeout_ms.unwrap_or(AI_DEFAULT_TIMEOUT_MS),
    }
  }

  pub fn sandbox(&self) -> &Arc<dyn Sandbox> {
    &self.sandbox
  }

  /// Compiles one tool's configuration (an invalid `allowedPaths` pattern is an error).
  pub fn tool(&self, config: ToolConfig) -> Result<Tool, String> {
    let root = self.sandbox.working_directory();
    let policy = PathPolicy::new(config.allowed_paths.as_deref(), root.as_deref())?;
    Ok(Tool {
      timeout_ms: config.timeout_ms.unwrap_or(self.default_timeout_ms),
      policy,
      config,
    })
  }

  /// The resolved form of a tool path (`None`: outside the sandbox).
  pub fn absolute(&self, path: &str) -> Option<String> {
    self.sandbox.absolute(path)
  }

  fn root_text(&self) -> String {
    self.sandbox.working_directory().unwrap_or_default()
  }

  fn path_error(&self, e: &SandboxError, path: &str) -> String {
    if e.is_escape() {
      text::outside(&self.root_text(), path)
    } else {
      e.message.clone()
    }
  }

  /// `Path not allowed` (or outside) unless the policy allows the resolved path.
  fn check_allowed(&self, tool: &Tool, path: &str) -> Answer<()> {
    let Some(policy) = &tool.policy else { return Ok(()) };
    match self.absolute(path) {
      None => Err(text::outside(&self.root_text(), path)),
      Some(a) if policy.allows(&a) => Ok(()),
      Some(_) => Err(text::not_allowed(path)),
    }
  }

  fn check_reaches(&self, tool: &Tool, search_path: &str) -> Answer<()> {
    let Some(policy) = &tool.policy else { return Ok(()) };
    match self.absolute(search_path) {
      Some(a) if policy.reaches(&a) => Ok(()),
      _ => Err(text::not_allowed(search_path)),
    }
  }

  /// Keeps the output paths whose resolved form the policy allows.
  fn keep_allowed(&self, tool: &Tool, search_path: &str, display: &str, path: &str) -> bool {
    let Some(policy) = &tool.policy else { return true };
    let Some(base) = self.absolute(search_path) else {
      return false;
    };
    let prefix = if display.ends_with('/') {
      display.to_string()
    } else {
      format!("{display}/")
    };
    let rel = match path.strip_prefix(&prefix) {
      Some(r) => r,
      None if path == display => "",
      None => path,
    };
    if rel.is_empty() {
      policy.allows(&base)
    } else {
      let joined = crate::workspace::normalize(&std::path::Path::new(&base).join(rel));
      policy.allows(&joined.to_string_lossy())
    }
  }

  // ------------------------------------------------------------------------------------ Bash

  /// `progress`: where the output goes while the command runs (`onProgress`); it is closed
  /// before this returns, on every path, so a consumer draining it always ends.
  pub async fn bash(
    &self,
    tool: &Tool,
    input: BashInput,
    cancel: CancellationToken,
    progress: Option<Arc<crate::progress::Progress>>,
  ) -> (Answer<BashOutput>, Effects) {
    let closer = progress.clone();
    let out = match check_numbers(&[("timeout", input.timeout_ms, Num::Timeout)]) {
      Ok(()) => self.bash_inner(tool, input, cancel, progress).await,
      Err(e) => (Err(e), Effects::default()),
    };
    if let Some(p) = closer {
      p.close();
    }
    out
  }

  async fn bash_inner(
    &self,
    tool: &Tool,
    input: BashInput,
    cancel: CancellationToken,
    progress: Option<Arc<crate::progress::Progress>>,
  ) -> (Answer<BashOutput>, Effects) {
    for b in &tool.config.blocked_commands {
      if input.command.contains(b.as_str()) {
        return (Err(text::command_blocked(b)), Effects::default());
      }
    }
    // Any command may have written anything.
    let effects = Effects {
      touched: Vec::new(),
      all: true,
    };
    if input.run_in_background {
      return (self.background(&input.command).await, effects);
    }
    // Checked positive in `bash`.
    let wanted = match input.timeout_ms {
      Some(t) => t.ceil() as u64,
      None => tool.timeout_ms,
    };
    let ms = wanted.min(AI_BASH_MAX_TIMEOUT_MS);
    let max = tool.config.max_output_length.unwrap_or(AI_BASH_MAX_OUTPUT_LENGTH);
    let answer = match self.sandbox.local() {
      Some(local) => LocalSandbox::exec(
        &local,
        ExecOptions {
          command: input.command,
          cwd: None,
          timeout: Duration::from_millis(ms),
          max_output_units: max,
          cancel,
          progress,
        },
      )
      .await
      .map(|r| BashOutput {
        stdout: r.stdout,
        stderr: r.stderr,
        exit_code: Some(r.exit_code),
        interrupted: Some(r.interrupted),
        duration_ms: Some(r.duration_ms as f64),
        background: None,
      })
      .map_err(|e| e.message),
      None => self
        .sandbox
        .exec(ExecCall {
          command: input.command,
          timeout_ms: Some(ms),
          progress,
        })
        .await
        .map(|r| BashOutput {
          stdout: middle_truncate(&r.stdout, max),
          stderr: middle_truncate(&r.stderr, max),
          exit_code: r.exit_code,
          interrupted: r.interrupted,
          duration_ms: r.duration_ms,
          background: None,
        })
        .map_err(|e| e.message),
    };
    (answer, effects)
  }

  /// `run_in_background`: the command in its own session, its output to a log file; answers at
  /// once. knap's sandbox starts it natively (and `destroy()` stops it); another sandbox gets a
  /// `setsid` launcher through `exec`.
  async fn background(&self, command: &str) -> Answer<BashOutput> {
    // One counter for the process: two tool sets never share a log file.
    static BACKGROUND_COUNT: AtomicU64 = AtomicU64::new(0);
    let n = BACKGROUND_COUNT.fetch_add(1, Ordering::Relaxed) + 1;
    let log = text::background_log(std::process::id(), n);
    let started = std::time::Instant::now();
    let pid = match self.sandbox.local() {
      Some(local) => local
        .spawn_background(command, &log)
        .map_err(|e| text::background_failed(&e.message))?,
      None => {
        let inner = format!(
          "{} > {} 2>&1 < /dev/null",
          shell_quote(command),
          shell_quote(&log)
        );
        let launcher = format!(
          "if command -v setsid >/dev/null 2>&1; then setsid sh -c {inner} & else sh -c {inner} & fi; echo $!"
        );
        let r = self
          .sandbox
          .exec(ExecCall {
            command: launcher,
            timeout_ms: Some(AI_BACKGROUND_START_TIMEOUT_MS),
            progress: None,
          })
          .await
          .map_err(|e| e.message)?;
        let pid = r
          .stdout
          .trim()
          .parse::<u32>()
          .ok()
          .filter(|_| r.exit_code == Some(0));
        match pid {
          Some(pid) => pid,
          None => {
            let why = if r.stderr.is_empty() { r.stdout } else { r.stderr };
            return Err(text::background_failed(&why));
          }
        }
      }
    };
    Ok(BashOutput {
      stdout: text::background_started(pid, &log),
      stderr: String::new(),
      exit_code: Some(0),
      interrupted: Some(false),
      duration_ms: Some(started.elapsed().as_millis() as f64),
      background: Some(Background {
        pid,
        output_file: log,
      }),
    })
  }

  // ------------------------------------------------------------------------------------ Read

  pub async fn read(&self, tool: &Tool, input: ReadInput) -> Answer<ReadOutput> {
    with_timeout(tool.timeout_ms, "Read", self.read_inner(tool, input)).await
  }

  fn read_options(tool: &Tool, input: &ReadInput) -> ReadOptions {
    let c = &tool.config;
    ReadOptions {
      offset: positive_floor(input.offset),
      limit: positive_floor(input.limit),
      // `maxFileSize || 500`: bashkit reuses the byte option as a line count here.
      max_lines_without_limit: c.max_file_size.filter(|&n| n > 0).unwrap_or(AI_READ_MAX_LINES),
      max_line_length: c.max_line_length.unwrap_or(AI_READ_MAX_LINE_LENGTH),
      max_output_length: c.max_output_length.unwrap_or(AI_READ_MAX_OUTPUT_LENGTH),
    }
  }

  async fn read_inner(&self, tool: &Tool, input: ReadInput) -> Answer<ReadOutput> {
    check_numbers(&[("offset", input.offset, Num::Count), ("limit", input.limit, Num::Count)])?;
    self.check_allowed(tool, &input.file_path)?;
    let opts = Self::read_options(tool, &input);
    let path = input.file_path.clone();
    let outcome = match self.sandbox.local() {
      Some(local) => {
        // Inline only when the path also resolves in a few steps (no deep walk on this thread).
        let inline = matches!(local.stat_inline(&path), Ok(Some(s)) if s.is_file && s.size <= INLINE_READ_MAX_BYTES);
        if inline {
          // A small file: read here, no hop to a blocking thread.
          local.read(&path, &opts, &CancellationToken::new()).map_err(SandboxError::from)
        } else {
          let p = path.clone();
          blocking_cancellable(move |cancel| local.read(&p, &opts, cancel).map_err(SandboxError::from))
            .await
            .and_then(|r| r)
        }
      }
      None => self.read_through_sandbox(&path, &opts).await,
    };
    match outcome {
      Err(e) => Err(self.path_error(&e, &path)),
      Ok(ReadOutcome::Missing) => Err(text::path_not_found(&path)),
      Ok(ReadOutcome::TooLarge { total_lines }) => Err(text::file_too_large(total_lines)),
      Ok(ReadOutcome::Directory(entries)) => Ok(ReadOutput::Directory { entries }),
      Ok(ReadOutcome::Text(t)) => {
        let ext = extension_of(&path);
        if t.nul_in_head && BINARY_EXTENSIONS.contains(&ext.as_str()) {
          return Err(text::binary_file(&path, t.size, &ext));
        }
        let lines = t
          .lines
          .into_iter()
          .enumerate()
          .map(|(i, l)| (t.first_line + i as u64, l))
          .collect();
        Ok(ReadOutput::Text {
          content: t.content,
          lines,
          total_lines: t.total_lines,
        })
      }
    }
  }

  /// Read over `fileExists` / `isDirectory` / `readDir` / `readFile`: the same line reader over
  /// the whole text.
  async fn read_through_sandbox(&self, path: &str, opts: &ReadOptions) -> SbResult<ReadOutcome> {
    let sb = &self.sandbox;
    if !sb.file_exists(path.to_string()).await? {
      return Ok(ReadOutcome::Missing);
    }
    if sb.is_directory(path.to_string()).await? {
      return Ok(ReadOutcome::Directory(sb.read_dir(path.to_string()).await?));
    }
    let content = sb.read_file(path.to_string()).await?;
    let mut outcome =
      crate::sandbox::read_text(content.as_bytes(), opts).map_err(|e| SandboxError::new(e.to_string()))?;
    if let ReadOutcome::Text(t) = &mut outcome {
      // bashkit reports the text's length (in UTF-16 units) for a binary file.
      t.size = utf16_len(&content) as u64;
    }
    Ok(outcome)
  }

  // ----------------------------------------------------------------------------------- Write

  pub async fn write(
    &self,
    tool: &Tool,
    file_path: String,
    content: String,
  ) -> (Answer<WriteOutput>, Effects) {
    let bytes = content.len() as u64;
    if let Some(max) = tool.config.max_file_size.filter(|&m| m > 0) {
      if bytes > max {
        return (Err(text::content_too_large(max, bytes)), Effects::default());
      }
    }
    if let Err(e) = self.check_allowed(tool, &file_path) {
      return (Err(e), Effects::default());
    }
    let effects = Effects {
      touched: self.absolute(&file_path).into_iter().collect(),
      all: false,
    };
    let answer = with_timeout(tool.timeout_ms, "Write", async {
      match self.sandbox.write_file(file_path.clone(), content).await {
        Ok(()) => Ok(WriteOutput {
          message: text::wrote(&file_path),
          bytes_written: bytes,
          file_path: file_path.clone(),
        }),
        Err(e) => Err(self.path_error(&e, &file_path)),
      }
    })
    .await;
    (answer, effects)
  }

  // ------------------------------------------------------------------------------------ Edit

  pub async fn edit(&self, tool: &Tool, input: EditInput) -> (Answer<EditOutput>, Effects) {
    if input.old_string == input.new_string {
      return (Err(text::EDIT_SAME.into()), Effects::default());
    }
    if input.old_string.is_empty() {
      return (Err(text::EDIT_EMPTY.into()), Effects::default());
    }
    if let Err(e) = self.check_allowed(tool, &input.file_path) {
      return (Err(e), Effects::default());
    }
    let effects = Effects {
      touched: self.absolute(&input.file_path).into_iter().collect(),
      all: false,
    };
    let path = input.file_path.clone();
    let answer = with_timeout(tool.timeout_ms, "Edit", async {
      self.edit_inner(tool, input).await.map_err(|e| match e {
        EditFailure::Tool(t) => t,
        EditFailure::Sandbox(s) => self.path_error(&s, &path),
      })
    })
    .await;
    (answer, effects)
  }

  async fn edit_inner(&self, tool: &Tool, input: EditInput) -> Result<EditOutput, EditFailure> {
    let path = &input.file_path;
    let sb = &self.sandbox;
    if !sb.file_exists(path.clone()).await? {
      return Err(EditFailure::Tool(text::file_not_found(path)));
    }
    // knap's sandbox edits the bytes (what is not UTF-8 is kept as it is); another sandbox's
    // `readFile` gives text.
    let original: Vec<u8> = match self.sandbox.local() {
      Some(local) => {
        let p = path.clone();
        blocking_cancellable(move |cancel| local.read_bytes(&p, cancel))
          .await?
          .map_err(SandboxError::from)?
      }
      None => sb.read_file(path.clone()).await?.into_bytes(),
    };
    let replaced = match replace_literal(&original, &input.old_string, &input.new_string, input.replace_all) {
      Ok(r) => r,
      Err(Miss::NotFound { lossy }) => {
        let mut m = text::string_not_found(&input.old_string);
        if lossy {
          m = format!("{m}\n{LOSSY_HINT}");
        }
        return Err(EditFailure::Tool(m));
      }
      Err(Miss::Ambiguous(n)) => return Err(EditFailure::Tool(text::string_ambiguous(n))),
    };
    if let Some(max) = tool.config.max_file_size.filter(|&m| m > 0) {
      let n = replaced.bytes.len() as u64;
      if n > max {
        return Err(EditFailure::Tool(text::content_too_large(max, n)));
      }
    }
    match self.sandbox.local() {
      Some(local) => {
        let (p, bytes) = (path.clone(), replaced.bytes);
        blocking_cancellable(move |cancel| local.write(&p, &bytes, cancel))
          .await?
          .map_err(SandboxError::from)?
      }
      None => {
        let content = String::from_utf8(replaced.bytes)
          .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        sb.write_file(path.clone(), content).await?
      }
    }
    Ok(EditOutput {
      message: text::edited(path),
      file_path: path.clone(),
      replacements: replaced.count as u64,
    })
  }

  // ------------------------------------------------------------------------------------ Glob

  pub async fn glob(
    &self,
    tool: &Tool,
    pattern: String,
    path: Option<String>,
    cancel: CancellationToken,
  ) -> Answer<GlobOutput> {
    let search_path = path.filter(|p| !p.is_empty()).unwrap_or_else(|| ".".into());
    self.check_reaches(tool, &search_path)?;
    let display = display_of(&search_path);
    let ms = tool.timeout_ms;
    let matches = match self.sandbox.local() {
      Some(local) => {
        self
          .glob_native(local, pattern, &search_path, &display, ms, cancel)
          .await?
      }
      None => self.glob_with_find(&pattern, &search_path, &display, ms).await?,
    };
    let mut matches: Vec<String> = matches
      .into_iter()
      .filter(|m| self.keep_allowed(tool, &search_path, &display, m))
      .collect();
    // Bounded after the allowedPaths filter, so the counts never include hidden paths.
    let total = matches.len();
    let limit = result_limit(tool.config.max_results);
    let note = (total > limit).then(|| {
      matches.truncate(limit);
      crate::text::search_truncated_note("Glob", limit, Some(total))
    });
    Ok(GlobOutput { matches, search_path, total, note })
  }

  fn search_error(&self, e: &SandboxError, search_path: &str) -> String {
    if e.is_escape() {
      return text::outside(&self.root_text(), search_path);
    }
    match e.code.as_deref() {
      Some("ENOENT") => text::path_not_found(search_path),
      Some("ENOTDIR") => text::not_a_directory(search_path),
      _ => e.message.clone(),
    }
  }

  async fn glob_native(
    &self,
    local: Arc<LocalSandbox>,
    pattern: String,
    search_path: &str,
    display: &str,
    ms: u64,
    cancel: CancellationToken,
  ) -> Answer<Vec<String>> {
    let resolved = local
      .resolve(search_path)
      .map_err(|e| self.search_error(&e.into(), search_path))?;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = stop_on(stop.clone(), cancel.clone(), ms);
    let walk_stop = stop.clone();
    let search = search_path.to_string();
    let found = blocking(move || -> Result<Vec<String>, SandboxError> {
      // Looked at beneath the root without following anything (`fstatat`), then walked from a
      // descriptor opened beneath the root.
      let workspace = local.workspace();
      let missing = |errno: i32| {
        let e = std::io::Error::from_raw_os_error(errno);
        SandboxError::from(crate::ToolError::from_io(&e, "scandir", &resolved.abs))
      };
      match workspace.stat(&search, &resolved)? {
        None => return Err(missing(libc::ENOENT)),
        Some(m) if m.kind != crate::workspace::Kind::Dir => return Err(missing(libc::ENOTDIR)),
        Some(_) => {}
      }
      let root = workspace.root()?;
      let found = glob(&GlobRequest {
        root: &root,
        dir: &resolved.rel,
        pattern: &pattern,
        threads: walk_threads(),
        stop: &walk_stop,
      })
      .map_err(|e| SandboxError {
        code: Some("cave_glob_pattern".into()),
        message: e.to_string(),
      })?;
      Ok(found.into_iter().map(|m| m.rel).collect())
    })
    .await;
    watcher.abort();
    if cancel.is_cancelled() {
      return Err(text::aborted("Glob"));
    }
    let rels = match found.and_then(|r| r) {
      Ok(r) => r,
      Err(e) if e.code.as_deref() == Some("cave_glob_pattern") => {
        return Err(text::invalid_glob_pattern(&e.message))
      }
      Err(e) => return Err(self.search_error(&e, search_path)),
    };
    if stop.load(Ordering::Relaxed) {
      return Err(text::timed_out("Glob", ms));
    }
    let sep = if display.ends_with('/') { "" } else { "/" };
    Ok(rels.into_iter().map(|r| format!("{display}{sep}{r}")).collect())
  }

  /// Glob in a sandbox that is not knap's: every file with its mtime from `find` (GNU `-printf`,
  /// else plain `find` in its own order), matched with the native Glob's rules.
  async fn glob_with_find(
    &self,
    pattern: &str,
    search_path: &str,
    display: &str,
    ms: u64,
  ) -> Answer<Vec<String>> {
    let compiled = CompiledGlob::new(pattern).map_err(|e| text::invalid_glob_pattern(&e.to_string()))?;
    let q = shell_quote(search_path);
    let cmd = format!("find {q} -type f -printf '%T@\\t%p\\n' 2>/dev/null || find {q} -type f 2>/dev/null");
    let r = self
      .sandbox
      .exec(ExecCall {
        command: cmd,
        timeout_ms: Some(ms),
        progress: None,
      })
      .await
      .map_err(|e| self.search_error(&e, search_path))?;
    if r.interrupted == Some(true) {
      return Err(text::timed_out("Glob", ms));
    }
    let prefix = if display.ends_with('/') {
      display.to_string()
    } else {
      format!("{display}/")
    };
    let mut rows: Vec<(f64, String)> = r
      .stdout
      .split('\n')
      .filter(|l| !l.is_empty())
      .map(|line| match line.split_once('\t') {
        Some((t, p)) if !t.is_empty() && t.parse::<f64>().is_ok_and(f64::is_finite) => {
          (t.parse().unwrap_or(0.0), p.to_string())
        }
        _ => (0.0, line.to_string()),
      })
      .filter(|(_, p)| compiled.is_match(p.strip_prefix(&prefix).unwrap_or(p)))
      .collect();
    rows.sort_by(|a, b| {
      b.0
        .partial_cmp(&a.0)
        .unwrap_or(std::cmp::Ordering::Equal)
        .then_with(|| a.1.cmp(&b.1))
    });
    Ok(rows.into_iter().map(|(_, p)| p).collect())
  }

  // ------------------------------------------------------------------------------------ Grep

  pub async fn grep(&self, tool: &Tool, input: GrepInput, cancel: CancellationToken) -> Answer<GrepPage> {
    check_numbers(&[
      ("-B", input.before, Num::Count),
      ("-A", input.after, Num::Count),
      ("-C", input.context, Num::Count),
      ("head_limit", input.head_limit, Num::Count),
      ("offset", input.offset, Num::Count),
    ])?;
    let search_path = input
      .path
      .clone()
      .filter(|p| !p.is_empty())
      .unwrap_or_else(|| ".".into());
    self.check_reaches(tool, &search_path)?;
    let display = display_of(&search_path);
    let printer = match input.output_mode.as_deref() {
      Some("content") => Printer::Content,
      Some("count") => Printer::Counts,
      _ => Printer::Files,
    };
    let ms = tool.timeout_ms;
    let max_line = tool.config.max_line_length.unwrap_or(AI_READ_MAX_LINE_LENGTH);
    // With allowedPaths, page after filtering (the native pager would count hidden entries).
    let page_natively = tool.policy.is_none();
    let (output, paged) = match self.sandbox.local() {
      Some(local) => {
        let out = self
          .grep_native(
            local,
            &input,
            printer,
            &search_path,
            &display,
            ms,
            max_line,
            page_natively,
            cancel,
          )
          .await?;
        (out, page_natively)
      }
      None => {
        let rg = self
          .sandbox
          .rg_path()
          .await
          .ok_or_else(|| text::RG_MISSING.to_string())?;
        let out = rg::grep(&*self.sandbox, &rg, &input, printer, &search_path, ms, max_line)
          .await
          .map_err(|e| match e {
            rg::Failure::Message(m) => m,
            rg::Failure::Sandbox(s) => self.search_error(&s, &search_path),
          })?;
        (out, false)
      }
    };
    let keep = |p: &str| self.keep_allowed(tool, &search_path, &display, p);
    let page = |len: usize| -> (usize, usize) {
      if paged {
        return (0, len);
      }
      let from = positive_floor(input.offset).unwrap_or(0) as usize;
      let from = from.min(len);
      let to = positive_floor(input.head_limit)
        .map(|h| from.saturating_add(h as usize).min(len))
        .unwrap_or(len);
      (from, to)
    };
    let output = match output {
      GrepOutput::Files(files) => {
        let mut files: Vec<String> = files.into_iter().filter(|f| keep(f)).collect();
        let (a, b) = page(files.len());
        GrepOutput::Files(files.drain(a..b).collect())
      }
      GrepOutput::Counts(counts) => {
        let mut counts: Vec<(String, u64)> = counts.into_iter().filter(|(f, _)| keep(f)).collect();
        let (a, b) = page(counts.len());
        GrepOutput::Counts(counts.drain(a..b).collect())
      }
      GrepOutput::Content(matches) => {
        let mut matches: Vec<ContentMatch> = matches.into_iter().filter(|m| keep(&m.file)).collect();
        let (a, b) = page(matches.len());
        GrepOutput::Content(matches.drain(a..b).collect())
      }
    };
    Ok(bound_grep(output, tool.config.max_results))
  }

  #[allow(clippy::too_many_arguments)]
  async fn grep_native(
    &self,
    local: Arc<LocalSandbox>,
    input: &GrepInput,
    printer: Printer,
    search_path: &str,
    display: &str,
    ms: u64,
    max_line: usize,
    page: bool,
    cancel: CancellationToken,
  ) -> Answer<GrepOutput> {
    let resolved = local
      .resolve(search_path)
      .map_err(|e| self.search_error(&e.into(), search_path))?;
    let root = local
      .workspace()
      .root()
      .map_err(|e| self.search_error(&e.into(), search_path))?;
    let n = |v: Option<f64>| v.filter(|x| x.is_finite()).map(|x| x.max(0.0).floor() as usize);
    let context = n(input.context);
    let req = SearchRequest {
      pattern: input.pattern.clone(),
      root,
      scope: resolved.abs.clone(),
      display: display.to_string(),
      glob: input.glob.clone().filter(|g| !g.is_empty()),
      file_type: input.file_type.clone().filter(|t| !t.is_empty()),
      case_insensitive: input.case_insensitive,
      multiline: input.multiline,
      before: context.or(n(input.before)).unwrap_or(0),
      after: context.or(n(input.after)).unwrap_or(0),
      printer,
      offset: if page { n(input.offset).unwrap_or(0) } else { 0 },
      head_limit: if page {
        n(input.head_limit).filter(|&h| h > 0)
      } else {
        None
      },
      max_line_length: max_line,
      threads: walk_threads(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = stop_on(stop.clone(), cancel.clone(), ms);
    let search_stop = stop.clone();
    let candidate = search_path.to_string();
    let result = blocking(move || {
      // Looked at beneath the root without following anything (`fstatat`).
      match local.workspace().stat(&candidate, &resolved) {
        Ok(Some(_)) => {}
        Ok(None) => {
          let e = std::io::Error::from_raw_os_error(libc::ENOENT);
          return Err(Ok(SandboxError::from(crate::ToolError::from_io(&e, "stat", &req.scope))));
        }
        Err(e) => return Err(Ok(SandboxError::from(e))),
      }
      search(&req, &search_stop).map_err(Err)
    })
    .await;
    watcher.abort();
    if cancel.is_cancelled() {
      return Err(text::aborted("Grep"));
    }
    let result = match result {
      Err(e) => return Err(e.message),
      Ok(Err(Ok(io))) => return Err(self.search_error(&io, search_path)),
      Ok(Err(Err(SearchError::Regex(m)))) => return Err(text::invalid_regex(&m)),
      Ok(Err(Err(SearchError::Glob(m)))) => return Err(text::invalid_glob(&m)),
      Ok(Err(Err(SearchError::Type(m)))) => return Err(m),
      Ok(Ok(r)) => r,
    };
    if result.stopped {
      return Err(text::timed_out("Grep", ms));
    }
    Ok(match result.output {
      SearchOutput::Files(f) => GrepOutput::Files(f),
      SearchOutput::Counts(c) => GrepOutput::Counts(c),
      SearchOutput::Content(m) => GrepOutput::Content(m),
      SearchOutput::Lines { .. } => GrepOutput::Files(Vec::new()),
    })
  }

  // ----------------------------------------------------------------------------------- Patch

  pub async fn patch(&self, tool: &Tool, patch: String) -> (Answer<PatchOutput>, Effects) {
    let hunks = match apply_patch::parse(&patch) {
      Ok(h) => h,
      Err(e) => return (Err(e), Effects::default()),
    };
    if hunks.is_empty() {
      return (Err(text::PATCH_EMPTY.into()), Effects::default());
    }
    if let Some(policy) = &tool.policy {
      for p in hunks.iter().flat_map(|h| h.paths()) {
        match self.absolute(p) {
          Some(a) if policy.allows(&a) => {}
          _ => return (Err(text::not_allowed(p)), Effects::default()),
        }
      }
    }
    // Every file the patch names may be written (a superset, so the cache never keeps a stale
    // result even when the patch stops half way or times out).
    let effects = Effects {
      touched: hunks
        .iter()
        .flat_map(|h| h.paths())
        .filter_map(|p| self.absolute(p))
        .collect(),
      all: false,
    };
    let answer = with_timeout(tool.timeout_ms, "Patch", self.patch_inner(tool, &hunks)).await;
    (answer, effects)
  }

  fn key_of(&self, p: &str) -> String {
    self.absolute(p).unwrap_or_else(|| p.to_string())
  }

  async fn patch_inner(&self, tool: &Tool, hunks: &[apply_patch::Hunk]) -> Answer<PatchOutput> {
    let sb = &self.sandbox;
    let msg = |e: SandboxError| e.message;
    // The files as they are, read before anything is written.
    let mut disk: HashMap<String, Option<String>> = HashMap::new();
    for p in hunks.iter().flat_map(|h| h.paths()) {
      let key = self.key_of(p);
      if disk.contains_key(&key) {
        continue;
      }
      let exists = sb.file_exists(p.to_string()).await.map_err(msg)?
        && !sb.is_directory(p.to_string()).await.map_err(msg)?;
      let content = if exists {
        Some(sb.read_file(p.to_string()).await.map_err(msg)?)
      } else {
        None
      };
      disk.insert(key, content);
    }
    let key_of = |p: &str| self.key_of(p);
    let plan = apply_patch::plan(
      hunks,
      &key_of,
      &disk,
      tool.config.max_file_size.filter(|&m| m > 0),
    )?;
    for w in &plan.writes {
      match &w.content {
        None => {
          let exists = sb.file_exists(w.path.clone()).await.map_err(msg)?
            && !sb.is_directory(w.path.clone()).await.map_err(msg)?;
          if exists {
            self.remove(&w.path).await?;
          }
        }
        Some(c) => sb.write_file(w.path.clone(), c.clone()).await.map_err(msg)?,
      }
    }
    Ok(PatchOutput {
      message: plan.message(),
      files: plan.files.iter().map(|(s, p)| (s.as_str(), p.clone())).collect(),
    })
  }

  async fn remove(&self, path: &str) -> Answer<()> {
    if let Some(f) = self.sandbox.delete_file(path.to_string()) {
      return f.await.map_err(|e| e.message);
    }
    let r = self
      .sandbox
      .exec(ExecCall {
        command: format!("rm -- {}", shell_quote(path)),
        timeout_ms: None,
        progress: None,
      })
      .await
      .map_err(|e| e.message)?;
    if r.exit_code != Some(0) {
      return Err(text::delete_failed(path, &r.stderr));
    }
    Ok(())
  }
}

enum EditFailure {
  Tool(String),
  Sandbox(SandboxError),
}

impl From<SandboxError> for EditFailure {
  fn from(e: SandboxError) -> Self {
    EditFailure::Sandbox(e)
  }
}

#[cfg(test)]
mod tests;
