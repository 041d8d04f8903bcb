//! The one truncation helper: text measured and cut the way JavaScript measures it (UTF-16 code
//! units, as `String.prototype.length` / `slice` do), bashkit's `middleTruncate`, the line cut
//! with `…` of Read and Grep, and [`HeadTail`], which renders `middleTruncate` of a stream
//! exactly while holding only its head and its tail.

/// UTF-16 code units a byte contributes when the stream is decoded as UTF-8 (continuation bytes
/// add nothing, a 4-byte lead adds a surrogate pair). Invalid input is counted approximately.
#[inline]
pub fn utf16_units_of_byte(b: u8) -> usize {
  if b < 0x80 {
    1
  } else if b & 0xC0 == 0x80 {
    0
  } else if b >= 0xF0 {
    2
  } else {
    1
  }
}

pub fn utf16_len(s: &str) -> usize {
  s.chars().map(char::len_utf16).sum()
}

/// The longest prefix of `s` with at most `units` UTF-16 code units.
pub fn utf16_prefix(s: &str, units: usize) -> &str {
  let mut used = 0;
  for (i, c) in s.char_indices() {
    used += c.len_utf16();
    if used > units {
      return &s[..i];
    }
  }
  s
}

/// The longest suffix of `s` with at most `units` UTF-16 code units.
pub fn utf16_suffix(s: &str, units: usize) -> &str {
  let mut used = 0;
  for (i, c) in s.char_indices().rev() {
    used += c.len_utf16();
    if used > units {
      return &s[i + c.len_utf8()..];
    }
  }
  s
}

/// The first and last `edge` bytes of `text` around `marker` (byte cuts; a split character
/// becomes U+FFFD), as the programmatic cell's output cap does. `text` must be longer than
/// `2 * edge`.
pub fn head_tail_bytes(text: &str, edge: usize, marker: &str) -> String {
  let bytes = text.as_bytes();
  let head = String::from_utf8_lossy(&bytes[..edge]);
  let tail = String::from_utf8_lossy(&bytes[bytes.len() - edge..]);
  format!("{head}{marker}{tail}")
}

/// bashkit's `middleTruncate` over a whole text: unchanged when it fits, else the first half and
/// the last half around `…K chars truncated…`, after a `[Total output lines: N]` header.
pub fn middle_truncate(text: &str, max_units: usize) -> String {
  let total = utf16_len(text);
  if total <= max_units {
    return text.to_string();
  }
  let head = utf16_prefix(text, max_units / 2);
  let tail = utf16_suffix(text, max_units - max_units / 2);
  let lines = memchr::memchr_iter(b'\n', text.as_bytes()).count() + 1;
  let omitted = total - utf16_len(head) - utf16_len(tail);
  format!("[Total output lines: {lines}]\n\n{head}\n\n…{omitted} chars truncated…\n\n{tail}")
}

// ---------------------------------------------------------------------------------------------
// Head + tail capture

/// One output stream kept as its head and its tail, with the totals needed to render
/// `middleTruncate` exactly without holding the middle.
#[derive(Debug, Default)]
pub struct HeadTail {
  head: Vec<u8>,
  head_cap: usize,
  /// Ring buffer of the last `tail_cap` bytes (valid once `total > head_cap`).
  tail: Vec<u8>,
  tail_cap: usize,
  tail_pos: usize,
  total_bytes: u64,
  units: u64,
  newlines: u64,
}

impl HeadTail {
  /// Enough to render `middleTruncate(text, max_units)` exactly: a text that fits in
  /// `max_units` code units is at most `3 * max_units` bytes, so the head holds all of it.
  pub fn for_units(max_units: usize) -> Self {
    let cap = max_units.saturating_mul(4).saturating_add(16);
    Self {
      head_cap: cap,
      tail_cap: max_units.saturating_mul(2).saturating_add(16),
      ..Default::default()
    }
  }

