//! Executing one admitted tool call: a native tool inside Rust, a host (JS) tool through the
//! host, a subagent as a child run; the result-size rules; journaling around the call on a
//! durable run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::accounting::ChildReport;
use super::host::{DurableContext, HostToolCall};
use super::journaling::{DurableRun, Settled};
use super::level::Level;
use super::nested::{Container, Routed};
use super::message::{Part, TextPart, ToolResultDetails, ToolResultValue, UserContent};
use super::run::Shared;
use super::schema::validate;
use super::spec::{ToolRuntime, ToolSpec};
use crate::code::{Code, Error};
use crate::durable::canonical::child_path;
use crate::durable::record::ToolIdentity;
use crate::limits::{EFFECT_SETTLE_MS, INLINE_TOOL_RESULT_MAX_BYTES, NESTED_SETTLE_MS, TOOL_RESULT_MAX_BYTES};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What executing one tool call produced.
pub(super) struct Executed {
  pub text: String,
  pub is_error: bool,
  pub child: Option<ChildReport>,
}

impl Executed {
  pub fn error(text: impl Into<String>) -> Self {
    Self {
      text: text.into(),
      is_error: true,
      child: None,
    }
  }

  fn failed(e: Error) -> Self {
    Self::error(e.message)
  }

  /// The tool result Pi builds for this outcome.
  pub fn result_value(&self, tool: Option<&ToolSpec>) -> ToolResultValue {
    result_value(self.text.clone(), self.is_error, tool)
  }

  /// [`Executed::result_value`], taking the text instead of copying it (the transcript's copy).
  pub fn into_result_value(self, tool: Option<&ToolSpec>) -> (ToolResultValue, Option<ChildReport>) {
    (result_value(self.text, self.is_error, tool), self.child)
  }
}

fn result_value(text: String, is_error: bool, tool: Option<&ToolSpec>) -> ToolResultValue {
  let details = match (is_error, tool) {
    (false, Some(t)) => ToolResultDetails::Produced {
      effect: t.effect.clone(),
      result_policy: t.result.clone(),
    },
    (false, None) => ToolResultDetails::Produced {
      effect: String::new(),
      result_policy: "auto".into(),
    },
    (true, _) => ToolResultDetails::Error {},
  };
  ToolResultValue {
    content: vec![Part::Text(TextPart::new(text))],
    details,
  }
}

/// Where a call runs from: the calling agent run's identity.
pub(super) struct ExecContext {
  pub shared: Arc<Shared>,
  pub agent_path: Vec<String>,
  /// The calling level's durable path.
  pub path: String,
  pub depth: u32,
  /// `context.durable` for the tool.
  pub durable: Option<DurableContext>,
  /// Stops the call: a native tool's processes are killed, and for a nested call a host tool
  /// is asked to stop and the call ends at once (a top-level host tool is stopped by the host's
  /// own abort of the run).
  pub cancel: CancellationToken,
  /// The call is a nested call of a composite (see [`HostToolCall::nested`]).
  pub nested: bool,
  /// A nested call's container id (`context.parentToolCallId`); the call's own id otherwise.
  pub parent: Option<String>,
  /// Where a composite container's dispatches go: the calling level's nested channel.
  pub link: Option<mpsc::UnboundedSender<Routed>>,
  /// The tool's index in the calling level's tools (a container's identity there).
  pub index: usize,
  /// A cell's activated speculative calls (its claims take them).
  pub bets: Vec<Arc<super::speculation::Bet>>,
}

/// The tool a dispatched call runs, owned by its future without copying the spec (its input
/// schema, description, ...): a tool of the level's agent is the shared agent and an index.
pub(super) enum ToolRef {
  Of(Arc<super::spec::AgentSpec>, usize),
  Own(Box<ToolSpec>),
}

impl std::ops::Deref for ToolRef {
  type Target = ToolSpec;
  fn deref(&self) -> &ToolSpec {
    match self {
      ToolRef::Of(agent, i) => &agent.tools[*i],
      ToolRef::Own(tool) => tool,
    }
  }
}

