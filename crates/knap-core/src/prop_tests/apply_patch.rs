//! The apply-patch format: `parse` never panics and numbers its errors inside the patch;
//! rendered hunks parse back to themselves; chunks made from a known edit apply to exactly that
//! edit (also with whitespace-fuzzed context, which keeps the file's own text); and `plan` over
//! random hunks and files never panics and never reports more files than hunks.

use std::collections::HashMap;

use proptest::prelude::*;

use crate::apply_patch::{apply_chunks, parse, plan, Chunk, Hunk, Op};

/// Lines a patch is made of: markers, op lines, noise.
fn patch_line() -> impl Strategy<Value = String> {
  prop_oneof![
    Just("*** Begin Patch".to_string()),
    Just("*** End Patch".to_string()),
    "[a-c/.]{0,4}".prop_map(|p| format!("*** Add File: {p}")),
    "[a-c/.]{0,4}".prop_map(|p| format!("*** Delete File: {p}")),
    "[a-c/.]{0,4}".prop_map(|p| format!("*** Update File: {p}")),
    "[a-c/.]{0,4}".prop_map(|p| format!("*** Move to: {p}")),
    Just("*** End of File".to_string()),
    Just("@@".to_string()),
    "[ a-c]{0,4}".prop_map(|c| format!("@@ {c}")),
    "[-+ ][ a-c€\t]{0,5}".prop_map(|l| l),
    "[ \t\r]{0,2}".prop_map(|l| l),
    ".{0,8}".prop_map(|l| l),
    Just("<<'EOF'".to_string()),
    Just("EOF".to_string()),
  ]
}

/// A path the renderer can write and the parser gives back (trimmed, non-empty, one line).
fn path() -> impl Strategy<Value = String> {
  "[a-c][a-c0-9_/.]{0,6}"
}

/// Op-line text: no newline or carriage return (the parser strips a final `\r`).
fn text() -> impl Strategy<Value = String> {
  "[ a-c€\t*@+-]{0,6}"
}

fn chunk() -> impl Strategy<Value = Chunk> {
  (
    proptest::option::of("[ a-c€]{0,5}"),
    proptest::collection::vec((prop_oneof![Just(Op::Context), Just(Op::Remove), Just(Op::Add)], text()), 1..6),
    any::<bool>(),
  )
    .prop_map(|(change_context, ops, is_end_of_file)| {
      let old_lines = ops.iter().filter(|(k, _)| *k != Op::Add).map(|(_, t)| t.clone()).collect();
      let new_lines = ops.iter().filter(|(k, _)| *k != Op::Remove).map(|(_, t)| t.clone()).collect();
      Chunk { change_context, old_lines, new_lines, ops, is_end_of_file }
    })
}

fn hunk() -> impl Strategy<Value = Hunk> {
  prop_oneof![
    (path(), proptest::collection::vec(".{0,6}", 0..4)).prop_map(|(path, lines)| Hunk::Add {
      path,
      content: lines.iter().map(|l| format!("{}\n", l.replace(['\n', '\r'], ""))).collect(),
    }),
    path().prop_map(|path| Hunk::Delete { path }),
    (path(), proptest::option::of(path()), proptest::collection::vec(chunk(), 1..4)).prop_map(
      |(path, move_path, mut chunks)| {
        // A chunk after the first must open with `@@`; the first may omit it only when its
        // first line is not blank (a blank line before a marker is skipped as padding).
        if chunks[0].change_context.is_none() && chunks[0].ops[0].1.trim().is_empty() {
          chunks[0].change_context = Some(String::new());
        }
        Hunk::Update { path, move_path, chunks }
      }
    ),
  ]
}

fn render(hunks: &[Hunk]) -> String {
  let mut out = vec!["*** Begin Patch".to_string()];
  for h in hunks {
    match h {
      Hunk::Add { path, content } => {
        out.push(format!("*** Add File: {path}"));
        out.extend(content.lines().map(|l| format!("+{l}")));
      }
      Hunk::Delete { path } => out.push(format!("*** Delete File: {path}")),
      Hunk::Update { path, move_path, chunks } => {
        out.push(format!("*** Update File: {path}"));
        if let Some(m) = move_path {
          out.push(format!("*** Move to: {m}"));
        }
        for (i, c) in chunks.iter().enumerate() {
          match &c.change_context {
            Some(ctx) => out.push(format!("@@ {ctx}")),
            None if i > 0 => out.push("@@".into()),
            None => {}
          }
          for (op, t) in &c.ops {
            let sign = match op {
              Op::Context => ' ',
              Op::Remove => '-',
              Op::Add => '+',
            };
            out.push(format!("{sign}{t}"));
          }
          if c.is_end_of_file {
            out.push("*** End of File".into());
          }
        }
      }
    }
  }
  out.push("*** End Patch".into());
  out.join("\n")
}

