//! The circuit breakers of `RunOptions.breakers`: fan-out per turn, repeated identical calls in
//! a window of turns (the loop breaker), and identical turns in a row (no progress).

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::message::AssistantPart;
use super::receipt::BreakerEvent;
use super::schema::stable_stringify;
use super::spec::{Breakers, ToolRuntime, ToolSpec};
use crate::durable::canonical::sha256_hex;

pub(super) struct BreakerState {
  config: Option<Breakers>,
  /// Per turn, the call signatures seen (newest last).
  recent_calls: VecDeque<Vec<String>>,
  /// Recent turn signatures.
  turn_signatures: VecDeque<String>,
  /// The outcomes of the turn in progress (`observeToolResult`), top-level and nested calls:
  /// the digest of each tool, error flag and result text.
  outcomes: Vec<String>,
  /// The turn changed state (a successful write, subagent or memory call).
  progressed: bool,
}

/// The framework memory tools (`cave_memory_*`): a successful call is progress.
const MEMORY_TOOL_PREFIX: &str = "cave_memory_";

fn signature(value: &Value) -> String {
  sha256_hex(stable_stringify(value).as_bytes())
}

impl BreakerState {
  pub fn new(config: Option<Breakers>) -> Self {
    Self {
      config,
      recent_calls: VecDeque::from([Vec::new()]),
      turn_signatures: VecDeque::new(),
      outcomes: Vec::new(),
      progressed: false,
    }
  }

  /// `observeToolResult`: one settled call of the turn, top-level or nested. A successful
  /// write, subagent or memory call is a state change: the no-progress count starts over.
  pub fn observe_call(&mut self, name: &str, tool: Option<&ToolSpec>, text: &str, is_error: bool) {
    if self.config.is_none() {
      return;
    }
    let state_change = !is_error
      && (name.starts_with(MEMORY_TOOL_PREFIX)
        || tool.is_some_and(|t| t.effect == "write" || matches!(t.runtime, ToolRuntime::Subagent { .. })));
    self.progressed |= state_change;
    self
      .outcomes
      .push(signature(&json!({"tool": name, "isError": is_error, "result": sha256_hex(text.as_bytes())})));
  }

  /// The `in_turn`-th call of a turn over `maxToolCallsPerTurn`.
  pub fn fan_out(&self, name: &str, in_turn: u32) -> Option<BreakerEvent> {
    let b = self.config?;
    (in_turn > b.max_tool_calls_per_turn).then(|| BreakerEvent {
      kind: "fan_out_blocked",
      tool: Some(name.into()),
      count: in_turn as u64,
      signature: None,
    })
  }

  /// Records the call; the event when it is the `repeatedToolCalls`-th identical one in the window.
  pub fn repeat(&mut self, name: &str, args: &Value) -> Option<BreakerEvent> {
    let b = self.config?;
    let signature = signature(&json!({"tool": name, "args": args}));
    let seen = self
      .recent_calls
      .iter()
      .flatten()
      .filter(|s| **s == signature)
      .count() as u32
      + 1;
    if let Some(turn) = self.recent_calls.back_mut() {
      turn.push(signature.clone());
    }
    (seen >= b.repeated_tool_calls).then(|| BreakerEvent {
      kind: "loop_detected",
      tool: Some(name.into()),
      count: seen as u64,
      signature: Some(signature),
    })
  }

  /// A turn with tool calls ended: opens the next turn's window; the event when the last
  /// `noProgressTurns` turns had the same outcome signature (the assistant content, call ids
  /// aside, and the observed results in a stable order). A turn that changed state clears
  /// the count.
  pub fn end_turn(&mut self, content: &[AssistantPart]) -> Option<BreakerEvent> {
    let b = self.config?;
    self.recent_calls.push_back(Vec::new());
    while self.recent_calls.len() > b.window_turns as usize {
      self.recent_calls.pop_front();
    }
    let mut outcomes = std::mem::take(&mut self.outcomes);
    if std::mem::take(&mut self.progressed) {
      self.turn_signatures.clear();
      return None;
    }
    // Reads run concurrently: their order of settling is not part of the outcome.
    outcomes.sort();
    let signature = signature(&json!({"content": content_signature(content), "outcomes": outcomes}));
    self.turn_signatures.push_back(signature.clone());
    while self.turn_signatures.len() > b.no_progress_turns as usize {
      self.turn_signatures.pop_front();
    }
    (self.turn_signatures.len() == b.no_progress_turns as usize
      && self.turn_signatures.iter().all(|s| *s == signature))
    .then(|| BreakerEvent {
      kind: "no_progress",
      tool: None,
      count: b.no_progress_turns as u64,
      signature: Some(signature),
    })
  }
}

