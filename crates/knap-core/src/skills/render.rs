//! The texts skills and plugin commands put in front of a model: the prompt indexes and the
//! explicit invocations (`/skill <id>`, `/<command>`).

use super::json_quote;

/// An index row: `(id, description)`.
pub type Entry<'a> = (&'a str, &'a str);

/// `renderAgentSkillsIndex(skills)`, verbatim (the second line names `load_skill` whatever the
/// tool is called, as the reference's does).
pub fn render_skills_index(skills: &[Entry]) -> String {
  let mut lines = vec![
    "Skills available to this agent. Load one only when its description matches the task.".to_string(),
    "Call load_skill({\"name\":\"<skill>\"}) for instructions. Use its resource argument for referenced files.".to_string(),
  ];
  lines.extend(skills.iter().map(|(id, d)| format!("- {id}: {d}")));
  lines.join("\n")
}

/// `renderAgentPluginCommandsIndex(commands)`.
pub fn render_commands_index(commands: &[Entry]) -> String {
  let mut lines =
    vec!["Plugin slash commands available to this agent. Commands activate only when explicitly invoked.".to_string()];
  lines.extend(commands.iter().map(|(id, d)| format!("- /{id}: {d}")));
  lines.join("\n")
}

/// `renderAgentSkillInvocation`: the skill's raw body for this turn, and the request.
pub fn render_skill_invocation(id: &str, body: &str, request: &str) -> String {
  let mut blocks = vec![
    format!("Apply explicitly invoked Agent Skill {}. Follow it for this turn.", json_quote(id)),
    format!("<agent-skill id={}>", json_quote(id)),
    body.to_string(),
    "</agent-skill>".to_string(),
  ];
  let request = request.trim();
  if !request.is_empty() {
    blocks.push(format!("User request:\n{request}"));
  }
  blocks.join("\n\n")
}

/// `$ARGUMENTS` → the trimmed request; `$1`…`$9` → whitespace-split arguments ("" when absent).
fn substitute_arguments(body: &str, request: &str) -> String {
  let args: Vec<&str> = request.split_whitespace().collect();
  let mut out = String::with_capacity(body.len());
  let mut rest = body;
  while let Some(i) = rest.find('$') {
    out.push_str(&rest[..i]);
    let tail = &rest[i + 1..];
    if let Some(after) = tail.strip_prefix("ARGUMENTS") {
      out.push_str(request);
      rest = after;
    } else if let Some(d) = tail.chars().next().filter(|c| ('1'..='9').contains(c)) {
      let n = d as usize - '1' as usize;
      out.push_str(args.get(n).copied().unwrap_or(""));
      rest = &tail[1..];
    } else {
      out.push('$');
      rest = tail;
    }
  }
  out.push_str(rest);
  out
}

/// `renderAgentPluginCommandInvocation`.
pub fn render_command_invocation(id: &str, body: &str, request: &str) -> String {
  let request = request.trim();
  let mut blocks = vec![
    format!("Execute explicitly invoked Agent Plugin command {}. Follow it for this turn.", json_quote(id)),
    format!("<agent-plugin-command id={}>", json_quote(id)),
    substitute_arguments(body, request),
    "</agent-plugin-command>".to_string(),
  ];
  if !request.is_empty() {
    blocks.push(format!("User arguments:\n{request}"));
  }
  blocks.join("\n\n")
}

/// `expandAgentEnvironmentSlashCommand(prompt, env)`; `skill(id)` / `command(id)` give a body.
pub fn expand_slash_command<'a>(
  prompt: &str,
  skill: impl Fn(&str) -> Option<&'a str>,
  command: impl Fn(&str) -> Option<&'a str>,
) -> Result<String, String> {
  let trimmed = prompt.trim();
  let Some(rest) = trimmed.strip_prefix('/') else {
    return Ok(prompt.to_string());
  };
  let (head, tail) = match rest.find(char::is_whitespace) {
    Some(i) => (&rest[..i], rest[i..].trim_start()),
    None => (rest, ""),
  };
  if head == "skill" {
    let (id, request) = match tail.find(char::is_whitespace) {
      Some(i) => (&tail[..i], tail[i..].trim_start()),
      None => (tail, ""),
    };
    if id.is_empty() {
      return Err("cave_agent_skill_name_required".into());
    }
    if let Some(body) = skill(id) {
      return Ok(render_skill_invocation(id, body, request));
    }
    if let Some(body) = command(id) {
      return Ok(render_command_invocation(id, body, request));
    }
    return Err(format!("cave_agent_skill_unknown:{id}"));
  }
  if let Some(body) = command(head) {
    return Ok(render_command_invocation(head, body, tail));
  }
  if let Some(body) = skill(head) {
    return Ok(render_skill_invocation(head, body, tail));
  }
  Ok(prompt.to_string())
}
