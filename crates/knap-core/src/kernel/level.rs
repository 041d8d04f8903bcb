//! One agent run (the root, or a subagent's child run): the turn loop, provider-call
//! admission, a turn's tool calls, and the result. Its state is split by concern: the
//! transcript, the accounting (money, receipt, counters) and the breakers.

use std::sync::Arc;
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};

use super::accounting::Accounting;
use super::admission::{Candidate, Verdict};
use super::breakers::BreakerState;
use super::budget::{catalog_price, round10, Admission, Denomination, Meter};
use super::event::{PiEvent, RunEvent};
use super::execute::{execute, execute_journaled, ExecContext, Executed};
use super::host::{DurableContext, ModelCall};
use super::journaling::ToolPlan;
use super::message::{
  now_ms, AssistantMessage, Message, StopReason, ToolCall, ToolResultMessage, UserContent, UserMessage,
};
use super::receipt::Receipt;
use super::result::{Empty, RunFailure, RunResult, RunStopReason};
use super::run::{system_prompt, tool_schemas, Shared};
use super::schema::validate;
use super::spec::{AgentSpec, ToolRuntime};
use super::transcript::Transcript;
use crate::code::{Code, Error};
use crate::durable::journal::ResumeState;
use crate::exec::BoxFuture;
use crate::limits::DEFAULT_MAX_OUTPUT_TOKENS;

pub(super) struct Level {
  pub shared: Arc<Shared>,
  pub agent: Arc<AgentSpec>,
  pub run_id: String,
  pub agent_path: Vec<String>,
  pub depth: u32,
  pub root: bool,
  /// Durable path: `""` at the root, `<tool>:<sha256(callId)>` segments below.
  pub path: String,
  pub transcript: Transcript,
  pub accounting: Accounting,
  pub breakers: BreakerState,
  pub stop: Option<RunStopReason>,
}

fn aborted() -> Error {
  Error::coded(Code::RunAborted, "the run was aborted")
}

impl Level {
  #[allow(clippy::too_many_arguments)]
  pub fn new(
    shared: Arc<Shared>,
    agent: Arc<AgentSpec>,
    run_id: String,
    agent_path: Vec<String>,
    path: String,
    depth: u32,
    meter: Option<Meter>,
    root: bool,
  ) -> Self {
    let price = catalog_price(&agent.model.provider, &agent.model.id);
    let conversation = shared
      .next_conversation
      .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let journaled = root && shared.durable.is_some();
    let receipt = Receipt::new(&run_id, &agent.id);
    Self {
      transcript: Transcript::new(conversation, meter.is_some(), journaled),
      accounting: Accounting::new(receipt, meter, price),
      breakers: BreakerState::new(shared.limits.breakers),
      stop: None,
      shared,
      agent,
      run_id,
      agent_path,
      depth,
      root,
      path,
    }
  }

  pub fn find_tool(&self, name: &str) -> Option<usize> {
    self.agent.tools.iter().position(|t| t.name == name)
  }

  /// A conversation's earlier messages, sent ahead of this run's prompt.
  pub fn seed(&mut self, history: Vec<Message>) {
    for m in history {
      self.transcript.seed(m);
    }
  }

  /// A resumed attempt: settled spend preloaded, counters and the transcript restored.
  pub fn restore(&mut self, state: &ResumeState) {
    self.accounting.restore(state);
    if state.has_completed_turn {
      // The journal already holds the prompt: the loop re-enters after the last complete turn.
      self.transcript.prompted = true;
      for m in &state.messages {
        self.transcript.seed(m.clone());
      }
      self.transcript.last_assistant = state.messages.iter().rev().find_map(|m| match m {
        Message::Assistant(a) => Some(a.clone()),
        _ => None,
      });
    }
  }

  /// Whether `pi` events go out: the root level of a `stream()`. Events are built only then, so
  /// a `run()` does not build them at all.
  fn pi_on(&self) -> bool {
    self.root && !self.shared.quiet
  }

  fn emit_pi(&self, event: impl FnOnce() -> PiEvent) {
    if self.pi_on() {
      self.shared.host.emit(RunEvent::Pi {
        run_id: self.run_id.clone(),
        event: event(),
      });
    }
  }

