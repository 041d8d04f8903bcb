use std::fs;
use std::path::Path;

use super::*;

fn write(path: &Path, text: &str) {
  fs::create_dir_all(path.parent().unwrap()).unwrap();
  fs::write(path, text).unwrap();
}

fn skill_md(name: &str, description: &str) -> String {
  format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n")
}

#[test]
fn parse_rules_in_order() {
  let p = |raw: &str| parse_skill(raw, "/r/pdf/SKILL.md", "/r/pdf", None, None);
  assert_eq!(p("").unwrap_err(), "cave_agent_skill_size_invalid:/r/pdf/SKILL.md:0");
  assert_eq!(p("no").unwrap_err(), "cave_agent_skill_frontmatter_required:/r/pdf/SKILL.md");
  assert!(p("---\na: [\n---\n").unwrap_err().starts_with("cave_agent_skill_frontmatter_invalid:/r/pdf/SKILL.md:"));
  assert_eq!(p("---\n- a\n---\n").unwrap_err(), "cave_agent_skill_frontmatter_object_required:/r/pdf/SKILL.md");
  assert_eq!(p("---\nname: Pdf\n---\n").unwrap_err(), "cave_agent_skill_name_invalid:/r/pdf/SKILL.md");
  assert_eq!(p("---\nname: a--b\n---\n").unwrap_err(), "cave_agent_skill_name_invalid:/r/pdf/SKILL.md");
  assert_eq!(p("---\nname: doc\n---\n").unwrap_err(), "cave_agent_skill_directory_mismatch:/r/pdf/SKILL.md:doc");
  assert_eq!(p("---\nname: pdf\n---\n").unwrap_err(), "cave_agent_skill_description_invalid:/r/pdf/SKILL.md");
  assert_eq!(
    p("---\nname: pdf\ndescription: d\ncompatibility: 3\n---\n").unwrap_err(),
    "cave_agent_skill_compatibility_invalid:/r/pdf/SKILL.md"
  );
  assert_eq!(
    p("---\nname: pdf\ndescription: d\nallowed-tools: [a]\n---\n").unwrap_err(),
    "cave_agent_skill_allowed-tools_invalid:/r/pdf/SKILL.md"
  );
  assert_eq!(
    p("---\nname: pdf\ndescription: d\nmetadata:\n  n: 1\n---\n").unwrap_err(),
    "cave_agent_skill_metadata_invalid:/r/pdf/SKILL.md"
  );
  let ok = p("---\r\nname: pdf\r\ndescription: Read PDFs\r\nother: x\r\n---\r\nBody\r\n").unwrap();
  assert_eq!(ok.id, "pdf");
  assert_eq!(ok.body, "---\nname: pdf\ndescription: Read PDFs\nother: x\n---\nBody\n");
  let plugin = parse_skill(&skill_md("pdf", "d"), "/r/pdf/SKILL.md", "/r/pdf", None, Some("tools")).unwrap();
  assert_eq!(plugin.id, "tools:pdf");
}

#[test]
fn frontmatter_split() {
  assert_eq!(split_frontmatter("---\na: 1\n---"), Some(("a: 1", "")));
  assert_eq!(split_frontmatter("---\na: 1\n----\nb\n---\nbody"), Some(("a: 1\n----\nb", "body")));
  assert_eq!(split_frontmatter("---\n\n---\nx"), Some(("", "x")));
  assert_eq!(split_frontmatter("--\na"), None);
}

