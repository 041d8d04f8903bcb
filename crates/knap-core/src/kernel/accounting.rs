//! One agent run's accounting: usage and money, the budget meter, the receipt, call counters,
//! and what a resumed attempt carries over from earlier ones.

use std::collections::HashMap;

use super::budget::{round10, Denomination, MeterCell, Price, Usage};
use super::message::AssistantMessage;
use super::receipt::{Receipt, ReceiptCall, ReceiptResume};
use super::result::{RunResult, RunStopReason};
use crate::durable::journal::{PriorTotals, ResumeState};

#[derive(Default, Clone, Copy, Debug, PartialEq)]
pub(super) struct Totals {
  pub input: u64,
  pub output: u64,
  pub cache_read: u64,
  pub cache_write: u64,
  pub reasoning: u64,
  pub cost_usd: f64,
  pub unpriced: bool,
  pub any_call: bool,
}

impl Totals {
  fn add_usage(&mut self, u: &Usage, cost: f64, unpriced: bool) {
    self.input += u.input;
    self.output += u.output;
    self.cache_read += u.cache_read;
    self.cache_write += u.cache_write;
    self.reasoning += u.reasoning;
    self.cost_usd += cost;
    self.unpriced |= unpriced;
    self.any_call = true;
  }

  pub fn add(&mut self, o: &Totals) {
    self.input += o.input;
    self.output += o.output;
    self.cache_read += o.cache_read;
    self.cache_write += o.cache_write;
    self.reasoning += o.reasoning;
    self.cost_usd += o.cost_usd;
    self.unpriced |= o.unpriced;
    self.any_call |= o.any_call;
  }

  fn of_prior(p: &PriorTotals) -> Self {
    Self {
      input: p.input,
      output: p.output,
      cache_read: p.cache_read,
      cache_write: p.cache_write,
      reasoning: p.reasoning,
      cost_usd: p.estimated_usd,
      unpriced: p.unpriced,
      any_call: true,
    }
  }

  pub fn tokens(&self) -> u64 {
    self.input + self.output + self.cache_read + self.cache_write
  }
}

/// What a finished subagent call hands its parent's accounting.
pub(super) struct ChildReport {
  pub receipt: Receipt,
  pub usage: Totals,
  pub spent: f64,
}

impl ChildReport {
  pub fn of(receipt: Receipt, result: Option<&RunResult>) -> Self {
    let usage = Totals {
      input: result.map_or(0, |r| r.input_tokens),
      output: result.map_or(0, |r| r.output_tokens),
      cache_read: result.map_or(0, |r| r.cache_read_tokens),
      cache_write: result.map_or(0, |r| r.cache_write_tokens),
      reasoning: result.map_or(0, |r| r.reasoning_tokens),
      cost_usd: receipt.total_estimated_usd,
      unpriced: receipt.unpriced,
      any_call: !receipt.calls.is_empty(),
    };
    Self {
      spent: receipt.spent.unwrap_or(0.0),
      receipt,
      usage,
    }
  }
}

pub(super) struct Accounting {
  pub meter: Option<MeterCell>,
  pub price: Option<Price>,
  pub receipt: Receipt,
  totals: Totals,
  /// Provider calls made (this attempt and, when resumed, the root's earlier ones).
  pub model_calls: u32,
  /// Tool calls counted toward `maxToolCalls` (nested calls included, containers not).
  pub tool_budget_count: u32,
  /// Composite containers started: their own counter, checked against `maxToolCalls`.
  pub container_count: u32,
  /// `RunResult.toolCalls`.
  pub tool_names: Vec<String>,
  /// Calls per subagent tool name (`maxCalls`).
  pub subagent_calls: HashMap<String, u32>,
  /// Set on a resumed attempt: `receipt.resume` and the prior usage.
  resume: Option<(ReceiptResume, PriorTotals)>,
}

impl Accounting {
  pub fn new(receipt: Receipt, meter: Option<MeterCell>, price: Option<Price>) -> Self {
    Self {
      meter,
      price,
      receipt,
      totals: Totals::default(),
      model_calls: 0,
      tool_budget_count: 0,
      container_count: 0,
      tool_names: Vec::new(),
      subagent_calls: HashMap::new(),
      resume: None,
    }
  }

  pub fn metered(&self) -> bool {
    self.meter.is_some()
  }

  pub fn resumed(&self) -> bool {
    self.resume.is_some()
  }

