//! Streaming speculation of programmatic reads (caveman-code.md §3.7). While a provider streams
//! a cell tool's call, the host shows the kernel the cell's growing source; each complete
//! literal read call in it (`read_file({"path": "a"})`) is launched at once as a nested call —
//! a *bet* — with the full admission of a dispatch (events, receipt, `maxToolCalls`, breakers,
//! policy with the provisional parent `<runId>:spec:<turn>:<contentIndex>`). When the final
//! call is admitted with the same id and source, its bets move under it; the cell's
//! `dispatch(name, args, { claimSpeculation: true })` then takes the first unclaimed bet with
//! the same name and canonical arguments instead of running the call again. Bets the cell does
//! not claim are aborted with `cave_program_speculation_abandoned` when it closes, or before the
//! next provider call when they were never activated; they stay in `toolCalls` and the receipt.
//! Durable runs never speculate (a bet has no journal intent).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::execute::{Executed, ToolRef};
use super::host::HostError;
use super::level::{run_nested, Level, NestedDone, NestedRefusal};
use super::message::AssistantMessage;
use super::nested::NestedAbort;
use super::result::RunFailure;
use super::schema::stable_stringify;
use super::spec::{AgentSpec, ToolRuntime, ToolSpec};
use crate::code::{Code, Error};
use crate::exec::BoxFuture;
use crate::limits::{
  NESTED_SETTLE_MS, PROGRAM_SOURCE_MAX_BYTES, SPECULATION_MAX_IN_FLIGHT, SPECULATION_MAX_LAUNCHES,
};
use crate::program::{light_check, speculation_sites};

/// What the host reports to a programmatic runtime's `stats()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeculationCount {
  Launched,
  Claimed,
  Missed,
  Abandoned,
}

impl SpeculationCount {
  pub fn as_str(self) -> &'static str {
    match self {
      SpeculationCount::Launched => "launched",
      SpeculationCount::Claimed => "claimed",
      SpeculationCount::Missed => "missed",
      SpeculationCount::Abandoned => "abandoned",
    }
  }
}

/// A cell tool whose streamed source is watched.
#[derive(Debug)]
struct Cell {
  name: String,
  /// The container's index in the level's tools.
  tool: usize,
  /// The input key that holds the source (`code`).
  source: String,
  /// Nested read tools with `speculative: true` listed in `speculativeTools`, with their input.
  launchable: Vec<(String, Value)>,
  /// Nested tools that are not reads: the scan stops at the first of them.
  stops: Vec<String>,
}

fn cells(agent: &AgentSpec) -> Vec<Cell> {
  agent
    .tools
    .iter()
    .enumerate()
    .filter_map(|(tool, t)| {
      let source = t.speculation_source.clone()?;
      let launchable: Vec<(String, Value)> = t
        .nested_tools
        .iter()
        .filter(|n| n.effect == "read" && n.speculative && t.speculative_tools.contains(&n.name))
        .map(|n| (n.name.clone(), n.input.clone()))
        .collect();
      let stops = t
        .nested_tools
        .iter()
        .filter(|n| n.effect != "read")
        .map(|n| n.name.clone())
        .collect();
      (!launchable.is_empty()).then(|| Cell {
        name: t.name.clone(),
        tool,
        source,
        launchable,
        stops,
      })
    })
    .collect()
}

/// One launch the sink asks the level for.
pub(super) struct Launch {
  /// The container's index in the level's tools.
  tool: usize,
  /// `<runId>:spec:<turn>:<contentIndex>`.
  provisional: String,
  name: String,
  args: Value,
  in_flight: Arc<AtomicU32>,
}

#[derive(Default)]
struct SinkState {
  closed: bool,
  /// The content index of the one eligible cell call of this stream.
  content_index: Option<u32>,
  cell: Option<usize>,
  /// Sites launched: (offset, name, canonical args).
  sites: HashSet<(usize, String, String)>,
  launches: u32,
  /// The eligible call's id and final source (its `toolcall_end`).
  ended: Option<(String, String)>,
}

impl std::fmt::Debug for SpeculationSink {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.debug_struct("SpeculationSink").field("prefix", &self.prefix).finish_non_exhaustive()
  }
}