  fn stop_reason(&self) -> RunStopReason {
    self.stop.unwrap_or(RunStopReason::Complete)
  }

  /// A run failure with the partial receipt.
  pub fn fail(&mut self, error: Error) -> RunFailure {
    self.accounting.finish_receipt(self.stop_reason());
    let receipt = std::mem::replace(
      &mut self.accounting.receipt,
      Receipt::new(&self.run_id, &self.agent.id),
    );
    RunFailure::run(error, receipt)
  }

  /// `turn`: the messages since the last checkpoint, durable before the next call.
  async fn journal_turn(&mut self) -> Result<(), RunFailure> {
    let Some(d) = self.shared.durable.clone() else {
      return Ok(());
    };
    if let Some(messages) = self.transcript.take_unjournaled() {
      if let Err(e) = d.turn(&messages).await {
        return Err(self.fail(e));
      }
    }
    Ok(())
  }

  /// Boxed so a subagent's child run (which recurses through `execute`) has a nameable, `Send` type.
  pub fn run(self, input: UserContent, started: Instant) -> BoxFuture<Result<RunResult, RunFailure>> {
    Box::pin(self.run_inner(input, started))
  }

  async fn run_inner(mut self, input: UserContent, started: Instant) -> Result<RunResult, RunFailure> {
    if let Some(m) = &self.accounting.meter {
      if m.denomination == Denomination::Usd && self.accounting.price.is_none() {
        let (p, id) = (&self.agent.model.provider, &self.agent.model.id);
        let e = Error::coded(
          Code::BudgetDenominationUnavailable,
          format!("{p}/{id} is not in the public catalog, so a USD budget cannot meter it — use budget.maxTokens, or pick a cataloged model"),
        );
        return Err(self.fail(e));
      }
    }
    if self.agent.sandbox == "required"
      && self
        .agent
        .tools
        .iter()
        .any(|t| !matches!(t.runtime, ToolRuntime::Subagent { .. }))
    {
      return Err(self.fail(Error::coded(
        Code::ToolSandboxEntryRequired,
        "sandboxed tools need RunOptions.entryPath; use sandbox fixture only for trusted tests",
      )));
    }
    let system = system_prompt(&self.agent);
    if self.accounting.metered() {
      self.transcript.count_bytes(system.len());
      let tools = serde_json::to_string(&tool_schemas(&self.agent)).unwrap_or_default();
      self.transcript.count_bytes(tools.len());
    }
    self.emit_pi(|| PiEvent::AgentStart);
    // Pi opens the first turn before the prompt's message events.
    self.emit_pi(|| PiEvent::TurnStart);
    self.transcript.turn_open = true;
    if !self.transcript.prompted {
      let user = Message::User(UserMessage {
        content: input,
        timestamp: Some(now_ms()),
      });
      self.emit_pi(|| PiEvent::MessageStart {
        message: user.clone(),
      });
      self.emit_pi(|| PiEvent::MessageEnd {
        message: user.clone(),
      });
      self.transcript.push(user);
    }

    while self.model_turn(&system).await? {
      let calls: Vec<ToolCall> = self.last_assistant().tool_calls().cloned().collect();
      if calls.is_empty() {
        self.journal_turn().await?;
        self.emit_pi(|| PiEvent::TurnEnd {
          message: Message::Assistant(self.last_assistant().clone()),
          tool_results: Vec::new(),
        });
        break;
      }
      let results = self.run_tool_calls(&calls).await?;
      self.journal_turn().await?;
      self.emit_pi(|| PiEvent::TurnEnd {
        message: Message::Assistant(self.last_assistant().clone()),
        tool_results: results.into_iter().map(Message::ToolResult).collect(),
      });
      let content = &self
        .transcript
        .last_assistant
        .as_ref()
        .expect("a model turn returned a message")
        .content;
      if let Some(event) = self.breakers.end_turn(content) {
        self.accounting.receipt.breakers.push(event);
        self.stop.get_or_insert(RunStopReason::NoProgress);
      }
    }
    if let (true, Some(d)) = (self.root, &self.shared.durable) {
      if let Some(e) = d.fatal().or_else(|| d.incomplete()) {
        return Err(self.fail(e));
      }
    }
    self.emit_pi(|| PiEvent::AgentEnd);
    self.finish(started)
  }

