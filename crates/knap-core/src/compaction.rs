//! Compaction: the one engine behind `budget.onExhausted: "compact"` (the kernel's ladder lives
//! in `kernel/compact.rs` and uses the planning functions here), `@caveman-ai/agent/compaction`'s
//! summary helpers, and bashkit's `compactConversation` (split point and summarizer prompt).
//!
//! The reference's summary schema, citation text and summarization instruction were not read
//! (reference notes §6, "not read"); knap's are documented here and in docs: a summary is one
//! JSON document with `schema_version` = `SUMMARY_SCHEMA_VERSION` (2).

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::canonical::sha256_hex;
use crate::code::{Code, Error};
use crate::durable::canonical::canonical_json;
use crate::kernel::message::{Message, Part, TextPart, UserContent, UserMessage};
use crate::kernel::spec::ModelRef;
use crate::limits::{
  BUDGET_FRAMING_TOKENS_PER_MESSAGE, CONTEXT_SUMMARY_MAX_ANCHORS, CONTEXT_SUMMARY_MAX_BYTES, SUMMARY_SCHEMA_VERSION,
};

// ---------------------------------------------------------------------------------------------
// Options

/// How the ladder replaces history it cannot merely evict: one summarizer call (the default), or
/// the rollover to a new context seeded by the user's `newContext` callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
  #[default]
  Summarize,
  NewContext,
}

impl Mode {
  fn is_summarize(&self) -> bool {
    *self == Mode::Summarize
  }
}

/// `RunBudget.compaction` with its defaults filled in (`normalizeCompaction`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
  pub max_compactions: u64,
  pub keep_recent_tokens: u64,
  pub summary_max_tokens: u64,
  pub min_yield_tokens: u64,
  pub headroom_calls: u64,
  pub pinned_user_tokens: u64,
  pub preserve_first_user_message: bool,
  /// The model the summarizer call goes to when its window holds the history (else the working
  /// model). The JS layer resolves the user's `"provider/id"` or model object to a handle; it is
  /// written as `"provider/id"` (a durable run's budget digest names it, not the handle).
  #[serde(skip_serializing_if = "Option::is_none", serialize_with = "model_name")]
  pub summarizer_model: Option<ModelRef>,
  /// `"new-context"` needs the run's `newContext` callback (the JS layer keeps the function and
  /// tells the core it is there).
  #[serde(skip_serializing_if = "Mode::is_summarize")]
  pub mode: Mode,
}

fn model_name<S: serde::Serializer>(m: &Option<ModelRef>, s: S) -> Result<S::Ok, S::Error> {
  match m {
    Some(m) => s.serialize_str(&format!("{}/{}", m.provider, m.id)),
    None => s.serialize_none(),
  }
}

impl Default for Compaction {
  fn default() -> Self {
    Self {
      max_compactions: 1,
      keep_recent_tokens: 8_000,
      summary_max_tokens: 2_048,
      min_yield_tokens: 20_000,
      headroom_calls: 3,
      pinned_user_tokens: 20_000,
      preserve_first_user_message: true,
      summarizer_model: None,
      mode: Mode::Summarize,
    }
  }
}

fn option_invalid(key: &str, why: &str) -> Error {
  Error::new(
    Code::CompactionOptionInvalid,
    format!("cave_compaction_option_invalid:{key}: {why}"),
  )
}

const OPTION_KEYS: &[&str] = &[
  "maxCompactions",
  "keepRecentTokens",
  "summaryMaxTokens",
  "minYieldTokens",
  "headroomCalls",
  "pinnedUserTokens",
  "preserveFirstUserMessage",
  "summarizerModel",
  "mode",
  "newContext",
];

