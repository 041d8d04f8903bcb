//! What a run is given: the agent graph and the run options, as the JS layer sends them (JSON,
//! camelCase). Validation of option values happens here, before any work.

use serde::Deserialize;
use serde_json::Value;

use super::message::{Message, UserContent};
use crate::code::{Code, Error};
use crate::limits::*;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRef {
  /// The JS side's handle for the model object (the transport looks it up).
  pub key: u32,
  pub provider: String,
  pub id: String,
  #[serde(default)]
  pub context_window: Option<u64>,
  #[serde(default)]
  pub max_tokens: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextSpec {
  pub id: String,
  pub text: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputSpec {
  pub max_tokens: u64,
  #[serde(default)]
  pub schema: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
  pub id: String,
  pub instructions: String,
  #[serde(default)]
  pub contexts: Vec<ContextSpec>,
  #[serde(default)]
  pub output: Option<OutputSpec>,
  pub model: ModelRef,
  pub sandbox: String,
  #[serde(default)]
  pub reasoning: Option<String>,
  #[serde(default)]
  pub tools: Vec<ToolSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
  pub name: String,
  pub description: String,
  pub input: Value,
  pub effect: String,
  pub timeout_ms: u64,
  #[serde(default = "default_result")]
  pub result: String,
  #[serde(default)]
  pub allow_repeat: bool,
  #[serde(default)]
  pub output: Option<Value>,
  pub runtime: ToolRuntime,
  /// `speculative: true` (a read tool whose calls may be launched early).
  #[serde(default)]
  pub speculative: bool,
  /// A composite's `nestedTools` (flat: none of them has nested tools of its own).
  #[serde(default)]
  pub nested_tools: Vec<ToolSpec>,
  /// A composite's `speculativeTools`: names of nested read tools with `speculative: true`.
  #[serde(default)]
  pub speculative_tools: Vec<String>,
  /// A programmatic cell tool with speculation on: the input key holding the cell's source,
  /// whose literal read calls are launched while the provider streams it (non-durable runs).
  #[serde(default)]
  pub speculation_source: Option<String>,
}

impl ToolSpec {
  /// A composite tool: one that declares nested tools its `execute` may `context.dispatch`.
  pub fn is_composite(&self) -> bool {
    !self.nested_tools.is_empty()
  }
}

impl AgentSpec {
  /// `validateAgentGraph`'s sandbox rule (reference §2.3): a subagent whose definition says
  /// `"host"` below an ancestor that is `"required"` is refused, since its closures would run
  /// in the host process while the ancestor's run in workers. `self` is the root with its
  /// effective mode (after the host-by-default downgrade); a `"fixture"` level between them
  /// does not lift the requirement.
  pub fn check_sandbox_nesting(&self) -> Result<(), Error> {
    fn walk<'a>(agent: &'a AgentSpec, required: Option<&'a str>) -> Result<(), Error> {
      let required = if agent.sandbox == "required" { Some(agent.id.as_str()) } else { required };
      let tools = agent.tools.iter().flat_map(|t| std::iter::once(t).chain(t.nested_tools.iter()));
      for tool in tools {
        let ToolRuntime::Subagent { agent: child, .. } = &tool.runtime else {
          continue;
        };
        if let (Some(ancestor), "host") = (required, child.sandbox.as_str()) {
          return Err(Error::coded(
            Code::HostSandboxNestedUnderRequired,
            format!(
              "subagent tool {:?} runs agent {:?} with sandbox \"host\" under agent {ancestor:?}, whose sandbox is \"required\"\nhint: declare the child's sandbox \"required\" (its tools then run in worker processes too), or run the parent with sandbox \"host\"",
              tool.name, child.id
            ),
          ));
        }
        walk(child, required)?;
      }
      Ok(())
    }
    walk(self, None)
  }
}

fn default_result() -> String {
  "auto".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ToolRuntime {
  /// A `shellTools()` tool, run inside Rust (`toolset` is the native registry id).
  #[serde(rename_all = "camelCase")]
  Native { toolset: u32, has_on_output: bool },
  /// A user tool whose `execute` lives in JS (`key` is the JS handle).
  Host { key: u32 },
  /// A `subagent()` tool.
  #[serde(rename_all = "camelCase")]
  Subagent {
    agent: Box<AgentSpec>,
    max_input_chars: u64,
    max_calls: u32,
    #[serde(default)]
    max_cost_usd: Option<f64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    max_context_tokens: u64,
  },
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct BudgetSpec {
  pub max_usd: Option<f64>,
  pub max_tokens: Option<f64>,
  pub initial_usd: Option<f64>,
  pub initial_tokens: Option<f64>,
  pub output_floor_tokens: Option<f64>,
  pub on_exhausted: Option<String>,
  /// `CompactionOptions`, normalized by `crate::compaction::normalize`.
  #[serde(default)]
  pub compaction: Option<Value>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct BreakerSpec {
  pub repeated_tool_calls: Option<f64>,
  pub repeated_tool_call_window_turns: Option<f64>,
  pub no_progress_turns: Option<f64>,
  pub max_tool_calls_per_turn: Option<f64>,
  pub retry: Option<Value>,
}

/// Breakers with their defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Breakers {
  pub repeated_tool_calls: u32,
  pub window_turns: u32,
  pub no_progress_turns: u32,
  pub max_tool_calls_per_turn: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunOptionsSpec {
  pub run_id: String,
  pub max_model_calls: Option<f64>,
  pub max_tool_calls: Option<f64>,
  pub deadline_ms: Option<f64>,
  pub max_subagent_depth: Option<f64>,
  pub max_subagent_invocations: Option<f64>,
  pub max_concurrent_subagents: Option<f64>,
  pub budget: Option<BudgetSpec>,
  pub breakers: Option<BreakerSpec>,
  pub max_cost_usd: Option<f64>,
  /// `run()` reads only the terminal event: skip the `{type:"pi"}` events (and building them).
  #[serde(default)]
  pub quiet: bool,
  /// The user message's content parts (`[{type:"text",text}]`, images).
  pub input: UserContent,
  /// A `Conversation`'s earlier messages: the transcript this run continues.
  #[serde(default)]
  pub history: Vec<Message>,
  /// The input kinds of the run's own model (its `input`, e.g. `["text","image"]`), when known.
  #[serde(default)]
  pub model_input: Option<Vec<String>>,
  /// `RunOptions.entryPath`: the module the JS side imports in its tool worker processes. With
  /// it a `"required"` level's tools may run (the JS side runs their closures in those
  /// workers); without it such a level fails (`cave_tool_sandbox_entry_required`).
  #[serde(default)]
  pub entry_path: Option<String>,
}

/// An option error: thrown as a plain `Error` before the run starts.
pub type OptionError = Error;

/// Run options after validation.
#[derive(Debug, Clone)]
pub struct RunLimits {
  pub max_model_calls: u32,
  pub max_tool_calls: u32,
  pub deadline_ms: Option<u64>,
  pub max_subagent_depth: u32,
  /// Subagent runs the whole tree may start (`cave_subagent_invocation_limit` past it).
  pub max_subagent_invocations: Option<u32>,
  /// Subagent runs of the tree in flight at once (`cave_subagent_concurrency_limit` past it).
  pub max_concurrent_subagents: Option<u32>,
  pub breakers: Option<Breakers>,
}

/// An integer option in `1..=max`; a bad value names the option, the range and the default.
fn positive_int(v: Option<f64>, default: u32, code: Code, max: f64, name: &str) -> Result<u32, OptionError> {
  match v {
    None => Ok(default),
    Some(f) if f.is_finite() && f.fract() == 0.0 && f >= 1.0 && f <= max => Ok(f as u32),
    Some(f) => {
      let range = if max >= u32::MAX as f64 {
        "a positive integer".to_string()
      } else {
        format!("an integer from 1 to {max}")
      };
      Err(OptionError::coded(
        code,
        format!("{name} must be {range}, got {f}\nhint: leave {name} out for the default ({default}), or pass {range}"),
      ))
    }
  }
}

impl RunOptionsSpec {
  pub fn limits(&self) -> Result<RunLimits, OptionError> {
    let max_model_calls = positive_int(
      self.max_model_calls,
      DEFAULT_MAX_MODEL_CALLS,
      Code::MaxModelCallsInvalid,
      u32::MAX as f64,
      "maxModelCalls",
    )?;
    let max_tool_calls = positive_int(
      self.max_tool_calls,
      DEFAULT_MAX_TOOL_CALLS,
      Code::MaxToolCallsInvalid,
      u32::MAX as f64,
      "maxToolCalls",
    )?;
    let deadline_ms = match self.deadline_ms {
      None => None,
      Some(f) if f.is_finite() && f.fract() == 0.0 && f >= 1.0 && f <= MAX_SAFE_INTEGER => Some(f as u64),
      Some(f) => {
        return Err(OptionError::coded(
          Code::RunDeadlineInvalid,
          &format!("deadlineMs must be a positive safe integer, got {f}"),
        ))
      }
    };
    let max_subagent_depth = positive_int(
      self.max_subagent_depth,
      DEFAULT_SUBAGENT_DEPTH,
      Code::SubagentDepthLimitInvalid,
      ABSOLUTE_SUBAGENT_DEPTH_LIMIT as f64,
      "maxSubagentDepth",
    )?;
    // No default: unset means unlimited, so the check runs only when the option is given.
    let optional = |v: Option<f64>, code, max: u32, name| v.map(|_| positive_int(v, 1, code, max as f64, name)).transpose();
    let max_subagent_invocations = optional(
      self.max_subagent_invocations,
      Code::SubagentInvocationLimitInvalid,
      crate::limits::MAX_SUBAGENT_INVOCATIONS_LIMIT,
      "maxSubagentInvocations",
    )?;
    let max_concurrent_subagents = optional(
      self.max_concurrent_subagents,
      Code::SubagentConcurrencyLimitInvalid,
      crate::limits::MAX_CONCURRENT_SUBAGENTS_LIMIT,
      "maxConcurrentSubagents",
    )?;
    let breakers = match &self.breakers {
      None => None,
      Some(b) => {
        let t = |v: Option<f64>, d: u32| positive_int(v, d, Code::BreakerThresholdInvalid, u32::MAX as f64, "a breakers threshold");
        if b.retry.is_some() && self.budget.is_none() {
          return Err(OptionError::coded(
            Code::BreakerRetryRequiresBudget,
            "breakers.retry needs a budget",
          ));
        }
        Some(Breakers {
          repeated_tool_calls: t(b.repeated_tool_calls, BREAKER_REPEATED_TOOL_CALLS)?,
          window_turns: t(b.repeated_tool_call_window_turns, BREAKER_REPEATED_WINDOW_TURNS)?,
          no_progress_turns: t(b.no_progress_turns, BREAKER_NO_PROGRESS_TURNS)?,
          max_tool_calls_per_turn: t(b.max_tool_calls_per_turn, BREAKER_MAX_TOOL_CALLS_PER_TURN)?,
        })
      }
    };
    if self.budget.is_some() && self.max_cost_usd.is_some() {
      return Err(OptionError::coded(
        Code::BudgetConflictingCap,
        "budget and maxCostUsd cannot be combined",
      ));
    }
    if let Some(m) = self.max_cost_usd {
      if !(m.is_finite() && m > 0.0) {
        return Err(OptionError::new(
          Code::AgentDefinitionInvalid,
          format!("{MAX_COST_USD_INVALID}\nhint: maxCostUsd is a number of US dollars above 0, got {m}: maxCostUsd: 0.5"),
        ));
      }
    }
    Ok(RunLimits {
      max_model_calls,
      max_tool_calls,
      deadline_ms,
      max_subagent_depth,
      max_subagent_invocations,
      max_concurrent_subagents,
      breakers,
    })
  }

  /// `RunBudget` normalization.
  pub fn budget(&self) -> Result<Option<super::budget::Meter>, OptionError> {
    use super::budget::{Denomination, Meter};
    // The legacy `maxCostUsd` is its own ledger (`Shared::legacy`), not a meter.
    let Some(b) = &self.budget else {
      return Ok(None);
    };
    let (denom, max, initial) = match (b.max_usd, b.max_tokens) {
      (Some(m), None) if b.initial_tokens.is_none() => (Denomination::Usd, m, b.initial_usd),
      (None, Some(m)) if b.initial_usd.is_none() => (Denomination::Tokens, m, b.initial_tokens),
      _ => {
        return Err(OptionError::coded(
          Code::BudgetDenominationAmbiguous,
          "set exactly one of budget.maxUsd and budget.maxTokens",
        ))
      }
    };
    let tokens = denom == Denomination::Tokens;
    if !(max.is_finite() && max > 0.0) || (tokens && (max.fract() != 0.0 || max > MAX_SAFE_INTEGER)) {
      return Err(OptionError::coded(
        Code::BudgetMaxInvalid,
        &format!("budget max must be positive, got {max}"),
      ));
    }
    if let Some(i) = initial {
      if !(i.is_finite() && i > 0.0 && i <= max) || (tokens && i.fract() != 0.0) {
        let (field, cap, kind) = if tokens {
          ("budget.initialTokens", "budget.maxTokens", "an integer")
        } else {
          ("budget.initialUsd", "budget.maxUsd", "a number of US dollars")
        };
        let why = if !(i.is_finite() && i > 0.0) {
          "it must be positive".to_string()
        } else if i > max {
          format!("it is above {cap} ({max})")
        } else {
          "it must be a whole number of tokens".to_string()
        };
        return Err(OptionError::coded(
          Code::BudgetInitialInvalid,
          format!(
            "{field} must be positive and at most {cap} ({max}), got {i}\nhint: {why}; {field} is {kind} in (0, {max}], the part of {cap} released up front (leave it out to release all of it)"
          ),
        ));
      }
    }
    let floor = match b.output_floor_tokens {
      None => None,
      Some(f) if f.is_finite() && f.fract() == 0.0 && f >= 1.0 => Some(f as u64),
      Some(f) => {
        return Err(OptionError::coded(
          Code::BudgetOutputFloorInvalid,
          &format!("outputFloorTokens must be a positive integer, got {f}"),
        ))
      }
    };
    if let Some(o) = &b.on_exhausted {
      if o != "compact" && o != "stop" {
        return Err(OptionError::coded(
          Code::BudgetOnExhaustedInvalid,
          &format!("onExhausted must be \"compact\" or \"stop\", got {o:?}"),
        ));
      }
    }
    Ok(Some(Meter::new(denom, max, initial, floor)))
  }

  /// The root's compaction options: a budget whose `onExhausted` is `"compact"` (the default).
  pub fn compaction(&self) -> Result<Option<crate::compaction::Compaction>, OptionError> {
    let Some(b) = &self.budget else {
      return Ok(None);
    };
    let options = crate::compaction::normalize(b.compaction.as_ref())?;
    Ok((b.on_exhausted.as_deref().unwrap_or("compact") == "compact").then_some(options))
  }
}

/// The reference's whole message for a `maxCostUsd` that is not a positive number.
const MAX_COST_USD_INVALID: &str = "caveman agent: run maxCostUsd must be positive";

/// The numeric run options with the reference's code for a bad value, and how to write a good one.
const NUMERIC_OPTIONS: &[(&str, &str, &str, &str)] = &[
  ("maxModelCalls", "cave_max_model_calls_invalid", "a positive integer", "maxModelCalls: 20"),
  ("maxToolCalls", "cave_max_tool_calls_invalid", "a positive integer", "maxToolCalls: 40"),
  ("deadlineMs", "cave_run_deadline_invalid", "a positive integer of milliseconds", "deadlineMs: 5000 (five seconds)"),
  ("maxSubagentDepth", "cave_subagent_depth_limit_invalid", "a positive integer", "maxSubagentDepth: 2"),
  ("maxSubagentInvocations", "cave_subagent_invocation_limit_invalid", "an integer from 1 to 65536", "maxSubagentInvocations: 100"),
  ("maxConcurrentSubagents", "cave_subagent_concurrency_limit_invalid", "an integer from 1 to 1024", "maxConcurrentSubagents: 4"),
  ("maxCostUsd", "cave_agent_definition_invalid", "a positive number of US dollars", "maxCostUsd: 0.5"),
  ("budget.maxUsd", "cave_budget_max_invalid", "a positive number of US dollars", "budget: { maxUsd: 1 }"),
  ("budget.maxTokens", "cave_budget_max_invalid", "a positive integer", "budget: { maxTokens: 100000 }"),
  ("budget.initialUsd", "cave_budget_initial_invalid", "a number of US dollars", "budget: { maxUsd: 1, initialUsd: 0.2 }"),
  ("budget.initialTokens", "cave_budget_initial_invalid", "a non-negative integer", "budget: { maxTokens: 100000, initialTokens: 0 }"),
  ("budget.outputFloorTokens", "cave_budget_output_floor_invalid", "a positive integer", "budget: { outputFloorTokens: 256 }"),
  ("breakers.repeatedToolCalls", "cave_breaker_threshold_invalid", "a positive integer", "breakers: { repeatedToolCalls: 3 }"),
  ("breakers.repeatedToolCallWindowTurns", "cave_breaker_threshold_invalid", "a positive integer", "breakers: { repeatedToolCallWindowTurns: 8 }"),
  ("breakers.noProgressTurns", "cave_breaker_threshold_invalid", "a positive integer", "breakers: { noProgressTurns: 3 }"),
  ("breakers.maxToolCallsPerTurn", "cave_breaker_threshold_invalid", "a positive integer", "breakers: { maxToolCallsPerTurn: 16 }"),
];

/// JS's name for a JSON value's type, and the value itself, as an error shows what was received.
/// JSON has no NaN or Infinity: lib/run.mjs sends a non-finite number as `{"$number": "NaN"}`.
pub fn describe_received(v: &Value) -> String {
  if let Some(n) = v.as_object().filter(|m| m.len() == 1).and_then(|m| m.get("$number")?.as_str()) {
    return format!("number {n}");
  }
  let shown = {
    let s = v.to_string();
    if s.chars().count() > 60 {
      format!("{}…", s.chars().take(60).collect::<String>())
    } else {
      s
    }
  };
  match v {
    Value::String(_) => format!("string {shown}"),
    Value::Bool(_) => format!("boolean {shown}"),
    Value::Array(_) => format!("array {shown}"),
    Value::Object(_) => format!("object {shown}"),
    Value::Null => "null".into(),
    Value::Number(_) => format!("number {shown}"),
  }
}

/// Why run options that failed to deserialize were refused, naming the field, the type it
/// needs and the value received (serde's own error names neither field nor fix). `None` when
/// no numeric option has the wrong type (the caller keeps serde's message then).
pub fn explain_option_types(options: &Value) -> Option<OptionError> {
  for (path, code, expected, example) in NUMERIC_OPTIONS {
    let mut at = Some(options);
    for part in path.split('.') {
      at = at.and_then(|v| v.get(part));
    }
    match at {
      None | Some(Value::Null) | Some(Value::Number(_)) => continue,
      Some(v) if *path == "maxCostUsd" => {
        // The reference gives one message for any value that is not a positive number.
        return Some(OptionError::new(
          Code::AgentDefinitionInvalid,
          format!("{MAX_COST_USD_INVALID}\nhint: maxCostUsd takes {expected}, received {}: {example}", describe_received(v)),
        ));
      }
      Some(v) => {
        let mut e = OptionError::coded(*code, format!("{path} must be {expected}, received {}", describe_received(v)));
        e.message.push_str(&format!("\nhint: {example}"));
        return Some(e);
      }
    }
  }
  None
}

#[cfg(test)]
mod option_type_tests {
  use super::*;
  use serde_json::json;

  #[test]
  fn a_non_finite_number_is_refused_as_the_number_it_was() {
    let e = explain_option_types(&json!({"maxModelCalls": {"$number": "NaN"}})).expect("refused");
    assert_eq!(e.code.as_str(), "cave_max_model_calls_invalid");
    assert!(e.message.starts_with("cave_max_model_calls_invalid: maxModelCalls must be a positive integer, received number NaN\n"), "{}", e.message);
    let e = explain_option_types(&json!({"maxCostUsd": {"$number": "Infinity"}})).expect("refused");
    assert!(e.message.starts_with("caveman agent: run maxCostUsd must be positive\nhint: maxCostUsd takes a positive number of US dollars, received number Infinity"), "{}", e.message);
    let e = explain_option_types(&json!({"maxConcurrentSubagents": "2"})).expect("refused");
    assert_eq!(e.code.as_str(), "cave_subagent_concurrency_limit_invalid");
  }

  #[test]
  fn a_string_deadline_names_the_field_the_type_and_the_fix() {
    let e = explain_option_types(&json!({"runId": "r", "deadlineMs": "5s"})).expect("refused");
    assert_eq!(e.code.as_str(), "cave_run_deadline_invalid");
    assert_eq!(
      e.message,
      "cave_run_deadline_invalid: deadlineMs must be a positive integer of milliseconds, received string \"5s\"\nhint: deadlineMs: 5000 (five seconds)"
    );
    let e = explain_option_types(&json!({"budget": {"maxUsd": "1"}})).expect("refused");
    assert!(e.message.starts_with("cave_budget_max_invalid: budget.maxUsd must be a positive number of US dollars, received string \"1\""));
    assert!(explain_option_types(&json!({"deadlineMs": 5000, "budget": null})).is_none());
  }

  #[test]
  fn max_cost_usd_of_the_wrong_type_keeps_the_references_message() {
    let e = explain_option_types(&json!({"maxCostUsd": "1"})).expect("refused");
    assert_eq!(e.code.as_str(), "cave_agent_definition_invalid");
    assert_eq!(
      e.message,
      "caveman agent: run maxCostUsd must be positive\nhint: maxCostUsd takes a positive number of US dollars, received string \"1\": maxCostUsd: 0.5"
    );
  }

  fn spec(extra: serde_json::Value) -> RunOptionsSpec {
    let mut v = json!({"runId": "r", "input": [{"type": "text", "text": "hi"}]});
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    serde_json::from_value(v).unwrap()
  }

  #[test]
  fn range_errors_name_the_option_and_the_fix() {
    let e = spec(json!({"maxSubagentDepth": 9})).limits().unwrap_err();
    assert_eq!(e.code.as_str(), "cave_subagent_depth_limit_invalid");
    assert_eq!(
      e.message,
      "cave_subagent_depth_limit_invalid: maxSubagentDepth must be an integer from 1 to 8, got 9\nhint: leave maxSubagentDepth out for the default (2), or pass an integer from 1 to 8"
    );
    let e = spec(json!({"maxCostUsd": 0})).limits().unwrap_err();
    assert!(e.message.starts_with("caveman agent: run maxCostUsd must be positive\nhint: "), "{}", e.message);
    let e = spec(json!({"budget": {"maxUsd": 1, "initialUsd": 2}})).budget().unwrap_err();
    assert_eq!(e.code.as_str(), "cave_budget_initial_invalid");
    assert!(
      e.message.starts_with("cave_budget_initial_invalid: budget.initialUsd must be positive and at most budget.maxUsd (1), got 2\nhint: it is above budget.maxUsd (1)"),
      "{}",
      e.message
    );
    let e = spec(json!({"budget": {"maxTokens": 100, "initialTokens": -1}})).budget().unwrap_err();
    assert!(e.message.contains("budget.initialTokens must be positive and at most budget.maxTokens (100), got -1\nhint: it must be positive"), "{}", e.message);
    let e = spec(json!({"budget": {"maxTokens": 100, "initialTokens": 1.5}})).budget().unwrap_err();
    assert!(e.message.contains("hint: it must be a whole number of tokens"), "{}", e.message);
  }
}