  pub fn push(&mut self, mut bytes: &[u8]) {
    self.total_bytes += bytes.len() as u64;
    self.newlines += memchr::memchr_iter(b'\n', bytes).count() as u64;
    self.units += bytes.iter().map(|&b| utf16_units_of_byte(b) as u64).sum::<u64>();
    let room = self.head_cap.saturating_sub(self.head.len());
    if room > 0 {
      let take = room.min(bytes.len());
      self.head.extend_from_slice(&bytes[..take]);
      bytes = &bytes[take..];
    }
    if bytes.is_empty() || self.tail_cap == 0 {
      return;
    }
    if bytes.len() >= self.tail_cap {
      self.tail.clear();
      self.tail.extend_from_slice(&bytes[bytes.len() - self.tail_cap..]);
      self.tail_pos = 0;
      return;
    }
    for &b in bytes {
      if self.tail.len() < self.tail_cap {
        self.tail.push(b);
      } else {
        self.tail[self.tail_pos] = b;
        self.tail_pos = (self.tail_pos + 1) % self.tail_cap;
      }
    }
  }

  pub fn total_bytes(&self) -> u64 {
    self.total_bytes
  }

  /// The stream's length in UTF-16 code units.
  pub fn units(&self) -> u64 {
    self.units
  }

  fn complete(&self) -> bool {
    self.total_bytes as usize == self.head.len()
  }

  fn tail_bytes(&self) -> Vec<u8> {
    if self.tail.len() < self.tail_cap {
      return self.tail.clone();
    }
    let mut out = Vec::with_capacity(self.tail.len());
    out.extend_from_slice(&self.tail[self.tail_pos..]);
    out.extend_from_slice(&self.tail[..self.tail_pos]);
    out
  }

  /// The stream as text after `middleTruncate(text, max_units)`; `max_units` must not exceed
  /// the one given to [`HeadTail::for_units`].
  pub fn render(&self, max_units: usize) -> String {
    if self.complete() {
      return middle_truncate(&String::from_utf8_lossy(&self.head), max_units);
    }
    let head_text = String::from_utf8_lossy(&self.head);
    let head = utf16_prefix(&head_text, max_units / 2);
    let tail_raw = self.tail_bytes();
    // The ring may start inside a character: skip continuation bytes.
    let start = tail_raw
      .iter()
      .position(|&b| b & 0xC0 != 0x80)
      .unwrap_or(tail_raw.len());
    let tail_text = String::from_utf8_lossy(&tail_raw[start..]);
    let tail = utf16_suffix(&tail_text, max_units - max_units / 2);
    let omitted = (self.units as usize).saturating_sub(utf16_len(head) + utf16_len(tail));
    let lines = self.newlines + 1;
    format!("[Total output lines: {lines}]\n\n{head}\n\n…{omitted} chars truncated…\n\n{tail}")
  }
}

/// A line cut at `max_units` UTF-16 units, with `…` appended when it was longer (bashkit's
/// `line.length > max ? line.slice(0, max) + "…" : line`).
pub fn cut_line(s: &str, max_units: usize) -> String {
  if utf16_len(s) > max_units {
    let mut out = utf16_prefix(s, max_units).to_string();
    out.push('…');
    out
  } else {
    s.to_string()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn middle_truncate_matches_the_js_rule() {
    assert_eq!(middle_truncate("abc", 3), "abc");
    // 10 chars, max 4: head 2, tail 2, omitted 6, 1 line.
    assert_eq!(
      middle_truncate("0123456789", 4),
      "[Total output lines: 1]\n\n01\n\n…6 chars truncated…\n\n89"
    );
    assert_eq!(
      middle_truncate("a\nb\nc\nd\ne", 5),
      "[Total output lines: 5]\n\na\n\n\n…4 chars truncated…\n\nd\ne"
    );
  }

  #[test]
  fn head_tail_renders_like_the_whole_text() {
    let mut whole = String::new();
    for i in 0..5000 {
      whole.push_str(&format!("line {i} é😀\n"));
    }
    for max in [10usize, 101, 3000, 200_000] {
      let mut ht = HeadTail::for_units(max);
      for chunk in whole.as_bytes().chunks(777) {
        ht.push(chunk);
      }
      assert_eq!(ht.render(max), middle_truncate(&whole, max), "max {max}");
    }
  }

  #[test]
  fn cut_line_counts_utf16() {
    assert_eq!(cut_line("abc", 3), "abc");
    assert_eq!(cut_line("abcd", 3), "abc…");
    assert_eq!(cut_line("😀😀", 2), "😀…");
  }
}
