//! Canonical JSON and the digests the journal binds calls to (`durableToolArgsSHA256`,
//! `durableToolIdempotencyKey`).

use serde_json::Value;

pub use crate::canonical::sha256_hex;
use crate::canonical::{canonical_json_bounded, Bounds};

use crate::limits::{DURABLE_MAX_ARGUMENT_BYTES, DURABLE_MAX_VALUE_DEPTH, DURABLE_MAX_VALUE_NODES};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalError(pub String);

/// Keys sorted recursively, no whitespace, `-0` as `0` ([`crate::canonical`]). Depth and node
/// limits apply; JSON values cannot hold cycles, functions or non-finite numbers (the JS layer
/// refuses those before here).
pub fn canonical_json(v: &Value) -> Result<String, CanonicalError> {
  let bounds = Bounds {
    max_depth: DURABLE_MAX_VALUE_DEPTH,
    max_nodes: DURABLE_MAX_VALUE_NODES,
  };
  canonical_json_bounded(v, bounds).map_err(|e| {
    CanonicalError(
      match e {
        crate::canonical::CanonicalError::Limit => "cave_durable_value_limit",
        crate::canonical::CanonicalError::NotJson => "cave_durable_value_not_json",
      }
      .into(),
    )
  })
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
