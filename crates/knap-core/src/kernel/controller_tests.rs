//! `RunOptions.controller` in the kernel loop: steering at turn boundaries, follow-ups when the
//! loop would end, one per turn, holds, and the journal.

use super::*;
use crate::durable::store::DiskStore;
use crate::kernel::controller::QueueKind::{FollowUp, Steering};
use crate::kernel::{definition_sha256, DurableSetup};

/// The user texts provider call `n` was sent (after the first call: what arrived since).
fn user_texts(host: &FakeHost, n: usize) -> Vec<String> {
  host.calls.lock().unwrap()[n]
    .append
    .iter()
    .filter(|m| m["role"] == "user")
    .map(|m| match &m["content"] {
      Value::String(s) => s.clone(),
      parts => parts[0]["text"].as_str().unwrap_or_default().to_string(),
    })
    .collect()
}

fn arrive(host: &FakeHost, call: usize, items: &[(crate::kernel::controller::QueueKind, u32, &str)]) {
  host.arrivals.lock().unwrap().insert(
    call,
    items.iter().map(|(k, id, t)| (*k, *id, t.to_string())).collect(),
  );
}

#[tokio::test]
async fn steering_reaches_the_next_call_and_follow_ups_extend_the_run() {
  let host = Arc::new(FakeHost::new(vec![
    turn("", &[("lookup", json!({"q": "a"}))]),
    turn("first answer", &[]),
    turn("second answer", &[]),
    turn("third answer", &[]),
  ]));
  // While the first call runs: two steering messages and one follow-up.
  arrive(
    &host,
    0,
    &[
      (Steering, 1, "steer one"),
      (FollowUp, 2, "follow up"),
      (Steering, 3, "steer two"),
    ],
  );
  let a = agent(vec![host_tool("lookup", 0, "read", 1000)], json!({}));
  let r = go(host.clone(), a, options(json!({}))).await.unwrap();
  // One per turn: steer one after the tool turn; steer two at the next boundary (the loop would
  // have ended); then the follow-up, since nothing steers any more.
  assert_eq!(user_texts(&host, 0), vec!["go"]);
  assert_eq!(user_texts(&host, 1), vec!["steer one"]);
  assert_eq!(user_texts(&host, 2), vec!["steer two"]);
  assert_eq!(user_texts(&host, 3), vec!["follow up"]);
  assert_eq!(host.calls.lock().unwrap().len(), 4);
  assert_eq!(*host.delivered.lock().unwrap(), vec![1, 3, 2]);
  assert_eq!(r["text"], "third answer");
  assert_eq!(r["stopReason"], "complete");
  assert_eq!(r["receipt"]["calls"].as_array().unwrap().len(), 4);
  // stream(): each delivered message opens its turn with the message's own events.
  let types = host.event_types();
  let user_events = host
    .events
    .lock()
    .unwrap()
    .iter()
    .filter(|e| {
      matches!(e, RunEvent::Pi { event: crate::kernel::event::PiEvent::MessageEnd { message }, .. } if message.role() == "user")
    })
    .count();
  assert_eq!(user_events, 4, "the prompt and three delivered messages");
  assert_eq!(types.iter().filter(|t| *t == "pi:turn_start").count(), 4);
  assert_eq!(types.iter().filter(|t| *t == "pi:turn_end").count(), 4);
}

#[tokio::test]
async fn held_messages_stay_queued_and_nothing_is_taken_past_the_call_cap() {
  let host = Arc::new(FakeHost::new(vec![turn("done", &[])]));
  arrive(&host, 0, &[(FollowUp, 1, "later")]);
  host.queue.hold(true);
  let a = agent(vec![], json!({}));
  let r = go(host.clone(), a, options(json!({}))).await.unwrap();
  assert_eq!(r["text"], "done");
  assert!(host.delivered.lock().unwrap().is_empty());
  // The cap: one call allowed, so the follow-up is not taken (it stays for a later run).
  let host = Arc::new(FakeHost::new(vec![turn("done", &[])]));
  arrive(&host, 0, &[(FollowUp, 1, "later")]);
  let a = agent(vec![], json!({}));
  let r = go(host.clone(), a, options(json!({"maxModelCalls": 1})))
    .await
    .unwrap();
  assert_eq!(r["stopReason"], "complete");
  assert!(host.delivered.lock().unwrap().is_empty());
  assert_eq!(host.queue.take(FollowUp).map(|(id, _)| id), Some(1));
}

#[tokio::test]
async fn a_delivered_message_is_journaled_at_once_and_a_resume_does_not_repeat_it() {
  let dir = tempfile::tempdir().unwrap();
  let store = Arc::new(DiskStore::new(dir.path()));
  let a = agent(vec![], json!({}));
  let setup = || DurableSetup {
    store: Arc::new(store.clone()),
    definition_sha256: definition_sha256(&json!({"id": "reviewer"})),
    input: json!("go"),
    session_id: "s".into(),
    conversation: None,
  };
  let host = Arc::new(FakeHost::new(vec![turn("first", &[]), turn("second", &[])]));
  arrive(&host, 0, &[(FollowUp, 7, "and then?")]);
  let r = run_agent(
    host.clone(),
    a.clone(),
    Prepared::new(options(json!({}))).unwrap(),
    CancellationToken::new(),
    Some(setup()),
  )
  .await
  .unwrap()
  .to_value();
  assert_eq!(r["text"], "second");
  let lines = store.load_sync("run-1").unwrap();
  let events: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
  let turns: Vec<&Value> = events.iter().filter(|e| e["type"] == "turn").collect();
  // prompt + first answer, then the follow-up on its own, then the second answer.
  assert_eq!(turns.len(), 3);
  assert_eq!(turns[1]["messages"].as_array().unwrap().len(), 1);
  assert_eq!(turns[1]["messages"][0]["role"], "user");
  assert_eq!(turns[1]["messages"][0]["content"], "and then?");
  // A crash right after the follow-up's checkpoint: the resumed attempt sends it to the model
  // from the journal (the controller no longer has it), exactly once.
  let cut = events
    .iter()
    .enumerate()
    .filter(|(_, e)| e["type"] == "turn")
    .nth(1)
    .unwrap()
    .0;
  let path = store.run_dir("run-1").join("journal.jsonl");
  std::fs::write(
    &path,
    lines[..=cut].iter().map(|l| format!("{l}\n")).collect::<String>(),
  )
  .unwrap();
  let host = Arc::new(FakeHost::new(vec![turn("second again", &[])]));
  let r = run_agent(
    host.clone(),
    a,
    Prepared::new(options(json!({}))).unwrap(),
    CancellationToken::new(),
    Some(setup()),
  )
  .await
  .unwrap()
  .to_value();
  assert_eq!(r["text"], "second again");
  let calls = host.calls.lock().unwrap();
  assert_eq!(calls.len(), 1);
  let seen: Vec<&Value> = calls[0]
    .append
    .iter()
    .filter(|m| m["content"] == "and then?")
    .collect();
  assert_eq!(seen.len(), 1);
}
