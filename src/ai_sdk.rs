//! `NativeSandbox`: the binding of `knap_core::sandbox::LocalSandbox` plus the glob and search
//! engines, for `knap/ai-sdk`. Every method runs off the JS thread; large results cross as JSON
//! text (one string, parsed once in JS). No tool logic lives here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use knap_core::glob::{glob, GlobRequest};
use knap_core::sandbox::{ExecOptions, LocalSandbox, ReadOptions, ReadOutcome};
use knap_core::search::{search, OutputMode, SearchOutput, SearchRequest};
use knap_core::ToolError;
use napi_derive::napi;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::{async_error, coded_error, CancelToken, ErrorCode};

type Result<T> = std::result::Result<T, napi::Error<ErrorCode>>;
/// Async methods reject through `async_error` (`knap:{"code":…,"message":…}`).
fn to_async<T>(r: Result<T>) -> napi::Result<T> {
  r.map_err(|e| async_error(&e.status.0, &e.reason))
}

#[napi(object)]
pub struct BindingSandboxOptions {
  /// The workspace directory (must exist).
  pub workspace: String,
  /// Variables added to the allow-listed environment commands see.
  pub env: Option<HashMap<String, String>>,
}

#[napi(object)]
pub struct BindingExecResult {
  pub stdout: String,
  pub stderr: String,
  pub exit_code: i32,
  pub duration_ms: f64,
  pub interrupted: bool,
  pub timed_out: bool,
  pub aborted: bool,
  /// A stream went over `maxOutputLength` and was middle-truncated.
  pub truncated: bool,
}

#[napi(object)]
pub struct BindingStat {
  pub exists: bool,
  pub is_directory: bool,
  pub is_file: bool,
  pub size: f64,
}

#[napi(object)]
pub struct BindingReadOptions {
  pub offset: Option<f64>,
  pub limit: Option<f64>,
  pub max_lines_without_limit: f64,
  pub max_line_length: f64,
  pub max_output_length: f64,
}

fn threads() -> usize {
  std::thread::available_parallelism()
    .map(|n| n.get())
    .unwrap_or(2)
    .min(8)
}

fn coded(code: &str, message: impl Into<String>) -> napi::Error<ErrorCode> {
  napi::Error::new(ErrorCode(code.to_string()), message.into())
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
  tokio::task::spawn_blocking(f)
    .await
    .unwrap_or_else(|e| Err(coded("cave_internal", e.to_string())))
}

fn core<T>(r: std::result::Result<T, ToolError>) -> Result<T> {
  r.map_err(coded_error)
}

fn non_negative(v: Option<f64>) -> Option<u64> {
  v.filter(|x| x.is_finite()).map(|x| x.max(0.0).floor() as u64)
}

