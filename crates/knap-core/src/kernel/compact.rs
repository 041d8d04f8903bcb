//! `budget.onExhausted: "compact"`: between turns, when the remaining budget is below
//! `COMPACTION_TRIGGER_MULTIPLIER` × the next working call's cold worst case, the root run walks
//! the ladder — evict old tool outputs, else summarize the history with one metered provider
//! call — and the provider sees the smaller context from the next call on. The host's transcript
//! and the journal stay append-only: a resume rebuilds the uncompacted transcript (as Pi does).

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::budget::{Denomination, Meter};
use super::host::ModelCall;
use super::level::Level;
use super::message::{now_ms, Message, StopReason, UserContent, UserMessage};
use super::receipt::ReceiptCompaction;
use super::result::RunFailure;
use super::run::tool_schemas;
use crate::code::{Code, Error};
use crate::compaction::{self, Compaction, ContextSummary, Plan};
use crate::limits::{COMPACTION_TRIGGER_MULTIPLIER, SUMMARY_SCHEMA_VERSION};

pub(super) struct CompactionState {
  pub options: Compaction,
  pub used: u64,
  /// The last accepted summary (a later one must keep its anchors).
  pub previous: Option<ContextSummary>,
}

/// Token size of a context: the same arithmetic as the budget's input ceiling, uncapped.
fn size(fixed_bytes: usize, messages: &[Message]) -> u64 {
  let bytes = fixed_bytes + messages.iter().map(Message::json_len).sum::<usize>();
  Meter::input_ceiling(bytes, messages.len(), None)
}

fn capped(tokens: u64, window: Option<u64>) -> u64 {
  match window {
    Some(w) if w > 0 => tokens.min(w),
    _ => tokens,
  }
}

/// What a rung produced.
struct Compacted {
  tier: &'static str,
  context: Vec<Message>,
  post: u64,
  elided: Vec<String>,
  metered_cost: f64,
  summary: Option<ContextSummary>,
}

impl Level {
  /// A root run whose budget compacts keeps its provider-visible context from the start.
  pub(super) fn enable_compaction(&mut self, options: Compaction) {
    self.transcript.keep_context();
    self.compaction = Some(CompactionState {
      options,
      used: 0,
      previous: None,
    });
  }

  /// After a turn that requested tools: compact when the trigger holds.
  pub(super) async fn maybe_compact(&mut self, system: &str) -> Result<(), RunFailure> {
    let Some(state) = &self.compaction else {
      return Ok(());
    };
    if state.used >= state.options.max_compactions || self.stop.is_some() {
      return Ok(());
    }
    if self.shared.deadline.is_some_and(|d| Instant::now() >= d) || self.shared.cancel.is_cancelled() {
      return Ok(());
    }
    let Some(meter) = self
      .accounting
      .meter
      .as_ref()
      .map(super::budget::MeterCell::snapshot)
    else {
      return Ok(());
    };
    let price = self.accounting.price;
    let window = self.agent.model.context_window;
    let model_cap = self.model_cap();
    let fixed = self.transcript.fixed_bytes();
    let messages = self.transcript.context().to_vec();
    let pre = size(fixed, &messages);
    let next_call = meter.cost_of(capped(pre, window), model_cap, price.as_ref());
    if meter.remaining() >= COMPACTION_TRIGGER_MULTIPLIER * next_call {
      return Ok(());
    }
    let options = state.options.clone();
    let plan = compaction::plan(&messages, &options);
    let (evicted, evicted_digests) = compaction::evict(&messages, plan.tail_start);
    let evicted_post = size(fixed, &evicted);
    let eviction = (!evicted_digests.is_empty() && evicted_post < pre).then(|| Compacted {
      tier: "evicted",
      context: evicted.clone(),
      post: evicted_post,
      elided: evicted_digests,
      metered_cost: 0.0,
      summary: None,
    });
    let fits = meter.cost_of(capped(evicted_post, window), model_cap, price.as_ref()) <= meter.remaining();
    // The last working call's provider-reported cache read (before a summarizer call lands).
    let cache_state = match self.accounting.receipt.calls.last() {
      None => "unknown",
      Some(c) if c.cache_read_tokens > 0 => "warm",
      Some(_) => "cold",
    };
    let chosen = match eviction {
      Some(e) if fits => Some(e),
      eviction => match self.summarize(system, &messages, &evicted, &plan, &options, pre).await? {
        Some(s) => Some(s),
        // Each summarizer precondition falls back to eviction, or declines.
        None => eviction,
      },
    };
    let Some(done) = chosen else {
      return Ok(());
    };
    let state = self.compaction.as_mut().expect("checked above");
    state.used += 1;
    if let Some(s) = done.summary.clone() {
      state.previous = Some(s);
    }
    let entry = ReceiptCompaction {
      index: self.accounting.receipt.compactions.len() as u64,
      tier: done.tier,
      pre_tokens: pre,
      post_tokens: done.post,
      pinned_segment_ids: plan.pinned_ids.clone(),
      elided_segment_digests: done.elided,
      summary_schema_version: done.summary.as_ref().map(|_| SUMMARY_SCHEMA_VERSION),
      cache_state,
      metered_cost: super::budget::round10(done.metered_cost),
      metered_basis: "measured",
      modeled_net_tokens: 0,
      modeled_basis: "modeled",
      working_calls_after: 0,
      calls_before: self.accounting.model_calls as u64,
    };
    self.accounting.receipt.compactions.push(entry);
    self.transcript.replace_context(done.context);
    if let (true, Some(d)) = (self.root, &self.shared.durable) {
      if let Err(e) = d.flush().await {
        return Err(self.fail(e));
      }
    }
    Ok(())
  }

