//! `NativeShellTools`: the binding of `knap_core::tools::ShellTools`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use knap_core::tools::{check_workspace_dir, ShellTools, ShellToolsConfig, WorkspaceOwner};
use napi_derive::napi;
use tokio_util::sync::CancellationToken;

use crate::{coded_error, ErrorCode, NativeCommandSessionRuntime, NativeExecutionBackend};

#[napi(object)]
pub struct BindingShellToolsOptions {
  pub workspace: String,
  pub tools: Option<Vec<String>>,
  /// Tool name → cap in bytes.
  pub output_caps: Option<std::collections::HashMap<String, f64>>,
}

/// Refuses a local workspace that names a file (`cave_workspace_not_directory`) for
/// `shellTools()` or, with `sandbox`, `createLocalSandbox()`. One `stat` on the calling thread,
/// where the caller is about to build the tool set anyway.
#[napi]
pub fn check_workspace_directory(dir: String, sandbox: bool) -> napi::Result<(), ErrorCode> {
  let owner = if sandbox {
    WorkspaceOwner::LocalSandbox
  } else {
    WorkspaceOwner::ShellTools
  };
  check_workspace_dir(&dir, owner).map_err(coded_error)
}

/// One tool's description, as the plain tool object shows it.
#[napi(object)]
pub struct BindingToolSpec {
  pub name: String,
  pub description: String,
  pub effect: String,
  pub speculative: bool,
  pub timeout_ms: u32,
  /// JSON Schema of the input, as JSON text.
  pub input_json: String,
}

/// A settled tool call: `text` (and `label` for `onOutput`) on success, else `code` and
/// `message` for the JS `Error`.
#[napi(object)]
pub struct BindingToolResult {
  pub ok: bool,
  pub text: Option<String>,
  pub label: Option<String>,
  pub code: Option<String>,
  pub message: Option<String>,
}

impl BindingToolResult {
  pub fn from_core(r: std::result::Result<knap_core::tools::ToolOutput, knap_core::ToolError>) -> Self {
    match r {
      Ok(out) => Self {
        ok: true,
        text: Some(out.text),
        label: out.label,
        code: None,
        message: None,
      },
      Err(e) => Self {
        ok: false,
        text: None,
        label: None,
        code: Some(e.code),
        message: Some(e.message),
      },
    }
  }
}

/// Cancels native work (an `AbortSignal` forwards `abort` here).
#[napi]
pub struct CancelToken {
  pub(crate) token: CancellationToken,
}

#[napi]
impl CancelToken {
  #[napi(constructor)]
  pub fn new() -> Self {
    Self {
      token: CancellationToken::new(),
    }
  }

  #[napi]
  pub fn cancel(&self) {
    self.token.cancel();
  }

  #[napi(getter)]
  pub fn cancelled(&self) -> bool {
    self.token.is_cancelled()
  }
}

impl Default for CancelToken {
  fn default() -> Self {
    Self::new()
  }
}

#[napi]
pub struct NativeShellTools {
  pub(crate) inner: Arc<ShellTools>,
  id: u32,
}

/// Tool sets the kernel may dispatch to natively, by id. Weak: a tool set lives as long as its
/// JS object.
fn registry() -> &'static Mutex<HashMap<u32, Weak<ShellTools>>> {
  static REGISTRY: OnceLock<Mutex<HashMap<u32, Weak<ShellTools>>>> = OnceLock::new();
  REGISTRY.get_or_init(Mutex::default)
}

static NEXT_TOOLSET: AtomicU32 = AtomicU32::new(1);

pub(crate) fn toolset_by_id(id: u32) -> Option<Arc<ShellTools>> {
  registry().lock().ok()?.get(&id)?.upgrade()
}

#[napi]
impl NativeShellTools {
  /// Throws `cave_shell_tool_unknown:<name>` / `cave_shell_tool_duplicate:<name>` with that code.
  #[napi(constructor)]
  pub fn new(
    options: BindingShellToolsOptions,
    backend: Option<&NativeExecutionBackend>,
    sessions: Option<&NativeCommandSessionRuntime>,
  ) -> napi::Result<Self, ErrorCode> {
    let mut config = ShellToolsConfig::new(options.workspace);
    if let Some(backend) = backend {
      config.backend = backend.inner.clone();
    }
    config.command_sessions = sessions.map(|s| s.inner.clone());
    config.tools = options.tools;
    config.output_caps = options.output_caps.unwrap_or_default().into_iter().collect();
    let inner = Arc::new(ShellTools::new(config).map_err(coded_error)?);
    let id = NEXT_TOOLSET.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut map) = registry().lock() {
      map.retain(|_, w| w.strong_count() > 0);
      map.insert(id, Arc::downgrade(&inner));
    }
    Ok(Self { inner, id })
  }

  /// The id the kernel uses to run these tools natively.
  #[napi(getter)]
  pub fn id(&self) -> u32 {
    self.id
  }

  #[napi]
  pub fn specs(&self) -> Vec<BindingToolSpec> {
    self
      .inner
      .specs()
      .into_iter()
      .map(|s| BindingToolSpec {
        name: s.name.to_string(),
        description: s.description,
        effect: s.effect.to_string(),
        speculative: s.speculative,
        timeout_ms: s.timeout_ms as u32,
        input_json: s.input.to_string(),
      })
      .collect()
  }

  /// Kills every command the tool set still runs (daemons included) and refuses later calls.
  #[napi]
  pub fn close(&self) {
    self.inner.close();
  }

  /// Runs one tool off the JS thread. `input` is the tool input as a plain object of JSON
  /// values (no `undefined`, no non-finite numbers: lib/shell-tools.mjs prepares it). It is
  /// converted member by member, each string copied once; never turned into JSON text on the
  /// JS thread (a 100 MB `content` would be stringified, copied and parsed again).
  #[napi]
  pub async fn execute(
    &self,
    name: String,
    #[napi(ts_arg_type = "Record<string, unknown>")] input: serde_json::Value,
    cancel: Option<&CancelToken>,
  ) -> BindingToolResult {
    let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
    let tools = self.inner.clone();
    BindingToolResult::from_core(tools.execute(&name, &input, token).await)
  }
}