/// One provider stream's speculation scope: the host calls [`SpeculationSink::observe`] with the
/// eligible cell call's source as it grows. Everything it decides is sent to the level, which
/// admits the launches while it waits for the provider.
pub struct SpeculationSink {
  prefix: String,
  cells: Arc<Vec<Cell>>,
  tx: mpsc::UnboundedSender<Launch>,
  in_flight: Arc<AtomicU32>,
  state: Mutex<SinkState>,
}

impl SpeculationSink {
  /// The cell tool names the host should watch.
  pub fn tools(&self) -> Vec<String> {
    self.cells.iter().map(|c| c.name.clone()).collect()
  }

  /// The source of cell call `content_index` (tool `name`) so far; `end_id` is the call's id
  /// once the call is complete (`toolcall_end`). Only the first cell call of the stream is
  /// eligible: another content index is ignored.
  pub fn observe(&self, content_index: u32, name: &str, code: &str, end_id: Option<&str>) {
    let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
    if s.closed {
      return;
    }
    let Some(cell_index) = self.cells.iter().position(|c| c.name == name) else {
      return;
    };
    match s.content_index {
      None => {
        s.content_index = Some(content_index);
        s.cell = Some(cell_index);
      }
      Some(i) if i != content_index || s.cell != Some(cell_index) => return,
      Some(_) => {}
    }
    if let Some(id) = end_id {
      s.ended = Some((id.to_string(), code.to_string()));
    }
    if code.len() > PROGRAM_SOURCE_MAX_BYTES {
      return;
    }
    let cell = &self.cells[cell_index];
    let launchable: Vec<&str> = cell.launchable.iter().map(|(n, _)| n.as_str()).collect();
    let stops: Vec<&str> = cell.stops.iter().map(String::as_str).collect();
    for site in speculation_sites(code, &launchable, &stops) {
      if s.launches >= SPECULATION_MAX_LAUNCHES
        || self.in_flight.load(Ordering::SeqCst) >= SPECULATION_MAX_IN_FLIGHT
      {
        break;
      }
      let key = (site.offset, site.name.clone(), stable_stringify(&site.args));
      if s.sites.contains(&key) {
        continue;
      }
      let input = &cell.launchable.iter().find(|(n, _)| *n == site.name).expect("a launchable site").1;
      if !light_check(input, &site.args) {
        continue;
      }
      s.sites.insert(key);
      s.launches += 1;
      self.in_flight.fetch_add(1, Ordering::SeqCst);
      let _ = self.tx.send(Launch {
        tool: cell.tool,
        provisional: format!("{}:{content_index}", self.prefix),
        name: site.name,
        args: site.args,
        in_flight: self.in_flight.clone(),
      });
    }
  }

  fn close(&self) -> SinkState {
    let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
    let state = std::mem::take(&mut *s);
    s.closed = true;
    state
  }
}

/// One launched speculative call.
pub(super) struct Bet {
  pub id: String,
  name: String,
  /// Canonical arguments (what a claim must match).
  key: String,
  tool: ToolSpec,
  /// The container tool's host key (where `stats()` counts).
  container_key: Option<u32>,
  abort: Arc<NestedAbort>,
  /// The call's own cancel token (a native tool's processes die with it).
  cancel: CancellationToken,
  settled: CancellationToken,
  in_flight: Arc<AtomicU32>,
  state: Mutex<BetState>,
}

#[derive(Default)]
struct BetState {
  claimed: bool,
  abandoned: bool,
  result: Option<Result<Value, HostError>>,
}

impl Bet {
  fn lock(&self) -> std::sync::MutexGuard<'_, BetState> {
    self.state.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// Claims the bet when it is unclaimed with this name and canonical arguments.
  pub fn claim(&self, name: &str, key: &str) -> bool {
    let mut s = self.lock();
    if s.claimed || s.abandoned || self.name != name || self.key != key {
      return false;
    }
    s.claimed = true;
    true
  }

  /// The outcome, once settled: what a claim's `dispatch()` settles to.
  pub fn result(&self) -> Option<Result<Value, HostError>> {
    self.lock().result.clone()
  }