#[test]
fn environment_precedence_plugins_and_diagnostics() {
  let t = tempfile::tempdir().unwrap();
  let ws = fs::canonicalize(t.path()).unwrap();
  fs::create_dir(ws.join(".git")).unwrap();
  let cwd = ws.join("sub");
  fs::create_dir(&cwd).unwrap();
  let home = ws.join("home");
  write(&ws.join(".agents/skills/alpha/SKILL.md"), &skill_md("alpha", "workspace alpha"));
  write(&home.join(".agents/skills/alpha/SKILL.md"), &skill_md("alpha", "home alpha"));
  write(&home.join(".agents/skills/beta/SKILL.md"), &skill_md("beta", "home beta"));
  write(&ws.join(".agents/skills/broken/SKILL.md"), "---\nname: nope\n---\n");
  fs::create_dir_all(ws.join(".agents/skills/empty")).unwrap();
  let plugin = ws.join(".agents/plugins/kit");
  write(
    &plugin.join(".claude-plugin/plugin.json"),
    r#"{"name":"kit","version":"1.0.0","hooks":{},"color":"red"}"#,
  );
  write(&plugin.join("skills/alpha/SKILL.md"), &skill_md("alpha", "kit alpha"));
  write(&plugin.join("commands/review.md"), "---\ndescription: Review $1\n---\nReview $ARGUMENTS now ($1/$2)\n");
  write(&plugin.join("commands/Bad.md"), "---\ndescription: x\n---\n");
  write(&plugin.join("mcp.json"), "{}");
  let env = load_environment(&EnvironmentOptions {
    cwd: cwd.clone(),
    home,
    include_default_roots: true,
    include_workspace_plugin: true,
    ..Default::default()
  });
  assert_eq!(env.workspace_root, display(&ws));
  let ids: Vec<(&str, &str)> = env.skills.iter().map(|s| (s.id.as_str(), s.description.as_str())).collect();
  assert_eq!(ids, vec![("alpha", "workspace alpha"), ("beta", "home beta"), ("kit:alpha", "kit alpha")]);
  assert_eq!(env.commands.len(), 1);
  assert_eq!(env.commands[0].id, "kit:review");
  assert_eq!(env.plugins[0].format, "claude-code");
  assert!(env.plugins[0].has_mcp);
  let codes: Vec<&str> = env.diagnostics.iter().map(|d| d.code).collect();
  assert!(codes.contains(&"agent_environment_invalid_skill"), "{codes:?}");
  assert!(codes.contains(&"agent_environment_duplicate_skill"));
  assert!(codes.contains(&"agent_environment_unsupported_plugin_field"));
  assert!(codes.contains(&"agent_environment_invalid_command"));
  assert!(codes.contains(&"agent_environment_unsupported_plugin_mcp"));
  let field = env.diagnostics.iter().find(|d| d.code == "agent_environment_unsupported_plugin_field").unwrap();
  assert_eq!(field.message, "ignored unknown plugin.json field \"color\"");

  let body = &env.commands[0].body;
  let text = render_command_invocation("kit:review", body, "  main.rs  ");
  assert!(text.contains("Review main.rs now (main.rs/)"), "{text}");
  assert!(text.ends_with("User arguments:\nmain.rs"));
}

