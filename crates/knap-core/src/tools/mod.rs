//! `shellTools()`: the six workspace tools, their selection, caps and dispatch.

mod args;
mod bash;
mod bash_session;
mod edit_file;
mod grep;
mod read_file;
mod read_tool_output;
mod write_file;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::cap::Recovery;
use crate::command_session::CommandSessionRuntime;
use crate::error::ToolError;
use crate::exec::{blocking, ExecutionBackend, LocalBackend};
use crate::limits::*;
use crate::store::OutputStore;
use crate::text;
use crate::workspace::Workspace;

pub use bash::process_env;
pub use grep::{grep_search, grep_search_small, GrepOptions, GrepOutcome};

/// The six tool names, in the reference's default order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShellToolName {
  ReadFile,
  Grep,
  Bash,
  WriteFile,
  EditFile,
  ReadToolOutput,
}

impl ShellToolName {
  pub const ALL: [ShellToolName; 6] = [
    ShellToolName::ReadFile,
    ShellToolName::Grep,
    ShellToolName::Bash,
    ShellToolName::WriteFile,
    ShellToolName::EditFile,
    ShellToolName::ReadToolOutput,
  ];

  pub fn as_str(self) -> &'static str {
    match self {
      ShellToolName::ReadFile => "read_file",
      ShellToolName::Grep => "grep",
      ShellToolName::Bash => "bash",
      ShellToolName::WriteFile => "write_file",
      ShellToolName::EditFile => "edit_file",
      ShellToolName::ReadToolOutput => "read_tool_output",
    }
  }

  pub fn parse(name: &str) -> Option<Self> {
    Self::ALL.into_iter().find(|n| n.as_str() == name)
  }

  pub fn default_cap(self) -> usize {
    match self {
      ShellToolName::ReadFile => CAP_READ_FILE,
      ShellToolName::Grep => CAP_GREP,
      ShellToolName::Bash => CAP_BASH,
      ShellToolName::WriteFile => CAP_WRITE_FILE,
      ShellToolName::EditFile => CAP_EDIT_FILE,
      ShellToolName::ReadToolOutput => CAP_READ_TOOL_OUTPUT,
    }
  }

  /// Declared honestly; host mode changes enforcement, not declaration.
  pub fn effect(self) -> &'static str {
    match self {
      ShellToolName::ReadFile | ShellToolName::Grep | ShellToolName::ReadToolOutput => "read",
      ShellToolName::Bash => "external",
      ShellToolName::WriteFile | ShellToolName::EditFile => "write",
    }
  }

  pub fn speculative(self) -> bool {
    matches!(self, ShellToolName::ReadFile | ShellToolName::Grep)
  }

  pub fn timeout_ms(self) -> u64 {
    match self {
      ShellToolName::Bash => BASH_TIMEOUT_MS,
      _ => TOOL_TIMEOUT_MS,
    }
  }
}

/// What a caller of `shellTools()` configures.
pub struct ShellToolsConfig {
  pub workspace: PathBuf,
  /// Names in the order the caller gave; `None` selects all six in the default order.
  pub tools: Option<Vec<String>>,
  /// Per-tool cap overrides (unknown names are ignored, as the reference's merge does).
  pub output_caps: Vec<(String, f64)>,
  pub backend: Arc<dyn ExecutionBackend>,
  /// Interactive bash sessions (local backend only).
  pub command_sessions: Option<Arc<CommandSessionRuntime>>,
}

impl ShellToolsConfig {
  pub fn new(workspace: impl Into<PathBuf>) -> Self {
    Self {
      workspace: workspace.into(),
      tools: None,
      output_caps: Vec::new(),
      backend: Arc::new(LocalBackend::new()),
      command_sessions: None,
    }
  }
}

/// Who names a local workspace (the refusal's text names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkspaceOwner {
  /// `shellTools({ workspace })`.
  ShellTools,
  /// `createLocalSandbox({ workingDirectory })`.
  LocalSandbox,
}

/// A local workspace that exists but is not a directory can never work: refused at once
/// (`cave_workspace_not_directory`). A missing one passes: `shellTools` fails at first use, as
/// the reference canonicalizes lazily, and the local sandbox creates it.
pub fn check_workspace_dir(dir: &str, owner: WorkspaceOwner) -> Result<(), ToolError> {
  match std::fs::metadata(dir) {
    Ok(m) if !m.is_dir() => Err(ToolError::new(
      "cave_workspace_not_directory",
      text::workspace_not_directory(dir, owner),
    )),
    _ => Ok(()),
  }
}

/// A tool's public description (the plain tool object's fields, minus `execute`).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
  pub name: &'static str,
  pub description: String,
  pub effect: &'static str,
  pub speculative: bool,
  pub timeout_ms: u64,
  pub input: Value,
}

