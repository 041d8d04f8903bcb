//! Tool-call admission: the checks of the reference's `beforeToolCall` as a chain of rules in
//! its order (caveman-agent-api.md §6.3), then the policy, then `executeSubagent`'s own checks.
//! Each rule either passes or blocks with the reason the model reads as an error result.

use std::time::Instant;

use serde_json::Value;

use super::budget::{Denomination, Meter, MeterCell};
use super::level::Level;
use super::result::RunStopReason;
use super::schema::{coerce, validate};
use super::spec::{ToolRuntime, ToolSpec};
use crate::code::Code;
use crate::policy::{decide_tool_call, default_timeout, PolicyError, PolicyInput};

/// One tool call at admission.
pub(super) struct Candidate<'a> {
  pub name: &'a str,
  pub id: &'a str,
  /// The arguments as the model sent them.
  pub raw_args: &'a Value,
  /// … converted as Pi converts them for a declared tool (what the policy and the tool get).
  pub args: Value,
  /// The declared tool, by index.
  pub tool: Option<usize>,
  /// 1 for the first call of the assistant message.
  pub in_turn: u32,
  /// The container's call id, for a nested call of a composite tool.
  pub parent: Option<&'a str>,
}

impl<'a> Candidate<'a> {
  pub fn new(level: &Level, name: &'a str, id: &'a str, raw_args: &'a Value, in_turn: u32) -> Self {
    let tool = level.find_tool(name);
    let args = tool
      .map(|i| coerce(&level.agent.tools[i].input, raw_args))
      .unwrap_or_else(|| raw_args.clone());
    Self {
      name,
      id,
      raw_args,
      args,
      tool,
      in_turn,
      parent: None,
    }
  }
}

/// The admission verdict for one tool call.
pub(super) enum Verdict {
  Run {
    index: usize,
    args: Value,
    /// A subagent call's carved wallet.
    wallet: Option<Meter>,
  },
  Blocked {
    reason: String,
  },
}

/// A rule: `Some(reason)` blocks the call.
type Rule = fn(&mut Level, &Candidate) -> Option<String>;

/// The checks before the policy, in the reference's order. Pi validates the arguments of a
/// declared tool before `beforeToolCall` runs, so that comes first.
pub(super) const BEFORE_POLICY: &[(&str, Rule)] = &[
  ("arguments match the schema", arguments_match_schema),
  ("deadline", deadline),
  ("budget", budget),
  ("maxToolCalls", call_cap),
  ("fan-out breaker", fan_out),
  ("loop breaker", loop_breaker),
  ("declared tool", declared),
  ("side effects under fixture", side_effect),
  ("composite under a required sandbox", composite_sandbox),
  ("required sandbox has an entry", sandbox_entry),
  ("arguments are an object", plain_object),
];

fn block(code: Code) -> Option<String> {
  Some(code.as_str().to_string())
}

fn arguments_match_schema(level: &mut Level, c: &Candidate) -> Option<String> {
  let tool = &level.agent.tools[c.tool?];
  let problems = validate(&tool.input, &c.args);
  if problems.is_empty() {
    return None;
  }
  Some(format!(
    "Validation failed for tool \"{}\":\n{}\n\nReceived arguments:\n{}",
    tool.name,
    problems
      .iter()
      .map(|p| format!("  - {p}"))
      .collect::<Vec<_>>()
      .join("\n"),
    serde_json::to_string_pretty(c.raw_args).unwrap_or_default()
  ))
}

fn deadline(level: &mut Level, _: &Candidate) -> Option<String> {
  if !level.shared.deadline.is_some_and(|d| Instant::now() >= d) {
    return None;
  }
  level.stop = Some(RunStopReason::Deadline);
  block(Code::RunDeadlineExceeded)
}

fn budget(level: &mut Level, _: &Candidate) -> Option<String> {
  if !level.accounting.meter.as_ref().is_some_and(MeterCell::exhausted) {
    return None;
  }
  level.stop = Some(RunStopReason::BudgetExhausted);
  block(Code::BudgetExhausted)
}

/// Whether the candidate is a composite container (which has its own call counter, its own
/// per-turn cap, and no loop breaker: its nested calls are checked instead).
fn is_container(level: &Level, c: &Candidate) -> bool {
  c.tool.is_some_and(|i| level.agent.tools[i].is_composite())
}

fn call_cap(level: &mut Level, c: &Candidate) -> Option<String> {
  let count = if is_container(level, c) {
    level.accounting.container_count
  } else {
    level.accounting.tool_budget_count
  };
  (count > level.shared.limits.max_tool_calls).then(|| Code::ToolCallBudgetExceeded.as_str().to_string())
}

fn fan_out(level: &mut Level, c: &Candidate) -> Option<String> {
  let event = level.breakers.fan_out(c.name, c.in_turn)?;
  level.accounting.receipt.breakers.push(event);
  block(Code::FanOutCapExceeded)
}

fn loop_breaker(level: &mut Level, c: &Candidate) -> Option<String> {
  if c.tool.is_some_and(|i| level.agent.tools[i].allow_repeat) || is_container(level, c) {
    return None;
  }
  let event = level.breakers.repeat(c.name, &c.args)?;
  level.accounting.receipt.breakers.push(event);
  level.stop = Some(RunStopReason::LoopDetected);
  block(Code::ToolCallLoopDetected)
}

fn declared(_: &mut Level, c: &Candidate) -> Option<String> {
  c.tool.is_none().then(|| Code::UnknownTool.as_str().to_string())
}

