//! The one streaming line reader. A file (or any reader) is read through a buffered reader
//! (chunks of up to `READ_CHUNK_BYTES` for a file: [`buffered`]; a text already in memory is one
//! chunk, not copied) and handed to a [`LineSink`] as pieces of lines, so no line, however long,
//! has to be held whole: `read_file` (numbered lines, `tools/read_file.rs`) and the AI SDK's Read (a window of
//! cut lines, `sandbox.rs`) are two sinks over this reader.
//!
//! Lines follow JavaScript's `split("\n")`: `n` newlines make `n + 1` lines, so `"a\nb\n"` has a
//! third, empty line, and an empty file has one empty line. Line numbers here are 0-based.

use std::io::{BufRead, BufReader, Read};

use crate::limits::READ_CHUNK_BYTES;

/// `reader` buffered in `READ_CHUNK_BYTES` chunks (the buffer is not zeroed first).
pub fn buffered<R: Read>(reader: R) -> BufReader<R> {
  BufReader::with_capacity(READ_CHUNK_BYTES, reader)
}

/// What a consumer of the line stream does with it. Every method may return `false` to stop the
/// reading (the rest of the stream is then never read).
pub trait LineSink {
  /// A raw chunk, before it is split into lines (for sniffing the head of a file).
  fn chunk(&mut self, _bytes: &[u8]) -> bool {
    true
  }
  /// The next piece of line `line` (never containing `\n`). One line may come in many pieces.
  fn piece(&mut self, line: u64, bytes: &[u8]) -> bool;
  /// Line `line` ended (at a `\n`, or at the end of the stream for the last line).
  fn end_line(&mut self, line: u64) -> bool;
}

/// How far a scan went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scanned {
  /// Lines seen: the number of newlines read plus one.
  pub lines: u64,
  /// The whole stream was read (no sink stopped it).
  pub complete: bool,
}

/// Streams `reader` into `sink`, line by line.
pub fn scan(mut reader: impl BufRead, sink: &mut impl LineSink) -> std::io::Result<Scanned> {
  let mut line: u64 = 0;
  loop {
    let chunk = match reader.fill_buf() {
      Ok([]) => break,
      Ok(chunk) => chunk,
      Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
      Err(e) => return Err(e),
    };
    let n = chunk.len();
    if !sink.chunk(chunk) {
      return Ok(Scanned {
        lines: line + 1,
        complete: false,
      });
    }
    let mut pos = 0;
    while pos < chunk.len() {
      let nl = memchr::memchr(b'\n', &chunk[pos..]).map(|i| pos + i);
      let end = nl.unwrap_or(chunk.len());
      if end > pos && !sink.piece(line, &chunk[pos..end]) {
        return Ok(Scanned {
          lines: line + 1,
          complete: false,
        });
      }
      match nl {
        Some(i) => {
          if !sink.end_line(line) {
            return Ok(Scanned {
              lines: line + 2,
              complete: false,
            });
          }
          line += 1;
          pos = i + 1;
        }
        None => pos = chunk.len(),
      }
    }
    reader.consume(n);
  }
  let complete = sink.end_line(line);
  Ok(Scanned {
    lines: line + 1,
    complete,
  })
}

/// A streaming lossy UTF-8 decoder for the pieces of one line: invalid bytes become U+FFFD as
/// Node's decoder makes them; a sequence split between two pieces is held until the next one.
#[derive(Default)]
pub struct LossyDecoder {
  carry: Vec<u8>,
}

impl LossyDecoder {
  /// No bytes are held from an earlier piece.
  pub fn is_idle(&self) -> bool {
    self.carry.is_empty()
  }

  /// Appends the decodable part of `bytes` (after any held bytes) to `out`.
  pub fn push(&mut self, bytes: &[u8], out: &mut String) {
    if self.carry.is_empty() {
      let held = decode_into(bytes, false, out);
      self.carry.extend_from_slice(&bytes[held..]);
    } else {
      let mut joined = std::mem::take(&mut self.carry);
      joined.extend_from_slice(bytes);
      let held = decode_into(&joined, false, out);
      self.carry = joined.split_off(held);
    }
  }

