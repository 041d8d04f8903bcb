//! bashkit's system-context assembly over one [`Sandbox`]: the project's instruction files
//! (`discoverInstructions`), the environment block (`collectEnvironment`, `formatEnvironment`),
//! the tool guidance (`buildToolGuidance`) and the three joined (`buildSystemContext`).
//!
//! Everything goes through the sandbox's interface (`fileExists`, `readFile`, `exec`), so knap's
//! own sandbox and a user's sandbox object give the same answers. The texts are bashkit 0.7.1's.

use std::time::Duration;

use serde::Serialize;

use super::{ExecCall, ExecReply, Sandbox, SbResult};
use crate::limits::{
  AI_ENVIRONMENT_EXEC_GRACE_MS, AI_ENVIRONMENT_EXEC_TIMEOUT_MS, AI_INSTRUCTIONS_MAX_BYTES,
  AI_INSTRUCTIONS_MAX_DEPTH,
};
use crate::text::ai as text;
use crate::truncate::{utf16_len, utf16_prefix};

/// Where discovery starts when neither the options nor the sandbox name a directory.
const DEFAULT_CWD: &str = "/tmp";

/// `InstructionDiscoveryConfig` (`None`: bashkit's default).
#[derive(Debug, Clone, Default)]
pub struct InstructionsConfig {
  pub cwd: Option<String>,
  /// Looked for in this order in each directory; the first one present is taken.
  pub filenames: Option<Vec<String>>,
  /// A directory holding one of these is the project root (the walk stops there).
  pub root_markers: Option<Vec<String>>,
  /// UTF-16 units of merged text kept at most.
  pub max_bytes: Option<usize>,
  pub global_path: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
  Global,
  Project,
  Local,
}

impl Scope {
  pub fn as_str(self) -> &'static str {
    match self {
      Scope::Global => "global",
      Scope::Project => "project",
      Scope::Local => "local",
    }
  }
}

/// One instruction file that was loaded. `bytes` is its length as bashkit measures it
/// (`String.length`: UTF-16 units, bytes for ASCII).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstructionSource {
  pub path: String,
  pub scope: Scope,
  pub bytes: usize,
  pub truncated: bool,
}

/// `DiscoveredInstructions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instructions {
  pub text: String,
  pub sources: Vec<InstructionSource>,
}

/// The directory above `dir` as bashkit computes it: `dir` without its last `/name` (the root
/// is the empty string, so files there are `/NAME`); `dir` itself when there is nothing to drop.
fn parent(dir: &str) -> &str {
  match dir.rfind('/') {
    Some(i) if i + 1 < dir.len() => &dir[..i],
    _ => dir,
  }
}

/// `path/name` with bashkit's plain concatenation.
fn join(dir: &str, name: &str) -> String {
  format!("{dir}/{name}")
}

/// The first of `filenames` in `dir` that exists and reads. A file that cannot be checked or
/// read is skipped, as bashkit skips it.
async fn first_readable(sb: &dyn Sandbox, dir: &str, filenames: &[String]) -> Option<(String, String)> {
  for name in filenames {
    let path = join(dir, name);
    if !matches!(sb.file_exists(path.clone()).await, Ok(true)) {
      continue;
    }
    if let Ok(content) = sb.read_file(path.clone()).await {
      return Some((path, content));
    }
  }
  None
}

