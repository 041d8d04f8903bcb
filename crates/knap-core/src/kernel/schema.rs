//! A small JSON Schema validator for tool inputs and output contracts: the subset TypeBox's
//! builders (`schema.*`) produce — type, properties, required, additionalProperties, items,
//! enum, const, anyOf/oneOf/allOf, bounds on numbers, strings and arrays, pattern.

use serde_json::Value;

/// Validates `value` against `schema`; returns every violation as `path: message`.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
  let mut errors = Vec::new();
  check(schema, value, "", &mut errors);
  errors
}

fn type_name(v: &Value) -> &'static str {
  match v {
    Value::Null => "null",
    Value::Bool(_) => "boolean",
    Value::Number(_) => "number",
    Value::String(_) => "string",
    Value::Array(_) => "array",
    Value::Object(_) => "object",
  }
}

fn matches_type(ty: &str, v: &Value) -> bool {
  match ty {
    "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
    "number" => v.is_number(),
    "string" => v.is_string(),
    "boolean" => v.is_boolean(),
    "object" => v.is_object(),
    "array" => v.is_array(),
    "null" => v.is_null(),
    _ => true,
  }
}

fn at(path: &str) -> &str {
  if path.is_empty() {
    "root"
  } else {
    path
  }
}

fn check(schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
  let Some(s) = schema.as_object() else { return };
  if let Some(ty) = s.get("type") {
    let ok = match ty {
      Value::String(t) => matches_type(t, v),
      Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| matches_type(t, v)),
      _ => true,
    };
    if !ok {
      let want = match ty {
        Value::String(t) => t.clone(),
        other => other.to_string(),
      };
      errors.push(format!("{}: must be {want} (got {})", at(path), type_name(v)));
      return;
    }
  }
  if let Some(c) = s.get("const") {
    if c != v {
      errors.push(format!("{}: must be {c}", at(path)));
    }
  }
  if let Some(Value::Array(options)) = s.get("enum") {
    if !options.contains(v) {
      errors.push(format!(
        "{}: must be one of {}",
        at(path),
        Value::Array(options.clone())
      ));
    }
  }
  for key in ["anyOf", "oneOf"] {
    if let Some(Value::Array(options)) = s.get(key) {
      let passing = options
        .iter()
        .filter(|o| validate_at(o, v, path).is_empty())
        .count();
      if passing == 0 || (key == "oneOf" && passing > 1) {
        errors.push(format!(
          "{}: must match {} schema in {key}",
          at(path),
          if key == "oneOf" { "exactly one" } else { "a" }
        ));
      }
    }
  }
  if let Some(Value::Array(all)) = s.get("allOf") {
    for o in all {
      check(o, v, path, errors);
    }
  }
  match v {
    Value::Object(obj) => {
      if let Some(Value::Array(required)) = s.get("required") {
        for r in required.iter().filter_map(Value::as_str) {
          if !obj.contains_key(r) {
            errors.push(format!("{}: must have required property '{r}'", at(path)));
          }
        }
      }
      let props = s.get("properties").and_then(Value::as_object);
      for (k, val) in obj {
        let child = format!("{path}/{k}");
        match props.and_then(|p| p.get(k)) {
          Some(ps) => check(ps, val, &child, errors),
          None => match s.get("additionalProperties") {
            Some(Value::Bool(false)) => {
              errors.push(format!("{}: must not have additional property '{k}'", at(path)))
            }
            Some(extra @ Value::Object(_)) => check(extra, val, &child, errors),
            _ => {}
          },
        }
      }
    }
    Value::Array(items) => {
      if let Some(item_schema) = s.get("items") {
        for (i, item) in items.iter().enumerate() {
          check(item_schema, item, &format!("{path}/{i}"), errors);
        }
      }
      bound(
        s,
        "minItems",
        items.len() as f64,
        |m, n| n >= m,
        "must have at least {} items",
        path,
        errors,
      );
      bound(
        s,
        "maxItems",
        items.len() as f64,
        |m, n| n <= m,
        "must have at most {} items",
        path,
        errors,
      );
    }
    Value::String(text) => {
      let len = text.chars().map(char::len_utf16).sum::<usize>() as f64;
      bound(
        s,
        "minLength",
        len,
        |m, n| n >= m,
        "must be at least {} characters",
        path,
        errors,
      );
      bound(
        s,
        "maxLength",
        len,
        |m, n| n <= m,
        "must be at most {} characters",
        path,
        errors,
      );
      if let Some(Value::String(p)) = s.get("pattern") {
        if let Ok(re) = regex::Regex::new(p) {
          if !re.is_match(text) {
            errors.push(format!("{}: must match pattern \"{p}\"", at(path)));
          }
        }
      }
    }
    Value::Number(n) => {
      let f = n.as_f64().unwrap_or(0.0);
      bound(s, "minimum", f, |m, n| n >= m, "must be >= {}", path, errors);
      bound(s, "maximum", f, |m, n| n <= m, "must be <= {}", path, errors);
      bound(
        s,
        "exclusiveMinimum",
        f,
        |m, n| n > m,
        "must be > {}",
        path,
        errors,
      );
      bound(
        s,
        "exclusiveMaximum",
        f,
        |m, n| n < m,
        "must be < {}",
        path,
        errors,
      );
    }
    _ => {}
  }
}

fn validate_at(schema: &Value, v: &Value, path: &str) -> Vec<String> {
  let mut e = Vec::new();
  check(schema, v, path, &mut e);
  e
}

