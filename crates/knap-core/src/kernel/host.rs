//! What the kernel needs from its host (the Node binding, or a test double): the model
//! transport, user tools, the policy, events, and the native tool sets. Every argument and
//! answer is typed; a host failure is a [`HostError`].

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::budget::{ExhaustionAnswer, ExhaustionContext};
use super::controller::QueueKind;
use super::event::RunEvent;
use super::message::{AssistantMessage, Message, UserMessage};
use super::nested::NestedInbox;
use super::speculation::{SpeculationCount, SpeculationSink};
use crate::exec::BoxFuture;
use crate::policy::ToolPolicy;
use crate::tools::ShellTools;

/// What a host callback threw: its message, and its `code` property when it had one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError {
  pub message: String,
  pub code: Option<String>,
}

impl HostError {
  pub fn new(message: impl Into<String>) -> Self {
    Self {
      message: message.into(),
      code: None,
    }
  }
}

impl std::fmt::Display for HostError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.message)
  }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSchema {
  pub name: String,
  pub description: String,
  pub parameters: Value,
}

/// One provider call. The host keeps each conversation's transcript: `append` carries the
/// messages the kernel added since the previous call on `conversation` (the prompt, tool
/// results, a resumed transcript); the assistant message a call returns is the host's own, and
/// it appends that itself. `system_prompt` and `tools` come with the first call only.
#[derive(Debug, Clone)]
pub struct ModelCall {
  pub conversation: u64,
  pub model_key: u32,
  /// `"provider/id"` when the call goes to a model the router chose instead of the one held
  /// under `model_key` (same provider, from the catalog).
  pub model: Option<String>,
  pub append: Vec<Message>,
  pub system_prompt: Option<String>,
  pub tools: Option<Vec<ToolSchema>>,
  pub max_tokens: Option<u64>,
  pub reasoning: Option<String>,
  /// After a compaction: the whole context the provider sees from this call on (`append` already
  /// folded in). The host keeps its full transcript and appends later messages to this one.
  pub context: Option<Vec<Message>>,
  /// The speculation scope of this provider stream: the host shows it the source of the
  /// stream's first cell call as it grows ([`SpeculationSink::observe`]). `None`: the agent
  /// has no cell tool with speculation on.
  pub speculation: Option<Arc<SpeculationSink>>,
}

/// What `budget.compaction.newContext` is asked with: the window being closed (the context the
/// provider saw up to now) and the compaction's ordinal in its agent run (1 for the first, every
/// tier counting, continued by a durable resume). `agentPath` is knap's: `[]` at the root, the
/// subagent tool names below it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewContextInput {
  pub messages: Vec<Message>,
  pub generation: u64,
  pub agent_path: Vec<String>,
}

/// `context.durable` of a tool call on a durable run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableContext {
  pub idempotency_key: String,
  pub resumed: bool,
}

/// One call of a host (JS) tool.
#[derive(Debug, Clone)]
pub struct HostToolCall {
  /// Unique per run; `Host::abort_tool` and nested dispatches refer to it.
  pub call_id: u64,
  pub key: u32,
  pub args: Value,
  pub tool_call_id: String,
  /// The container's call id for a nested call; the call's own id at top level.
  pub parent_tool_call_id: String,
  pub durable: Option<DurableContext>,
  /// The tool may `context.dispatch` nested calls (it declares `nestedTools` and the host
  /// routes dispatches through its [`NestedInbox`]).
  pub composite: bool,
  /// A nested call of a composite: the host answers with the JSON of the settled value (the
  /// container's `dispatch` resolves to the value, not to text).
  pub nested: bool,
}

pub trait Host: Send + Sync {
  /// A stream event. Fire and forget, delivered in order.
  fn emit(&self, event: RunEvent);
  /// The final assistant message of one provider call.
  fn model_call(&self, call: ModelCall) -> BoxFuture<Result<AssistantMessage, HostError>>;
  /// The tool's text result (a string as returned, any other value as JSON).
  fn tool_call(&self, call: HostToolCall) -> BoxFuture<Result<String, HostError>>;
  /// Asks a running host tool to stop (its timeout passed).
  fn abort_tool(&self, call_id: u64);
  /// `onOutput(label, text)` of a native tool set.
  fn on_output(&self, toolset: u32, label: &str, text: &str);
  fn policy(&self) -> Option<Arc<dyn ToolPolicy>>;
  fn native_toolset(&self, id: u32) -> Option<Arc<ShellTools>>;
  /// `onBudgetExhausted(ctx)` of the run: `None` when it has no handler (`"stop"`). The
  /// answer comes back like a policy decision, without blocking the host's thread.
  fn budget_exhausted(
    &self,
    _context: ExhaustionContext,
  ) -> Option<BoxFuture<Result<ExhaustionAnswer, HostError>>> {
    None
  }
  /// Where the host routes `context.dispatch` of composite tools. `None`: the host cannot
  /// dispatch, and composite tools run with `dispatch` unavailable.
  fn nested_inbox(&self) -> Option<Arc<NestedInbox>> {
    None
  }
  /// A programmatic runtime's `stats()` count for the container tool held under `key`.
  fn speculation(&self, _key: u32, _count: SpeculationCount) {}
  /// `RunOptions.modelRouter`; `None` when the run has none.
  fn router(&self) -> Option<Arc<dyn super::route::ModelRouter>> {
    None
  }
  /// `budget.compaction.newContext({messages, generation})`: the seed of the new context (`None`:
  /// the run has no callback). It may persist the window first; a throw fails the run.
  fn new_context(&self, _input: NewContextInput) -> Option<BoxFuture<Result<String, HostError>>> {
    None
  }
  /// `RunOptions.controller`: removes and returns the next queued message of `kind` (`None`:
  /// none queued, held after an interrupt, or no controller). Polled by the root run at turn
  /// boundaries; it must answer at once, never wait on JS.
  fn take_queued(&self, _kind: QueueKind) -> Option<UserMessage> {
    None
  }
}