  /// The assistant message of the turn in progress.
  fn last_assistant(&self) -> &AssistantMessage {
    self
      .transcript
      .last_assistant
      .as_ref()
      .expect("a model turn returned a message")
  }

  /// Admission for a provider call, the call, and its accounting; `Ok(false)` is a graceful stop.
  async fn model_turn(&mut self, system: &str) -> Result<bool, RunFailure> {
    if self.shared.cancel.is_cancelled() {
      return Err(self.fail(aborted()));
    }
    if self.accounting.model_calls >= self.shared.limits.max_model_calls {
      self.stop.get_or_insert(RunStopReason::CallBudgetExhausted);
      return Ok(false);
    }
    if self.stop.is_some() {
      return Ok(false);
    }
    if self.shared.deadline.is_some_and(|d| Instant::now() >= d) {
      self.stop = Some(RunStopReason::Deadline);
      return Ok(false);
    }
    let output_cap = self.agent.output.as_ref().map(|o| o.max_tokens);
    let model_cap = output_cap
      .or(self.agent.model.max_tokens)
      .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
    let mut max_tokens = output_cap;
    let mut clamped = None;
    if let Some(meter) = &self.accounting.meter {
      let ceiling = Meter::input_ceiling(
        self.transcript.context_bytes(),
        self.transcript.message_count,
        self.agent.model.context_window,
      );
      match meter.admit(ceiling, model_cap, self.accounting.price.as_ref()) {
        Admission::Stop => {
          self.stop = Some(RunStopReason::BudgetExhausted);
          return Ok(false);
        }
        Admission::Go {
          max_output,
          clamped: c,
        } => {
          max_tokens = Some(max_output);
          clamped = c.then_some(max_output);
        }
      }
    }
    let durable = self.shared.durable.clone();
    if let Some(d) = &durable {
      if let Some(e) = d.fatal() {
        return Err(self.fail(e));
      }
      if let Err(e) = d
        .call_started(&self.path, &self.agent.model.provider, &self.agent.model.id)
        .await
      {
        return Err(self.fail(e));
      }
    }
    self.accounting.model_calls += 1;
    if !std::mem::replace(&mut self.transcript.turn_open, false) {
      self.emit_pi(|| PiEvent::TurnStart);
    }
    let first = std::mem::replace(&mut self.transcript.first_call, false);
    let call = ModelCall {
      conversation: self.transcript.conversation,
      model_key: self.agent.model.key,
      append: self.transcript.take_pending(),
      system_prompt: first.then(|| system.to_string()),
      tools: first.then(|| tool_schemas(&self.agent)),
      max_tokens,
      reasoning: self.agent.reasoning.clone(),
    };
    let cancel = self.shared.cancel.clone();
    let asked = Instant::now();
    let reply = tokio::select! {
      r = self.shared.host.model_call(call) => r,
      _ = cancel.cancelled() => return Err(self.fail(aborted())),
    };
    super::stats::model_call(asked.elapsed());
    let message = match reply {
      Ok(m) => m,
      Err(e) => {
        if let Some(d) = &durable {
          let _ = d.call_abandoned(&self.path).await;
        }
        return Err(self.fail(Error::new(Code::AgentRunFailed, e.message)));
      }
    };
    let (call, amount) = self.accounting.account(
      &message,
      clamped,
      &self.agent.model.provider,
      &self.agent.model.id,
    );
    if let Some(d) = &durable {
      if let Err(e) = d.call_settled(&self.path, call, amount) {
        return Err(self.fail(e));
      }
    }
    match message.stop_reason {
      StopReason::Error => {
        let detail = message.error_message.as_deref().unwrap_or("provider error");
        return Err(self.fail(Error::coded(Code::ProviderTerminalError, detail)));
      }
      StopReason::Aborted => {
        if self.shared.cancel.is_cancelled() {
          return Err(self.fail(aborted()));
        }
        return Err(self.fail(Error::coded(
          Code::ProviderTerminalAborted,
          "the provider call was aborted",
        )));
      }
      _ => {}
    }
    self.transcript.push_reply(message);
    Ok(true)
  }