/// Walks up from the start directory to the first directory holding a root marker (or to the
/// top), then loads one instruction file per directory, outermost first; a global file goes
/// before them all. `Ok(None)` when no file was found. A failing marker check fails the whole
/// call (bashkit's behaviour), except the sandbox's own boundary: knap's sandbox refuses paths
/// outside its workspace, and the walk stops there as it would at the filesystem's root.
pub async fn discover_instructions(
  sb: &dyn Sandbox,
  config: &InstructionsConfig,
) -> SbResult<Option<Instructions>> {
  let default_names = ["AGENTS.md".to_string(), "CLAUDE.md".to_string()];
  let default_markers = [".git".to_string()];
  let filenames = config.filenames.as_deref().unwrap_or(&default_names);
  let markers = config.root_markers.as_deref().unwrap_or(&default_markers);
  let max = config.max_bytes.unwrap_or(AI_INSTRUCTIONS_MAX_BYTES);
  let start = config
    .cwd
    .clone()
    .or_else(|| sb.working_directory())
    .unwrap_or_else(|| DEFAULT_CWD.to_string());
  // Trailing slashes dropped (bashkit never walked past one: "/a/b/" has no `/name` to drop);
  // the root becomes "", as the walk names it.
  let cwd = start.trim_end_matches('/').to_string();

  let mut dirs: Vec<String> = Vec::new();
  let mut root: Option<String> = None;
  let mut dir = cwd.clone();
  'walk: loop {
    dirs.push(dir.clone());
    for marker in markers {
      match sb.file_exists(join(&dir, marker)).await {
        Ok(true) => {
          root = Some(dir.clone());
          break 'walk;
        }
        Ok(false) => {}
        Err(e) if e.is_escape() => {
          dirs.pop();
          break 'walk;
        }
        Err(e) => return Err(e),
      }
    }
    let up = parent(&dir);
    if up == dir || dirs.len() >= AI_INSTRUCTIONS_MAX_DEPTH {
      break;
    }
    dir = up.to_string();
  }

  let mut sections: Vec<String> = Vec::new();
  let mut sources: Vec<InstructionSource> = Vec::new();
  if let Some(global) = config.global_path.as_deref() {
    if matches!(sb.file_exists(global.to_string()).await, Ok(true)) {
      if let Ok(content) = sb.read_file(global.to_string()).await {
        sources.push(InstructionSource {
          path: global.to_string(),
          scope: Scope::Global,
          bytes: utf16_len(&content),
          truncated: false,
        });
        sections.push(content);
      }
    }
  }
  for dir in dirs.iter().rev() {
    if let Some((path, content)) = first_readable(sb, dir, filenames).await {
      // bashkit names the start directory "local" even when it is the project root.
      let scope = if *dir != cwd && root.as_deref() == Some(dir.as_str()) {
        Scope::Project
      } else {
        Scope::Local
      };
      sources.push(InstructionSource {
        path,
        scope,
        bytes: utf16_len(&content),
        truncated: false,
      });
      sections.push(content);
    }
  }
  if sections.is_empty() {
    return Ok(None);
  }
  let mut merged = sections.join(text::PROJECT_DOC_SEPARATOR);
  if utf16_len(&merged) > max {
    // Never half a surrogate pair: a character that does not fit whole is left out.
    merged = utf16_prefix(&merged, max).to_string();
    if let Some(last) = sources.last_mut() {
      last.truncated = true;
    }
  }
  Ok(Some(Instructions {
    text: merged,
    sources,
  }))
}

/// `EnvironmentContextConfig`'s switches (both on by default).
#[derive(Debug, Clone, Copy)]
pub struct EnvironmentConfig {
  pub git: bool,
  pub timezone: bool,
}

impl Default for EnvironmentConfig {
  fn default() -> Self {
    Self {
      git: true,
      timezone: true,
    }
  }
}

/// `EnvironmentContext`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentContext {
  pub cwd: String,
  pub shell: String,
  pub platform: String,
  /// `YYYY-MM-DD`, UTC.
  pub date: String,
  pub timezone: Option<String>,
  pub git_branch: Option<String>,
  /// How many lines `git status --porcelain` printed (changed files), as text.
  pub git_status: Option<String>,
}

const SHELL_COMMAND: &str = "echo $SHELL";
const GIT_BRANCH_COMMAND: &str = "git branch --show-current 2>/dev/null";
const GIT_STATUS_COMMAND: &str = "git status --porcelain 2>/dev/null | wc -l";
const TIMEZONE_COMMAND: &str = "date +%Z 2>/dev/null";

/// `process.platform`'s name for the OS this runs on.
pub fn node_platform() -> &'static str {
  match std::env::consts::OS {
    "macos" => "darwin",
    "windows" => "win32",
    "solaris" | "illumos" => "sunos",
    other => other,
  }
}