  /// The summarize rung: `Ok(None)` when a precondition fails or the summary is unusable.
  async fn summarize(
    &mut self,
    system: &str,
    messages: &[Message],
    evicted: &[Message],
    plan: &Plan,
    options: &Compaction,
    pre: u64,
  ) -> Result<Option<Compacted>, RunFailure> {
    let Some(meter) = self
      .accounting
      .meter
      .as_ref()
      .map(super::budget::MeterCell::snapshot)
    else {
      return Ok(None);
    };
    let price = self.accounting.price;
    if meter.denomination == Denomination::Usd && price.is_none() {
      return Ok(None);
    }
    let head = &evicted[..plan.tail_start];
    let sources = compaction::sources(head, &plan.pinned);
    if sources.is_empty() {
      return Ok(None);
    }
    let previous = self.compaction.as_ref().and_then(|s| s.previous.clone());
    let instruction = compaction::summarization_instruction(previous.as_ref(), &sources);
    let mut history = evicted.to_vec();
    history.push(Message::User(UserMessage {
      content: UserContent::Text(instruction),
      timestamp: Some(now_ms()),
    }));
    let window = self.agent.model.context_window;
    let fixed = self.transcript.fixed_bytes();
    let summarizer_cost = meter.cost_of(
      capped(size(fixed, &history), window),
      options.summary_max_tokens,
      price.as_ref(),
    );
    let kept: Vec<Message> = plan
      .pinned
      .iter()
      .map(|&i| messages[i].clone())
      .chain(messages[plan.tail_start..].iter().cloned())
      .collect();
    // Head + worst-case summary + tail.
    let projected = size(fixed, &kept) + options.summary_max_tokens + crate::limits::BUDGET_FRAMING_TOKENS_PER_MESSAGE;
    if pre.saturating_sub(projected) < options.min_yield_tokens {
      return Ok(None);
    }
    let working = meter.cost_of(capped(projected, window), self.model_cap(), price.as_ref());
    if meter.remaining() < summarizer_cost + options.headroom_calls as f64 * working {
      return Ok(None);
    }
    // A paid summarizer is routed too (`role: "compaction"`); its decision serves this call only.
    let chosen = match self.route("compaction").await {
      Ok(chosen) => chosen,
      Err(e) => return Err(self.fail(e)),
    };
    let target = chosen.as_ref().map_or_else(|| self.agent.model.clone(), |c| c.model.clone());
    let (provider, model) = (target.provider.clone(), target.id.clone());
    // The summarizer takes a reservation too (a tranche's `atCall` counts it).
    if let Some(m) = &self.accounting.meter {
      m.lock().calls += 1;
    }
    let durable = self.shared.durable.clone();
    if let Some(d) = &durable {
      if let Err(e) = d.call_started(&self.path, "compaction", &provider, &model).await {
        return Err(self.fail(e));
      }
    }
    let call = ModelCall {
      // Its own conversation: the summarizer sees the same system prompt and tools as a working
      // call, and the run's conversation is left as it was.
      conversation: self.shared.next_conversation.fetch_add(1, Ordering::Relaxed),
      model_key: self.agent.model.key,
      model: self.call_model(&target),
      append: history,
      system_prompt: Some(system.to_string()),
      tools: Some(tool_schemas(&self.agent)),
      max_tokens: Some(options.summary_max_tokens),
      reasoning: None,
      context: None,
      speculation: None,
    };
    let cancel = self.shared.cancel.clone();
    let reply = tokio::select! {
      r = self.shared.host.model_call(call) => r,
      _ = cancel.cancelled() => return Err(self.fail(Error::coded(Code::RunAborted, "the run was aborted"))),
    };
    let message = match reply {
      Ok(m) => m,
      Err(_) => {
        // No stream: the intent closes unbilled, and the run goes on uncompacted.
        if let Some(d) = &durable {
          let _ = d.call_abandoned(&self.path).await;
        }
        return Ok(None);
      }
    };
    self.note_usage(&target, &message);
    // Priced for the model that served it.
    let working_price = chosen.map(|c| std::mem::replace(&mut self.accounting.price, c.price));
    let (receipt_call, amount) = self.accounting.account(&message, None, &provider, &model);
    if let Some(d) = &durable {
      if let Err(e) = d.call_settled(&self.path, "compaction", receipt_call, amount) {
        return Err(self.fail(e));
      }
    }
    if let Some(price) = working_price {
      self.accounting.price = price;
    }
    if matches!(message.stop_reason, StopReason::Error | StopReason::Aborted) {
      return Ok(None);
    }
    let Ok(summary) = compaction::parse_summary(&message.text()) else {
      return Ok(None);
    };
    if !compaction::validate_transition(previous.as_ref(), &summary).ok {
      return Ok(None);
    }
    let context = compaction::summarized(messages, plan, &summary, now_ms());
    let post = size(fixed, &context);
    if post >= pre {
      return Ok(None);
    }
    Ok(Some(Compacted {
      tier: "summarized",
      context,
      post,
      elided: sources.into_iter().map(|s| s.sha256).collect(),
      metered_cost: amount,
      summary: Some(summary),
    }))
  }
}
