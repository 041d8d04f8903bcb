//! A running command's output, chunk by chunk, for a consumer that may be slower than the
//! command (the AI SDK Bash tool's `onProgress`, `sandbox.exec({ onOutput })`).
//!
//! The command's reader never waits for the consumer: a slow consumer would otherwise stall the
//! pipe and slow the command itself. Chunks wait in a queue of at most
//! [`crate::limits::AI_PROGRESS_BUFFER_BYTES`]; adjacent chunks of one stream are merged (a slow
//! consumer gets fewer, larger chunks); what does not fit is dropped and counted, and the next
//! chunk of that stream says how many bytes were skipped before it. A drop is never silent: when
//! nothing follows a drop, [`Progress::close`] queues an empty chunk carrying the count.
//!
//! Chunks are text: a UTF-8 sequence split across reads is held back until it is complete, and
//! bytes that are not UTF-8 become U+FFFD (the final result keeps its own capture).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Which stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
  Stdout,
  Stderr,
}

impl Stream {
  pub fn as_str(self) -> &'static str {
    match self {
      Stream::Stdout => "stdout",
      Stream::Stderr => "stderr",
    }
  }

  fn index(self) -> usize {
    match self {
      Stream::Stdout => 0,
      Stream::Stderr => 1,
    }
  }
}

/// One delivery: text of one stream, and how many bytes of that stream were dropped just
/// before it because the consumer fell behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressChunk {
  pub stream: Stream,
  pub chunk: String,
  pub skipped: u64,
}

#[derive(Default)]
struct State {
  queue: VecDeque<ProgressChunk>,
  /// Bytes of text waiting in `queue`.
  queued: usize,
  /// Per stream: bytes dropped since that stream's last queued chunk.
  skipped: [u64; 2],
  /// Per stream: the start of a UTF-8 sequence whose end has not arrived yet.
  carry: [Vec<u8>; 2],
  closed: bool,
}

impl std::fmt::Debug for Progress {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.debug_struct("Progress").field("capacity", &self.capacity).finish_non_exhaustive()
  }
}

/// The buffer between one command and one consumer.
pub struct Progress {
  state: Mutex<State>,
  notify: Notify,
  capacity: usize,
}

/// The length of the longest prefix of `buf` that does not end inside a UTF-8 sequence.
fn complete_prefix(buf: &[u8]) -> usize {
  let n = buf.len();
  for back in 1..=n.min(4) {
    let b = buf[n - back];
    if b & 0xC0 == 0x80 {
      continue; // a continuation byte: the sequence starts further back
    }
    let need = match b {
      0x00..=0x7F => 1,
      0xC0..=0xDF => 2,
      0xE0..=0xEF => 3,
      0xF0..=0xF7 => 4,
      _ => 1, // not a lead byte: lossy decoding turns it into U+FFFD on its own
    };
    return if need > back { n - back } else { n };
  }
  n
}

impl Progress {
  /// A buffer of `capacity` bytes of queued text (at least 1).
  pub fn new(capacity: usize) -> Arc<Self> {
    Arc::new(Self {
      state: Mutex::new(State::default()),
      notify: Notify::new(),
      capacity: capacity.max(1),
    })
  }

  /// The default buffer ([`crate::limits::AI_PROGRESS_BUFFER_BYTES`]).
  pub fn with_default_capacity() -> Arc<Self> {
    Self::new(crate::limits::AI_PROGRESS_BUFFER_BYTES)
  }

  fn lock(&self) -> std::sync::MutexGuard<'_, State> {
    self.state.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// Output read from the command. Never blocks on the consumer.
  pub fn push(&self, stream: Stream, bytes: &[u8]) {
    if bytes.is_empty() {
      return;
    }
    let i = stream.index();
    let mut st = self.lock();
    if st.closed {
      return;
    }
    let mut buf = std::mem::take(&mut st.carry[i]);
    buf.extend_from_slice(bytes);
    let cut = complete_prefix(&buf);
    let text = String::from_utf8_lossy(&buf[..cut]).into_owned();
    st.carry[i] = buf[cut..].to_vec();
    self.queue_text(&mut st, stream, text);
    drop(st);
    self.notify.notify_one();
  }

