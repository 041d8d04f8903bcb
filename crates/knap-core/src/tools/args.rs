//! Reading tool arguments out of the JSON input, with one error shape for a wrong type.

use serde_json::Value;

use crate::error::ToolError;
use crate::limits::MAX_SAFE_INTEGER;

pub(crate) struct Args<'a> {
  tool: &'static str,
  input: &'a Value,
}

impl<'a> Args<'a> {
  pub fn new(tool: &'static str, input: &'a Value) -> Result<Self, ToolError> {
    if !input.is_object() {
      return Err(ToolError::coded("cave_tool_arguments_invalid"));
    }
    Ok(Self { tool, input })
  }

  fn invalid(&self, key: &str, want: &str) -> ToolError {
    ToolError::new(
      format!("cave_tool_input_schema_mismatch:{}", self.tool),
      format!(
        "cave_tool_input_schema_mismatch:{}: {key} must be {want}",
        self.tool
      ),
    )
  }

  fn get(&self, key: &str) -> Option<&'a Value> {
    self.input.get(key).filter(|v| !v.is_null())
  }

  /// The value as given (`null` included), for the tools that word their own errors.
  pub fn raw(&self, key: &str) -> Option<&'a Value> {
    self.input.get(key)
  }

  pub fn has(&self, key: &str) -> bool {
    self.input.get(key).is_some()
  }

  pub fn string(&self, key: &str) -> Result<&'a str, ToolError> {
    self.opt_string(key)?.ok_or_else(|| self.invalid(key, "a string"))
  }

  pub fn opt_string(&self, key: &str) -> Result<Option<&'a str>, ToolError> {
    match self.get(key) {
      None => Ok(None),
      Some(Value::String(s)) => Ok(Some(s)),
      Some(_) => Err(self.invalid(key, "a string")),
    }
  }

  pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, ToolError> {
    match self.get(key) {
      None => Ok(None),
      Some(Value::Bool(b)) => Ok(Some(*b)),
      Some(_) => Err(self.invalid(key, "a boolean")),
    }
  }

  /// Any finite number (the tool decides what it accepts).
  pub fn opt_number(&self, key: &str) -> Result<Option<f64>, ToolError> {
    match self.get(key) {
      None => Ok(None),
      Some(Value::Number(n)) => n
        .as_f64()
        .filter(|f| f.is_finite())
        .map(Some)
        .ok_or_else(|| self.invalid(key, "a number")),
      Some(_) => Err(self.invalid(key, "a number")),
    }
  }
}

impl Args<'_> {
  /// An integer (JSON Schema `integer`: a number with no fraction, at most 2^53 − 1 in size).
  /// The tool decides the range; `2.5` or `"2"` is refused here (a run's schema check already
  /// refuses them before the tool is called; a direct `execute` gets the same answer).
  pub fn opt_integer(&self, key: &str) -> Result<Option<f64>, ToolError> {
    match self.opt_number(key) {
      Ok(Some(f)) if is_safe_integer(f) => Ok(Some(f)),
      Ok(None) => Ok(None),
      _ => Err(self.invalid(key, "an integer")),
    }
  }

  /// An integer of at least `min`: below it is refused with the value named.
  pub fn opt_integer_from(&self, key: &str, min: f64) -> Result<Option<f64>, ToolError> {
    match self.opt_integer(key)? {
      Some(f) if f < min => Err(self.invalid(key, &format!("an integer of at least {min} (got {f})"))),
      v => Ok(v),
    }
  }
}

pub(crate) fn is_safe_integer(f: f64) -> bool {
  f.is_finite() && f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER
}