/// Sets `stop` when `cancel` fires or `timeout` passes; the returned handle ends the watch.
fn watch(
  stop: Arc<AtomicBool>,
  cancel: CancellationToken,
  timeout: Option<Duration>,
) -> tokio::task::JoinHandle<()> {
  tokio::spawn(async move {
    match timeout {
      Some(t) => tokio::select! {
        _ = cancel.cancelled() => {}
        _ = tokio::time::sleep(t) => {}
      },
      None => cancel.cancelled().await,
    }
    stop.store(true, Ordering::Relaxed);
  })
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

#[napi]
pub struct NativeSandbox {
  inner: Arc<LocalSandbox>,
}

#[napi]
impl NativeSandbox {
  #[napi(constructor)]
  pub fn new(options: BindingSandboxOptions) -> Result<Self> {
    let mut env = knap_core::tools::process_env(true);
    for (k, v) in options.env.unwrap_or_default() {
      env.retain(|(key, _)| key != &k);
      env.push((k, v));
    }
    let inner = LocalSandbox::new(options.workspace, env);
    core(inner.workspace().root())?;
    Ok(Self {
      inner: Arc::new(inner),
    })
  }

  /// The canonical workspace directory.
  #[napi(getter)]
  pub fn root(&self) -> Result<String> {
    Ok(
      core(self.inner.workspace().root())?
        .path
        .to_string_lossy()
        .into_owned(),
    )
  }

  /// The canonical absolute path of `path` (relative to the workspace); throws
  /// `cave_workspace_escape` outside it.
  #[napi]
  pub fn resolve(&self, path: String) -> Result<String> {
    Ok(
      core(self.inner.resolve(&path))?
        .abs
        .to_string_lossy()
        .into_owned(),
    )
  }

  /// Runs `/bin/sh -c command`; each stream comes back through `middleTruncate` at
  /// `maxOutputLength` UTF-16 code units (only a head and a tail are ever held).
  #[napi]
  pub async fn exec(
    &self,
    command: String,
    timeout_ms: Option<f64>,
    cwd: Option<String>,
    max_output_length: Option<f64>,
    cancel: Option<&CancelToken>,
  ) -> napi::Result<BindingExecResult> {
    let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
    let timeout = non_negative(timeout_ms)
      .map(Duration::from_millis)
      .unwrap_or(Duration::from_secs(24 * 3600));
    let max = non_negative(max_output_length).unwrap_or(10_000_000).min(1 << 30) as usize;
    let out = to_async(core(
      self
        .inner
        .exec(ExecOptions {
          command,
          cwd,
          timeout,
          max_output_units: max,
          cancel: token,
        })
        .await,
    ))?;
    Ok(BindingExecResult {
      stdout: out.stdout,
      stderr: out.stderr,
      exit_code: out.exit_code,
      duration_ms: out.duration_ms as f64,
      interrupted: out.interrupted,
      timed_out: out.timed_out,
      aborted: out.aborted,
      truncated: out.truncated,
    })
  }

  #[napi]
  pub async fn read_file(&self, path: String) -> napi::Result<String> {
    let sb = self.inner.clone();
    to_async(blocking(move || core(sb.read_to_string(&path))).await)
  }

  #[napi]
  pub async fn write_file(&self, path: String, content: String) -> napi::Result<()> {
    let sb = self.inner.clone();
    to_async(blocking(move || core(sb.write(&path, content.as_bytes()))).await)
  }

  #[napi]
  pub async fn read_dir(&self, path: String) -> napi::Result<Vec<String>> {
    let sb = self.inner.clone();
    to_async(blocking(move || core(sb.read_dir(&path))).await)
  }

  #[napi]
  pub async fn stat(&self, path: String) -> napi::Result<BindingStat> {
    let sb = self.inner.clone();
    to_async(
      blocking(move || {
        let s = core(sb.stat(&path))?;
        Ok(BindingStat {
          exists: s.exists,
          is_directory: s.is_dir,
          is_file: s.is_file,
          size: s.size as f64,
        })
      })
      .await,
    )
  }

  #[napi]
  pub async fn delete_file(&self, path: String) -> napi::Result<()> {
    let sb = self.inner.clone();
    to_async(blocking(move || core(sb.delete(&path))).await)
  }

  #[napi]
  pub async fn rename(&self, from: String, to: String) -> napi::Result<()> {
    let sb = self.inner.clone();
    to_async(blocking(move || core(sb.rename(&from, &to))).await)
  }

  /// The `Read` tool: JSON `{kind:"missing"}`, `{kind:"too_large",total_lines}`,
  /// `{type:"directory",entries,count}` or `{type:"text",content,lines,total_lines,nul_in_head,size}`.
  #[napi]
  pub async fn read(&self, path: String, options: BindingReadOptions) -> napi::Result<String> {
    let sb = self.inner.clone();
    let opts = ReadOptions {
      offset: non_negative(options.offset),
      limit: non_negative(options.limit),
      max_lines_without_limit: non_negative(Some(options.max_lines_without_limit)).unwrap_or(500),
      max_line_length: non_negative(Some(options.max_line_length)).unwrap_or(2000) as usize,
      max_output_length: non_negative(Some(options.max_output_length)).unwrap_or(60000) as usize,
    };
    let out = blocking(move || {
      let v = match core(sb.read(&path, &opts))? {
        ReadOutcome::Missing => json!({ "kind": "missing" }),
        ReadOutcome::TooLarge { total_lines } => json!({ "kind": "too_large", "total_lines": total_lines }),
        ReadOutcome::Directory(entries) => {
          json!({ "type": "directory", "count": entries.len(), "entries": entries })
        }
        ReadOutcome::Text(t) => {
          let lines: Vec<Value> = t
            .lines
            .into_iter()
            .enumerate()
            .map(|(i, content)| json!({ "line_number": t.first_line + i as u64, "content": content }))
            .collect();
          json!({
            "type": "text",
            "content": t.content,
            "lines": lines,
            "total_lines": t.total_lines,
            "nul_in_head": t.nul_in_head,
            "size": t.size,
          })
        }
      };
      Ok(v.to_string())
    })
    .await;
    to_async(out)
  }

  /// A real glob (no cap) under `dir` (default: the workspace). JSON
  /// `{matches: ["<dir>/<rel>", …] newest first, stopped}`; throws `ENOENT`/`ENOTDIR` for a bad
  /// directory and `cave_glob_pattern` for a bad pattern.
  #[napi]
  pub async fn glob(
    &self,
    pattern: String,
    dir: Option<String>,
    timeout_ms: Option<f64>,
    cancel: Option<&CancelToken>,
  ) -> napi::Result<String> {
    let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
    let given = dir.unwrap_or_else(|| ".".to_string());
    let resolved = to_async(core(self.inner.resolve(&given)))?;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch(
      stop.clone(),
      token.clone(),
      non_negative(timeout_ms).map(Duration::from_millis),
    );
    let search_stop = stop.clone();
    let out = blocking(move || {
      let meta = std::fs::metadata(&resolved.abs)
        .map_err(|e| coded_error(ToolError::from_io(&e, "scandir", &resolved.abs)))?;
      if !meta.is_dir() {
        let e = std::io::Error::from_raw_os_error(20); // ENOTDIR
        return Err(coded_error(ToolError::from_io(&e, "scandir", &resolved.abs)));
      }
      let found = glob(&GlobRequest {
        dir: &resolved.abs,
        pattern: &pattern,
        threads: threads(),
        stop: &search_stop,
      })
      .map_err(|e| coded("cave_glob_pattern", e.to_string()))?;
      let display = display_of(&given);
      let sep = if display.ends_with('/') { "" } else { "/" };
      let matches: Vec<String> = found
        .into_iter()
        .map(|m| format!("{display}{sep}{}", m.rel))
        .collect();
      Ok(json!({ "matches": matches, "stopped": search_stop.load(Ordering::Relaxed) }).to_string())
    })
    .await;
    watcher.abort();
    if token.is_cancelled() {
      return to_async(Err(coded("ABORT_ERR", "The operation was aborted")));
    }
    to_async(out)
  }

  /// Grep's engine. `optionsJson`: `{pattern, path?, glob?, type?, output_mode?, i?, multiline?,
  /// before?, after?, offset?, head_limit?, max_line_length?, timeout_ms?}`. Returns bashkit's
  /// output object as JSON (plus `stopped`); throws `cave_grep_regex` / `cave_grep_glob` /
  /// `cave_grep_type` and errno codes for a missing path.
  #[napi]
  pub async fn grep(&self, options_json: String, cancel: Option<&CancelToken>) -> napi::Result<String> {
    let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
    let o: Value = to_async(
      serde_json::from_str(&options_json).map_err(|e| coded("cave_tool_arguments_invalid", e.to_string())),
    )?;
    let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    let n = |k: &str| {
      o.get(k)
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite())
        .map(|x| x.max(0.0).floor() as usize)
    };
    let b = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
    let pattern =
      to_async(s("pattern").ok_or_else(|| coded("cave_tool_arguments_invalid", "pattern is required")))?;
    let given = s("path")
      .filter(|p| !p.is_empty())
      .unwrap_or_else(|| ".".to_string());
    let resolved = to_async(core(self.inner.resolve(&given)))?;
    let root = to_async(core(self.inner.workspace().root()))?;
    let mode = match s("output_mode").as_deref() {
      Some("content") => OutputMode::Content,
      Some("count") => OutputMode::Counts,
      _ => OutputMode::Files,
    };
    let context = n("context");
    let req = SearchRequest {
      pattern,
      scope: resolved.abs.clone(),
      display: display_of(&given),
      root,
      glob: s("glob").filter(|g| !g.is_empty()),
      file_type: s("type").filter(|t| !t.is_empty()),
      case_insensitive: b("i"),
      multiline: b("multiline"),
      before: context.or(n("before")).unwrap_or(0),
      after: context.or(n("after")).unwrap_or(0),
      printer: mode,
      offset: n("offset").unwrap_or(0),
      head_limit: n("head_limit").filter(|&h| h > 0),
      max_line_length: n("max_line_length").unwrap_or(2000),
      threads: threads(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let timeout = n("timeout_ms").map(|ms| Duration::from_millis(ms as u64));
    let watcher = watch(stop.clone(), token.clone(), timeout);
    let search_stop = stop.clone();
    let out = blocking(move || {
      if let Err(e) = std::fs::metadata(&req.scope) {
        return Err(coded_error(ToolError::from_io(&e, "stat", &req.scope)));
      }
      let result = search(&req, &search_stop).map_err(|e| {
        let code = match e {
          knap_core::search::SearchError::Regex(_) => "cave_grep_regex",
          knap_core::search::SearchError::Glob(_) => "cave_grep_glob",
          knap_core::search::SearchError::Type(_) => "cave_grep_type",
        };
        coded(code, e.to_string())
      })?;
      let v = match result.output {
        SearchOutput::Lines { .. } => Value::Null,
        SearchOutput::Files(files) => {
          json!({ "files": files, "count": files.len(), "stopped": result.stopped })
        }
        SearchOutput::Counts(counts) => {
          let total: u64 = counts.iter().map(|(_, c)| c).sum();
          let list: Vec<Value> = counts
            .into_iter()
            .map(|(file, count)| json!({ "file": file, "count": count }))
            .collect();
          json!({ "counts": list, "total": total, "stopped": result.stopped })
        }
        SearchOutput::Content(matches) => {
          let list: Vec<Value> = matches
            .into_iter()
            .map(|m| {
              let mut obj = serde_json::Map::new();
              obj.insert("file".into(), m.file.into());
              obj.insert("line_number".into(), m.line_number.into());
              obj.insert("line".into(), m.line.into());
              if !m.before_context.is_empty() {
                obj.insert("before_context".into(), m.before_context.into());
              }
              if !m.after_context.is_empty() {
                obj.insert("after_context".into(), m.after_context.into());
              }
              Value::Object(obj)
            })
            .collect();
          let total = list.len();
          json!({ "matches": list, "total_matches": total, "stopped": result.stopped })
        }
      };
      Ok(v.to_string())
    })
    .await;
    watcher.abort();
    if token.is_cancelled() {
      return to_async(Err(coded("ABORT_ERR", "The operation was aborted")));
    }
    to_async(out)
  }
}