#[test]
fn plugin_manifest_rules() {
  let t = tempfile::tempdir().unwrap();
  let root = fs::canonicalize(t.path()).unwrap();
  write(&root.join("plugin.json"), r#"{"name":"p"}"#);
  assert!(load_plugin(&root).unwrap_err().starts_with("cave_agent_plugin_schema_unsupported:"));
  write(&root.join("plugin.json"), &format!(r#"{{"$schema":"{}","name":"p","author":{{"email":3}}}}"#, plugin::AGENT_PLUGINS_SCHEMA));
  assert_eq!(load_plugin(&root).unwrap_err(), "cave_agent_plugin_field_invalid:author.email");
  write(&root.join("plugin.json"), &format!(r#"{{"$schema":"{}","name":"Bad"}}"#, plugin::AGENT_PLUGINS_SCHEMA));
  assert!(load_plugin(&root).unwrap_err().starts_with("cave_agent_plugin_name_invalid:"));
  write(&root.join("plugin.json"), "[1]");
  assert!(load_plugin(&root).unwrap_err().starts_with("cave_agent_plugin_manifest_invalid:"));
  write(&root.join("plugin.json"), "{");
  assert!(load_plugin(&root).unwrap_err().starts_with("cave_agent_plugin_json_invalid:"));
  let none = tempfile::tempdir().unwrap();
  assert!(load_plugin(none.path()).unwrap().0.is_none());
}

#[test]
fn resources_stay_inside_the_skill() {
  let t = tempfile::tempdir().unwrap();
  let root = fs::canonicalize(t.path()).unwrap().join("s");
  write(&root.join("SKILL.md"), &skill_md("s", "d"));
  write(&root.join("ref/notes.md"), "notes");
  write(&root.parent().unwrap().join("secret"), "x");
  std::os::unix::fs::symlink(root.parent().unwrap().join("secret"), root.join("link")).unwrap();
  assert_eq!(read_skill_resource(&root, "s", "ref/notes.md").unwrap(), "notes");
  assert_eq!(read_skill_resource(&root, "s", "../secret").unwrap_err(), "cave_agent_skill_resource_path_invalid:s");
  assert_eq!(read_skill_resource(&root, "s", "/etc/passwd").unwrap_err(), "cave_agent_skill_resource_path_invalid:s");
  assert!(read_skill_resource(&root, "s", "link").unwrap_err().starts_with("cave_agent_package_path_escape:"));
  assert!(read_skill_resource(&root, "s", "ref").unwrap_err().starts_with("cave_agent_regular_file_required:"));
  assert!(read_skill_resource(&root, "s", "missing.md").unwrap_err().starts_with("ENOENT: no such file or directory"));
}

#[test]
fn slash_commands_and_indexes() {
  let skill = |id: &str| (id == "pdf").then_some("SKILL BODY");
  let command = |id: &str| (id == "kit:review").then_some("do $ARGUMENTS");
  assert_eq!(expand_slash_command("hello", skill, command).unwrap(), "hello");
  assert_eq!(expand_slash_command("  /nothing here ", skill, command).unwrap(), "  /nothing here ");
  assert_eq!(expand_slash_command("/skill", skill, command).unwrap_err(), "cave_agent_skill_name_required");
  assert_eq!(expand_slash_command("/skill zip x", skill, command).unwrap_err(), "cave_agent_skill_unknown:zip");
  assert_eq!(
    expand_slash_command("/skill pdf  read a.pdf ", skill, command).unwrap(),
    "Apply explicitly invoked Agent Skill \"pdf\". Follow it for this turn.\n\n<agent-skill id=\"pdf\">\n\nSKILL BODY\n\n</agent-skill>\n\nUser request:\nread a.pdf"
  );
  assert!(expand_slash_command("/kit:review x", skill, command).unwrap().contains("do x"));
  assert_eq!(
    render_skills_index(&[("pdf", "Read PDFs")]),
    "Skills available to this agent. Load one only when its description matches the task.\nCall load_skill({\"name\":\"<skill>\"}) for instructions. Use its resource argument for referenced files.\n- pdf: Read PDFs"
  );
  assert_eq!(
    render_commands_index(&[("kit:review", "Review")]),
    "Plugin slash commands available to this agent. Commands activate only when explicitly invoked.\n- /kit:review: Review"
  );
}

#[test]
fn bashkit_discovery_is_lenient() {
  let t = tempfile::tempdir().unwrap();
  let root = fs::canonicalize(t.path()).unwrap();
  write(&root.join("a/one/SKILL.md"), &skill_md("one", "first"));
  write(&root.join("b/one/SKILL.md"), &skill_md("one", "second"));
  write(&root.join("b/folder/SKILL.md"), &skill_md("other", "renamed"));
  write(&root.join("b/bad/SKILL.md"), "nope");
  let (skills, warnings) = discover_lenient(&[root.join("a"), root.join("b")]);
  let names: Vec<(&str, &str)> = skills.iter().map(|s| (s.name.as_str(), s.description.as_str())).collect();
  assert_eq!(names, vec![("one", "first"), ("other", "renamed")]);
  assert!(warnings.iter().any(|w| w.starts_with("No YAML frontmatter found in")));
  assert!(warnings.iter().any(|w| w.contains("does not match folder name \"folder\"")));
  let bundle = load_bundle(&root.join("a/one")).unwrap();
  assert_eq!(bundle, vec![("SKILL.md".to_string(), skill_md("one", "first"))]);
}

#[test]
fn symlinked_skills_are_read_only_inside_the_root() {
  let t = tempfile::tempdir().unwrap();
  let base = fs::canonicalize(t.path()).unwrap();
  let root = base.join("skills");
  write(&root.join("plain/SKILL.md"), &skill_md("plain", "a plain folder"));
  write(&root.join("inside-target/SKILL.md"), &skill_md("inside-target", "the target of a link"));
  write(&root.join("file-link.md"), &skill_md("file-link", "a linked file inside the root"));
  fs::create_dir_all(root.join("file-link")).unwrap();
  std::os::unix::fs::symlink(root.join("file-link.md"), root.join("file-link/SKILL.md")).unwrap();
  write(&base.join("outside/SKILL.md"), &skill_md("dir-link", "outside the root"));
  std::os::unix::fs::symlink(base.join("outside"), root.join("dir-link")).unwrap();
  fs::create_dir_all(root.join("escaping-file")).unwrap();
  std::os::unix::fs::symlink(base.join("outside/SKILL.md"), root.join("escaping-file/SKILL.md")).unwrap();
  let (skills, diagnostics) = load_skill_directory(&root, None).unwrap();
  let ids: Vec<&str> = skills.iter().map(|s| s.id.as_str()).collect();
  assert_eq!(ids, ["file-link", "inside-target", "plain"], "links that stay inside are read");
  let mut escapes: Vec<String> = diagnostics.iter().map(|d| d.message.clone()).collect();
  escapes.sort();
  assert_eq!(
    escapes,
    [
      format!("cave_agent_package_path_escape:{}", root.join("dir-link/SKILL.md").display()),
      format!("cave_agent_package_path_escape:{}", root.join("escaping-file/SKILL.md").display()),
    ]
  );
}
