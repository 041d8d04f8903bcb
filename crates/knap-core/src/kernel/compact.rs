//! `budget.onExhausted: "compact"`: between turns, when the remaining budget is below
//! `COMPACTION_TRIGGER_MULTIPLIER` × the next working call's cold worst case, an agent run (the
//! root, or a subagent on its wallet) walks the ladder — evict old tool outputs; else, in
//! `mode: "new-context"`, roll over to a context seeded by the user's `newContext` callback; else
//! summarize the history with one metered provider call (on `summarizerModel` when its window
//! holds the history) — and the provider sees the smaller context from the next call on. The
//! host's transcript and the `turn` events stay append-only; a durable root journals the new
//! context as a `snapshot`, so a resume goes on from it (counters and the previous summary
//! included) instead of paying for the same compaction again.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::budget::{catalog_price, Denomination, Meter, Price};
use super::host::{ModelCall, NewContextInput};
use super::level::Level;
use super::message::{now_ms, Message, StopReason, UserContent, UserMessage};
use super::receipt::ReceiptCompaction;
use super::result::RunFailure;
use super::run::tool_schemas;
use super::spec::ModelRef;
use crate::code::{Code, Error};
use crate::compaction::{self, Compaction, ContextSummary, Mode, Plan};
use crate::durable::journal::ResumeState;
use crate::limits::{COMPACTION_TRIGGER_MULTIPLIER, SUMMARY_SCHEMA_VERSION};

pub(super) struct CompactionState {
  pub options: Compaction,
  /// Compactions of this agent run (a resumed root counts its journaled ones).
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
  pinned_ids: Vec<String>,
  elided: Vec<String>,
  metered_cost: f64,
  summary: Option<ContextSummary>,
}

impl Level {
  /// An agent run whose budget (or wallet) compacts keeps its provider-visible context from the
  /// start.
  pub(super) fn enable_compaction(&mut self, options: Compaction) {
    self.transcript.keep_context();
    self.compaction = Some(CompactionState {
      options,
      used: 0,
      previous: None,
    });
  }