/// Normalizes `RunBudget.compaction`. Any non-positive or non-integer count, a non-boolean flag or
/// an unknown key is `cave_compaction_option_invalid:<key>`. `summarizerModel` arrives resolved
/// (`{key, provider, id, contextWindow?, maxTokens?}`, from the JS layer) and `newContext` as
/// `true` (the callback stays in JS); `mode: "new-context"` and `newContext` go together.
pub fn normalize(options: Option<&Value>) -> Result<Compaction, Error> {
  let mut out = Compaction::default();
  let Some(options) = options else {
    return Ok(out);
  };
  let map = match options {
    Value::Null => return Ok(out),
    Value::Object(m) => m,
    _ => return Err(Error::new(Code::CompactionOptionInvalid, "cave_compaction_option_invalid: budget.compaction must be an object")),
  };
  let mut new_context = false;
  for (key, value) in map {
    if value.is_null() {
      continue;
    }
    match key.as_str() {
      "preserveFirstUserMessage" => {
        out.preserve_first_user_message = value
          .as_bool()
          .ok_or_else(|| option_invalid(key, "must be a boolean"))?;
        continue;
      }
      "summarizerModel" => {
        let m: ModelRef = serde_json::from_value(value.clone())
          .map_err(|_| option_invalid(key, "must be a \"provider/id\" string or a model object"))?;
        out.summarizer_model = Some(m);
        continue;
      }
      "mode" => {
        out.mode = match value.as_str() {
          Some("summarize") => Mode::Summarize,
          Some("new-context") => Mode::NewContext,
          _ => return Err(option_invalid(key, &format!("must be \"summarize\" or \"new-context\", got {value}"))),
        };
        continue;
      }
      "newContext" => {
        new_context = value
          .as_bool()
          .ok_or_else(|| option_invalid(key, "must be a function ({messages, generation}) => seed string"))?;
        continue;
      }
      _ => {}
    }
    let slot = match key.as_str() {
      "maxCompactions" => &mut out.max_compactions,
      "keepRecentTokens" => &mut out.keep_recent_tokens,
      "summaryMaxTokens" => &mut out.summary_max_tokens,
      "minYieldTokens" => &mut out.min_yield_tokens,
      "headroomCalls" => &mut out.headroom_calls,
      "pinnedUserTokens" => &mut out.pinned_user_tokens,
      _ => {
        let why = "is not a compaction option (maxCompactions, keepRecentTokens, summaryMaxTokens, minYieldTokens, headroomCalls, pinnedUserTokens, preserveFirstUserMessage, summarizerModel, mode, newContext)";
        let hint = crate::suggest::did_you_mean(key, OPTION_KEYS.iter().copied());
        let why = if hint.is_empty() { why.to_string() } else { format!("{why}\nhint: {}", hint.trim_end()) };
        return Err(option_invalid(key, &why));
      }
    };
    let n = value.as_f64().unwrap_or(f64::NAN);
    if !(n.is_finite() && n.fract() == 0.0 && n >= 1.0 && n <= crate::limits::MAX_SAFE_INTEGER) {
      return Err(option_invalid(key, "must be a positive integer"));
    }
    *slot = n as u64;
  }
  // Neither half of the rollover is ignored without the other.
  match (out.mode, new_context) {
    (Mode::NewContext, false) => Err(option_invalid(
      "newContext",
      "mode \"new-context\" needs a newContext({messages, generation}) callback that persists the window and resolves to the seed of the new context",
    )),
    (Mode::Summarize, true) => Err(option_invalid(
      "mode",
      "newContext is called only with mode \"new-context\" (set mode: \"new-context\", or leave newContext out)",
    )),
    _ => Ok(out),
  }
}

// ---------------------------------------------------------------------------------------------
// The summary document

/// What an anchor names: facts a later summary must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnchorKind {
  File,
  Identifier,
  Command,
  Error,
  Url,
  Fact,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextAnchor {
  pub kind: AnchorKind,
  pub value: String,
}

/// knap's context summary (schema_version 2): what the model needs to continue without the
/// history it replaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSummary {
  pub schema_version: u64,
  pub goal: String,
  pub state: String,
  #[serde(default)]
  pub decisions: Vec<String>,
  #[serde(default)]
  pub open_items: Vec<String>,
  #[serde(default)]
  pub anchors: Vec<ContextAnchor>,
}

fn summary_invalid(why: impl std::fmt::Display) -> Error {
  Error::coded(Code::ContextSummaryInvalid, why)
}

/// Parses a summarizer's reply: one JSON document (a fenced ```json block is accepted, the
/// way models often answer), `schema_version` 2, known keys only, bounded.
pub fn parse_summary(text: &str) -> Result<ContextSummary, Error> {
  if text.len() > CONTEXT_SUMMARY_MAX_BYTES {
    return Err(summary_invalid(format!("summary is {} bytes, over {CONTEXT_SUMMARY_MAX_BYTES}", text.len())));
  }
  let mut body = text.trim();
  if let Some(rest) = body.strip_prefix("```") {
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    body = rest.strip_suffix("```").unwrap_or(rest).trim();
  }
  let value: Value = serde_json::from_str(body).map_err(|e| summary_invalid(format!("not one JSON document: {e}")))?;
  let version = value.get("schema_version").and_then(Value::as_u64);
  if version != Some(SUMMARY_SCHEMA_VERSION) {
    return Err(summary_invalid(format!(
      "schema_version must be {SUMMARY_SCHEMA_VERSION}, got {}",
      value.get("schema_version").map_or("nothing".into(), Value::to_string)
    )));
  }
  let s: ContextSummary = serde_json::from_value(value).map_err(|e| summary_invalid(e))?;
  if s.goal.trim().is_empty() {
    return Err(summary_invalid("goal must not be blank"));
  }
  if s.anchors.len() > CONTEXT_SUMMARY_MAX_ANCHORS {
    return Err(summary_invalid(format!("{} anchors, over {CONTEXT_SUMMARY_MAX_ANCHORS}", s.anchors.len())));
  }
  Ok(s)
}

