//! The AI SDK tool set (`knap_core::agent_tools`) for `lib/ai-sdk/`: `NativeAgentTools` over
//! knap's sandbox or over a user's JS sandbox object, and one `NativeTool` per configured tool.
//! Inputs and outputs are typed objects with bashkit's field names. A JS sandbox implements the
//! core `Sandbox` trait through one weak threadsafe function per method; each call is queued to
//! the JS thread and awaited off it, so nothing here blocks the event loop.

use std::sync::Arc;

use knap_core::agent_tools::{
  self as core, AgentTools, Answer, Effects, ExecCall, ExecReply, Sandbox, SandboxError, SbResult, Tool,
  ToolConfig,
};
use knap_core::exec::BoxFuture;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use tokio_util::sync::CancellationToken;

use crate::ai_sdk::{with_progress, ProgressFn, SandboxOutput};
use crate::system_context as sc;
use crate::{CancelToken, NativeSandbox};

/// A weak threadsafe function returning a Promise (a JS sandbox method).
type JsMethod<Args, Ret> = ThreadsafeFunction<Args, Promise<Ret>, Args, Status, false, true>;

/// `sandbox.exec`'s options as the JS sandbox receives them.
#[napi(object)]
pub struct SandboxExecOptions {
  pub timeout: Option<f64>,
  /// Bash with `onProgress`: the id the adapter's `onOutput` pushes chunks to
  /// (`pushSandboxOutput(id, stream, chunk)`).
  pub progress: Option<u32>,
}

/// bashkit's `ExecResult`, as the JS adapter normalizes a sandbox's answer.
#[napi(object)]
pub struct SandboxExecResult {
  pub stdout: String,
  pub stderr: String,
  pub exit_code: Option<i32>,
  pub duration_ms: Option<f64>,
  pub interrupted: Option<bool>,
}

/// A user's sandbox object, method by method (the JS adapter wraps each so it returns a
/// Promise of a normalized value).
#[napi(object, object_to_js = false)]
pub struct JsSandboxMethods {
  pub exec: ThreadsafeFunction<
    FnArgs<(String, SandboxExecOptions)>,
    Promise<SandboxExecResult>,
    FnArgs<(String, SandboxExecOptions)>,
    Status,
    false,
    true,
  >,
  pub read_file: ThreadsafeFunction<String, Promise<String>, String, Status, false, true>,
  pub write_file: ThreadsafeFunction<
    FnArgs<(String, String)>,
    Promise<bool>,
    FnArgs<(String, String)>,
    Status,
    false,
    true,
  >,
  pub read_dir: ThreadsafeFunction<String, Promise<Vec<String>>, String, Status, false, true>,
  pub file_exists: ThreadsafeFunction<String, Promise<bool>, String, Status, false, true>,
  pub is_directory: ThreadsafeFunction<String, Promise<bool>, String, Status, false, true>,
  pub delete_file: Option<ThreadsafeFunction<String, Promise<bool>, String, Status, false, true>>,
  /// Answers `sandbox.rgPath` at call time.
  pub rg_path: ThreadsafeFunction<bool, Promise<Option<String>>, bool, Status, false, true>,
  pub working_directory: Option<String>,
}

struct JsSandbox {
  m: Arc<JsSandboxMethods>,
}

fn js_error(e: napi::Error) -> SandboxError {
  SandboxError::new(e.reason.clone())
}

async fn invoke<A: 'static + JsValuesTupleIntoVec, R: 'static + FromNapiValue>(
  f: &JsMethod<A, R>,
  args: A,
) -> SbResult<R> {
  let promise = f.call_async(args).await.map_err(js_error)?;
  promise.await.map_err(js_error)
}

impl Sandbox for JsSandbox {
  fn exec(&self, call: ExecCall) -> BoxFuture<SbResult<ExecReply>> {
    let m = self.m.clone();
    Box::pin(async move {
      // Registered for the duration of the call: a chunk pushed after it is dropped.
      let registered = call.progress.map(SandboxOutput::register);
      let options = SandboxExecOptions {
        timeout: call.timeout_ms.map(|t| t as f64),
        progress: registered.as_ref().map(|r| r.0),
      };
      let r = invoke(&m.exec, (call.command, options).into()).await;
      drop(registered);
      let r = r?;
      Ok(ExecReply {
        stdout: r.stdout,
        stderr: r.stderr,
        exit_code: r.exit_code,
        duration_ms: r.duration_ms,
        interrupted: r.interrupted,
      })
    })
  }

