//! The JS `toolPolicy` as an implementation of the core `ToolPolicy` trait, over a weak
//! threadsafe function (so a stored policy never keeps Node alive).
//!
//! The JS side wraps the user's policy so it always returns a string or a Promise of one:
//! `"u"` for `undefined`, `"j" + JSON` for any other value, `"x"` for a value JSON cannot carry.
//! All judging of that value happens in `knap_core::policy::judge`.

use std::sync::Arc;
use std::time::Duration;

use knap_core::exec::BoxFuture;
use knap_core::policy::{decide_tool_call, PolicyAnswer, PolicyInput, ToolPolicy};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

/// `(inputJson: string) => string | Promise<string>`
#[napi]
pub type JsPolicyFn =
  ThreadsafeFunction<String, Either<Promise<String>, String>, String, Status, false, true>;

/// A policy over a JS function. Enveloped policies share a run's dispatcher and are sent
/// `{"k":"policy","input":…}` instead of the bare input.
pub struct JsPolicy {
  f: Arc<JsPolicyFn>,
  enveloped: bool,
}

impl JsPolicy {
  pub fn bare(f: Arc<JsPolicyFn>) -> Self {
    Self { f, enveloped: false }
  }

  pub fn enveloped(f: Arc<JsPolicyFn>) -> Self {
    Self { f, enveloped: true }
  }
}

pub(crate) fn decode_answer(s: &str) -> PolicyAnswer {
  match s.as_bytes().first() {
    Some(b'u') => PolicyAnswer::Undefined,
    Some(b'j') => serde_json::from_str(&s[1..])
      .map(PolicyAnswer::Value)
      .unwrap_or(PolicyAnswer::Value(serde_json::Value::Bool(false))),
    // Not JSON-representable (a function, a symbol, a BigInt): never a valid decision.
    _ => PolicyAnswer::Value(serde_json::Value::Bool(false)),
  }
}

impl ToolPolicy for JsPolicy {
  fn evaluate(&self, input: &PolicyInput) -> BoxFuture<std::result::Result<PolicyAnswer, String>> {
    let f = self.f.clone();
    let input = serde_json::to_value(input).unwrap_or_default();
    let json = if self.enveloped {
      serde_json::json!({"k": "policy", "input": input}).to_string()
    } else {
      input.to_string()
    };
    Box::pin(async move {
      let raw = match f.call_async_catch(json).await {
        Err(e) => return Err(e.reason.clone()),
        Ok(Either::A(promise)) => promise.await.map_err(|e| e.reason.clone())?,
        Ok(Either::B(s)) => s,
      };
      Ok(decode_answer(&raw))
    })
  }
}

/// `decideToolCall`'s outcome: `allow`, `deny` (with `reason`), or `error` (with `code` and,
/// for `cave_tool_policy_failed`, the `cause` message).
#[napi(object)]
pub struct BindingDecision {
  pub outcome: String,
  pub reason: Option<String>,
  pub code: Option<String>,
  pub cause: Option<String>,
}

/// Evaluates a policy once. `timeoutMs` defaults to `TOOL_POLICY_TIMEOUT_MS`.
#[napi]
pub async fn decide_tool_call_native(
  policy: Arc<JsPolicyFn>,
  input_json: String,
  timeout_ms: Option<u32>,
) -> BindingDecision {
  let input: PolicyInput = match parse_input(&input_json) {
    Ok(i) => i,
    Err(message) => {
      return BindingDecision {
        outcome: "error".into(),
        reason: None,
        code: Some("cave_tool_policy_input_invalid".into()),
        cause: Some(message),
      }
    }
  };
  let timeout = timeout_ms
    .map(|ms| Duration::from_millis(ms as u64))
    .unwrap_or_else(knap_core::policy::default_timeout);
  match decide_tool_call(&JsPolicy::bare(policy), &input, timeout).await {
    Ok(None) => BindingDecision {
      outcome: "allow".into(),
      reason: None,
      code: None,
      cause: None,
    },
    Ok(Some(d)) => BindingDecision {
      outcome: "deny".into(),
      reason: Some(d.reason),
      code: None,
      cause: None,
    },
    Err(e) => BindingDecision {
      outcome: "error".into(),
      reason: None,
      code: Some(e.code().to_string()),
      cause: e.cause().map(str::to_string),
    },
  }
}

fn parse_input(json: &str) -> std::result::Result<PolicyInput, String> {
  let v: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
  let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or_default().to_string();
  Ok(PolicyInput {
    run_id: s("runId"),
    agent_id: s("agentId"),
    agent_path: v
      .get("agentPath")
      .and_then(|p| p.as_array())
      .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
      .unwrap_or_default(),
    tool_call_id: s("toolCallId"),
    parent_tool_call_id: v
      .get("parentToolCallId")
      .and_then(|x| x.as_str())
      .map(str::to_string),
    name: s("name"),
    effect: s("effect"),
    args: v.get("args").cloned().unwrap_or(serde_json::Value::Null),
  })
}