  fn settle(&self, result: Result<Value, HostError>) {
    {
      let mut s = self.lock();
      if s.result.is_some() {
        return;
      }
      s.result = Some(result);
    }
    self.in_flight.fetch_sub(1, Ordering::SeqCst);
    self.settled.cancel();
  }

  pub fn is_settled(&self) -> bool {
    self.settled.is_cancelled()
  }

  /// Resolves once the bet has settled.
  pub fn settled(&self) -> impl Future<Output = ()> + '_ {
    self.settled.cancelled()
  }

  /// The latch a container's later effects wait for.
  pub fn latch(&self) -> CancellationToken {
    self.settled.clone()
  }

  /// Abandons an unclaimed bet (aborting it if it still runs). Returns the container's key
  /// when this is the first abandonment, for `stats().abandoned`.
  pub fn abandon(&self) -> Option<Option<u32>> {
    let mut s = self.lock();
    if s.claimed || s.abandoned {
      return None;
    }
    s.abandoned = true;
    drop(s);
    self.abort.abort(Some(Code::ProgramSpeculationAbandoned.as_str().to_string()));
    Some(self.container_key)
  }

  /// Stops a bet that still runs (claimed or not): its container is gone.
  pub fn stop(&self) {
    self.abort.abort(Some(Code::ProgramSpeculationAbandoned.as_str().to_string()));
    self.cancel.cancel();
  }
}

/// A bet's execution, done.
pub(super) struct BetDone {
  bet: Arc<Bet>,
  done: NestedDone,
}

/// The eligible cell call of the last stream, complete and unique in the final message.
struct Ended {
  id: String,
  tool: usize,
  source: String,
}

/// A level's speculation: the scope of the stream in progress, and the turn's bets.
pub(super) struct Speculation {
  cells: Arc<Vec<Cell>>,
  streams: u64,
  tx: mpsc::UnboundedSender<Launch>,
  rx: mpsc::UnboundedReceiver<Launch>,
  sink: Option<Arc<SpeculationSink>>,
  ended: Option<Ended>,
  /// Bets of this turn not activated yet.
  pending: Vec<Arc<Bet>>,
  /// Bets moved under a container call that has not started yet, by its call id.
  activated: HashMap<String, Vec<Arc<Bet>>>,
  /// Every bet of this turn.
  bets: Vec<Arc<Bet>>,
  running: FuturesUnordered<BoxFuture<BetDone>>,
}

impl Speculation {
  /// `None` unless the agent has a cell tool with speculation on.
  pub fn new(agent: &AgentSpec) -> Option<Self> {
    let cells = cells(agent);
    if cells.is_empty() {
      return None;
    }
    let (tx, rx) = mpsc::unbounded_channel();
    Some(Self {
      cells: Arc::new(cells),
      streams: 0,
      tx,
      rx,
      sink: None,
      ended: None,
      pending: Vec::new(),
      activated: HashMap::new(),
      bets: Vec::new(),
      running: FuturesUnordered::new(),
    })
  }

  /// A new scope for the provider stream about to start.
  pub fn open_stream(&mut self, run_id: &str) -> Arc<SpeculationSink> {
    self.streams += 1;
    let sink = Arc::new(SpeculationSink {
      prefix: format!("{run_id}:spec:{}", self.streams),
      cells: self.cells.clone(),
      tx: self.tx.clone(),
      in_flight: Arc::new(AtomicU32::new(0)),
      state: Mutex::default(),
    });
    self.sink = Some(sink.clone());
    sink
  }

  /// The bets moved under container call `id` (taken: the container owns them now).
  pub fn take_activated(&mut self, id: &str) -> Vec<Arc<Bet>> {
    self.activated.remove(id).unwrap_or_default()
  }
}

/// The next bet to settle; pending while none runs.
pub(super) async fn next_bet(spec: &mut Option<Speculation>) -> BetDone {
  match spec {
    Some(s) => next_in(&mut s.running).await,
    None => std::future::pending().await,
  }
}

async fn next_in(running: &mut FuturesUnordered<BoxFuture<BetDone>>) -> BetDone {
  if running.is_empty() {
    return std::future::pending().await;
  }
  match running.next().await {
    Some(done) => done,
    None => std::future::pending().await,
  }
}