/// `validateContextSummaryTransition(previous, next)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryValidation {
  pub ok: bool,
  /// Anchors of the previous summary the next one lost.
  pub missing_anchors: Vec<ContextAnchor>,
  pub errors: Vec<String>,
}

/// A later summary must keep every anchor of the one it replaces (facts do not silently fall out
/// of the context across compactions) and must not be empty.
pub fn validate_transition(previous: Option<&ContextSummary>, next: &ContextSummary) -> SummaryValidation {
  let mut errors = Vec::new();
  if next.schema_version != SUMMARY_SCHEMA_VERSION {
    errors.push(format!("schema_version must be {SUMMARY_SCHEMA_VERSION}"));
  }
  if next.goal.trim().is_empty() {
    errors.push("goal must not be blank".into());
  }
  let missing_anchors: Vec<ContextAnchor> = previous
    .map(|p| p.anchors.iter().filter(|a| !next.anchors.contains(a)).cloned().collect())
    .unwrap_or_default();
  if !missing_anchors.is_empty() {
    errors.push(format!("{} anchor(s) of the previous summary are missing", missing_anchors.len()));
  }
  SummaryValidation {
    ok: errors.is_empty(),
    missing_anchors,
    errors,
  }
}

pub const SUMMARY_OPEN: &str = "<cave-context-summary>";
pub const SUMMARY_CLOSE: &str = "</cave-context-summary>";

/// The user message text that stands for the summarized history.
pub fn render_summary(summary: &ContextSummary) -> String {
  let json = serde_json::to_string(summary).unwrap_or_default();
  format!("{SUMMARY_OPEN}\n{json}\n{SUMMARY_CLOSE}")
}

/// The summary inside a rendered `<cave-context-summary>` text, if it is one.
pub fn summary_in(text: &str) -> Option<ContextSummary> {
  let body = text.strip_prefix(SUMMARY_OPEN)?.strip_suffix(SUMMARY_CLOSE)?;
  parse_summary(body).ok()
}

/// One message the summary will replace, as the instruction lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummarySource {
  /// `message.<index>` in the context being compacted.
  pub id: String,
  pub role: String,
  /// sha256 of the message's canonical JSON (the receipt's `elidedSegmentDigests`).
  pub sha256: String,
}

/// `contextSummarySources(messages)`: every message but the pinned user intents, in order.
pub fn sources(messages: &[Message], pinned: &[usize]) -> Vec<SummarySource> {
  messages
    .iter()
    .enumerate()
    .filter(|(i, _)| !pinned.contains(i))
    .map(|(i, m)| SummarySource {
      id: format!("message.{i}"),
      role: m.role().to_string(),
      sha256: message_digest(m),
    })
    .collect()
}

/// The final user message of the summarizer call.
pub fn summarization_instruction(previous: Option<&ContextSummary>, sources: &[SummarySource]) -> String {
  let previous = previous
    .map(|p| serde_json::to_string(p).unwrap_or_default())
    .unwrap_or_else(|| "none".into());
  let listed: Vec<String> = sources
    .iter()
    .map(|s| format!("- {} {} sha256:{}", s.id, s.role, s.sha256))
    .collect();
  format!(
    "The conversation above is being compacted: everything except the pinned user requests will be replaced by your summary. \
Reply with exactly one JSON document and no other prose, of this shape:\n\
{{\"schema_version\":{SUMMARY_SCHEMA_VERSION},\"goal\":string,\"state\":string,\"decisions\":[string],\"open_items\":[string],\"anchors\":[{{\"kind\":\"file\"|\"identifier\"|\"command\"|\"error\"|\"url\"|\"fact\",\"value\":string}}]}}\n\
goal: what the user asked for. state: where the work stands. decisions: choices made and why. open_items: what is left. \
anchors: exact file paths, names, commands, errors, URLs and values that must not be lost. Keep every anchor of the previous summary.\n\
<previous-summary>\n{previous}\n</previous-summary>\n<sources>\n{}\n</sources>",
    listed.join("\n")
  )
}

