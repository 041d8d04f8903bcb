//! `run_agent`: one run from start to its terminal event. Durable runs open (or refuse, or
//! replay) their journal here before the root agent run starts, and journal the outcome before
//! the caller sees it.

use std::borrow::Cow;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::budget::{LegacyLedger, Meter, MeterCell};
use super::event::RunEvent;
use super::host::{Host, ToolSchema};
use super::journaling::DurableRun;
use super::level::Level;
use super::receipt::Receipt;
use super::result::{ReceiptOut, RunFailure, RunOutput};
use super::schema::stable_stringify;
use super::spec::{AgentSpec, OptionError, RunLimits, RunOptionsSpec};
use crate::code::{Code, Error};
use crate::canonical::sha256_hex;
use crate::durable::canonical::canonical_json;
use crate::durable::journal::{analyze, Expected, Journal, JournalState, ResumeState};
use crate::durable::record::{json, Record};
use crate::durable::store::DurableStore;
use crate::durable::{run_id_error, valid_run_id, DurableError};

/// A durable run's store and the identity its journal is bound to.
pub struct DurableSetup {
  pub store: Arc<dyn DurableStore>,
  pub definition_sha256: String,
  /// The literal input (a string, or the parts).
  pub input: Value,
  pub session_id: String,
  /// A bound Conversation's base checkpoint `{sessionId, messagesSha256, messages}`: journaled
  /// in `run_started`, checked on resume, advanced to the terminal checkpoint in `run_completed`.
  pub conversation: Option<Value>,
}

/// Options validated and the tree-wide state built, ready to run.
pub struct Prepared {
  limits: RunLimits,
  meter: Option<MeterCell>,
  compaction: Option<crate::compaction::Compaction>,
  options: RunOptionsSpec,
}

impl Prepared {
  pub fn new(options: RunOptionsSpec) -> Result<Self, OptionError> {
    let limits = options.limits()?;
    let meter = options.budget()?.map(MeterCell::new);
    let compaction = options.compaction()?;
    Ok(Self {
      limits,
      meter,
      compaction,
      options,
    })
  }

  /// The root meter (`RunOptions.budget`), shared with a `BudgetController`.
  pub fn meter(&self) -> Option<MeterCell> {
    self.meter.clone()
  }
}

/// What every agent run of one run tree shares.
pub(super) struct Shared {
  pub host: Arc<dyn Host>,
  pub cancel: CancellationToken,
  pub deadline: Option<Instant>,
  pub limits: RunLimits,
  pub next_conversation: AtomicU64,
  pub next_call: AtomicU64,
  /// The `n` of nested call ids `<parent>:nested:<n>`: one counter for the whole run, from 1.
  pub next_nested: AtomicU64,
  /// Subagent runs started in the tree, and those in flight (`maxSubagentInvocations`,
  /// `maxConcurrentSubagents`).
  pub subagent_invocations: AtomicU64,
  pub subagents_active: AtomicU64,
  pub durable: Option<Arc<DurableRun>>,
  /// The legacy `maxCostUsd` ledger, tree-wide.
  pub legacy: Option<LegacyLedger>,
  /// No `pi` events (a `run()`, which reads only `run_end` / `run_error`).
  pub quiet: bool,
  /// `RunOptions.entryPath` was given: `"required"` levels may run their tools.
  pub sandbox_entry: bool,
  /// The root budget's compaction options (`onExhausted: "compact"`): the root compacts on its
  /// budget, and a subagent on the wallet carved from it.
  pub compaction: Option<crate::compaction::Compaction>,
}

/// How a durable run's journal opened.
enum Opened {
  Fresh(Journal),
  Pending(Journal, Box<ResumeState>),
  Completed(Value),
  Failed {
    code: String,
    message: String,
    receipt: Value,
  },
}

