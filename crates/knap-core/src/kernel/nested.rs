//! Composite tools: the `context.dispatch(name, input, options?)` of a container's `execute`
//! (caveman-code.md §4). The host hands each dispatch to the run's [`NestedInbox`]; the inbox
//! routes it to the agent run (level) that is executing the container, which admits it (events,
//! receipt, `maxToolCalls`, breakers, policy with `parentToolCallId`) and executes it in the
//! container's order: reads concurrently after the current effect, effects one at a time in
//! dispatch order. The judgement and the accounting live here, not in JS.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

use super::host::HostError;
use super::speculation::Bet;
use crate::code::Code;

/// An abort of one nested call (its `options.signal`), with the reason's message when the
/// signal's reason was an `Error` (else the call fails with `cave_nested_tool_aborted`).
#[derive(Default)]
pub struct NestedAbort {
  token: CancellationToken,
  reason: Mutex<Option<String>>,
}

impl NestedAbort {
  pub fn new() -> Arc<Self> {
    Arc::new(Self::default())
  }

  pub fn abort(&self, reason: Option<String>) {
    if !self.token.is_cancelled() {
      *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = reason;
      self.token.cancel();
    }
  }

  pub fn is_aborted(&self) -> bool {
    self.token.is_cancelled()
  }

  pub(super) fn token(&self) -> &CancellationToken {
    &self.token
  }

  /// The message the aborted call fails with.
  pub fn message(&self) -> String {
    self
      .reason
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .clone()
      .unwrap_or_else(|| Code::NestedToolAborted.as_str().to_string())
  }
}

/// How a dispatch settles: the nested call's settled value, or what it failed with.
pub type NestedReplyFn = Box<dyn FnOnce(Result<Value, HostError>) + Send>;

/// One `context.dispatch` as the host received it.
pub struct NestedRequest {
  /// The container's `HostToolCall::call_id`.
  pub container: u64,
  pub name: String,
  pub args: Value,
  pub claim_speculation: bool,
  pub abort: Arc<NestedAbort>,
  pub reply: NestedReplyFn,
}

pub(super) fn coded(code: Code, message: impl Into<String>) -> HostError {
  HostError {
    message: message.into(),
    code: Some(code.as_str().to_string()),
  }
}

/// A container while its `execute` runs: where its dispatches go and what they wait for.
pub(super) struct Container {
  /// The container's own tool call id (the nested calls' `parentToolCallId`).
  pub tool_call_id: String,
  /// The container's index in the level's tools.
  pub tool: usize,
  /// Aborts with the container (its timeout, the run's abort): every nested call aborts too.
  pub signal: CancellationToken,
  /// Dispatches routed here and not yet answered.
  in_flight: AtomicUsize,
  idle: Notify,
  order: Mutex<Order>,
  /// The bets of the cell's stream that were activated for this call (speculation).
  bets: Vec<Arc<Bet>>,
}

/// The container's execution order: the last effect, and the reads dispatched since.
#[derive(Default)]
struct Order {
  effect: Option<CancellationToken>,
  reads: Vec<CancellationToken>,
}

impl Container {
  #[cfg(test)]
  pub fn new(tool_call_id: String, tool: usize, signal: CancellationToken) -> Arc<Self> {
    Self::with_bets(tool_call_id, tool, signal, Vec::new())
  }

  /// A container that owns its stream's activated bets: they are reads already dispatched,
  /// so its later effects wait for them too.
  pub fn with_bets(tool_call_id: String, tool: usize, signal: CancellationToken, bets: Vec<Arc<Bet>>) -> Arc<Self> {
    let order = Order {
      effect: None,
      reads: bets.iter().map(|b| b.latch()).collect(),
    };
    Arc::new(Self {
      tool_call_id,
      tool,
      signal,
      in_flight: AtomicUsize::new(0),
      idle: Notify::new(),
      order: Mutex::new(order),
      bets,
    })
  }

  /// A `claimSpeculation` dispatch: the first unclaimed bet with this name and canonical
  /// arguments, now claimed.
  pub fn claim(&self, name: &str, key: &str) -> Option<Arc<Bet>> {
    self.bets.iter().find(|b| b.claim(name, key)).cloned()
  }

  /// The cell closed: its unclaimed bets are abandoned. Returns the container key once per
  /// abandoned bet (for `stats().abandoned`).
  pub fn abandon_unclaimed(&self) -> Vec<Option<u32>> {
    self.bets.iter().filter_map(|b| b.abandon()).collect()
  }

  /// Stops every bet of the container that still runs.
  pub fn stop_bets(&self) {
    for b in self.bets.iter().filter(|b| !b.is_settled()) {
      b.stop();
    }
  }

  /// Schedules one nested call: what it waits for first, and the latch it releases when done.
  /// A read waits for the previous effect; an effect for the previous effect and every read
  /// dispatched since (so effects run one at a time, in dispatch order).
  pub fn schedule(&self, read: bool) -> (Vec<CancellationToken>, CancellationToken) {
    let mut o = self.order.lock().unwrap_or_else(|e| e.into_inner());
    let done = CancellationToken::new();
    let mut waits: Vec<CancellationToken> = o.effect.iter().cloned().collect();
    if read {
      o.reads.push(done.clone());
    } else {
      waits.append(&mut o.reads);
      o.effect = Some(done.clone());
    }
    (waits, done)
  }