fn side_effect(level: &mut Level, c: &Candidate) -> Option<String> {
  let tool = &level.agent.tools[c.tool?];
  (level.agent.sandbox == "fixture" && tool.effect == "write")
    .then(|| Code::SideEffectBlocked.as_str().to_string())
}

fn composite_sandbox(level: &mut Level, c: &Candidate) -> Option<String> {
  (level.agent.sandbox == "required" && is_container(level, c))
    .then(|| Code::NestedToolSandboxUnsupported.as_str().to_string())
}

/// Subagent tools are child runs, not closures, so they need no worker. A run without an
/// entry fails before its first call (`cave_tool_sandbox_entry_required`), so this rule is the
/// reference's second line of defence, kept in its place in the order.
fn sandbox_entry(level: &mut Level, c: &Candidate) -> Option<String> {
  let tool = &level.agent.tools[c.tool?];
  (level.agent.sandbox == "required"
    && !level.shared.sandbox_entry
    && !matches!(tool.runtime, ToolRuntime::Subagent { .. }))
  .then(|| Code::SandboxEntryRequired.as_str().to_string())
}

fn plain_object(_: &mut Level, c: &Candidate) -> Option<String> {
  (!c.args.is_object()).then(|| Code::ToolArgumentsInvalid.as_str().to_string())
}

impl Level {
  /// Admission of one tool call. `Err` is a policy failure, which ends the run.
  pub(super) async fn admit(&mut self, c: Candidate<'_>) -> Result<Verdict, PolicyError> {
    for (_, rule) in BEFORE_POLICY {
      if let Some(reason) = rule(self, &c) {
        return Ok(Verdict::Blocked { reason });
      }
    }
    let index = c.tool.expect("the chain blocks undeclared tools");
    // Step 14, composite activation: a cell streamed with speculation takes its bets.
    self.activate(c.id, index, &c.args);
    if let Some(policy) = self.shared.host.policy() {
      let input = PolicyInput {
        run_id: self.run_id.clone(),
        agent_id: self.agent.id.clone(),
        agent_path: self.agent_path.clone(),
        tool_call_id: c.id.to_string(),
        parent_tool_call_id: c.parent.map(str::to_string),
        name: c.name.to_string(),
        effect: self.agent.tools[index].effect.clone(),
        args: c.args.clone(),
      };
      if let Some(denial) = decide_tool_call(policy.as_ref(), &input, default_timeout()).await? {
        self.accounting.receipt.record_denial(c.name);
        return Ok(Verdict::Blocked {
          reason: denial.reason,
        });
      }
    }
    // Subagent checks run where the reference's `executeSubagent` runs them: after the policy.
    let tool = self.agent.clone();
    let wallet = match self.subagent_gate(&tool.tools[index], &c.args) {
      Ok(wallet) => wallet,
      Err(code) => {
        return Ok(Verdict::Blocked {
          reason: code.as_str().to_string(),
        })
      }
    };
    Ok(Verdict::Run {
      index,
      args: c.args,
      wallet,
    })
  }

  /// `executeSubagent`'s checks in its order (arguments, input limit, calls per tool name,
  /// depth, wallet), so a call that fails an earlier check does not use up `maxCalls`. `Ok` is
  /// the child's carved wallet (none for a plain tool, or without a parent budget).
  pub(super) fn subagent_gate(&mut self, tool: &ToolSpec, args: &Value) -> Result<Option<Meter>, Code> {
    let ToolRuntime::Subagent {
      max_calls,
      max_cost_usd,
      max_tokens,
      max_input_chars,
      ..
    } = &tool.runtime
    else {
      return Ok(None);
    };
    let Some(task) = args.get("task").and_then(Value::as_str) else {
      return Err(Code::SubagentArgumentsInvalid);
    };
    if task.chars().map(char::len_utf16).sum::<usize>() as u64 > *max_input_chars {
      return Err(Code::SubagentInputLimit);
    }
    let used = self
      .accounting
      .subagent_calls
      .entry(tool.name.clone())
      .or_insert(0);
    if *used >= *max_calls {
      return Err(Code::SubagentCallBudget);
    }
    *used += 1;
    if self.depth + 1 > self.shared.limits.max_subagent_depth {
      return Err(Code::SubagentDepthLimit);
    }
    let Some(parent) = self.accounting.meter.as_ref().map(MeterCell::snapshot) else {
      return Ok(None);
    };
    let cap = match parent.denomination {
      Denomination::Usd => *max_cost_usd,
      Denomination::Tokens => max_tokens.map(|t| t as f64),
    };
    let Some(cap) = cap else {
      return Err(Code::SubagentWalletDenominationUnavailable);
    };
    let carve = cap.min(parent.remaining());
    if carve <= 0.0 {
      return Err(Code::SubagentWalletUnavailable);
    }
    let mut m = Meter::new(parent.denomination, cap, Some(carve), Some(parent.floor));
    m.max = cap;
    Ok(Some(m))
  }
}

#[cfg(test)]
mod tests {
  use super::BEFORE_POLICY;

  #[test]
  fn the_chain_is_in_the_references_order() {
    let names: Vec<&str> = BEFORE_POLICY.iter().map(|(n, _)| *n).collect();
    assert_eq!(
      names,
      [
        "arguments match the schema",
        "deadline",
        "budget",
        "maxToolCalls",
        "fan-out breaker",
        "loop breaker",
        "declared tool",
        "side effects under fixture",
        "composite under a required sandbox",
        "required sandbox has an entry",
        "arguments are an object",
      ]
    );
  }
}