  /// Runs one turn's tool calls: all concurrently when every tool is `read`, else one by one.
  /// Returns the tool-result messages when `pi` events are on (for `turn_end`).
  async fn run_tool_calls(&mut self, calls: &[ToolCall]) -> Result<Vec<ToolResultMessage>, RunFailure> {
    let mut results = Vec::new();
    let mut in_turn = 0u32;
    // Pi agent-core: one sequential (non-read) tool in the turn makes the whole batch sequential;
    // otherwise every call is admitted in order, then all execute concurrently.
    let parallel = calls.iter().all(|c| {
      self
        .find_tool(&c.name)
        .is_none_or(|t| self.agent.tools[t].effect == "read")
    });
    let batch_size = if parallel { calls.len().max(1) } else { 1 };
    for batch in calls.chunks(batch_size) {
      let mut verdicts = Vec::with_capacity(batch.len());
      let mut outs: Vec<Option<Executed>> = Vec::with_capacity(batch.len());
      for call in batch {
        in_turn += 1;
        self.emit_pi(|| PiEvent::ToolExecutionStart {
          tool_call_id: call.id.clone(),
          tool_name: call.name.clone(),
          args: call.arguments.clone(),
        });
        self.accounting.record_call(&call.name);
        let candidate = Candidate::new(self, &call.name, &call.id, &call.arguments, in_turn);
        let verdict = match self.admit(candidate).await {
          Ok(v) => v,
          Err(policy_error) => {
            self.accounting.receipt.record_error(&call.name);
            return Err(self.fail(Error::bare(policy_error.code())));
          }
        };
        match &verdict {
          Verdict::Blocked { reason } => {
            let out = Executed::error(reason.clone());
            self.emit_tool_end(call, &out);
            outs.push(Some(out));
          }
          Verdict::Run { .. } => outs.push(None),
        }
        verdicts.push(verdict);
      }
      let mut running: FuturesUnordered<_> = verdicts
        .iter()
        .zip(batch)
        .enumerate()
        .filter_map(|(k, (verdict, call))| {
          let Verdict::Run { index, args, wallet } = verdict else {
            return None;
          };
          let future = self.dispatch(*index, &call.id, args.clone(), wallet.clone());
          Some(async move {
            let started = Instant::now();
            let out = future.await;
            super::stats::tool_call(started.elapsed());
            (k, out)
          })
        })
        .collect();
      while let Some((k, out)) = running.next().await {
        self.emit_tool_end(&batch[k], &out);
        outs[k] = Some(out);
      }
      drop(running);
      for (call, out) in batch.iter().zip(outs) {
        let out = out.expect("every call of the batch settled");
        if out.is_error {
          self.accounting.receipt.record_error(&call.name);
        }
        let tool = self.find_tool(&call.name).map(|i| &self.agent.tools[i]);
        let value = out.result_value(tool);
        if let Some(child) = out.child {
          self.accounting.add_child(child);
        }
        let message = ToolResultMessage {
          tool_call_id: call.id.clone(),
          tool_name: call.name.clone(),
          content: value.content,
          details: value.details.to_value(),
          is_error: out.is_error,
          timestamp: Some(now_ms()),
        };
        if self.pi_on() {
          let m = Message::ToolResult(message.clone());
          self.emit_pi(|| PiEvent::MessageStart { message: m.clone() });
          self.emit_pi(|| PiEvent::MessageEnd { message: m });
          results.push(message.clone());
        }
        self.transcript.push(Message::ToolResult(message));
      }
      if self.shared.cancel.is_cancelled() {
        return Err(self.fail(aborted()));
      }
    }
    Ok(results)
  }

