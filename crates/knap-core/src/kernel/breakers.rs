//! The circuit breakers of `RunOptions.breakers`: fan-out per turn, repeated identical calls in
//! a window of turns (the loop breaker), and identical turns in a row (no progress).

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::message::AssistantPart;
use super::receipt::BreakerEvent;
use super::schema::stable_stringify;
use super::spec::Breakers;
use crate::durable::canonical::sha256_hex;

pub(super) struct BreakerState {
  config: Option<Breakers>,
  /// Per turn, the call signatures seen (newest last).
  recent_calls: VecDeque<Vec<String>>,
  /// Recent turn signatures.
  turn_signatures: VecDeque<String>,
}

fn signature(value: &Value) -> String {
  sha256_hex(stable_stringify(value).as_bytes())
}

impl BreakerState {
  pub fn new(config: Option<Breakers>) -> Self {
    Self {
      config,
      recent_calls: VecDeque::from([Vec::new()]),
      turn_signatures: VecDeque::new(),
    }
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
  /// `noProgressTurns` turns had the same content (call ids aside).
  pub fn end_turn(&mut self, content: &[AssistantPart]) -> Option<BreakerEvent> {
    let b = self.config?;
    self.recent_calls.push_back(Vec::new());
    while self.recent_calls.len() > b.window_turns as usize {
      self.recent_calls.pop_front();
    }
    let signature = signature(&content_signature(content));
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