// ---------------------------------------------------------------------------------------------
// Planning over the kernel's transcript

/// sha256 of a message's canonical JSON.
pub fn message_digest(m: &Message) -> String {
  let v = serde_json::to_value(m).unwrap_or(Value::Null);
  sha256_hex(canonical_json(&v).unwrap_or_default().as_bytes())
}

/// A message's share of the budget's input ceiling: its JSON bytes / 4, plus per-message framing
/// (the same arithmetic as `Meter::input_ceiling`, so planned and metered sizes agree).
pub fn message_tokens(m: &Message) -> u64 {
  (m.json_len() as u64).div_ceil(4) + BUDGET_FRAMING_TOKENS_PER_MESSAGE
}

fn is_user_intent(m: &Message) -> bool {
  matches!(m, Message::User(_))
}

/// Where the verbatim recent tail starts and which user messages stay pinned at the head.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
  pub tail_start: usize,
  /// Indices of pinned user-intent messages (all before `tail_start`).
  pub pinned: Vec<usize>,
  /// `runtime.user_intent.<i>`, `i` counting user messages from the start of the context.
  pub pinned_ids: Vec<String>,
}

/// The tail keeps the newest messages within `keep_recent_tokens`, always at least the last
/// assistant turn with its tool results, and never starts on a tool result (a call and its result
/// stay together). The head's user messages are pinned: the first one when
/// `preserve_first_user_message`, then later ones while they fit `pinned_user_tokens`.
pub fn plan(messages: &[Message], options: &Compaction) -> Plan {
  let last_assistant = messages
    .iter()
    .rposition(|m| matches!(m, Message::Assistant(_)))
    .unwrap_or(messages.len());
  let mut tail_start = messages.len();
  let mut tail_tokens = 0;
  while tail_start > 0 {
    let t = message_tokens(&messages[tail_start - 1]);
    if tail_start <= last_assistant && tail_tokens + t > options.keep_recent_tokens {
      break;
    }
    tail_tokens += t;
    tail_start -= 1;
  }
  while tail_start > 0 && matches!(messages[tail_start], Message::ToolResult(_)) {
    tail_start -= 1;
  }
  let (pinned, pinned_ids) = pins(messages, tail_start, options);
  Plan {
    tail_start,
    pinned,
    pinned_ids,
  }
}

/// The user messages before `end` that stay: the first one when `preserve_first_user_message`,
/// then later ones while they fit `pinned_user_tokens`. Indices, and `runtime.user_intent.<i>`
/// (`i` counting user messages from the start of the context).
pub fn pins(messages: &[Message], end: usize, options: &Compaction) -> (Vec<usize>, Vec<String>) {
  let mut pinned = Vec::new();
  let mut pinned_ids = Vec::new();
  let mut pinned_tokens = 0;
  let mut user_index = 0;
  for (i, m) in messages[..end].iter().enumerate() {
    if !is_user_intent(m) {
      continue;
    }
    let t = message_tokens(m);
    let first = user_index == 0 && options.preserve_first_user_message;
    if first || pinned_tokens + t <= options.pinned_user_tokens {
      pinned_tokens += t;
      pinned.push(i);
      pinned_ids.push(format!("runtime.user_intent.{user_index}"));
    }
    user_index += 1;
  }
  (pinned, pinned_ids)
}

/// The rollover's context: the pinned user messages (over the whole window: a new context keeps
/// no tail), then the seed the `newContext` callback returned, verbatim, as one user message.
pub fn rolled_over(messages: &[Message], pinned: &[usize], seed: &str, timestamp: serde_json::Number) -> Vec<Message> {
  let mut out: Vec<Message> = pinned.iter().map(|&i| messages[i].clone()).collect();
  out.push(Message::User(UserMessage {
    content: UserContent::Text(seed.to_string()),
    timestamp: Some(timestamp),
  }));
  out
}

/// The summary of the latest `<cave-context-summary>` user message (`latestContextSummary`).
pub fn latest_summary(messages: &[Message]) -> Option<ContextSummary> {
  messages.iter().rev().find_map(|m| match m {
    Message::User(u) => summary_in(&match &u.content {
      UserContent::Text(t) => t.clone(),
      UserContent::Parts(p) => content_text(p),
    }),
    _ => None,
  })
}