/// One command with the environment timeout; `None` when it failed or ran past the timeout and
/// its grace.
async fn probe(sb: &dyn Sandbox, command: &str, wanted: bool) -> Option<ExecReply> {
  if !wanted {
    return None;
  }
  let call = ExecCall {
    command: command.to_string(),
    timeout_ms: Some(AI_ENVIRONMENT_EXEC_TIMEOUT_MS),
    progress: None,
  };
  let limit = Duration::from_millis(AI_ENVIRONMENT_EXEC_TIMEOUT_MS + AI_ENVIRONMENT_EXEC_GRACE_MS);
  match tokio::time::timeout(limit, sb.exec(call)).await {
    Ok(Ok(reply)) => Some(reply),
    _ => None,
  }
}

/// The trimmed stdout, `None` when empty or when the command failed.
fn nonempty(reply: Option<ExecReply>) -> Option<String> {
  reply
    .map(|r| r.stdout.trim().to_string())
    .filter(|s| !s.is_empty())
}

/// Runs the shell, git and timezone commands at once through the sandbox. A command that fails
/// leaves its field out (the shell: `"unknown"`); a non-zero exit still counts its stdout.
pub async fn collect_environment(sb: &dyn Sandbox, config: EnvironmentConfig) -> EnvironmentContext {
  let (shell, branch, status, tz) = futures::join!(
    probe(sb, SHELL_COMMAND, true),
    probe(sb, GIT_BRANCH_COMMAND, config.git),
    probe(sb, GIT_STATUS_COMMAND, config.git),
    probe(sb, TIMEZONE_COMMAND, config.timezone),
  );
  let now = crate::durable::record::iso_now();
  EnvironmentContext {
    cwd: sb.working_directory().unwrap_or_else(|| DEFAULT_CWD.to_string()),
    shell: shell
      .map(|r| r.stdout.trim().to_string())
      .unwrap_or_else(|| "unknown".to_string()),
    platform: node_platform().to_string(),
    date: now[..10].to_string(),
    timezone: nonempty(tz),
    git_branch: nonempty(branch),
    git_status: nonempty(status),
  }
}

/// `<environment_context>` with one tag per known field, then the custom fields in order.
pub fn format_environment(env: &EnvironmentContext, custom: &[(String, String)]) -> String {
  let mut lines = vec![
    "<environment_context>".to_string(),
    format!("  <cwd>{}</cwd>", env.cwd),
    format!("  <shell>{}</shell>", env.shell),
    format!("  <platform>{}</platform>", env.platform),
    format!("  <date>{}</date>", env.date),
  ];
  let optional = [
    ("timezone", &env.timezone),
    ("git_branch", &env.git_branch),
    ("git_changed_files", &env.git_status),
  ];
  for (tag, value) in optional {
    if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
      lines.push(format!("  <{tag}>{v}</{tag}>"));
    }
  }
  for (key, value) in custom {
    lines.push(format!("  <{key}>{value}</{key}>"));
  }
  lines.push("</environment_context>".to_string());
  lines.join("\n")
}

/// `ToolGuidanceConfig`.
#[derive(Debug, Clone, Default)]
pub struct ToolGuidance {
  pub tools: Vec<String>,
  /// Replace or add hints by tool name (an empty hint leaves the tool out).
  pub hints: Vec<(String, String)>,
  pub guidelines: Vec<String>,
}

/// `## Available Tools` with a line per listed tool that has a hint, then `## Guidelines`.
pub fn build_tool_guidance(config: &ToolGuidance) -> String {
  let mut lines = vec![text::TOOL_GUIDANCE_HEADING.to_string()];
  for tool in &config.tools {
    let own = config
      .hints
      .iter()
      .rev()
      .find(|(k, _)| k == tool)
      .map(|(_, v)| v.as_str());
    let hint = own.or_else(|| text::TOOL_HINTS.iter().find(|(k, _)| k == tool).map(|(_, v)| *v));
    if let Some(h) = hint.filter(|h| !h.is_empty()) {
      lines.push(format!("- **{tool}**: {h}"));
    }
  }
  if !config.guidelines.is_empty() {
    lines.push(String::new());
    lines.push(text::TOOL_GUIDELINES_HEADING.to_string());
    for g in &config.guidelines {
      lines.push(format!("- {g}"));
    }
  }
  lines.join("\n")
}

/// `SystemContextConfig`: each section is built only when given.
#[derive(Debug, Clone, Default)]
pub struct SystemContextConfig {
  pub instructions: Option<InstructionsConfig>,
  pub environment: Option<(EnvironmentConfig, Vec<(String, String)>)>,
  pub tool_guidance: Option<ToolGuidance>,
}

