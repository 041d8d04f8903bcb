//! `RunResult`, and a run's failure: typed until the boundary serialises them once.

use serde::Serialize;
use serde_json::Value;

use super::receipt::Receipt;
use crate::code::{Code, Error};

/// `RunResult` of the reference, in its key order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
  pub run_id: String,
  pub agent_id: String,
  pub text: String,
  pub context_bill: Empty,
  pub usage_basis: &'static str,
  pub input_tokens: u64,
  pub output_tokens: u64,
  pub cache_read_tokens: u64,
  pub cache_write_tokens: u64,
  pub reasoning_tokens: u64,
  pub reasoning_usage_basis: &'static str,
  pub cost_usd: f64,
  pub price_basis: &'static str,
  pub mode: &'static str,
  pub provider: String,
  pub model: String,
  pub latency_ms: u64,
  pub tool_calls: Vec<String>,
  #[serde(rename = "evaluatedTransformIDs")]
  pub evaluated_transform_ids: [(); 0],
  #[serde(rename = "transformIDs")]
  pub transform_ids: [(); 0],
  pub transform_failures: [(); 0],
  pub transform_trace: [(); 0],
  pub recovery_resolved: bool,
  pub stop_reason: &'static str,
  pub cap_breached: bool,
  pub overspent: f64,
  pub receipt: Receipt,
  pub claim_basis: &'static str,
  pub unlocked: bool,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub output: Option<Value>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub resumed: Option<bool>,
}

/// `RunStopReason`: why the loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStopReason {
  Complete,
  CallBudgetExhausted,
  Deadline,
  BudgetExhausted,
  LoopDetected,
  NoProgress,
}

impl RunStopReason {
  pub fn as_str(self) -> &'static str {
    match self {
      RunStopReason::Complete => "complete",
      RunStopReason::CallBudgetExhausted => "call_budget_exhausted",
      RunStopReason::Deadline => "deadline",
      RunStopReason::BudgetExhausted => "budget_exhausted",
      RunStopReason::LoopDetected => "loop_detected",
      RunStopReason::NoProgress => "no_progress",
    }
  }
}

/// `{}`.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Empty {}

/// What a run returns: a result built now, or the one a completed durable run journaled.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RunOutput {
  Fresh(Box<RunResult>),
  Replayed(Value),
}

impl RunOutput {
  pub fn to_value(&self) -> Value {
    serde_json::to_value(self).unwrap_or(Value::Null)
  }
}

/// A failed run's receipt: built now, journaled by an earlier attempt, or none (refused before
/// the run started).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ReceiptOut {
  Built(Box<Receipt>),
  Journaled(Value),
  None,
}

impl ReceiptOut {
  pub fn into_built(self) -> Option<Receipt> {
    match self {
      ReceiptOut::Built(r) => Some(*r),
      _ => None,
    }
  }
}

/// A run error: becomes `run_error` / `CavemanRunError` with the partial receipt.
#[derive(Debug, Clone)]
pub struct RunFailure {
  /// What failed, with the underlying message (`cave_*: …`).
  pub error: Error,
  /// The code the caller sees: the reference's coarse `errorCode()` of the message, the
  /// journaled code of a replayed failure, or the refusal's own code.
  pub code: Code,
  pub receipt: ReceiptOut,
  /// Refused before the run started (lock, journal identity, corruption): a plain error.
  pub pre_run: bool,
}

impl RunFailure {
  /// A failure inside the run, with its partial receipt.
  pub fn run(error: Error, receipt: Receipt) -> Self {
    Self {
      code: Code::for_run_failure(&error.message),
      error,
      receipt: ReceiptOut::Built(Box::new(receipt)),
      pre_run: false,
    }
  }

  /// Refused before the run started: the error's own code, no receipt.
  pub fn refused(error: Error) -> Self {
    Self {
      code: error.code.clone(),
      error,
      receipt: ReceiptOut::None,
      pre_run: true,
    }
  }

  pub fn message(&self) -> &str {
    &self.error.message
  }
}
