//! Fixture scenarios for `knap_core::apply_patch`, in the style of codex-rs's apply-patch tests:
//! each folder under `tests/apply_patch/` holds `input/` (the files before), `patch`, and either
//! `expected/` (the files after) or `error` (the message; the files must then be unchanged).
//! The harness reads the files the patch names, plans it, and writes the plan out, as the AI SDK
//! `Patch` tool does through its sandbox.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use knap_core::apply_patch::{parse, plan};

fn tree(dir: &Path) -> BTreeMap<String, String> {
  let mut out = BTreeMap::new();
  if !dir.exists() {
    return out;
  }
  let mut stack = vec![dir.to_path_buf()];
  while let Some(d) = stack.pop() {
    for e in std::fs::read_dir(&d).unwrap() {
      let p = e.unwrap().path();
      if p.is_dir() {
        stack.push(p);
      } else if p.file_name().is_some_and(|n| n == ".gitkeep") {
        // Keeps an empty `input/` in git; not a file of the scenario.
      } else {
        let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
        out.insert(rel, std::fs::read_to_string(&p).unwrap());
      }
    }
  }
  out
}

fn copy(from: &Path, to: &Path) {
  for (rel, content) in tree(from) {
    let p = to.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
  }
}

/// Parses, plans against `dir`, writes the plan; the error text on failure.
fn apply(patch: &str, dir: &Path, max_bytes: Option<u64>) -> Result<String, String> {
  let hunks = parse(patch)?;
  if hunks.is_empty() {
    return Err("Patch contains no operations".into());
  }
  let key_of = |p: &str| {
    knap_core::workspace::normalize(&dir.join(p))
      .to_string_lossy()
      .into_owned()
  };
  let mut disk = HashMap::new();
  for h in &hunks {
    for p in h.paths() {
      let k = key_of(p);
      let content = std::fs::read_to_string(&k).ok();
      disk.insert(k, content);
    }
  }
  let planned = plan(&hunks, &key_of, &disk, max_bytes)?;
  for w in &planned.writes {
    match &w.content {
      None => std::fs::remove_file(&w.key).unwrap(),
      Some(c) => {
        std::fs::create_dir_all(Path::new(&w.key).parent().unwrap()).unwrap();
        std::fs::write(&w.key, c).unwrap();
      }
    }
  }
  Ok(planned.message())
}

#[test]
fn scenarios() {
  let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/apply_patch");
  let mut names: Vec<PathBuf> = std::fs::read_dir(&root)
    .unwrap()
    .map(|e| e.unwrap().path())
    .filter(|p| p.is_dir())
    .collect();
  names.sort();
  assert!(names.len() >= 10, "scenarios missing");
  for scenario in names {
    let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
    let work = tempfile::tempdir().unwrap();
    copy(&scenario.join("input"), work.path());
    let patch = std::fs::read_to_string(scenario.join("patch")).unwrap();
    let max = std::fs::read_to_string(scenario.join("max_bytes"))
      .ok()
      .map(|s| s.trim().parse().unwrap());
    let result = apply(&patch, work.path(), max);
    match std::fs::read_to_string(scenario.join("error")) {
      Ok(want) => {
        assert_eq!(
          result.as_ref().err().map(String::as_str),
          Some(want.trim_end_matches('\n')),
          "{name}: error"
        );
        assert_eq!(
          tree(work.path()),
          tree(&scenario.join("input")),
          "{name}: files changed on error"
        );
      }
      Err(_) => {
        let message = result.unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Ok(want) = std::fs::read_to_string(scenario.join("message")) {
          assert_eq!(message, want.trim_end_matches('\n'), "{name}: message");
        }
        assert_eq!(
          tree(work.path()),
          tree(&scenario.join("expected")),
          "{name}: files"
        );
      }
    }
  }
}
