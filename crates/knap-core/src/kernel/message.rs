//! Pi's message types (`@mariozechner/pi-ai`): what the kernel sends the model transport, reads
//! back from it, keeps in its transcript and journals. Numbers the kernel only carries (the
//! timestamp, usage counts) stay `serde_json::Number`, so `1` is written back as `1`, not `1.0`.

use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

/// One transcript message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
pub enum Message {
  #[serde(rename = "user")]
  User(UserMessage),
  #[serde(rename = "assistant")]
  Assistant(AssistantMessage),
  #[serde(rename = "toolResult")]
  ToolResult(ToolResultMessage),
  /// A message of another role carried in a conversation's history: forwarded, never read.
  #[serde(untagged)]
  Other(Value),
}

impl Message {
  pub fn role(&self) -> &str {
    match self {
      Message::User(_) => "user",
      Message::Assistant(_) => "assistant",
      Message::ToolResult(_) => "toolResult",
      Message::Other(v) => v.get("role").and_then(Value::as_str).unwrap_or_default(),
    }
  }

  /// Bytes of the message as JSON (the budget's input ceiling counts them).
  pub fn json_len(&self) -> usize {
    serde_json::to_string(self).map(|s| s.len()).unwrap_or(0)
  }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
  pub content: UserContent,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub timestamp: Option<Number>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
  Text(String),
  Parts(Vec<Part>),
}

/// A content part of a user or tool-result message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Part {
  #[serde(rename = "text")]
  Text(TextPart),
  #[serde(rename = "image")]
  Image(ImagePart),
  /// A part of another type (audio, files): forwarded, never read.
  #[serde(untagged)]
  Other(Value),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextPart {
  pub text: String,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub text_signature: Option<String>,
}

impl TextPart {
  pub fn new(text: impl Into<String>) -> Self {
    Self {
      text: text.into(),
      text_signature: None,
    }
  }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImagePart {
  pub data: String,
  pub mime_type: String,
}

/// A content part of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum AssistantPart {
  #[serde(rename = "text")]
  Text(TextPart),
  #[serde(rename = "thinking")]
  Thinking(ThinkingPart),
  #[serde(rename = "toolCall")]
  ToolCall(ToolCall),
  /// A part of another type: kept, never read.
  #[serde(untagged)]
  Other(Value),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingPart {
  pub thinking: String,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub thinking_signature: Option<String>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub redacted: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
  pub id: String,
  pub name: String,
  /// The model's arguments: opaque user data.
  #[serde(default)]
  pub arguments: Value,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub thought_signature: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
  Stop,
  Length,
  ToolUse,
  Error,
  Aborted,
}

/// Pi's `Usage`; `reasoning` is knap's (scripted turns and some providers report it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct MessageUsage {
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub input: Option<Number>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub output: Option<Number>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub cache_read: Option<Number>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub cache_write: Option<Number>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub reasoning: Option<Number>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub total_tokens: Option<Number>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub cost: Option<UsageCost>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct UsageCost {
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub input: Option<Number>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub output: Option<Number>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub cache_read: Option<Number>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub cache_write: Option<Number>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub total: Option<Number>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
  pub content: Vec<AssistantPart>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub api: Option<String>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub provider: Option<String>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub model: Option<String>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub response_id: Option<String>,
  #[serde(default)]
  pub usage: MessageUsage,
  pub stop_reason: StopReason,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub error_message: Option<String>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub timestamp: Option<Number>,
}

impl AssistantMessage {
  /// The text parts, joined (`RunResult.text`).
  pub fn text(&self) -> String {
    self
      .content
      .iter()
      .filter_map(|p| match p {
        AssistantPart::Text(t) => Some(t.text.as_str()),
        _ => None,
      })
      .collect()
  }

  pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
    self.content.iter().filter_map(|p| match p {
      AssistantPart::ToolCall(c) => Some(c),
      _ => None,
    })
  }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
  pub tool_call_id: String,
  pub tool_name: String,
  pub content: Vec<Part>,
  #[serde(default)]
  pub details: Value,
  pub is_error: bool,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub timestamp: Option<Number>,
}

/// A tool's result as Pi sees it (`AgentToolResult`): its text, and `details` —
/// `{effect, resultPolicy}` for a result the tool produced, `{}` for an error (blocked, thrown,
/// timed out), as Pi's `createErrorToolResult` builds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResultValue {
  pub content: Vec<Part>,
  pub details: ToolResultDetails,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ToolResultDetails {
  Produced {
    effect: String,
    #[serde(rename = "resultPolicy")]
    result_policy: String,
  },
  Error {},
}

impl ToolResultDetails {
  pub fn to_value(&self) -> Value {
    serde_json::to_value(self).unwrap_or(Value::Null)
  }
}

/// `Date.now()`-style milliseconds.
pub fn now_ms() -> Number {
  Number::from(crate::durable::record::now_ms())
}

/// A positive finite count from a usage number (Pi may report floats or garbage).
pub fn count(n: &Option<Number>) -> u64 {
  n.as_ref()
    .and_then(Number::as_f64)
    .filter(|f| f.is_finite() && *f > 0.0)
    .unwrap_or(0.0) as u64
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  #[test]
  fn pi_messages_round_trip_with_their_numbers() {
    let assistant = json!({
      "role": "assistant",
      "content": [
        {"type": "text", "text": "hi"},
        {"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"},
        {"type": "toolCall", "id": "c1", "name": "lookup", "arguments": {"q": 1.5, "n": 2}}
      ],
      "api": "faux", "provider": "anthropic", "model": "faux-1",
      "usage": {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 110,
        "cost": {"input": 0, "output": 0.5, "cacheRead": 0, "cacheWrite": 0, "total": 0.5}},
      "stopReason": "toolUse", "timestamp": 1764700000123u64
    });
    let m: Message = serde_json::from_value(assistant.clone()).unwrap();
    let Message::Assistant(a) = &m else {
      panic!("assistant")
    };
    assert_eq!(a.text(), "hi");
    assert_eq!(a.tool_calls().count(), 1);
    assert_eq!(count(&a.usage.input), 100);
    let text = serde_json::to_string(&m).unwrap();
    assert!(text.contains("\"timestamp\":1764700000123"), "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), assistant);

    let user = json!({"role": "user", "content": [{"type": "text", "text": "go"},
      {"type": "image", "data": "AAAA", "mimeType": "image/png"}], "timestamp": 1});
    let m: Message = serde_json::from_value(user.clone()).unwrap();
    assert_eq!(m.role(), "user");
    assert_eq!(serde_json::to_value(&m).unwrap(), user);
    let plain: Message = serde_json::from_value(json!({"role": "user", "content": "old"})).unwrap();
    assert!(matches!(
      plain,
      Message::User(UserMessage {
        content: UserContent::Text(_),
        ..
      })
    ));

    let other: Message = serde_json::from_value(json!({"role": "custom", "x": 1})).unwrap();
    assert_eq!(other.role(), "custom");
    assert_eq!(
      serde_json::to_value(&other).unwrap(),
      json!({"role": "custom", "x": 1})
    );
  }

  #[test]
  fn tool_result_values_have_pis_shape() {
    let ok = ToolResultValue {
      content: vec![Part::Text(TextPart::new("echo a"))],
      details: ToolResultDetails::Produced {
        effect: "read".into(),
        result_policy: "auto".into(),
      },
    };
    assert_eq!(
      serde_json::to_value(&ok).unwrap(),
      json!({"content": [{"type": "text", "text": "echo a"}], "details": {"effect": "read", "resultPolicy": "auto"}})
    );
    assert_eq!(ToolResultDetails::Error {}.to_value(), json!({}));
  }
}
