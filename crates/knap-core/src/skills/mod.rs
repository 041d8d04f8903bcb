//! Agent Skills and plugins: `SKILL.md` parsing, skill directories, plugin packages in the four
//! manifest formats, the environment discovery of `@caveman-ai/agent/plugins`, the prompt index
//! and invocation texts, and bashkit's lenient discovery and skill bundles. One implementation
//! for both JS surfaces (`knap/plugins`, `knap/ai-sdk`).

mod plugin;
mod render;
pub mod yaml;

use std::cmp::Ordering;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

pub use plugin::{load_plugin, Command, Plugin};
pub use render::{
  expand_slash_command, render_command_invocation, render_commands_index, render_skill_invocation,
  render_skills_index,
};

/// A SKILL.md is 1 … 1 MiB; a resource read through `load_skill` at most 4 MiB.
pub const SKILL_MAX_BYTES: usize = 1_048_576;
pub const SKILL_RESOURCE_MAX_BYTES: u64 = 4_194_304;
pub const SKILL_DESCRIPTION_MAX_CHARS: usize = 1_024;
pub const SKILL_COMPATIBILITY_MAX_CHARS: usize = 500;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Skill {
  pub id: String,
  pub name: String,
  pub description: String,
  pub root: String,
  pub file: String,
  pub body: String,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub plugin: Option<String>,
  /// Optional frontmatter fields (bashkit's `SkillMetadata` reads them).
  #[serde(skip)]
  pub extra: SkillExtra,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkillExtra {
  pub license: Option<String>,
  pub compatibility: Option<String>,
  pub allowed_tools: Option<String>,
  pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Diagnostic {
  pub code: &'static str,
  pub path: String,
  pub message: String,
}

impl Diagnostic {
  pub fn new(code: &'static str, path: impl AsRef<Path>, message: impl Into<String>) -> Self {
    Self {
      code,
      path: display(path.as_ref()),
      message: message.into(),
    }
  }
}

pub(crate) fn display(p: &Path) -> String {
  p.to_string_lossy().into_owned()
}

/// `^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$`.
pub fn valid_skill_name(name: &str) -> bool {
  let b = name.as_bytes();
  !b.is_empty()
    && b.len() <= 64
    && !name.contains("--")
    && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    && b[0] != b'-'
    && b[b.len() - 1] != b'-'
}

/// Splits `---\n<yaml>\n---(\n|$)<body>` (CRLF already normalized); `None` without frontmatter.
pub fn split_frontmatter(text: &str) -> Option<(&str, &str)> {
  if !text.starts_with("---\n") {
    return None;
  }
  let mut from = 3;
  while let Some(i) = text[from..].find("\n---") {
    let k = from + i;
    let end = k + 4;
    if k >= 3 && (end == text.len() || text.as_bytes()[end] == b'\n') {
      let yaml = if k > 4 { &text[4..k] } else { "" };
      let body = if end == text.len() { "" } else { &text[end + 1..] };
      return Some((yaml, body));
    }
    from = k + 1;
  }
  None
}

/// The frontmatter mapping of `text`, with the skill parser's errors.
pub(crate) fn frontmatter(text: &str, file: &str) -> Result<Map<String, Value>, String> {
  let Some((yaml_text, _)) = split_frontmatter(text) else {
    return Err(format!("cave_agent_skill_frontmatter_required:{file}"));
  };
  match yaml::parse(yaml_text) {
    Err(e) => Err(format!("cave_agent_skill_frontmatter_invalid:{file}:{e}")),
    Ok(Value::Object(map)) => Ok(map),
    Ok(_) => Err(format!("cave_agent_skill_frontmatter_object_required:{file}")),
  }
}

fn optional_string(fm: &Map<String, Value>, key: &str, file: &str) -> Result<Option<String>, String> {
  match fm.get(key) {
    None => Ok(None),
    Some(Value::String(s)) => Ok(Some(s.clone())),
    Some(_) => Err(format!("cave_agent_skill_{key}_invalid:{file}")),
  }
}

/// `parseAgentSkill(raw, {file, root, id?, plugin?})`: the reference's rules, in order.
pub fn parse_skill(raw: &str, file: &str, root: &str, id: Option<&str>, plugin: Option<&str>) -> Result<Skill, String> {
  if raw.is_empty() || raw.len() > SKILL_MAX_BYTES {
    return Err(format!("cave_agent_skill_size_invalid:{file}:{}", raw.len()));
  }
  let text = raw.replace("\r\n", "\n");
  let fm = frontmatter(&text, file)?;
  let name = match fm.get("name") {
    Some(Value::String(n)) if valid_skill_name(n) => n.clone(),
    _ => return Err(format!("cave_agent_skill_name_invalid:{file}")),
  };
  let dir = Path::new(file).parent().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned());
  if dir.as_deref() != Some(name.as_str()) {
    return Err(format!("cave_agent_skill_directory_mismatch:{file}:{name}"));
  }
  let description = match fm.get("description") {
    Some(Value::String(d)) if !d.is_empty() && d.chars().count() <= SKILL_DESCRIPTION_MAX_CHARS => d.clone(),
    _ => return Err(format!("cave_agent_skill_description_invalid:{file}")),
  };
  let compatibility = optional_string(&fm, "compatibility", file)?;
  if let Some(c) = &compatibility {
    if c.is_empty() || c.chars().count() > SKILL_COMPATIBILITY_MAX_CHARS {
      return Err(format!("cave_agent_skill_compatibility_invalid:{file}"));
    }
  }
  let license = optional_string(&fm, "license", file)?;
  let allowed_tools = optional_string(&fm, "allowed-tools", file)?;
  let metadata = match fm.get("metadata") {
    None => None,
    Some(Value::Object(m)) if m.values().all(Value::is_string) => Some(m.clone()),
    Some(_) => return Err(format!("cave_agent_skill_metadata_invalid:{file}")),
  };
  let id = id.map(str::to_string).unwrap_or_else(|| match plugin {
    Some(p) => format!("{p}:{name}"),
    None => name.clone(),
  });
  Ok(Skill {
    id,
    name,
    description,
    root: root.to_string(),
    file: file.to_string(),
    body: text,
    plugin: plugin.map(str::to_string),
    extra: SkillExtra {
      license,
      compatibility,
      allowed_tools,
      metadata,
    },
  })
}

/// `localeCompare` order for directory names: case-insensitive first, lowercase before uppercase.
pub(crate) fn locale_order(a: &str, b: &str) -> Ordering {
  a.to_lowercase().cmp(&b.to_lowercase()).then_with(|| b.cmp(a))
}

/// `locale_order` as a sort key (computed once per item, not per comparison).
pub(crate) fn locale_key(s: &str) -> (String, std::cmp::Reverse<String>) {
  (s.to_lowercase(), std::cmp::Reverse(s.to_string()))
}

/// Immediate subdirectories of `dir`, sorted (`localeCompare`).
pub(crate) fn subdirectories(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
  let mut out = Vec::new();
  for entry in fs::read_dir(dir)? {
    let entry = entry?;
    let path = entry.path();
    // The entry's own type needs no stat; only a symlink is followed to see what it names.
    let is_dir = match entry.file_type() {
      Ok(t) if t.is_symlink() => fs::metadata(&path).map(|m| m.is_dir()).unwrap_or(false),
      Ok(t) => t.is_dir(),
      Err(_) => fs::metadata(&path).map(|m| m.is_dir()).unwrap_or(false),
    };
    if is_dir {
      out.push((entry.file_name().to_string_lossy().into_owned(), path));
    }
  }
  out.sort_by_cached_key(|(name, _)| locale_key(name));
  Ok(out)
}

/// The canonical path of `path`, which must stay inside the canonical `root` and be a regular file.
pub(crate) fn contained_file(root: &Path, path: &Path) -> Result<PathBuf, String> {
  let real = fs::canonicalize(path).map_err(|e| io_message(&e, "realpath", path))?;
  if !real.starts_with(root) {
    return Err(format!("cave_agent_package_path_escape:{}", display(path)));
  }
  if !fs::metadata(&real).map(|m| m.is_file()).unwrap_or(false) {
    return Err(format!("cave_agent_regular_file_required:{}", display(path)));
  }
  Ok(real)
}

/// Node's wording for a filesystem error (`ENOENT: no such file or directory, open '<path>'`).
pub(crate) fn io_message(e: &std::io::Error, op: &str, path: &Path) -> String {
  let (code, text) = match e.kind() {
    std::io::ErrorKind::NotFound => ("ENOENT", "no such file or directory"),
    std::io::ErrorKind::PermissionDenied => ("EACCES", "permission denied"),
    _ => ("EIO", "i/o error"),
  };
  format!("{code}: {text}, {op} '{}'", display(path))
}

/// `loadAgentSkillDirectory(root, {plugin?})`: skills of `<root>/<name>/SKILL.md`; a bad skill is a
/// diagnostic, a root that is not a directory is an error, a missing root yields nothing.
pub fn load_skill_directory(root: &Path, plugin: Option<&str>) -> Result<(Vec<Skill>, Vec<Diagnostic>), String> {
  let meta = match fs::metadata(root) {
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
    Err(_) => return Err(format!("cave_agent_skills_directory_invalid:{}", display(root))),
    Ok(m) => m,
  };
  if !meta.is_dir() {
    return Err(format!("cave_agent_skills_directory_invalid:{}", display(root)));
  }
  let canonical = fs::canonicalize(root).map_err(|_| format!("cave_agent_skills_directory_invalid:{}", display(root)))?;
  let dirs = subdirectories(&canonical).map_err(|_| format!("cave_agent_skills_directory_invalid:{}", display(root)))?;
  let results = parallel_map(&dirs, |(_, dir)| load_one_skill(&canonical, dir, plugin));
  let mut skills = Vec::new();
  let mut diagnostics = Vec::new();
  for r in results.into_iter().flatten() {
    match r {
      Ok(s) => skills.push(s),
      Err(d) => diagnostics.push(d),
    }
  }
  Ok((skills, diagnostics))
}

fn load_one_skill(root: &Path, dir: &Path, plugin: Option<&str>) -> Option<Result<Skill, Diagnostic>> {
  let file = dir.join("SKILL.md");
  // A folder without a regular SKILL.md is skipped silently.
  let Ok(meta) = fs::symlink_metadata(&file) else {
    return None;
  };
  if !(meta.is_file() || meta.file_type().is_symlink()) {
    return None;
  }
  let invalid = |message: String| Diagnostic::new("agent_environment_invalid_skill", &file, message);
  // `dir` is an entry of the canonical root: when neither it nor SKILL.md is a symlink the path
  // is already canonical and inside the root, so the realpath walk is needed only for links.
  let plain = meta.is_file() && fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
  let real = if plain {
    file.clone()
  } else {
    match contained_file(root, &file) {
      Ok(r) => r,
      Err(m) => return Some(Err(invalid(m))),
    }
  };
  let raw = match fs::read(&real) {
    Ok(b) => b,
    Err(e) => return Some(Err(invalid(io_message(&e, "open", &file)))),
  };
  let text = String::from_utf8_lossy(&raw);
  let file_text = display(&file);
  Some(parse_skill(&text, &file_text, &display(dir), None, plugin).map_err(invalid))
}

/// Runs `f` over `items` on a few threads (skill folders are independent file reads).
pub(crate) fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
  let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
  if items.len() < 64 || threads < 2 {
    return items.iter().map(&f).collect();
  }
  let chunk = items.len().div_ceil(threads);
  std::thread::scope(|scope| {
    let handles: Vec<_> = items.chunks(chunk).map(|c| scope.spawn(|| c.iter().map(&f).collect::<Vec<R>>())).collect();
    handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
  })
}