  fn read_file(&self, path: String) -> BoxFuture<SbResult<String>> {
    let m = self.m.clone();
    Box::pin(async move { invoke(&m.read_file, path).await })
  }

  fn write_file(&self, path: String, content: String) -> BoxFuture<SbResult<()>> {
    let m = self.m.clone();
    Box::pin(async move { invoke(&m.write_file, (path, content).into()).await.map(|_| ()) })
  }

  fn read_dir(&self, path: String) -> BoxFuture<SbResult<Vec<String>>> {
    let m = self.m.clone();
    Box::pin(async move { invoke(&m.read_dir, path).await })
  }

  fn file_exists(&self, path: String) -> BoxFuture<SbResult<bool>> {
    let m = self.m.clone();
    Box::pin(async move { invoke(&m.file_exists, path).await })
  }

  fn is_directory(&self, path: String) -> BoxFuture<SbResult<bool>> {
    let m = self.m.clone();
    Box::pin(async move { invoke(&m.is_directory, path).await })
  }

  fn delete_file(&self, path: String) -> Option<BoxFuture<SbResult<()>>> {
    self.m.delete_file.as_ref()?;
    let m = self.m.clone();
    Some(Box::pin(async move {
      match &m.delete_file {
        Some(f) => invoke(f, path).await.map(|_| ()),
        None => Ok(()),
      }
    }))
  }

  fn rg_path(&self) -> BoxFuture<Option<String>> {
    let m = self.m.clone();
    Box::pin(async move {
      invoke(&m.rg_path, true)
        .await
        .ok()
        .flatten()
        .filter(|p| !p.is_empty())
    })
  }

  fn working_directory(&self) -> Option<String> {
    self.m.working_directory.clone()
  }
}

// ----------------------------------------------------------------------------------- config

/// A `ToolConfig` (bashkit's names); the AI SDK options (`strict`, …) stay in JS.
#[napi(object)]
pub struct AgentToolConfig {
  pub timeout: Option<f64>,
  pub max_file_size: Option<f64>,
  pub max_output_length: Option<f64>,
  pub max_line_length: Option<f64>,
  pub allowed_paths: Option<Vec<String>>,
  pub blocked_commands: Option<Vec<String>>,
  /// Glob: paths, Grep: files / counts / matching lines returned at most (default 1,000; 0 for all).
  pub max_results: Option<f64>,
}

fn count(v: Option<f64>) -> Option<u64> {
  v.filter(|x| x.is_finite() && *x >= 0.0).map(|x| x.floor() as u64)
}

fn invalid(message: String) -> napi::Error {
  napi::Error::new(Status::InvalidArg, format!("cave_tool_config_invalid: {message}"))
}

// ------------------------------------------------------------------------------ the tool set

#[napi]
pub struct NativeAgentTools {
  inner: Arc<AgentTools>,
}

fn default_timeout(ms: Option<f64>) -> Option<u64> {
  count(ms)
}

#[napi]
impl NativeAgentTools {
  /// Over knap's own sandbox (the native fast paths).
  #[napi(factory)]
  pub fn local(sandbox: &NativeSandbox, default_timeout_ms: Option<f64>) -> Self {
    let sb: Arc<dyn Sandbox> = Arc::new(sandbox.core());
    Self {
      inner: Arc::new(AgentTools::new(sb, default_timeout(default_timeout_ms))),
    }
  }

  /// Over a user's sandbox object.
  #[napi(factory)]
  pub fn js(methods: JsSandboxMethods, default_timeout_ms: Option<f64>) -> Self {
    let sb: Arc<dyn Sandbox> = Arc::new(JsSandbox { m: Arc::new(methods) });
    Self {
      inner: Arc::new(AgentTools::new(sb, default_timeout(default_timeout_ms))),
    }
  }

