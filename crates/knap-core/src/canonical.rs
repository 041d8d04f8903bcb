//! The one canonical JSON and the one SHA-256 digest: object keys sorted at every level, no
//! whitespace, numbers written as JavaScript's `JSON.stringify` writes them (`1` for `1.0`, `0`
//! for `-0`, `1e+21`, `1e-7`). The journal's argument digests, the kernel's breaker signatures
//! and budget digest, schema rendering and the AI SDK cache keys all use it.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Limits on the value being written (depth, total nodes).
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
  pub max_depth: usize,
  pub max_nodes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanonicalError {
  /// Deeper or larger than the bounds.
  Limit,
  /// A non-finite number (not representable in JSON).
  NotJson,
}

/// Canonical JSON of `v`, unbounded (the value is already in memory).
pub fn stable_json(v: &Value) -> String {
  let mut out = String::new();
  let mut nodes = 0usize;
  // Unbounded and every serde number is finite, so this cannot fail.
  let _ = write(v, 0, &mut nodes, None, &mut out);
  out
}

/// Canonical JSON of `v` within `bounds`.
pub fn canonical_json_bounded(v: &Value, bounds: Bounds) -> Result<String, CanonicalError> {
  let mut out = String::new();
  let mut nodes = 0usize;
  write(v, 0, &mut nodes, Some(bounds), &mut out)?;
  Ok(out)
}

fn write(
  v: &Value,
  depth: usize,
  nodes: &mut usize,
  bounds: Option<Bounds>,
  out: &mut String,
) -> Result<(), CanonicalError> {
  *nodes += 1;
  if let Some(b) = bounds {
    if depth > b.max_depth || *nodes > b.max_nodes {
      return Err(CanonicalError::Limit);
    }
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
        write_string(k, out);
        out.push(':');
        write(&map[*k], depth + 1, nodes, bounds, out)?;
      }
      out.push('}');
    }
    Value::Array(items) => {
      out.push('[');
      for (i, item) in items.iter().enumerate() {
        if i > 0 {
          out.push(',');
        }
        write(item, depth + 1, nodes, bounds, out)?;
      }
      out.push(']');
    }
    Value::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
      Some(f) if !f.is_finite() => return Err(CanonicalError::NotJson),
      Some(f) => out.push_str(&js_number(f)),
      None => out.push_str(&n.to_string()),
    },
    Value::String(s) => write_string(s, out),
    other => out.push_str(&other.to_string()),
  }
  Ok(())
}

fn write_string(s: &str, out: &mut String) {
  // serde_json escapes as JSON.stringify does (", \, control characters; not `/` or non-ASCII).
  out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

/// `String(f)` / `JSON.stringify(f)` of a finite double: the shortest round-trip digits, in
/// positional notation for exponents -7 < e < 21, else `d.ddde±x`.
pub fn js_number(f: f64) -> String {
  if f == 0.0 {
    return "0".into();
  }
  // `{:e}` gives the shortest round-trip digits as `d.ddde<exp>`.
  let sci = format!("{:e}", f);
  let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
  let exp: i32 = exp.parse().unwrap_or(0);
  let negative = mantissa.starts_with('-');
  let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
  let sign = if negative { "-" } else { "" };
  let k = digits.len() as i32;
  let n = exp + 1; // position of the decimal point relative to the digits
  let body = if k <= n && n <= 21 {
    format!("{digits}{}", "0".repeat((n - k) as usize))
  } else if 0 < n && n <= 21 {
    format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
  } else if -6 < n && n <= 0 {
    format!("0.{}{digits}", "0".repeat((-n) as usize))
  } else {
    let e = n - 1;
    let e = if e >= 0 { format!("+{e}") } else { e.to_string() };
    if k == 1 {
      format!("{digits}e{e}")
    } else {
      format!("{}.{}e{e}", &digits[..1], &digits[1..])
    }
  };
  format!("{sign}{body}")
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
  use std::fmt::Write;
  let digest = Sha256::digest(bytes.as_ref());
  let mut out = String::with_capacity(64);
  for b in digest {
    let _ = write!(out, "{b:02x}");
  }
  out
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  #[test]
  fn sorted_compact_and_js_numbers() {
    assert_eq!(
      stable_json(&json!({"b":1,"a":[{"d":1,"c":2}]})),
      r#"{"a":[{"c":2,"d":1}],"b":1}"#
    );
    assert_eq!(
      stable_json(&json!({"x":1.0,"y":-0.0,"z":"é\n\"/"})),
      r#"{"x":1,"y":0,"z":"é\n\"/"}"#
    );
    for (f, s) in [
      (1.5, "1.5"),
      (100.0, "100"),
      (1e21, "1e+21"),
      (1.5e21, "1.5e+21"),
      (123456789012345680000.0, "123456789012345680000"),
      (1e-7, "1e-7"),
      (1.25e-7, "1.25e-7"),
      (0.000001, "0.000001"),
      (-0.5, "-0.5"),
      (0.1 + 0.2, "0.30000000000000004"),
      (5e-324, "5e-324"),
    ] {
      assert_eq!(js_number(f), s, "{f}");
    }
  }

  #[test]
  fn bounds_and_digest() {
    let deep = json!([[[[1]]]]);
    let b = Bounds {
      max_depth: 2,
      max_nodes: 100,
    };
    assert_eq!(canonical_json_bounded(&deep, b), Err(CanonicalError::Limit));
    assert_eq!(
      sha256_hex(""),
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
  }
}