/// `findAgentWorkspaceRoot(cwd)`: the nearest ancestor (cwd included) with a `.git` entry, else cwd.
pub fn find_workspace_root(cwd: &Path) -> PathBuf {
  let mut dir = Some(cwd);
  while let Some(d) = dir {
    if fs::symlink_metadata(d.join(".git")).is_ok() {
      return d.to_path_buf();
    }
    dir = d.parent();
  }
  cwd.to_path_buf()
}

#[derive(Debug, Clone, Default)]
pub struct EnvironmentOptions {
  pub cwd: PathBuf,
  pub home: PathBuf,
  pub skill_roots: Vec<PathBuf>,
  pub plugin_roots: Vec<PathBuf>,
  pub plugin_collections: Vec<PathBuf>,
  pub include_default_roots: bool,
  pub include_workspace_plugin: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
  pub cwd: String,
  pub workspace_root: String,
  pub skills: Vec<Skill>,
  pub commands: Vec<Command>,
  pub plugins: Vec<Plugin>,
  pub diagnostics: Vec<Diagnostic>,
}

/// `loadAgentEnvironment(options)`: skill roots by precedence, then plugins; never throws for a
/// bad skill or plugin. `cwd` must already be canonical.
pub fn load_environment(o: &EnvironmentOptions) -> Environment {
  let workspace = find_workspace_root(&o.cwd);
  let mut diagnostics = Vec::new();
  let mut skills: Vec<Skill> = Vec::new();
  let mut roots: Vec<PathBuf> = o.skill_roots.clone();
  if o.include_default_roots {
    roots.push(workspace.join(".agents").join("skills"));
    roots.push(o.home.join(".agents").join("skills"));
  }
  let mut seen = std::collections::HashSet::new();
  let mut add_skills = |found: Vec<Skill>, skills: &mut Vec<Skill>, diagnostics: &mut Vec<Diagnostic>| {
    for s in found {
      if !seen.insert(s.id.clone()) {
        diagnostics.push(Diagnostic::new(
          "agent_environment_duplicate_skill",
          &s.file,
          format!("ignored lower-precedence duplicate skill {}", json_quote(&s.id)),
        ));
      } else {
        skills.push(s);
      }
    }
  };
  for root in &roots {
    match load_skill_directory(root, None) {
      Ok((found, diags)) => {
        diagnostics.extend(diags);
        add_skills(found, &mut skills, &mut diagnostics);
      }
      Err(message) => diagnostics.push(Diagnostic::new("agent_environment_invalid_skill", root, message)),
    }
  }

  let mut plugin_roots: Vec<PathBuf> = o.plugin_roots.clone();
  if o.include_workspace_plugin && plugin::manifest_path(&o.cwd).is_some() {
    plugin_roots.push(o.cwd.clone());
  }
  let mut collections = o.plugin_collections.clone();
  if o.include_default_roots {
    collections.push(workspace.join(".agents").join("plugins"));
    collections.push(o.home.join(".agents").join("plugins"));
  }
  for c in &collections {
    match fs::metadata(c) {
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
      Ok(m) if m.is_dir() => match subdirectories(c) {
        Ok(dirs) => plugin_roots.extend(dirs.into_iter().map(|(_, p)| p)),
        Err(e) => diagnostics.push(Diagnostic::new("agent_environment_invalid_plugin", c, io_message(&e, "scandir", c))),
      },
      _ => diagnostics.push(Diagnostic::new(
        "agent_environment_invalid_plugin",
        c,
        format!("cave_agent_plugin_collection_invalid:{}", display(c)),
      )),
    }
  }
  let mut plugins: Vec<Plugin> = Vec::new();
  let mut commands: Vec<Command> = Vec::new();
  let mut plugin_skills = Vec::new();
  for root in &plugin_roots {
    match load_plugin(root) {
      Ok((None, _)) => {}
      Ok((Some(p), diags)) => {
        diagnostics.extend(diags);
        if plugins.iter().any(|q| q.name() == p.name()) {
          diagnostics.push(Diagnostic::new(
            "agent_environment_duplicate_plugin",
            &p.root,
            format!("ignored lower-precedence duplicate plugin {}", json_quote(p.name())),
          ));
          continue;
        }
        plugin_skills.extend(p.skills.iter().cloned());
        for c in &p.commands {
          if commands.iter().any(|k| k.id == c.id) {
            diagnostics.push(Diagnostic::new(
              "agent_environment_duplicate_command",
              &c.file,
              format!("ignored lower-precedence duplicate command {}", json_quote(&c.id)),
            ));
          } else {
            commands.push(c.clone());
          }
        }
        plugins.push(p);
      }
      Err(message) => diagnostics.push(Diagnostic::new("agent_environment_invalid_plugin", root, message)),
    }
  }
  add_skills(plugin_skills, &mut skills, &mut diagnostics);
  skills.sort_by_cached_key(|s| locale_key(&s.id));
  commands.sort_by(|a, b| locale_order(&a.id, &b.id));
  plugins.sort_by(|a, b| locale_order(a.name(), b.name()));
  Environment {
    cwd: display(&o.cwd),
    workspace_root: display(&workspace),
    skills,
    commands,
    plugins,
    diagnostics,
  }
}