/// A file of distinct lines and a set of disjoint edits on it, as chunks and as the expected
/// result. Context lines around an edit are taken from the file (optionally with extra
/// whitespace, which the fuzzy passes must accept without rewriting the file's text).
fn edit_case() -> impl Strategy<Value = (String, Vec<Chunk>, String)> {
  (
    proptest::collection::vec("[a-c€ ]{0,5}", 1..30),
    proptest::collection::vec(
      (0usize..3, 0usize..3, 0usize..3, proptest::collection::vec("[x-z]{0,4}", 0..3), 0usize..3, any::<bool>(), any::<bool>()),
      1..5,
    ),
  )
    .prop_map(|(body, edits)| {
      // Distinct lines: the matcher finds the first occurrence, the oracle needs it unique.
      let lines: Vec<String> = body.iter().enumerate().map(|(i, l)| format!("L{i}:{l}")).collect();
      let mut chunks = Vec::new();
      let mut expected: Vec<String> = Vec::new();
      // `pos`: end of the part already copied; `at`: where the matcher's cursor is.
      let mut pos = 0;
      let mut at = 0;
      for (gap, before, removed, added, after, fuzz, at_context) in edits {
        let from = at + gap;
        let start = from + before;
        if start + removed + after > lines.len() {
          break;
        }
        if removed == 0 && added.is_empty() {
          continue;
        }
        let fuzzed = |l: &String| if fuzz { format!("  {l} ") } else { l.clone() };
        let mut ops = Vec::new();
        ops.extend(lines[from..start].iter().map(|l| (Op::Context, fuzzed(l))));
        ops.extend(lines[start..start + removed].iter().map(|l| (Op::Remove, l.clone())));
        ops.extend(added.iter().map(|l| (Op::Add, format!("+{l}"))));
        ops.extend(lines[start + removed..start + removed + after].iter().map(|l| (Op::Context, fuzzed(l))));
        if ops.iter().all(|(k, _)| *k == Op::Add) {
          // An insertion with no anchor appends at the end: not what this case models.
          continue;
        }
        // `@@ <line>`: a line after the cursor and before the chunk.
        let change_context = (at_context && gap > 0).then(|| lines[from - 1].clone());
        let old_lines = ops.iter().filter(|(k, _)| *k != Op::Add).map(|(_, t)| t.clone()).collect();
        let new_lines = ops.iter().filter(|(k, _)| *k != Op::Remove).map(|(_, t)| t.clone()).collect();
        chunks.push(Chunk { change_context, old_lines, new_lines, ops, is_end_of_file: false });
        expected.extend(lines[pos..start].iter().cloned());
        expected.extend(added.iter().map(|l| format!("+{l}")));
        pos = start + removed;
        at = start + removed + after;
      }
      expected.extend(lines[pos..].iter().cloned());
      let original = format!("{}\n", lines.join("\n"));
      let expected = if expected.is_empty() { String::new() } else { format!("{}\n", expected.join("\n")) };
      (original, chunks, expected)
    })
}

proptest! {
  #![proptest_config(super::config(1024))]

  #[test]
  fn parse_never_panics_and_errors_point_inside(lines in proptest::collection::vec(patch_line(), 0..16), crlf in any::<bool>()) {
    let text = lines.join(if crlf { "\r\n" } else { "\n" });
    if let Err(e) = parse(&text) {
      if let Some(rest) = e.strip_prefix("Line ") {
        let n: usize = rest.split(':').next().unwrap().parse().unwrap();
        prop_assert!(n >= 2 && n <= lines.len().max(2), "{e}");
      }
    }
  }

  #[test]
  fn rendered_hunks_parse_back(hunks in proptest::collection::vec(hunk(), 0..5)) {
    let text = render(&hunks);
    prop_assert_eq!(parse(&text), Ok(hunks));
  }

  #[test]
  fn chunks_of_a_known_edit_apply_to_it((original, chunks, expected) in edit_case()) {
    prop_assert_eq!(apply_chunks(&original, &chunks, "f"), Ok(expected));
  }

  #[test]
  fn apply_and_plan_never_panic(
    file in proptest::collection::vec("[a-c ]{0,3}", 0..8),
    hunks in proptest::collection::vec(hunk(), 1..5),
    present in proptest::collection::vec(any::<bool>(), 8),
  ) {
    let content = file.join("\n");
    let mut disk = HashMap::new();
    for (i, h) in hunks.iter().enumerate() {
      for p in h.paths() {
        disk.insert(p.to_string(), present[i % 8].then(|| content.clone()));
      }
      if let Hunk::Update { chunks, .. } = h {
        let _ = apply_chunks(&content, chunks, "f");
      }
    }
    if let Ok(p) = plan(&hunks, &|p: &str| p.to_string(), &disk, Some(64)) {
      prop_assert_eq!(p.files.len(), hunks.len());
      prop_assert!(p.writes.iter().all(|w| w.content.as_ref().is_none_or(|c| c.len() <= 64)));
    }
  }
}