  /// A resumed attempt: settled spend preloaded, counters and the prior usage restored.
  pub fn restore(&mut self, state: &ResumeState) {
    if let Some(m) = &self.meter {
      // `restorePrior`: tranches first, then settled spend, then the call index.
      let mut m = m.lock();
      for t in &state.prior_tranches {
        m.restore_tranche(t.clone());
      }
      m.settle(state.prior_settled);
      m.calls = state.prior_root_meter_calls;
    }
    self.model_calls = state.prior_root_model_calls as u32;
    for (name, is_error) in &state.prior_tool_events {
      self.record_call(name);
      if *is_error {
        self.receipt.record_error(name);
      }
    }
    let p = &state.prior_totals;
    let resume = ReceiptResume {
      attempts: state.attempts + 1,
      prior_calls: state.prior_calls,
      prior_estimated_usd: round10(p.estimated_usd),
      prior_tokens: p.input + p.output + p.cache_read + p.cache_write,
      prior_unpriced: p.unpriced,
      possible_double_count_calls: state.possible_double_count,
      discarded_partial_turn: state.discarded_partial_turn,
      prior_settled: self.meter.is_some().then(|| round10(state.prior_settled)),
    };
    self.resume = Some((resume, p.clone()));
  }

  /// `tool_execution_start`: the receipt, `toolCalls` and the `maxToolCalls` counter.
  pub fn record_call(&mut self, name: &str) {
    self.receipt.record_call(name);
    self.tool_names.push(name.to_string());
    self.tool_budget_count += 1;
  }

  /// `tool_execution_start` of a composite container: the receipt and `toolCalls`, and the
  /// containers' own counter instead of `maxToolCalls`.
  pub fn record_container(&mut self, name: &str) {
    self.receipt.record_call(name);
    self.tool_names.push(name.to_string());
    self.container_count += 1;
  }

  /// Accounts a provider message; returns its receipt entry and the amount it settled.
  pub fn account(
    &mut self,
    message: &AssistantMessage,
    clamped: Option<u64>,
    provider: &str,
    model: &str,
  ) -> (&ReceiptCall, f64) {
    let usage = Usage::of(&message.usage);
    let unpriced = self.price.is_none();
    let cost = self.price.as_ref().map(|p| usage.cost(p)).unwrap_or(0.0);
    self.totals.add_usage(&usage, cost, unpriced);
    let mut amount = 0.0;
    if let Some(m) = &self.meter {
      let mut m = m.lock();
      amount = match m.denomination {
        Denomination::Usd => cost,
        Denomination::Tokens => usage.total() as f64,
      };
      m.settle(amount);
    }
    self.receipt.calls.push(ReceiptCall {
      provider: message.provider.as_deref().unwrap_or(provider).to_string(),
      model: message.model.as_deref().unwrap_or(model).to_string(),
      input_tokens: usage.input,
      output_tokens: usage.output,
      cache_read_tokens: usage.cache_read,
      cache_write_tokens: usage.cache_write,
      reasoning_tokens: usage.reasoning,
      estimated_usd: round10(cost),
      unpriced,
      usage_basis: "provider_reported",
      clamped_output_tokens: clamped,
    });
    (self.receipt.calls.last().expect("just pushed"), amount)
  }

  /// A subagent call's receipt, usage and spend.
  pub fn add_child(&mut self, child: ChildReport) {
    self.receipt.subagents.push(child.receipt);
    self.totals.add(&child.usage);
    if let Some(m) = &self.meter {
      m.lock().settle(child.spent);
    }
  }

  /// This attempt's totals plus those of earlier attempts of a resumed durable run.
  pub fn all_totals(&self) -> Totals {
    let mut t = self.totals;
    if let Some((_, p)) = &self.resume {
      t.add(&Totals::of_prior(p));
    }
    t
  }

  /// Fills in the receipt's stop reason, money and totals.
  pub fn finish_receipt(&mut self, stop: RunStopReason) {
    let t = self.all_totals();
    let r = &mut self.receipt;
    r.stop_reason = stop.as_str().to_string();
    if let Some(m) = &self.meter {
      let m = m.lock();
      r.denomination = m.denomination.as_str();
      r.max = Some(m.max);
      r.released = Some(round10(m.released));
      r.spent = Some(round10(m.spent));
      r.overspent = m.overspent;
      r.cap_breached = m.cap_breached;
      r.tranches = m
        .tranches
        .iter()
        .filter_map(|t| serde_json::to_value(t).ok())
        .collect();
    }
    r.cap_breached |= r.subagents.iter().any(|s| s.cap_breached);
    r.total_estimated_usd = round10(t.cost_usd);
    r.total_tokens = t.tokens();
    r.unpriced = t.unpriced;
    r.resume = self.resume.as_ref().map(|(v, _)| v.clone());
    for c in &mut r.compactions {
      c.finish(self.model_calls as u64);
    }
  }
}