  /// One tool with its configuration; throws `cave_tool_config_invalid` for a bad
  /// `allowedPaths` pattern.
  #[napi]
  pub fn tool(&self, config: Option<AgentToolConfig>) -> Result<NativeTool> {
    let c = config.unwrap_or(AgentToolConfig {
      timeout: None,
      max_file_size: None,
      max_output_length: None,
      max_line_length: None,
      allowed_paths: None,
      blocked_commands: None,
      max_results: None,
    });
    let tool = self
      .inner
      .tool(ToolConfig {
        timeout_ms: count(c.timeout),
        max_file_size: count(c.max_file_size),
        max_output_length: count(c.max_output_length).map(|n| n as usize),
        max_line_length: count(c.max_line_length).map(|n| n as usize),
        allowed_paths: c.allowed_paths,
        blocked_commands: c.blocked_commands.unwrap_or_default(),
        max_results: count(c.max_results).map(|n| n as usize),
      })
      .map_err(invalid)?;
    Ok(NativeTool {
      tools: self.inner.clone(),
      tool: Arc::new(tool),
    })
  }

  /// The resolved form of a tool path (for cache dependencies), or `null` outside the sandbox.
  #[napi]
  pub async fn absolute(&self, path: String) -> Option<String> {
    // Resolution walks the path with system calls: off the JS thread.
    let inner = self.inner.clone();
    tokio::task::spawn_blocking(move || inner.absolute(&path)).await.ok().flatten()
  }

  /// bashkit's `discoverInstructions` over this sandbox; `null` when no file was found.
  #[napi]
  pub async fn discover_instructions(
    &self,
    options: sc::InstructionsOptions,
  ) -> napi::Result<Option<sc::InstructionsResult>> {
    let config = sc::instructions_config(options);
    let found = core::system_context::discover_instructions(self.inner.sandbox().as_ref(), &config)
      .await
      .map_err(sc::sandbox_error)?;
    Ok(found.map(sc::instructions_result))
  }

  /// bashkit's `collectEnvironment` over this sandbox (never fails: a failed command leaves its
  /// field out).
  #[napi]
  pub async fn collect_environment(&self, options: sc::EnvironmentOptions) -> sc::EnvironmentResult {
    let config = sc::environment_config(&options);
    sc::environment_result(
      core::system_context::collect_environment(self.inner.sandbox().as_ref(), config).await,
    )
  }

  /// bashkit's `buildSystemContext` over this sandbox.
  #[napi]
  pub async fn build_system_context(
    &self,
    options: sc::SystemContextOptions,
  ) -> napi::Result<sc::SystemContextResult> {
    let config = sc::system_config(options);
    let built = core::system_context::build_system_context(self.inner.sandbox().as_ref(), &config)
      .await
      .map_err(sc::sandbox_error)?;
    Ok(sc::system_result(built))
  }
}

// ------------------------------------------------------------------------------ I/O shapes

#[napi(object)]
pub struct ToolErrorResult {
  pub error: String,
}

#[napi(object)]
pub struct BashToolInput {
  pub command: String,
  pub timeout: Option<f64>,
  #[napi(js_name = "run_in_background")]
  pub run_in_background: Option<bool>,
}

#[napi(object)]
pub struct BashBackground {
  pub pid: u32,
  #[napi(js_name = "output_file")]
  pub output_file: String,
}

#[napi(object)]
pub struct BashToolOutput {
  pub stdout: String,
  pub stderr: String,
  #[napi(js_name = "exit_code")]
  pub exit_code: Option<i32>,
  pub interrupted: Option<bool>,
  #[napi(js_name = "duration_ms")]
  pub duration_ms: Option<f64>,
  pub background: Option<BashBackground>,
}

#[napi(object)]
pub struct ReadToolInput {
  #[napi(js_name = "file_path")]
  pub file_path: String,
  pub offset: Option<f64>,
  pub limit: Option<f64>,
}

#[napi(object)]
pub struct ReadLine {
  #[napi(js_name = "line_number")]
  pub line_number: f64,
  pub content: String,
}

#[napi(object)]
pub struct ReadTextOutput {
  #[napi(js_name = "type")]
  pub kind: String,
  pub content: String,
  pub lines: Vec<ReadLine>,
  #[napi(js_name = "total_lines")]
  pub total_lines: f64,
}

#[napi(object)]
pub struct ReadDirectoryOutput {
  #[napi(js_name = "type")]
  pub kind: String,
  pub entries: Vec<String>,
  pub count: u32,
}