  fn queue_text(&self, st: &mut State, stream: Stream, text: String) {
    let i = stream.index();
    if text.is_empty() {
      return;
    }
    if st.queued + text.len() > self.capacity {
      // The consumer is behind: drop this text (and a held-back partial sequence, which can no
      // longer be completed) and say so on the stream's next chunk.
      st.skipped[i] += text.len() as u64 + st.carry[i].len() as u64;
      st.carry[i].clear();
      return;
    }
    st.queued += text.len();
    let skipped = std::mem::take(&mut st.skipped[i]);
    match st.queue.back_mut() {
      // Merging keeps the order: only the last chunk grows, and only with no drop in between.
      Some(last) if last.stream == stream && skipped == 0 => last.chunk.push_str(&text),
      _ => st.queue.push_back(ProgressChunk { stream, chunk: text, skipped }),
    }
  }

  /// The command has ended: flush held-back bytes, report drops nothing followed, and let
  /// [`Progress::next`] return `None` once the queue is empty.
  pub fn close(&self) {
    let mut st = self.lock();
    if st.closed {
      return;
    }
    for stream in [Stream::Stdout, Stream::Stderr] {
      let i = stream.index();
      let rest = std::mem::take(&mut st.carry[i]);
      if !rest.is_empty() {
        let text = String::from_utf8_lossy(&rest).into_owned();
        self.queue_text(&mut st, stream, text);
      }
      let skipped = std::mem::take(&mut st.skipped[i]);
      if skipped > 0 {
        st.queue.push_back(ProgressChunk { stream, chunk: String::new(), skipped });
      }
    }
    st.closed = true;
    drop(st);
    self.notify.notify_one();
  }

  /// The next chunk, waiting for one; `None` once closed and drained.
  pub async fn next(&self) -> Option<ProgressChunk> {
    loop {
      let notified = self.notify.notified();
      {
        let mut st = self.lock();
        if let Some(c) = st.queue.pop_front() {
          st.queued -= c.chunk.len();
          return Some(c);
        }
        if st.closed {
          return None;
        }
      }
      notified.await;
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn drain(p: &Progress) -> Vec<ProgressChunk> {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
      let mut out = Vec::new();
      while let Some(c) = p.next().await {
        out.push(c);
      }
      out
    })
  }

  #[test]
  fn chunks_of_one_stream_merge_and_streams_keep_their_order() {
    let p = Progress::new(1024);
    p.push(Stream::Stdout, b"a");
    p.push(Stream::Stdout, b"b");
    p.push(Stream::Stderr, b"E");
    p.push(Stream::Stdout, b"c");
    p.close();
    let got = drain(&p);
    let shown: Vec<(&str, &str, u64)> = got.iter().map(|c| (c.stream.as_str(), c.chunk.as_str(), c.skipped)).collect();
    assert_eq!(shown, vec![("stdout", "ab", 0), ("stderr", "E", 0), ("stdout", "c", 0)]);
  }

  #[test]
  fn a_split_utf8_sequence_waits_for_its_end() {
    let p = Progress::new(1024);
    let euro = "€".as_bytes(); // three bytes
    p.push(Stream::Stdout, &[b'x', euro[0]]);
    p.push(Stream::Stdout, &euro[1..]);
    p.push(Stream::Stdout, &[0xE2]); // an unfinished sequence at the end
    p.close();
    let text: String = drain(&p).into_iter().map(|c| c.chunk).collect();
    assert_eq!(text, "x€\u{FFFD}");
    assert_eq!(complete_prefix(&[b'a', 0xF0, 0x9F]), 1);
    assert_eq!(complete_prefix("é".as_bytes()), 2);
  }

  #[test]
  fn a_full_buffer_drops_and_counts_and_the_next_chunk_says_so() {
    let p = Progress::new(8);
    p.push(Stream::Stdout, b"12345678"); // fills it
    p.push(Stream::Stdout, b"lost!"); // dropped: 5 bytes
    p.push(Stream::Stderr, b"e"); // dropped too (the buffer is shared)
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let first = rt.block_on(p.next()).unwrap();
    assert_eq!((first.chunk.as_str(), first.skipped), ("12345678", 0));
    p.push(Stream::Stdout, b"next");
    p.close();
    let rest = drain(&p);
    assert_eq!(rest[0], ProgressChunk { stream: Stream::Stdout, chunk: "next".into(), skipped: 5 });
    // Nothing followed the stderr drop: close reports it on an empty chunk.
    assert_eq!(rest[1], ProgressChunk { stream: Stream::Stderr, chunk: String::new(), skipped: 1 });
    assert_eq!(rest.len(), 2);
  }

  #[test]
  fn nothing_is_queued_after_close() {
    let p = Progress::new(64);
    p.close();
    p.push(Stream::Stdout, b"late");
    assert!(drain(&p).is_empty());
  }
}