  /// Waits until every dispatch routed here has been answered and every bet it owns has
  /// settled, at most `within`.
  pub async fn quiesced(&self, within: Duration) -> bool {
    let wait = async {
      loop {
        let notified = self.idle.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.in_flight.load(Ordering::SeqCst) == 0 {
          return;
        }
        notified.await;
      }
    };
    let bets = async {
      for b in &self.bets {
        b.settled().await;
      }
    };
    tokio::time::timeout(within, async { tokio::join!(wait, bets) }).await.is_ok()
  }
}

/// The answer to one routed dispatch. Dropped unanswered (the run ended first), it answers
/// `cave_nested_tool_parent_inactive`, so no `dispatch()` promise is left pending.
pub(super) struct Reply {
  reply: Option<NestedReplyFn>,
  container: Arc<Container>,
}

impl Reply {
  fn new(reply: NestedReplyFn, container: Arc<Container>) -> Self {
    container.in_flight.fetch_add(1, Ordering::SeqCst);
    Self {
      reply: Some(reply),
      container,
    }
  }

  pub fn send(mut self, result: Result<Value, HostError>) {
    self.answer(result);
  }

  fn answer(&mut self, result: Result<Value, HostError>) {
    if let Some(reply) = self.reply.take() {
      reply(result);
      if self.container.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
        self.container.idle.notify_waiters();
      }
    }
  }
}

impl Drop for Reply {
  fn drop(&mut self) {
    self.answer(Err(coded(
      Code::NestedToolParentInactive,
      Code::NestedToolParentInactive.as_str(),
    )));
  }
}

/// A dispatch on its way to the level that runs its container.
pub(super) struct Routed {
  pub container: Arc<Container>,
  pub name: String,
  pub args: Value,
  pub claim_speculation: bool,
  pub abort: Arc<NestedAbort>,
  pub reply: Reply,
}

struct Route {
  tx: mpsc::UnboundedSender<Routed>,
  container: Arc<Container>,
}

/// The run's open containers, by call id. The host owns one and routes every dispatch here.
#[derive(Default)]
pub struct NestedInbox {
  open: Mutex<HashMap<u64, Route>>,
}

impl NestedInbox {
  pub fn new() -> Arc<Self> {
    Arc::new(Self::default())
  }

  /// Routes one dispatch. A container that is not running (its `execute` has returned, or it
  /// never was one) answers `cave_nested_tool_parent_inactive` at once.
  pub fn dispatch(&self, request: NestedRequest) {
    let route = self
      .open
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .get(&request.container)
      .map(|r| (r.tx.clone(), r.container.clone()));
    let Some((tx, container)) = route else {
      (request.reply)(Err(coded(
        Code::NestedToolParentInactive,
        Code::NestedToolParentInactive.as_str(),
      )));
      return;
    };
    let routed = Routed {
      reply: Reply::new(request.reply, container.clone()),
      container,
      name: request.name,
      args: request.args,
      claim_speculation: request.claim_speculation,
      abort: request.abort,
    };
    // A closed level drops the request, and its Reply answers parent_inactive.
    let _ = tx.send(routed);
  }

  pub(super) fn open(&self, call_id: u64, tx: mpsc::UnboundedSender<Routed>, container: Arc<Container>) {
    self
      .open
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .insert(call_id, Route { tx, container });
  }

  pub(super) fn close(&self, call_id: u64) {
    self.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&call_id);
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn effects_wait_for_earlier_reads_and_the_previous_effect_reads_only_for_the_effect() {
    let c = Container::new("c1".into(), 0, CancellationToken::new());
    let (w, r1) = c.schedule(true);
    assert!(w.is_empty());
    let (w, r2) = c.schedule(true);
    assert!(w.is_empty(), "reads run concurrently");
    let (w, e1) = c.schedule(false);
    assert_eq!(w.len(), 2, "the effect waits for both reads");
    r1.cancel();
    r2.cancel();
    assert!(w.iter().all(CancellationToken::is_cancelled));
    let (w, _r3) = c.schedule(true);
    assert_eq!(w.len(), 1, "a later read waits for the effect");
    assert!(!w[0].is_cancelled());
    e1.cancel();
    assert!(w[0].is_cancelled());
    let (w, _e2) = c.schedule(false);
    assert_eq!(w.len(), 2, "the next effect waits for the previous effect and the read since");
  }

  #[tokio::test]
  async fn a_dispatch_to_a_closed_container_is_inactive_and_a_dropped_reply_answers() {
    let inbox = NestedInbox::new();
    let got = Arc::new(Mutex::new(Vec::new()));
    let request = |got: &Arc<Mutex<Vec<String>>>| {
      let got = got.clone();
      NestedRequest {
        container: 7,
        name: "read".into(),
        args: Value::Null,
        claim_speculation: false,
        abort: NestedAbort::new(),
        reply: Box::new(move |r| got.lock().unwrap().push(r.unwrap_err().message)),
      }
    };
    inbox.dispatch(request(&got));
    assert_eq!(*got.lock().unwrap(), ["cave_nested_tool_parent_inactive"]);
    let (tx, rx) = mpsc::unbounded_channel();
    let c = Container::new("c7".into(), 0, CancellationToken::new());
    inbox.open(7, tx, c.clone());
    inbox.dispatch(request(&got));
    assert!(!c.quiesced(Duration::from_millis(10)).await, "one dispatch in flight");
    drop(rx);
    assert!(c.quiesced(Duration::from_millis(10)).await);
    assert_eq!(got.lock().unwrap().len(), 2, "the dropped request answered");
  }
}