#[napi(object)]
pub struct WriteToolInput {
  #[napi(js_name = "file_path")]
  pub file_path: String,
  pub content: String,
}

#[napi(object)]
pub struct WriteToolOutput {
  pub message: String,
  #[napi(js_name = "bytes_written")]
  pub bytes_written: f64,
  #[napi(js_name = "file_path")]
  pub file_path: String,
}

#[napi(object)]
pub struct EditToolInput {
  #[napi(js_name = "file_path")]
  pub file_path: String,
  #[napi(js_name = "old_string")]
  pub old_string: String,
  #[napi(js_name = "new_string")]
  pub new_string: String,
  #[napi(js_name = "replace_all")]
  pub replace_all: Option<bool>,
}

#[napi(object)]
pub struct EditToolOutput {
  pub message: String,
  #[napi(js_name = "file_path")]
  pub file_path: String,
  pub replacements: f64,
}

#[napi(object)]
pub struct GlobToolInput {
  pub pattern: String,
  pub path: Option<String>,
}

#[napi(object)]
pub struct GlobToolOutput {
  pub matches: Vec<String>,
  pub count: u32,
  #[napi(js_name = "search_path")]
  pub search_path: String,
  /// Present when more paths matched than were returned.
  pub truncated: Option<GlobTruncated>,
  /// Present with `truncated`: how many more matched and how to narrow.
  pub note: Option<String>,
}

/// How many entries matched (`total`) and how many of them were left out (`omitted`).
#[napi(object)]
pub struct GlobTruncated {
  pub total: u32,
  pub omitted: u32,
}

#[napi(object)]
pub struct GrepToolInput {
  pub pattern: String,
  pub path: Option<String>,
  pub glob: Option<String>,
  #[napi(js_name = "type")]
  pub file_type: Option<String>,
  #[napi(js_name = "output_mode")]
  pub output_mode: Option<String>,
  #[napi(js_name = "-i")]
  pub case_insensitive: Option<bool>,
  #[napi(js_name = "-B")]
  pub before: Option<f64>,
  #[napi(js_name = "-A")]
  pub after: Option<f64>,
  #[napi(js_name = "-C")]
  pub context: Option<f64>,
  #[napi(js_name = "head_limit")]
  pub head_limit: Option<f64>,
  pub offset: Option<f64>,
  pub multiline: Option<bool>,
}

#[napi(object)]
pub struct GrepFilesOutput {
  pub files: Vec<String>,
  pub count: u32,
  /// Present when more entries matched than were returned (`maxResults`).
  pub truncated: Option<GlobTruncated>,
  /// Present with `truncated`: how many more matched and how to narrow.
  pub note: Option<String>,
}

#[napi(object)]
pub struct GrepCount {
  pub file: String,
  pub count: f64,
}

#[napi(object)]
pub struct GrepCountsOutput {
  pub counts: Vec<GrepCount>,
  pub total: f64,
  pub truncated: Option<GlobTruncated>,
  pub note: Option<String>,
}

#[napi(object)]
pub struct GrepMatch {
  pub file: String,
  #[napi(js_name = "line_number")]
  pub line_number: f64,
  pub line: String,
  #[napi(js_name = "before_context")]
  pub before_context: Option<Vec<String>>,
  #[napi(js_name = "after_context")]
  pub after_context: Option<Vec<String>>,
}

#[napi(object)]
pub struct GrepContentOutput {
  pub matches: Vec<GrepMatch>,
  #[napi(js_name = "total_matches")]
  pub total_matches: u32,
  pub truncated: Option<GlobTruncated>,
  pub note: Option<String>,
}

#[napi(object)]
pub struct PatchFile {
  pub status: String,
  pub path: String,
}

#[napi(object)]
pub struct PatchToolOutput {
  pub message: String,
  pub files: Vec<PatchFile>,
}

/// What a writing tool answers: its result, and the resolved paths it may have written
/// (`touchedAll`: anything), for the cache's invalidation log.
#[napi(object)]
pub struct BashCall {
  pub result: Either<BashToolOutput, ToolErrorResult>,
  pub touched: Vec<String>,
  pub touched_all: bool,
}

