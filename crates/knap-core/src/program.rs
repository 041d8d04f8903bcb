//! Programmatic tool cells (`caveman_code`): the host-side rules of a cell that are not the
//! JavaScript sandbox itself — the cell tool's description, the checks every nested call passes
//! before it is dispatched to the kernel (call budget, arguments, repeats), and the output rule
//! with its cap. The cell runs in a Worker (`lib/program/`); the kernel admits each nested call
//! again as a composite call.

use std::collections::HashMap;

use serde_json::Value;

use crate::error::ToolError;
use crate::canonical::stable_json;
use crate::schema;
use crate::truncate::head_tail_bytes;
use crate::limits::{
  MAX_SAFE_INTEGER, PROGRAM_MAX_REPEATED_CALLS, PROGRAM_MAX_TOOL_CALLS_PER_CELL, PROGRAM_OUTPUT_EDGE_BYTES,
  PROGRAM_OUTPUT_MAX_BYTES, PROGRAM_SOURCE_MAX_BYTES, PROGRAM_TYPE_MAX_DEPTH,
};
use crate::text;

/// One tool a cell may call (a nested tool of the cell tool).
#[derive(Debug, Clone)]
pub struct ProgramTool {
  pub name: String,
  pub description: String,
  /// JSON Schema of the input.
  pub input: Value,
  pub allow_repeat: bool,
}

/// The tools of one programmatic runtime.
#[derive(Debug, Clone)]
pub struct ProgramTools {
  tools: Vec<ProgramTool>,
}

/// What one cell has called so far.
#[derive(Debug, Default)]
pub struct CellLedger {
  calls: u32,
  repeats: HashMap<String, u32>,
}

impl ProgramTools {
  pub fn new(tools: Vec<ProgramTool>) -> Self {
    Self { tools }
  }

  /// The cell tool's description: the head line, then per tool its description as `// ` lines
  /// and a TypeScript declaration of the function.
  pub fn description(&self) -> String {
    let mut out = String::from(text::PROGRAM_DESCRIPTION_HEAD);
    for tool in &self.tools {
      for line in tool.description.split('\n') {
        out.push_str("\n// ");
        out.push_str(line);
      }
      out.push_str(&format!(
        "\ndeclare function {}(args: {}): Promise<string>;",
        tool.name,
        render_type(&tool.input, 0)
      ));
    }
    out
  }

  /// The checks of one nested call, in the reference's order: the per-cell call budget, a known
  /// tool, arguments that are a plain object passing the tool's schema, and the repeat limit.
  /// Returns the parsed arguments to dispatch.
  pub fn admit(&self, ledger: &mut CellLedger, name: &str, args_json: &str) -> Result<Value, ToolError> {
    ledger.calls += 1;
    if ledger.calls > PROGRAM_MAX_TOOL_CALLS_PER_CELL {
      return Err(ToolError::coded("cave_program_tool_call_budget_exceeded"));
    }
    let Some(tool) = self.tools.iter().find(|t| t.name == name) else {
      return Err(ToolError::coded(format!("cave_program_unknown_tool:{name}")));
    };
    let invalid = || ToolError::coded(format!("cave_program_tool_arguments_invalid:{name}"));
    let args: Value = serde_json::from_str(args_json).map_err(|_| invalid())?;
    if !light_check(&tool.input, &args) {
      return Err(invalid());
    }
    if !tool.allow_repeat {
      let key = format!("{name}\u{0}{}", stable_json(&args));
      let seen = ledger.repeats.entry(key).or_insert(0);
      *seen += 1;
      if *seen > PROGRAM_MAX_REPEATED_CALLS {
        return Err(ToolError::coded("cave_program_repeated_tool_call"));
      }
    }
    Ok(args)
  }
}

/// The source check of `execute`: blank or missing code, then the size limit.
pub fn check_source(code: Option<&str>) -> Result<(), ToolError> {
  match code {
    Some(c) if !c.trim().is_empty() => {
      if c.len() > PROGRAM_SOURCE_MAX_BYTES {
        Err(ToolError::coded("cave_program_source_limit"))
      } else {
        Ok(())
      }
    }
    _ => Err(ToolError::coded("cave_program_source_required")),
  }
}

/// The light check of a nested call's arguments (a cell's call, a speculative launch): a plain
/// object that passes the tool's input schema.
pub fn light_check(input: &Value, args: &Value) -> bool {
  args.is_object() && plain(args) && schema::validate(input, args).is_empty()
}

