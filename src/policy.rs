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

/// A run's dispatcher, `(messageJson: string) => string | Promise<string>`: the one weak
/// threadsafe function through which the kernel reaches JS (events, model turns, JS tools, the
/// policy, JS stores), so everything arrives in the order Rust sent it.
#[napi]
pub type JsDispatchFn =
  ThreadsafeFunction<String, Either<Promise<String>, String>, String, Status, false, true>;

/// The run's `toolPolicy` over the run's dispatcher (a weak threadsafe function): it is sent
/// `{"k":"policy","input":…}`.
pub struct JsPolicy {
  f: Arc<JsDispatchFn>,
}

impl JsPolicy {
  pub fn enveloped(f: Arc<JsDispatchFn>) -> Self {
    Self { f }
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
    let json = serde_json::json!({"k": "policy", "input": input}).to_string();
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

fn to_binding(
  decision: std::result::Result<Option<knap_core::policy::Denial>, knap_core::policy::PolicyError>,
) -> BindingDecision {
  match decision {
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

/// Judges a policy's synchronous answer (encoded as for the threadsafe path) at once, with no
/// thread hop: `decideToolCall` calls the policy on the JS thread, as the reference does, and
/// only a Promise answer goes on to `awaitPolicyAnswer` and its timeout.
#[napi]
pub fn judge_policy_answer(encoded: String) -> BindingDecision {
  to_binding(knap_core::policy::judge(&decode_answer(&encoded)))
}

/// A policy that has already answered with a Promise: awaited here under the policy timeout.
struct Answered(std::sync::Mutex<Option<Promise<String>>>);

impl ToolPolicy for Answered {
  fn evaluate(&self, _: &PolicyInput) -> BoxFuture<std::result::Result<PolicyAnswer, String>> {
    let promise = self.0.lock().ok().and_then(|mut p| p.take());
    Box::pin(async move {
      match promise {
        Some(p) => p.await.map(|s| decode_answer(&s)).map_err(|e| e.reason.clone()),
        None => Err("the policy answer was already consumed".to_string()),
      }
    })
  }
}

/// Awaits a policy's Promise answer (resolving to the encoded decision) with the timeout
/// (`TOOL_POLICY_TIMEOUT_MS` unless `timeoutMs`), then judges it.
#[napi]
pub async fn await_policy_answer(answer: Promise<String>, timeout_ms: Option<u32>) -> BindingDecision {
  let timeout = timeout_ms
    .map(|ms| Duration::from_millis(ms as u64))
    .unwrap_or_else(knap_core::policy::default_timeout);
  let input = PolicyInput {
    run_id: String::new(),
    agent_id: String::new(),
    agent_path: Vec::new(),
    tool_call_id: String::new(),
    parent_tool_call_id: None,
    name: String::new(),
    effect: String::new(),
    args: serde_json::Value::Null,
  };
  to_binding(decide_tool_call(&Answered(std::sync::Mutex::new(Some(answer))), &input, timeout).await)
}