#[napi(object)]
pub struct WriteCall {
  pub result: Either<WriteToolOutput, ToolErrorResult>,
  pub touched: Vec<String>,
  pub touched_all: bool,
}

#[napi(object)]
pub struct EditCall {
  pub result: Either<EditToolOutput, ToolErrorResult>,
  pub touched: Vec<String>,
  pub touched_all: bool,
}

#[napi(object)]
pub struct PatchCall {
  pub result: Either<PatchToolOutput, ToolErrorResult>,
  pub touched: Vec<String>,
  pub touched_all: bool,
}

fn answer<T, U>(a: Answer<T>, f: impl FnOnce(T) -> U) -> Either<U, ToolErrorResult> {
  match a {
    Ok(v) => Either::A(f(v)),
    Err(error) => Either::B(ToolErrorResult { error }),
  }
}

fn token(cancel: Option<&CancelToken>) -> CancellationToken {
  cancel.map(|c| c.token.clone()).unwrap_or_default()
}

fn strings(v: Vec<String>) -> Option<Vec<String>> {
  (!v.is_empty()).then_some(v)
}

/// One configured tool of a tool set.
#[napi]
pub struct NativeTool {
  tools: Arc<AgentTools>,
  tool: Arc<Tool>,
}

macro_rules! call {
  ($name:ident, $input:expr, $out:ident, $f:expr) => {{
    let (a, fx): (Answer<_>, Effects) = $input;
    $name {
      result: answer(a, $f),
      touched: fx.touched,
      touched_all: fx.all,
    }
  }};
}

impl NativeTool {
  /// What an aborted write may still have changed (the cache forgets it).
  fn touched(&self, path: &str) -> Effects {
    Effects {
      touched: self.tools.absolute(path).into_iter().collect(),
      all: false,
    }
  }
}

#[napi]
impl NativeTool {
  /// `on_progress` receives the output in chunks while the command runs (`onProgress`); the
  /// answer comes after the last chunk.
  #[napi]
  pub async fn bash(
    &self,
    input: BashToolInput,
    cancel: Option<&CancelToken>,
    #[napi(ts_arg_type = "((chunk: BindingProgressChunk) => void) | undefined | null")] on_progress: Option<
      ProgressFn,
    >,
  ) -> BashCall {
    let i = core::BashInput {
      command: input.command,
      timeout_ms: input.timeout,
      run_in_background: input.run_in_background == Some(true),
    };
    let cancel = token(cancel);
    let r = with_progress(on_progress, |p| self.tools.bash(&self.tool, i, cancel, p)).await;
    call!(BashCall, r, BashToolOutput, |o: core::BashOutput| {
      BashToolOutput {
        stdout: o.stdout,
        stderr: o.stderr,
        exit_code: o.exit_code,
        interrupted: o.interrupted,
        duration_ms: o.duration_ms,
        background: o.background.map(|b| BashBackground {
          pid: b.pid,
          output_file: b.output_file,
        }),
      }
    })
  }

  #[napi]
  pub async fn read(
    &self,
    input: ReadToolInput,
    cancel: Option<&CancelToken>,
  ) -> Either3<ReadTextOutput, ReadDirectoryOutput, ToolErrorResult> {
    let i = core::ReadInput {
      file_path: input.file_path,
      offset: input.offset,
      limit: input.limit,
    };
    let cancel = token(cancel);
    match core::abortable(&cancel, "Read", self.tools.read(&self.tool, i)).await {
      Ok(core::ReadOutput::Text {
        content,
        lines,
        total_lines,
      }) => Either3::A(ReadTextOutput {
        kind: "text".into(),
        content,
        lines: lines
          .into_iter()
          .map(|(n, content)| ReadLine {
            line_number: n as f64,
            content,
          })
          .collect(),
        total_lines: total_lines as f64,
      }),
      Ok(core::ReadOutput::Directory { entries }) => Either3::B(ReadDirectoryOutput {
        kind: "directory".into(),
        count: entries.len() as u32,
        entries,
      }),
      Err(error) => Either3::C(ToolErrorResult { error }),
    }
  }

