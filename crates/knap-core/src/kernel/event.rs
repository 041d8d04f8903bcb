//! The stream events a run emits (`CavemanRunEvent`), typed. The host delivers them in order;
//! they become JS objects once, at the boundary.

use serde::Serialize;
use serde_json::Value;

use super::message::{Message, ToolResultValue};
use super::result::{ReceiptOut, RunOutput};

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
  #[serde(rename_all = "camelCase")]
  RunStart { run_id: String, agent_id: String },
  #[serde(rename_all = "camelCase")]
  Pi { run_id: String, event: PiEvent },
  /// A composite tool's nested call started (`id` is `<parent>:nested:<n>`).
  #[serde(rename_all = "camelCase")]
  NestedToolStart {
    run_id: String,
    id: String,
    name: String,
    args: Value,
  },
  /// … and ended: `result` is the settled value, or the error message.
  #[serde(rename_all = "camelCase")]
  NestedToolEnd {
    run_id: String,
    id: String,
    name: String,
    is_error: bool,
    result: Value,
  },
  /// `RunOptions.modelRouter`'s decision for the coming root provider call.
  #[serde(rename_all = "camelCase")]
  ModelRoute {
    run_id: String,
    decision: super::route::RouteDecision,
  },
  #[serde(rename_all = "camelCase")]
  RunEnd { run_id: String, result: RunOutput },
  #[serde(rename_all = "camelCase")]
  RunError {
    run_id: String,
    code: String,
    message: String,
    receipt: ReceiptOut,
  },
}

impl RunEvent {
  pub fn kind(&self) -> &'static str {
    match self {
      RunEvent::RunStart { .. } => "run_start",
      RunEvent::Pi { .. } => "pi",
      RunEvent::NestedToolStart { .. } => "nested_tool_start",
      RunEvent::NestedToolEnd { .. } => "nested_tool_end",
      RunEvent::ModelRoute { .. } => "model_route",
      RunEvent::RunEnd { .. } => "run_end",
      RunEvent::RunError { .. } => "run_error",
    }
  }

  /// `run_end` or `run_error`: nothing follows it.
  pub fn is_terminal(&self) -> bool {
    matches!(self, RunEvent::RunEnd { .. } | RunEvent::RunError { .. })
  }
}

/// Pi agent-core's events, in its shapes (the kernel emits them for the root run of a
/// `stream()`; the assistant message's `message_start`/`message_update`/`message_end` come from
/// the model transport itself).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PiEvent {
  AgentStart,
  TurnStart,
  MessageStart {
    message: Message,
  },
  MessageEnd {
    message: Message,
  },
  #[serde(rename_all = "camelCase")]
  ToolExecutionStart {
    tool_call_id: String,
    tool_name: String,
    args: Value,
  },
  #[serde(rename_all = "camelCase")]
  ToolExecutionEnd {
    tool_call_id: String,
    tool_name: String,
    result: ToolResultValue,
    is_error: bool,
  },
  #[serde(rename_all = "camelCase")]
  TurnEnd {
    message: Message,
    tool_results: Vec<Message>,
  },
  AgentEnd,
}

impl PiEvent {
  pub fn kind(&self) -> &'static str {
    match self {
      PiEvent::AgentStart => "agent_start",
      PiEvent::TurnStart => "turn_start",
      PiEvent::MessageStart { .. } => "message_start",
      PiEvent::MessageEnd { .. } => "message_end",
      PiEvent::ToolExecutionStart { .. } => "tool_execution_start",
      PiEvent::ToolExecutionEnd { .. } => "tool_execution_end",
      PiEvent::TurnEnd { .. } => "turn_end",
      PiEvent::AgentEnd => "agent_end",
    }
  }
}
