//! The turn loop, admission checks in the reference's order, tool dispatch, subagents, and the
//! result. One `Level` per agent run (the root, or a subagent's child run).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::budget::{catalog_price, round10, Admission, Denomination, Meter, Price, Usage};
use super::host::{Host, HostToolCall, ModelCall};
use super::journaling::{error_code, DurableRun, ToolIdentity, ToolPlan};
use super::receipt::{BreakerEvent, Receipt, ReceiptCall};
use super::schema::{coerce, stable_stringify, validate};
use super::spec::{AgentSpec, OptionError, RunLimits, RunOptionsSpec, ToolRuntime, ToolSpec};
use crate::canonical::sha256_hex;
use crate::durable::canonical::child_path;
use crate::durable::journal::{analyze, Expected, Journal, JournalState, PriorTotals, ResumeState};
use crate::durable::store::DurableStore;
use crate::durable::{run_id_error, valid_run_id, DurableError};
use crate::exec::BoxFuture;
use crate::limits::{DEFAULT_MAX_OUTPUT_TOKENS, INLINE_TOOL_RESULT_MAX_BYTES, TOOL_RESULT_MAX_BYTES};
use crate::policy::{decide_tool_call, default_timeout, PolicyError, PolicyInput};

/// A run error: becomes `run_error` / `CavemanRunError` with the partial receipt.
#[derive(Debug, Clone)]
pub struct RunFailure {
  /// The underlying message (`cave_*: …`); `code` is derived from it as the reference does,
  /// unless a replayed failure carries its journaled `code`.
  pub message: String,
  pub receipt: Value,
  pub code: Option<String>,
  /// Refused before the run started (lock, journal identity, corruption): a plain error.
  pub pre_run: bool,
}

impl RunFailure {
  fn refused(e: DurableError) -> Self {
    Self {
      message: e.message,
      receipt: Value::Null,
      code: Some(e.code),
      pre_run: true,
    }
  }
}

/// A durable run's store and the identity its journal is bound to.
pub struct DurableSetup {
  pub store: Arc<dyn DurableStore>,
  pub definition_sha256: String,
  /// The literal input (a string, or the parts).
  pub input: Value,
  pub session_id: String,
}

/// Options validated and the tree-wide state built, ready to run.
pub struct Prepared {
  limits: RunLimits,
  meter: Option<Meter>,
  options: RunOptionsSpec,
}

impl Prepared {
  pub fn new(options: RunOptionsSpec) -> Result<Self, OptionError> {
    let limits = options.limits()?;
    let meter = options.budget()?;
    Ok(Self {
      limits,
      meter,
      options,
    })
  }
}

struct Shared {
  host: Arc<dyn Host>,
  cancel: CancellationToken,
  deadline: Option<Instant>,
  limits: RunLimits,
  next_conversation: AtomicU64,
  next_call: AtomicU64,
  durable: Option<Arc<DurableRun>>,
  /// No `pi` events (a `run()`, which reads only `run_end` / `run_error`).
  quiet: bool,
}

fn now_ms() -> u64 {
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map(|d| d.as_millis() as u64)
    .unwrap_or(0)
}

/// Runs `agent` to completion. `Ok` is the `RunResult` JSON.
pub async fn run_agent(
  host: Arc<dyn Host>,
  agent: AgentSpec,
  prepared: Prepared,
  cancel: CancellationToken,
  durable: Option<DurableSetup>,
) -> Result<Value, RunFailure> {
  let started = Instant::now();
  let Prepared {
    limits,
    meter,
    options,
  } = prepared;
  let run_id = options.run_id.clone();
  let mut resume: Option<Box<ResumeState>> = None;
  let mut durable_run = None;
  let mut store_held: Option<Arc<dyn DurableStore>> = None;
  if let Some(setup) = durable {
    if !valid_run_id(&run_id) {
      return Err(RunFailure::refused(run_id_error()));
    }
    if options.max_cost_usd.is_some() {
      return Err(RunFailure::refused(DurableError::coded(
        "cave_durable_max_cost_usd_unsupported",
        "use RunOptions.budget with durable runs",
      )));
    }
    let store = setup.store.clone();
    store.acquire(&run_id).await.map_err(RunFailure::refused)?;
    let opened = open_journal(&store, &run_id, &agent, &options, &meter, &setup).await;
    let state = match opened {
      Ok(state) => state,
      Err(e) => {
        release(&store, &run_id).await;
        return Err(RunFailure::refused(e));
      }
    };
    match state {
      (JournalState::Completed { result }, _) => {
        release(&store, &run_id).await;
        host.emit(json!({"type": "run_start", "runId": run_id, "agentId": agent.id}));
        host.emit(json!({"type": "run_end", "runId": run_id, "result": result}));
        return Ok(result);
      }
      (
        JournalState::Failed {
          code,
          message,
          receipt,
        },
        _,
      ) => {
        release(&store, &run_id).await;
        host.emit(json!({"type": "run_start", "runId": run_id, "agentId": agent.id}));
        host.emit(
          json!({"type": "run_error", "runId": run_id, "code": code, "message": message, "receipt": receipt}),
        );
        return Err(RunFailure {
          message,
          receipt,
          code: Some(code),
          pre_run: false,
        });
      }
      (JournalState::Fresh, journal) => {
        durable_run = Some(Arc::new(DurableRun::new(
          &run_id,
          journal,
          Vec::new(),
          meter.is_some(),
        )));
      }
      (JournalState::Pending(state), journal) => {
        durable_run = Some(Arc::new(DurableRun::new(
          &run_id,
          journal,
          state.replay.clone(),
          meter.is_some(),
        )));
        resume = Some(state);
      }
    }
    store_held = Some(store);
  }
  let shared = Arc::new(Shared {
    host,
    cancel,
    deadline: limits.deadline_ms.map(|ms| started + Duration::from_millis(ms)),
    limits,
    next_conversation: AtomicU64::new(1),
    next_call: AtomicU64::new(1),
    durable: durable_run.clone(),
    quiet: options.quiet,
  });
  shared
    .host
    .emit(json!({"type": "run_start", "runId": run_id, "agentId": agent.id}));
  let mut level = Level::new(
    shared.clone(),
    Arc::new(agent),
    run_id.clone(),
    Vec::new(),
    String::new(),
    0,
    meter,
    true,
  );
  level.seed(&options.history);
  let mut outcome = match resume {
    Some(state) => match level.restore(&state).await {
      Ok(()) => level.run(options.input.clone(), started).await,
      Err(f) => Err(f),
    },
    None => level.run(options.input.clone(), started).await,
  };
  if let Some(d) = &durable_run {
    // Durability before visibility: the terminal event is fsynced before the caller sees it.
    let written = match &outcome {
      Ok(result) => d.completed(result).await,
      // An abort is the deliberate twin of a crash: the run stays resumable.
      Err(_) if shared.cancel.is_cancelled() => Ok(()),
      Err(f) => d.failed(error_code(&f.message), &f.message, &f.receipt).await,
    };
    if let Err(e) = written {
      outcome = Err(RunFailure {
        message: e.message,
        receipt: Value::Null,
        code: Some(e.code),
        pre_run: false,
      });
    }
  }
  if let Some(store) = &store_held {
    release(store, &run_id).await;
  }
  match &outcome {
    Ok(result) => shared.host.emit(json!({"type": "run_end", "runId": run_id, "result": result})),
    Err(f) => shared.host.emit(json!({"type": "run_error", "runId": run_id, "code": f.code, "message": f.message, "receipt": f.receipt})),
  }
  outcome
}

