//! Operations on a memory state, and the derived index that keeps recall fast (token ids and
//! unpacked vectors per record, rebuilt when the state's revision moves).

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::{json, Value};

use super::*;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "op")]
pub enum Op {
  Read,
  Remember {
    text: String,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    confidence: Option<f64>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    turn_id: Option<String>,
    #[serde(default)]
    supersedes: Vec<String>,
    #[serde(default)]
    contradicts: Vec<String>,
    #[serde(default)]
    vector: Option<Vector>,
    ttl_ms: f64,
  },
  Search {
    query: String,
    #[serde(default)]
    vector: Option<Vector>,
    max_results: usize,
    min_score: f64,
    graph_depth: usize,
    #[serde(default)]
    exclude: Vec<String>,
    ttl_ms: f64,
  },
  SearchSessions {
    query: String,
    #[serde(default)]
    vector: Option<Vector>,
    max_results: usize,
    min_score: f64,
  },
  AddTurn {
    session_id: String,
    role: String,
    text: String,
    #[serde(default)]
    vector: Option<Vector>,
    max_session_turns: usize,
  },
  Reinforce {
    ids: Vec<String>,
  },
  Forget {
    id: String,
  },
  Link {
    from: String,
    to: String,
    relation: String,
    weight: f64,
  },
  Consolidate {
    ttl_ms: f64,
  },
  Prune {
    ttl_ms: f64,
    max_session_turns: usize,
  },
}

/// Token ids and vectors of a state's records and turns, for one revision.
#[derive(Default)]
pub struct Index {
  revision: Option<u64>,
  vocab: HashMap<String, u32>,
  records: Vec<(Vec<u32>, Option<Quantized>)>,
  turns: Vec<(Vec<u32>, Option<Quantized>)>,
}

impl Index {
  fn ids(&mut self, text: &str) -> Vec<u32> {
    let mut ids: Vec<u32> = tokens(text)
      .into_iter()
      .map(|t| {
        let n = self.vocab.len() as u32;
        *self.vocab.entry(t).or_insert(n)
      })
      .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
  }

  fn refresh(&mut self, state: &State) {
    if self.revision == Some(state.revision) && self.records.len() == state.memories.len() && self.turns.len() == state.turns.len() {
      return;
    }
    self.records = state.memories.iter().map(|r| (Vec::new(), r.vector.as_ref().and_then(unit))).collect();
    for (i, r) in state.memories.iter().enumerate() {
      self.records[i].0 = self.ids(&r.text);
    }
    self.turns = state.turns.iter().map(|t| (Vec::new(), t.vector.as_ref().and_then(unit))).collect();
    for (i, t) in state.turns.iter().enumerate() {
      self.turns[i].0 = self.ids(&t.text);
    }
    self.revision = Some(state.revision);
  }

  fn query(&self, text: &str) -> (QueryIds, usize) {
    let toks: HashSet<String> = tokens(text).into_iter().collect();
    let mut bits = vec![0u64; self.vocab.len().div_ceil(64)];
    for id in toks.iter().filter_map(|t| self.vocab.get(t).copied()) {
      bits[id as usize / 64] |= 1 << (id % 64);
    }
    (QueryIds { bits }, toks.len())
  }
}

/// A query's token ids as a bitmap over the vocabulary: the scan tests every stored token of
/// every memory, and a bit test costs less than hashing.
pub struct QueryIds {
  bits: Vec<u64>,
}

impl QueryIds {
  fn contains(&self, id: u32) -> bool {
    self.bits.get(id as usize / 64).is_some_and(|w| w >> (id % 64) & 1 == 1)
  }
}

/// A stored vector as its int8 components and their norm: a cosine is an integer dot product
/// over the norms (the quantization scale cancels), a quarter of the bytes of f32s.
pub struct Quantized {
  data: Vec<i8>,
  norm: f32,
}

fn unit(v: &Vector) -> Option<Quantized> {
  let data = super::vector::raw(v)?;
  let norm = (data.iter().map(|x| (*x as i32) * (*x as i32)).sum::<i32>() as f32).sqrt();
  Some(Quantized { data, norm })
}

fn dot(a: &Quantized, b: &Quantized) -> f64 {
  if a.data.len() != b.data.len() || a.norm == 0.0 || b.norm == 0.0 {
    return 0.0;
  }
  let sum: i32 = a.data.iter().zip(&b.data).map(|(x, y)| (*x as i16 * *y as i16) as i32).sum();
  sum as f64 / (a.norm as f64 * b.norm as f64)
}