  /// Ends the line: bytes still held are an incomplete sequence, one U+FFFD each group.
  pub fn finish(&mut self, out: &mut String) {
    if !self.carry.is_empty() {
      let carry = std::mem::take(&mut self.carry);
      decode_into(&carry, true, out);
    }
  }
}

/// Decodes `bytes` into `out`; returns how many bytes it consumed (an incomplete sequence at the
/// end is left unconsumed unless `last`).
fn decode_into(bytes: &[u8], last: bool, out: &mut String) -> usize {
  let mut consumed = 0;
  for chunk in bytes.utf8_chunks() {
    out.push_str(chunk.valid());
    consumed += chunk.valid().len();
    let invalid = chunk.invalid();
    if invalid.is_empty() {
      continue;
    }
    if !last && consumed + invalid.len() == bytes.len() && invalid.len() < 4 {
      return consumed;
    }
    out.push('\u{FFFD}');
    consumed += invalid.len();
  }
  consumed
}

#[cfg(test)]
mod tests {
  use super::*;

  #[derive(Default)]
  struct Collect {
    lines: Vec<Vec<u8>>,
    cur: Vec<u8>,
    stop_after: Option<u64>,
  }

  impl LineSink for Collect {
    fn piece(&mut self, _line: u64, bytes: &[u8]) -> bool {
      self.cur.extend_from_slice(bytes);
      true
    }
    fn end_line(&mut self, line: u64) -> bool {
      self.lines.push(std::mem::take(&mut self.cur));
      self.stop_after != Some(line)
    }
  }

  fn lines(input: &[u8]) -> (Vec<String>, Scanned) {
    let mut c = Collect::default();
    let s = scan(input, &mut c).unwrap();
    (
      c.lines
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect(),
      s,
    )
  }

  #[test]
  fn split_semantics() {
    assert_eq!(lines(b"a\nb\n").0, vec!["a", "b", ""]);
    assert_eq!(
      lines(b"a\nb\n").1,
      Scanned {
        lines: 3,
        complete: true
      }
    );
    assert_eq!(lines(b"").0, vec![""]);
    assert_eq!(lines(b"x").0, vec!["x"]);
    assert_eq!(lines(b"\n\n").1.lines, 3);
  }

  #[test]
  fn long_lines_span_chunks_and_sinks_can_stop() {
    let long = vec![b'y'; READ_CHUNK_BYTES * 3 + 5];
    let mut input = long.clone();
    input.extend_from_slice(b"\nz");
    let (l, s) = lines(&input);
    assert_eq!(l[0].len(), long.len());
    assert_eq!((l[1].as_str(), s.lines), ("z", 2));
    let mut c = Collect {
      stop_after: Some(0),
      ..Default::default()
    };
    let s = scan(&b"a\nb\nc"[..], &mut c).unwrap();
    assert!(!s.complete);
    assert_eq!(c.lines.len(), 1);
  }

  #[test]
  fn lossy_decoder_matches_whole_decoding() {
    let text = "é😀 ascii ü".as_bytes();
    for split in 0..text.len() {
      let mut d = LossyDecoder::default();
      let mut out = String::new();
      d.push(&text[..split], &mut out);
      d.push(&text[split..], &mut out);
      d.finish(&mut out);
      assert_eq!(out, "é😀 ascii ü", "split at {split}");
    }
    let mut d = LossyDecoder::default();
    let mut out = String::new();
    d.push(b"a\xF0\x9F", &mut out);
    d.finish(&mut out);
    assert_eq!(out, "a\u{FFFD}");
    let mut out = String::new();
    let mut d = LossyDecoder::default();
    d.push(b"\xFFb", &mut out);
    d.finish(&mut out);
    assert_eq!(out, String::from_utf8_lossy(b"\xFFb"));
  }
}