/// Runs `agent` to completion: `Ok` is the `RunResult` (built now, or replayed from the journal).
pub async fn run_agent(
  host: Arc<dyn Host>,
  agent: AgentSpec,
  prepared: Prepared,
  cancel: CancellationToken,
  durable: Option<DurableSetup>,
) -> Result<RunOutput, RunFailure> {
  let started = Instant::now();
  // Graph validation: a plain Error before anything starts, as the reference's root context.
  agent.check_sandbox_nesting().map_err(RunFailure::refused)?;
  let Prepared {
    limits,
    meter,
    compaction,
    options,
  } = prepared;
  let run_id = options.run_id.clone();
  let run_start = || RunEvent::RunStart {
    run_id: run_id.clone(),
    agent_id: agent.id.clone(),
  };
  let mut resume: Option<Box<ResumeState>> = None;
  let mut durable_run = None;
  let mut store_held: Option<Arc<dyn DurableStore>> = None;
  if let Some(setup) = durable {
    if !valid_run_id(&run_id) {
      return Err(RunFailure::refused(run_id_error()));
    }
    if options.max_cost_usd.is_some() {
      return Err(RunFailure::refused(Error::coded(
        Code::DurableMaxCostUsdUnsupported,
        "use RunOptions.budget with durable runs",
      )));
    }
    let store = setup.store.clone();
    store.acquire(&run_id).await.map_err(RunFailure::refused)?;
    let opened = match open_journal(
      &store,
      &run_id,
      &agent,
      &options,
      &meter.as_ref().map(MeterCell::snapshot),
      &setup,
    )
    .await
    {
      Ok(opened) => opened,
      Err(e) => {
        release(&store, &run_id).await;
        return Err(RunFailure::refused(e));
      }
    };
    let (journal, replay) = match opened {
      Opened::Completed(result) => {
        release(&store, &run_id).await;
        host.emit(run_start());
        let result = RunOutput::Replayed(result);
        host.emit(RunEvent::RunEnd {
          run_id: run_id.clone(),
          result: result.clone(),
        });
        return Ok(result);
      }
      Opened::Failed {
        code,
        message,
        receipt,
      } => {
        release(&store, &run_id).await;
        host.emit(run_start());
        host.emit(RunEvent::RunError {
          run_id: run_id.clone(),
          code: code.clone(),
          message: message.clone(),
          receipt: ReceiptOut::Journaled(receipt.clone()),
        });
        let code = Code::parse(&code).unwrap_or_else(|| Code::Other(code.into()));
        return Err(RunFailure {
          error: Error::new(code.clone(), message),
          code,
          receipt: ReceiptOut::Journaled(receipt),
          pre_run: false,
        });
      }
      Opened::Fresh(journal) => (journal, Vec::new()),
      Opened::Pending(journal, state) => {
        let replay = state.replay.clone();
        resume = Some(state);
        (journal, replay)
      }
    };
    let d = Arc::new(DurableRun::new(&run_id, journal, replay, meter.is_some()));
    if let Some(c) = &setup.conversation {
      // The terminal checkpoint is the base plus every message the run journals.
      let mut transcript = c["messages"].as_array().cloned().unwrap_or_default();
      if let Some(state) = resume.as_ref().filter(|s| s.has_completed_turn) {
        let journaled = state.transcript.as_ref().unwrap_or(&state.messages);
        transcript.extend(journaled.iter().map(|m| serde_json::to_value(m).unwrap_or(Value::Null)));
      }
      d.bind_conversation(c["sessionId"].as_str().unwrap_or_default(), transcript);
    }
    durable_run = Some(d);
    store_held = Some(store);
  }
  let shared = Arc::new(Shared {
    host,
    cancel,
    deadline: limits.deadline_ms.map(|ms| started + Duration::from_millis(ms)),
    limits,
    next_conversation: AtomicU64::new(1),
    next_call: AtomicU64::new(1),
    next_nested: AtomicU64::new(1),
    subagent_invocations: AtomicU64::new(0),
    subagents_active: AtomicU64::new(0),
    durable: durable_run.clone(),
    legacy: options.max_cost_usd.map(LegacyLedger::new),
    quiet: options.quiet,
    sandbox_entry: options.entry_path.is_some(),
    compaction: compaction.clone(),
  });
  shared.host.emit(run_start());
  let mut level = Level::new(
    shared.clone(),
    Arc::new(agent),
    run_id.clone(),
    Vec::new(),
    String::new(),
    0,
    meter.clone(),
    true,
  );
  if let Some(c) = compaction {
    level.enable_compaction(c);
  }
  let images = options.model_input.as_ref().map(|kinds| kinds.iter().any(|k| k == "image"));
  let prior_calls = resume.as_ref().map_or(0, |s| s.prior_root_model_calls);
  level.enable_routing(shared.host.router(), images, prior_calls);
  level.seed(options.history);
  if let Some(state) = &resume {
    level.restore(state);
  }
  let mut outcome = level
    .run(options.input, started)
    .await
    .map(|r| RunOutput::Fresh(Box::new(r)));
  if let Some(d) = &durable_run {
    // Tranches released since the last barrier go ahead of the terminal event.
    let fresh = meter
      .as_ref()
      .map(|m| m.lock().take_unjournaled())
      .unwrap_or_default();
    if let Some(e) = fresh.iter().find_map(|t| d.tranche(t).err()) {
      outcome = Err(RunFailure {
        code: e.code.clone(),
        error: e,
        receipt: ReceiptOut::None,
        pre_run: false,
      });
    }
    // Durability before visibility: the terminal event is fsynced before the caller sees it.
    let written = match &outcome {
      Ok(result) => d.completed(result).await,
      // An abort is the deliberate twin of a crash: the run stays resumable.
      Err(_) if shared.cancel.is_cancelled() => Ok(()),
      Err(f) => d.failed(f.code.as_str(), f.message(), &f.receipt).await,
    };
    if let Err(e) = written {
      outcome = Err(RunFailure {
        code: e.code.clone(),
        error: e,
        receipt: ReceiptOut::None,
        pre_run: false,
      });
    }
  }
  if let Some(store) = &store_held {
    release(store, &run_id).await;
  }
  shared.host.emit(match &outcome {
    Ok(result) => RunEvent::RunEnd {
      run_id: run_id.clone(),
      result: result.clone(),
    },
    Err(f) => RunEvent::RunError {
      run_id: run_id.clone(),
      code: f.code.as_str().to_string(),
      message: f.message().to_string(),
      receipt: f.receipt.clone(),
    },
  });
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
  let canonical = canonical_json(&strip(agent_json)).unwrap_or_default();
  sha256_hex(canonical.as_bytes())
}