async fn release(store: &Arc<dyn DurableStore>, run_id: &str) {
  let _ = store.release(run_id).await;
  let _ = store.close(run_id).await;
}

/// `definitionSha256`: the agent graph without process-local handles (tool set ids).
pub fn definition_sha256(agent_json: &Value) -> String {
  fn strip(v: &Value) -> Value {
    match v {
      Value::Object(m) => Value::Object(
        m.iter()
          .filter(|(k, _)| k.as_str() != "toolset")
          .map(|(k, v)| (k.clone(), strip(v)))
          .collect(),
      ),
      Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
      other => other.clone(),
    }
  }
  let canonical = crate::durable::canonical::canonical_json(&strip(agent_json)).unwrap_or_default();
  sha256_hex(canonical.as_bytes())
}

/// Loads and checks the journal; writes `run_started` (fresh) or `resumed` (pending).
async fn open_journal(
  store: &Arc<dyn DurableStore>,
  run_id: &str,
  agent: &AgentSpec,
  options: &RunOptionsSpec,
  meter: &Option<Meter>,
  setup: &DurableSetup,
) -> Result<(JournalState, Journal), DurableError> {
  let lines = store.load(run_id).await?;
  let denomination = meter
    .as_ref()
    .map(|m| m.denomination.as_str())
    .unwrap_or("none")
    .to_string();
  let budget_max = meter.as_ref().map(|m| m.max);
  let budget_sha256 = match &options.budget {
    Some(b) => sha256_hex(
      stable_stringify(&serde_json::to_value(BudgetDigest::from(b)).unwrap_or_default()).as_bytes(),
    ),
    None => "none".to_string(),
  };
  let expected = Expected {
    run_id: run_id.into(),
    agent_id: agent.id.clone(),
    definition_sha256: setup.definition_sha256.clone(),
    input: setup.input.clone(),
    denomination: denomination.clone(),
    budget_max,
    budget_sha256: budget_sha256.clone(),
  };
  let state = analyze(&lines, &expected)?;
  let pid = std::process::id();
  let journal = match &state {
    JournalState::Fresh => {
      let mut j = Journal::new(store.clone(), run_id, 0, 0);
      let mut fields = json!({
        "runId": run_id, "agentId": agent.id, "definitionSha256": setup.definition_sha256, "input": setup.input,
        "sessionId": setup.session_id, "denomination": denomination, "budgetSha256": budget_sha256, "pid": pid
      });
      if let Some(max) = budget_max {
        fields["budgetMax"] = json!(max);
      }
      j.emit_flush("run_started", fields).await?;
      j
    }
    JournalState::Pending(st) => {
      if let Some(r) = st
        .replay
        .iter()
        .find(|r| r.settled.is_none() && (r.effect == "write" || r.effect == "external"))
      {
        // Never re-run a side effect blind. Journaled as the attempt's terminal failure below.
        let mut j = Journal::new(store.clone(), run_id, st.events, st.bytes);
        j.emit_flush(
          "resumed",
          json!({"attempt": st.attempts + 1, "unmatchedIntents": st.possible_double_count, "pid": pid}),
        )
        .await?;
        let msg = format!("cave_durable_tool_effect_uncertain:{}:{}", r.name, r.tool_call_id);
        let receipt = Receipt::new(run_id, &agent.id).to_value();
        let code = error_code(&msg).to_string();
        j.emit_flush(
          "run_failed",
          json!({"code": code, "message": msg, "receipt": receipt}),
        )
        .await?;
        return Ok((
          JournalState::Failed {
            code,
            message: msg,
            receipt,
          },
          j,
        ));
      }
      let mut j = Journal::new(store.clone(), run_id, st.events, st.bytes);
      j.emit_flush(
        "resumed",
        json!({"attempt": st.attempts + 1, "unmatchedIntents": st.possible_double_count, "pid": pid}),
      )
      .await?;
      j
    }
    _ => Journal::new(store.clone(), run_id, 0, 0),
  };
  Ok((state, journal))
}

/// The normalized budget whose digest binds a durable run's money contract.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct BudgetDigest {
  max_usd: Option<f64>,
  max_tokens: Option<f64>,
  initial_usd: Option<f64>,
  initial_tokens: Option<f64>,
  output_floor_tokens: Option<f64>,
  on_exhausted: String,
}

impl From<&super::spec::BudgetSpec> for BudgetDigest {
  fn from(b: &super::spec::BudgetSpec) -> Self {
    Self {
      max_usd: b.max_usd,
      max_tokens: b.max_tokens,
      initial_usd: b.initial_usd,
      initial_tokens: b.initial_tokens,
      output_floor_tokens: Some(
        b.output_floor_tokens
          .unwrap_or(crate::limits::OUTPUT_CLAMP_FLOOR_TOKENS as f64),
      ),
      on_exhausted: b.on_exhausted.clone().unwrap_or_else(|| "compact".into()),
    }
  }
}

/// What executing one tool call produced.
struct Executed {
  text: String,
  is_error: bool,
  child: Option<ChildReport>,
}

struct ChildReport {
  receipt: Value,
  usage: Totals,
  spent: f64,
}

#[derive(Default, Clone, Copy)]
struct Totals {
  input: u64,
  output: u64,
  cache_read: u64,
  cache_write: u64,
  reasoning: u64,
  cost_usd: f64,
  unpriced: bool,
  any_call: bool,
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

  fn add(&mut self, o: &Totals) {
    self.input += o.input;
    self.output += o.output;
    self.cache_read += o.cache_read;
    self.cache_write += o.cache_write;
    self.reasoning += o.reasoning;
    self.cost_usd += o.cost_usd;
    self.unpriced |= o.unpriced;
    self.any_call |= o.any_call;
  }
}