/// `SystemContext` (with `meta`'s two fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemContext {
  pub instructions: Option<String>,
  pub environment: Option<String>,
  pub tool_guidance: Option<String>,
  pub combined: String,
  pub instruction_sources: Option<Vec<InstructionSource>>,
  pub environment_context: Option<EnvironmentContext>,
}

/// Instructions and environment are gathered at once; the sections present are joined with a
/// blank line in the order instructions, environment, tool guidance.
pub async fn build_system_context(sb: &dyn Sandbox, config: &SystemContextConfig) -> SbResult<SystemContext> {
  let discover = async {
    match &config.instructions {
      Some(c) => discover_instructions(sb, c).await,
      None => Ok(None),
    }
  };
  let collect = async {
    match &config.environment {
      Some((c, _)) => Some(collect_environment(sb, *c).await),
      None => None,
    }
  };
  let (found, env) = futures::join!(discover, collect);
  let found = found?;
  let instructions = found.as_ref().map(|f| text::project_instructions(&f.text));
  let environment = env.as_ref().map(|e| {
    format_environment(
      e,
      config
        .environment
        .as_ref()
        .map(|(_, c)| c.as_slice())
        .unwrap_or(&[]),
    )
  });
  let tool_guidance = config.tool_guidance.as_ref().map(build_tool_guidance);
  let combined = [&instructions, &environment, &tool_guidance]
    .into_iter()
    .filter_map(|s| s.as_deref().filter(|s| !s.is_empty()))
    .collect::<Vec<_>>()
    .join("\n\n");
  Ok(SystemContext {
    instructions,
    environment,
    tool_guidance,
    combined,
    instruction_sources: found.map(|f| f.sources),
    environment_context: env,
  })
}

#[cfg(test)]
mod tests {
  use std::collections::BTreeMap;
  use std::sync::Mutex;

  use super::*;
  use crate::agent_tools::SandboxError;
  use crate::exec::BoxFuture;

  /// A sandbox of files in memory; paths are the strings discovery builds.
  #[derive(Default)]
  struct Mem {
    files: BTreeMap<String, String>,
    dirs: Vec<String>,
    cwd: Option<String>,
    /// Paths whose checks fail as knap's sandbox fails outside its workspace.
    outside: Option<String>,
    failing_reads: Vec<String>,
    exec_out: BTreeMap<String, String>,
    execs: Mutex<Vec<(String, Option<u64>)>>,
    hang: bool,
  }

