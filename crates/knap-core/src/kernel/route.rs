//! `RunOptions.modelRouter` (caveman-serve-plugins-memory.md §5.8): before every root provider
//! call — each working call, and a paid compaction summarizer — the host's router is asked which
//! model of the run's provider serves it. Its decision is checked here against the core's
//! catalog; the chosen model serves that call (priced for it, named in the receipt) and, for a
//! working call, stays the working model until the router picks another. Subagents are never
//! routed. Without a router, a context with images on a model without image input is refused.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::budget::{Denomination, Meter, Price};
use super::event::RunEvent;
use super::level::Level;
use super::message::{count, AssistantMessage, Message, Part, UserContent};
use super::spec::ModelRef;
use crate::catalog;
use crate::code::{Code, Error};
use crate::exec::BoxFuture;

/// What the router sees (`ModelCallRouteInput`), in the reference's key order.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteInput {
  /// Routed root calls so far (paid compactions included); a resumed durable run starts at its
  /// journaled root model calls.
  pub call_index: u64,
  /// `"working"` or `"compaction"`.
  pub role: &'static str,
  /// The provider of the run's own model.
  pub provider: String,
  /// `"provider/id"` of the model the call would go to: the working model, or for a compaction
  /// the summarizer candidate (`summarizerModel` when its window holds the history).
  pub current_model: String,
  /// The budget's input ceiling (bytes/4 + 16 per message, capped at the working model's window).
  pub ctx_tokens: u64,
  pub has_images: bool,
  /// Consecutive failed tool results (a success resets it).
  pub tool_error_streak: u64,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub previous_usage: Option<PreviousUsage>,
}

/// The usage of the previous root provider call.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreviousUsage {
  /// `"provider/id"` of the model that served it.
  pub model: String,
  /// Absent when the provider reported none.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub input_tokens: Option<u64>,
  pub cache_read_tokens: u64,
  pub cache_write_tokens: u64,
}

/// A valid decision (`ModelCallRouteDecision`): the `model_route` event's `decision`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RouteDecision {
  pub model: String,
  pub reason: String,
  pub signals: Vec<String>,
}

/// The host's router. `Ok` is the decision as plain data (any JSON value: the shape is judged
/// here); `Err` is the message of what it threw or rejected with.
pub trait ModelRouter: Send + Sync {
  fn route(&self, input: &RouteInput) -> BoxFuture<Result<Value, String>>;
}

/// The model one call goes to.
#[derive(Debug, Clone)]
pub(super) struct Chosen {
  pub model: ModelRef,
  pub price: Option<Price>,
}

/// The root run's routing state.
pub(super) struct Routing {
  router: Option<Arc<dyn ModelRouter>>,
  /// The run's own model (the JS side holds its object under `base.key`).
  base: ModelRef,
  /// Whether the run's own model takes images (`None`: its object did not say).
  base_images: Option<bool>,
  calls: u64,
  streak: u64,
  previous: Option<PreviousUsage>,
}

/// `cave_model_route_decision_invalid` unless `value` is `{model: non-empty string, reason:
/// string, signals: string[]}` (other keys are ignored).
pub fn parse_decision(value: &Value) -> Result<RouteDecision, Error> {
  let invalid = || {
    Error::coded(
      Code::ModelRouteDecisionInvalid,
      "a route decision is {model: \"provider/id\", reason: string, signals: string[]}",
    )
  };
  let o = value.as_object().ok_or_else(invalid)?;
  let model = o
    .get("model")
    .and_then(Value::as_str)
    .filter(|m| !m.is_empty())
    .ok_or_else(invalid)?;
  let reason = o.get("reason").and_then(Value::as_str).ok_or_else(invalid)?;
  let signals = o
    .get("signals")
    .and_then(Value::as_array)
    .ok_or_else(invalid)?
    .iter()
    .map(|s| s.as_str().map(str::to_string).ok_or_else(invalid))
    .collect::<Result<Vec<_>, _>>()?;
  Ok(RouteDecision {
    model: model.to_string(),
    reason: reason.to_string(),
    signals,
  })
}

