//! Literal, byte-exact string replacement: the one implementation behind `edit_file` (and the
//! AI SDK `Edit`). The file is never decoded: `old` is searched for as its UTF-8 bytes and only
//! the matched spans change, so bytes that are not UTF-8 (Latin-1, UTF-16, binary) outside them
//! are kept bit for bit. (Decoding lossily and writing back would turn each such byte into
//! U+FFFD.) Since UTF-8 is self-synchronizing, a match of valid UTF-8 bytes inside valid text
//! always falls on character boundaries, so on a UTF-8 file this is exactly the reference's
//! `content.split(old).join(new)`.

use memchr::memmem;

/// The edited bytes and how many spans were replaced.
#[derive(Debug, PartialEq, Eq)]
pub struct Replaced {
  pub bytes: Vec<u8>,
  pub count: usize,
}

/// Why nothing was replaced.
#[derive(Debug, PartialEq, Eq)]
pub enum Miss {
  /// `old` does not occur. `lossy` is set when it could only have matched the way the file is
  /// shown (`old` holds U+FFFD and the file is not valid UTF-8): those bytes are not U+FFFD on
  /// disk, so an edit must go around them.
  NotFound { lossy: bool },
  /// `old` occurs `n > 1` times and `replace_all` was not asked for.
  Ambiguous(usize),
}

/// Replaces the non-overlapping occurrences of `old` (found left to right, as `split` does).
/// `old` must not be empty (the callers refuse that first).
pub fn replace_literal(haystack: &[u8], old: &str, new: &str, replace_all: bool) -> Result<Replaced, Miss> {
  debug_assert!(!old.is_empty());
  let finder = memmem::Finder::new(old.as_bytes());
  let starts: Vec<usize> = finder.find_iter(haystack).collect();
  match starts.len() {
    0 => {
      let lossy = old.contains('\u{FFFD}') && std::str::from_utf8(haystack).is_err();
      return Err(Miss::NotFound { lossy });
    }
    n if n > 1 && !replace_all => return Err(Miss::Ambiguous(n)),
    _ => {}
  }
  let grown = starts.len() * new.len();
  let mut out = Vec::with_capacity((haystack.len() + grown).saturating_sub(starts.len() * old.len()));
  let mut at = 0;
  for &s in &starts {
    out.extend_from_slice(&haystack[at..s]);
    out.extend_from_slice(new.as_bytes());
    at = s + old.len();
  }
  out.extend_from_slice(&haystack[at..]);
  Ok(Replaced {
    bytes: out,
    count: starts.len(),
  })
}

/// The second line of a `not found` error when the miss is down to bytes that are not UTF-8.
pub const LOSSY_HINT: &str = "old_string contains U+FFFD, which is how bytes that are not UTF-8 are shown; \
those bytes are not U+FFFD in the file, so choose an old_string around them (they are kept as they are)";

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn matches_split_join_on_utf8() {
    for (text, old, new) in [
      ("a.b.c", ".", "--"),
      ("aaaa", "aa", "b"),
      ("héllo wörld", "ö", "o"),
      ("$& $1", "$&", "x"),
      ("€€€", "€", ""),
    ] {
      let r = replace_literal(text.as_bytes(), old, new, true).unwrap();
      assert_eq!(String::from_utf8(r.bytes).unwrap(), text.split(old).collect::<Vec<_>>().join(new));
      assert_eq!(r.count, text.split(old).count() - 1);
    }
    assert_eq!(replace_literal(b"x y x", "x", "z", false), Err(Miss::Ambiguous(2)));
    assert_eq!(replace_literal(b"x y", "q", "z", false), Err(Miss::NotFound { lossy: false }));
  }

  #[test]
  fn bytes_that_are_not_utf8_outside_the_span_are_kept() {
    // Latin-1: "café = \xe9" with a stray 0xff.
    let latin1 = b"caf\xe9 = \xe9\xff; name = old;\n\xe9";
    let r = replace_literal(latin1, "old", "new value", false).unwrap();
    assert_eq!(r.bytes, b"caf\xe9 = \xe9\xff; name = new value;\n\xe9".to_vec());
    // A match next to an invalid lead byte.
    let r = replace_literal(b"\xc3abc\xc3", "abc", "X", false).unwrap();
    assert_eq!(r.bytes, b"\xc3X\xc3".to_vec());
    // U+FFFD in old_string, copied from the lossy view, does not match the raw bytes.
    assert_eq!(
      replace_literal(b"a\xffb", "a\u{FFFD}b", "c", false),
      Err(Miss::NotFound { lossy: true })
    );
  }
}