impl Level {
  /// The run fails: bets still running are stopped (their futures are dropped with the run).
  pub(super) fn stop_bets(&self) {
    if let Some(spec) = &self.spec {
      for bet in spec.bets.iter().filter(|b| !b.is_settled()) {
        bet.stop();
      }
    }
  }

  fn count(&self, key: Option<u32>, kind: SpeculationCount) {
    if let Some(key) = key {
      self.shared.host.speculation(key, kind);
    }
  }

  pub(super) fn container_key(&self, tool: usize) -> Option<u32> {
    match self.agent.tools.get(tool)?.runtime {
      ToolRuntime::Host { key } => Some(key),
      _ => None,
    }
  }

  /// Waits for the provider while admitting the launches its stream produces and settling bets.
  pub(super) async fn await_streaming(
    &mut self,
    call: BoxFuture<Result<AssistantMessage, HostError>>,
  ) -> Result<Result<AssistantMessage, HostError>, RunFailure> {
    enum Step {
      Launch(Launch),
      Bet(BetDone),
      Reply(Result<AssistantMessage, HostError>),
      Cancelled,
    }
    let mut call = call;
    let cancel = self.shared.cancel.clone();
    let reply = loop {
      let spec = self.spec.as_mut().expect("a level that speculates");
      let step = tokio::select! {
        biased;
        Some(launch) = spec.rx.recv() => Step::Launch(launch),
        done = next_in(&mut spec.running) => Step::Bet(done),
        r = &mut call => Step::Reply(r),
        _ = cancel.cancelled() => Step::Cancelled,
      };
      match step {
        Step::Launch(l) => self.launch(l).await?,
        Step::Bet(done) => self.settle_bet(done),
        Step::Cancelled => return Err(self.fail(Error::coded(Code::RunAborted, "the run was aborted"))),
        Step::Reply(r) => break r,
      }
    };
    // Launches the stream asked for before it ended are made; then the scope closes.
    loop {
      let Ok(launch) = self.spec.as_mut().expect("speculating").rx.try_recv() else {
        break;
      };
      self.launch(launch).await?;
    }
    let spec = self.spec.as_mut().expect("speculating");
    let state = spec.sink.take().map(|s| s.close()).unwrap_or_default();
    spec.ended = None;
    if let (Ok(message), Some((id, source)), Some(cell)) = (&reply, state.ended, state.cell) {
      // A missing or duplicate id fails closed: nothing activates, the bets are abandoned.
      let same: Vec<_> = message.tool_calls().filter(|c| c.id == id).collect();
      if same.len() == 1 && same[0].name == spec.cells[cell].name {
        spec.ended = Some(Ended {
          id,
          tool: spec.cells[cell].tool,
          source,
        });
      }
    }
    Ok(reply)
  }

