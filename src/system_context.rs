//! bashkit's system-context helpers (`knap_core::agent_tools::system_context`) for
//! `lib/ai-sdk/system-context.mjs`: the typed options and results, and the two pure formatters.
//! The sandbox-bound ones are methods of `NativeAgentTools` (`agent_tools.rs`), so knap's own
//! sandbox and a user's sandbox object go through the same core code.

use knap_core::agent_tools::system_context as core;
use knap_core::agent_tools::SandboxError;
use napi_derive::napi;

/// `InstructionDiscoveryConfig` (validated by the JS adapter).
#[napi(object)]
pub struct InstructionsOptions {
  pub cwd: Option<String>,
  pub filenames: Option<Vec<String>>,
  pub root_markers: Option<Vec<String>>,
  pub max_bytes: Option<f64>,
  pub global_path: Option<String>,
}

/// One `key: value` of a record whose order matters (`custom`, `hints`).
#[napi(object)]
pub struct ContextField {
  pub key: String,
  pub value: String,
}

/// `EnvironmentContextConfig`.
#[napi(object)]
pub struct EnvironmentOptions {
  pub git: Option<bool>,
  pub timezone: Option<bool>,
  pub custom: Option<Vec<ContextField>>,
}

/// `ToolGuidanceConfig`.
#[napi(object)]
pub struct ToolGuidanceOptions {
  pub tools: Vec<String>,
  pub hints: Option<Vec<ContextField>>,
  pub guidelines: Option<Vec<String>>,
}

/// `SystemContextConfig`: a section is built when its key is present.
#[napi(object)]
pub struct SystemContextOptions {
  pub instructions: Option<InstructionsOptions>,
  pub environment: Option<EnvironmentOptions>,
  pub tool_guidance: Option<ToolGuidanceOptions>,
}

#[napi(object)]
pub struct InstructionSourceResult {
  pub path: String,
  pub scope: String,
  pub bytes: f64,
  pub truncated: bool,
}

/// `DiscoveredInstructions`.
#[napi(object)]
pub struct InstructionsResult {
  pub text: String,
  pub sources: Vec<InstructionSourceResult>,
}

/// `EnvironmentContext`.
#[napi(object)]
pub struct EnvironmentResult {
  pub cwd: String,
  pub shell: String,
  pub platform: String,
  pub date: String,
  pub timezone: Option<String>,
  pub git_branch: Option<String>,
  pub git_status: Option<String>,
}

/// `SystemContext`, `meta` flattened.
#[napi(object)]
pub struct SystemContextResult {
  pub instructions: Option<String>,
  pub environment: Option<String>,
  pub tool_guidance: Option<String>,
  pub combined: String,
  pub instruction_sources: Option<Vec<InstructionSourceResult>>,
  pub environment_context: Option<EnvironmentResult>,
}

fn fields(v: Option<Vec<ContextField>>) -> Vec<(String, String)> {
  v.unwrap_or_default()
    .into_iter()
    .map(|f| (f.key, f.value))
    .collect()
}

pub(crate) fn instructions_config(o: InstructionsOptions) -> core::InstructionsConfig {
  core::InstructionsConfig {
    cwd: o.cwd,
    filenames: o.filenames,
    root_markers: o.root_markers,
    max_bytes: o
      .max_bytes
      .filter(|n| n.is_finite() && *n >= 0.0)
      .map(|n| n.floor() as usize),
    global_path: o.global_path,
  }
}

pub(crate) fn environment_config(o: &EnvironmentOptions) -> core::EnvironmentConfig {
  core::EnvironmentConfig {
    git: o.git != Some(false),
    timezone: o.timezone != Some(false),
  }
}

fn guidance_config(o: ToolGuidanceOptions) -> core::ToolGuidance {
  core::ToolGuidance {
    tools: o.tools,
    hints: fields(o.hints),
    guidelines: o.guidelines.unwrap_or_default(),
  }
}

pub(crate) fn system_config(o: SystemContextOptions) -> core::SystemContextConfig {
  core::SystemContextConfig {
    instructions: o.instructions.map(instructions_config),
    environment: o.environment.map(|e| (environment_config(&e), fields(e.custom))),
    tool_guidance: o.tool_guidance.map(guidance_config),
  }
}

fn source(s: core::InstructionSource) -> InstructionSourceResult {
  InstructionSourceResult {
    path: s.path,
    scope: s.scope.as_str().to_string(),
    bytes: s.bytes as f64,
    truncated: s.truncated,
  }
}

pub(crate) fn instructions_result(i: core::Instructions) -> InstructionsResult {
  InstructionsResult {
    text: i.text,
    sources: i.sources.into_iter().map(source).collect(),
  }
}

pub(crate) fn environment_result(e: core::EnvironmentContext) -> EnvironmentResult {
  EnvironmentResult {
    cwd: e.cwd,
    shell: e.shell,
    platform: e.platform,
    date: e.date,
    timezone: e.timezone,
    git_branch: e.git_branch,
    git_status: e.git_status,
  }
}

pub(crate) fn system_result(c: core::SystemContext) -> SystemContextResult {
  SystemContextResult {
    instructions: c.instructions,
    environment: c.environment,
    tool_guidance: c.tool_guidance,
    combined: c.combined,
    instruction_sources: c.instruction_sources.map(|v| v.into_iter().map(source).collect()),
    environment_context: c.environment_context.map(environment_result),
  }
}

/// A failed sandbox call, with the sandbox's own message (and code when it gave one).
pub(crate) fn sandbox_error(e: SandboxError) -> napi::Error {
  crate::async_error(e.code.as_deref().unwrap_or("cave_sandbox_failed"), &e.message)
}

/// bashkit's `formatEnvironment(env, custom)`.
#[napi]
pub fn bashkit_format_environment(env: EnvironmentResult, custom: Option<Vec<ContextField>>) -> String {
  let e = core::EnvironmentContext {
    cwd: env.cwd,
    shell: env.shell,
    platform: env.platform,
    date: env.date,
    timezone: env.timezone,
    git_branch: env.git_branch,
    git_status: env.git_status,
  };
  core::format_environment(&e, &fields(custom))
}

/// bashkit's `buildToolGuidance(config)`.
#[napi]
pub fn bashkit_tool_guidance(config: ToolGuidanceOptions) -> String {
  core::build_tool_guidance(&guidance_config(config))
}
