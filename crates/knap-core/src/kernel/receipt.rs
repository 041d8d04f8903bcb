//! The run receipt, `caveman.agent.run-receipt.v1`.

use serde::Serialize;
use serde_json::Value;

pub const RECEIPT_SCHEMA: &str = "caveman.agent.run-receipt.v1";

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptCall {
  pub provider: String,
  pub model: String,
  pub input_tokens: u64,
  pub output_tokens: u64,
  pub cache_read_tokens: u64,
  pub cache_write_tokens: u64,
  pub reasoning_tokens: u64,
  pub estimated_usd: f64,
  pub unpriced: bool,
  pub usage_basis: &'static str,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub clamped_output_tokens: Option<u64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReceiptTool {
  pub name: String,
  pub calls: u64,
  pub errors: u64,
  #[serde(skip_serializing_if = "is_zero")]
  pub denied: u64,
}

fn is_zero(n: &u64) -> bool {
  *n == 0
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BreakerEvent {
  pub kind: &'static str,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub tool: Option<String>,
  pub count: u64,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub signature: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
  pub schema: &'static str,
  pub run_id: String,
  pub agent_id: String,
  pub basis: &'static str,
  pub claim_basis: &'static str,
  pub stop_reason: String,
  pub denomination: &'static str,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub max: Option<f64>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub released: Option<f64>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub spent: Option<f64>,
  pub cap_breached: bool,
  pub overspent: f64,
  pub total_estimated_usd: f64,
  pub total_tokens: u64,
  pub unpriced: bool,
  pub calls: Vec<ReceiptCall>,
  pub tools: Vec<ReceiptTool>,
  /// Each subagent call's own receipt.
  pub subagents: Vec<Receipt>,
  pub tranches: Vec<Value>,
  pub breakers: Vec<BreakerEvent>,
  pub compactions: Vec<ReceiptCompaction>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub resume: Option<ReceiptResume>,
}

/// One compaction (`receipt.compactions[]`). `working_calls_after` and `modeled_net_tokens` are
/// filled in when the receipt is finished (they count the calls made after it).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptCompaction {
  pub index: u64,
  pub tier: &'static str,
  pub pre_tokens: u64,
  pub post_tokens: u64,
  pub pinned_segment_ids: Vec<String>,
  pub elided_segment_digests: Vec<String>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub summary_schema_version: Option<u64>,
  pub cache_state: &'static str,
  pub metered_cost: f64,
  pub metered_basis: &'static str,
  pub modeled_net_tokens: i64,
  pub modeled_basis: &'static str,
  pub working_calls_after: u64,
  /// Working calls made before this compaction (not serialized).
  #[serde(skip)]
  pub calls_before: u64,
}

impl ReceiptCompaction {
  /// `modeledNetTokens = (pre − post) × after − (after > 0 ? post : 0)`, at run end.
  pub fn finish(&mut self, working_calls: u64) {
    let after = working_calls.saturating_sub(self.calls_before);
    self.working_calls_after = after;
    let saved = self.pre_tokens as i64 - self.post_tokens as i64;
    self.modeled_net_tokens = saved * after as i64 - if after > 0 { self.post_tokens as i64 } else { 0 };
  }
}

/// `receipt.resume` of a resumed durable run.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptResume {
  pub attempts: u64,
  pub prior_calls: u64,
  pub prior_estimated_usd: f64,
  pub prior_tokens: u64,
  pub prior_unpriced: bool,
  pub possible_double_count_calls: u64,
  pub discarded_partial_turn: bool,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub prior_settled: Option<f64>,
}

impl Receipt {
  pub fn new(run_id: &str, agent_id: &str) -> Self {
    Self {
      schema: RECEIPT_SCHEMA,
      run_id: run_id.into(),
      agent_id: agent_id.into(),
      basis: "estimated_list_price_subtotal",
      claim_basis: "inferred",
      stop_reason: "complete".into(),
      denomination: "none",
      max: None,
      released: None,
      spent: None,
      cap_breached: false,
      overspent: 0.0,
      total_estimated_usd: 0.0,
      total_tokens: 0,
      unpriced: false,
      calls: Vec::new(),
      tools: Vec::new(),
      subagents: Vec::new(),
      tranches: Vec::new(),
      breakers: Vec::new(),
      compactions: Vec::new(),
      resume: None,
    }
  }

  fn tool(&mut self, name: &str) -> &mut ReceiptTool {
    if let Some(i) = self.tools.iter().position(|t| t.name == name) {
      return &mut self.tools[i];
    }
    self.tools.push(ReceiptTool {
      name: name.into(),
      calls: 0,
      errors: 0,
      denied: 0,
    });
    self.tools.last_mut().expect("just pushed")
  }

  /// `tool_execution_start`.
  pub fn record_call(&mut self, name: &str) {
    self.tool(name).calls += 1;
  }

  pub fn record_error(&mut self, name: &str) {
    self.tool(name).errors += 1;
  }

  pub fn record_denial(&mut self, name: &str) {
    self.tool(name).denied += 1;
  }

  pub fn to_value(&self) -> Value {
    serde_json::to_value(self).unwrap_or(Value::Null)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn an_empty_receipt_has_the_references_keys_in_order() {
    let text = serde_json::to_string(&Receipt::new("r1", "a")).unwrap();
    assert_eq!(
      text,
      r#"{"schema":"caveman.agent.run-receipt.v1","runId":"r1","agentId":"a","basis":"estimated_list_price_subtotal","claimBasis":"inferred","stopReason":"complete","denomination":"none","capBreached":false,"overspent":0.0,"totalEstimatedUsd":0.0,"totalTokens":0,"unpriced":false,"calls":[],"tools":[],"subagents":[],"tranches":[],"breakers":[],"compactions":[]}"#
    );
  }
}
