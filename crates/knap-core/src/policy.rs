//! The tool-policy evaluator (`decideToolCall`): one host decision per tool call, with the
//! timeout owned here so a policy that never answers fails closed.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::code::Code;
use crate::exec::BoxFuture;
use crate::limits::{DENY_CODE_MAX_CHARS, TOOL_POLICY_TIMEOUT_MS};

/// What the policy sees (`ToolCallPolicyInput`), in the reference's key order.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInput {
  pub run_id: String,
  pub agent_id: String,
  pub agent_path: Vec<String>,
  pub tool_call_id: String,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub parent_tool_call_id: Option<String>,
  pub name: String,
  pub effect: String,
  pub args: Value,
}

/// The host's raw answer.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyAnswer {
  /// `undefined` (or `void`).
  Undefined,
  /// Any other value, as JSON (`null` included).
  Value(Value),
}

/// A host policy. `Err` carries the thrown or rejected error's message.
pub trait ToolPolicy: Send + Sync {
  fn evaluate(&self, input: &PolicyInput) -> BoxFuture<Result<PolicyAnswer, String>>;
}

/// `{ block: true, reason: "cave_tool_denied:<code>" }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
  pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
  /// Threw, rejected, or timed out (`cause` is the message of what happened).
  Failed {
    cause: String,
  },
  DecisionInvalid,
  ReasonInvalid,
}

impl PolicyError {
  pub fn code(&self) -> Code {
    match self {
      PolicyError::Failed { .. } => Code::ToolPolicyFailed,
      PolicyError::DecisionInvalid => Code::ToolPolicyDecisionInvalid,
      PolicyError::ReasonInvalid => Code::ToolPolicyReasonInvalid,
    }
  }

  pub fn cause(&self) -> Option<&str> {
    match self {
      PolicyError::Failed { cause } => Some(cause),
      _ => None,
    }
  }
}

impl std::fmt::Display for PolicyError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(self.code().as_str())
  }
}

impl std::error::Error for PolicyError {}

/// The inner cause of a timeout.
pub const POLICY_TIMEOUT_CAUSE: &str = "cave_tool_policy_timeout";

pub fn default_timeout() -> Duration {
  Duration::from_millis(TOOL_POLICY_TIMEOUT_MS)
}

/// Evaluates `policy` once: `Ok(None)` allows, `Ok(Some(denial))` blocks, `Err` ends the run.
pub async fn decide_tool_call(
  policy: &dyn ToolPolicy,
  input: &PolicyInput,
  timeout: Duration,
) -> Result<Option<Denial>, PolicyError> {
  let answer = match tokio::time::timeout(timeout, policy.evaluate(input)).await {
    Err(_) => {
      return Err(PolicyError::Failed {
        cause: POLICY_TIMEOUT_CAUSE.to_string(),
      })
    }
    Ok(Err(cause)) => return Err(PolicyError::Failed { cause }),
    Ok(Ok(answer)) => answer,
  };
  judge(&answer)
}

/// The decision rules of `decideToolCall`, in the reference's order.
pub fn judge(answer: &PolicyAnswer) -> Result<Option<Denial>, PolicyError> {
  let obj = match answer {
    PolicyAnswer::Undefined | PolicyAnswer::Value(Value::Null) => return Ok(None),
    PolicyAnswer::Value(Value::Object(obj)) => obj,
    PolicyAnswer::Value(_) => return Err(PolicyError::DecisionInvalid),
  };
  if let Some(allow) = obj.get("allow") {
    if allow != &Value::Bool(true) || obj.contains_key("deny") {
      return Err(PolicyError::DecisionInvalid);
    }
    return Ok(None);
  }
  let Some(Value::String(code)) = obj.get("deny") else {
    return Err(PolicyError::DecisionInvalid);
  };
  if !is_deny_code(code) {
    return Err(PolicyError::ReasonInvalid);
  }
  Ok(Some(Denial {
    reason: format!("cave_tool_denied:{code}"),
  }))
}

