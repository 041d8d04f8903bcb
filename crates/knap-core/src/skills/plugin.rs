//! Plugin packages: the manifest (four formats), its fields, `skills/`, `commands/`, and the parts
//! knap recognizes but does not run (MCP servers, hooks, agents).

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::{
  contained_file, display, frontmatter, io_message, json_quote, load_skill_directory, locale_order, valid_skill_name,
  Diagnostic, Skill, SKILL_DESCRIPTION_MAX_CHARS, SKILL_MAX_BYTES,
};

pub const AGENT_PLUGINS_SCHEMA: &str = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json";

const MANIFESTS: &[(&str, &str)] = &[
  ("plugin.json", "agent-plugins-v1"),
  (".plugin/plugin.json", "open-plugin"),
  (".claude-plugin/plugin.json", "claude-code"),
  (".cursor-plugin/plugin.json", "cursor"),
];
const FIELDS: &[&str] = &[
  "$schema",
  "name",
  "version",
  "description",
  "author",
  "homepage",
  "repository",
  "license",
  "keywords",
  "extensions",
];
/// Accepted by the compatibility formats, not loaded.
const COMPAT_FIELDS: &[&str] = &["agents", "commands", "hooks", "logo", "mcpServers", "skills"];

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Command {
  pub id: String,
  pub name: String,
  pub description: String,
  pub root: String,
  pub file: String,
  pub body: String,
  pub plugin: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plugin {
  pub root: String,
  pub format: &'static str,
  pub manifest: Value,
  pub skills: Vec<Skill>,
  pub commands: Vec<Command>,
  pub has_mcp: bool,
  pub has_hooks: bool,
  pub has_agents: bool,
}

impl Plugin {
  pub fn name(&self) -> &str {
    self.manifest.get("name").and_then(Value::as_str).unwrap_or("")
  }
}

/// The first manifest found under `root`, with its format.
pub fn manifest_path(root: &Path) -> Option<(PathBuf, &'static str)> {
  MANIFESTS
    .iter()
    .map(|(rel, format)| (root.join(rel), *format))
    .find(|(p, _)| fs::metadata(p).is_ok_and(|m| m.is_file()))
}

fn valid_plugin_name(name: &str) -> bool {
  let b = name.as_bytes();
  !b.is_empty()
    && b.len() <= 64
    && !name.contains("--")
    && !name.contains("..")
    && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'.'))
    && b[0].is_ascii_alphanumeric()
    && b[b.len() - 1].is_ascii_alphanumeric()
}

fn check_manifest(m: &Map<String, Value>, path: &Path, format: &str, diags: &mut Vec<Diagnostic>) -> Result<(), String> {
  let field = |f: &str| format!("cave_agent_plugin_field_invalid:{f}");
  let string = |k: &str| -> Result<(), String> {
    match m.get(k) {
      None | Some(Value::String(_)) => Ok(()),
      Some(_) => Err(field(k)),
    }
  };
  if format == "agent-plugins-v1" && m.get("$schema").and_then(Value::as_str) != Some(AGENT_PLUGINS_SCHEMA) {
    return Err(format!("cave_agent_plugin_schema_unsupported:{}", display(path)));
  }
  match m.get("name").and_then(Value::as_str) {
    Some(n) if valid_plugin_name(n) => {}
    _ => return Err(format!("cave_agent_plugin_name_invalid:{}", display(path))),
  }
  for k in ["$schema", "version", "description", "homepage", "license"] {
    string(k)?;
  }
  match m.get("repository") {
    None | Some(Value::String(_)) => {}
    Some(Value::Object(r)) if r.values().all(Value::is_string) => {}
    Some(_) => return Err(field("repository")),
  }
  match m.get("author") {
    None => {}
    Some(Value::Object(a)) => {
      for k in ["name", "email", "url"] {
        if a.get(k).is_some_and(|v| !v.is_string()) {
          return Err(field(&format!("author.{k}")));
        }
      }
    }
    Some(_) => return Err(field("author")),
  }
  match m.get("keywords") {
    None => {}
    Some(Value::Array(k)) if k.iter().all(Value::is_string) => {}
    Some(_) => return Err(field("keywords")),
  }
  if m.get("extensions").is_some_and(|e| !e.is_object()) {
    diags.push(Diagnostic::new(
      "agent_environment_unsupported_plugin_field",
      path,
      "ignored non-object plugin.json extensions field",
    ));
  }
  for k in m.keys() {
    let known = FIELDS.contains(&k.as_str()) || (format != "agent-plugins-v1" && COMPAT_FIELDS.contains(&k.as_str()));
    if !known {
      diags.push(Diagnostic::new(
        "agent_environment_unsupported_plugin_field",
        path,
        format!("ignored unknown plugin.json field {}", json_quote(k)),
      ));
    }
  }
  Ok(())
}

/// A plugin subdirectory's canonical path, if it exists and stays inside the plugin root.
fn contained_dir(root: &Path, name: &str) -> Result<Option<PathBuf>, String> {
  let path = root.join(name);
  if fs::symlink_metadata(&path).is_err() {
    return Ok(None);
  }
  let real = fs::canonicalize(&path).map_err(|e| io_message(&e, "realpath", &path))?;
  if !real.starts_with(root) {
    return Err(format!("cave_agent_package_path_escape:{}", display(&path)));
  }
  Ok(fs::metadata(&real).is_ok_and(|m| m.is_dir()).then_some(real))
}