/// The admission verdict for one tool call.
enum Verdict {
  Run {
    index: usize,
    args: Value,
    wallet: Option<Meter>,
  },
  Blocked {
    reason: String,
  },
}

struct Level {
  shared: Arc<Shared>,
  agent: Arc<AgentSpec>,
  run_id: String,
  agent_path: Vec<String>,
  depth: u32,
  root: bool,
  meter: Option<Meter>,
  price: Option<Price>,
  receipt: Receipt,
  totals: Totals,
  conversation: u64,
  first_call: bool,
  /// `turn_start` of the coming turn was already emitted (the first turn opens before the prompt).
  turn_open: bool,
  pending: Vec<Value>,
  context_bytes: usize,
  message_count: usize,
  model_calls: u32,
  tool_budget_count: u32,
  tool_names: Vec<String>,
  stop: Option<&'static str>,
  /// Loop breaker: per turn, the call signatures seen (newest last).
  recent_calls: VecDeque<Vec<String>>,
  /// No-progress breaker: recent turn signatures.
  turn_signatures: VecDeque<String>,
  subagent_calls: HashMap<String, u32>,
  last_assistant: Option<Value>,
  /// The user's prompt is in the transcript already (a resumed durable run).
  prompted: bool,
  /// Durable path: `""` at the root, `<tool>:<sha256(callId)>` segments below.
  path: String,
  /// Root of a durable run: messages not yet journaled in a `turn` event.
  unjournaled: Vec<Value>,
  /// Set on a resumed attempt: `receipt.resume` and the prior usage.
  resume: Option<(Value, PriorTotals)>,
}

impl Level {
  #[allow(clippy::too_many_arguments)]
  fn new(
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
    let conversation = shared.next_conversation.fetch_add(1, Ordering::Relaxed);
    let receipt = Receipt::new(&run_id, &agent.id);
    Self {
      shared,
      agent,
      run_id,
      agent_path,
      depth,
      root,
      meter,
      price,
      receipt,
      totals: Totals::default(),
      conversation,
      first_call: true,
      turn_open: false,
      pending: Vec::new(),
      context_bytes: 0,
      message_count: 0,
      model_calls: 0,
      tool_budget_count: 0,
      tool_names: Vec::new(),
      stop: None,
      recent_calls: VecDeque::from([Vec::new()]),
      turn_signatures: VecDeque::new(),
      subagent_calls: HashMap::new(),
      last_assistant: None,
      path,
      prompted: false,
      unjournaled: Vec::new(),
      resume: None,
    }
  }

  fn durable(&self) -> Option<Arc<DurableRun>> {
    self.shared.durable.clone()
  }

  /// A conversation's earlier messages, sent ahead of this run's prompt.
  fn seed(&mut self, history: &[Value]) {
    for m in history {
      if self.meter.is_some() {
        self.context_bytes += m.to_string().len();
      }
      self.message_count += 1;
      self.pending.push(m.clone());
    }
  }

  /// A resumed attempt: settled spend preloaded, counters and the transcript restored.
  async fn restore(&mut self, state: &ResumeState) -> Result<(), RunFailure> {
    if let Some(m) = &mut self.meter {
      m.settle(state.prior_settled);
    }
    self.model_calls = state.prior_root_model_calls as u32;
    for (name, is_error) in &state.prior_tool_events {
      self.receipt.record_call(name);
      if *is_error {
        self.receipt.record_error(name);
      }
      self.tool_names.push(name.clone());
      self.tool_budget_count += 1;
    }
    let p = &state.prior_totals;
    let mut resume = json!({
      "attempts": state.attempts + 1,
      "priorCalls": state.prior_calls,
      "priorEstimatedUsd": round10(p.estimated_usd),
      "priorTokens": p.input + p.output + p.cache_read + p.cache_write,
      "priorUnpriced": p.unpriced,
      "possibleDoubleCountCalls": state.possible_double_count,
      "discardedPartialTurn": state.discarded_partial_turn
    });
    if self.meter.is_some() {
      resume["priorSettled"] = json!(round10(state.prior_settled));
    }
    self.resume = Some((resume, p.clone()));
    if state.has_completed_turn {
      // The journal already holds the prompt: the loop re-enters after the last complete turn.
      self.prompted = true;
      for m in &state.messages {
        if self.meter.is_some() {
          self.context_bytes += m.to_string().len();
        }
        self.message_count += 1;
        self.pending.push(m.clone());
      }
      if let Some(last) = state.messages.iter().rev().find(|m| m["role"] == "assistant") {
        self.last_assistant = Some(last.clone());
      }
    }
    Ok(())
  }

  /// Whether `pi` events go out: the root level of a `stream()`. Call sites building a large
  /// event (messages, results) check this first so a `run()` does not serialize them at all.
  fn pi_on(&self) -> bool {
    self.root && !self.shared.quiet
  }

  fn emit_pi(&self, event: Value) {
    if self.pi_on() {
      self
        .shared
        .host
        .emit(json!({"type": "pi", "runId": self.run_id, "event": event}));
    }
  }

  fn push_message(&mut self, msg: Value) {
    // The context size only feeds the budget's input ceiling: measured only under a budget.
    if self.meter.is_some() {
      self.context_bytes += msg.to_string().len();
    }
    self.message_count += 1;
    if self.root && self.shared.durable.is_some() {
      self.unjournaled.push(msg.clone());
    }
    self.pending.push(msg);
  }

  fn fail_durable(&mut self, e: DurableError) -> RunFailure {
    self.fail(e.message)
  }

  /// `turn`: the messages since the last checkpoint, durable before the next call.
  async fn journal_turn(&mut self) -> Result<(), RunFailure> {
    if let (true, Some(d)) = (self.root, self.durable()) {
      let messages = std::mem::take(&mut self.unjournaled);
      if let Err(e) = d.turn(messages).await {
        return Err(self.fail_durable(e));
      }
    }
    Ok(())
  }

  fn fail(&mut self, message: impl Into<String>) -> RunFailure {
    self.finish_receipt();
    RunFailure {
      message: message.into(),
      receipt: self.receipt.to_value(),
      code: None,
      pre_run: false,
    }
  }

  fn system_prompt(&self) -> String {
    system_prompt(&self.agent)
  }

  fn tool_schemas(&self) -> Vec<Value> {
    tool_schemas(&self.agent)
  }

  /// Boxed so a subagent's child run (which recurses through `execute`) has a nameable, `Send` type.
  fn run(self, input: Value, started: Instant) -> BoxFuture<Result<Value, RunFailure>> {
    Box::pin(self.run_inner(input, started))
  }