/// A tool's successful result: the text the model reads and, for the tools that report to
/// `onOutput`, the label to report it under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
  pub text: String,
  pub label: Option<String>,
}

pub struct ShellTools {
  workspace: Workspace,
  selected: Vec<ShellToolName>,
  caps: [usize; 6],
  /// Present only when `read_tool_output` is selected.
  store: Option<OutputStore>,
  backend: Arc<dyn ExecutionBackend>,
  sessions: Option<Arc<CommandSessionRuntime>>,
  /// Fired by `close()`: running calls are aborted (bash kills what it started), later calls
  /// refused.
  closed: CancellationToken,
}

impl ShellTools {
  pub fn new(config: ShellToolsConfig) -> Result<Self, ToolError> {
    if config.command_sessions.is_some() && !config.backend.is_local() {
      return Err(ToolError::coded("cave_execution_backend_command_sessions_local_only"));
    }
    let selected = match &config.tools {
      None => ShellToolName::ALL.to_vec(),
      Some(names) => {
        let mut out: Vec<ShellToolName> = Vec::with_capacity(names.len());
        for name in names {
          let parsed = ShellToolName::parse(name).ok_or_else(|| {
            let names = ShellToolName::ALL.map(ShellToolName::as_str);
            ToolError::coded(format!("cave_shell_tool_unknown:{name}"))
              .with_hint(crate::suggest::unknown_hint(name, &names, "tools"))
          })?;
          if out.contains(&parsed) {
            return Err(ToolError::coded(format!("cave_shell_tool_duplicate:{name}")));
          }
          out.push(parsed);
        }
        out
      }
    };
    let mut caps = ShellToolName::ALL.map(|n| n.default_cap());
    for (name, value) in &config.output_caps {
      let Some(tool) = ShellToolName::parse(name) else {
        continue;
      };
      if !value.is_finite() || *value < 1.0 || value.fract() != 0.0 || *value > MAX_SAFE_INTEGER {
        return Err(ToolError::coded(format!(
          "cave_shell_tool_output_cap_invalid:{name}"
        )));
      }
      caps[tool as usize] = *value as usize;
    }
    let store = selected
      .contains(&ShellToolName::ReadToolOutput)
      .then(OutputStore::new);
    Ok(Self {
      workspace: Workspace::new(config.workspace),
      selected,
      caps,
      store,
      backend: config.backend,
      sessions: config.command_sessions,
      closed: CancellationToken::new(),
    })
  }

  /// Kills every command this tool set still runs (and everything they started) and refuses
  /// later calls with `cave_shell_tools_closed`. Idempotent.
  pub fn close(&self) {
    self.closed.cancel();
  }

  pub fn selected(&self) -> &[ShellToolName] {
    &self.selected
  }

  pub fn cap(&self, tool: ShellToolName) -> usize {
    self.caps[tool as usize]
  }

  /// A one-line result of `tool`, cut to its output cap.
  fn short_output(&self, tool: ShellToolName, line: &str) -> ToolOutput {
    ToolOutput { text: crate::cap::cap_output(line, self.cap(tool)), label: None }
  }

  /// The absolute path a non-local backend is given for `path` (lexical: the backend resolves).
  fn remote_path(&self, path: &str) -> Result<String, ToolError> {
    Ok(self.workspace.resolve_lexical(path)?.to_string_lossy().into_owned())
  }

  pub fn workspace(&self) -> &Workspace {
    &self.workspace
  }

  /// Whether the tools run on this host's backend (the reference's local marker).
  pub fn is_local(&self) -> bool {
    self.backend.is_local()
  }

  pub fn sessions(&self) -> Option<&Arc<CommandSessionRuntime>> {
    self.sessions.as_ref()
  }

  pub fn backend(&self) -> &Arc<dyn ExecutionBackend> {
    &self.backend
  }

  pub fn store(&self) -> Option<&OutputStore> {
    self.store.as_ref()
  }

