use serde_json::{json, Value};

use super::ops::Index;
use super::*;

const DAY: f64 = 86_400_000.0;

fn op(state: &mut State, index: &mut Index, v: Value, now: f64) -> Value {
  apply(state, index, serde_json::from_value(v).unwrap(), now).unwrap().0
}

fn remember(state: &mut State, index: &mut Index, text: &str, now: f64) -> Value {
  let vector = pack("caveman.sparse-hash.v1:256", &sparse_embed(text, 256));
  op(state, index, json!({"op":"remember","text":text,"vector":vector,"ttlMs":30.0*DAY}), now)
}

fn search(state: &mut State, index: &mut Index, q: &str, now: f64) -> Vec<Value> {
  let vector = pack("caveman.sparse-hash.v1:256", &sparse_embed(q, 256));
  op(state, index, json!({"op":"search","query":q,"vector":vector,"maxResults":6,"minScore":0.08,"graphDepth":1,"ttlMs":30.0*DAY}), now)
    .as_array()
    .unwrap()
    .clone()
}

#[test]
fn remember_dedups_and_search_ranks() {
  let (mut s, mut ix) = (State::default(), Index::default());
  let a = remember(&mut s, &mut ix, "The user prefers  tabs over spaces", 1000.0);
  assert_eq!(a["created"], true);
  assert_eq!(a["record"]["text"], "The user prefers tabs over spaces");
  let again = remember(&mut s, &mut ix, "The user prefers tabs over spaces", 2000.0);
  assert_eq!(again["created"], false);
  assert_eq!(again["record"]["strength"], 2.0);
  assert!((again["record"]["confidence"].as_f64().unwrap() - 0.73).abs() < 1e-9);
  remember(&mut s, &mut ix, "Deploys happen on Fridays from the release branch", 3000.0);
  let hits = search(&mut s, &mut ix, "does the user prefer tabs?", 4000.0);
  assert_eq!(hits[0]["text"], "The user prefers tabs over spaces");
  assert_eq!(s.revision, 3);
}

#[test]
fn ttl_marks_inactive_and_sessions_search() {
  let (mut s, mut ix) = (State::default(), Index::default());
  remember(&mut s, &mut ix, "build uses cargo nextest", 0.0);
  assert_eq!(search(&mut s, &mut ix, "cargo nextest", 31.0 * DAY).len(), 0);
  assert!(!s.memories[0].active);
  op(&mut s, &mut ix, json!({"op":"addTurn","sessionId":"s1","role":"user","text":"we talked about kubernetes pods","maxSessionTurns":2}), 1.0);
  op(&mut s, &mut ix, json!({"op":"addTurn","sessionId":"s1","role":"assistant","text":"pods restart on failure","maxSessionTurns":2}), 2.0);
  op(&mut s, &mut ix, json!({"op":"addTurn","sessionId":"s1","role":"user","text":"and kubernetes pods again","maxSessionTurns":2}), 3.0);
  assert_eq!(s.turns.len(), 2);
  let hits = op(&mut s, &mut ix, json!({"op":"searchSessions","query":"kubernetes pods","maxResults":6,"minScore":0.08}), 4.0);
  assert_eq!(hits[0]["sequence"], 2);
}

#[test]
fn file_format_and_legacy_migration() {
  let (mut s, mut ix) = (State::default(), Index::default());
  remember(&mut s, &mut ix, "a fact", 5.0);
  let text = write_state(&s);
  assert!(text.starts_with("{\"schemaVersion\":1,\"revision\":1,\"memories\":["));
  assert_eq!(read_state(&text), s);
  assert_eq!(read_state("not json"), State::default());
  let legacy = read_state(r#"[{"text":"old","createdAt":10}]"#);
  assert_eq!(legacy.memories[0].expires_at, 0.0);
  assert!(legacy.memories[0].id.starts_with("legacy-") && legacy.memories[0].id.len() == 31);
}

#[test]
fn links_graph_and_secrets() {
  let (mut s, mut ix) = (State::default(), Index::default());
  let a = remember(&mut s, &mut ix, "service alpha owns billing", 1.0)["record"]["id"].as_str().unwrap().to_string();
  let b = remember(&mut s, &mut ix, "invoices are stored in postgres", 2.0)["record"]["id"].as_str().unwrap().to_string();
  op(&mut s, &mut ix, json!({"op":"link","from":a,"to":b,"relation":"relates_to","weight":1.0}), 3.0);
  let hits = search(&mut s, &mut ix, "who owns billing alpha", 4.0);
  assert_eq!(hits.len(), 2);
  assert_eq!(hits[1]["source"], "graph");
  let bad: Op = serde_json::from_value(json!({"op":"link","from":a,"to":"x","relation":"relates_to","weight":1.0})).unwrap();
  assert_eq!(apply(&mut s, &mut ix, bad, 5.0).unwrap_err(), "cave_memory_edge_target_missing");
  assert!(is_sensitive("password: hunter2hunter2"));
  assert!(is_sensitive("token ghp_abcdefghijklmnopqrstuvwxyz"));
  assert!(!is_sensitive("the password policy needs review"));
}