/// A literal call `name(<JSON object>)` found in a cell's source while it streams.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeculationSite {
  /// Byte offset of the name in the source (stable while the source grows at its end).
  pub offset: usize,
  pub name: String,
  pub args: Value,
}

/// The literal calls of `launchable` tools in `code`, in source order, up to the first name in
/// `stops` (a non-read tool of the cell) or `tools[` (a computed call the scan cannot follow).
/// Strings, template literals and comments are skipped; a site is the name (not preceded by
/// an identifier character), `(`, one JSON object `JSON.parse` accepts, `)`, with any
/// whitespace between. Its arguments are not checked here. Regular-expression literals are
/// not recognised: a quote inside one shifts the string state, which can hide later sites (a
/// launch is only ever a fully admitted read, so a stray one costs a read, not an effect).
pub fn speculation_sites(code: &str, launchable: &[&str], stops: &[&str]) -> Vec<SpeculationSite> {
  let b = code.as_bytes();
  let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80;
  let skip_ws = |mut i: usize| {
    while i < b.len() && b[i].is_ascii_whitespace() {
      i += 1;
    }
    i
  };
  let mut sites = Vec::new();
  let mut i = 0;
  while i < b.len() {
    let c = b[i];
    match c {
      b'/' if b.get(i + 1) == Some(&b'/') => {
        i = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| i + p + 1);
      }
      b'/' if b.get(i + 1) == Some(&b'*') => {
        i = code[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2);
      }
      b'"' | b'\'' | b'`' => {
        // To the closing quote; a backslash escapes the next byte.
        let mut j = i + 1;
        while j < b.len() && b[j] != c {
          j += if b[j] == b'\\' { 2 } else { 1 };
        }
        i = j + 1;
      }
      _ if ident(c) && !c.is_ascii_digit() && (i == 0 || !ident(b[i - 1])) => {
        let start = i;
        while i < b.len() && ident(b[i]) {
          i += 1;
        }
        let name = &code[start..i];
        let after = skip_ws(i);
        if name == "tools" && b.get(after) == Some(&b'[') {
          break;
        }
        if stops.contains(&name) {
          break;
        }
        if !launchable.contains(&name) || b.get(after) != Some(&b'(') {
          continue;
        }
        let open = skip_ws(after + 1);
        if b.get(open) != Some(&b'{') {
          continue;
        }
        let mut values = serde_json::Deserializer::from_str(&code[open..]).into_iter::<Value>();
        let Some(Ok(args)) = values.next() else {
          continue;
        };
        let close = skip_ws(open + values.byte_offset());
        if b.get(close) != Some(&b')') {
          continue;
        }
        sites.push(SpeculationSite {
          offset: start,
          name: name.to_string(),
          args,
        });
        i = close + 1;
      }
      _ => i += 1,
    }
  }
  sites
}

/// No prototype-polluting keys anywhere, and integers within JavaScript's safe range.
fn plain(v: &Value) -> bool {
  match v {
    Value::Object(map) => map
      .iter()
      .all(|(k, val)| !matches!(k.as_str(), "__proto__" | "prototype" | "constructor") && plain(val)),
    Value::Array(items) => items.iter().all(plain),
    Value::Number(n) => n.as_f64().is_some_and(|f| f.fract() != 0.0 || f.abs() <= MAX_SAFE_INTEGER),
    _ => true,
  }
}

/// A cell's result text: the printed lines joined by `\n`; else the formatted return value; else
/// `ok`. Capped at 24,576 bytes (head and tail around a marker; a cut may split a character).
pub fn cell_output(printed: &[String], returned: Option<&str>) -> String {
  let mut text = printed.join("\n");
  if printed.is_empty() {
    if let Some(value) = returned {
      text = value.to_string();
    }
  }
  if text.is_empty() {
    return text::PROGRAM_EMPTY_OUTPUT.to_string();
  }
  cap_cell_output(&text)
}

/// The head/tail cut of an over-long cell output.
pub fn cap_cell_output(text: &str) -> String {
  if text.len() <= PROGRAM_OUTPUT_MAX_BYTES {
    return text.to_string();
  }
  head_tail_bytes(text, PROGRAM_OUTPUT_EDGE_BYTES, &text::program_truncated_marker(text.len()))
}