fn key(m: &ModelRef) -> String {
  format!("{}/{}", m.provider, m.id)
}

/// Checks a decision in the reference's order: provider, catalog, images, context. The run's
/// own model is always known (it need not be in the catalog: a custom or test model), and so is
/// a compaction's `candidate` (the run's `summarizerModel`, of any provider).
pub(super) fn check(
  decision: &RouteDecision,
  base: &ModelRef,
  base_images: Option<bool>,
  candidate: Option<&ModelRef>,
  ctx_tokens: u64,
  has_images: bool,
) -> Result<Chosen, Error> {
  let m = decision.model.as_str();
  let incompatible = |what: &str| Error::tagged(Code::ModelRouteIncompatible, &[m, what]);
  let (images, chosen) = if let Some(c) = candidate.filter(|c| m == key(c) && m != key(base)) {
    let entry = catalog::lookup(&c.provider, &c.id);
    let chosen = Chosen {
      model: c.clone(),
      price: catalog::price(&c.provider, &c.id),
    };
    (entry.map(|e| e.input.iter().any(|i| i == "image")), chosen)
  } else if m == key(base) {
    let chosen = Chosen {
      model: base.clone(),
      price: catalog::price(&base.provider, &base.id),
    };
    (base_images, chosen)
  } else {
    match m.split_once('/') {
      Some((provider, _)) if provider != base.provider => {
        return Err(Error::coded(
          Code::ModelRouteCrossProvider,
          format!(
            "{m} is not a {} model (a router picks among the run's provider's models)",
            base.provider
          ),
        ))
      }
      _ => {}
    }
    let Some(entry) = m.split_once('/').and_then(|(p, id)| catalog::lookup(p, id)) else {
      return Err(Error::tagged(Code::ModelRouteUnknown, &[m]));
    };
    let chosen = Chosen {
      model: ModelRef {
        key: base.key,
        provider: entry.provider.clone(),
        id: entry.id.clone(),
        context_window: Some(entry.context_window).filter(|&w| w > 0),
        max_tokens: Some(entry.max_tokens).filter(|&t| t > 0),
      },
      price: entry.price(),
    };
    (Some(entry.input.iter().any(|i| i == "image")), chosen)
  };
  if has_images && images == Some(false) {
    return Err(incompatible("images"));
  }
  if chosen.model.context_window.is_some_and(|w| ctx_tokens > w) {
    return Err(incompatible("context"));
  }
  Ok(chosen)
}

/// Whether a message carries an image part.
pub(super) fn has_image(message: &Message) -> bool {
  let parts = match message {
    Message::User(u) => match &u.content {
      UserContent::Parts(parts) => parts.as_slice(),
      UserContent::Text(_) => return false,
    },
    Message::ToolResult(t) => t.content.as_slice(),
    _ => return false,
  };
  parts.iter().any(|p| matches!(p, Part::Image(_)))
}

impl Level {
  /// The root run routes its calls (`router`), or at least checks image input (`base_images`).
  /// `prior_calls`: a resumed durable run's journaled root model calls.
  pub(crate) fn enable_routing(
    &mut self,
    router: Option<Arc<dyn ModelRouter>>,
    base_images: Option<bool>,
    prior_calls: u64,
  ) {
    if router.is_some() {
      // ctxTokens needs the context's size, measured as a budget measures it.
      self.transcript.measure();
    }
    self.routing = Some(Routing {
      router,
      base: self.agent.model.clone(),
      base_images,
      calls: prior_calls,
      streak: 0,
      previous: None,
    });
  }

  /// Whether the router needs the context measured (as a budget does).
  pub(super) fn routed(&self) -> bool {
    self.routing.as_ref().is_some_and(|r| r.router.is_some())
  }

  /// `"provider/id"` of a call that goes to a model other than the one the host holds under the
  /// key (`None`: the run's own model).
  pub(super) fn call_model(&self, model: &ModelRef) -> Option<String> {
    let r = self.routing.as_ref()?;
    (model.provider != r.base.provider || model.id != r.base.id).then(|| key(model))
  }