fn bound(
  s: &serde_json::Map<String, Value>,
  key: &str,
  actual: f64,
  ok: impl Fn(f64, f64) -> bool,
  msg: &str,
  path: &str,
  errors: &mut Vec<String>,
) {
  if let Some(limit) = s.get(key).and_then(Value::as_f64) {
    if !ok(limit, actual) {
      errors.push(format!("{}: {}", at(path), msg.replace("{}", &format_num(limit))));
    }
  }
}

fn format_num(f: f64) -> String {
  if f.fract() == 0.0 && f.abs() < 1e15 {
    format!("{}", f as i64)
  } else {
    format!("{f}")
  }
}

/// `stableStringify`: JSON with object keys sorted, as the reference renders schemas.
pub fn stable_stringify(v: &Value) -> String {
  match v {
    Value::Object(obj) => {
      let mut keys: Vec<&String> = obj.keys().collect();
      keys.sort();
      let parts: Vec<String> = keys
        .iter()
        .map(|k| format!("{}:{}", Value::String((*k).clone()), stable_stringify(&obj[*k])))
        .collect();
      format!("{{{}}}", parts.join(","))
    }
    Value::Array(items) => format!(
      "[{}]",
      items.iter().map(stable_stringify).collect::<Vec<_>>().join(",")
    ),
    other => other.to_string(),
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  #[test]
  fn validates_typebox_shapes() {
    let s = json!({"type":"object","properties":{"q":{"type":"string","minLength":1},"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},"mode":{"anyOf":[{"const":"a"},{"const":"b"}]}},"required":["q"]});
    assert!(validate(&s, &json!({"q":"x","n":2,"tags":["a"],"mode":"b"})).is_empty());
    let e = validate(&s, &json!({"n":2.5,"tags":[1],"mode":"c"}));
    assert_eq!(e.len(), 4, "{e:?}");
    assert!(e.iter().any(|m| m.contains("required property 'q'")));
    assert!(!validate(&s, &json!("nope")).is_empty());
  }

  #[test]
  fn stable() {
    assert_eq!(
      stable_stringify(&json!({"b":1,"a":[{"d":1,"c":2}]})),
      r#"{"a":[{"c":2,"d":1}],"b":1}"#
    );
  }
}

/// Pi's argument conversion before validation (`validateToolArguments`): a primitive of the wrong
/// type becomes the declared one when the conversion is unambiguous — a numeric string becomes a
/// number (an integer only when integral), `"true"`/`"false"` and `1`/`0` become booleans, a number
/// or boolean becomes a string — recursively through properties, items and union variants. A
/// value that already has an allowed type is left alone; anything else is left for validation.
pub fn coerce(schema: &Value, value: &Value) -> Value {
  let Some(s) = schema.as_object() else {
    return value.clone();
  };
  let mut v = value.clone();
  if let Some(Value::Array(all)) = s.get("allOf") {
    for sub in all {
      v = coerce(sub, &v);
    }
  }
  for key in ["anyOf", "oneOf"] {
    if let Some(Value::Array(options)) = s.get(key) {
      if !options.iter().any(|o| validate(o, &v).is_empty()) {
        if let Some(c) = options
          .iter()
          .map(|o| coerce(o, &v))
          .find(|c| options.iter().any(|o| validate(o, c).is_empty()))
        {
          v = c;
        }
      }
    }
  }
  let types: Vec<&str> = match s.get("type") {
    Some(Value::String(t)) => vec![t.as_str()],
    Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
    _ => Vec::new(),
  };
  if !types.is_empty() && !types.iter().any(|t| matches_type(t, &v)) {
    if let Some(c) = types.iter().find_map(|t| convert_primitive(t, &v)) {
      v = c;
    }
  }
  match &mut v {
    Value::Object(map) => {
      let props = s.get("properties").and_then(Value::as_object);
      if let Some(props) = props {
        for (key, sub) in props {
          if let Some(field) = map.get_mut(key) {
            *field = coerce(sub, field);
          }
        }
      }
      if let Some(extra) = s.get("additionalProperties").filter(|a| a.is_object()) {
        for (key, field) in map.iter_mut() {
          if !props.is_some_and(|p| p.contains_key(key)) {
            *field = coerce(extra, field);
          }
        }
      }
    }
    Value::Array(items) => match s.get("items") {
      Some(Value::Array(positional)) => {
        for (item, sub) in items.iter_mut().zip(positional) {
          *item = coerce(sub, item);
        }
      }
      Some(sub @ Value::Object(_)) => {
        for item in items.iter_mut() {
          *item = coerce(sub, item);
        }
      }
      _ => {}
    },
    _ => {}
  }
  v
}

fn number_value(f: f64) -> Value {
  if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
    Value::from(f as i64)
  } else {
    serde_json::Number::from_f64(f)
      .map(Value::Number)
      .unwrap_or(Value::Null)
  }
}

fn convert_primitive(ty: &str, v: &Value) -> Option<Value> {
  match (ty, v) {
    ("number" | "integer", Value::String(s)) => {
      let t = s.trim();
      let f: f64 = if t.is_empty() {
        return None;
      } else {
        t.parse().ok()?
      };
      (f.is_finite() && (ty == "number" || f.fract() == 0.0)).then(|| number_value(f))
    }
    ("number" | "integer", Value::Bool(b)) => Some(Value::from(*b as i64)),
    ("boolean", Value::String(s)) if s == "true" || s == "false" => Some(Value::Bool(s == "true")),
    ("boolean", Value::Number(n)) if n.as_f64() == Some(1.0) || n.as_f64() == Some(0.0) => {
      Some(Value::Bool(n.as_f64() == Some(1.0)))
    }
    ("string", Value::Number(n)) => Some(Value::String(n.to_string())),
    ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
    _ => None,
  }
}