  #[napi]
  pub async fn write(&self, input: WriteToolInput, cancel: Option<&CancelToken>) -> WriteCall {
    let cancel = token(cancel);
    let path = input.file_path.clone();
    let r = tokio::select! {
      biased;
      _ = cancel.cancelled() => (Err(knap_core::text::ai::aborted("Write")), self.touched(&path)),
      r = self.tools.write(&self.tool, input.file_path, input.content) => r,
    };
    call!(WriteCall, r, WriteToolOutput, |o: core::WriteOutput| {
      WriteToolOutput {
        message: o.message,
        bytes_written: o.bytes_written as f64,
        file_path: o.file_path,
      }
    })
  }

  #[napi]
  pub async fn edit(&self, input: EditToolInput, cancel: Option<&CancelToken>) -> EditCall {
    let cancel = token(cancel);
    let path = input.file_path.clone();
    let i = core::EditInput {
      file_path: input.file_path,
      old_string: input.old_string,
      new_string: input.new_string,
      replace_all: input.replace_all == Some(true),
    };
    let r = tokio::select! {
      biased;
      _ = cancel.cancelled() => (Err(knap_core::text::ai::aborted("Edit")), self.touched(&path)),
      r = self.tools.edit(&self.tool, i) => r,
    };
    call!(EditCall, r, EditToolOutput, |o: core::EditOutput| {
      EditToolOutput {
        message: o.message,
        file_path: o.file_path,
        replacements: o.replacements as f64,
      }
    })
  }

  #[napi]
  pub async fn glob(
    &self,
    input: GlobToolInput,
    cancel: Option<&CancelToken>,
  ) -> Either<GlobToolOutput, ToolErrorResult> {
    let r = self
      .tools
      .glob(&self.tool, input.pattern, input.path, token(cancel))
      .await;
    answer(r, |o| GlobToolOutput {
      count: o.matches.len() as u32,
      truncated: o.note.is_some().then(|| GlobTruncated {
        total: o.total as u32,
        omitted: (o.total - o.matches.len()) as u32,
      }),
      note: o.note,
      matches: o.matches,
      search_path: o.search_path,
    })
  }

  #[napi]
  pub async fn grep(
    &self,
    input: GrepToolInput,
    cancel: Option<&CancelToken>,
  ) -> Either4<GrepFilesOutput, GrepCountsOutput, GrepContentOutput, ToolErrorResult> {
    let i = core::GrepInput {
      pattern: input.pattern,
      path: input.path,
      glob: input.glob,
      file_type: input.file_type,
      output_mode: input.output_mode,
      case_insensitive: input.case_insensitive == Some(true),
      before: input.before,
      after: input.after,
      context: input.context,
      head_limit: input.head_limit,
      offset: input.offset,
      multiline: input.multiline == Some(true),
    };
    let page = match self.tools.grep(&self.tool, i, token(cancel)).await {
      Ok(page) => page,
      Err(error) => return Either4::D(ToolErrorResult { error }),
    };
    let shown = match &page.output {
      core::GrepOutput::Files(v) => v.len(),
      core::GrepOutput::Counts(v) => v.len(),
      core::GrepOutput::Content(v) => v.len(),
    };
    let truncated = page.note.is_some().then(|| GlobTruncated {
      total: page.total as u32,
      omitted: (page.total - shown) as u32,
    });
    let note = page.note;
    match page.output {
      core::GrepOutput::Files(files) => Either4::A(GrepFilesOutput {
        count: files.len() as u32,
        files,
        truncated,
        note,
      }),
      core::GrepOutput::Counts(counts) => Either4::B(GrepCountsOutput {
        truncated,
        note,
        total: counts.iter().map(|(_, n)| *n as f64).sum(),
        counts: counts
          .into_iter()
          .map(|(file, n)| GrepCount {
            file,
            count: n as f64,
          })
          .collect(),
      }),
      core::GrepOutput::Content(matches) => Either4::C(GrepContentOutput {
        truncated,
        note,
        total_matches: matches.len() as u32,
        matches: matches
          .into_iter()
          .map(|m| GrepMatch {
            file: m.file,
            line_number: m.line_number as f64,
            line: m.line,
            before_context: strings(m.before_context),
            after_context: strings(m.after_context),
          })
          .collect(),
      }),
    }
  }

