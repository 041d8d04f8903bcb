//! The one JSON Schema validator: the subset that TypeBox's builders (`schema.*`, the kernel's
//! tool arguments and output contracts) and the AI SDK tool set's input schemas use — type,
//! properties, required, additionalProperties, items, enum, const, anyOf/oneOf/allOf, bounds on
//! numbers, strings and arrays, pattern, default.
//!
//! One walk, two ways to use it:
//! * [`validate`] reports every violation, rendered as the kernel reports them
//!   (`/path: must be string (got number)`);
//! * [`conform`] is what bashkit's zod schemas did for its tools: the first violation is an error
//!   (rendered as zod-style text, `Invalid "command": expected string, received number`), missing
//!   fields with a `default` get it, and keys the schema does not name are dropped.
//!
//! Also pi's argument conversion before validation ([`coerce`]).

use serde_json::{Map, Value};

pub use crate::canonical::stable_json as stable_stringify;

/// One segment of the path to a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Seg {
  Key(String),
  Index(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
  /// Wrong type: the schema's `type` (a name or the list), and the value's type name.
  Type {
    want: Vec<String>,
    list: bool,
    got: &'static str,
  },
  Const(Value),
  Enum(Vec<Value>),
  /// No alternative of `anyOf` (or not exactly one of `oneOf`) matched; the alternatives' own
  /// first violations, in order.
  Alternatives {
    one_of: bool,
    tried: Vec<Violation>,
  },
  Required(String),
  Additional(String),
  Bound {
    key: &'static str,
    limit: f64,
  },
  Pattern(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
  pub path: Vec<Seg>,
  pub kind: Kind,
}

/// Validates `value` against `schema`; returns every violation as `path: message`.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
  let mut w = Walk {
    conform: false,
    errors: Vec::new(),
  };
  let mut path = Vec::new();
  w.check(schema, value, &mut path);
  w.errors.iter().map(render_report).collect()
}

