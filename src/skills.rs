//! Skills and plugins over `knap_core::skills`: file work runs on a blocking worker (the JS
//! functions are async); parsing and rendering are synchronous. Values cross as JSON text.

use std::path::PathBuf;

use knap_core::skills::{self as core, EnvironmentOptions, Skill};
use napi_derive::napi;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{async_error, ErrorCode};

fn code_of(message: &str) -> &str {
  message.split([':', ' ']).next().unwrap_or(message)
}

fn thrown(message: String) -> napi::Error<ErrorCode> {
  napi::Error::new(ErrorCode(code_of(&message).to_string()), message)
}

fn rejected(message: String) -> napi::Error {
  async_error(code_of(&message), &message)
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, String> + Send + 'static) -> napi::Result<T> {
  match tokio::task::spawn_blocking(f).await {
    Ok(r) => r.map_err(rejected),
    Err(e) => Err(rejected(format!("cave_agent_environment_failed:{e}"))),
  }
}

fn json_text<T: serde::Serialize>(v: &T) -> String {
  serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvOptions {
  cwd: String,
  home_dir: String,
  #[serde(default)]
  skill_roots: Vec<String>,
  #[serde(default)]
  plugin_roots: Vec<String>,
  #[serde(default)]
  plugin_collections: Vec<String>,
  include_default_roots: bool,
  include_workspace_plugin: bool,
}

/// `loadAgentEnvironment`: options as JSON (paths resolved by the caller), the environment as JSON.
#[napi]
pub async fn agent_environment_load(options_json: String) -> napi::Result<String> {
  blocking(move || {
    let o: EnvOptions = serde_json::from_str(&options_json).map_err(|e| format!("cave_agent_environment_options_invalid:{e}"))?;
    let cwd = std::fs::canonicalize(&o.cwd).map_err(|e| core_io(&e, &o.cwd))?;
    let env = core::load_environment(&EnvironmentOptions {
      cwd,
      home: PathBuf::from(o.home_dir),
      skill_roots: o.skill_roots.into_iter().map(PathBuf::from).collect(),
      plugin_roots: o.plugin_roots.into_iter().map(PathBuf::from).collect(),
      plugin_collections: o.plugin_collections.into_iter().map(PathBuf::from).collect(),
      include_default_roots: o.include_default_roots,
      include_workspace_plugin: o.include_workspace_plugin,
    });
    Ok(json_text(&env))
  })
  .await
}

fn core_io(e: &std::io::Error, path: &str) -> String {
  let kind = if e.kind() == std::io::ErrorKind::NotFound { "ENOENT: no such file or directory" } else { "EIO: i/o error" };
  format!("{kind}, realpath '{path}'")
}

#[napi]
pub async fn agent_workspace_root(cwd: String) -> napi::Result<String> {
  blocking(move || {
    let real = std::fs::canonicalize(&cwd).map_err(|e| core_io(&e, &cwd))?;
    Ok(core::find_workspace_root(&real).to_string_lossy().into_owned())
  })
  .await
}

#[napi]
pub async fn agent_skill_directory_load(root: String, plugin: Option<String>) -> napi::Result<String> {
  blocking(move || {
    let (skills, diagnostics) = core::load_skill_directory(std::path::Path::new(&root), plugin.as_deref())?;
    Ok(json_text(&json!({ "skills": skills, "diagnostics": diagnostics })))
  })
  .await
}

#[napi]
pub async fn agent_plugin_load(root: String) -> napi::Result<String> {
  blocking(move || {
    let (plugin, diagnostics) = core::load_plugin(std::path::Path::new(&root))?;
    Ok(json_text(&json!({ "plugin": plugin, "diagnostics": diagnostics })))
  })
  .await
}

#[napi]
pub async fn agent_skill_resource_read(skill_root: String, skill_id: String, resource: String) -> napi::Result<String> {
  blocking(move || core::read_skill_resource(std::path::Path::new(&skill_root), &skill_id, &resource)).await
}

/// `parseAgentSkill(raw, {file, root, id?, plugin?})` → the skill as JSON.
#[napi]
pub fn agent_skill_parse(
  raw: String,
  file: String,
  root: String,
  id: Option<String>,
  plugin: Option<String>,
) -> napi::Result<String, ErrorCode> {
  core::parse_skill(&raw, &file, &root, id.as_deref(), plugin.as_deref()).map(|s| json_text(&s)).map_err(thrown)
}

#[derive(Deserialize)]
struct Entry {
  id: String,
  description: String,
}

fn entries(json: &str) -> Vec<Entry> {
  serde_json::from_str(json).unwrap_or_default()
}

#[napi]
pub fn agent_skills_index(entries_json: String) -> String {
  let e = entries(&entries_json);
  core::render_skills_index(&e.iter().map(|x| (x.id.as_str(), x.description.as_str())).collect::<Vec<_>>())
}

#[napi]
pub fn agent_commands_index(entries_json: String) -> String {
  let e = entries(&entries_json);
  core::render_commands_index(&e.iter().map(|x| (x.id.as_str(), x.description.as_str())).collect::<Vec<_>>())
}

#[napi]
pub fn agent_skill_invocation(id: String, body: String, request: String) -> String {
  core::render_skill_invocation(&id, &body, &request)
}

#[napi]
pub fn agent_command_invocation(id: String, body: String, request: String) -> String {
  core::render_command_invocation(&id, &body, &request)
}

/// `expandAgentEnvironmentSlashCommand`: skills and commands as `{id: body}` JSON maps.
#[napi]
pub fn agent_slash_expand(prompt: String, skills_json: String, commands_json: String) -> napi::Result<String, ErrorCode> {
  let skills: serde_json::Map<String, Value> = serde_json::from_str(&skills_json).unwrap_or_default();
  let commands: serde_json::Map<String, Value> = serde_json::from_str(&commands_json).unwrap_or_default();
  core::expand_slash_command(&prompt, |id| skills.get(id).and_then(Value::as_str), |id| commands.get(id).and_then(Value::as_str))
    .map_err(thrown)
}

/// bashkit's `SkillMetadata` of a parsed skill.
fn metadata(s: &Skill) -> Value {
  let mut m = serde_json::Map::new();
  m.insert("name".into(), json!(s.name));
  m.insert("description".into(), json!(s.description));
  m.insert("path".into(), json!(s.file));
  if let Some(l) = &s.extra.license {
    m.insert("license".into(), json!(l));
  }
  if let Some(c) = &s.extra.compatibility {
    m.insert("compatibility".into(), json!(c));
  }
  if let Some(md) = &s.extra.metadata {
    m.insert("metadata".into(), Value::Object(md.clone()));
  }
  if let Some(t) = &s.extra.allowed_tools {
    m.insert("allowedTools".into(), json!(t.split_whitespace().collect::<Vec<_>>()));
  }
  Value::Object(m)
}

/// bashkit's `discoverSkills`: `{skills: SkillMetadata[], warnings: string[]}` as JSON.
#[napi]
pub async fn bashkit_discover_skills(paths: Vec<String>) -> napi::Result<String> {
  blocking(move || {
    let (skills, warnings) = core::discover_lenient(&paths.into_iter().map(PathBuf::from).collect::<Vec<_>>());
    Ok(json_text(&json!({ "skills": skills.iter().map(metadata).collect::<Vec<_>>(), "warnings": warnings })))
  })
  .await
}

/// bashkit's `parseSkillMetadata(content, path)` → `{skill, warning?}` as JSON.
#[napi]
pub fn bashkit_parse_skill(content: String, path: String) -> napi::Result<String, ErrorCode> {
  let (skill, warning) = core::parse_lenient(&content, &path).map_err(|m| napi::Error::new(ErrorCode("cave_skill_invalid".into()), m))?;
  Ok(json_text(&json!({ "skill": metadata(&skill), "warning": warning })))
}

/// bashkit's `loadSkillBundle(dir)` files as a `{path: text}` JSON object.
#[napi]
pub async fn bashkit_load_bundle(dir: String) -> napi::Result<String> {
  blocking(move || {
    let files = core::load_bundle(std::path::Path::new(&dir))?;
    Ok(json_text(&files.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<serde_json::Map<_, _>>()))
  })
  .await
}