  /// One launch: `nested_tool_start` and the accounting, the dispatch checks and the policy,
  /// then the call runs beside the stream. A refused launch settles as that error.
  async fn launch(&mut self, l: Launch) -> Result<(), RunFailure> {
    let agent = self.agent.clone();
    let container = &agent.tools[l.tool];
    let tool = container
      .nested_tools
      .iter()
      .find(|t| t.name == l.name)
      .cloned()
      .expect("a launchable nested tool");
    let container_key = self.container_key(l.tool);
    self.count(container_key, SpeculationCount::Launched);
    let n = self.shared.next_nested.fetch_add(1, Ordering::Relaxed);
    let id = format!("{}:nested:{n}", l.provisional);
    self.shared.host.emit(super::event::RunEvent::NestedToolStart {
      run_id: self.run_id.clone(),
      id: id.clone(),
      name: l.name.clone(),
      args: l.args.clone(),
    });
    self.accounting.record_call(&l.name);
    self.turn_calls += 1;
    let bet = Arc::new(Bet {
      id: id.clone(),
      name: l.name.clone(),
      key: stable_stringify(&l.args),
      tool: tool.clone(),
      container_key,
      abort: NestedAbort::new(),
      cancel: self.shared.cancel.child_token(),
      settled: CancellationToken::new(),
      in_flight: l.in_flight,
      state: Mutex::default(),
    });
    let spec = self.spec.as_mut().expect("speculating");
    spec.pending.push(bet.clone());
    spec.bets.push(bet.clone());
    let done = |out: Executed| NestedDone {
      id: id.clone(),
      name: l.name.clone(),
      tool: tool.clone(),
      out,
      reply: None,
      answer: None,
    };
    match self.check_nested(&tool, &l.args, &id, &l.provisional).await {
      Err(NestedRefusal::Blocked(message)) => {
        self.settle_bet(BetDone {
          bet,
          done: done(Executed::error(message)),
        });
        Ok(())
      }
      Err(NestedRefusal::Policy(e)) => {
        self.accounting.receipt.record_error(&l.name);
        let code = e.code();
        bet.settle(Err(super::nested::coded(code.clone(), code.as_str())));
        Err(self.fail(Error::bare(code)))
      }
      Ok(wallet) => {
        let cancel = bet.cancel.clone();
        let exec = self.dispatch(ToolRef::Own(Box::new(tool.clone())), usize::MAX, &id, l.args, wallet, cancel.clone(), Some(&l.provisional), Vec::new());
        let deadline = self.shared.deadline;
        let subagent = matches!(tool.runtime, ToolRuntime::Subagent { .. });
        let abort = bet.abort.clone();
        let mut finished = done(Executed::error(String::new()));
        self.spec.as_mut().expect("speculating").running.push(Box::pin(async move {
          finished.out = run_nested(exec, Vec::new(), &abort, &cancel, deadline, subagent).await;
          BetDone { bet, done: finished }
        }));
        Ok(())
      }
    }
  }

  /// A bet ended: its outcome in the receipt and `nested_tool_end`, then to its claimer.
  pub(super) fn settle_bet(&mut self, d: BetDone) {
    let answer = self.finish_nested(d.done);
    d.bet.settle(answer);
  }

  /// Activation (before the container's policy): the final call of the stream with the same
  /// id and source takes the stream's bets; the same id with another source abandons them.
  pub(super) fn activate(&mut self, id: &str, tool: usize, args: &Value) {
    let Some(spec) = self.spec.as_mut() else {
      return;
    };
    if spec.ended.as_ref().is_none_or(|e| e.id != id) {
      return;
    }
    let ended = spec.ended.take().expect("checked");
    let source = &spec.cells.iter().find(|c| c.tool == ended.tool).expect("a cell").source;
    let bets = std::mem::take(&mut spec.pending);
    if ended.tool == tool && args.get(source).and_then(Value::as_str) == Some(ended.source.as_str()) {
      spec.activated.insert(id.to_string(), bets);
      return;
    }
    for bet in bets {
      if let Some(key) = bet.abandon() {
        self.count(key, SpeculationCount::Abandoned);
      }
    }
  }

  /// Before the next provider call (and before the run ends): every bet of the turn that was
  /// not claimed is abandoned, and the turn's bets get ≤ 1 s to settle; one that does not is
  /// ended as `cave_program_nested_calls_unquiesced`.
  pub(super) async fn settle_speculation(&mut self) {
    let Some(spec) = self.spec.as_mut() else {
      return;
    };
    if spec.bets.is_empty() {
      return;
    }
    if let Some(sink) = spec.sink.take() {
      sink.close();
    }
    spec.pending.clear();
    spec.activated.clear();
    spec.ended = None;
    let bets = std::mem::take(&mut spec.bets);
    for bet in &bets {
      if let Some(key) = bet.abandon() {
        self.count(key, SpeculationCount::Abandoned);
      } else if !bet.is_settled() {
        bet.stop();
      }
    }
    let until = tokio::time::Instant::from_std(Instant::now() + Duration::from_millis(NESTED_SETTLE_MS));
    while self.spec.as_ref().is_some_and(|s| !s.running.is_empty()) {
      let done = tokio::select! {
        done = next_bet(&mut self.spec) => done,
        _ = tokio::time::sleep_until(until) => break,
      };
      self.settle_bet(done);
    }
    let spec = self.spec.as_mut().expect("speculating");
    spec.running = FuturesUnordered::new();
    for bet in bets.iter().filter(|b| !b.is_settled()) {
      let done = NestedDone {
        id: bet.id.clone(),
        name: bet.name.clone(),
        tool: bet.tool.clone(),
        out: Executed::error(Code::ProgramNestedCallsUnquiesced.as_str()),
        reply: None,
        answer: None,
      };
      self.settle_bet(BetDone { bet: bet.clone(), done });
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  fn sink(cells: Vec<Cell>) -> (Arc<SpeculationSink>, mpsc::UnboundedReceiver<Launch>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sink = Arc::new(SpeculationSink {
      prefix: "run:spec:1".into(),
      cells: Arc::new(cells),
      tx,
      in_flight: Arc::new(AtomicU32::new(0)),
      state: Mutex::default(),
    });
    (sink, rx)
  }

  fn cell() -> Cell {
    Cell {
      name: "caveman_code".into(),
      tool: 0,
      source: "code".into(),
      launchable: vec![(
        "read_file".into(),
        json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}),
      )],
      stops: vec!["bash".into()],
    }
  }