  /// Before a root provider call: the router's decision (checked), or, without a router, the
  /// image check. `Ok(None)`: no router (the call goes to the working model).
  /// `compaction`: a summarizer call's candidate model and the size of the history it is sent
  /// (`None`: a working call, on the working model and the context).
  pub(super) async fn route(
    &mut self,
    role: &'static str,
    compaction: Option<(&ModelRef, u64)>,
  ) -> Result<Option<Chosen>, Error> {
    let candidate = compaction.map(|(m, _)| m);
    let Some(r) = &self.routing else {
      return Ok(None);
    };
    let working = &self.agent.model;
    let has_images = self.transcript.images;
    let Some(router) = r.router.clone() else {
      if has_images && r.base_images == Some(false) {
        return Err(Error::tagged(
          Code::ModelInputUnsupported,
          &[&key(working), "images"],
        ));
      }
      return Ok(None);
    };
    let ctx_tokens = match compaction {
      Some((m, tokens)) => tokens.min(m.context_window.filter(|&w| w > 0).unwrap_or(u64::MAX)),
      None => Meter::input_ceiling(
        self.transcript.context_bytes(),
        self.transcript.message_count,
        working.context_window,
      ),
    };
    let input = RouteInput {
      call_index: r.calls,
      role,
      provider: r.base.provider.clone(),
      current_model: key(candidate.unwrap_or(working)),
      ctx_tokens,
      has_images,
      tool_error_streak: r.streak,
      previous_usage: r.previous.clone(),
    };
    if let Some(r) = &mut self.routing {
      r.calls += 1;
    }
    let cancel = self.shared.cancel.clone();
    let answer = tokio::select! {
      a = router.route(&input) => a,
      _ = cancel.cancelled() => return Err(Error::coded(Code::RunAborted, "the run was aborted")),
    };
    // A router that throws fails the run with its error, as a failed provider call does.
    let value = answer.map_err(|message| Error::new(Code::AgentRunFailed, message))?;
    let decision = parse_decision(&value)?;
    let r = self.routing.as_ref().expect("checked above");
    let chosen = check(&decision, &r.base, r.base_images, candidate, ctx_tokens, has_images)?;
    if let Some(m) = &self.accounting.meter {
      if m.denomination() == Denomination::Usd && chosen.price.is_none() {
        return Err(Error::coded(
          Code::BudgetDenominationUnavailable,
          format!(
            "{} is not in the public catalog, so a USD budget cannot meter it — route to a cataloged model",
            decision.model
          ),
        ));
      }
    }
    self.shared.host.emit(RunEvent::ModelRoute {
      run_id: self.run_id.clone(),
      decision,
    });
    Ok(Some(chosen))
  }

  /// A working call's decision: the chosen model becomes the working model (its price, window
  /// and output cap), until the router picks another.
  pub(super) fn adopt(&mut self, chosen: Chosen) {
    if self.agent.model.provider != chosen.model.provider || self.agent.model.id != chosen.model.id {
      Arc::make_mut(&mut self.agent).model = chosen.model;
      self.accounting.price = chosen.price;
    }
  }

  /// A root provider call's usage, for the next `previousUsage`.
  pub(super) fn note_usage(&mut self, model: &ModelRef, message: &AssistantMessage) {
    if let Some(r) = &mut self.routing {
      let u = &message.usage;
      r.previous = Some(PreviousUsage {
        model: key(model),
        input_tokens: u.input.as_ref().map(|_| count(&u.input)),
        cache_read_tokens: count(&u.cache_read),
        cache_write_tokens: count(&u.cache_write),
      });
    }
  }