fn is_identifier(name: &str) -> bool {
  let mut chars = name.chars();
  matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
    && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// A JSON Schema as a TypeScript type, as the reference renders it.
fn render_type(schema: &Value, depth: usize) -> String {
  const UNKNOWN: &str = "unknown";
  if depth > PROGRAM_TYPE_MAX_DEPTH {
    return UNKNOWN.into();
  }
  let Some(s) = schema.as_object() else {
    return UNKNOWN.into();
  };
  if let Some(Value::Array(options)) = s.get("anyOf") {
    return options
      .iter()
      .map(|o| render_type(o, depth + 1))
      .collect::<Vec<_>>()
      .join(" | ");
  }
  if let Some(Value::Array(values)) = s.get("enum") {
    return values.iter().map(Value::to_string).collect::<Vec<_>>().join(" | ");
  }
  if let Some(value) = s.get("const") {
    return value.to_string();
  }
  match s.get("type").and_then(Value::as_str) {
    Some(t @ ("string" | "boolean" | "null")) => t.into(),
    Some("integer" | "number") => "number".into(),
    Some("array") => match s.get("items") {
      Some(items) => format!("Array<{}>", render_type(items, depth + 1)),
      None => format!("Array<{UNKNOWN}>"),
    },
    Some("object") => {
      let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
      let Some(props) = s.get("properties").and_then(Value::as_object) else {
        return "{}".into();
      };
      if props.is_empty() {
        return "{}".into();
      }
      let fields: Vec<String> = props
        .iter()
        .map(|(k, v)| {
          let key = if is_identifier(k) {
            k.clone()
          } else {
            Value::String(k.clone()).to_string()
          };
          let optional = if required.contains(&k.as_str()) { "" } else { "?" };
          format!("{key}{optional}: {}", render_type(v, depth + 1))
        })
        .collect();
      format!("{{ {} }}", fields.join("; "))
    }
    _ => UNKNOWN.into(),
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  fn tools() -> ProgramTools {
    ProgramTools::new(vec![
      ProgramTool {
        name: "read_file".into(),
        description: "Read a file.\nSecond line.".into(),
        input: json!({"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["path"]}),
        allow_repeat: false,
      },
      ProgramTool {
        name: "ping".into(),
        description: "Ping.".into(),
        input: json!({"type":"object","properties":{"mode":{"anyOf":[{"const":"a"},{"const":"b"}]},"tags":{"type":"array","items":{"type":"string"}},"odd key":{"enum":[1,2]}},"additionalProperties":false}),
        allow_repeat: true,
      },
    ])
  }

  #[test]
  fn description_declares_each_tool() {
    assert_eq!(
      tools().description(),
      "Bounded async JS cell. Tools are direct functions and under tools.\n\
       // Read a file.\n// Second line.\n\
       declare function read_file(args: { path: string; offset?: number; limit?: number }): Promise<string>;\n\
       // Ping.\n\
       declare function ping(args: { mode?: \"a\" | \"b\"; tags?: Array<string>; \"odd key\"?: 1 | 2 }): Promise<string>;"
    );
  }

  #[test]
  fn deep_types_become_unknown() {
    let mut s = json!({"type":"string"});
    for _ in 0..7 {
      s = json!({"type":"array","items":s});
    }
    assert_eq!(render_type(&s, 0), "Array<Array<Array<Array<Array<Array<unknown>>>>>>");
  }

  #[test]
  fn admits_in_order_budget_name_args_repeat() {
    let t = tools();
    let mut ledger = CellLedger::default();
    assert!(t.admit(&mut ledger, "read_file", r#"{"path":"a"}"#).is_ok());
    let code = |r: Result<Value, ToolError>| r.unwrap_err().code;
    assert_eq!(code(t.admit(&mut ledger, "nope", "{}")), "cave_program_unknown_tool:nope");
    assert_eq!(
      code(t.admit(&mut ledger, "read_file", r#"{"path":1}"#)),
      "cave_program_tool_arguments_invalid:read_file"
    );
    assert_eq!(
      code(t.admit(&mut ledger, "read_file", r#"[1]"#)),
      "cave_program_tool_arguments_invalid:read_file"
    );
    assert_eq!(
      code(t.admit(&mut ledger, "ping", r#"{"constructor":{}}"#)),
      "cave_program_tool_arguments_invalid:ping"
    );
    assert!(t.admit(&mut ledger, "read_file", r#"{ "path" : "a" }"#).is_ok());
    assert!(t.admit(&mut ledger, "read_file", r#"{"path":"a"}"#).is_ok());
    assert_eq!(code(t.admit(&mut ledger, "read_file", r#"{"path":"a"}"#)), "cave_program_repeated_tool_call");
    // the ninth call of the cell, whatever it is
    assert_eq!(code(t.admit(&mut ledger, "ping", "{}")), "cave_program_tool_call_budget_exceeded");
  }

  #[test]
  fn allow_repeat_and_unsafe_integers() {
    let t = tools();
    let mut ledger = CellLedger::default();
    for _ in 0..5 {
      assert!(t.admit(&mut ledger, "ping", r#"{"mode":"a"}"#).is_ok());
    }
    let mut ledger = CellLedger::default();
    assert!(t.admit(&mut ledger, "read_file", r#"{"path":"a","offset":9007199254740993}"#).is_err());
  }

  #[test]
  fn source_checks() {
    assert_eq!(check_source(None).unwrap_err().code, "cave_program_source_required");
    assert_eq!(check_source(Some("  \n")).unwrap_err().code, "cave_program_source_required");
    assert!(check_source(Some(&"x".repeat(PROGRAM_SOURCE_MAX_BYTES))).is_ok());
    assert_eq!(
      check_source(Some(&"x".repeat(PROGRAM_SOURCE_MAX_BYTES + 1))).unwrap_err().code,
      "cave_program_source_limit"
    );
  }

  #[test]
  fn output_rule_and_cap() {
    assert_eq!(cell_output(&[], None), "ok");
    assert_eq!(cell_output(&[], Some("42")), "42");
    assert_eq!(cell_output(&["a".into(), "b".into()], Some("42")), "a\nb");
    let long = "x".repeat(30_000);
    let out = cell_output(&[long], None);
    assert!(out.starts_with(&"x".repeat(PROGRAM_OUTPUT_EDGE_BYTES)));
    assert!(out.contains("\n... caveman_code output truncated (30000 bytes) ...\n"));
    assert_eq!(out.len(), 2 * PROGRAM_OUTPUT_EDGE_BYTES + "\n... caveman_code output truncated (30000 bytes) ...\n".len());
    let exact = "y".repeat(PROGRAM_OUTPUT_MAX_BYTES);
    assert_eq!(cap_cell_output(&exact), exact);
  }

  #[test]
  fn speculation_sites_are_literal_json_calls_outside_strings_and_comments() {
    let sites = |code: &str| -> Vec<(usize, String, Value)> {
      speculation_sites(code, &["read_file", "grep"], &["bash", "write_file"])
        .into_iter()
        .map(|s| (s.offset, s.name, s.args))
        .collect()
    };
    let code = r#"const [a, b] = await Promise.all([read_file({"path": "a.txt"}), tools.grep ( { "pattern": "x" } )]);"#;
    assert_eq!(
      sites(code),
      [
        (code.find("read_file").unwrap(), "read_file".to_string(), json!({"path": "a.txt"})),
        (code.find("grep").unwrap(), "grep".to_string(), json!({"pattern": "x"})),
      ]
    );
    // Not JSON, not an object, another argument, an identifier that only ends with the name.
    for code in [
      r#"read_file({path: "a"})"#,
      r#"read_file("a")"#,
      r#"read_file({"path": "a"}, 1)"#,
      r#"my_read_file({"path": "a"})"#,
      r#"read_file({"path": "a"}"#,
      r#"// read_file({"path": "a"})"#,
      r#"/* read_file({"path": "a"}) */"#,
      r#"const s = 'read_file({"path": "a"})';"#,
      r#"const s = `read_file({"path": "a"})`;"#,
      r#"const s = "\"read_file({\"path\": \"a\"})";"#,
    ] {
      assert!(sites(code).is_empty(), "{code}");
    }
    // A later site after a string that contains a quote and a comment.
    assert_eq!(sites("const q = \"it's\"; // read_file(\nread_file({\"path\": \"b\"})").len(), 1);
  }

  #[test]
  fn the_scan_stops_at_a_non_read_tool_or_a_computed_call() {
    let names = |code: &str| -> Vec<String> {
      speculation_sites(code, &["read_file"], &["bash"]).into_iter().map(|s| s.args["path"].to_string()).collect()
    };
    assert_eq!(names(r#"read_file({"path": "a"}); await bash({"command": "x"}); read_file({"path": "b"})"#), [r#""a""#]);
    assert_eq!(names(r#"read_file({"path": "a"}); tools["read_file"]({"path": "c"}); read_file({"path": "b"})"#), [r#""a""#]);
    // Only as a name: inside a string it does not stop the scan.
    assert_eq!(names(r#"print("bash"); read_file({"path": "b"})"#), [r#""b""#]);
  }

  #[test]
  fn the_light_check_is_the_cells_argument_check() {
    let input = json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]});
    assert!(light_check(&input, &json!({"path": "a"})));
    assert!(!light_check(&input, &json!({"path": 1})));
    assert!(!light_check(&input, &json!({"path": "a", "constructor": {}})));
    assert!(!light_check(&input, &json!([1])));
  }
}
