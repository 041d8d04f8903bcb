//! The local memory engine's storage and ranking (`@caveman-ai/agent`'s memory store): the state
//! document (records, session turns, edges), remember with de-duplication, TTL pruning, lexical +
//! vector ranking with graph expansion, session-turn search, the sparse hash embedding, and the
//! file format. The JS engine orchestrates turns, embeddings and tools around it.

mod ops;
mod vector;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use ops::{apply, Index, Op};

/// A new record, turn or engine id.
pub fn new_id() -> String {
  uuid::Uuid::new_v4().to_string()
}
pub use vector::{cosine, pack, sparse_embed, unpack};

pub const MEMORY_MAX_TEXT_CHARS: usize = 8_192;
pub const MEMORY_MAX_TAGS: usize = 16;
pub const MEMORY_MAX_SOURCES: usize = 32;
pub const MEMORY_DEDUP_SIMILARITY: f64 = 0.965;
pub const MEMORY_RELATE_SIMILARITY: f64 = 0.72;
pub const MEMORY_MAX_AUTO_RELATIONS: usize = 4;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Vector {
  pub adapter: String,
  pub dimensions: u32,
  pub scale: f64,
  pub data: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Source {
  pub session_id: String,
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub turn_id: Option<String>,
  pub at: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Record {
  pub id: String,
  pub text: String,
  pub kind: String,
  pub tags: Vec<String>,
  pub created_at: f64,
  pub updated_at: f64,
  pub expires_at: f64,
  pub confidence: f64,
  pub strength: f64,
  pub active: bool,
  pub sources: Vec<Source>,
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub vector: Option<Vector>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
  pub id: String,
  pub session_id: String,
  pub sequence: u64,
  pub role: String,
  pub text: String,
  pub created_at: f64,
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub vector: Option<Vector>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Edge {
  pub from: String,
  pub to: String,
  pub relation: String,
  pub weight: f64,
  pub created_at: f64,
}

/// The stored document: `{"schemaVersion":1,"revision":n,"memories":[…],"turns":[…],"edges":[…]}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct State {
  pub schema_version: u32,
  pub revision: u64,
  pub memories: Vec<Record>,
  pub turns: Vec<Turn>,
  pub edges: Vec<Edge>,
}

impl Default for State {
  fn default() -> Self {
    Self {
      schema_version: 1,
      revision: 0,
      memories: Vec::new(),
      turns: Vec::new(),
      edges: Vec::new(),
    }
  }
}

/// Reads a stored document: the current format, or the legacy array of `{text, createdAt}`
/// (migrated in memory). Anything missing, corrupt or schema-invalid reads as the empty state.
pub fn read_state(text: &str) -> State {
  if let Ok(s) = serde_json::from_str::<State>(text) {
    if s.schema_version == 1 {
      return s;
    }
    return State::default();
  }
  #[derive(Deserialize)]
  #[serde(rename_all = "camelCase")]
  struct Legacy {
    text: String,
    created_at: f64,
  }
  match serde_json::from_str::<Vec<Legacy>>(text) {
    Ok(items) => State {
      memories: items
        .into_iter()
        .map(|l| {
          let digest = crate::canonical::sha256_hex(format!("{}\0{}", l.created_at as i64, l.text));
          Record {
            id: format!("legacy-{}", &digest[..24]),
            text: l.text,
            kind: "fact".into(),
            tags: Vec::new(),
            created_at: l.created_at,
            updated_at: l.created_at,
            expires_at: 0.0,
            confidence: 0.7,
            strength: 1.0,
            active: true,
            sources: Vec::new(),
            vector: None,
          }
        })
        .collect(),
      ..State::default()
    },
    Err(_) => State::default(),
  }
}

/// The compact JSON document written to disk (no trailing newline).
pub fn write_state(state: &State) -> String {
  serde_json::to_string(state).unwrap_or_else(|_| "{}".into())
}

/// Lower-cased matches of `[a-z0-9][a-z0-9_-]{1,}`.
pub fn tokens(text: &str) -> Vec<String> {
  let lower = text.to_lowercase();
  let mut out = Vec::new();
  let mut cur = String::new();
  let flush = |cur: &mut String, out: &mut Vec<String>| {
    if cur.len() >= 2 {
      out.push(std::mem::take(cur));
    } else {
      cur.clear();
    }
  };
  for c in lower.chars() {
    let word = c.is_ascii_lowercase() || c.is_ascii_digit();
    if word || (!cur.is_empty() && (c == '_' || c == '-')) {
      cur.push(c);
    } else {
      flush(&mut cur, &mut out);
    }
  }
  flush(&mut cur, &mut out);
  out
}

/// |q ∩ t| / √(|q|·|t|) over token sets.
pub fn lexical(q: &std::collections::HashSet<String>, t: &std::collections::HashSet<String>) -> f64 {
  if q.is_empty() || t.is_empty() {
    return 0.0;
  }
  let common = q.iter().filter(|w| t.contains(*w)).count();
  common as f64 / ((q.len() * t.len()) as f64).sqrt()
}

/// Whitespace runs collapsed, trimmed.
pub fn normalize_text(text: &str) -> String {
  text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text the store refuses to keep: private keys, tokens, AWS keys, `password: …` assignments.
pub fn is_sensitive(text: &str) -> bool {
  static PATTERNS: std::sync::OnceLock<Vec<regex::Regex>> = std::sync::OnceLock::new();
  let patterns = PATTERNS.get_or_init(|| {
    [
      r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
      r"\bsk_[A-Za-z0-9_-]{20,}",
      r"\bgh[pousr]_[A-Za-z0-9]{20,}",
      r"\bAKIA[A-Z0-9]{16}\b",
      r"(?i)\b(password|passwd|api key|access token|secret)\s*[:=]\s*\S{8,}",
    ]
    .iter()
    .filter_map(|p| regex::Regex::new(p).ok())
    .collect()
  });
  patterns.iter().any(|p| p.is_match(text))
}
