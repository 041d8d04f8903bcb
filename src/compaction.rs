//! `@caveman-ai/agent/compaction`'s summary helpers and bashkit's `compactConversation` planning,
//! over knap-core's one compaction engine. JSON text in and out: the values are small documents.

use napi_derive::napi;
use serde_json::Value;

use knap_core::compaction::{self, ContextSummary};
use knap_core::kernel::message::Message;

use crate::ErrorCode;

fn err(e: knap_core::code::Error) -> napi::Error<ErrorCode> {
  napi::Error::new(ErrorCode(e.code.as_str().to_string()), e.message)
}

fn invalid(what: &str, e: impl std::fmt::Display) -> napi::Error<ErrorCode> {
  let code = "cave_context_summary_invalid".to_string();
  napi::Error::new(ErrorCode(code.clone()), format!("{code}: {what}: {e}"))
}

fn summary(json: &str) -> napi::Result<ContextSummary, ErrorCode> {
  compaction::parse_summary(json).map_err(err)
}

/// `normalizeCompaction(options)` as JSON; throws `cave_compaction_option_invalid:<key>`.
#[napi]
pub fn compaction_normalize(options_json: Option<String>) -> napi::Result<String, ErrorCode> {
  let value: Option<Value> = match options_json {
    None => None,
    Some(t) => Some(serde_json::from_str(&t).map_err(|e| invalid("options", e))?),
  };
  let c = compaction::normalize(value.as_ref()).map_err(err)?;
  Ok(serde_json::to_string(&c).unwrap_or_default())
}

/// `parseContextSummary(text)`: the summary as JSON, or throws `cave_context_summary_invalid`.
#[napi]
pub fn compaction_parse_summary(text: String) -> napi::Result<String, ErrorCode> {
  Ok(serde_json::to_string(&summary(&text)?).unwrap_or_default())
}

/// `validateContextSummaryTransition(previous, next)` as JSON `{ok, missingAnchors, errors}`.
#[napi]
pub fn compaction_validate_transition(previous_json: Option<String>, next_json: String) -> napi::Result<String, ErrorCode> {
  let previous = previous_json.as_deref().map(summary).transpose()?;
  let next = summary(&next_json)?;
  Ok(serde_json::to_string(&compaction::validate_transition(previous.as_ref(), &next)).unwrap_or_default())
}

/// `renderSummary(summary)`: the `<cave-context-summary>` user message text.
#[napi]
pub fn compaction_render_summary(summary_json: String) -> napi::Result<String, ErrorCode> {
  Ok(compaction::render_summary(&summary(&summary_json)?))
}

fn messages(json: &str) -> napi::Result<Vec<Message>, ErrorCode> {
  serde_json::from_str(json).map_err(|e| invalid("messages", e))
}

/// `contextSummarySources(messages, options?)`: what a summary of `messages` would replace (the
/// head before the recent tail, without the pinned user requests), as JSON.
#[napi]
pub fn compaction_sources(messages_json: String, options_json: Option<String>) -> napi::Result<String, ErrorCode> {
  let msgs = messages(&messages_json)?;
  let options: Option<Value> = options_json.map(|t| serde_json::from_str(&t)).transpose().map_err(|e| invalid("options", e))?;
  let options = compaction::normalize(options.as_ref()).map_err(err)?;
  let plan = compaction::plan(&msgs, &options);
  let sources = compaction::sources(&msgs[..plan.tail_start], &plan.pinned);
  Ok(serde_json::to_string(&sources).unwrap_or_default())
}

/// The summary of the latest `<cave-context-summary>` user message of `messages`, as JSON, or
/// `null`.
#[napi]
pub fn compaction_latest_summary(messages_json: String) -> napi::Result<Option<String>, ErrorCode> {
  let msgs = messages(&messages_json)?;
  Ok(compaction::latest_summary(&msgs).map(|s| serde_json::to_string(&s).unwrap_or_default()))
}

/// `summarizationInstruction(previous, sources)`.
#[napi]
pub fn compaction_instruction(previous_json: Option<String>, sources_json: String) -> napi::Result<String, ErrorCode> {
  let previous = previous_json.as_deref().map(summary).transpose()?;
  let raw: Vec<Value> = serde_json::from_str(&sources_json).map_err(|e| invalid("sources", e))?;
  let sources: Vec<compaction::SummarySource> = raw
    .iter()
    .map(|s| compaction::SummarySource {
      id: s["id"].as_str().unwrap_or_default().to_string(),
      role: s["role"].as_str().unwrap_or_default().to_string(),
      sha256: s["sha256"].as_str().unwrap_or_default().to_string(),
    })
    .collect();
  Ok(compaction::summarization_instruction(previous.as_ref(), &sources))
}

/// bashkit's `compactConversation` plan for AI SDK messages: `{splitAt, prompt}` (the prompt is
/// empty when nothing is old enough to summarize).
#[napi(object)]
pub struct BashkitCompactionPlan {
  pub split_at: u32,
  pub prompt: String,
}

#[napi]
pub fn bashkit_compaction_plan(
  messages_json: String,
  protect_recent_messages: u32,
  task_context: Option<String>,
  previous_summary: String,
  summary_instructions: Option<String>,
) -> napi::Result<BashkitCompactionPlan, ErrorCode> {
  let msgs: Vec<Value> = serde_json::from_str(&messages_json).map_err(|e| invalid("messages", e))?;
  let split = compaction::bashkit_split_index(&msgs, protect_recent_messages as usize);
  let prompt = if split == 0 {
    String::new()
  } else {
    compaction::bashkit_prompt(&msgs[..split], task_context.as_deref(), &previous_summary, summary_instructions.as_deref())
  };
  Ok(BashkitCompactionPlan {
    split_at: split as u32,
    prompt,
  })
}