/// Journals the intent (unless re-driving a recorded one), runs the call, journals the outcome.
pub(super) async fn execute_journaled(
  ctx: ExecContext,
  tool: ToolRef,
  args: Value,
  identity: ToolIdentity,
  wallet: Option<super::budget::Meter>,
  durable: Arc<DurableRun>,
  write_intent: bool,
) -> Executed {
  if write_intent {
    if let Err(e) = durable.tool_intent(&identity).await {
      durable.set_fatal(e.clone());
      return Executed::failed(e);
    }
  }
  let out = execute(ctx, &tool, args, identity.tool_call_id.clone(), wallet).await;
  let value;
  let settled = if out.is_error {
    Settled::Threw(&out.text)
  } else {
    value = out.result_value(Some(&tool));
    Settled::Returned(&value)
  };
  if let Err(e) = durable.tool_settled(&identity, settled).await {
    durable.set_fatal(e.clone());
    return Executed {
      text: e.message,
      is_error: true,
      child: out.child,
    };
  }
  out
}

/// One subagent run in flight: counted against `maxConcurrentSubagents` until dropped (the child
/// finished, failed or was cancelled).
struct SubagentSlot<'a> {
  active: Option<&'a AtomicU64>,
}

impl<'a> SubagentSlot<'a> {
  /// Counts one invocation and one active run, or refuses with the limit's code. A refused call
  /// uses up neither count.
  fn take(shared: &'a Shared) -> Result<Self, Code> {
    let limits = &shared.limits;
    let under = |max: Option<u32>| move |n: u64| max.map_or(true, |m| n < m as u64).then_some(n + 1);
    let active = match limits.max_concurrent_subagents {
      None => None,
      Some(_) => {
        shared
          .subagents_active
          .fetch_update(Ordering::AcqRel, Ordering::Acquire, under(limits.max_concurrent_subagents))
          .map_err(|_| Code::SubagentConcurrencyLimit)?;
        Some(&shared.subagents_active)
      }
    };
    let slot = SubagentSlot { active };
    if limits.max_subagent_invocations.is_some() {
      shared
        .subagent_invocations
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, under(limits.max_subagent_invocations))
        .map_err(|_| Code::SubagentInvocationLimit)?;
    }
    Ok(slot)
  }
}

impl Drop for SubagentSlot<'_> {
  fn drop(&mut self) {
    if let Some(a) = self.active {
      a.fetch_sub(1, Ordering::AcqRel);
    }
  }
}