  #[napi]
  pub async fn patch(&self, patch: String) -> PatchCall {
    let r = self.tools.patch(&self.tool, patch).await;
    call!(PatchCall, r, PatchToolOutput, |o: core::PatchOutput| {
      PatchToolOutput {
        message: o.message,
        files: o
          .files
          .into_iter()
          .map(|(status, path)| PatchFile {
            status: status.to_string(),
            path,
          })
          .collect(),
      }
    })
  }
}

// ------------------------------------------------------------------- shared helpers for JS

/// bashkit's `middleTruncate` (the core's one truncation helper).
#[napi]
pub fn middle_truncate(text: String, max_length: f64) -> String {
  if !max_length.is_finite() || max_length < 0.0 {
    return text;
  }
  knap_core::truncate::middle_truncate(&text, max_length.floor() as usize)
}

/// The answer of a schema check: the conformed value, or the first violation's text.
#[napi(object)]
pub struct SchemaCheck {
  pub value: Option<serde_json::Value>,
  pub error: Option<String>,
}

/// A tool input schema checked by the core's validator in zod's manner (defaults filled,
/// unknown keys dropped, the first violation reported).
#[napi]
pub struct ToolInputSchema {
  schema: serde_json::Value,
}

#[napi]
impl ToolInputSchema {
  #[napi(constructor)]
  pub fn new(schema: serde_json::Value) -> Self {
    Self { schema }
  }

  #[napi]
  pub fn check(&self, value: serde_json::Value) -> SchemaCheck {
    match knap_core::schema::conform(&self.schema, &value) {
      Ok(v) => SchemaCheck {
        value: Some(v),
        error: None,
      },
      Err(e) => SchemaCheck {
        value: None,
        error: Some(e),
      },
    }
  }
}

/// The AI SDK tool set's limits (`knap_core::limits`), for the JS adapters that apply them.
#[napi(object)]
pub struct AiSdkLimits {
  pub default_timeout_ms: f64,
  pub bash_max_timeout_ms: f64,
  pub bash_max_output_length: f64,
  pub read_max_lines: f64,
  pub read_max_line_length: f64,
  pub read_max_output_length: f64,
  pub exec_max_output_length: f64,
  pub cache_ttl_ms: f64,
  pub cache_max_entries: f64,
  pub cache_log_max_events: f64,
  pub openrouter_cache_ttl_ms: f64,
  pub openrouter_fetch_timeout_ms: f64,
  pub openrouter_retry_after_ms: f64,
  pub openrouter_max_models: f64,
  pub openrouter_max_context: f64,
}

#[napi]
pub fn ai_sdk_limits() -> AiSdkLimits {
  use knap_core::limits::*;
  AiSdkLimits {
    default_timeout_ms: AI_DEFAULT_TIMEOUT_MS as f64,
    bash_max_timeout_ms: AI_BASH_MAX_TIMEOUT_MS as f64,
    bash_max_output_length: AI_BASH_MAX_OUTPUT_LENGTH as f64,
    read_max_lines: AI_READ_MAX_LINES as f64,
    read_max_line_length: AI_READ_MAX_LINE_LENGTH as f64,
    read_max_output_length: AI_READ_MAX_OUTPUT_LENGTH as f64,
    exec_max_output_length: AI_EXEC_MAX_OUTPUT_LENGTH as f64,
    cache_ttl_ms: AI_CACHE_TTL_MS as f64,
    cache_max_entries: AI_CACHE_MAX_ENTRIES as f64,
    cache_log_max_events: AI_CACHE_LOG_MAX_EVENTS as f64,
    openrouter_cache_ttl_ms: AI_OPENROUTER_CACHE_TTL_MS as f64,
    openrouter_fetch_timeout_ms: AI_OPENROUTER_FETCH_TIMEOUT_MS as f64,
    openrouter_retry_after_ms: AI_OPENROUTER_RETRY_AFTER_MS as f64,
    openrouter_max_models: AI_OPENROUTER_MAX_MODELS as f64,
    openrouter_max_context: AI_OPENROUTER_MAX_CONTEXT as f64,
  }
}

/// POSIX single-quoting of one shell word (the core's, for the JS adapters of remote sandboxes).
#[napi]
pub fn shell_quote(value: String) -> String {
  knap_core::agent_tools::shell_quote(&value)
}