  async fn run_inner(mut self, input: Value, started: Instant) -> Result<Value, RunFailure> {
    if let Some(m) = &self.meter {
      if m.denomination == Denomination::Usd && self.price.is_none() {
        let (p, id) = (self.agent.model.provider.clone(), self.agent.model.id.clone());
        return Err(self.fail(format!(
          "cave_budget_denomination_unavailable: {p}/{id} is not in the public catalog, so a USD budget cannot meter it — use budget.maxTokens, or pick a cataloged model"
        )));
      }
    }
    if self.agent.sandbox == "required"
      && self
        .agent
        .tools
        .iter()
        .any(|t| !matches!(t.runtime, ToolRuntime::Subagent { .. }))
    {
      return Err(self.fail(
        "cave_tool_sandbox_entry_required: sandboxed tools need RunOptions.entryPath; use sandbox fixture only for trusted tests",
      ));
    }
    let system = self.system_prompt();
    if self.meter.is_some() {
      self.context_bytes += system.len();
      self.context_bytes += Value::Array(self.tool_schemas()).to_string().len();
    }
    self.emit_pi(json!({"type": "agent_start"}));
    // Pi opens the first turn before the prompt's message events.
    self.emit_pi(json!({"type": "turn_start"}));
    self.turn_open = true;
    if !self.prompted {
      let user = json!({"role": "user", "content": input, "timestamp": now_ms()});
      if self.pi_on() {
        self.emit_pi(json!({"type": "message_start", "message": user}));
        self.emit_pi(json!({"type": "message_end", "message": user}));
      }
      self.push_message(user);
    }

    loop {
      let Some(message) = self.model_turn(&system).await? else {
        break;
      };
      let calls: Vec<Value> = message
        .get("content")
        .and_then(Value::as_array)
        .map(|parts| {
          parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("toolCall"))
            .cloned()
            .collect()
        })
        .unwrap_or_default();
      if calls.is_empty() {
        self.journal_turn().await?;
        if self.pi_on() {
          self.emit_pi(json!({"type": "turn_end", "message": message, "toolResults": []}));
        }
        break;
      }
      let results = self.run_tool_calls(&calls).await?;
      self.journal_turn().await?;
      if self.pi_on() {
        self.emit_pi(json!({"type": "turn_end", "message": message, "toolResults": results}));
      }
      self.check_no_progress(&message);
    }
    if let (true, Some(d)) = (self.root, self.durable()) {
      if let Some(text) = d.fatal().or_else(|| d.incomplete()) {
        return Err(self.fail(text));
      }
    }
    self.emit_pi(json!({"type": "agent_end"}));
    self.finish(started)
  }

  /// Admission for a provider call; `Ok(None)` is a graceful stop.
  async fn model_turn(&mut self, system: &str) -> Result<Option<Value>, RunFailure> {
    if self.shared.cancel.is_cancelled() {
      return Err(self.fail("cave_run_aborted: the run was aborted"));
    }
    if self.model_calls >= self.shared.limits.max_model_calls {
      self.stop.get_or_insert("call_budget_exhausted");
      return Ok(None);
    }
    if self.stop.is_some() {
      return Ok(None);
    }
    if self.shared.deadline.is_some_and(|d| Instant::now() >= d) {
      self.stop = Some("deadline");
      return Ok(None);
    }
    let model_cap = self
      .agent
      .output
      .as_ref()
      .map(|o| o.max_tokens)
      .or(self.agent.model.max_tokens)
      .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
    let mut max_tokens = self.agent.output.as_ref().map(|o| o.max_tokens);
    let mut clamped = None;
    if let Some(meter) = &self.meter {
      let ceiling = Meter::input_ceiling(
        self.context_bytes,
        self.message_count,
        self.agent.model.context_window,
      );
      match meter.admit(ceiling, model_cap, self.price.as_ref()) {
        Admission::Stop => {
          self.stop = Some("budget_exhausted");
          return Ok(None);
        }
        Admission::Go {
          max_output,
          clamped: c,
        } => {
          max_tokens = Some(max_output);
          if c {
            clamped = Some(max_output);
          }
        }
      }
    }
    let durable = self.durable();
    if let Some(d) = &durable {
      if let Some(text) = d.fatal() {
        return Err(self.fail(text));
      }
      let (provider, model) = (self.agent.model.provider.clone(), self.agent.model.id.clone());
      if let Err(e) = d.call_started(&self.path, &provider, &model).await {
        return Err(self.fail_durable(e));
      }
    }
    self.model_calls += 1;
    if !std::mem::replace(&mut self.turn_open, false) {
      self.emit_pi(json!({"type": "turn_start"}));
    }
    let first = std::mem::replace(&mut self.first_call, false);
    let call = ModelCall {
      conversation: self.conversation,
      model_key: self.agent.model.key,
      append: std::mem::take(&mut self.pending),
      system_prompt: first.then(|| system.to_string()),
      tools: first.then(|| self.tool_schemas()),
      max_tokens,
      reasoning: self.agent.reasoning.clone(),
    };
    let cancel = self.shared.cancel.clone();
    let asked = Instant::now();
    let reply = tokio::select! {
      r = self.shared.host.model_call(call) => r,
      _ = cancel.cancelled() => return Err(self.fail("cave_run_aborted: the run was aborted")),
    };
    super::stats::model_call(asked.elapsed());
    let message = match reply {
      Ok(m) => m,
      Err(e) => {
        if let Some(d) = &durable {
          let _ = d.call_abandoned(&self.path).await;
        }
        return Err(self.fail(e));
      }
    };
    let (call, amount) = self.account(&message, clamped);
    if let Some(d) = &durable {
      if let Err(e) = d.call_settled(&self.path, call, amount).await {
        return Err(self.fail_durable(e));
      }
    }
    match message.get("stopReason").and_then(Value::as_str) {
      Some("error") => {
        let detail = message
          .get("errorMessage")
          .and_then(Value::as_str)
          .unwrap_or("provider error")
          .to_string();
        return Err(self.fail(format!("cave_provider_terminal_error: {detail}")));
      }
      Some("aborted") => {
        if self.shared.cancel.is_cancelled() {
          return Err(self.fail("cave_run_aborted: the run was aborted"));
        }
        return Err(self.fail("cave_provider_terminal_aborted: the provider call was aborted"));
      }
      _ => {}
    }
    self.push_message(message.clone());
    self.last_assistant = Some(message.clone());
    Ok(Some(message))
  }

  /// Accounts a provider message; returns the journaled usage and the settled amount.
  fn account(&mut self, message: &Value, clamped: Option<u64>) -> (Value, f64) {
    let usage = Usage::from_message(message);
    let unpriced = self.price.is_none();
    let cost = self.price.as_ref().map(|p| usage.cost(p)).unwrap_or(0.0);
    self.totals.add_usage(&usage, cost, unpriced);
    let mut amount = 0.0;
    if let Some(m) = &mut self.meter {
      amount = match m.denomination {
        Denomination::Usd => cost,
        Denomination::Tokens => usage.total() as f64,
      };
      m.settle(amount);
    }
    self.receipt.calls.push(ReceiptCall {
      provider: message
        .get("provider")
        .and_then(Value::as_str)
        .unwrap_or(&self.agent.model.provider)
        .to_string(),
      model: message
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(&self.agent.model.id)
        .to_string(),
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
    let mut call = serde_json::to_value(self.receipt.calls.last()).unwrap_or_default();
    if let Some(o) = call.as_object_mut() {
      o.remove("clampedOutputTokens");
    }
    (call, amount)
  }

  /// Runs one turn's tool calls: all concurrently when every tool is `read`, else one by one.
  async fn run_tool_calls(&mut self, calls: &[Value]) -> Result<Vec<Value>, RunFailure> {
    let mut results = Vec::with_capacity(calls.len());
    let mut in_turn = 0u32;
    // Pi agent-core: one sequential (non-read) tool in the turn makes the whole batch sequential;
    // otherwise every call is admitted in order, then all execute concurrently.
    let parallel = calls.iter().all(|c| {
      self
        .find_tool(call_name(c))
        .map_or(true, |t| self.agent.tools[t].effect == "read")
    });
    let batch_size = if parallel { calls.len().max(1) } else { 1 };
    for batch in calls.chunks(batch_size) {
      let mut verdicts = Vec::with_capacity(batch.len());
      let mut outs: Vec<Option<Executed>> = Vec::with_capacity(batch.len());
      for call in batch {
        in_turn += 1;
        let name = call_name(call).to_string();
        let id = call
          .get("id")
          .and_then(Value::as_str)
          .unwrap_or_default()
          .to_string();
        let args = call.get("arguments").cloned().unwrap_or(Value::Null);
        if self.pi_on() {
          self.emit_pi(
            json!({"type": "tool_execution_start", "toolCallId": id, "toolName": name, "args": args}),
          );
        }
        self.receipt.record_call(&name);
        self.tool_names.push(name.clone());
        self.tool_budget_count += 1;
        let verdict = match self.admit(&name, &id, &args, in_turn).await {
          Ok(v) => v,
          Err(policy_error) => {
            self.receipt.record_error(&name);
            return Err(self.fail(policy_error.code()));
          }
        };
        match &verdict {
          Verdict::Blocked { reason } => {
            let out = Executed {
              text: reason.clone(),
              is_error: true,
              child: None,
            };
            self.emit_tool_end(&id, &name, &out);
            outs.push(Some(out));
          }
          Verdict::Run { .. } => outs.push(None),
        }
        verdicts.push((id, name, verdict));
      }
      let shared = self.shared.clone();
      let mut running: futures::stream::FuturesUnordered<_> = verdicts
        .iter()
        .enumerate()
        .filter_map(|(k, (id, _, verdict))| {
          let Verdict::Run { index, args, wallet } = verdict else {
            return None;
          };
          let future: BoxFuture<Executed> = {
            let tool = self.agent.tools[*index].clone();
            let plan = self
              .durable()
              .map(|d| (d.plan(&self.path, id, &tool.name, &tool.effect, args), d));
            let mut ctx = ExecContext {
              shared: shared.clone(),
              agent_path: self.agent_path.clone(),
              path: self.path.clone(),
              depth: self.depth,
              durable_key: None,
            };
            match plan {
              None => Box::pin(execute(ctx, tool, args.clone(), id.clone(), wallet.clone())),
              Some((ToolPlan::Mismatch(text), _)) => Box::pin(async move { tool_error(text) }),
              Some((ToolPlan::Replay(text, is_error), _)) => Box::pin(async move {
                Executed {
                  text,
                  is_error,
                  child: None,
                }
              }),
              Some((plan @ (ToolPlan::Fresh(_) | ToolPlan::Redrive(_)), d)) => {
                // A fresh call journals its intent; a re-driven one settles the recorded intent.
                let (identity, fresh) = match plan {
                  ToolPlan::Fresh(identity) => (identity, true),
                  ToolPlan::Redrive(identity) => (identity, false),
                  _ => unreachable!("matched Fresh or Redrive"),
                };
                ctx.durable_key = Some((identity.idempotency_key.clone(), !fresh));
                Box::pin(execute_journaled(
                  ctx,
                  tool,
                  args.clone(),
                  identity,
                  wallet.clone(),
                  d,
                  fresh,
                ))
              }
            }
          };
          Some(async move {
            let started = Instant::now();
            let out = future.await;
            super::stats::tool_call(started.elapsed());
            (k, out)
          })
        })
        .collect();
      while let Some((k, out)) = futures::StreamExt::next(&mut running).await {
        let (id, name, _) = &verdicts[k];
        self.emit_tool_end(id, name, &out);
        outs[k] = Some(out);
      }
      drop(running);
      for ((id, name, _), out) in verdicts.into_iter().zip(outs) {
        let out = out.expect("every call of the batch settled");
        if out.is_error {
          self.receipt.record_error(&name);
        }
        let result = self.tool_result(&name, &out);
        if let Some(child) = out.child {
          self.receipt.subagents.push(child.receipt);
          self.totals.add(&child.usage);
          if let Some(m) = &mut self.meter {
            m.settle(child.spent);
          }
        }
        let message = json!({
          "role": "toolResult", "toolCallId": id, "toolName": name, "content": result["content"],
          "details": result["details"], "isError": out.is_error, "timestamp": now_ms()
        });
        if self.pi_on() {
          self.emit_pi(json!({"type": "message_start", "message": message}));
          self.emit_pi(json!({"type": "message_end", "message": message}));
        }
        self.push_message(message.clone());
        results.push(message);
      }
      if self.shared.cancel.is_cancelled() {
        return Err(self.fail("cave_run_aborted: the run was aborted"));
      }
    }
    Ok(results)
  }

  /// The tool result Pi builds: `details {effect, resultPolicy}` for a result the tool produced,
  /// `details {}` for an error (Pi's `createErrorToolResult`: blocked, thrown, timed out).
  fn tool_result(&self, name: &str, out: &Executed) -> Value {
    if out.is_error {
      return json!({"content": [{"type": "text", "text": out.text}], "details": {}});
    }
    let tool = self.find_tool(name).map(|t| &self.agent.tools[t]);
    let effect = tool.map(|t| t.effect.as_str()).unwrap_or_default();
    let result_policy = tool.map(|t| t.result.as_str()).unwrap_or("auto");
    json!({"content": [{"type": "text", "text": out.text}], "details": {"effect": effect, "resultPolicy": result_policy}})
  }

  fn emit_tool_end(&self, id: &str, name: &str, out: &Executed) {
    if self.pi_on() {
      let result = self.tool_result(name, out);
      self.emit_pi(json!({"type": "tool_execution_end", "toolCallId": id, "toolName": name, "result": result, "isError": out.is_error}));
    }
  }

  fn find_tool(&self, name: &str) -> Option<usize> {
    self.agent.tools.iter().position(|t| t.name == name)
  }

  /// The admission checks of `beforeToolCall`, in the reference's order. `Err` is a policy failure.
  async fn admit(
    &mut self,
    name: &str,
    id: &str,
    args: &Value,
    in_turn: u32,
  ) -> Result<Verdict, PolicyError> {
    let blocked = |reason: &str| {
      Ok(Verdict::Blocked {
        reason: reason.to_string(),
      })
    };
    // Pi converts and validates the arguments of a declared tool before `beforeToolCall` runs;
    // the policy and the tool get the converted arguments.
    let converted = self
      .find_tool(name)
      .map(|i| coerce(&self.agent.tools[i].input, args));
    let raw = args;
    let args = converted.as_ref().unwrap_or(raw);
    if let Some(tool) = self.find_tool(name).map(|i| &self.agent.tools[i]) {
      let problems = validate(&tool.input, args);
      if !problems.is_empty() {
        let text = format!(
          "Validation failed for tool \"{}\":\n{}\n\nReceived arguments:\n{}",
          tool.name,
          problems
            .iter()
            .map(|p| format!("  - {p}"))
            .collect::<Vec<_>>()
            .join("\n"),
          serde_json::to_string_pretty(raw).unwrap_or_default()
        );
        return Ok(Verdict::Blocked { reason: text });
      }
    }
    if self.shared.deadline.is_some_and(|d| Instant::now() >= d) {
      self.stop = Some("deadline");
      return blocked("cave_run_deadline_exceeded");
    }
    if self.meter.as_ref().is_some_and(Meter::exhausted) {
      self.stop = Some("budget_exhausted");
      return blocked("cave_budget_exhausted");
    }
    if self.tool_budget_count > self.shared.limits.max_tool_calls {
      return blocked("cave_tool_call_budget_exceeded");
    }
    let index = self.find_tool(name);
    let allow_repeat = index.is_some_and(|i| self.agent.tools[i].allow_repeat);
    if let Some(b) = self.shared.limits.breakers {
      if in_turn > b.max_tool_calls_per_turn {
        self.receipt.breakers.push(BreakerEvent {
          kind: "fan_out_blocked",
          tool: Some(name.into()),
          count: in_turn as u64,
          signature: None,
        });
        return blocked("cave_fan_out_cap_exceeded");
      }
      if !allow_repeat {
        let signature = sha256_hex(&stable_stringify(&json!({"tool": name, "args": args})));
        let seen = self
          .recent_calls
          .iter()
          .flatten()
          .filter(|s| **s == signature)
          .count() as u32
          + 1;
        self
          .recent_calls
          .back_mut()
          .map(|turn| turn.push(signature.clone()));
        if seen >= b.repeated_tool_calls {
          self.receipt.breakers.push(BreakerEvent {
            kind: "loop_detected",
            tool: Some(name.into()),
            count: seen as u64,
            signature: Some(signature),
          });
          self.stop = Some("loop_detected");
          return blocked("cave_tool_call_loop_detected");
        }
      }
    }
    let Some(index) = index else {
      return blocked("cave_unknown_tool");
    };
    let tool = &self.agent.tools[index];
    if self.agent.sandbox == "fixture" && tool.effect == "write" {
      return blocked("cave_side_effect_blocked");
    }
    if !args.is_object() {
      return blocked("cave_tool_arguments_invalid");
    }
    let effect = tool.effect.clone();
    if let Some(policy) = self.shared.host.policy() {
      let input = PolicyInput {
        run_id: self.run_id.clone(),
        agent_id: self.agent.id.clone(),
        agent_path: self.agent_path.clone(),
        tool_call_id: id.to_string(),
        parent_tool_call_id: None,
        name: name.to_string(),
        effect,
        args: args.clone(),
      };
      if let Some(denial) = decide_tool_call(policy.as_ref(), &input, default_timeout()).await? {
        self.receipt.record_denial(name);
        return Ok(Verdict::Blocked {
          reason: denial.reason,
        });
      }
    }
    // Subagent checks run where the reference's `executeSubagent` runs them: after the policy,
    // in its order (arguments, input limit, calls per tool name, depth, wallet), so a call that
    // fails an earlier check does not use up `maxCalls`.
    let mut wallet = None;
    let tool = &self.agent.tools[index];
    if let ToolRuntime::Subagent {
      max_calls,
      max_cost_usd,
      max_tokens,
      max_input_chars,
      ..
    } = &tool.runtime
    {
      let Some(task) = args.get("task").and_then(Value::as_str) else {
        return blocked("cave_subagent_arguments_invalid");
      };
      if task.chars().map(char::len_utf16).sum::<usize>() as u64 > *max_input_chars {
        return blocked("cave_subagent_input_limit");
      }
      let used = self.subagent_calls.entry(name.to_string()).or_insert(0);
      if *used >= *max_calls {
        return blocked("cave_subagent_call_budget");
      }
      *used += 1;
      if self.depth + 1 > self.shared.limits.max_subagent_depth {
        return blocked("cave_subagent_depth_limit");
      }
      if let Some(parent) = &self.meter {
        let cap = match parent.denomination {
          Denomination::Usd => *max_cost_usd,
          Denomination::Tokens => max_tokens.map(|t| t as f64),
        };
        let Some(cap) = cap else {
          return blocked("cave_subagent_wallet_denomination_unavailable");
        };
        let carve = cap.min(parent.remaining());
        if carve <= 0.0 {
          return blocked("cave_subagent_wallet_unavailable");
        }
        let mut m = Meter::new(parent.denomination, cap, Some(carve), Some(parent.floor));
        m.max = cap;
        wallet = Some(m);
      }
    }
    Ok(Verdict::Run {
      index,
      args: args.clone(),
      wallet,
    })
  }

  fn check_no_progress(&mut self, message: &Value) {
    // Start a fresh loop-breaker window for the next turn.
    if let Some(b) = self.shared.limits.breakers {
      self.recent_calls.push_back(Vec::new());
      while self.recent_calls.len() > b.window_turns as usize {
        self.recent_calls.pop_front();
      }
      let content = message.get("content").cloned().unwrap_or(Value::Null);
      let signature = sha256_hex(&stable_stringify(&content_signature(&content)));
      self.turn_signatures.push_back(signature.clone());
      while self.turn_signatures.len() > b.no_progress_turns as usize {
        self.turn_signatures.pop_front();
      }
      if self.turn_signatures.len() == b.no_progress_turns as usize
        && self.turn_signatures.iter().all(|s| *s == signature)
      {
        self.receipt.breakers.push(BreakerEvent {
          kind: "no_progress",
          tool: None,
          count: b.no_progress_turns as u64,
          signature: Some(signature),
        });
        self.stop.get_or_insert("no_progress");
      }
    }
  }

  fn finish_receipt(&mut self) {
    let t = self.all_totals();
    let resume = self.resume.as_ref().map(|(v, _)| v.clone());
    let r = &mut self.receipt;
    r.stop_reason = self.stop.unwrap_or("complete").to_string();
    if let Some(m) = &self.meter {
      r.denomination = m.denomination.as_str();
      r.max = Some(m.max);
      r.released = Some(round10(m.released));
      r.spent = Some(round10(m.spent));
      r.overspent = m.overspent;
      r.cap_breached = m.cap_breached;
    }
    r.cap_breached |= r
      .subagents
      .iter()
      .any(|s| s.get("capBreached") == Some(&Value::Bool(true)));
    r.total_estimated_usd = round10(t.cost_usd);
    r.total_tokens = t.input + t.output + t.cache_read + t.cache_write;
    r.unpriced = t.unpriced;
    r.resume = resume;
  }

  /// This attempt's totals plus those of earlier attempts of a resumed durable run.
  fn all_totals(&self) -> Totals {
    let mut t = self.totals;
    if let Some((_, p)) = &self.resume {
      t.add(&Totals {
        input: p.input,
        output: p.output,
        cache_read: p.cache_read,
        cache_write: p.cache_write,
        reasoning: p.reasoning,
        cost_usd: p.estimated_usd,
        unpriced: p.unpriced,
        any_call: true,
      });
    }
    t
  }

  fn finish(mut self, started: Instant) -> Result<Value, RunFailure> {
    self.finish_receipt();
    let stop_reason = self.stop.unwrap_or("complete");
    let last = self.last_assistant.clone();
    let text = last.as_ref().map(message_text).unwrap_or_default();
    let mut output = None;
    if let (Some(schema), Some(_)) = (self.agent.output.as_ref().and_then(|o| o.schema.as_ref()), &last) {
      if stop_reason == "complete" {
        let parsed: Value = match serde_json::from_str(&text) {
          Ok(v) => v,
          Err(_) => return Err(self.fail("cave_output_schema_invalid_json")),
        };
        if !validate(schema, &parsed).is_empty() {
          return Err(self.fail("cave_output_schema_mismatch"));
        }
        output = Some(parsed);
      }
    }
    let t = self.all_totals();
    let provider = last
      .as_ref()
      .and_then(|m| m.get("provider"))
      .and_then(Value::as_str)
      .unwrap_or(&self.agent.model.provider);
    let model = last
      .as_ref()
      .and_then(|m| m.get("model"))
      .and_then(Value::as_str)
      .unwrap_or(&self.agent.model.id);
    let usage_basis = if t.any_call {
      "provider_reported"
    } else {
      "unavailable"
    };
    let mut result = json!({
      "runId": self.run_id,
      "agentId": self.agent.id,
      "text": text,
      "contextBill": {},
      "usageBasis": usage_basis,
      "inputTokens": t.input,
      "outputTokens": t.output,
      "cacheReadTokens": t.cache_read,
      "cacheWriteTokens": t.cache_write,
      "reasoningTokens": t.reasoning,
      "reasoningUsageBasis": usage_basis,
      "costUsd": round10(t.cost_usd),
      "priceBasis": if t.unpriced { "unpriced" } else { "public_catalog" },
      "mode": "observe-only",
      "provider": provider,
      "model": model,
      "latencyMs": started.elapsed().as_millis() as u64,
      "toolCalls": self.tool_names,
      "evaluatedTransformIDs": [],
      "transformIDs": [],
      "transformFailures": [],
      "transformTrace": [],
      "recoveryResolved": false,
      "stopReason": stop_reason,
      "capBreached": self.receipt.cap_breached,
      "overspent": self.receipt.overspent,
      "receipt": self.receipt.to_value(),
      "claimBasis": "inferred",
      "unlocked": true
    });
    if let Some(o) = output {
      result["output"] = o;
    }
    if self.resume.is_some() {
      result["resumed"] = json!(true);
    }
    Ok(result)
  }
}

fn call_name(call: &Value) -> &str {
  call.get("name").and_then(Value::as_str).unwrap_or_default()
}

fn message_text(message: &Value) -> String {
  message
    .get("content")
    .and_then(Value::as_array)
    .map(|parts| {
      parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("")
    })
    .unwrap_or_default()
}

/// A turn's signature ignores call ids (they differ every turn).
fn content_signature(content: &Value) -> Value {
  match content {
    Value::Array(parts) => Value::Array(
      parts
        .iter()
        .map(|p| {
          let mut p = p.clone();
          if let Some(o) = p.as_object_mut() {
            o.remove("id");
          }
          p
        })
        .collect(),
    ),
    other => other.clone(),
  }
}

struct ExecContext {
  shared: Arc<Shared>,
  agent_path: Vec<String>,
  /// The calling level's durable path.
  path: String,
  depth: u32,
  /// `context.durable` for the tool: `(idempotencyKey, resumed)`.
  durable_key: Option<(String, bool)>,
}

/// Journals the intent (unless re-driving a recorded one), runs the call, journals the outcome.
async fn execute_journaled(
  ctx: ExecContext,
  tool: ToolSpec,
  args: Value,
  identity: ToolIdentity,
  wallet: Option<Meter>,
  durable: Arc<DurableRun>,
  write_intent: bool,
) -> Executed {
  if write_intent {
    if let Err(e) = durable.tool_intent(&identity).await {
      durable.set_fatal(e.message.clone());
      return tool_error(e.message);
    }
  }
  let out = execute(ctx, tool, args, identity.tool_call_id.clone(), wallet).await;
  if let Err(e) = durable.tool_settled(&identity, &out.text, out.is_error).await {
    durable.set_fatal(e.message.clone());
    return Executed {
      text: e.message,
      is_error: true,
      child: out.child,
    };
  }
  out
}

fn tool_error(text: impl Into<String>) -> Executed {
  Executed {
    text: text.into(),
    is_error: true,
    child: None,
  }
}

/// Executes one admitted call. Never fails: errors become error results the model reads.
async fn execute(
  ctx: ExecContext,
  tool: ToolSpec,
  args: Value,
  tool_call_id: String,
  wallet: Option<Meter>,
) -> Executed {
  let timeout = Duration::from_millis(tool.timeout_ms.max(1));
  match &tool.runtime {
    ToolRuntime::Native {
      toolset,
      has_on_output,
    } => {
      let Some(tools) = ctx.shared.host.native_toolset(*toolset) else {
        return tool_error(format!(
          "cave_tool_definition_invalid: native tool set {toolset} is gone"
        ));
      };
      let token = ctx.shared.cancel.child_token();
      match tokio::time::timeout(timeout, tools.execute(&tool.name, &args, token.clone())).await {
        Err(_) => {
          token.cancel();
          tool_error("cave_tool_timeout")
        }
        Ok(Err(e)) => tool_error(e.message),
        Ok(Ok(out)) => {
          if let (true, Some(label)) = (*has_on_output, &out.label) {
            ctx.shared.host.on_output(*toolset, label, &out.text);
          }
          settle_text(&tool, out.text)
        }
      }
    }
    ToolRuntime::Host { key } => {
      let call_id = ctx.shared.next_call.fetch_add(1, Ordering::Relaxed);
      let call = HostToolCall {
        call_id,
        key: *key,
        args,
        tool_call_id,
        parent_tool_call_id: None,
        durable: ctx.durable_key.clone(),
      };
      match tokio::time::timeout(timeout, ctx.shared.host.tool_call(call)).await {
        Err(_) => {
          ctx.shared.host.abort_tool(call_id);
          tool_error("cave_tool_timeout")
        }
        Ok(Err(message)) => tool_error(message),
        Ok(Ok(text)) => {
          if let Some(schema) = &tool.output {
            let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
            if !validate(schema, &value).is_empty() {
              return tool_error(format!("cave_tool_output_schema_mismatch:{}", tool.name));
            }
          }
          settle_text(&tool, text)
        }
      }
    }
    ToolRuntime::Subagent {
      agent,
      max_context_tokens,
      ..
    } => {
      let task = args.get("task").and_then(Value::as_str).unwrap_or_default();
      if (task.len() as u64).div_ceil(4) > *max_context_tokens {
        return tool_error("cave_subagent_context_budget");
      }
      let mut agent_path = ctx.agent_path.clone();
      agent_path.push(tool.name.clone());
      let child_id = uuid::Uuid::new_v4().to_string();
      let path = child_path(&ctx.path, &tool.name, &tool_call_id);
      let level = Level::new(
        ctx.shared.clone(),
        Arc::new((**agent).clone()),
        child_id,
        agent_path,
        path,
        ctx.depth + 1,
        wallet,
        false,
      );
      let input = json!([{"type": "text", "text": task}]);
      match level.run(input, Instant::now()).await {
        Err(f) => Executed {
          text: f.message,
          is_error: true,
          child: Some(child_report(&f.receipt, None)),
        },
        Ok(result) => {
          let text = json!({
            "text": result["text"], "agent_id": result["agentId"], "usage_basis": result["usageBasis"],
            "input_tokens": result["inputTokens"], "output_tokens": result["outputTokens"],
            "cost_usd": result["costUsd"], "stop_reason": result["stopReason"], "claim_basis": "inferred"
          })
          .to_string();
          Executed {
            text,
            is_error: false,
            child: Some(child_report(&result["receipt"], Some(&result))),
          }
        }
      }
    }
  }
}

fn child_report(receipt: &Value, result: Option<&Value>) -> ChildReport {
  let n = |k: &str| result.and_then(|r| r.get(k)).and_then(Value::as_u64).unwrap_or(0);
  let usage = Totals {
    input: n("inputTokens"),
    output: n("outputTokens"),
    cache_read: n("cacheReadTokens"),
    cache_write: n("cacheWriteTokens"),
    reasoning: n("reasoningTokens"),
    cost_usd: receipt
      .get("totalEstimatedUsd")
      .and_then(Value::as_f64)
      .unwrap_or(0.0),
    unpriced: receipt.get("unpriced").and_then(Value::as_bool).unwrap_or(false),
    any_call: receipt
      .get("calls")
      .and_then(Value::as_array)
      .is_some_and(|c| !c.is_empty()),
  };
  let spent = receipt.get("spent").and_then(Value::as_f64).unwrap_or(0.0);
  ChildReport {
    receipt: receipt.clone(),
    usage,
    spent,
  }
}

/// Result-size rules of `toPiTool` / `settleToolOutput`.
fn settle_text(tool: &ToolSpec, text: String) -> Executed {
  if text.len() > TOOL_RESULT_MAX_BYTES {
    return tool_error(format!("cave_tool_result_limit:{}", tool.name));
  }
  if text.len() > INLINE_TOOL_RESULT_MAX_BYTES {
    match tool.result.as_str() {
      "inline" => return tool_error("cave_tool_result_inline_limit"),
      _ => return tool_error("cave_tool_result_requires_recovery"),
    }
  }
  Executed {
    text,
    is_error: false,
    child: None,
  }
}

/// The system prompt: instructions, contexts and the output contract, joined as the reference does.
pub fn system_prompt(agent: &AgentSpec) -> String {
  let mut parts = vec![agent.instructions.clone()];
  for c in &agent.contexts {
    parts.push(format!(
      "<cave-context id=\"{}\">\n{}\n</cave-context>",
      c.id, c.text
    ));
  }
  if let Some(out) = &agent.output {
    parts.push(match &out.schema {
      Some(schema) => format!(
        "<cave-output max_tokens={}>Return exactly one JSON document matching this JSON Schema and no other prose:\n{}</cave-output>",
        out.max_tokens,
        stable_stringify(schema)
      ),
      None => format!("<cave-output max_tokens={}>Return output matching declared schema when present.</cave-output>", out.max_tokens),
    });
  }
  parts.join("\n\n")
}

/// The tool list the model sees.
pub fn tool_schemas(agent: &AgentSpec) -> Vec<Value> {
  agent
    .tools
    .iter()
    .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.input}))
    .collect()
}