fn content_text(parts: &[Part]) -> String {
  parts
    .iter()
    .filter_map(|p| match p {
      Part::Text(t) => Some(t.text.as_str()),
      _ => None,
    })
    .collect::<Vec<_>>()
    .join("\n")
}

const POINTER_PREFIX: &str = "[cave: output of ";
const POINTER_MARK: &str = " elided by compaction: ";

/// Whether a tool result is already a citation pointer of an earlier eviction.
fn is_pointer(content: &[Part]) -> bool {
  matches!(content, [Part::Text(t)] if t.text.starts_with(POINTER_PREFIX) && t.text.contains(POINTER_MARK))
}

/// The evict rung: every tool result before `tail_start` becomes a citation pointer naming the
/// tool, the call, its size and digest, kept only where it is shorter than the original.
/// Returns the evicted context and the digests of the outputs it elided. A pointer left by an
/// earlier compaction stays as it is: a pointer to a pointer would save a few bytes, count as
/// an eviction and block the summarize rung of a later compaction.
pub fn evict(messages: &[Message], tail_start: usize) -> (Vec<Message>, Vec<String>) {
  let mut digests = Vec::new();
  let out = messages
    .iter()
    .enumerate()
    .map(|(i, m)| match m {
      Message::ToolResult(r) if i < tail_start && !is_pointer(&r.content) => {
        let original = serde_json::to_string(&r.content).unwrap_or_default();
        let digest = sha256_hex(original.as_bytes());
        let text = content_text(&r.content);
        let pointer = format!(
          "{POINTER_PREFIX}{} (call {}){POINTER_MARK}{} bytes, sha256:{}]",
          r.tool_name,
          r.tool_call_id,
          text.len(),
          digest
        );
        let replaced = vec![Part::Text(TextPart::new(pointer))];
        if serde_json::to_string(&replaced).unwrap_or_default().len() < original.len() {
          digests.push(digest);
          let mut r = r.clone();
          r.content = replaced;
          Message::ToolResult(r)
        } else {
          m.clone()
        }
      }
      _ => m.clone(),
    })
    .collect();
  (out, digests)
}

/// The summarized context: the pinned head messages, the summary as one user message, the tail.
pub fn summarized(messages: &[Message], plan: &Plan, summary: &ContextSummary, timestamp: serde_json::Number) -> Vec<Message> {
  let mut out: Vec<Message> = plan.pinned.iter().map(|&i| messages[i].clone()).collect();
  out.push(Message::User(UserMessage {
    content: UserContent::Text(render_summary(summary)),
    timestamp: Some(timestamp),
  }));
  out.extend(messages[plan.tail_start..].iter().cloned());
  out
}

// ---------------------------------------------------------------------------------------------
// bashkit's compactConversation (AI SDK `ModelMessage`s)

fn has_tool_calls(m: &Value) -> bool {
  m["role"] == "assistant"
    && m["content"]
      .as_array()
      .is_some_and(|parts| parts.iter().any(|p| p["type"] == "tool-call"))
}

/// bashkit's split point: `messages.len() - protect`, moved back so no tool result (or the
/// message after a tool-calling assistant turn) starts the kept part; when that reaches 0, moved
/// forward instead; the naive split when neither works.
pub fn bashkit_split_index(messages: &[Value], protect: usize) -> usize {
  let naive = messages.len().saturating_sub(protect);
  let mut split = naive;
  while split > 0 {
    let is_tool = messages.get(split).is_some_and(|m| m["role"] == "tool");
    if is_tool || has_tool_calls(&messages[split - 1]) {
      split -= 1;
      continue;
    }
    break;
  }
  if split == 0 && naive > 0 {
    split = naive;
    while split < messages.len() {
      if messages[split]["role"] != "tool" && !has_tool_calls(&messages[split - 1]) {
        break;
      }
      split += 1;
    }
    if split >= messages.len() {
      split = naive;
    }
  }
  split
}

const PART_MAX_CHARS: usize = 500;

fn truncate_part(s: &str) -> String {
  if s.chars().count() <= PART_MAX_CHARS {
    return s.to_string();
  }
  // JS slices UTF-16 units; characters are close enough for a summary's input.
  format!("{}... [truncated]", s.chars().take(PART_MAX_CHARS).collect::<String>())
}

