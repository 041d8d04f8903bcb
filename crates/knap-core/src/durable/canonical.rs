//! Canonical JSON and the digests the journal binds calls to (`durableToolArgsSHA256`,
//! `durableToolIdempotencyKey`).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::limits::{DURABLE_MAX_ARGUMENT_BYTES, DURABLE_MAX_VALUE_DEPTH, DURABLE_MAX_VALUE_NODES};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalError(pub String);

/// Keys sorted recursively, no whitespace, `-0` as `0`. Depth and node limits apply; JSON values
/// cannot hold cycles, functions or non-finite numbers (the JS layer refuses those before here).
pub fn canonical_json(v: &Value) -> Result<String, CanonicalError> {
  let mut out = String::new();
  let mut nodes = 0usize;
  write(v, 0, &mut nodes, &mut out)?;
  Ok(out)
}

fn write(v: &Value, depth: usize, nodes: &mut usize, out: &mut String) -> Result<(), CanonicalError> {
  *nodes += 1;
  if depth > DURABLE_MAX_VALUE_DEPTH || *nodes > DURABLE_MAX_VALUE_NODES {
    return Err(CanonicalError("cave_durable_value_limit".into()));
  }
  match v {
    Value::Object(map) => {
      let mut keys: Vec<&String> = map.keys().collect();
      keys.sort();
      out.push('{');
      for (i, k) in keys.iter().enumerate() {
        if i > 0 {
          out.push(',');
        }
        out.push_str(&Value::String((*k).clone()).to_string());
        out.push(':');
        write(&map[*k], depth + 1, nodes, out)?;
      }
      out.push('}');
    }
    Value::Array(items) => {
      out.push('[');
      for (i, item) in items.iter().enumerate() {
        if i > 0 {
          out.push(',');
        }
        write(item, depth + 1, nodes, out)?;
      }
      out.push(']');
    }
    Value::Number(n) => {
      if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
        if !f.is_finite() {
          return Err(CanonicalError("cave_durable_value_not_json".into()));
        }
        out.push_str(&js_number(f));
      } else {
        out.push_str(&n.to_string());
      }
    }
    other => out.push_str(&other.to_string()),
  }
  Ok(())
}

/// `JSON.stringify` of a double: integers without a fraction, `-0` as `0`.
fn js_number(f: f64) -> String {
  if f == 0.0 {
    return "0".into();
  }
  if f.fract() == 0.0 && f.abs() < 1e21 {
    return format!("{}", f as i128);
  }
  let s = format!("{f}");
  s
}

pub fn sha256_hex(bytes: &[u8]) -> String {
  Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `durableToolArgsSHA256`: SHA-256 of the canonical arguments, at most 1 MiB.
pub fn args_sha256(args: &Value) -> Result<String, CanonicalError> {
  let c = canonical_json(args)?;
  if c.len() > DURABLE_MAX_ARGUMENT_BYTES {
    return Err(CanonicalError("cave_durable_value_limit".into()));
  }
  Ok(sha256_hex(c.as_bytes()))
}

/// `"cave-" + sha256(JSON.stringify([runId, path, toolCallId, name, argsSha256]))`.
pub fn idempotency_key(
  run_id: &str,
  path: &str,
  tool_call_id: &str,
  name: &str,
  args_sha256: &str,
) -> String {
  let list = Value::Array(vec![
    run_id.into(),
    path.into(),
    tool_call_id.into(),
    name.into(),
    args_sha256.into(),
  ]);
  format!("cave-{}", sha256_hex(list.to_string().as_bytes()))
}

/// A subagent's path segment: `<toolName>:<sha256(parentToolCallId)>`, joined with `/`.
pub fn child_path(parent: &str, tool_name: &str, parent_tool_call_id: &str) -> String {
  let segment = format!("{tool_name}:{}", sha256_hex(parent_tool_call_id.as_bytes()));
  if parent.is_empty() {
    segment
  } else {
    format!("{parent}/{segment}")
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  #[test]
  fn canonical_sorts_and_normalizes() {
    assert_eq!(
      canonical_json(&json!({"b": 1, "a": {"d": [1, -0.0, 2.5], "c": null}})).unwrap(),
      r#"{"a":{"c":null,"d":[1,0,2.5]},"b":1}"#
    );
    assert_eq!(canonical_json(&json!(1.0)).unwrap(), "1");
    assert_eq!(
      args_sha256(&json!({"b": 1, "a": 2})).unwrap(),
      args_sha256(&json!({"a": 2, "b": 1})).unwrap()
    );
  }

  #[test]
  fn limits() {
    let mut deep = json!(1);
    for _ in 0..70 {
      deep = json!([deep]);
    }
    assert_eq!(canonical_json(&deep).unwrap_err().0, "cave_durable_value_limit");
    let big = json!({"x": "y".repeat(DURABLE_MAX_ARGUMENT_BYTES)});
    assert_eq!(args_sha256(&big).unwrap_err().0, "cave_durable_value_limit");
  }

  #[test]
  fn keys() {
    let k = idempotency_key("r1", "", "c1", "act", &"0".repeat(64));
    assert!(k.starts_with("cave-") && k.len() == 69);
    let p = child_path("", "delegate", "call-1");
    assert!(p.starts_with("delegate:") && p.len() == "delegate:".len() + 64);
  }
}