  pub(crate) fn recovery(&self) -> Recovery<'_> {
    match &self.store {
      Some(store) => Recovery::Store(store),
      None => Recovery::NotExposed,
    }
  }

  pub fn specs(&self) -> Vec<ToolSpec> {
    self.selected.iter().map(|&tool| self.spec(tool)).collect()
  }

  pub fn spec(&self, tool: ShellToolName) -> ToolSpec {
    let cap = self.cap(tool);
    let (description, input) = match tool {
      ShellToolName::ReadFile => (
        text::read_file_description(cap),
        object_schema(
          &[("path", "string"), ("offset", "integer"), ("limit", "integer")],
          &["path"],
        ),
      ),
      ShellToolName::Grep => (
        text::grep_description(cap),
        object_schema(
          &[("pattern", "string"), ("path", "string"), ("glob", "string")],
          &["pattern"],
        ),
      ),
      ShellToolName::Bash if self.sessions.is_some() => (text::bash_session_description(cap), bash_session_schema()),
      ShellToolName::Bash => (
        text::bash_description(cap),
        object_schema(&[("command", "string"), ("timeoutMs", "integer")], &["command"]),
      ),
      ShellToolName::WriteFile => (
        text::WRITE_FILE_DESCRIPTION.to_string(),
        object_schema(
          &[
            ("path", "string"),
            ("content", "string"),
            ("overwrite", "boolean"),
          ],
          &["path", "content"],
        ),
      ),
      ShellToolName::EditFile => (
        text::EDIT_FILE_DESCRIPTION.to_string(),
        object_schema(
          &[
            ("path", "string"),
            ("old_string", "string"),
            ("new_string", "string"),
            ("replace_all", "boolean"),
          ],
          &["path", "old_string", "new_string"],
        ),
      ),
      ShellToolName::ReadToolOutput => (
        text::READ_TOOL_OUTPUT_DESCRIPTION.to_string(),
        object_schema(
          &[
            ("handle", "string"),
            ("offset", "integer"),
            ("limit", "integer"),
            ("query", "string"),
          ],
          &["handle"],
        ),
      ),
    };
    ToolSpec {
      name: tool.as_str(),
      description,
      effect: tool.effect(),
      speculative: tool.speculative(),
      timeout_ms: tool.timeout_ms(),
      input,
    }
  }

  /// Runs one selected tool. `cancel` aborts it (bash kills its process group).
  pub async fn execute(
    &self,
    name: &str,
    input: &Value,
    cancel: CancellationToken,
  ) -> Result<ToolOutput, ToolError> {
    let tool = ShellToolName::parse(name)
      .filter(|t| self.selected.contains(t))
      .ok_or_else(|| ToolError::coded(format!("cave_shell_tool_unknown:{name}")))?;
    if self.closed.is_cancelled() {
      return Err(ToolError::coded("cave_shell_tools_closed"));
    }
    if cancel.is_cancelled() {
      return Err(aborted());
    }
    let linked = crate::launch::link(&cancel, &self.closed);
    let cancel = linked.token.clone();
    let out = linked
      .watch(async {
        match tool {
          ShellToolName::ReadFile => read_file::run(self, input, cancel).await,
          ShellToolName::Grep => grep::run(self, input, cancel).await,
          ShellToolName::Bash => bash::run(self, input, cancel).await,
          ShellToolName::WriteFile => write_file::run(self, input, cancel).await,
          ShellToolName::EditFile => edit_file::run(self, input, cancel).await,
          ShellToolName::ReadToolOutput => read_tool_output::run(self, input),
        }
      })
      .await;
    // A session started with `yieldTimeMs` keeps watching the call's signal after the call.
    if tool == ShellToolName::Bash && self.sessions.is_some() && input.get("yieldTimeMs").is_some() {
      linked.detach();
    }
    out
  }
}

/// The error an aborted call rejects with (as Node's `AbortError`).
pub fn aborted() -> ToolError {
  ToolError::new("ABORT_ERR", "The operation was aborted")
}

fn object_schema(props: &[(&str, &str)], required: &[&str]) -> Value {
  let mut properties = serde_json::Map::new();
  for (name, ty) in props {
    properties.insert((*name).to_string(), json!({ "type": ty }));
  }
  json!({ "type": "object", "properties": properties, "required": required })
}

/// The bash input with sessions: a union of the five shapes (start, list, read, write, kill).
fn bash_session_schema() -> Value {
  let shape = |props: &[(&str, Value)], required: &[&str]| {
    let properties: serde_json::Map<String, Value> = props.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    json!({ "type": "object", "properties": properties, "required": required })
  };
  let (string, integer, boolean) = (json!({"type": "string"}), json!({"type": "integer"}), json!({"type": "boolean"}));
  let action = |a: &str| json!({ "const": a });
  json!({ "type": "object", "anyOf": [
    shape(&[("command", string.clone()), ("timeoutMs", integer.clone()), ("yieldTimeMs", integer.clone())], &["command"]),
    shape(&[("action", action("list"))], &["action"]),
    shape(&[("sessionId", string.clone()), ("action", action("read")), ("cursor", integer.clone()), ("query", string.clone()), ("limit", integer.clone()), ("waitMs", integer.clone())], &["sessionId", "action"]),
    shape(&[("sessionId", string.clone()), ("action", action("write")), ("input", string.clone()), ("closeStdin", boolean), ("cursor", integer.clone()), ("limit", integer.clone()), ("waitMs", integer.clone())], &["sessionId", "action", "input"]),
    shape(&[("sessionId", string), ("action", action("kill")), ("cursor", integer.clone()), ("limit", integer)], &["sessionId", "action"]),
  ]})
}


#[cfg(test)]
mod remote_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod session_tests;