/// Loads and checks the journal (off the calling thread: a long journal takes a while); writes
/// `run_started` (fresh) or `resumed` (pending).
async fn open_journal(
  store: &Arc<dyn DurableStore>,
  run_id: &str,
  agent: &AgentSpec,
  options: &RunOptionsSpec,
  meter: &Option<Meter>,
  setup: &DurableSetup,
) -> Result<Opened, DurableError> {
  let lines = store.load(run_id).await?;
  let denomination = meter.as_ref().map_or("none", |m| m.denomination.as_str());
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
    denomination: denomination.to_string(),
    budget_max,
    budget_sha256: budget_sha256.clone(),
  };
  if let Some(first) = lines.first() {
    crate::durable::summary::check_conversation_binding(first, setup.conversation.as_ref())?;
  }
  let state = match tokio::runtime::Handle::try_current() {
    Ok(_) => tokio::task::spawn_blocking(move || analyze(&lines, &expected))
      .await
      .unwrap_or_else(|e| Err(Error::coded(Code::Internal, e))),
    Err(_) => analyze(&lines, &expected),
  }?;
  let pid = std::process::id() as u64;
  let resumed = |st: &ResumeState| Record::Resumed {
    attempt: st.attempts + 1,
    unmatched_intents: st.possible_double_count,
    pid,
  };
  Ok(match state {
    JournalState::Fresh => {
      let mut j = Journal::new(store.clone(), run_id, 0, 0);
      j.emit_flush(&Record::RunStarted {
        run_id: Cow::Borrowed(run_id),
        agent_id: Cow::Borrowed(&agent.id),
        definition_sha256: Cow::Borrowed(&setup.definition_sha256),
        input: json(&setup.input),
        session_id: Cow::Borrowed(&setup.session_id),
        denomination: Cow::Borrowed(denomination),
        budget_max,
        budget_sha256: Cow::Borrowed(&budget_sha256),
        conversation: setup.conversation.as_ref().map(json),
        pid,
      })
      .await?;
      Opened::Fresh(j)
    }
    JournalState::Pending(st) => {
      let mut j = Journal::new(store.clone(), run_id, st.events, st.bytes);
      j.emit_flush(&resumed(&st)).await?;
      if let Some(r) = st
        .replay
        .iter()
        .find(|r| r.settled.is_none() && (r.identity.effect == "write" || r.identity.effect == "external"))
      {
        // Never re-run a side effect blind: the attempt's terminal failure.
        let e = Error::tagged(
          Code::DurableToolEffectUncertain,
          &[&r.identity.name, &r.identity.tool_call_id],
        );
        let receipt = Receipt::new(run_id, &agent.id);
        let code = Code::for_run_failure(&e.message);
        j.emit_flush(&Record::RunFailed {
          code: Cow::Borrowed(code.as_str()),
          message: Cow::Borrowed(&e.message),
          receipt: json(&receipt),
        })
        .await?;
        return Ok(Opened::Failed {
          code: code.as_str().to_string(),
          message: e.message,
          receipt: receipt.to_value(),
        });
      }
      Opened::Pending(j, st)
    }
    JournalState::Completed { result } => Opened::Completed(result),
    JournalState::Failed {
      code,
      message,
      receipt,
    } => Opened::Failed {
      code,
      message,
      receipt,
    },
  })
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
  /// Normalized, and only when given: journals written before knap compacted keep their digest.
  #[serde(skip_serializing_if = "Option::is_none")]
  compaction: Option<crate::compaction::Compaction>,
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
      compaction: b
        .compaction
        .as_ref()
        .filter(|c| !c.is_null())
        .and_then(|c| crate::compaction::normalize(Some(c)).ok()),
    }
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
pub fn tool_schemas(agent: &AgentSpec) -> Vec<ToolSchema> {
  agent
    .tools
    .iter()
    .map(|t| ToolSchema {
      name: t.name.clone(),
      description: t.description.clone(),
      parameters: t.input.clone(),
    })
    .collect()
}