/// `^[a-z][a-z0-9_]{0,63}$`.
pub fn is_deny_code(code: &str) -> bool {
  let bytes = code.as_bytes();
  !bytes.is_empty()
    && bytes.len() <= DENY_CODE_MAX_CHARS
    && bytes[0].is_ascii_lowercase()
    && bytes
      .iter()
      .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  struct Fake(Result<PolicyAnswer, String>, Option<Duration>);

  impl ToolPolicy for Fake {
    fn evaluate(&self, _: &PolicyInput) -> BoxFuture<Result<PolicyAnswer, String>> {
      let answer = self.0.clone();
      let delay = self.1;
      Box::pin(async move {
        if let Some(d) = delay {
          tokio::time::sleep(d).await;
        }
        answer
      })
    }
  }

  fn input() -> PolicyInput {
    PolicyInput {
      run_id: "r1".into(),
      agent_id: "reviewer".into(),
      agent_path: vec![],
      tool_call_id: "c1".into(),
      parent_tool_call_id: None,
      name: "write_file".into(),
      effect: "write".into(),
      args: json!({"path": "out.txt"}),
    }
  }

  async fn decide(answer: Result<PolicyAnswer, String>) -> Result<Option<Denial>, PolicyError> {
    decide_tool_call(&Fake(answer, None), &input(), default_timeout()).await
  }

  #[tokio::test]
  async fn decisions() {
    assert_eq!(decide(Ok(PolicyAnswer::Undefined)).await, Ok(None));
    assert_eq!(decide(Ok(PolicyAnswer::Value(Value::Null))).await, Ok(None));
    assert_eq!(
      decide(Ok(PolicyAnswer::Value(json!({"allow": true})))).await,
      Ok(None)
    );
    assert_eq!(
      decide(Ok(PolicyAnswer::Value(json!({"deny": "read_only_review"})))).await,
      Ok(Some(Denial {
        reason: "cave_tool_denied:read_only_review".into()
      }))
    );
    for bad in [
      json!("yes"),
      json!(1),
      json!(true),
      json!({}),
      json!({"allow": false}),
      json!({"allow": true, "deny": "x"}),
      json!({"deny": 5}),
      json!([]),
    ] {
      assert_eq!(
        decide(Ok(PolicyAnswer::Value(bad.clone()))).await,
        Err(PolicyError::DecisionInvalid),
        "{bad}"
      );
    }
    for bad in ["Bad Code!", "", "1abc", "_x", &"a".repeat(65)] {
      assert_eq!(
        decide(Ok(PolicyAnswer::Value(json!({"deny": bad})))).await,
        Err(PolicyError::ReasonInvalid),
        "{bad}"
      );
    }
    assert!(decide(Ok(PolicyAnswer::Value(json!({"deny": "a".repeat(64)}))))
      .await
      .unwrap()
      .is_some());
  }

  #[tokio::test]
  async fn throw_is_failed_with_cause() {
    let e = decide(Err("boom".into())).await.unwrap_err();
    assert_eq!(e.code(), "cave_tool_policy_failed");
    assert_eq!(e.cause(), Some("boom"));
  }

  #[tokio::test(start_paused = true)]
  async fn timeout_is_failed() {
    let slow = Fake(Ok(PolicyAnswer::Undefined), Some(Duration::from_secs(3600)));
    let e = decide_tool_call(&slow, &input(), default_timeout())
      .await
      .unwrap_err();
    assert_eq!(
      e,
      PolicyError::Failed {
        cause: POLICY_TIMEOUT_CAUSE.into()
      }
    );
    let quick = Fake(Ok(PolicyAnswer::Undefined), Some(Duration::from_millis(9_999)));
    assert_eq!(
      decide_tool_call(&quick, &input(), default_timeout()).await,
      Ok(None)
    );
  }

  #[test]
  fn input_json_shape() {
    let s = serde_json::to_string(&input()).unwrap();
    assert_eq!(
      s,
      r#"{"runId":"r1","agentId":"reviewer","agentPath":[],"toolCallId":"c1","name":"write_file","effect":"write","args":{"path":"out.txt"}}"#
    );
  }
}
