//! What the kernel needs from its host (the Node binding, or a test double): the model
//! transport, user tools, the policy, events, and the native tool sets.

use std::sync::Arc;

use serde_json::Value;

use crate::exec::BoxFuture;
use crate::policy::ToolPolicy;
use crate::tools::ShellTools;

/// One provider call. The host keeps each conversation's transcript: `append` carries only the
/// messages added since the previous call on `conversation`; `system_prompt` and `tools` are
/// sent with the first call of a conversation only.
#[derive(Debug, Clone)]
pub struct ModelCall {
  pub conversation: u64,
  pub model_key: u32,
  pub append: Vec<Value>,
  pub system_prompt: Option<String>,
  pub tools: Option<Vec<Value>>,
  pub max_tokens: Option<u64>,
  pub reasoning: Option<String>,
}

/// One call of a host (JS) tool.
#[derive(Debug, Clone)]
pub struct HostToolCall {
  /// Unique per run; `Host::abort_tool` refers to it.
  pub call_id: u64,
  pub key: u32,
  pub args: Value,
  pub tool_call_id: String,
  pub parent_tool_call_id: Option<String>,
  /// `context.durable` on durable runs: `(idempotencyKey, resumed)`.
  pub durable: Option<(String, bool)>,
}

pub trait Host: Send + Sync {
  /// A stream event (`run_start`, `{type:"pi", event}`, `run_end`, …). Fire and forget, in order.
  fn emit(&self, event: Value);
  /// The final assistant message (pi `AssistantMessage` JSON), or the thrown error's message.
  fn model_call(&self, call: ModelCall) -> BoxFuture<Result<Value, String>>;
  /// The tool's text result, or the thrown error's message.
  fn tool_call(&self, call: HostToolCall) -> BoxFuture<Result<String, String>>;
  /// Asks a running host tool to stop (its per-tool timeout passed).
  fn abort_tool(&self, call_id: u64);
  /// `onOutput(label, text)` of a native tool set.
  fn on_output(&self, toolset: u32, label: &str, text: &str);
  fn policy(&self) -> Option<Arc<dyn ToolPolicy>>;
  fn native_toolset(&self, id: u32) -> Option<Arc<ShellTools>>;
}