fn format_for_summary(messages: &[Value]) -> String {
  messages
    .iter()
    .enumerate()
    .map(|(index, m)| {
      let role = m["role"].as_str().unwrap_or_default().to_uppercase();
      let body = match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
          .iter()
          .map(|p| match p {
            Value::String(s) => s.clone(),
            _ if p["text"].is_string() => p["text"].as_str().unwrap_or_default().to_string(),
            _ if p["type"] == "tool-call" => format!(
              "[Tool Call: {}]\nInput: {}",
              p["toolName"].as_str().unwrap_or_default(),
              truncate_part(&p.get("input").unwrap_or(&Value::Null).to_string())
            ),
            _ if p["type"] == "tool-result" => {
              let out = match p.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => "null".into(),
              };
              format!("[Tool Result]\n{}", truncate_part(&out))
            }
            _ => truncate_part(&p.to_string()),
          })
          .collect::<Vec<_>>()
          .join("\n\n"),
        other => truncate_part(&other.to_string()),
      };
      format!("<message index=\"{index}\" role=\"{role}\">\n{body}\n</message>")
    })
    .collect::<Vec<_>>()
    .join("\n\n")
}

/// Files the old messages read (`read`) and changed (`write`/`edit`), by `file_path`.
fn file_ops_block(messages: &[Value]) -> String {
  let mut read = std::collections::BTreeSet::new();
  let mut modified = std::collections::BTreeSet::new();
  for m in messages.iter().filter(|m| m["role"] == "assistant") {
    for p in m["content"].as_array().into_iter().flatten() {
      if p["type"] != "tool-call" {
        continue;
      }
      let Some(path) = p["input"]["file_path"].as_str() else {
        continue;
      };
      match p["toolName"].as_str().unwrap_or_default().to_lowercase().as_str() {
        "read" => read.insert(path.to_string()),
        "write" | "edit" => modified.insert(path.to_string()),
        _ => false,
      };
    }
  }
  let sanitize = |p: &String| p.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
  let mut sections = Vec::new();
  for (label, set, more) in [("Read", &read, "read"), ("Modified", &modified, "modified")] {
    if set.is_empty() {
      continue;
    }
    let listed: Vec<String> = set.iter().take(50).map(sanitize).collect();
    sections.push(format!("{label}: {}", listed.join(", ")));
    if set.len() > 50 {
      sections.push(format!("... and {} more {more} files", set.len() - 50));
    }
  }
  if sections.is_empty() {
    String::new()
  } else {
    format!("<file-operations>\n{}\n</file-operations>", sections.join("\n"))
  }
}

// bashkit 0.7.1's summarizer template (MIT), verbatim: `compactConversation`'s prompt is part of
// what a drop-in keeps.
const BASHKIT_PROMPT: &str = include_str!("compaction_prompt.txt");

/// What `compactConversation` sends its summarizer model for `old` messages.
pub fn bashkit_prompt(old: &[Value], task_context: Option<&str>, previous_summary: &str, summary_instructions: Option<&str>) -> String {
  let vars: Map<String, Value> = [
    ("TASK_CONTEXT", task_context.filter(|s| !s.is_empty()).unwrap_or("Not specified").to_string()),
    (
      "PREVIOUS_SUMMARY",
      if previous_summary.is_empty() { "None - this is the first compaction".to_string() } else { previous_summary.to_string() },
    ),
    ("CONVERSATION", format_for_summary(old)),
    ("FILE_OPERATIONS", file_ops_block(old)),
    ("SUMMARY_INSTRUCTIONS", summary_instructions.filter(|s| !s.is_empty()).map(|s| format!("- {s}")).unwrap_or_default()),
  ]
  .into_iter()
  .map(|(k, v)| (k.to_string(), json!(v)))
  .collect();
  let mut out = String::with_capacity(BASHKIT_PROMPT.len() + 1024);
  let mut rest = BASHKIT_PROMPT;
  while let Some(start) = rest.find("{{") {
    out.push_str(&rest[..start]);
    let after = &rest[start + 2..];
    match after.find("}}") {
      Some(end) => {
        out.push_str(vars.get(&after[..end]).and_then(Value::as_str).unwrap_or_default());
        rest = &after[end + 2..];
      }
      None => {
        out.push_str(&rest[start..]);
        rest = "";
      }
    }
  }
  out.push_str(rest);
  out
}

#[cfg(test)]
mod tests {
  use super::*;

