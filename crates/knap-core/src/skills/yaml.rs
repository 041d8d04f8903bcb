//! SKILL.md frontmatter: YAML with unique keys and no aliases, read into JSON values with the
//! YAML 1.2 core schema (plain `true`, `null`, `12`, `1.5` resolve; quoted scalars stay strings).

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

enum Frame {
  Seq(Vec<Value>),
  Map(Map<String, Value>, Option<String>),
}

struct Builder {
  stack: Vec<Frame>,
  root: Option<Value>,
  error: Option<String>,
  documents: usize,
}

fn resolve_plain(s: &str) -> Value {
  match s {
    "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
    "true" | "True" | "TRUE" => return Value::Bool(true),
    "false" | "False" | "FALSE" => return Value::Bool(false),
    _ => {}
  }
  let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
  if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
    if let Ok(n) = s.parse::<i64>() {
      return Value::Number(n.into());
    }
  }
  if let Some(hex) = s.strip_prefix("0x") {
    if let Ok(n) = i64::from_str_radix(hex, 16) {
      return Value::Number(n.into());
    }
  }
  if let Some(oct) = s.strip_prefix("0o") {
    if let Ok(n) = i64::from_str_radix(oct, 8) {
      return Value::Number(n.into());
    }
  }
  let looks_float = s.bytes().any(|b| b.is_ascii_digit())
    && s.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'));
  if looks_float {
    if let Some(n) = s.parse::<f64>().ok().and_then(Number::from_f64) {
      return Value::Number(n);
    }
  }
  Value::String(s.to_string())
}

fn key_text(v: &Value) -> String {
  match v {
    Value::String(s) => s.clone(),
    Value::Null => String::new(),
    other => other.to_string(),
  }
}

impl Builder {
  fn fail(&mut self, message: impl Into<String>) {
    if self.error.is_none() {
      self.error = Some(message.into());
    }
  }

  fn push_value(&mut self, v: Value) {
    match self.stack.last_mut() {
      None => self.root = Some(v),
      Some(Frame::Seq(items)) => items.push(v),
      Some(Frame::Map(map, key)) => match key.take() {
        None => {
          let k = key_text(&v);
          if map.contains_key(&k) {
            let message = format!("Map keys must be unique; \"{k}\" is repeated");
            self.fail(message);
          } else {
            *key = Some(k);
          }
        }
        Some(k) => {
          map.insert(k, v);
        }
      },
    }
  }
}

impl MarkedEventReceiver for Builder {
  fn on_event(&mut self, ev: Event, _mark: Marker) {
    if self.error.is_some() {
      return;
    }
    match ev {
      Event::DocumentStart => {
        self.documents += 1;
        if self.documents > 1 {
          self.fail("Source contains multiple documents");
        }
      }
      Event::Alias(_) => self.fail("Alias nodes are not allowed"),
      Event::Scalar(text, style, anchor, tag) => {
        if anchor != 0 {
          self.fail("Anchors are not allowed");
          return;
        }
        let v = if tag.is_some() || style != TScalarStyle::Plain {
          Value::String(text)
        } else {
          resolve_plain(&text)
        };
        self.push_value(v);
      }
      Event::SequenceStart(anchor, _) => {
        if anchor != 0 {
          self.fail("Anchors are not allowed");
        }
        self.stack.push(Frame::Seq(Vec::new()));
      }
      Event::MappingStart(anchor, _) => {
        if anchor != 0 {
          self.fail("Anchors are not allowed");
        }
        self.stack.push(Frame::Map(Map::new(), None));
      }
      Event::SequenceEnd | Event::MappingEnd => {
        let v = match self.stack.pop() {
          Some(Frame::Seq(items)) => Value::Array(items),
          Some(Frame::Map(map, _)) => Value::Object(map),
          None => return,
        };
        self.push_value(v);
      }
      _ => {}
    }
  }
}

/// Parses one YAML document; the error is the first parse error's message.
pub fn parse(text: &str) -> Result<Value, String> {
  let mut builder = Builder {
    stack: Vec::new(),
    root: None,
    error: None,
    documents: 0,
  };
  let mut parser = Parser::new_from_str(text);
  if let Err(e) = parser.load(&mut builder, true) {
    return Err(e.info().to_string());
  }
  if let Some(e) = builder.error {
    return Err(e);
  }
  Ok(builder.root.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  #[test]
  fn core_schema_duplicates_and_aliases() {
    assert_eq!(
      parse("name: a\nn: 12\nf: 1.5\nb: true\nq: \"12\"\nm:\n  k: v\nl: [x, y]\n").unwrap(),
      json!({"name":"a","n":12,"f":1.5,"b":true,"q":"12","m":{"k":"v"},"l":["x","y"]})
    );
    assert!(parse("a: 1\na: 2\n").unwrap_err().contains("unique"));
    assert!(parse("a: &x 1\nb: *x\n").unwrap_err().contains("not allowed"));
    assert!(parse("a: [1\n").is_err());
    assert_eq!(parse("").unwrap(), Value::Null);
    assert_eq!(parse("description: >\n  folded\n  text\n").unwrap(), json!({"description":"folded text\n"}));
  }
}