pub(crate) fn json_quote(s: &str) -> String {
  Value::String(s.to_string()).to_string()
}

/// `readAgentSkillResource(skill, resource)`: a file inside the skill's root, verbatim.
pub fn read_skill_resource(skill_root: &Path, skill_id: &str, resource: &str) -> Result<String, String> {
  let bad = resource.is_empty()
    || resource.starts_with('/')
    || resource.starts_with('\\')
    || Path::new(resource).is_absolute()
    || resource.split(['/', '\\']).any(|seg| seg == "..");
  if bad {
    return Err(format!("cave_agent_skill_resource_path_invalid:{skill_id}"));
  }
  let root = fs::canonicalize(skill_root).map_err(|e| io_message(&e, "realpath", skill_root))?;
  let target = root.join(resource);
  let real = contained_file(&root, &target)?;
  let size = fs::metadata(&real).map(|m| m.len()).unwrap_or(0);
  if size > SKILL_RESOURCE_MAX_BYTES {
    return Err(format!("cave_agent_skill_resource_size_invalid:{skill_id}:{resource}"));
  }
  let bytes = fs::read(&real).map_err(|e| io_message(&e, "open", &target))?;
  Ok(String::from_utf8_lossy(&bytes).into_owned())
}

// ---- bashkit's skills API -------------------------------------------------------------------

