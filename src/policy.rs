//! A `toolPolicy`'s answer as the core reads it. The policy's raw return value (or what its
//! Promise resolves to) is read straight off the JS value, with no JSON in between; all judging
//! happens in `knap_core::policy::judge`.

use std::time::Duration;

use knap_core::exec::BoxFuture;
use knap_core::policy::{decide_tool_call, PolicyAnswer, PolicyInput, ToolPolicy};
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use serde_json::Value;

use crate::js::{type_of, unknown_js_type};

/// A policy's decision value, as `judge` needs it: `undefined`, `null`, an object's `allow` and
/// `deny` members, or anything else (never a valid decision).
pub struct PolicyAnswerJs(pub PolicyAnswer);

/// A member of a decision object, as JSON would carry it (`None` when undefined).
pub(crate) unsafe fn member(env: sys::napi_env, object: sys::napi_value, key: &std::ffi::CStr) -> Result<Option<Value>> {
  let mut v = std::ptr::null_mut();
  check_status!(unsafe { sys::napi_get_named_property(env, object, key.as_ptr(), &mut v) })?;
  Ok(match unsafe { type_of(env, v) }? {
    ValueType::Undefined => None,
    ValueType::Boolean => Some(Value::Bool(unsafe { bool::from_napi_value(env, v) }?)),
    ValueType::String => Some(Value::String(unsafe { String::from_napi_value(env, v) }?)),
    ValueType::Null => Some(Value::Null),
    // Numbers, objects and the rest: never `true` and never a string, which is all `judge` asks.
    _ => Some(Value::Array(Vec::new())),
  })
}

impl FromNapiValue for PolicyAnswerJs {
  unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
    Ok(PolicyAnswerJs(match unsafe { type_of(env, value) }? {
      ValueType::Undefined => PolicyAnswer::Undefined,
      ValueType::Null => PolicyAnswer::Value(Value::Null),
      ValueType::Object => {
        let mut map = serde_json::Map::new();
        for key in [c"allow", c"deny"] {
          if let Some(v) = unsafe { member(env, value, key) }? {
            map.insert(key.to_str().unwrap_or_default().to_string(), v);
          }
        }
        PolicyAnswer::Value(Value::Object(map))
      }
      // Not a decision (a string, a number, a function, a symbol, a BigInt).
      _ => PolicyAnswer::Value(Value::Bool(false)),
    }))
  }
}

unknown_js_type!(PolicyAnswerJs);

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

/// Judges a policy's synchronous answer at once, with no thread hop: `decideToolCall` calls the
/// policy on the JS thread, as the reference does, and only a Promise answer goes on to
/// `awaitPolicyAnswer` and its timeout.
#[napi]
pub fn judge_policy_answer(#[napi(ts_arg_type = "unknown")] answer: PolicyAnswerJs) -> BindingDecision {
  to_binding(knap_core::policy::judge(&answer.0))
}

/// A policy that has already answered with a Promise: awaited here under the policy timeout.
struct Answered(std::sync::Mutex<Option<Promise<PolicyAnswerJs>>>);

impl ToolPolicy for Answered {
  fn evaluate(&self, _: &PolicyInput) -> BoxFuture<std::result::Result<PolicyAnswer, String>> {
    let promise = self.0.lock().ok().and_then(|mut p| p.take());
    Box::pin(async move {
      match promise {
        Some(p) => p.await.map(|a| a.0).map_err(|e| e.reason.clone()),
        None => Err("the policy answer was already consumed".to_string()),
      }
    })
  }
}

/// Awaits a policy's Promise answer with the timeout (`TOOL_POLICY_TIMEOUT_MS` unless
/// `timeoutMs`), then judges it.
#[napi]
pub async fn await_policy_answer(
  #[napi(ts_arg_type = "Promise<unknown>")] answer: Promise<PolicyAnswerJs>,
  timeout_ms: Option<u32>,
) -> BindingDecision {
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
    args: Value::Null,
  };
  to_binding(decide_tool_call(&Answered(std::sync::Mutex::new(Some(answer))), &input, timeout).await)
}
