//! One agent run (the root, or a subagent's child run): the turn loop, provider-call
//! admission, a turn's tool calls, and the result. Its state is split by concern: the
//! transcript, the accounting (money, receipt, counters) and the breakers.

use std::sync::Arc;
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};

use super::accounting::Accounting;
use super::admission::{Candidate, Verdict};
use super::breakers::BreakerState;
use super::budget::{catalog_price, round10, Admission, Denomination, ExhaustionAnswer, Meter, MeterCell};
use super::event::{PiEvent, RunEvent};
use super::execute::{execute, execute_journaled, ExecContext, Executed, ToolRef};
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
use super::nested::{coded, NestedAbort, Reply, Routed};
use super::spec::ToolSpec;
use crate::policy::PolicyError;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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
  /// Dispatches of this run's composite containers (routed by the host's nested inbox).
  nested_tx: mpsc::UnboundedSender<Routed>,
  nested_rx: Option<mpsc::UnboundedReceiver<Routed>>,
  /// Calls of the turn in progress that the fan-out breaker counts: non-container calls and
  /// nested calls, speculative launches during the turn's stream included (containers are
  /// capped by their own count).
  pub(super) turn_calls: u32,
  /// Streaming speculation of a programmatic cell tool's reads (none on a durable run).
  pub(super) spec: Option<super::speculation::Speculation>,
  /// Set on a root run whose budget compacts (`onExhausted: "compact"`).
  pub compaction: Option<super::compact::CompactionState>,
  /// Set on the root run: `RunOptions.modelRouter`, or the image-input check without one.
  pub routing: Option<super::route::Routing>,
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
    meter: Option<MeterCell>,
    root: bool,
  ) -> Self {
    let price = catalog_price(&agent.model.provider, &agent.model.id);
    let conversation = shared
      .next_conversation
      .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let journaled = root && shared.durable.is_some();
    let receipt = Receipt::new(&run_id, &agent.id);
    let (nested_tx, nested_rx) = mpsc::unbounded_channel();
    let spec = shared
      .durable
      .is_none()
      .then(|| super::speculation::Speculation::new(&agent))
      .flatten();
    Self {
      spec,
      nested_tx,
      nested_rx: Some(nested_rx),
      turn_calls: 0,
      transcript: Transcript::new(conversation, meter.is_some(), journaled),
      accounting: Accounting::new(receipt, meter, price),
      breakers: BreakerState::new(shared.limits.breakers),
      stop: None,
      compaction: None,
      routing: None,
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
      // The host keeps the whole transcript; after a journaled compaction the provider goes on
      // from its context (`messages`).
      let transcript = state.transcript.as_ref().unwrap_or(&state.messages);
      for m in transcript {
        self.transcript.seed(m.clone());
      }
      self.transcript.last_assistant = transcript.iter().rev().find_map(|m| match m {
        Message::Assistant(a) => Some(a.clone()),
        _ => None,
      });
      self.restore_compaction(state);
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
    self.stop_bets();
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
    if let Err(e) = self.journal_tranches() {
      return Err(self.fail(e));
    }
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
      if m.denomination() == Denomination::Usd && self.accounting.price.is_none() {
        let (p, id) = (&self.agent.model.provider, &self.agent.model.id);
        let e = Error::coded(
          Code::BudgetDenominationUnavailable,
          format!("{p}/{id} is not in the public catalog, so a USD budget cannot meter it — use budget.maxTokens, or pick a cataloged model"),
        );
        return Err(self.fail(e));
      }
    }
    // With an entry the JS side runs this level's closures in worker processes.
    if self.agent.sandbox == "required"
      && !self.shared.sandbox_entry
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
    if self.accounting.metered() || self.routed() {
      self.transcript.count_fixed(system.len());
      let tools = serde_json::to_string(&tool_schemas(&self.agent)).unwrap_or_default();
      self.transcript.count_fixed(tools.len());
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
        // The loop would end here: a steering message, else a follow-up, continues it.
        if self.deliver_queued(&system, true).await? {
          continue;
        }
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
      // Between turns (never at the call boundary): the turn requested tools, so a call follows.
      self.maybe_compact(&system).await?;
      self.deliver_queued(&system, false).await?;
    }
    if let (true, Some(d)) = (self.root, &self.shared.durable) {
      if let Some(e) = d.fatal().or_else(|| d.incomplete()) {
        return Err(self.fail(e));
      }
    }
    self.settle_speculation().await;
    self.emit_pi(|| PiEvent::AgentEnd);
    self.finish(started)
  }

  /// `RunOptions.controller` at a turn boundary of the root run: the next steering message, or
  /// (when the loop would otherwise end) the next follow-up, one per turn, as a user message the
  /// next provider call sees. It is journaled at once (a resume finds it in the transcript; the
  /// controller no longer holds it). Nothing is taken when no call could follow (a stop, the
  /// model-call cap, the deadline, an abort): the message stays queued for a later run.
  async fn deliver_queued(&mut self, system: &str, ending: bool) -> Result<bool, RunFailure> {
    use super::controller::QueueKind;
    if !self.root
      || self.stop.is_some()
      || self.shared.cancel.is_cancelled()
      || self.accounting.model_calls >= self.shared.limits.max_model_calls
      || self.shared.deadline.is_some_and(|d| Instant::now() >= d)
    {
      return Ok(false);
    }
    let host = self.shared.host.clone();
    let Some(user) = host.take_queued(QueueKind::Steering).or_else(|| {
      if ending {
        host.take_queued(QueueKind::FollowUp)
      } else {
        None
      }
    }) else {
      return Ok(false);
    };
    if ending {
      // The tool branch compacted already; a follow-up turn gets the same chance first.
      self.maybe_compact(system).await?;
    }
    let message = Message::User(user);
    self.emit_pi(|| PiEvent::TurnStart);
    self.transcript.turn_open = true;
    self.emit_pi(|| PiEvent::MessageStart {
      message: message.clone(),
    });
    self.emit_pi(|| PiEvent::MessageEnd {
      message: message.clone(),
    });
    self.transcript.push(message);
    self.journal_turn().await?;
    Ok(true)
  }

  /// The output allowance of a working call before any clamp.
  pub(super) fn model_cap(&self) -> u64 {
    self
      .agent
      .output
      .as_ref()
      .map(|o| o.max_tokens)
      .or(self.agent.model.max_tokens)
      .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
  }

  /// `onBudgetExhausted` for an exhausted root meter: `Ok(true)` when the handler released
  /// more (the caller recomputes the plan once), `Ok(false)` for `"stop"`, no handler, a child
  /// run or a breached cap (terminal). A bad answer or a failed release fails the run.
  async fn escalate(&mut self, meter: &MeterCell) -> Result<bool, RunFailure> {
    if !self.root || meter.lock().cap_breached {
      return Ok(false);
    }
    let context = meter.lock().context();
    let Some(asked) = self.shared.host.budget_exhausted(context) else {
      return Ok(false);
    };
    let cancel = self.shared.cancel.clone();
    let answer = tokio::select! {
      a = asked => a,
      _ = cancel.cancelled() => return Err(self.fail(aborted())),
    };
    let (amount, reason) = match answer {
      Err(e) => return Err(self.fail(Error::new(Code::AgentRunFailed, e.message))),
      Ok(ExhaustionAnswer::Stop) => return Ok(false),
      Ok(ExhaustionAnswer::Invalid) => {
        return Err(self.fail(Error::coded(
          Code::BudgetExhaustionResultInvalid,
          "onBudgetExhausted must resolve to \"stop\" or {release: number, reason: string}",
        )))
      }
      Ok(ExhaustionAnswer::Release { amount, reason }) => (amount, reason),
    };
    let released = meter.lock().release(amount, Some(&reason));
    match released {
      Ok(_) => Ok(true),
      Err(e) => Err(self.fail(e)),
    }
  }

  /// Queues the root meter's new tranches in the journal (flushed with the next barrier).
  fn journal_tranches(&self) -> Result<(), Error> {
    let (Some(d), Some(meter), true) = (&self.shared.durable, &self.accounting.meter, self.root) else {
      return Ok(());
    };
    let fresh = meter.lock().take_unjournaled();
    fresh.iter().try_for_each(|t| d.tranche(t))
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
    // Bets of the last turn that were not claimed end before the next provider call.
    self.settle_speculation().await;
    if self.shared.cancel.is_cancelled() {
      return Err(self.fail(aborted()));
    }
    if self.accounting.model_calls >= self.shared.limits.max_model_calls {
      self.stop.get_or_insert(RunStopReason::CallBudgetExhausted);
      return Ok(false);
    }
    match self.route("working", None).await {
      Ok(Some(chosen)) => self.adopt(chosen),
      Ok(None) => {}
      Err(e) => return Err(self.fail(e)),
    }
    match self.stop {
      // A tool blocked on an exhausted budget: the ladder decides, as a release (the
      // controller's, or the handler's below) may fund the call.
      Some(RunStopReason::BudgetExhausted) if self.accounting.meter.is_some() => {}
      Some(_) => return Ok(false),
      None => {}
    }
    if self.shared.deadline.is_some_and(|d| Instant::now() >= d) {
      self.stop = Some(RunStopReason::Deadline);
      return Ok(false);
    }
    let output_cap = self.agent.output.as_ref().map(|o| o.max_tokens);
    let model_cap = self.model_cap();
    let mut max_tokens = output_cap;
    let mut clamped = None;
    if let Some(meter) = self.accounting.meter.clone() {
      let ceiling = Meter::input_ceiling(
        self.transcript.context_bytes(),
        self.transcript.message_count,
        self.agent.model.context_window,
      );
      let price = self.accounting.price;
      let mut plan = meter.lock().admit(ceiling, model_cap, price.as_ref());
      if plan == Admission::Stop {
        // Once per exhaustion: the handler's release is applied and the plan recomputed once.
        if self.escalate(&meter).await? {
          plan = meter.lock().admit(ceiling, model_cap, price.as_ref());
        }
      }
      match plan {
        Admission::Stop => {
          self.stop = Some(RunStopReason::BudgetExhausted);
          return Ok(false);
        }
        Admission::Go {
          max_output,
          clamped: c,
        } => {
          self.stop = None;
          meter.lock().calls += 1;
          max_tokens = Some(max_output);
          clamped = c.then_some(max_output);
        }
      }
    }
    // The legacy `maxCostUsd` ledger, after the budget plan (step 9 of the reference's
    // model-call admission): best effort, so it refuses the next call once the tree's spend
    // has reached the cap, and fails the run.
    if let Some(ledger) = &self.shared.legacy {
      if let Err(e) = ledger.admit(
        self.accounting.price.is_some(),
        &self.agent.model.provider,
        &self.agent.model.id,
      ) {
        return Err(self.fail(e));
      }
    }
    let durable = self.shared.durable.clone();
    if let Some(d) = &durable {
      if let Some(e) = d.fatal() {
        return Err(self.fail(e));
      }
      if let Err(e) = self.journal_tranches() {
        return Err(self.fail(e));
      }
      if let Err(e) = d
        .call_started(&self.path, "model", &self.agent.model.provider, &self.agent.model.id)
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
    // The fan-out breaker counts this turn's calls from its stream on (speculative launches).
    self.turn_calls = 0;
    let run_id = self.run_id.clone();
    let speculation = self.spec.as_mut().map(|s| s.open_stream(&run_id));
    let call = ModelCall {
      conversation: self.transcript.conversation,
      model_key: self.agent.model.key,
      model: self.call_model(&self.agent.model),
      append: self.transcript.take_pending(),
      system_prompt: first.then(|| system.to_string()),
      tools: first.then(|| tool_schemas(&self.agent)),
      max_tokens,
      reasoning: self.agent.reasoning.clone(),
      context: self.transcript.take_replaced(),
      speculation,
    };
    let cancel = self.shared.cancel.clone();
    let asked = Instant::now();
    let reply = if self.spec.is_some() {
      let call = self.shared.host.model_call(call);
      self.await_streaming(call).await?
    } else {
      tokio::select! {
        r = self.shared.host.model_call(call) => r,
        _ = cancel.cancelled() => return Err(self.fail(aborted())),
      }
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
    let model = self.agent.model.clone();
    self.note_usage(&model, &message);
    let (call, amount) = self.accounting.account(&message, clamped, &model.provider, &model.id);
    if let Some(ledger) = &self.shared.legacy {
      ledger.spend(call.estimated_usd);
    }
    if let Some(d) = &durable {
      if let Err(e) = d.call_settled(&self.path, "model", call, amount) {
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
    let mut rx = self.nested_rx.take().expect("one tool loop per level at a time");
    let out = self.run_tool_calls_with(calls, &mut rx).await;
    self.nested_rx = Some(rx);
    out
  }

  async fn run_tool_calls_with(
    &mut self,
    calls: &[ToolCall],
    rx: &mut mpsc::UnboundedReceiver<Routed>,
  ) -> Result<Vec<ToolResultMessage>, RunFailure> {
    let mut results = Vec::new();
    let mut turn_containers = 0u32;
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
        self.emit_pi(|| PiEvent::ToolExecutionStart {
          tool_call_id: call.id.clone(),
          tool_name: call.name.clone(),
          args: call.arguments.clone(),
        });
        let container = self
          .find_tool(&call.name)
          .is_some_and(|i| self.agent.tools[i].is_composite());
        let in_turn = if container {
          turn_containers += 1;
          self.accounting.record_container(&call.name);
          turn_containers
        } else {
          self.turn_calls += 1;
          self.accounting.record_call(&call.name);
          self.turn_calls
        };
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
          let tool = ToolRef::Of(self.agent.clone(), *index);
          let cancel = self.shared.cancel.child_token();
          // A cell's activated bets go with it: its claims take them.
          let bets = self.spec.as_mut().map(|s| s.take_activated(&call.id)).unwrap_or_default();
          let future = self.dispatch(tool, *index, &call.id, args.clone(), wallet.clone(), cancel, None, bets);
          Some(async move {
            let started = Instant::now();
            let out = future.await;
            super::stats::tool_call(started.elapsed());
            (k, out)
          })
        })
        .collect();
      // The batch's calls run; meanwhile the nested calls their containers dispatch are
      // admitted here (they need this run's accounting) and run beside them.
      let mut nested: FuturesUnordered<BoxFuture<NestedDone>> = FuturesUnordered::new();
      loop {
        let step = tokio::select! {
          biased;
          Some(done) = nested.next(), if !nested.is_empty() => Step::NestedDone(done),
          Some(routed) = rx.recv() => Step::Dispatch(routed),
          done = super::speculation::next_bet(&mut self.spec) => Step::BetDone(done),
          next = running.next() => match next {
            Some((k, out)) => Step::Call(k, out),
            None => break,
          },
        };
        match step {
          Step::NestedDone(done) => self.end_nested(done),
          Step::BetDone(done) => self.settle_bet(done),
          Step::Dispatch(routed) => {
            if let Some(f) = self.admit_nested(routed).await? {
              nested.push(f);
            }
          }
          Step::Call(k, out) => {
            self.emit_tool_end(&batch[k], &out);
            outs[k] = Some(out);
          }
        }
      }
      // A container waits for its admitted nested calls (or aborts them) before it settles.
      while let Some(done) = nested.next().await {
        self.end_nested(done);
      }
      drop(running);
      for (call, out) in batch.iter().zip(outs) {
        let out = out.expect("every call of the batch settled");
        if out.is_error {
          self.accounting.receipt.record_error(&call.name);
        }
        self.note_tool_result(out.is_error);
        let is_error = out.is_error;
        let tool = self.find_tool(&call.name).map(|i| &self.agent.tools[i]);
        self.breakers.observe_call(&call.name, tool, &out.text, out.is_error);
        let (value, child) = out.into_result_value(tool);
        if let Some(child) = child {
          self.accounting.add_child(child);
        }
        let message = ToolResultMessage {
          tool_call_id: call.id.clone(),
          tool_name: call.name.clone(),
          content: value.content,
          details: value.details.to_value(),
          is_error,
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
  /// journal without running), plain otherwise. `index` is the tool's place in this run's tools
  /// (a container's identity for its dispatches); `parent` is a nested call's container id.
  #[allow(clippy::too_many_arguments)]
  pub(super) fn dispatch(
    &self,
    tool: ToolRef,
    index: usize,
    id: &str,
    args: serde_json::Value,
    wallet: Option<Meter>,
    cancel: CancellationToken,
    parent: Option<&str>,
    bets: Vec<Arc<super::speculation::Bet>>,
  ) -> BoxFuture<Executed> {
    let nested = parent.is_some();
    let mut ctx = ExecContext {
      shared: self.shared.clone(),
      agent_path: self.agent_path.clone(),
      path: self.path.clone(),
      depth: self.depth,
      durable: None,
      cancel,
      nested,
      parent: parent.map(str::to_string),
      link: (!nested).then(|| self.nested_tx.clone()),
      index,
      bets,
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

  /// `dispatchNestedTool` up to execution (caveman-code.md §4.4): the name, a speculation
  /// claim, the id, `nested_tool_start` and the accounting, then the checks and the policy. A
  /// refused call ends here (as an error, with its `nested_tool_end` once it has started); an
  /// admitted one comes back as the future that executes it in the container's order. `Err`
  /// is a policy failure, which ends the run.
  async fn admit_nested(&mut self, routed: Routed) -> Result<Option<BoxFuture<NestedDone>>, RunFailure> {
    let Routed {
      container,
      name,
      args,
      claim_speculation,
      abort,
      reply,
    } = routed;
    let agent = self.agent.clone();
    let parent = &agent.tools[container.tool];
    let Some(tool) = parent.nested_tools.iter().find(|t| t.name == name).cloned() else {
      let e = Error::tagged(Code::NestedToolNotAllowed, &[&name]);
      reply.send(Err(coded(e.code, e.message)));
      return Ok(None);
    };
    if claim_speculation {
      if !(tool.effect == "read" && tool.speculative && parent.speculative_tools.contains(&name)) {
        let e = Error::tagged(Code::NestedToolSpeculationNotAllowed, &[&name]);
        reply.send(Err(coded(e.code, e.message)));
        return Ok(None);
      }
      if !args.is_object() || !validate(&tool.input, &args).is_empty() {
        let e = Error::tagged(Code::ToolInputSchemaMismatch, &[&name]);
        reply.send(Err(coded(e.code, e.message)));
        return Ok(None);
      }
      // The first unclaimed bet of the container with this name and canonical arguments
      // answers the dispatch: no new event, receipt entry or policy call. Else the call runs.
      let key = self.container_key(container.tool);
      if let Some(bet) = container.claim(&name, &super::schema::stable_stringify(&args)) {
        if let Some(key) = key {
          self.shared.host.speculation(key, super::speculation::SpeculationCount::Claimed);
        }
        // The claim settles with the bet, unless its own signal or its container aborts
        // first (then the bet, now unwanted, is stopped too).
        let signal = container.signal.clone();
        return Ok(Some(Box::pin(async move {
          let answer = tokio::select! {
            _ = bet.settled() => bet.result().unwrap_or_else(|| Err(error_answer(Code::NestedToolAborted.as_str().to_string()))),
            _ = abort.token().cancelled() => {
              bet.stop();
              Err(error_answer(abort.message()))
            }
            _ = signal.cancelled() => {
              bet.stop();
              Err(error_answer(Code::NestedToolAborted.as_str().to_string()))
            }
          };
          NestedDone {
            id: String::new(),
            name,
            tool,
            out: Executed::error(String::new()),
            reply: Some(reply),
            answer: Some(answer),
          }
        })));
      }
      if let Some(key) = key {
        self.shared.host.speculation(key, super::speculation::SpeculationCount::Missed);
      }
    }
    let n = self.shared.next_nested.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("{}:nested:{n}", container.tool_call_id);
    self.shared.host.emit(RunEvent::NestedToolStart {
      run_id: self.run_id.clone(),
      id: id.clone(),
      name: name.clone(),
      args: args.clone(),
    });
    self.accounting.record_call(&name);
    self.turn_calls += 1;
    let refused = |message: String| NestedDone {
      id: id.clone(),
      name: name.clone(),
      tool: tool.clone(),
      out: Executed::error(message),
      reply: None,
      answer: None,
    };
    let wallet = match self.check_nested(&tool, &args, &id, &container.tool_call_id).await {
      Ok(wallet) => wallet,
      Err(NestedRefusal::Blocked(message)) => {
        let mut done = refused(message);
        done.reply = Some(reply);
        self.end_nested(done);
        return Ok(None);
      }
      Err(NestedRefusal::Policy(e)) => {
        self.accounting.receipt.record_error(&name);
        let code = e.code();
        reply.send(Err(coded(code.clone(), code.as_str())));
        return Err(self.fail(Error::bare(code)));
      }
    };
    let (waits, latch) = container.schedule(tool.effect == "read");
    let cancel = container.signal.child_token();
    let exec = self.dispatch(
      ToolRef::Own(Box::new(tool.clone())),
      usize::MAX,
      &id,
      args,
      wallet,
      cancel.clone(),
      Some(&container.tool_call_id),
      Vec::new(),
    );
    let deadline = self.shared.deadline;
    let subagent = matches!(tool.runtime, ToolRuntime::Subagent { .. });
    Ok(Some(Box::pin(async move {
      let _latch = latch.drop_guard();
      let out = run_nested(exec, waits, &abort, &cancel, deadline, subagent).await;
      NestedDone {
        id,
        name,
        tool,
        out,
        reply: Some(reply),
        answer: None,
      }
    })))
  }

  /// Step 5 of `dispatchNestedTool`: the checks in the reference's order, then the policy
  /// (with `parentToolCallId`), then a subagent's own checks. `Ok` is a subagent's wallet.
  pub(super) async fn check_nested(
    &mut self,
    tool: &ToolSpec,
    args: &Value,
    id: &str,
    parent: &str,
  ) -> Result<Option<Meter>, NestedRefusal> {
    let blocked = |code: Code| Err(NestedRefusal::Blocked(code.as_str().to_string()));
    if self.shared.deadline.is_some_and(|d| Instant::now() >= d) {
      self.stop = Some(RunStopReason::Deadline);
      return blocked(Code::RunDeadlineExceeded);
    }
    if self.accounting.meter.as_ref().is_some_and(MeterCell::exhausted) {
      self.stop = Some(RunStopReason::BudgetExhausted);
      return blocked(Code::BudgetExhausted);
    }
    if self.accounting.tool_budget_count > self.shared.limits.max_tool_calls {
      return blocked(Code::ToolCallBudgetExceeded);
    }
    if let Some(event) = self.breakers.fan_out(&tool.name, self.turn_calls) {
      self.accounting.receipt.breakers.push(event);
      return blocked(Code::FanOutCapExceeded);
    }
    if !tool.allow_repeat {
      if let Some(event) = self.breakers.repeat(&tool.name, args) {
        self.accounting.receipt.breakers.push(event);
        self.stop = Some(RunStopReason::LoopDetected);
        return blocked(Code::ToolCallLoopDetected);
      }
    }
    if self.agent.sandbox == "fixture" && tool.effect == "write" {
      return blocked(Code::SideEffectBlocked);
    }
    if self.agent.sandbox == "required" {
      return blocked(Code::NestedToolSandboxUnsupported);
    }
    if !args.is_object() || !validate(&tool.input, args).is_empty() {
      return Err(NestedRefusal::Blocked(
        Error::tagged(Code::ToolInputSchemaMismatch, &[&tool.name]).message,
      ));
    }
    if let Some(policy) = self.shared.host.policy() {
      let input = crate::policy::PolicyInput {
        run_id: self.run_id.clone(),
        agent_id: self.agent.id.clone(),
        agent_path: self.agent_path.clone(),
        tool_call_id: id.to_string(),
        parent_tool_call_id: Some(parent.to_string()),
        name: tool.name.clone(),
        effect: tool.effect.clone(),
        args: args.clone(),
      };
      match crate::policy::decide_tool_call(policy.as_ref(), &input, crate::policy::default_timeout()).await {
        Err(e) => return Err(NestedRefusal::Policy(e)),
        Ok(Some(denial)) => {
          self.accounting.receipt.record_denial(&tool.name);
          return Err(NestedRefusal::Blocked(denial.reason));
        }
        Ok(None) => {}
      }
    }
    self
      .subagent_gate(tool, args)
      .map_err(|code| NestedRefusal::Blocked(code.as_str().to_string()))
  }

  /// Step 7: the outcome in the receipt, `nested_tool_end`, and the dispatch's answer.
  fn end_nested(&mut self, mut done: NestedDone) {
    let reply = done.reply.take();
    // A claim answers with its bet's outcome: the bet was accounted when it ran.
    let answer = match done.answer.take() {
      Some(answer) => answer,
      None => self.finish_nested(done),
    };
    if let Some(reply) = reply {
      reply.send(answer);
    }
  }

  /// A nested call's outcome in the receipt, the breakers and `nested_tool_end`; returns what
  /// its `dispatch()` settles to.
  pub(super) fn finish_nested(&mut self, done: NestedDone) -> Result<Value, super::host::HostError> {
    let NestedDone {
      id,
      name,
      tool,
      out,
      ..
    } = done;
    if out.is_error {
      self.accounting.receipt.record_error(&name);
    }
    self.note_tool_result(out.is_error);
    self.breakers.observe_call(&name, Some(&tool), &out.text, out.is_error);
    let result = if out.is_error {
      Value::String(out.text.clone())
    } else {
      settled_value(&tool, &out.text)
    };
    if let Some(child) = out.child {
      self.accounting.add_child(child);
    }
    self.shared.host.emit(RunEvent::NestedToolEnd {
      run_id: self.run_id.clone(),
      id,
      name,
      is_error: out.is_error,
      result: result.clone(),
    });
    if out.is_error {
      Err(error_answer(out.text))
    } else {
      Ok(result)
    }
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

/// One step of a batch's tool loop.
enum Step {
  NestedDone(NestedDone),
  BetDone(super::speculation::BetDone),
  Dispatch(Routed),
  Call(usize, Executed),
}

/// A nested call that ended (or was refused after it started).
pub(super) struct NestedDone {
  pub id: String,
  pub name: String,
  pub tool: ToolSpec,
  pub out: Executed,
  pub reply: Option<Reply>,
  /// A claim of a speculative call: what the dispatch settles to, with no accounting of its own.
  pub answer: Option<Result<Value, super::host::HostError>>,
}

/// What a failed `dispatch()` rejects with: the message, and its code when it starts with one.
pub(super) fn error_answer(text: String) -> super::host::HostError {
  let code = text.split(':').next().and_then(Code::parse).map(|c| c.as_str().to_string());
  super::host::HostError { message: text, code }
}

pub(super) enum NestedRefusal {
  /// The call ends as an error with this message; the run goes on.
  Blocked(String),
  /// The policy failed: the run ends.
  Policy(PolicyError),
}

/// The value a nested call settles to: a native tool's text as a string; a JS tool's or a
/// subagent's result is the JSON the host sent (a JS tool's own value).
fn settled_value(tool: &ToolSpec, text: &str) -> Value {
  match tool.runtime {
    ToolRuntime::Native { .. } => Value::String(text.to_string()),
    _ => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string())),
  }
}

/// Step 6 of `dispatchNestedTool`: waits for the container's order, re-checks the abort and
/// the deadline just before running, then runs the call under its abort (the container's
/// signal, the dispatch's own `signal`).
pub(super) async fn run_nested(
  exec: BoxFuture<Executed>,
  waits: Vec<CancellationToken>,
  abort: &NestedAbort,
  cancel: &CancellationToken,
  deadline: Option<Instant>,
  subagent: bool,
) -> Executed {
  let container_aborted = || Executed::error(Code::NestedToolAborted.as_str());
  let ordered = async {
    for w in &waits {
      w.cancelled().await;
    }
  };
  tokio::select! {
    _ = ordered => {}
    _ = abort.token().cancelled() => return Executed::error(abort.message()),
    _ = cancel.cancelled() => return container_aborted(),
  }
  if abort.is_aborted() {
    return Executed::error(abort.message());
  }
  if cancel.is_cancelled() {
    return container_aborted();
  }
  if deadline.is_some_and(|d| Instant::now() >= d) {
    return Executed::error(Code::RunDeadlineExceeded.as_str());
  }
  let mut exec = exec;
  tokio::select! {
    out = &mut exec => out,
    _ = abort.token().cancelled() => {
      // Native and JS tools stop on the cancel and answer at once; a subagent is dropped.
      cancel.cancel();
      if !subagent {
        let _ = exec.await;
      }
      Executed::error(abort.message())
    }
  }
}