/// Validates and conforms `value`: defaults filled, unknown keys dropped. `Err` is the first
/// violation in zod's wording.
pub fn conform(schema: &Value, value: &Value) -> Result<Value, String> {
  let mut w = Walk {
    conform: true,
    errors: Vec::new(),
  };
  let mut path = Vec::new();
  match w.check(schema, value, &mut path) {
    Some(v) if w.errors.is_empty() => Ok(v),
    _ => Err(
      w.errors
        .first()
        .map(render_conform)
        .unwrap_or_else(|| "Invalid input".into()),
    ),
  }
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

struct Walk {
  /// AI SDK mode: stop at the first violation, build the conformed value.
  conform: bool,
  errors: Vec<Violation>,
}

impl Walk {
  fn fail(&mut self, path: &[Seg], kind: Kind) {
    self.errors.push(Violation {
      path: path.to_vec(),
      kind,
    });
  }

  fn stopped(&self) -> bool {
    self.conform && !self.errors.is_empty()
  }

  /// Checks `v`; in conform mode returns the conformed value (`None` after a violation).
  fn check(&mut self, schema: &Value, v: &Value, path: &mut Vec<Seg>) -> Option<Value> {
    let Some(s) = schema.as_object() else {
      return Some(v.clone());
    };
    if self.conform {
      // zod's union: the first alternative that accepts the value decides it.
      if let Some(Value::Array(options)) = s.get("anyOf") {
        let mut tried = Vec::new();
        for o in options {
          let mut sub = Walk {
            conform: true,
            errors: Vec::new(),
          };
          match sub.check(o, v, path) {
            Some(ok) if sub.errors.is_empty() => return Some(ok),
            _ => tried.extend(sub.errors.into_iter().take(1)),
          }
        }
        self.fail(path, Kind::Alternatives { one_of: false, tried });
        return None;
      }
    }
    if let Some(ty) = s.get("type") {
      let want: Vec<String> = match ty {
        Value::String(t) => vec![t.clone()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
      };
      let ok = want.is_empty() || want.iter().any(|t| matches_type(t, v));
      if !ok {
        self.fail(
          path,
          Kind::Type {
            want,
            list: matches!(ty, Value::Array(_)),
            got: type_name(v),
          },
        );
        return None;
      }
    }
    if let Some(c) = s.get("const") {
      if c != v {
        self.fail(path, Kind::Const(c.clone()));
      }
    }
    if let Some(Value::Array(options)) = s.get("enum") {
      if !options.contains(v) {
        self.fail(path, Kind::Enum(options.clone()));
      }
    }
    if !self.conform {
      for (key, one_of) in [("anyOf", false), ("oneOf", true)] {
        if let Some(Value::Array(options)) = s.get(key) {
          let passing = options
            .iter()
            .filter(|o| validate_at(o, v, path).is_empty())
            .count();
          if passing == 0 || (one_of && passing > 1) {
            self.fail(
              path,
              Kind::Alternatives {
                one_of,
                tried: Vec::new(),
              },
            );
          }
        }
      }
    }
    if let Some(Value::Array(all)) = s.get("allOf") {
      for o in all {
        self.check(o, v, path);
      }
    }
    if self.stopped() {
      return None;
    }
    match v {
      Value::Object(obj) => self.object(s, obj, path),
      Value::Array(items) => self.array(s, items, path),
      Value::String(text) => {
        let len = text.chars().map(char::len_utf16).sum::<usize>() as f64;
        self.bound(s, "minLength", len, path);
        self.bound(s, "maxLength", len, path);
        if let Some(Value::String(p)) = s.get("pattern") {
          if let Ok(re) = regex::Regex::new(p) {
            if !re.is_match(text) {
              self.fail(path, Kind::Pattern(p.clone()));
            }
          }
        }
        (!self.stopped()).then(|| v.clone())
      }
      Value::Number(n) => {
        let f = n.as_f64().unwrap_or(0.0);
        for key in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
          self.bound(s, key, f, path);
        }
        (!self.stopped()).then(|| v.clone())
      }
      _ => Some(v.clone()),
    }
  }

  fn object(
    &mut self,
    s: &Map<String, Value>,
    obj: &Map<String, Value>,
    path: &mut Vec<Seg>,
  ) -> Option<Value> {
    let props = s.get("properties").and_then(Value::as_object);
    if self.conform && props.is_none() {
      // zod's record-like objects: nothing to conform.
      return Some(Value::Object(obj.clone()));
    }
    if let Some(Value::Array(required)) = s.get("required") {
      for r in required.iter().filter_map(Value::as_str) {
        if !obj.contains_key(r) {
          self.fail(path, Kind::Required(r.to_string()));
          if self.conform {
            return None;
          }
        }
      }
    }
    if let (true, Some(props)) = (self.conform, props) {
      // Keys in the schema's order; defaults for missing ones; keys it does not name dropped.
      let mut out = Map::new();
      for (k, sub) in props {
        match obj.get(k) {
          None => {
            if let Some(d) = sub.get("default") {
              out.insert(k.clone(), d.clone());
            }
          }
          Some(val) => {
            path.push(Seg::Key(k.clone()));
            let conformed = self.check(sub, val, path);
            path.pop();
            out.insert(k.clone(), conformed?);
          }
        }
      }
      return Some(Value::Object(out));
    }
    for (k, val) in obj {
      path.push(Seg::Key(k.clone()));
      match props.and_then(|p| p.get(k)) {
        Some(ps) => {
          self.check(ps, val, path);
        }
        None => match s.get("additionalProperties") {
          Some(Value::Bool(false)) => {
            path.pop();
            self.fail(path, Kind::Additional(k.clone()));
            path.push(Seg::Key(k.clone()));
          }
          Some(extra @ Value::Object(_)) => {
            self.check(extra, val, path);
          }
          _ => {}
        },
      }
      path.pop();
    }
    None
  }

  fn array(&mut self, s: &Map<String, Value>, items: &[Value], path: &mut Vec<Seg>) -> Option<Value> {
    let n = items.len() as f64;
    if self.conform {
      // zod checks the length before the items.
      self.bound(s, "minItems", n, path);
      self.bound(s, "maxItems", n, path);
      if self.stopped() {
        return None;
      }
    }
    let mut out = Vec::new();
    if let Some(item_schema) = s.get("items") {
      for (i, item) in items.iter().enumerate() {
        path.push(Seg::Index(i));
        let conformed = self.check(item_schema, item, path);
        path.pop();
        if self.conform {
          out.push(conformed?);
        }
      }
    } else if self.conform {
      out = items.to_vec();
    }
    if self.conform {
      return Some(Value::Array(out));
    }
    self.bound(s, "minItems", n, path);
    self.bound(s, "maxItems", n, path);
    None
  }

  fn bound(&mut self, s: &Map<String, Value>, key: &'static str, actual: f64, path: &[Seg]) {
    if self.stopped() {
      return;
    }
    if let Some(limit) = s.get(key).and_then(Value::as_f64) {
      let ok = match key {
        "minItems" | "minLength" | "minimum" => actual >= limit,
        "maxItems" | "maxLength" | "maximum" => actual <= limit,
        "exclusiveMinimum" => actual > limit,
        _ => actual < limit,
      };
      if !ok {
        self.fail(path, Kind::Bound { key, limit });
      }
    }
  }
}

fn validate_at(schema: &Value, v: &Value, path: &[Seg]) -> Vec<Violation> {
  let mut w = Walk {
    conform: false,
    errors: Vec::new(),
  };
  let mut p = path.to_vec();
  w.check(schema, v, &mut p);
  w.errors
}

fn format_num(f: f64) -> String {
  if f.fract() == 0.0 && f.abs() < 1e15 {
    format!("{}", f as i64)
  } else {
    format!("{f}")
  }
}

// ----------------------------------------------------------------------------- the kernel's text

fn pointer(path: &[Seg]) -> String {
  if path.is_empty() {
    return "root".into();
  }
  let mut out = String::new();
  for seg in path {
    out.push('/');
    match seg {
      Seg::Key(k) => out.push_str(k),
      Seg::Index(i) => out.push_str(&i.to_string()),
    }
  }
  out
}

/// `path: message`, as the kernel reports argument and output-contract errors.
pub fn render_report(v: &Violation) -> String {
  let at = pointer(&v.path);
  match &v.kind {
    Kind::Type { want, list, got } => {
      let want = if *list {
        Value::Array(want.iter().cloned().map(Value::String).collect()).to_string()
      } else {
        want.first().cloned().unwrap_or_default()
      };
      format!("{at}: must be {want} (got {got})")
    }
    Kind::Const(c) => format!("{at}: must be {c}"),
    Kind::Enum(options) => format!("{at}: must be one of {}", Value::Array(options.clone())),
    Kind::Alternatives { one_of, .. } => {
      let key = if *one_of { "oneOf" } else { "anyOf" };
      let which = if *one_of { "exactly one" } else { "a" };
      format!("{at}: must match {which} schema in {key}")
    }
    Kind::Required(r) => format!("{at}: must have required property '{r}'"),
    Kind::Additional(k) => format!("{at}: must not have additional property '{k}'"),
    Kind::Bound { key, limit } => {
      let l = format_num(*limit);
      let text = match *key {
        "minItems" => format!("must have at least {l} items"),
        "maxItems" => format!("must have at most {l} items"),
        "minLength" => format!("must be at least {l} characters"),
        "maxLength" => format!("must be at most {l} characters"),
        "minimum" => format!("must be >= {l}"),
        "maximum" => format!("must be <= {l}"),
        "exclusiveMinimum" => format!("must be > {l}"),
        _ => format!("must be < {l}"),
      };
      format!("{at}: {text}")
    }
    Kind::Pattern(p) => format!("{at}: must match pattern \"{p}\""),
  }
}

// ------------------------------------------------------------------------- the AI SDK's (zod's)

fn dotted(path: &[Seg]) -> String {
  let mut out = String::new();
  for seg in path {
    match seg {
      Seg::Key(k) => {
        if !out.is_empty() {
          out.push('.');
        }
        out.push_str(k);
      }
      Seg::Index(i) => out.push_str(&format!("[{i}]")),
    }
  }
  out
}

/// zod-style text for the AI SDK tools: `Invalid "a.b": expected string, received number`.
pub fn render_conform(v: &Violation) -> String {
  let p = dotted(&v.path);
  let at = if p.is_empty() {
    "input".to_string()
  } else {
    format!("\"{p}\"")
  };
  match &v.kind {
    Kind::Type { want, got, .. } => format!("Invalid {at}: expected {}, received {got}", want.join(" or ")),
    Kind::Const(c) => format!("Invalid {at}: expected {c}"),
    Kind::Enum(options) => {
      let list: Vec<String> = options.iter().map(Value::to_string).collect();
      format!("Invalid {at}: expected one of {}", list.join(", "))
    }
    Kind::Alternatives { tried, .. } => {
      let list: Vec<String> = tried.iter().map(render_conform).collect();
      format!("Invalid {at}: {}", list.join("; or "))
    }
    Kind::Required(r) => {
      let full = if p.is_empty() {
        r.clone()
      } else {
        format!("{p}.{r}")
      };
      format!("Invalid input: \"{full}\" is required")
    }
    Kind::Additional(k) => format!("Invalid {at}: unexpected key \"{k}\""),
    Kind::Bound { key, limit } => {
      let l = format_num(*limit);
      let text = match *key {
        "minItems" => format!("expected at least {l} items"),
        "maxItems" => format!("expected at most {l} items"),
        "minLength" => format!("expected at least {l} characters"),
        "maxLength" => format!("expected at most {l} characters"),
        "minimum" => format!("expected >= {l}"),
        "maximum" => format!("expected <= {l}"),
        "exclusiveMinimum" => format!("expected > {l}"),
        _ => format!("expected < {l}"),
      };
      format!("Invalid {at}: {text}")
    }
    Kind::Pattern(pat) => format!("Invalid {at}: expected to match pattern \"{pat}\""),
  }
}

// ---------------------------------------------------------------------------- pi's conversion

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
  fn report_texts() {
    let s = json!({"type":"object","properties":{"a":{"type":"string"},"l":{"type":"array","maxItems":1}},"additionalProperties":false});
    assert_eq!(
      validate(&s, &json!({"a":1,"l":[1,2],"x":0})),
      vec![
        "/a: must be string (got number)",
        "/l: must have at most 1 items",
        "root: must not have additional property 'x'"
      ]
    );
    assert_eq!(
      validate(&json!({"type":["string","null"]}), &json!(1)),
      vec![r#"root: must be ["string","null"] (got number)"#]
    );
  }

  fn bash() -> Value {
    json!({"type":"object","properties":{
      "command":{"type":"string"},
      "timeout":{"default":null,"type":["number","null"]},
      "mode":{"default":null,"anyOf":[{"type":"string","enum":["a","b"]},{"type":"null"}]},
      "qs":{"type":"array","minItems":1,"items":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}
    },"required":["command"],"additionalProperties":false})
  }

  #[test]
  fn conform_fills_defaults_drops_unknown_keys_and_keeps_schema_order() {
    let out = conform(&bash(), &json!({"extra":1,"command":"ls"})).unwrap();
    assert_eq!(out.to_string(), r#"{"command":"ls","timeout":null,"mode":null}"#);
    let out = conform(
      &bash(),
      &json!({"command":"ls","mode":"b","qs":[{"id":"x","z":1}]}),
    )
    .unwrap();
    assert_eq!(out["qs"], json!([{"id":"x"}]));
    assert_eq!(out["mode"], json!("b"));
  }

  #[test]
  fn conform_errors_in_zod_wording() {
    assert_eq!(
      conform(&bash(), &json!({"command":5})).unwrap_err(),
      r#"Invalid "command": expected string, received number"#
    );
    assert_eq!(
      conform(&bash(), &json!({})).unwrap_err(),
      r#"Invalid input: "command" is required"#
    );
    assert_eq!(
      conform(&bash(), &json!("x")).unwrap_err(),
      "Invalid input: expected object, received string"
    );
    assert_eq!(
      conform(&bash(), &json!({"command":"x","timeout":"1"})).unwrap_err(),
      r#"Invalid "timeout": expected number or null, received string"#
    );
    assert_eq!(
      conform(&bash(), &json!({"command":"x","mode":"c"})).unwrap_err(),
      r#"Invalid "mode": Invalid "mode": expected one of "a", "b"; or Invalid "mode": expected null, received string"#
    );
    assert_eq!(
      conform(&bash(), &json!({"command":"x","qs":[]})).unwrap_err(),
      r#"Invalid "qs": expected at least 1 items"#
    );
    assert_eq!(
      conform(&bash(), &json!({"command":"x","qs":[{}]})).unwrap_err(),
      r#"Invalid input: "qs[0].id" is required"#
    );
  }
}