  /// The future that executes an admitted call: journaled on a durable run (or replayed from the
  /// journal without running), plain otherwise.
  fn dispatch(
    &self,
    index: usize,
    id: &str,
    args: serde_json::Value,
    wallet: Option<Meter>,
  ) -> BoxFuture<Executed> {
    let tool = self.agent.tools[index].clone();
    let mut ctx = ExecContext {
      shared: self.shared.clone(),
      agent_path: self.agent_path.clone(),
      path: self.path.clone(),
      depth: self.depth,
      durable: None,
    };
    let Some(d) = self.shared.durable.clone() else {
      let id = id.to_string();
      return Box::pin(async move { execute(ctx, &tool, args, id, wallet).await });
    };
    // A fresh call journals its intent; a re-driven one settles the recorded intent.
    let (identity, fresh) = match d.plan(&self.path, id, &tool.name, &tool.effect, &args) {
      ToolPlan::Mismatch(e) => return Box::pin(async move { Executed::error(e.message) }),
      ToolPlan::Replay(text, is_error) => {
        return Box::pin(async move {
          Executed {
            text,
            is_error,
            child: None,
          }
        })
      }
      ToolPlan::Fresh(identity) => (identity, true),
      ToolPlan::Redrive(identity) => (identity, false),
    };
    ctx.durable = Some(DurableContext {
      idempotency_key: identity.idempotency_key.clone(),
      resumed: !fresh,
    });
    Box::pin(execute_journaled(ctx, tool, args, identity, wallet, d, fresh))
  }

  fn emit_tool_end(&self, call: &ToolCall, out: &Executed) {
    self.emit_pi(|| {
      let tool = self.find_tool(&call.name).map(|i| &self.agent.tools[i]);
      PiEvent::ToolExecutionEnd {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        result: out.result_value(tool),
        is_error: out.is_error,
      }
    });
  }

  fn finish(mut self, started: Instant) -> Result<RunResult, RunFailure> {
    let stop = self.stop_reason();
    self.accounting.finish_receipt(stop);
    let text = self
      .transcript
      .last_assistant
      .as_ref()
      .map(AssistantMessage::text)
      .unwrap_or_default();
    let mut output = None;
    let schema = self.agent.output.as_ref().and_then(|o| o.schema.as_ref());
    if let (Some(schema), Some(_), RunStopReason::Complete) = (schema, &self.transcript.last_assistant, stop)
    {
      let Ok(parsed) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Err(self.fail(Error::bare(Code::OutputSchemaInvalidJson)));
      };
      if !validate(schema, &parsed).is_empty() {
        return Err(self.fail(Error::bare(Code::OutputSchemaMismatch)));
      }
      output = Some(parsed);
    }
    let t = self.accounting.all_totals();
    let last = self.transcript.last_assistant.as_ref();
    let provider = last
      .and_then(|m| m.provider.clone())
      .unwrap_or_else(|| self.agent.model.provider.clone());
    let model = last
      .and_then(|m| m.model.clone())
      .unwrap_or_else(|| self.agent.model.id.clone());
    let usage_basis = if t.any_call {
      "provider_reported"
    } else {
      "unavailable"
    };
    let receipt = std::mem::replace(
      &mut self.accounting.receipt,
      Receipt::new(&self.run_id, &self.agent.id),
    );
    Ok(RunResult {
      run_id: self.run_id,
      agent_id: self.agent.id.clone(),
      text,
      context_bill: Empty {},
      usage_basis,
      input_tokens: t.input,
      output_tokens: t.output,
      cache_read_tokens: t.cache_read,
      cache_write_tokens: t.cache_write,
      reasoning_tokens: t.reasoning,
      reasoning_usage_basis: usage_basis,
      cost_usd: round10(t.cost_usd),
      price_basis: if t.unpriced { "unpriced" } else { "public_catalog" },
      mode: "observe-only",
      provider,
      model,
      latency_ms: started.elapsed().as_millis() as u64,
      tool_calls: std::mem::take(&mut self.accounting.tool_names),
      evaluated_transform_ids: [],
      transform_ids: [],
      transform_failures: [],
      transform_trace: [],
      recovery_resolved: false,
      stop_reason: stop.as_str(),
      cap_breached: receipt.cap_breached,
      overspent: receipt.overspent,
      receipt,
      claim_basis: "inferred",
      unlocked: true,
      output,
      resumed: self.accounting.resumed().then_some(true),
    })
  }
}
