//! `knap_core::edit::replace_literal` against a naive byte-scanning oracle, on haystacks that mix
//! ASCII, multi-byte UTF-8 and bytes that are not UTF-8; and `edit_file` / the AI SDK `Edit`
//! end to end on such files: only the replaced spans change, bit for bit.

use proptest::prelude::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::edit::{replace_literal, Miss};

/// Left-to-right, non-overlapping occurrences of `needle` (what `split` finds), by brute force.
fn occurrences(hay: &[u8], needle: &[u8]) -> Vec<usize> {
  let mut out = Vec::new();
  let mut i = 0;
  while i + needle.len() <= hay.len() {
    if &hay[i..i + needle.len()] == needle {
      out.push(i);
      i += needle.len();
    } else {
      i += 1;
    }
  }
  out
}

fn splice(hay: &[u8], starts: &[usize], old: usize, new: &[u8]) -> Vec<u8> {
  let mut out = Vec::new();
  let mut at = 0;
  for &s in starts {
    out.extend_from_slice(&hay[at..s]);
    out.extend_from_slice(new);
    at = s + old;
  }
  out.extend_from_slice(&hay[at..]);
  out
}

/// A piece of a file: ASCII words, multi-byte characters, Latin-1 bytes, UTF-16LE text, raw
/// bytes (often invalid UTF-8).
fn piece() -> impl Strategy<Value = Vec<u8>> {
  prop_oneof![
    "[a-c ]{1,6}".prop_map(String::into_bytes),
    "[é€😀ß\n]{1,3}".prop_map(String::into_bytes),
    proptest::collection::vec(0x80u8..=0xff, 1..4),
    "[a-z]{1,4}".prop_map(|s| s.encode_utf16().flat_map(u16::to_le_bytes).collect()),
    proptest::collection::vec(any::<u8>(), 1..6),
  ]
}

fn haystack() -> impl Strategy<Value = Vec<u8>> {
  proptest::collection::vec(piece(), 0..24).prop_map(|p| p.concat())
}

/// An `old_string`: usually a valid-UTF-8 slice of the haystack (so it is found), else a short
/// random string.
fn case() -> impl Strategy<Value = (Vec<u8>, String, String, bool)> {
  (haystack(), any::<prop::sample::Index>(), 1usize..6, "[a-cé€ ]{0,4}", "[a-c€]{0,3}", any::<bool>())
    .prop_map(|(hay, at, len, new, fallback, all)| {
      let old = if hay.is_empty() {
        None
      } else {
        let s = at.index(hay.len());
        let e = (s + len).min(hay.len());
        std::str::from_utf8(&hay[s..e]).ok().map(str::to_string)
      };
      let old = old.filter(|o| !o.is_empty()).unwrap_or(if fallback.is_empty() { "a".into() } else { fallback });
      (hay, old, new, all)
    })
}

proptest! {
  #![proptest_config(super::config(512))]

  #[test]
  fn replace_literal_matches_the_oracle((hay, old, new, all) in case()) {
    let starts = occurrences(&hay, old.as_bytes());
    match replace_literal(&hay, &old, &new, all) {
      Ok(r) => {
        prop_assert!(!starts.is_empty() && (all || starts.len() == 1));
        prop_assert_eq!(r.count, starts.len());
        prop_assert_eq!(r.bytes, splice(&hay, &starts, old.len(), new.as_bytes()));
      }
      Err(Miss::NotFound { lossy }) => {
        prop_assert!(starts.is_empty());
        prop_assert_eq!(lossy, old.contains('\u{FFFD}') && std::str::from_utf8(&hay).is_err());
      }
      Err(Miss::Ambiguous(n)) => {
        prop_assert!(!all);
        prop_assert_eq!(n, starts.len());
        prop_assert!(n > 1);
      }
    }
  }

  #[test]
  fn on_utf8_text_it_is_split_join(text in "[ab€ \n]{0,40}", old in "[ab€]{1,3}", new in "[xé]{0,3}") {
    let r = replace_literal(text.as_bytes(), &old, &new, true);
    let parts: Vec<&str> = text.split(old.as_str()).collect();
    match r {
      Ok(r) => {
        prop_assert_eq!(r.count, parts.len() - 1);
        prop_assert_eq!(String::from_utf8(r.bytes).unwrap(), parts.join(&new));
      }
      Err(_) => prop_assert_eq!(parts.len(), 1),
    }
  }
}

proptest! {
  // Each case writes a file and runs two tools: fewer cases.
  #![proptest_config(super::config(48))]

  #[test]
  fn edit_file_and_ai_sdk_edit_change_only_the_spans((hay, old, new, all) in case()) {
    prop_assume!(old != new);
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("f.bin"), &hay).unwrap();
    std::fs::write(ws.join("g.bin"), &hay).unwrap();
    let starts = occurrences(&hay, old.as_bytes());
    let succeeds = !starts.is_empty() && (all || starts.len() == 1);
    let want = if succeeds { splice(&hay, &starts, old.len(), new.as_bytes()) } else { hay.clone() };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();

    let tools = crate::tools::ShellTools::new(crate::tools::ShellToolsConfig::new(ws.clone())).unwrap();
    let r = rt.block_on(tools.execute(
      "edit_file",
      &json!({"path": "f.bin", "old_string": old, "new_string": new, "replace_all": all}),
      CancellationToken::new(),
    ));
    prop_assert_eq!(r.is_ok(), succeeds, "{:?}", r.as_ref().err().map(|e| &e.message));
    prop_assert_eq!(std::fs::read(ws.join("f.bin")).unwrap(), want.clone());

    let sb = std::sync::Arc::new(crate::sandbox::LocalSandbox::create(&ws, Vec::new()).unwrap());
    let agent = crate::agent_tools::AgentTools::new(std::sync::Arc::new(sb), None);
    let tool = agent.tool(crate::agent_tools::ToolConfig::default()).unwrap();
    let (answer, _) = rt.block_on(agent.edit(&tool, crate::agent_tools::EditInput {
      file_path: "g.bin".into(),
      old_string: old.clone(),
      new_string: new.clone(),
      replace_all: all,
    }));
    prop_assert_eq!(answer.is_ok(), succeeds);
    prop_assert_eq!(std::fs::read(ws.join("g.bin")).unwrap(), want);
  }
}