fn lexical_ids(q: &QueryIds, q_len: usize, t: &[u32]) -> f64 {
  if q_len == 0 || t.is_empty() {
    return 0.0;
  }
  let common = t.iter().filter(|&&id| q.contains(id)).count();
  common as f64 / ((q_len * t.len()) as f64).sqrt()
}

fn same_space(a: &Option<Vector>, b: &Vector) -> bool {
  a.as_ref().is_some_and(|a| a.adapter == b.adapter && a.dimensions == b.dimensions)
}

fn expiry(r: &Record, ttl: f64) -> f64 {
  if r.expires_at == 0.0 {
    r.created_at + ttl
  } else {
    r.expires_at
  }
}

/// TTL, session-turn and edge pruning; true when anything changed.
fn prune(state: &mut State, now: f64, ttl: f64, max_turns: Option<usize>) -> bool {
  let mut changed = false;
  for r in state.memories.iter_mut().filter(|r| r.active) {
    if expiry(r, ttl) < now {
      r.active = false;
      r.updated_at = now;
      changed = true;
    }
  }
  if let Some(max) = max_turns {
    if state.turns.len() > max {
      let drop = state.turns.len() - max;
      state.turns.drain(..drop);
      changed = true;
    }
  }
  if state.edges.is_empty() {
    return changed;
  }
  let ids: HashSet<&str> = state.memories.iter().map(|r| r.id.as_str()).collect();
  let before = state.edges.len();
  state.edges.retain(|e| ids.contains(e.from.as_str()) && ids.contains(e.to.as_str()));
  changed || state.edges.len() != before
}

fn hit(r: &Record, score: f64, source: &str) -> Value {
  json!({"id": r.id, "text": r.text, "kind": r.kind, "tags": r.tags, "score": score, "confidence": r.confidence, "source": source})
}

fn add_edge(state: &mut State, from: &str, to: &str, relation: &str, weight: f64, now: f64) {
  if !state.edges.iter().any(|e| e.from == from && e.to == to && e.relation == relation) {
    state.edges.push(Edge {
      from: from.into(),
      to: to.into(),
      relation: relation.into(),
      weight,
      created_at: now,
    });
  }
}