  /// A tool result (a direct one, or a composite's nested call): the error streak.
  pub(super) fn note_tool_result(&mut self, is_error: bool) {
    if let Some(r) = &mut self.routing {
      r.streak = if is_error { r.streak + 1 } else { 0 };
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  fn base() -> ModelRef {
    ModelRef {
      key: 0,
      provider: "anthropic".into(),
      id: "faux-1".into(),
      context_window: Some(200_000),
      max_tokens: Some(4_000),
    }
  }

  fn decision(model: &str) -> RouteDecision {
    parse_decision(&json!({"model": model, "reason": "r", "signals": ["s"]})).unwrap()
  }

  #[test]
  fn the_shape_is_model_reason_and_string_signals() {
    for bad in [
      json!(null),
      json!("anthropic/claude-haiku-4-5"),
      json!([]),
      json!({"reason": "r", "signals": []}),
      json!({"model": "", "reason": "r", "signals": []}),
      json!({"model": 1, "reason": "r", "signals": []}),
      json!({"model": "a/b", "signals": []}),
      json!({"model": "a/b", "reason": "r"}),
      json!({"model": "a/b", "reason": "r", "signals": "s"}),
      json!({"model": "a/b", "reason": "r", "signals": ["s", 2]}),
    ] {
      let e = parse_decision(&bad).unwrap_err();
      assert_eq!(e.code, Code::ModelRouteDecisionInvalid, "{bad}");
      assert!(
        e.message.starts_with("cave_model_route_decision_invalid"),
        "{}",
        e.message
      );
    }
    let d = parse_decision(&json!({"model": "a/b", "reason": "", "signals": [], "extra": 1})).unwrap();
    assert_eq!(
      d,
      RouteDecision {
        model: "a/b".into(),
        reason: String::new(),
        signals: vec![]
      }
    );
  }

  #[test]
  fn decisions_are_checked_in_the_references_order() {
    let b = base();
    let err = |m: &str, ctx: u64, images: bool| {
      check(&decision(m), &b, Some(true), None, ctx, images)
        .unwrap_err()
        .message
    };
    assert!(err("openai/gpt-5.4-mini", 10, false).starts_with("cave_model_route_cross_provider"));
    // A different provider is refused before the catalog is consulted.
    assert!(err("openai/no-such-model", 10, false).starts_with("cave_model_route_cross_provider"));
    assert_eq!(
      err("anthropic/no-such-model", 10, false),
      "cave_model_route_unknown:anthropic/no-such-model"
    );
    assert_eq!(
      err("claude-haiku-4-5", 10, false),
      "cave_model_route_unknown:claude-haiku-4-5"
    );
    let haiku = catalog::lookup("anthropic", "claude-haiku-4-5").unwrap();
    let window = haiku.context_window;
    assert_eq!(
      err("anthropic/claude-haiku-4-5", window + 1, false),
      "cave_model_route_incompatible:anthropic/claude-haiku-4-5:context"
    );
    let ok = check(
      &decision("anthropic/claude-haiku-4-5"),
      &b,
      Some(true),
      None,
      window,
      false,
    )
    .unwrap();
    assert_eq!(ok.model.id, "claude-haiku-4-5");
    assert_eq!(ok.model.key, 0);
    assert_eq!(ok.model.context_window, Some(window));
    assert_eq!(ok.price, haiku.price());
    // The run's own model is known without the catalog; its image input is the run's.
    let own = check(&decision("anthropic/faux-1"), &b, Some(true), None, 10, true).unwrap();
    assert_eq!(
      (own.model.id.as_str(), own.model.context_window),
      ("faux-1", Some(200_000))
    );
    let e = check(&decision("anthropic/faux-1"), &b, Some(false), None, 10, true).unwrap_err();
    assert_eq!(e.message, "cave_model_route_incompatible:anthropic/faux-1:images");
    assert_eq!(e.code, Code::ModelRouteIncompatible);
  }

  #[test]
  fn a_text_only_catalog_model_refuses_images() {
    let b = ModelRef {
      provider: "openai".into(),
      ..base()
    };
    let gpt4 = catalog::lookup("openai", "gpt-4").expect("a text-only model in the catalog");
    assert!(!gpt4.input.iter().any(|i| i == "image"));
    let e = check(&decision("openai/gpt-4"), &b, Some(true), None, 1, true).unwrap_err();
    assert_eq!(e.message, "cave_model_route_incompatible:openai/gpt-4:images");
    assert!(check(&decision("openai/gpt-4"), &b, Some(true), None, 1, false).is_ok());
  }
}