fn load_commands(root: &Path, dir: &Path, plugin: &str, diags: &mut Vec<Diagnostic>) -> Vec<Command> {
  let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
  let mut files: Vec<(String, PathBuf)> = entries
    .flatten()
    .filter_map(|e| {
      let name = e.file_name().to_string_lossy().into_owned();
      let stem = name.strip_suffix(".md")?.to_string();
      Some((stem, e.path()))
    })
    .filter(|(_, p)| fs::metadata(p).is_ok_and(|m| m.is_file()))
    .collect();
  files.sort_by(|a, b| locale_order(&a.0, &b.0));
  let mut out = Vec::new();
  for (name, path) in files {
    let file = display(&path);
    let result = (|| {
      let real = contained_file(root, &path)?;
      let bytes = fs::read(&real).map_err(|e| io_message(&e, "open", &path))?;
      if bytes.is_empty() || bytes.len() > SKILL_MAX_BYTES {
        return Err(format!("cave_agent_plugin_command_size_invalid:{file}"));
      }
      if !valid_skill_name(&name) {
        return Err(format!("cave_agent_plugin_command_name_invalid:{file}"));
      }
      let text = String::from_utf8_lossy(&bytes).replace("\r\n", "\n");
      let fm = frontmatter(&text, &file)?;
      let description = match fm.get("description") {
        Some(Value::String(d)) if !d.is_empty() && d.chars().count() <= SKILL_DESCRIPTION_MAX_CHARS => d.clone(),
        _ => return Err(format!("cave_agent_plugin_command_description_invalid:{file}")),
      };
      Ok(Command {
        id: format!("{plugin}:{name}"),
        name: name.clone(),
        description,
        root: display(dir),
        file: file.clone(),
        body: text,
        plugin: plugin.to_string(),
      })
    })();
    match result {
      Ok(c) => out.push(c),
      Err(m) => diags.push(Diagnostic::new("agent_environment_invalid_command", &path, m)),
    }
  }
  out
}

/// `loadAgentPlugin(root)`: `None` when `root` has no manifest; errors in the manifest throw.
pub fn load_plugin(root: &Path) -> Result<(Option<Plugin>, Vec<Diagnostic>), String> {
  let Some((path, format)) = manifest_path(root) else {
    return Ok((None, Vec::new()));
  };
  let root = fs::canonicalize(root).map_err(|e| io_message(&e, "realpath", root))?;
  let text = fs::read_to_string(&path).map_err(|e| io_message(&e, "open", &path))?;
  let manifest: Value =
    serde_json::from_str(&text).map_err(|e| format!("cave_agent_plugin_json_invalid:{}:{e}", display(&path)))?;
  let Value::Object(map) = &manifest else {
    return Err(format!("cave_agent_plugin_manifest_invalid:{}", display(&path)));
  };
  let mut diags = Vec::new();
  check_manifest(map, &path, format, &mut diags)?;
  let name = map["name"].as_str().unwrap_or_default().to_string();

  let mut skills = Vec::new();
  match contained_dir(&root, "skills") {
    Ok(Some(dir)) => match load_skill_directory(&dir, Some(&name)) {
      Ok((found, d)) => {
        skills = found;
        diags.extend(d);
      }
      Err(m) => diags.push(Diagnostic::new("agent_environment_invalid_skill", &dir, m)),
    },
    Ok(None) => {}
    Err(m) => diags.push(Diagnostic::new("agent_environment_invalid_skill", root.join("skills"), m)),
  }
  let mut commands = Vec::new();
  match contained_dir(&root, "commands") {
    Ok(Some(dir)) => commands = load_commands(&root, &dir, &name, &mut diags),
    Ok(None) => {}
    Err(m) => diags.push(Diagnostic::new("agent_environment_invalid_command", root.join("commands"), m)),
  }
  let mcp = ["mcp.json", ".mcp.json"].iter().map(|f| root.join(f)).find(|p| fs::symlink_metadata(p).is_ok());
  if let Some(p) = &mcp {
    diags.push(Diagnostic::new(
      "agent_environment_unsupported_plugin_mcp",
      p,
      "ignored plugin MCP servers: knap does not start MCP servers from plugins",
    ));
  }
  let hooks = contained_dir(&root, "hooks")?;
  if let Some(p) = &hooks {
    diags.push(Diagnostic::new("agent_environment_unsupported_plugin_hooks", p, "ignored plugin hooks: they are not executed"));
  }
  let agents = contained_dir(&root, "agents")?;
  if let Some(p) = &agents {
    diags.push(Diagnostic::new("agent_environment_unsupported_plugin_agents", p, "ignored plugin agents: they are not loaded"));
  }
  Ok((
    Some(Plugin {
      root: display(&root),
      format,
      manifest,
      skills,
      commands,
      has_mcp: mcp.is_some(),
      has_hooks: hooks.is_some(),
      has_agents: agents.is_some(),
    }),
    diags,
  ))
}