/// Applies `op` to `state` at `now` (ms); returns the op's result and whether the state changed.
pub fn apply(state: &mut State, index: &mut Index, op: Op, now: f64) -> Result<(Value, bool), String> {
  let (result, changed) = match op {
    Op::Read => (Value::Null, false),
    Op::Prune { ttl_ms, max_session_turns } => (Value::Null, prune(state, now, ttl_ms, Some(max_session_turns))),
    Op::Remember { text, kind, tags, confidence, session_id, turn_id, supersedes, contradicts, vector, ttl_ms } => {
      prune(state, now, ttl_ms, None);
      let text = normalize_text(&text);
      index.refresh(state);
      let (q, q_len) = index.query(&text);
      let qv = vector.as_ref().and_then(unit);
      let similar = state.memories.iter().enumerate().find(|(i, r)| {
        if !r.active {
          return false;
        }
        if r.text == text {
          return true;
        }
        let sim = match (&qv, &index.records[*i].1) {
          (Some(a), Some(b)) if vector.as_ref().is_some_and(|v| same_space(&r.vector, v)) => dot(a, b),
          _ => lexical_ids(&q, q_len, &index.records[*i].0),
        };
        sim >= MEMORY_DEDUP_SIMILARITY
      });
      let source = session_id.map(|s| Source { session_id: s, turn_id, at: now });
      if let Some((i, _)) = similar {
        let r = &mut state.memories[i];
        r.updated_at = now;
        r.expires_at = now + ttl_ms;
        r.confidence = (r.confidence.max(confidence.unwrap_or(0.7)) + 0.03).min(1.0);
        r.strength += 1.0;
        for t in tags {
          if !r.tags.contains(&t) && r.tags.len() < MEMORY_MAX_TAGS {
            r.tags.push(t);
          }
        }
        if let Some(s) = source {
          r.sources.push(s);
          let n = r.sources.len();
          if n > MEMORY_MAX_SOURCES {
            r.sources.drain(..n - MEMORY_MAX_SOURCES);
          }
        }
        (json!({"record": r, "created": false}), true)
      } else {
        let id = uuid::Uuid::new_v4().to_string();
        let mut related: Vec<(f64, String)> = Vec::new();
        if let (Some(a), Some(v)) = (&qv, &vector) {
          for (i, r) in state.memories.iter().enumerate() {
            if r.active && same_space(&r.vector, v) {
              if let Some(b) = &index.records[i].1 {
                let c = dot(a, b);
                if c >= MEMORY_RELATE_SIMILARITY {
                  related.push((c, r.id.clone()));
                }
              }
            }
          }
        }
        related.sort_by(|a, b| b.0.total_cmp(&a.0));
        let record = Record {
          id: id.clone(),
          text,
          kind: kind.unwrap_or_else(|| "fact".into()),
          tags,
          created_at: now,
          updated_at: now,
          expires_at: now + ttl_ms,
          confidence: confidence.unwrap_or(0.7),
          strength: 1.0,
          active: true,
          sources: source.into_iter().collect(),
          vector,
        };
        state.memories.push(record.clone());
        let exists = |s: &State, x: &str| s.memories.iter().any(|r| r.id == x);
        for to in supersedes {
          if exists(state, &to) {
            add_edge(state, &id, &to, "supersedes", 1.0, now);
          }
        }
        for to in contradicts {
          if exists(state, &to) {
            add_edge(state, &id, &to, "contradicts", 1.0, now);
          }
        }
        for (_, to) in related.into_iter().take(MEMORY_MAX_AUTO_RELATIONS) {
          add_edge(state, &id, &to, "relates_to", 1.0, now);
        }
        (json!({"record": record, "created": true}), true)
      }
    }
    Op::Search { query, vector, max_results, min_score, graph_depth, exclude, ttl_ms } => {
      let changed = prune(state, now, ttl_ms, None);
      index.refresh(state);
      let (q, q_len) = index.query(&query);
      let qv = vector.as_ref().and_then(unit);
      let exclude: HashSet<&str> = exclude.iter().map(String::as_str).collect();
      let mut scores: HashMap<usize, (f64, &'static str)> = HashMap::new();
      for (i, r) in state.memories.iter().enumerate() {
        if !r.active || (!exclude.is_empty() && exclude.contains(r.id.as_str())) {
          continue;
        }
        let lex = lexical_ids(&q, q_len, &index.records[i].0);
        let cos = match (&qv, &index.records[i].1, &vector) {
          (Some(a), Some(b), Some(v)) if same_space(&r.vector, v) => dot(a, b),
          _ => 0.0,
        };
        let (score, source) = if cos > 0.0 { (0.85 * cos + 0.15 * lex, "vector") } else { (lex, "lexical") };
        if score >= min_score && score > 0.0 {
          scores.insert(i, (score, source));
        }
      }
      if graph_depth > 0 && !state.edges.is_empty() {
        let position: HashMap<&str, usize> = state.memories.iter().enumerate().map(|(i, r)| (r.id.as_str(), i)).collect();
        let mut seeds: Vec<(usize, f64)> = scores.iter().map(|(i, (s, _))| (*i, *s)).collect();
        let by_score = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if seeds.len() > 2 * max_results {
          seeds.select_nth_unstable_by(2 * max_results, by_score);
          seeds.truncate(2 * max_results);
        }
        seeds.sort_by(by_score);
        let mut frontier = seeds;
        for d in 0..graph_depth {
          let mut next = Vec::new();
          for (i, s) in &frontier {
            let id = state.memories[*i].id.as_str();
            for e in &state.edges {
              let other = if e.from == id { &e.to } else if e.to == id { &e.from } else { continue };
              let Some(&j) = position.get(other.as_str()) else { continue };
              let r = &state.memories[j];
              if !r.active || exclude.contains(r.id.as_str()) {
                continue;
              }
              let score = s * e.weight * 0.75f64.powi(d as i32 + 1);
              if score < min_score {
                continue;
              }
              if scores.get(&j).is_none_or(|(old, _)| *old < score) {
                scores.insert(j, (score, "graph"));
                next.push((j, score));
              }
            }
          }
          frontier = next;
        }
      }
      let mut hits: Vec<(f64, usize, &str)> = scores
        .into_iter()
        .map(|(i, (s, src))| (s * (0.5 + 0.5 * state.memories[i].confidence), i, src))
        .collect();
      let order = |a: &(f64, usize, &str), b: &(f64, usize, &str)| b.0.total_cmp(&a.0).then_with(|| state.memories[a.1].id.cmp(&state.memories[b.1].id));
      if hits.len() > max_results {
        hits.select_nth_unstable_by(max_results, order);
        hits.truncate(max_results);
      }
      hits.sort_by(order);
      (Value::Array(hits.iter().map(|(s, i, src)| hit(&state.memories[*i], *s, src)).collect()), changed)
    }
    Op::SearchSessions { query, vector, max_results, min_score } => {
      index.refresh(state);
      let (q, q_len) = index.query(&query);
      let qv = vector.as_ref().and_then(unit);
      let mut hits: Vec<(f64, usize, &str)> = Vec::new();
      for (i, t) in state.turns.iter().enumerate() {
        let lex = lexical_ids(&q, q_len, &index.turns[i].0);
        let cos = match (&qv, &index.turns[i].1, &vector) {
          (Some(a), Some(b), Some(v)) if same_space(&t.vector, v) => dot(a, b),
          _ => 0.0,
        };
        let (score, source) = if cos > 0.0 { (0.9 * cos + 0.1 * lex, "vector") } else { (lex, "lexical") };
        if score >= min_score && score > 0.0 {
          hits.push((score, i, source));
        }
      }
      hits.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| state.turns[b.1].sequence.cmp(&state.turns[a.1].sequence)));
      hits.truncate(max_results);
      let out = hits
        .iter()
        .map(|(s, i, src)| {
          let t = &state.turns[*i];
          json!({"id": t.id, "sessionId": t.session_id, "sequence": t.sequence, "role": t.role, "text": t.text, "score": s, "source": src})
        })
        .collect();
      (Value::Array(out), false)
    }
    Op::AddTurn { session_id, role, text, vector, max_session_turns } => {
      let sequence = state.turns.iter().filter(|t| t.session_id == session_id).map(|t| t.sequence + 1).max().unwrap_or(0);
      state.turns.push(Turn {
        id: uuid::Uuid::new_v4().to_string(),
        session_id,
        sequence,
        role,
        text,
        created_at: now,
        vector,
      });
      prune(state, now, f64::INFINITY, Some(max_session_turns));
      (json!({"sequence": sequence}), true)
    }
    Op::Reinforce { ids } => {
      let set: HashSet<&str> = ids.iter().map(String::as_str).collect();
      for r in state.memories.iter_mut().filter(|r| set.contains(r.id.as_str())) {
        r.confidence = (r.confidence + 0.01).min(1.0);
        r.updated_at = now;
      }
      for (i, a) in ids.iter().enumerate() {
        for b in &ids[i + 1..] {
          add_edge(state, a, b, "relates_to", 0.5, now);
        }
      }
      (Value::Null, !ids.is_empty())
    }
    Op::Forget { id } => match state.memories.iter_mut().find(|r| r.id == id && r.active) {
      Some(r) => {
        r.active = false;
        r.updated_at = now;
        (Value::Bool(true), true)
      }
      None => (Value::Bool(false), false),
    },
    Op::Link { from, to, relation, weight } => {
      if !matches!(relation.as_str(), "relates_to" | "supersedes" | "contradicts" | "derived_from") || !(weight > 0.0 && weight <= 1.0) {
        return Err("cave_memory_edge_invalid".into());
      }
      let exists = |x: &str| state.memories.iter().any(|r| r.id == x);
      if !exists(&from) || !exists(&to) {
        return Err("cave_memory_edge_target_missing".into());
      }
      add_edge(state, &from, &to, &relation, weight, now);
      (Value::Null, true)
    }
    Op::Consolidate { ttl_ms } => {
      prune(state, now, ttl_ms, None);
      let mut merged = 0;
      let n = state.memories.len();
      for i in 0..n {
        if !state.memories[i].active {
          continue;
        }
        for j in i + 1..n {
          if !state.memories[j].active {
            continue;
          }
          let (a, b) = (&state.memories[i], &state.memories[j]);
          let dup = a.text == b.text
            || match (a.vector.as_ref().and_then(unpack), b.vector.as_ref().and_then(unpack)) {
              (Some(x), Some(y)) if same_space(&a.vector, b.vector.as_ref().unwrap()) => cosine(&x, &y) >= 0.98,
              _ => false,
            };
          if dup {
            let (keep, drop) = if a.created_at <= b.created_at { (i, j) } else { (j, i) };
            let strength = state.memories[drop].strength;
            state.memories[keep].strength += strength;
            state.memories[drop].active = false;
            state.memories[drop].updated_at = now;
            let (k, d) = (state.memories[keep].id.clone(), state.memories[drop].id.clone());
            add_edge(state, &k, &d, "supersedes", 1.0, now);
            merged += 1;
          }
        }
      }
      (json!({"merged": merged}), merged > 0)
    }
  };
  if changed {
    state.revision += 1;
  }
  Ok((result, changed))
}