  fn drain(rx: &mut mpsc::UnboundedReceiver<Launch>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    while let Ok(l) = rx.try_recv() {
      out.push((l.provisional, l.args));
    }
    out
  }

  #[test]
  fn a_site_launches_once_as_the_source_grows() {
    let (s, mut rx) = sink(vec![cell()]);
    s.observe(0, "caveman_code", r#"const a = await read_file({"path": "a"#, None);
    assert!(drain(&mut rx).is_empty(), "an incomplete site waits");
    s.observe(0, "caveman_code", r#"const a = await read_file({"path": "a"});"#, None);
    s.observe(0, "caveman_code", r#"const a = await read_file({"path": "a"}); read_file({"path": "b"})"#, None);
    assert_eq!(
      drain(&mut rx),
      [("run:spec:1:0".to_string(), json!({"path": "a"})), ("run:spec:1:0".to_string(), json!({"path": "b"}))]
    );
  }

  #[test]
  fn only_the_first_cell_call_of_a_stream_is_watched_and_light_checked_args_only() {
    let (s, mut rx) = sink(vec![cell()]);
    s.observe(1, "caveman_code", r#"read_file({"path": 7}); read_file({"path": "ok", "x": 1})"#, None);
    s.observe(2, "caveman_code", r#"read_file({"path": "other"})"#, None);
    s.observe(1, "other_tool", r#"read_file({"path": "x"})"#, None);
    assert!(drain(&mut rx).is_empty());
  }

  #[test]
  fn launches_are_capped_per_cell_and_in_flight() {
    let (s, mut rx) = sink(vec![cell()]);
    let code: String = (0..12).map(|i| format!("read_file({{\"path\": \"f{i}\"}});\n")).collect();
    s.observe(0, "caveman_code", &code, None);
    assert_eq!(drain(&mut rx).len(), SPECULATION_MAX_IN_FLIGHT as usize);
    s.in_flight.store(0, Ordering::SeqCst);
    s.observe(0, "caveman_code", &code, None);
    assert_eq!(drain(&mut rx).len(), SPECULATION_MAX_IN_FLIGHT as usize);
    s.in_flight.store(0, Ordering::SeqCst);
    s.observe(0, "caveman_code", &code, None);
    assert_eq!(
      drain(&mut rx).len(),
      (SPECULATION_MAX_LAUNCHES - 2 * SPECULATION_MAX_IN_FLIGHT) as usize,
      "8 launches per cell in all"
    );
  }

  #[test]
  fn a_closed_scope_launches_nothing_and_the_end_is_recorded() {
    let (s, mut rx) = sink(vec![cell()]);
    s.observe(0, "caveman_code", r#"read_file({"path": "a"})"#, Some("call-1"));
    let state = s.close();
    assert_eq!(state.ended, Some(("call-1".into(), r#"read_file({"path": "a"})"#.into())));
    assert_eq!(drain(&mut rx).len(), 1);
    s.observe(0, "caveman_code", r#"read_file({"path": "a"}); read_file({"path": "b"})"#, None);
    assert!(drain(&mut rx).is_empty());
  }
}
