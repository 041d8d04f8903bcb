//! The two capping functions of the reference (`capToolOutput`, `capOutput`), byte-exact.

use crate::store::OutputStore;
use crate::text;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
  Head,
  Tail,
}

/// Where a capped result may be recovered from.
pub enum Recovery<'a> {
  /// `read_tool_output` is selected: offer the full text to this store.
  Store(&'a OutputStore),
  /// `read_tool_output` is not selected.
  NotExposed,
  /// `read_tool_output` is not selected, and this text says how to get the rest (a bash
  /// session's retained output).
  Resume(String),
}

pub struct CapRequest<'a> {
  /// The output, or (for head-capped streams) a prefix of it at least `max_bytes` long.
  pub text: Vec<u8>,
  /// UTF-8 byte length of the whole output.
  pub total: usize,
  pub max_bytes: usize,
  pub direction: Direction,
  pub label: &'a str,
  /// Whether the text is the whole output (false when process capture overflowed).
  pub complete: bool,
  pub recovery: Recovery<'a>,
}

impl<'a> CapRequest<'a> {
  /// A request over a whole, already-built text.
  pub fn whole(
    text: String,
    max_bytes: usize,
    direction: Direction,
    label: &'a str,
    complete: bool,
    recovery: Recovery<'a>,
  ) -> Self {
    let total = text.len();
    Self {
      text: text.into_bytes(),
      total,
      max_bytes,
      direction,
      label,
      complete,
      recovery,
    }
  }
}

/// `capToolOutput`: unchanged when it fits and is complete; otherwise a head or tail preview
/// plus the marker, with the full text offered to the store.
pub fn cap_tool_output(req: CapRequest<'_>) -> String {
  cap_tool_output_from(req, None)
}

/// `capToolOutput` with the marker's source text given by the caller (a bash session's capture
/// names the retained byte range).
pub fn cap_tool_output_from(req: CapRequest<'_>, source: Option<&str>) -> String {
  let total = req.total;
  let whole = req.text.len() == total;
  if total <= req.max_bytes && req.complete && whole {
    return String::from_utf8_lossy(&req.text).into_owned();
  }
  let source = source.unwrap_or(if req.complete {
    text::SOURCE_COMPLETE
  } else {
    text::SOURCE_PARTIAL
  });
  let recovery = match req.recovery {
    Recovery::NotExposed => text::RECOVERY_NOT_EXPOSED.to_string(),
    Recovery::Resume(text) => text,
    Recovery::Store(store) if whole => {
      match store.put(req.label, &String::from_utf8_lossy(&req.text), req.complete) {
        Some(handle) => text::recovery_handle(&handle),
        None => text::RECOVERY_TOO_LARGE.to_string(),
      }
    }
    // Only a prefix was kept because the whole was over the store's entry limit.
    Recovery::Store(_) => text::RECOVERY_TOO_LARGE.to_string(),
  };
  let marker = text::capped_marker(total, source, &recovery);
  let bytes = &req.text[..];
  let keep = req.max_bytes.saturating_sub(marker.len()).min(bytes.len());
  let slice = match req.direction {
    Direction::Head => &bytes[..keep],
    Direction::Tail => &bytes[bytes.len() - keep..],
  };
  let mut out = String::from_utf8_lossy(slice).into_owned();
  out.push_str(&marker);
  out
}

/// `capOutput`: the first `max_bytes` bytes and a short marker.
pub fn cap_output(text: &str, max_bytes: usize) -> String {
  let total = text.len();
  if total <= max_bytes {
    return text.to_string();
  }
  let mut out = String::from_utf8_lossy(&text.as_bytes()[..max_bytes]).into_owned();
  out.push_str(&text::capped_at_marker(max_bytes, total));
  out
}

#[cfg(test)]
mod tests {
  use super::*;

  fn lines(n: usize) -> String {
    (0..n).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n")
  }

  #[test]
  fn fits_and_complete_is_unchanged() {
    let out = cap_tool_output(CapRequest::whole(
      "hello".into(),
      5,
      Direction::Head,
      "x",
      true,
      Recovery::NotExposed,
    ));
    assert_eq!(out, "hello");
  }

  #[test]
  fn seed_cat_example_tail_with_handle() {
    // The seed: `cat` of a 4,000-line file through bash, 38,889 captured bytes.
    let store = OutputStore::new();
    let body = lines(4000);
    assert_eq!(body.len(), 38_889);
    let out = cap_tool_output(CapRequest::whole(
      body,
      24_000 - "exit 0\n".len(),
      Direction::Tail,
      "bash:cat big.txt",
      true,
      Recovery::Store(&store),
    ));
    assert!(out.contains("line 3998\nline 3999\n[caveman-code: output capped from 38889 captured bytes; use read_tool_output with handle tool_"));
    assert_eq!(out.len(), 24_000 - 7);
    let handle = out.rsplit("handle ").next().unwrap().trim_end_matches(']');
    assert_eq!(handle.len(), 37);
    assert!(handle[5..]
      .chars()
      .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert_eq!(store.get(handle).unwrap().text.len(), 38_889);
  }

  #[test]
  fn not_exposed_and_partial_texts() {
    let out = cap_tool_output(CapRequest::whole(
      "abc".into(),
      1000,
      Direction::Head,
      "x",
      false,
      Recovery::NotExposed,
    ));
    assert_eq!(
      out,
      "abc\n[caveman-code: output capped from 3 captured bytes; later process output unavailable; recovery paging is not exposed; narrow original request]"
    );
  }

  #[test]
  fn too_large_for_store() {
    let store = OutputStore::new();
    let big = "x".repeat(crate::limits::STORE_ENTRY_MAX_BYTES + 1);
    let out = cap_tool_output(CapRequest::whole(
      big,
      200,
      Direction::Head,
      "x",
      true,
      Recovery::Store(&store),
    ));
    assert!(out.ends_with("; result too large for recovery store; narrow original request]"));
    assert_eq!(store.total_bytes(), 0);
  }

  #[test]
  fn head_split_inside_a_character_gives_replacement() {
    let text = "é".repeat(200);
    let marker_len = text::capped_marker(400, text::SOURCE_COMPLETE, text::RECOVERY_NOT_EXPOSED).len();
    let out = cap_tool_output(CapRequest::whole(
      text,
      marker_len + 3,
      Direction::Head,
      "x",
      true,
      Recovery::NotExposed,
    ));
    assert!(out.starts_with("é\u{FFFD}\n[caveman-code"));
  }

  #[test]
  fn cap_output_marker() {
    assert_eq!(cap_output("abcdef", 10), "abcdef");
    assert_eq!(
      cap_output("abcdef", 4),
      "abcd\n[caveman-code: output capped at 4 of 6 bytes; narrow the request]"
    );
  }
}
