//! The serving layer's event log: Pebble v1 frames numbered per stream, the last
//! `SERVE_EVENT_BUFFER_FRAMES` kept for replay, and the resume-point rule of
//! `serve-events.ts` (`Last-Event-ID` + 1; a gap when the client asks for evicted frames, or,
//! on session streams, for frames beyond the next one).

use std::collections::VecDeque;

use crate::durable::journal::iso_now;

/// One stream's frames.
pub struct EventLog {
  session_id_json: String,
  next_seq: u64,
  capacity: usize,
  frames: VecDeque<(u64, String)>,
}

/// What a subscriber gets on attach: a gap notice (`requestedSeq`, `earliestSeq`) first when
/// the resume point is not in the buffer, then the frames to replay (all of them on a gap).
#[derive(Debug, PartialEq)]
pub struct Replay<'a> {
  pub gap: Option<(u64, u64)>,
  pub frames: Vec<(u64, &'a str)>,
}

impl EventLog {
  pub fn new(session_id: &str, capacity: usize) -> Self {
    Self {
      session_id_json: serde_json::Value::String(session_id.to_string()).to_string(),
      next_seq: 0,
      capacity: capacity.max(1),
      frames: VecDeque::new(),
    }
  }

  /// Appends the frame whose kind and payload are the JSON object `payload`
  /// (`{"kind":…,…}`): the envelope `{"v":1,"seq","ts","sessionId"}` goes first. Returns the
  /// frame's seq and JSON; `None` when `payload` is not a JSON object with a `kind`.
  pub fn push(&mut self, payload: &str) -> Option<(u64, &str)> {
    let body = payload.trim();
    let parsed: serde_json::Map<String, serde_json::Value> = serde_json::from_str(body).ok()?;
    if !parsed.get("kind").is_some_and(serde_json::Value::is_string) {
      return None;
    }
    let seq = self.next_seq;
    self.next_seq += 1;
    let rest = &body[1..];
    let sep = if rest.trim_start().starts_with('}') {
      ""
    } else {
      ","
    };
    let frame = format!(
      "{{\"v\":1,\"seq\":{seq},\"ts\":\"{}\",\"sessionId\":{}{sep}{rest}",
      iso_now(),
      self.session_id_json
    );
    if self.frames.len() == self.capacity {
      self.frames.pop_front();
    }
    self.frames.push_back((seq, frame));
    self.frames.back().map(|(s, f)| (*s, f.as_str()))
  }

  /// The seq the next frame will get.
  pub fn next_seq(&self) -> u64 {
    self.next_seq
  }

  /// The oldest buffered seq (the next seq when nothing is buffered).
  pub fn earliest_seq(&self) -> u64 {
    self.frames.front().map(|(s, _)| *s).unwrap_or(self.next_seq)
  }

  /// The replay for a subscriber whose `Last-Event-ID` is `last_event_id` (unparsable or
  /// absent: `None`, replay everything). `client_ahead_is_gap` is set for session streams.
  pub fn replay(&self, last_event_id: Option<u64>, client_ahead_is_gap: bool) -> Replay<'_> {
    let requested = last_event_id.map(|n| n.saturating_add(1)).unwrap_or(0);
    let earliest = self.earliest_seq();
    let gap = requested < earliest || (client_ahead_is_gap && requested > self.next_seq);
    let frames = self
      .frames
      .iter()
      .filter(|(s, _)| gap || *s >= requested)
      .map(|(s, f)| (*s, f.as_str()))
      .collect();
    Replay {
      gap: gap.then_some((requested, earliest)),
      frames,
    }
  }
}

/// `Last-Event-ID` / `lastEventId` as the reference parses it: a base-10 integer ≥ 0, else none.
pub fn parse_last_event_id(text: &str) -> Option<u64> {
  let t = text.trim();
  if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
    return None;
  }
  t.parse().ok()
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn frames_carry_the_envelope_and_replay_from_the_resume_point() {
    let mut log = EventLog::new("s-1", 3);
    let (seq, frame) = log.push(r#"{"kind":"turn.start"}"#).unwrap();
    assert_eq!(seq, 0);
    let v: serde_json::Value = serde_json::from_str(frame).unwrap();
    assert_eq!(
      (
        v["v"].as_u64(),
        v["seq"].as_u64(),
        v["sessionId"].as_str(),
        v["kind"].as_str()
      ),
      (Some(1), Some(0), Some("s-1"), Some("turn.start"))
    );
    assert!(v["ts"].as_str().unwrap().ends_with('Z'));
    for text in ["a", "b", "c"] {
      log
        .push(&format!(r#"{{"kind":"delta.text","text":"{text}"}}"#))
        .unwrap();
    }
    // Capacity 3: seq 0 was evicted.
    assert_eq!(log.earliest_seq(), 1);
    let r = log.replay(Some(1), true);
    assert_eq!(
      (r.gap, r.frames.iter().map(|f| f.0).collect::<Vec<_>>()),
      (None, vec![2, 3])
    );
    let r = log.replay(None, true);
    assert_eq!(r.gap, Some((0, 1)));
    assert_eq!(r.frames.len(), 3);
    // Client ahead (after a restart): a gap on session streams only.
    assert_eq!(log.replay(Some(10), true).gap, Some((11, 1)));
    let r = log.replay(Some(10), false);
    assert_eq!((r.gap, r.frames.len()), (None, 0));
    assert_eq!(log.replay(Some(3), true).frames.len(), 0);
    assert!(log.push("[1]").is_none());
    assert!(log.push(r#"{"text":"no kind"}"#).is_none());
  }

  #[test]
  fn last_event_id_parsing() {
    assert_eq!(parse_last_event_id("41"), Some(41));
    assert_eq!(parse_last_event_id(" 7 "), Some(7));
    for bad in ["", "-1", "1.5", "x", "0x10"] {
      assert_eq!(parse_last_event_id(bad), None, "{bad}");
    }
  }
}