  /// A resumed durable root whose journal holds compactions: the context goes on from the last
  /// one's `snapshot`, with the count and the previous summary it left.
  pub(super) fn restore_compaction(&mut self, state: &ResumeState) {
    let (Some(c), true) = (&mut self.compaction, state.compactions > 0) else {
      return;
    };
    c.used = state.compactions;
    c.previous = compaction::latest_summary(&state.messages);
    self.transcript.replace_context(state.messages.clone());
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
    // Every turn of a budgeted run gets here: the size is the transcript's running count (the
    // budget's own input ceiling, uncapped), and the context is copied only once the trigger holds.
    let pre = Meter::input_ceiling(self.transcript.context_bytes(), self.transcript.message_count, None);
    debug_assert_eq!(pre, size(fixed, self.transcript.context()), "the running count is the context's size");
    let next_call = meter.cost_of(capped(pre, window), model_cap, price.as_ref());
    if meter.remaining() >= COMPACTION_TRIGGER_MULTIPLIER * next_call {
      return Ok(());
    }
    let messages = self.transcript.context().to_vec();
    let options = state.options.clone();
    let plan = compaction::plan(&messages, &options);
    let (evicted, evicted_digests) = compaction::evict(&messages, plan.tail_start);
    let evicted_post = size(fixed, &evicted);
    let eviction = (!evicted_digests.is_empty() && evicted_post < pre).then(|| Compacted {
      tier: "evicted",
      context: evicted.clone(),
      post: evicted_post,
      pinned_ids: plan.pinned_ids.clone(),
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
      eviction => {
        // The ladder: rollover (new-context mode), then the summarizer; each declines by
        // falling through, and eviction is the last resort.
        let rolled = match options.mode {
          Mode::NewContext => self.roll_over(&messages, pre, fixed, &options).await?,
          Mode::Summarize => None,
        };
        let replaced = match rolled {
          Some(r) => Some(r),
          None => self.summarize(system, &messages, &evicted, &plan, &options, pre).await?,
        };
        replaced.or(eviction)
      }
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
      pinned_segment_ids: done.pinned_ids,
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
    if let (true, Some(d)) = (self.root, self.shared.durable.clone()) {
      // The new context, durable with the summarizer's settlement before the next call.
      let written = match d.snapshot(&done.context) {
        Ok(()) => d.flush().await,
        Err(e) => Err(e),
      };
      if let Err(e) = written {
        return Err(self.fail(e));
      }
    }
    self.transcript.replace_context(done.context);
    Ok(())
  }

  /// The rollover rung (`mode: "new-context"`): the `newContext` callback persists the window
  /// and answers with a seed; the context becomes the pinned user messages and the seed, kept
  /// when that saves at least `minYieldTokens`. No provider call. `Ok(None)` declines (the pins
  /// alone would not yield enough, so the callback is not asked; or the seed is too big).
  async fn roll_over(
    &mut self,
    messages: &[Message],
    pre: u64,
    fixed: usize,
    options: &Compaction,
  ) -> Result<Option<Compacted>, RunFailure> {
    let (pinned, pinned_ids) = compaction::pins(messages, messages.len(), options);
    let pins: Vec<Message> = pinned.iter().map(|&i| messages[i].clone()).collect();
    if pre.saturating_sub(size(fixed, &pins)) < options.min_yield_tokens {
      return Ok(None);
    }
    let generation = self.compaction.as_ref().map_or(0, |c| c.used) + 1;
    let input = NewContextInput {
      messages: messages.to_vec(),
      generation,
      agent_path: self.agent_path.clone(),
    };
    let Some(asked) = self.shared.host.new_context(input) else {
      return Ok(None);
    };
    let cancel = self.shared.cancel.clone();
    let answer = tokio::select! {
      a = asked => a,
      _ = cancel.cancelled() => return Err(self.fail(Error::coded(Code::RunAborted, "the run was aborted"))),
    };
    let seed = match answer {
      Ok(seed) => seed,
      // The user's persistence failed: the run fails with its error, as a router's does.
      Err(e) => {
        let code = e.code.as_deref().and_then(Code::parse).unwrap_or(Code::AgentRunFailed);
        return Err(self.fail(Error::new(code, e.message)));
      }
    };
    let context = compaction::rolled_over(messages, &pinned, &seed, now_ms());
    let post = size(fixed, &context);
    if pre.saturating_sub(post) < options.min_yield_tokens {
      return Ok(None);
    }
    Ok(Some(Compacted {
      tier: "new-context",
      context,
      post,
      pinned_ids,
      elided: compaction::sources(messages, &pinned)
        .into_iter()
        .map(|s| s.sha256)
        .collect(),
      metered_cost: 0.0,
      summary: None,
    }))
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
    let fixed = self.transcript.fixed_bytes();
    let history_tokens = size(fixed, &history);
    // `summarizerModel` only when its window holds the history; else the working model.
    let candidate: ModelRef = match &options.summarizer_model {
      Some(s) if s.context_window.is_none_or(|w| w == 0 || w >= history_tokens) => s.clone(),
      _ => self.agent.model.clone(),
    };
    let candidate_price = self.price_of(&candidate);
    if meter.denomination == Denomination::Usd && candidate_price.is_none() {
      return Ok(None);
    }
    let summarizer_cost = meter.cost_of(
      capped(history_tokens, candidate.context_window),
      options.summary_max_tokens,
      candidate_price.as_ref(),
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
    let working = meter.cost_of(
      capped(projected, self.agent.model.context_window),
      self.model_cap(),
      self.accounting.price.as_ref(),
    );
    if meter.remaining() < summarizer_cost + options.headroom_calls as f64 * working {
      return Ok(None);
    }
    // A paid root summarizer is routed too (`role: "compaction"`, `currentModel` the candidate);
    // its decision serves this call only.
    let chosen = match self.route("compaction", Some((&candidate, history_tokens))).await {
      Ok(chosen) => chosen,
      Err(e) => return Err(self.fail(e)),
    };
    let (target, target_price) = match chosen {
      Some(c) => (c.model, c.price),
      None => (candidate, candidate_price),
    };
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
    // `summarizerModel` has its own handle; any other target is the working model's handle,
    // named when a router picked another model of its provider.
    let pinned_model = options.summarizer_model.as_ref() == Some(&target);
    let call = ModelCall {
      // Its own conversation: the summarizer sees the same system prompt and tools as a working
      // call, and the run's conversation is left as it was.
      conversation: self.shared.next_conversation.fetch_add(1, Ordering::Relaxed),
      model_key: target.key,
      model: if pinned_model { None } else { self.call_model(&target) },
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
    let working_price = std::mem::replace(&mut self.accounting.price, target_price);
    let (receipt_call, amount) = self.accounting.account(&message, None, &provider, &model);
    let settled = match &durable {
      Some(d) => d.call_settled(&self.path, "compaction", receipt_call, amount),
      None => Ok(()),
    };
    self.accounting.price = working_price;
    if let Err(e) = settled {
      return Err(self.fail(e));
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
      pinned_ids: plan.pinned_ids.clone(),
      elided: sources.into_iter().map(|s| s.sha256).collect(),
      metered_cost: amount,
      summary: Some(summary),
    }))
  }

  /// The catalog price of a model: the working model's own price when it is that model.
  fn price_of(&self, model: &ModelRef) -> Option<Price> {
    if model.provider == self.agent.model.provider && model.id == self.agent.model.id {
      return self.accounting.price;
    }
    catalog_price(&model.provider, &model.id)
  }
}
