//! Times the native half of a durable resume: the disk store's `load` (read, torn-tail check,
//! split into lines) and `analyze` (strict validation of every event, identity checks,
//! reconstruction), for a journal on disk. Used by `bench/durable.mjs`:
//!
//!   cargo run --release -p knap-core --example durable_resume -- <store root> <runId> [runs]
//!
//! The identity the journal is checked against is taken from its own `run_started` (a bench, not
//! a resume). Prints one JSON line: medians in ms for the completed journal as it is and for the
//! same journal without its terminal event (a pending run, whose transcript is rebuilt).
use std::time::Instant;

use knap_core::durable::journal::{analyze, Expected, JournalState};
use knap_core::durable::store::DiskStore;

fn median(mut v: Vec<f64>) -> f64 {
  v.sort_by(|a, b| a.total_cmp(b));
  let m = v.len() / 2;
  if v.len() % 2 == 1 {
    v[m]
  } else {
    (v[m - 1] + v[m]) / 2.0
  }
}

fn main() {
  let args: Vec<String> = std::env::args().collect();
  let (root, run_id) = (&args[1], &args[2]);
  let runs: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(9);
  let store = DiskStore::new(root);
  let lines = store.load_sync(run_id).expect("load");
  let first: serde_json::Value = serde_json::from_str(&lines[0]).expect("run_started");
  let text = |k: &str| first[k].as_str().unwrap_or_default().to_string();
  let expected = Expected {
    run_id: run_id.clone(),
    agent_id: text("agentId"),
    definition_sha256: text("definitionSha256"),
    input: first["input"].clone(),
    denomination: text("denomination"),
    budget_max: first.get("budgetMax").and_then(serde_json::Value::as_f64),
    budget_sha256: text("budgetSha256"),
  };
  let mut pending_lines = lines.clone();
  while pending_lines
    .last()
    .is_some_and(|l| l.contains("\"type\":\"run_completed\"") || l.contains("\"type\":\"run_failed\""))
  {
    pending_lines.pop();
  }
  let (mut load, mut completed, mut pending, mut messages) = (Vec::new(), Vec::new(), Vec::new(), 0);
  for _ in 0..runs {
    let t = Instant::now();
    let loaded = store.load_sync(run_id).expect("load");
    load.push(t.elapsed().as_secs_f64() * 1e3);
    assert_eq!(loaded.len(), lines.len());
    let t = Instant::now();
    let state = analyze(&loaded, &expected).expect("analyze");
    completed.push(t.elapsed().as_secs_f64() * 1e3);
    assert!(matches!(
      state,
      JournalState::Completed { .. } | JournalState::Failed { .. } | JournalState::Pending(_)
    ));
    let t = Instant::now();
    let state = analyze(&pending_lines, &expected).expect("analyze pending");
    pending.push(t.elapsed().as_secs_f64() * 1e3);
    if let JournalState::Pending(s) = &state {
      messages = s.messages.len();
    }
  }
  println!(
    "{}",
    serde_json::json!({
      "events": lines.len(),
      "bytes": lines.iter().map(|l| l.len() + 1).sum::<usize>(),
      "loadMs": median(load),
      "analyzeCompletedMs": median(completed),
      "analyzePendingMs": median(pending),
      "pendingMessages": messages,
      "runs": runs,
    })
  );
}