  fn ok<T: Send + 'static>(v: T) -> BoxFuture<SbResult<T>> {
    Box::pin(async move { Ok(v) })
  }

  impl Sandbox for Mem {
    fn exec(&self, call: ExecCall) -> BoxFuture<SbResult<ExecReply>> {
      self
        .execs
        .lock()
        .unwrap()
        .push((call.command.clone(), call.timeout_ms));
      let out = self.exec_out.get(&call.command).cloned();
      let hang = self.hang;
      Box::pin(async move {
        if hang {
          std::future::pending::<()>().await;
        }
        match out {
          Some(stdout) => Ok(ExecReply {
            stdout,
            exit_code: Some(0),
            ..Default::default()
          }),
          None => Err(SandboxError::new("no such command")),
        }
      })
    }
    fn read_file(&self, path: String) -> BoxFuture<SbResult<String>> {
      if self.failing_reads.contains(&path) {
        return Box::pin(async { Err(SandboxError::new("EACCES")) });
      }
      let r = self
        .files
        .get(&path)
        .cloned()
        .ok_or_else(|| SandboxError::new("ENOENT"));
      Box::pin(async move { r })
    }
    fn write_file(&self, _: String, _: String) -> BoxFuture<SbResult<()>> {
      ok(())
    }
    fn read_dir(&self, _: String) -> BoxFuture<SbResult<Vec<String>>> {
      ok(vec![])
    }
    fn file_exists(&self, path: String) -> BoxFuture<SbResult<bool>> {
      if let Some(o) = &self.outside {
        if !path.starts_with(o.as_str()) {
          return Box::pin(async move {
            Err(SandboxError {
              code: Some("cave_workspace_escape".into()),
              message: format!("{path} escapes the workspace"),
            })
          });
        }
      }
      ok(self.files.contains_key(&path) || self.dirs.contains(&path))
    }
    fn is_directory(&self, path: String) -> BoxFuture<SbResult<bool>> {
      ok(self.dirs.contains(&path))
    }
    fn delete_file(&self, _: String) -> Option<BoxFuture<SbResult<()>>> {
      None
    }
    fn rg_path(&self) -> BoxFuture<Option<String>> {
      Box::pin(async { None })
    }
    fn working_directory(&self) -> Option<String> {
      self.cwd.clone()
    }
  }

  fn mem(files: &[(&str, &str)], dirs: &[&str], cwd: &str) -> Mem {
    Mem {
      files: files
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
      dirs: dirs.iter().map(|d| d.to_string()).collect(),
      cwd: Some(cwd.into()),
      ..Default::default()
    }
  }

  fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
      .enable_time()
      .build()
      .unwrap()
      .block_on(f)
  }

  #[test]
  fn walks_up_to_the_root_marker_outermost_first_first_name_wins() {
    let sb = mem(
      &[
        ("/r/AGENTS.md", "root"),
        ("/r/a/CLAUDE.md", "a-claude"),
        ("/r/a/b/AGENTS.md", "b-agents"),
        ("/r/a/b/CLAUDE.md", "b-claude"),
        ("/AGENTS.md", "above the root"),
      ],
      &["/r/.git"],
      "/r/a/b",
    );
    let got = run(discover_instructions(&sb, &InstructionsConfig::default()))
      .unwrap()
      .unwrap();
    assert_eq!(
      got.text,
      "root\n\n--- project-doc ---\n\na-claude\n\n--- project-doc ---\n\nb-agents"
    );
    let paths: Vec<_> = got.sources.iter().map(|s| (s.path.as_str(), s.scope)).collect();
    assert_eq!(
      paths,
      [
        ("/r/AGENTS.md", Scope::Project),
        ("/r/a/CLAUDE.md", Scope::Local),
        ("/r/a/b/AGENTS.md", Scope::Local)
      ]
    );
  }

  #[test]
  fn without_a_marker_the_walk_reaches_the_top_and_the_start_dir_is_local() {
    let sb = mem(&[("/AGENTS.md", "top"), ("/w/AGENTS.md", "here")], &[], "/w/");
    let got = run(discover_instructions(&sb, &InstructionsConfig::default()))
      .unwrap()
      .unwrap();
    assert_eq!(got.sources[0].path, "/AGENTS.md");
    assert_eq!(got.sources[1].path, "/w/AGENTS.md");
    assert_eq!(got.sources[1].scope, Scope::Local);
    // A marker in the start directory: it is the root, and still "local".
    let sb = mem(&[("/w/AGENTS.md", "here")], &["/w/.git"], "/w");
    let got = run(discover_instructions(&sb, &InstructionsConfig::default()))
      .unwrap()
      .unwrap();
    assert_eq!(got.sources.len(), 1);
    assert_eq!(got.sources[0].scope, Scope::Local);
  }

  #[test]
  fn the_sandbox_boundary_ends_the_walk_and_other_failures_fail_the_call() {
    let mut sb = mem(&[("/ws/sub/AGENTS.md", "x")], &[], "/ws/sub");
    sb.outside = Some("/ws".into());
    let got = run(discover_instructions(&sb, &InstructionsConfig::default()))
      .unwrap()
      .unwrap();
    assert_eq!(got.sources.len(), 1);
    struct Broken(Mem);
    let broken = Broken(mem(&[], &[], "/x"));
    // A file check that fails for another reason fails discovery (bashkit rejects too).
    impl Sandbox for Broken {
      fn exec(&self, c: ExecCall) -> BoxFuture<SbResult<ExecReply>> {
        self.0.exec(c)
      }
      fn read_file(&self, p: String) -> BoxFuture<SbResult<String>> {
        self.0.read_file(p)
      }
      fn write_file(&self, p: String, c: String) -> BoxFuture<SbResult<()>> {
        self.0.write_file(p, c)
      }
      fn read_dir(&self, p: String) -> BoxFuture<SbResult<Vec<String>>> {
        self.0.read_dir(p)
      }
      fn file_exists(&self, _: String) -> BoxFuture<SbResult<bool>> {
        Box::pin(async { Err(SandboxError::new("disk on fire")) })
      }
      fn is_directory(&self, p: String) -> BoxFuture<SbResult<bool>> {
        self.0.is_directory(p)
      }
      fn delete_file(&self, _: String) -> Option<BoxFuture<SbResult<()>>> {
        None
      }
      fn rg_path(&self) -> BoxFuture<Option<String>> {
        Box::pin(async { None })
      }
      fn working_directory(&self) -> Option<String> {
        self.0.working_directory()
      }
    }
    let err = run(discover_instructions(&broken, &InstructionsConfig::default())).unwrap_err();
    assert_eq!(err.message, "disk on fire");
  }

  #[test]
  fn an_unreadable_file_gives_way_to_the_next_name_and_global_goes_first() {
    let mut sb = mem(
      &[
        ("/p/AGENTS.md", "a"),
        ("/p/CLAUDE.md", "c"),
        ("/home/g.md", "global"),
      ],
      &["/p/.git"],
      "/p",
    );
    sb.failing_reads = vec!["/p/AGENTS.md".into()];
    let config = InstructionsConfig {
      global_path: Some("/home/g.md".into()),
      ..Default::default()
    };
    let got = run(discover_instructions(&sb, &config)).unwrap().unwrap();
    assert_eq!(got.text, "global\n\n--- project-doc ---\n\nc");
    assert_eq!(got.sources[0].scope, Scope::Global);
    // Nothing found at all: None.
    let empty = mem(&[], &["/p/.git"], "/p");
    assert_eq!(
      run(discover_instructions(&empty, &InstructionsConfig::default())).unwrap(),
      None
    );
  }

  #[test]
  fn the_cap_counts_utf16_units_marks_the_last_source_and_never_splits_a_pair() {
    let big = "x".repeat(40_000);
    let sb = mem(
      &[("/p/AGENTS.md", "ab"), ("/p/q/AGENTS.md", &big)],
      &["/p/.git"],
      "/p/q",
    );
    let got = run(discover_instructions(&sb, &InstructionsConfig::default()))
      .unwrap()
      .unwrap();
    assert_eq!(utf16_len(&got.text), AI_INSTRUCTIONS_MAX_BYTES);
    assert_eq!(
      got.sources.iter().map(|s| s.truncated).collect::<Vec<_>>(),
      [false, true]
    );
    assert_eq!(got.sources[1].bytes, 40_000);
    // "é" is one unit, "😀" two: a cut inside the pair leaves it out.
    let sb = mem(&[("/p/AGENTS.md", "éé😀z")], &["/p/.git"], "/p");
    let cut = |n| {
      run(discover_instructions(
        &sb,
        &InstructionsConfig {
          max_bytes: Some(n),
          ..Default::default()
        },
      ))
      .unwrap()
      .unwrap()
    };
    assert_eq!(cut(3).text, "éé");
    assert_eq!(cut(4).text, "éé😀");
    assert_eq!(cut(4).sources[0].bytes, 5);
    assert!(cut(4).sources[0].truncated);
    assert!(!cut(5).sources[0].truncated);
  }

  fn env_sandbox() -> Mem {
    let mut sb = mem(&[], &[], "/w");
    for (c, o) in [
      (SHELL_COMMAND, "/bin/zsh\n"),
      (GIT_BRANCH_COMMAND, "main\n"),
      (GIT_STATUS_COMMAND, "       3\n"),
      (TIMEZONE_COMMAND, "UTC\n"),
    ] {
      sb.exec_out.insert(c.into(), o.into());
    }
    sb
  }

  #[test]
  fn environment_runs_the_four_commands_with_the_timeout_and_formats_them() {
    let sb = env_sandbox();
    let env = run(collect_environment(&sb, EnvironmentConfig::default()));
    assert_eq!(env.shell, "/bin/zsh");
    assert_eq!(env.git_branch.as_deref(), Some("main"));
    assert_eq!(env.git_status.as_deref(), Some("3"));
    assert_eq!(env.timezone.as_deref(), Some("UTC"));
    assert_eq!(env.cwd, "/w");
    assert_eq!(env.date.len(), 10);
    let calls = sb.execs.lock().unwrap().clone();
    assert_eq!(calls.len(), 4);
    assert!(calls.iter().all(|(_, t)| *t == Some(5_000)));
    let text = format_environment(&env, &[("team".into(), "core".into())]);
    assert_eq!(
      text,
      format!(
        "<environment_context>\n  <cwd>/w</cwd>\n  <shell>/bin/zsh</shell>\n  <platform>{}</platform>\n  <date>{}</date>\n  <timezone>UTC</timezone>\n  <git_branch>main</git_branch>\n  <git_changed_files>3</git_changed_files>\n  <team>core</team>\n</environment_context>",
        node_platform(),
        env.date
      )
    );
    // Switched off: not even run.
    let sb = env_sandbox();
    let env = run(collect_environment(
      &sb,
      EnvironmentConfig {
        git: false,
        timezone: false,
      },
    ));
    assert_eq!((env.git_branch, env.timezone), (None, None));
    assert_eq!(sb.execs.lock().unwrap().len(), 1);
    // Failing commands: the shell is "unknown", the rest left out.
    let sb = mem(&[], &[], "/w");
    let env = run(collect_environment(&sb, EnvironmentConfig::default()));
    assert_eq!(env.shell, "unknown");
    assert_eq!((env.git_branch, env.git_status, env.timezone), (None, None, None));
  }

  #[test]
  fn a_sandbox_that_ignores_the_timeout_is_given_up_on() {
    let mut sb = env_sandbox();
    sb.hang = true;
    let env = tokio::runtime::Builder::new_current_thread()
      .enable_time()
      .start_paused(true)
      .build()
      .unwrap()
      .block_on(collect_environment(&sb, EnvironmentConfig::default()));
    assert_eq!(env.shell, "unknown");
    assert_eq!(env.git_branch, None);
  }

  #[test]
  fn tool_guidance_lists_known_tools_in_the_given_order_with_overrides() {
    let config = ToolGuidance {
      tools: vec!["Read".into(), "Custom".into(), "Bash".into(), "Glob".into()],
      hints: vec![("Custom".into(), "Mine.".into()), ("Glob".into(), String::new())],
      guidelines: vec!["Be brief.".into()],
    };
    assert_eq!(
      build_tool_guidance(&config),
      "## Available Tools\n- **Read**: Read files or list directories. Use offset/limit for large files.\n- **Custom**: Mine.\n- **Bash**: Execute shell commands. Prefer Read/Grep/Glob over bash for file exploration.\n\n## Guidelines\n- Be brief."
    );
    assert_eq!(
      build_tool_guidance(&ToolGuidance::default()),
      "## Available Tools"
    );
  }

  #[test]
  fn system_context_joins_the_sections_present() {
    let mut sb = env_sandbox();
    sb.files.insert("/w/AGENTS.md".into(), "Use tabs.".into());
    sb.dirs.push("/w/.git".into());
    let config = SystemContextConfig {
      instructions: Some(InstructionsConfig::default()),
      environment: Some((
        EnvironmentConfig {
          git: false,
          timezone: true,
        },
        vec![],
      )),
      tool_guidance: Some(ToolGuidance {
        tools: vec!["Bash".into()],
        ..Default::default()
      }),
    };
    let ctx = run(build_system_context(&sb, &config)).unwrap();
    assert_eq!(
      ctx.instructions.as_deref(),
      Some("# Project Instructions\n<INSTRUCTIONS>\nUse tabs.\n</INSTRUCTIONS>")
    );
    let parts = [
      ctx.instructions.clone().unwrap(),
      ctx.environment.clone().unwrap(),
      ctx.tool_guidance.clone().unwrap(),
    ];
    assert_eq!(ctx.combined, parts.join("\n\n"));
    assert_eq!(ctx.instruction_sources.unwrap().len(), 1);
    assert_eq!(ctx.environment_context.unwrap().git_branch, None);
    let none = run(build_system_context(&sb, &SystemContextConfig::default())).unwrap();
    assert_eq!(none.combined, "");
    assert_eq!(
      (none.instructions, none.environment, none.tool_guidance),
      (None, None, None)
    );
  }
}