/// A turn's signature ignores call ids (they differ every turn).
fn content_signature(content: &[AssistantPart]) -> Value {
  Value::Array(
    content
      .iter()
      .map(|p| {
        let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
          o.remove("id");
        }
        v
      })
      .collect(),
  )
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::kernel::message::TextPart;

  fn state() -> BreakerState {
    BreakerState::new(Some(Breakers {
      repeated_tool_calls: 3,
      window_turns: 8,
      no_progress_turns: 2,
      max_tool_calls_per_turn: 8,
    }))
  }

  fn tool(effect: &str) -> ToolSpec {
    serde_json::from_value(json!({"name": "t", "description": "", "input": {}, "effect": effect,
      "timeoutMs": 1, "runtime": {"kind": "host", "key": 0}}))
    .unwrap()
  }

  fn content() -> Vec<AssistantPart> {
    vec![AssistantPart::Text(TextPart::new("again"))]
  }

  #[test]
  fn identical_turns_with_identical_outcomes_trip() {
    let mut b = state();
    let read = tool("read");
    b.observe_call("look", Some(&read), "same", false);
    assert!(b.end_turn(&content()).is_none());
    b.observe_call("look", Some(&read), "same", false);
    let event = b.end_turn(&content()).expect("no progress");
    assert_eq!(event.kind, "no_progress");
  }

  #[test]
  fn a_changed_outcome_is_progress() {
    let mut b = state();
    let read = tool("read");
    b.observe_call("look", Some(&read), "first", false);
    assert!(b.end_turn(&content()).is_none());
    b.observe_call("look", Some(&read), "second", false);
    assert!(b.end_turn(&content()).is_none());
  }

  #[test]
  fn a_successful_write_subagent_or_memory_call_starts_the_count_over() {
    let subagent: ToolSpec = serde_json::from_value(json!({"name": "helper", "description": "", "input": {},
      "effect": "read", "timeoutMs": 1, "runtime": {"kind": "subagent", "maxInputChars": 1, "maxCalls": 1,
      "maxContextTokens": 1, "agent": {"id": "c", "instructions": "", "sandbox": "host",
      "model": {"key": 0, "provider": "p", "id": "m"}, "tools": []}}}))
    .unwrap();
    for (name, spec) in [("put", tool("write")), ("cave_memory_save", tool("read")), ("helper", subagent)] {
      // The same successful call turn after turn: identical turns, but each one changed state.
      let mut b = state();
      for _ in 0..3 {
        b.observe_call(name, Some(&spec), "x", false);
        assert!(b.end_turn(&content()).is_none(), "{name} is progress");
      }
      // After it the count starts over: one identical read turn is not enough, two are.
      let read = tool("read");
      b.observe_call("look", Some(&read), "same", false);
      assert!(b.end_turn(&content()).is_none(), "{name}: the count restarted");
      b.observe_call("look", Some(&read), "same", false);
      assert!(b.end_turn(&content()).is_some(), "{name}");
    }
    // A failed write is no progress.
    let mut b = state();
    b.observe_call("put", Some(&tool("write")), "denied", true);
    assert!(b.end_turn(&content()).is_none());
    b.observe_call("put", Some(&tool("write")), "denied", true);
    assert!(b.end_turn(&content()).is_some());
  }

  #[test]
  fn the_order_concurrent_reads_settle_in_does_not_matter() {
    let mut b = state();
    let read = tool("read");
    b.observe_call("a", Some(&read), "1", false);
    b.observe_call("b", Some(&read), "2", false);
    assert!(b.end_turn(&content()).is_none());
    b.observe_call("b", Some(&read), "2", false);
    b.observe_call("a", Some(&read), "1", false);
    assert!(b.end_turn(&content()).is_some());
  }
}