/// bashkit's `discoverSkills`: the first skill of a name wins across `paths` (project before user);
/// unparseable skills are reported, a name that differs from its folder is kept with a warning.
pub fn discover_lenient(paths: &[PathBuf]) -> (Vec<Skill>, Vec<String>) {
  let mut skills: Vec<Skill> = Vec::new();
  let mut warnings = Vec::new();
  let mut names = std::collections::HashSet::new();
  for root in paths {
    let Ok(dirs) = subdirectories(root) else { continue };
    let found = parallel_map(&dirs, |(_, dir)| {
      let file = dir.join("SKILL.md");
      let raw = fs::read(&file).ok()?;
      let text = String::from_utf8_lossy(&raw);
      Some(parse_lenient(&text, &display(&file)))
    });
    for r in found.into_iter().flatten() {
      match r {
        Ok((skill, warning)) => {
          warnings.extend(warning);
          if names.insert(skill.name.clone()) {
            skills.push(skill);
          }
        }
        Err(e) => warnings.push(e),
      }
    }
  }
  (skills, warnings)
}

/// bashkit's `parseSkillMetadata(content, path)`: name and description are required, the name's
/// format is checked, the folder name need not match (a warning says so).
pub fn parse_lenient(text: &str, path: &str) -> Result<(Skill, Option<String>), String> {
  let text = text.replace("\r\n", "\n");
  let fm = frontmatter(&text, path).map_err(|e| {
    if e.starts_with("cave_agent_skill_frontmatter_required") {
      format!("No YAML frontmatter found in {path}")
    } else {
      format!("Invalid YAML frontmatter in {path}: {}", e.splitn(3, ':').nth(2).unwrap_or(&e))
    }
  })?;
  let scalar = |k: &str| match fm.get(k) {
    Some(Value::String(s)) => Some(s.clone()),
    Some(Value::Number(n)) => Some(n.to_string()),
    Some(Value::Bool(b)) => Some(b.to_string()),
    _ => None,
  };
  let name = scalar("name").filter(|s| !s.is_empty()).ok_or_else(|| format!("Missing or invalid 'name' field in {path}"))?;
  let description = scalar("description")
    .filter(|s| !s.is_empty())
    .ok_or_else(|| format!("Missing or invalid 'description' field in {path}"))?;
  if !valid_skill_name(&name) {
    return Err(format!(
      "Invalid 'name' format in {path}: must be 1-64 lowercase chars/hyphens, no start/end/consecutive hyphens"
    ));
  }
  let dir = Path::new(path).parent();
  let folder = dir.and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned());
  let warning = match &folder {
    Some(f) if *f != name => Some(format!("Skill name \"{name}\" does not match folder name \"{f}\" in {path}")),
    _ => None,
  };
  let metadata = match fm.get("metadata") {
    Some(Value::Object(m)) => Some(
      m.iter()
        .map(|(k, v)| (k.clone(), Value::String(v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))))
        .collect(),
    ),
    _ => None,
  };
  let skill = Skill {
    id: name.clone(),
    name,
    description,
    root: dir.map(display).unwrap_or_default(),
    file: path.to_string(),
    body: text.clone(),
    plugin: None,
    extra: SkillExtra {
      license: scalar("license"),
      compatibility: scalar("compatibility"),
      allowed_tools: match fm.get("allowed-tools") {
        Some(Value::Array(items)) => Some(items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" ")),
        _ => scalar("allowed-tools"),
      },
      metadata,
    },
  };
  Ok((skill, warning))
}

/// bashkit's `loadSkillBundle(dir)`: every file below `dir`, by relative `/` path, sorted.
pub fn load_bundle(dir: &Path) -> Result<Vec<(String, String)>, String> {
  let mut out = Vec::new();
  let mut stack = vec![dir.to_path_buf()];
  while let Some(d) = stack.pop() {
    let entries = fs::read_dir(&d).map_err(|e| io_message(&e, "scandir", &d))?;
    for entry in entries {
      let entry = entry.map_err(|e| io_message(&e, "scandir", &d))?;
      let path = entry.path();
      let ft = entry.file_type().map_err(|e| io_message(&e, "stat", &path))?;
      if ft.is_dir() {
        stack.push(path);
      } else if ft.is_file() {
        let bytes = fs::read(&path).map_err(|e| io_message(&e, "open", &path))?;
        let rel = path.strip_prefix(dir).unwrap_or(&path);
        let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        out.push((rel, String::from_utf8_lossy(&bytes).into_owned()));
      }
    }
  }
  out.sort();
  Ok(out)
}

#[cfg(test)]
mod tests;