/// Executes one admitted call. Never fails: errors become error results the model reads.
pub(super) async fn execute(
  mut ctx: ExecContext,
  tool: &ToolSpec,
  args: Value,
  tool_call_id: String,
  wallet: Option<super::budget::Meter>,
) -> Executed {
  let timeout = Duration::from_millis(tool.timeout_ms.max(1));
  match &tool.runtime {
    ToolRuntime::Native {
      toolset,
      has_on_output,
    } => {
      let Some(tools) = ctx.shared.host.native_toolset(*toolset) else {
        return Executed::failed(Error::coded(
          Code::ToolDefinitionInvalid,
          format!("native tool set {toolset} is gone"),
        ));
      };
      let token = ctx.cancel.child_token();
      match tokio::time::timeout(timeout, tools.execute(&tool.name, &args, token.clone())).await {
        Err(_) => {
          token.cancel();
          Executed::failed(Error::bare(Code::ToolTimeout))
        }
        Ok(Err(e)) => Executed::error(e.message),
        Ok(Ok(out)) => {
          if let (true, Some(label)) = (*has_on_output, &out.label) {
            ctx.shared.host.on_output(*toolset, label, &out.text);
          }
          settle_text(tool, out.text)
        }
      }
    }
    ToolRuntime::Host { key } => {
      let call_id = ctx.shared.next_call.fetch_add(1, Ordering::Relaxed);
      // A composite container: its dispatches are routed to the calling level while it runs.
      let inbox = ctx.shared.host.nested_inbox().filter(|_| tool.is_composite() && !ctx.nested);
      let container = match (&inbox, &ctx.link) {
        (Some(inbox), Some(tx)) => {
          let bets = std::mem::take(&mut ctx.bets);
          let c = Container::with_bets(tool_call_id.clone(), ctx.index, ctx.cancel.child_token(), bets);
          inbox.open(call_id, tx.clone(), c.clone());
          Some((inbox.clone(), c))
        }
        _ => None,
      };
      let call = HostToolCall {
        call_id,
        key: *key,
        args,
        parent_tool_call_id: ctx.parent.clone().unwrap_or_else(|| tool_call_id.clone()),
        tool_call_id,
        durable: ctx.durable.clone(),
        composite: container.is_some(),
        nested: ctx.nested,
      };
      let mut call = ctx.shared.host.tool_call(call);
      let cancel = ctx.cancel.clone();
      let abortable = ctx.nested;
      let mut answered = tokio::select! {
        r = tokio::time::timeout(timeout, &mut call) => r.map_err(|_| Code::ToolTimeout),
        _ = cancel.cancelled(), if abortable => Err(Code::NestedToolAborted),
      };
      if matches!(answered, Err(Code::ToolTimeout)) && !ctx.nested && tool.effect != "read" {
        // A non-read body is told to stop and gets a bounded time to settle: an effect still
        // running after that is reported, not silently left behind.
        ctx.shared.host.abort_tool(call_id);
        if tokio::time::timeout(Duration::from_millis(EFFECT_SETTLE_MS), &mut call).await.is_err() {
          answered = Err(Code::ToolEffectUnquiesced);
        }
      }
      drop(call);
      if let Some((inbox, c)) = &container {
        // `dispatch` closes once `execute` settles; what it admitted gets a bounded time to
        // settle, then is aborted with the container. Bets the cell did not claim are
        // abandoned now.
        inbox.close(call_id);
        for key in c.abandon_unclaimed().into_iter().flatten() {
          ctx.shared.host.speculation(key, super::speculation::SpeculationCount::Abandoned);
        }
        if answered.is_err() {
          c.signal.cancel();
          c.stop_bets();
        }
        if !c.quiesced(Duration::from_millis(NESTED_SETTLE_MS)).await {
          c.signal.cancel();
          c.stop_bets();
          return Executed::failed(Error::bare(Code::ProgramNestedCallsUnquiesced));
        }
      }
      match answered {
        Err(code) => {
          ctx.shared.host.abort_tool(call_id);
          Executed::failed(Error::bare(code))
        }
        Ok(Err(e)) => Executed::error(e.message),
        Ok(Ok(text)) => {
          if let Some(schema) = &tool.output {
            let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
            if !validate(schema, &value).is_empty() {
              return Executed::failed(Error::tagged(Code::ToolOutputSchemaMismatch, &[&tool.name]));
            }
          }
          settle_text(tool, text)
        }
      }
    }
    ToolRuntime::Subagent {
      agent,
      max_context_tokens,
      ..
    } => {
      // Tree-wide admission, after the gate's per-tool checks and wallet (the reference's
      // order), before the context check.
      let _active = match SubagentSlot::take(&ctx.shared) {
        Ok(slot) => slot,
        Err(code) => return Executed::failed(Error::bare(code)),
      };
      let task = args.get("task").and_then(Value::as_str).unwrap_or_default();
      if (task.len() as u64).div_ceil(4) > *max_context_tokens {
        return Executed::failed(Error::bare(Code::SubagentContextBudget));
      }
      let mut agent_path = ctx.agent_path.clone();
      agent_path.push(tool.name.clone());
      let path = child_path(&ctx.path, &tool.name, &tool_call_id);
      let mut level = Level::new(
        ctx.shared.clone(),
        Arc::new((**agent).clone()),
        uuid::Uuid::new_v4().to_string(),
        agent_path,
        path,
        ctx.depth + 1,
        wallet.map(super::budget::MeterCell::new),
        false,
      );
      // A child on a wallet compacts under the root budget's options, on its own counters.
      if let (Some(c), true) = (&ctx.shared.compaction, level.accounting.metered()) {
        level.enable_compaction(c.clone());
      }
      let input = UserContent::Parts(vec![Part::Text(TextPart::new(task))]);
      match level.run(input, Instant::now()).await {
        Err(f) => Executed {
          text: f.error.message,
          is_error: true,
          child: f.receipt.into_built().map(|r| ChildReport::of(r, None)),
        },
        Ok(result) => {
          let text = serde_json::json!({
            "text": result.text, "agent_id": result.agent_id, "usage_basis": result.usage_basis,
            "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
            "cost_usd": result.cost_usd, "stop_reason": result.stop_reason, "claim_basis": "inferred"
          })
          .to_string();
          let receipt = result.receipt.clone();
          Executed {
            text,
            is_error: false,
            child: Some(ChildReport::of(receipt, Some(&result))),
          }
        }
      }
    }
  }
}

/// Result-size rules of `toPiTool` / `settleToolOutput`.
fn settle_text(tool: &ToolSpec, text: String) -> Executed {
  if text.len() > TOOL_RESULT_MAX_BYTES {
    return Executed::failed(Error::tagged(Code::ToolResultLimit, &[&tool.name]));
  }
  if text.len() > INLINE_TOOL_RESULT_MAX_BYTES {
    return Executed::failed(Error::bare(match tool.result.as_str() {
      "inline" => Code::ToolResultInlineLimit,
      _ => Code::ToolResultRequiresRecovery,
    }));
  }
  Executed {
    text,
    is_error: false,
    child: None,
  }
}