  fn user(text: &str) -> Message {
    serde_json::from_value(json!({"role": "user", "content": text})).unwrap()
  }
  fn assistant_call(id: &str) -> Message {
    serde_json::from_value(json!({"role": "assistant", "stopReason": "toolUse",
      "content": [{"type": "toolCall", "id": id, "name": "read", "arguments": {}}]}))
    .unwrap()
  }
  fn result(id: &str, text: &str) -> Message {
    serde_json::from_value(json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
      "content": [{"type": "text", "text": text}], "isError": false}))
    .unwrap()
  }

  #[test]
  fn options_default_and_refuse_bad_values() {
    assert_eq!(normalize(None).unwrap(), Compaction::default());
    let c = normalize(Some(&json!({"maxCompactions": 2, "preserveFirstUserMessage": false}))).unwrap();
    assert_eq!((c.max_compactions, c.preserve_first_user_message), (2, false));
    for bad in [json!({"maxCompactions": 0}), json!({"keepRecentTokens": 1.5}), json!({"preserveFirstUserMessage": 1}), json!({"mode": "new-context"})] {
      let e = normalize(Some(&bad)).unwrap_err();
      assert!(e.message.starts_with("cave_compaction_option_invalid:"), "{}", e.message);
    }
    let e = normalize(Some(&json!({"maxCompaction": 2}))).unwrap_err();
    assert_eq!(
      e.message,
      "cave_compaction_option_invalid:maxCompaction: is not a compaction option (maxCompactions, keepRecentTokens, summaryMaxTokens, minYieldTokens, headroomCalls, pinnedUserTokens, preserveFirstUserMessage, summarizerModel, mode, newContext)\nhint: did you mean \"maxCompactions\"?"
    );
    let e = normalize(Some(&json!({"qqqqqqqqqq": 2}))).unwrap_err();
    assert!(!e.message.contains("\nhint: "), "{}", e.message);
  }

  #[test]
  fn the_summarizer_model_and_the_rollover_options() {
    let c = normalize(Some(&json!({"summarizerModel": {"key": 3, "provider": "anthropic", "id": "claude-haiku-4-5", "contextWindow": 200000}}))).unwrap();
    let m = c.summarizer_model.as_ref().unwrap();
    assert_eq!((m.key, m.id.as_str(), m.context_window), (3, "claude-haiku-4-5", Some(200_000)));
    // Named, never by its process-local handle (a durable run's budget digest reads this).
    let v = serde_json::to_value(&c).unwrap();
    assert_eq!(v["summarizerModel"], "anthropic/claude-haiku-4-5");
    assert!(v.get("mode").is_none(), "the default mode is not written: {v}");
    let e = normalize(Some(&json!({"summarizerModel": 7}))).unwrap_err();
    assert!(e.message.starts_with("cave_compaction_option_invalid:summarizerModel: "), "{}", e.message);

    let c = normalize(Some(&json!({"mode": "new-context", "newContext": true}))).unwrap();
    assert_eq!(c.mode, Mode::NewContext);
    assert_eq!(serde_json::to_value(&c).unwrap()["mode"], "new-context");
    assert_eq!(normalize(Some(&json!({"mode": "summarize"}))).unwrap().mode, Mode::Summarize);
    for (bad, key) in [
      (json!({"mode": "new-context"}), "newContext"),
      (json!({"newContext": true}), "mode"),
      (json!({"mode": "summarize", "newContext": true}), "mode"),
      (json!({"mode": "rollover", "newContext": true}), "mode"),
      (json!({"mode": "new-context", "newContext": "yes"}), "newContext"),
    ] {
      let e = normalize(Some(&bad)).unwrap_err();
      assert!(e.message.starts_with(&format!("cave_compaction_option_invalid:{key}: ")), "{bad}: {}", e.message);
    }
  }

  #[test]
  fn a_rollover_keeps_the_pins_and_the_seed_and_the_latest_summary_is_found() {
    let msgs = vec![user("first ask"), assistant_call("a"), result("a", "out"), user("then this"), assistant_call("b"), result("b", "out2")];
    let (pinned, ids) = pins(&msgs, msgs.len(), &Compaction::default());
    assert_eq!(pinned, vec![0, 3], "every user intent over the whole window, within pinnedUserTokens");
    assert_eq!(ids, vec!["runtime.user_intent.0", "runtime.user_intent.1"]);
    let rolled = rolled_over(&msgs, &pinned, "saved to notes/1.md; go on", serde_json::Number::from(1));
    assert_eq!(rolled.len(), 3);
    assert_eq!(rolled[..2], [msgs[0].clone(), msgs[3].clone()]);
    let Message::User(u) = &rolled[2] else { panic!() };
    assert!(matches!(&u.content, UserContent::Text(t) if t == "saved to notes/1.md; go on"));
    let only_first = Compaction { pinned_user_tokens: 1, ..Compaction::default() };
    assert_eq!(pins(&msgs, msgs.len(), &only_first).0, vec![0], "the first is kept whatever its size");

    assert_eq!(latest_summary(&msgs), None);
    let s = parse_summary(r#"{"schema_version":2,"goal":"g","state":"s"}"#).unwrap();
    let later = parse_summary(r#"{"schema_version":2,"goal":"g2","state":"s"}"#).unwrap();
    let with = vec![user(&render_summary(&s)), user("x"), user(&render_summary(&later)), user("y")];
    assert_eq!(latest_summary(&with), Some(later));
  }

  #[test]
  fn summaries_parse_render_and_keep_anchors() {
    let text = r#"```json
{"schema_version":2,"goal":"fix the build","state":"half done","anchors":[{"kind":"file","value":"src/a.rs"}]}
```"#;
    let s = parse_summary(text).unwrap();
    assert_eq!(s.anchors[0].value, "src/a.rs");
    assert_eq!(summary_in(&render_summary(&s)), Some(s.clone()));
    assert!(parse_summary(r#"{"schema_version":1,"goal":"g","state":""}"#).unwrap_err().message.contains("schema_version must be 2"));
    assert!(parse_summary(r#"{"schema_version":2,"goal":"g","state":"","extra":1}"#).is_err());
    assert!(parse_summary("not json").is_err());
    let next = parse_summary(r#"{"schema_version":2,"goal":"fix","state":"done"}"#).unwrap();
    let v = validate_transition(Some(&s), &next);
    assert!(!v.ok && v.missing_anchors.len() == 1);
    assert!(validate_transition(Some(&s), &s).ok);
  }

  #[test]
  fn plan_keeps_the_last_turn_and_pins_the_prompt() {
    let big = "x".repeat(4_000);
    let msgs = vec![user("do it"), assistant_call("a"), result("a", &big), assistant_call("b"), result("b", &big), assistant_call("c"), result("c", "short")];
    let opts = Compaction {
      keep_recent_tokens: 10,
      ..Compaction::default()
    };
    let p = plan(&msgs, &opts);
    assert_eq!(p.tail_start, 5, "the last assistant turn and its result");
    assert_eq!(p.pinned, vec![0]);
    assert_eq!(p.pinned_ids, vec!["runtime.user_intent.0"]);
    let (evicted, digests) = evict(&msgs, p.tail_start);
    assert_eq!(digests.len(), 2);
    let Message::ToolResult(r) = &evicted[2] else { panic!() };
    assert!(content_text(&r.content).starts_with("[cave: output of read (call a) elided by compaction: 4000 bytes, sha256:"));
    assert_eq!(evicted[6], msgs[6], "the tail is verbatim");
    let total = |m: &[Message]| m.iter().map(message_tokens).sum::<u64>();
    assert!(total(&evicted) < total(&msgs));
    // A short result is not replaced by a longer pointer.
    let (same, none) = evict(&[assistant_call("z"), result("z", "ok"), user("next")], 2);
    assert!(none.is_empty() && same[1] == result("z", "ok"));
    // A second eviction leaves the first one's pointers alone.
    let (again, more) = evict(&evicted, evicted.len());
    assert_eq!(more.len(), 0, "nothing left to elide");
    assert_eq!(again, evicted);
  }

  #[test]
  fn bashkit_split_never_separates_a_call_from_its_result() {
    let m = |role: &str, call: bool| {
      if call {
        json!({"role": role, "content": [{"type": "tool-call", "toolName": "read", "input": {"file_path": "a.txt"}}]})
      } else {
        json!({"role": role, "content": "t"})
      }
    };
    let msgs = vec![m("user", false), m("assistant", true), m("tool", false), m("assistant", false), m("user", false)];
    assert_eq!(bashkit_split_index(&msgs, 3), 1, "index 2 is a tool result after a call: back to 1");
    assert_eq!(bashkit_split_index(&msgs, 2), 3);
    let prompt = bashkit_prompt(&msgs[..1], None, "", Some("focus"));
    assert!(prompt.contains("<original-goal>\nNot specified\n</original-goal>"));
    assert!(prompt.contains("None - this is the first compaction"));
    assert!(prompt.contains("<message index=\"0\" role=\"USER\">\nt\n</message>"));
    assert!(prompt.contains("- focus</instructions>"));
    assert!(bashkit_prompt(&msgs[..3], None, "", None).contains("<file-operations>\nRead: a.txt\n</file-operations>"));
  }
}
