//! The durable journal: any prefix of a valid journal loads as its complete lines (a torn last
//! line is cut, and only under the lock is the file truncated); a tail that is not a torn
//! append is `cave_durable_journal_corrupt` and the file is left byte for byte; the reader and
//! the replay never panic on mutated lines.

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::durable::journal::{analyze, event, parse_lines, Expected};
use crate::durable::store::{torn_tail, DiskStore};

/// One valid event, with strings that exercise escapes and multi-byte UTF-8.
fn record() -> impl Strategy<Value = String> {
  let s = "[a-z\"\\\\é€😀\u{7f}\n\t/ ]{0,12}";
  prop_oneof![
    s.prop_map(|r| event("cancel_requested", json!({"reason": r}))),
    (s, s).prop_map(|(a, b)| event("turn", json!({"messages": [{"role": "user", "content": a}, {"role": "assistant", "content": b}]}))),
    (s, 0u64..1000).prop_map(|(p, n)| event("meter_call", json!({"path": p, "atCall": n}))),
    (s, s).prop_map(|(c, m)| event("run_failed", json!({"code": c, "message": m, "receipt": null}))),
    (s, any::<f64>().prop_filter("finite", |f| f.is_finite())).prop_map(|(r, a)| event("tranche", json!({"amount": a, "reason": r, "atCall": 1}))),
  ]
  .prop_map(|v: Value| serde_json::to_string(&v).unwrap())
}

fn journal() -> impl Strategy<Value = Vec<String>> {
  proptest::collection::vec(record(), 1..6)
}

/// What may follow the last newline: random bytes, a record cut anywhere, a record with junk
/// after it (never a newline).
fn tail() -> impl Strategy<Value = Vec<u8>> {
  prop_oneof![
    proptest::collection::vec(any::<u8>(), 1..64),
    (record(), any::<prop::sample::Index>()).prop_map(|(r, at)| r.as_bytes()[..1 + at.index(r.len())].to_vec()),
    (record(), proptest::collection::vec(any::<u8>(), 1..8)).prop_map(|(r, junk)| [r.as_bytes(), &junk].concat()),
  ]
  .prop_map(|mut t| {
    for b in &mut t {
      if *b == b'\n' {
        *b = b' ';
      }
    }
    t
  })
}

fn joined(lines: &[String]) -> Vec<u8> {
  lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect()
}

/// The complete lines of `bytes` (those ending in a newline).
fn complete_lines(bytes: &[u8]) -> (usize, Vec<String>) {
  let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
  let text = std::str::from_utf8(&bytes[..keep]).unwrap();
  (keep, text.lines().map(str::to_string).collect())
}

proptest! {
  #![proptest_config(super::config(512))]

  #[test]
  fn every_prefix_of_a_valid_journal_is_its_complete_lines(lines in journal(), cut in any::<prop::sample::Index>()) {
    let bytes = joined(&lines);
    let cut = cut.index(bytes.len() + 1);
    let prefix = &bytes[..cut];
    let (keep, want) = complete_lines(prefix);
    let torn = torn_tail(prefix);
    prop_assert!(torn.is_ok(), "cut at {cut}: {:?}", torn.err().map(|e| e.message));
    prop_assert_eq!(torn.unwrap(), (keep < cut).then_some(keep));
    prop_assert!(parse_lines(&want).is_ok());
  }

  #[test]
  fn a_tail_is_cut_only_when_it_is_a_json_object_cut_short(lines in journal(), tail in tail()) {
    // A JSON object cut short: parsing stops at the end of the input, possibly inside a number
    // (then one more digit makes it an end-of-input error too).
    let eof = |b: &[u8]| match serde_json::from_slice::<serde::de::IgnoredAny>(b) { Ok(_) => true, Err(e) => e.is_eof() };
    let is_torn_object = tail[0] == b'{' && (eof(&tail) || eof(&[&tail[..], b"0"].concat()));
    let mut bytes = joined(&lines);
    let keep = bytes.len();
    bytes.extend_from_slice(&tail);
    match torn_tail(&bytes) {
      Ok(k) => {
        prop_assert!(is_torn_object);
        prop_assert_eq!(k, Some(keep));
      }
      Err(e) => {
        prop_assert!(!is_torn_object);
        prop_assert_eq!(e.code.as_str(), "cave_durable_journal_corrupt");
      }
    }
  }

  #[test]
  fn the_reader_and_the_replay_never_panic_on_mutated_lines(
    lines in journal(),
    edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<u8>()), 0..4),
  ) {
    let mut lines = lines;
    for (which, at, byte) in edits {
      let l = which.index(lines.len());
      let mut b = lines[l].clone().into_bytes();
      let i = at.index(b.len());
      b[i] = byte;
      lines[l] = String::from_utf8_lossy(&b).replace('\n', " ");
    }
    let _ = parse_lines(&lines);
    let expected = Expected {
      run_id: "r".into(),
      agent_id: "a".into(),
      definition_sha256: "0".repeat(64),
      input: json!("x"),
      denomination: "usd".into(),
      budget_max: None,
      budget_sha256: "0".repeat(64),
    };
    let _ = analyze(&lines, &expected);
  }
}

proptest! {
  // Files on disk, a lock per case: fewer cases.
  #![proptest_config(super::config(64))]

  #[test]
  fn the_disk_store_cuts_only_under_its_lock_and_never_touches_a_corrupt_file(
    lines in journal(),
    cut in any::<prop::sample::Index>(),
    garbage in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..32)),
    locked in any::<bool>(),
  ) {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskStore::new(dir.path());
    store.append_sync("r1", "").unwrap();
    store.close_sync("r1");
    let file = store.run_dir("r1").join("journal.jsonl");
    let bytes = joined(&lines);
    let mut content = bytes[..cut.index(bytes.len() + 1)].to_vec();
    let corrupt = match garbage {
      Some(g) if !g.contains(&b'\n') && g[0] != b'{' => {
        content.truncate(complete_lines(&content).0);
        content.extend_from_slice(&g);
        true
      }
      _ => false,
    };
    std::fs::write(&file, &content).unwrap();
    if locked {
      store.acquire_sync("r1").unwrap();
    }
    let loaded = store.load_sync("r1");
    let after = std::fs::read(&file).unwrap();
    let (keep, want) = complete_lines(&content);
    if corrupt {
      let e = loaded.unwrap_err();
      prop_assert_eq!(e.code.as_str(), "cave_durable_journal_corrupt");
      prop_assert_eq!(after, content);
    } else {
      prop_assert_eq!(loaded.unwrap(), want);
      prop_assert_eq!(after, if locked { content[..keep].to_vec() } else { content.clone() });
    }
    if locked {
      store.release_sync("r1").unwrap();
    }
  }
}
