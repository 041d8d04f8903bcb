//! `NativeEventLog`: a serve event stream's numbered frames (knap-core's `serve::EventLog`).

use knap_core::limits as l;
use knap_core::serve::{parse_last_event_id, EventLog};
use napi_derive::napi;

/// Serving limits, one place (knap-core's limits.rs).
#[napi(object)]
pub struct ServeLimits {
  pub max_body_bytes: u32,
  pub max_concurrent_runs: u32,
  pub max_queued_runs: u32,
  pub min_token_chars: u32,
  pub event_buffer_frames: u32,
  pub stream_high_water_bytes: u32,
  pub heartbeat_ms: u32,
  pub settled_buffer_ms: u32,
  pub settled_buffers: u32,
  pub max_sessions: u32,
  pub session_messages: u32,
  pub session_tombstones: u32,
  pub session_idle_ms: u32,
  pub session_message_context_max_bytes: u32,
  pub settled_memo: u32,
  pub recovery_sweep_interval_ms: u32,
  pub close_grace_ms: u32,
  pub drain_poll_ms: u32,
  pub frame_text_chars: u32,
}

#[napi]
pub fn serve_limits() -> ServeLimits {
  ServeLimits {
    max_body_bytes: l::SERVE_MAX_BODY_BYTES as u32,
    max_concurrent_runs: l::SERVE_MAX_CONCURRENT_RUNS,
    max_queued_runs: l::SERVE_MAX_QUEUED_RUNS,
    min_token_chars: l::SERVE_MIN_TOKEN_CHARS as u32,
    event_buffer_frames: l::SERVE_EVENT_BUFFER_FRAMES as u32,
    stream_high_water_bytes: l::SERVE_STREAM_HIGH_WATER_BYTES as u32,
    heartbeat_ms: l::SERVE_HEARTBEAT_MS as u32,
    settled_buffer_ms: l::SERVE_SETTLED_BUFFER_MS as u32,
    settled_buffers: l::SERVE_SETTLED_BUFFERS as u32,
    max_sessions: l::SERVE_MAX_SESSIONS as u32,
    session_messages: l::SERVE_SESSION_MESSAGES as u32,
    session_tombstones: l::SERVE_SESSION_TOMBSTONES as u32,
    session_idle_ms: l::SERVE_SESSION_IDLE_MS as u32,
    session_message_context_max_bytes: l::SERVE_SESSION_MESSAGE_CONTEXT_MAX_BYTES as u32,
    settled_memo: l::SERVE_SETTLED_MEMO as u32,
    recovery_sweep_interval_ms: l::SERVE_RECOVERY_SWEEP_INTERVAL_MS as u32,
    close_grace_ms: l::SERVE_CLOSE_GRACE_MS as u32,
    drain_poll_ms: l::SERVE_DRAIN_POLL_MS as u32,
    frame_text_chars: l::SERVE_FRAME_TEXT_CHARS as u32,
  }
}

/// A replay for one subscriber: the gap notice (if any) and the frames, in seq order.
#[napi(object)]
pub struct EventReplay {
  pub gap: Option<EventGap>,
  pub seqs: Vec<u32>,
  pub frames: Vec<String>,
}

#[napi(object)]
pub struct EventGap {
  pub requested_seq: u32,
  pub earliest_seq: u32,
}

#[napi(object)]
pub struct EventFrame {
  pub seq: u32,
  pub frame: String,
}

#[napi]
pub struct NativeEventLog {
  inner: EventLog,
}

#[napi]
impl NativeEventLog {
  #[napi(constructor)]
  pub fn new(session_id: String, capacity: Option<u32>) -> Self {
    Self {
      inner: EventLog::new(
        &session_id,
        capacity
          .map(|c| c as usize)
          .unwrap_or(l::SERVE_EVENT_BUFFER_FRAMES),
      ),
    }
  }

  /// Numbers and stores a frame of `payload` (`{"kind":…}` JSON); returns it with its seq.
  #[napi]
  pub fn push(&mut self, payload: String) -> napi::Result<EventFrame> {
    let (seq, frame) = self.inner.push(&payload).ok_or_else(|| {
      napi::Error::from_reason("cave_serve_frame_invalid: a frame payload is a JSON object with a kind")
    })?;
    Ok(EventFrame {
      seq: seq as u32,
      frame: frame.to_string(),
    })
  }

  #[napi(getter)]
  pub fn next_seq(&self) -> u32 {
    self.inner.next_seq() as u32
  }

  /// The replay for a `Last-Event-ID` header (or `lastEventId` query) value.
  #[napi]
  pub fn replay(&self, last_event_id: Option<String>, client_ahead_is_gap: bool) -> EventReplay {
    let last = last_event_id.as_deref().and_then(parse_last_event_id);
    let r = self.inner.replay(last, client_ahead_is_gap);
    EventReplay {
      gap: r.gap.map(|(requested, earliest)| EventGap {
        requested_seq: requested as u32,
        earliest_seq: earliest as u32,
      }),
      seqs: r.frames.iter().map(|(s, _)| *s as u32).collect(),
      frames: r.frames.iter().map(|(_, f)| f.to_string()).collect(),
    }
  }
}
