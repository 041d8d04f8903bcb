//! `defineRunReceipt` / `validateRunReceipt`: the strict receipt parser of
//! `caveman.agent.run-receipt.v1`. Every failure is `cave_run_receipt_invalid:<field>`.
//! The JS layer snapshots the value (no getters, no cycles, no `-0`) and hands the JSON here.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::durable::valid_run_id;

pub const RECEIPT_MAX_BYTES: usize = 16 * 1024 * 1024;
pub const RECEIPT_MAX_STRING_BYTES: usize = 1024 * 1024;
pub const RECEIPT_MAX_ARRAY_ITEMS: usize = 65_536;
pub const RECEIPT_MAX_OBJECT_KEYS: usize = 32;
pub const RECEIPT_MAX_DEPTH: usize = 32;
pub const RECEIPT_MAX_NODES: usize = 200_000;
pub const RECEIPT_MAX_SUBAGENT_DEPTH: usize = 8;

const STOP_REASONS: &[&str] = &[
  "complete",
  "budget_exhausted",
  "deadline",
  "loop_detected",
  "no_progress",
  "wallet_revoked",
  "call_budget_exhausted",
];

type Check<T = ()> = Result<T, String>;

fn fail<T>(field: &str) -> Check<T> {
  Err(format!("cave_run_receipt_invalid:{field}"))
}

/// Validates receipt JSON text; `Ok(())` when every invariant holds.
pub fn validate_receipt_json(text: &str) -> Check {
  if text.len() > RECEIPT_MAX_BYTES {
    return fail("bytes");
  }
  let value: Value = serde_json::from_str(text).or_else(|_| fail("identity"))?;
  let mut nodes = 0;
  bounds(&value, 0, &mut nodes)?;
  let mut ids = HashSet::new();
  receipt(&value, 0, None, &mut ids).map(|_| ())
}

fn bounds(v: &Value, depth: usize, nodes: &mut usize) -> Check {
  *nodes += 1;
  if depth > RECEIPT_MAX_DEPTH || *nodes > RECEIPT_MAX_NODES {
    return fail("bounds");
  }
  match v {
    Value::String(s) if s.len() > RECEIPT_MAX_STRING_BYTES => fail("string_bytes"),
    Value::Array(a) => {
      if a.len() > RECEIPT_MAX_ARRAY_ITEMS {
        return fail("bounds");
      }
      a.iter().try_for_each(|x| bounds(x, depth + 1, nodes))
    }
    Value::Object(o) => {
      if o.len() > RECEIPT_MAX_OBJECT_KEYS {
        return fail("bounds");
      }
      o.values().try_for_each(|x| bounds(x, depth + 1, nodes))
    }
    _ => Ok(()),
  }
}

fn keys(o: &Map<String, Value>, required: &[&str], optional: &[&str], field: &str) -> Check {
  if !required.iter().all(|k| o.contains_key(*k)) || !o.keys().all(|k| required.contains(&k.as_str()) || optional.contains(&k.as_str())) {
    return fail(field);
  }
  Ok(())
}

fn obj<'v>(v: &'v Value, field: &str) -> Check<&'v Map<String, Value>> {
  v.as_object().map_or_else(|| fail(field), Ok)
}

fn num(o: &Map<String, Value>, k: &str, field: &str) -> Check<f64> {
  match o.get(k).and_then(Value::as_f64) {
    Some(n) if n.is_finite() => Ok(n),
    _ => fail(field),
  }
}

fn nonneg(o: &Map<String, Value>, k: &str, field: &str) -> Check<f64> {
  let n = num(o, k, field)?;
  if n < 0.0 {
    return fail(field);
  }
  Ok(n)
}

fn count(o: &Map<String, Value>, k: &str, field: &str) -> Check<u64> {
  let n = nonneg(o, k, field)?;
  if n.fract() != 0.0 || n > crate::limits::MAX_SAFE_INTEGER {
    return fail(field);
  }
  Ok(n as u64)
}

fn boolean(o: &Map<String, Value>, k: &str, field: &str) -> Check<bool> {
  o.get(k).and_then(Value::as_bool).map_or_else(|| fail(field), Ok)
}

fn string<'v>(o: &'v Map<String, Value>, k: &str, field: &str) -> Check<&'v str> {
  o.get(k).and_then(Value::as_str).map_or_else(|| fail(field), Ok)
}

fn array<'v>(o: &'v Map<String, Value>, k: &str, field: &str) -> Check<&'v Vec<Value>> {
  o.get(k).and_then(Value::as_array).map_or_else(|| fail(field), Ok)
}

fn round10(x: f64) -> f64 {
  (x * 1e10).round() / 1e10
}

fn close(a: f64, b: f64) -> bool {
  (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

fn is_sha256(s: &str) -> bool {
  s.len() == 64 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// What a validated receipt contributes to its parent's totals.
struct Totals {
  tokens: f64,
  usd: f64,
  unpriced: bool,
  breached: bool,
  spent: f64,
}

fn receipt(v: &Value, depth: usize, parent: Option<(&str, f64)>, ids: &mut HashSet<String>) -> Check<Totals> {
  if depth > RECEIPT_MAX_SUBAGENT_DEPTH {
    return fail("subagent_depth");
  }
  let o = obj(v, "identity")?;
  keys(
    o,
    &[
      "schema",
      "runId",
      "agentId",
      "basis",
      "claimBasis",
      "stopReason",
      "denomination",
      "capBreached",
      "overspent",
      "totalEstimatedUsd",
      "totalTokens",
      "unpriced",
      "calls",
      "tools",
      "subagents",
      "tranches",
      "breakers",
      "compactions",
    ],
    &["max", "released", "spent", "resume"],
    "identity",
  )?;
  if o.get("schema").and_then(Value::as_str) != Some(crate::kernel::receipt::RECEIPT_SCHEMA)
    || o.get("basis").and_then(Value::as_str) != Some("estimated_list_price_subtotal")
    || o.get("claimBasis").and_then(Value::as_str) != Some("inferred")
    || !o.get("agentId").and_then(Value::as_str).is_some_and(|s| !s.is_empty())
  {
    return fail("identity");
  }
  let run_id = string(o, "runId", "run_id")?;
  if !valid_run_id(run_id) {
    return fail("run_id");
  }
  if !ids.insert(run_id.to_string()) {
    return fail("run_id_tree");
  }
  if !STOP_REASONS.contains(&string(o, "stopReason", "stop_reason")?) {
    return fail("stop_reason");
  }
  let denomination = string(o, "denomination", "denomination")?;
  if !matches!(denomination, "usd" | "tokens" | "none") {
    return fail("denomination");
  }
  let tokens = denomination == "tokens";
  let metered = denomination != "none";
  let (max, released, spent) = if metered {
    let (Some(_), Some(_), Some(_)) = (o.get("max"), o.get("released"), o.get("spent")) else {
      return fail("budget_shape");
    };
    let max = num(o, "max", "budget_shape")?;
    let released = num(o, "released", "budget_shape")?;
    let spent = nonneg(o, "spent", "spent")?;
    if max <= 0.0 || released <= 0.0 || released > max {
      return fail("budget_shape");
    }
    if tokens && (max.fract() != 0.0 || released.fract() != 0.0) {
      return fail("budget_shape");
    }
    if tokens && spent.fract() != 0.0 {
      return fail("spent");
    }
    (max, released, spent)
  } else {
    if o.contains_key("max") || o.contains_key("released") || o.contains_key("spent") {
      return fail("budget_shape");
    }
    (0.0, 0.0, 0.0)
  };
  if let Some((parent_denomination, parent_released)) = parent {
    if parent_denomination != denomination {
      return fail("subagent_denomination");
    }
    if metered && max > parent_released + 1e-12 {
      return fail("subagent_wallet");
    }
  }

  // Own calls.
  let mut own_tokens = 0.0;
  let mut own_usd = 0.0;
  let mut own_unpriced = false;
  let mut own_unavailable = false;
  let calls = array(o, "calls", "calls")?;
  for call in calls {
    let c = obj(call, "calls")?;
    keys(
      c,
      &[
        "provider",
        "model",
        "inputTokens",
        "outputTokens",
        "cacheReadTokens",
        "cacheWriteTokens",
        "reasoningTokens",
        "estimatedUsd",
        "unpriced",
        "usageBasis",
      ],
      &["clampedOutputTokens"],
      "calls",
    )?;
    string(c, "provider", "call_identity")?;
    string(c, "model", "call_identity")?;
    let input = count(c, "inputTokens", "call_usage")?;
    let output = count(c, "outputTokens", "call_usage")?;
    let read = count(c, "cacheReadTokens", "call_usage")?;
    let write = count(c, "cacheWriteTokens", "call_usage")?;
    let reasoning = count(c, "reasoningTokens", "call_usage")?;
    if reasoning > output {
      return fail("call_reasoning");
    }
    let usd = nonneg(c, "estimatedUsd", "call_usd")?;
    let unpriced = boolean(c, "unpriced", "call_unpriced")?;
    if unpriced && usd != 0.0 {
      return fail("call_unpriced");
    }
    let basis = string(c, "usageBasis", "call_usage_basis")?;
    match basis {
      "provider_reported" => {}
      "unavailable" => {
        if input + output + read + write + reasoning != 0 || !unpriced {
          return fail("call_unavailable");
        }
        own_unavailable = true;
      }
      _ => return fail("call_usage_basis"),
    }
    if c.contains_key("clampedOutputTokens") {
      count(c, "clampedOutputTokens", "call_clamp")?;
    }
    own_tokens += (input + output + read + write) as f64;
    own_usd += usd;
    own_unpriced |= unpriced;
  }

  // Tools.
  let mut names = HashSet::new();
  for t in array(o, "tools", "tools")? {
    let t = obj(t, "tools")?;
    keys(t, &["name", "calls", "errors"], &["denied"], "tools")?;
    let name = string(t, "name", "tools")?;
    let calls = count(t, "calls", "tools")?;
    let errors = count(t, "errors", "tools")?;
    let denied = if t.contains_key("denied") {
      let d = count(t, "denied", "tools")?;
      if d == 0 {
        return fail("tools");
      }
      d
    } else {
      0
    };
    if errors > calls || denied > errors || !names.insert(name.to_string()) {
      return fail("tools");
    }
  }

  // Tranches.
  let tranches = array(o, "tranches", "tranches")?;
  if !metered && !tranches.is_empty() {
    return fail("tranches");
  }
  let mut tranche_sum = 0.0;
  let mut last_at = 0.0;
  for t in tranches {
    let t = obj(t, "tranches")?;
    keys(t, &["amount", "reason", "atCall"], &[], "tranches")?;
    let amount = num(t, "amount", "tranches")?;
    let at = count(t, "atCall", "tranches")? as f64;
    if amount <= 0.0 || string(t, "reason", "tranches")?.trim().is_empty() || at < last_at || (tokens && amount.fract() != 0.0) {
      return fail("tranches");
    }
    last_at = at;
    tranche_sum += amount;
  }
  if metered && !tranches.is_empty() && released <= tranche_sum - 1e-12 {
    return fail("tranches");
  }

  // Breakers.
  let mut retry_spend = 0.0;
  for b in array(o, "breakers", "breakers")? {
    let b = obj(b, "breakers")?;
    keys(
      b,
      &["kind", "count"],
      &["tool", "signature", "reservedSpend", "measuredSpend", "spendBasis"],
      "breakers",
    )?;
    let n = count(b, "count", "breakers")?;
    if n == 0 {
      return fail("breakers");
    }
    if let Some(sig) = b.get("signature") {
      if !sig.as_str().is_some_and(is_sha256) {
        return fail("breakers");
      }
    }
    if b.contains_key("tool") {
      string(b, "tool", "breakers")?;
    }
    let has = |k: &str| b.contains_key(k);
    let spend = has("reservedSpend") || has("measuredSpend") || has("spendBasis");
    let ok = match string(b, "kind", "breakers")? {
      "loop_detected" => has("tool") && has("signature") && !spend,
      "no_progress" => has("signature") && !has("tool") && !spend,
      "fan_out_blocked" => has("tool") && !has("signature") && !spend,
      "retry_attempted" => {
        if has("tool") || has("signature") || !metered {
          false
        } else {
          let reserved = num(b, "reservedSpend", "measured_spend")?;
          let measured = nonneg(b, "measuredSpend", "measured_spend")?;
          let ok = reserved > 0.0
            && match string(b, "spendBasis", "measured_spend")? {
              "pre_stream_no_usage" => measured == 0.0,
              "unavailable_worst_case" => close(measured, reserved),
              "provider_reported" => true,
              _ => false,
            };
          if !ok {
            return fail("measured_spend");
          }
          retry_spend += measured;
          true
        }
      }
      "retry_exhausted" => !has("tool") && !has("signature") && !spend,
      _ => false,
    };
    if !ok {
      return fail("breakers");
    }
  }

  // Compactions.
  let mut last_after = f64::INFINITY;
  let mut compaction_spend = 0.0;
  for (i, c) in array(o, "compactions", "compactions")?.iter().enumerate() {
    let c = obj(c, "compactions")?;
    keys(
      c,
      &[
        "index",
        "tier",
        "preTokens",
        "postTokens",
        "pinnedSegmentIds",
        "elidedSegmentDigests",
        "cacheState",
        "meteredCost",
        "meteredBasis",
        "modeledNetTokens",
        "modeledBasis",
        "workingCallsAfter",
      ],
      &["summarySchemaVersion"],
      "compactions",
    )?;
    let tier = string(c, "tier", "compactions")?;
    let pre = count(c, "preTokens", "compactions")? as f64;
    let post = count(c, "postTokens", "compactions")? as f64;
    let after = count(c, "workingCallsAfter", "compactions")? as f64;
    let net = num(c, "modeledNetTokens", "compactions")?;
    let cost = nonneg(c, "meteredCost", "compactions")?;
    let ok = count(c, "index", "compactions")? as usize == i
      && matches!(tier, "evicted" | "summarized" | "new-context")
      && post < pre
      && (tier == "summarized") == c.contains_key("summarySchemaVersion")
      && matches!(string(c, "cacheState", "compactions")?, "warm" | "cold" | "unknown")
      && string(c, "meteredBasis", "compactions")? == "measured"
      && string(c, "modeledBasis", "compactions")? == "modeled"
      && after <= last_after
      && after <= calls.len() as f64
      && net == (pre - post) * after - if after > 0.0 { post } else { 0.0 }
      && array(c, "pinnedSegmentIds", "compactions")?.iter().all(Value::is_string)
      && array(c, "elidedSegmentDigests", "compactions")?.iter().all(|d| d.as_str().is_some_and(is_sha256))
      && (metered || cost == 0.0);
    if !ok {
      return fail("compactions");
    }
    if c.contains_key("summarySchemaVersion") {
      count(c, "summarySchemaVersion", "compactions")?;
    }
    last_after = after;
    compaction_spend += cost;
  }

  // Subagents.
  let mut child_tokens = 0.0;
  let mut child_usd = 0.0;
  let mut child_unpriced = false;
  let mut child_breached = false;
  let mut child_spent = 0.0;
  for child in array(o, "subagents", "subagents")? {
    let t = receipt(child, depth + 1, Some((denomination, released)), ids)?;
    child_tokens += t.tokens;
    child_usd += t.usd;
    child_unpriced |= t.unpriced;
    child_breached |= t.breached;
    child_spent += t.spent;
  }

  // Resume.
  let (mut prior_tokens, mut prior_usd, mut prior_unpriced, mut prior_settled) = (0.0, 0.0, false, 0.0);
  if let Some(r) = o.get("resume") {
    let r = obj(r, "resume_shape")?;
    keys(
      r,
      &[
        "attempts",
        "priorCalls",
        "priorEstimatedUsd",
        "priorTokens",
        "priorUnpriced",
        "possibleDoubleCountCalls",
        "discardedPartialTurn",
      ],
      &["priorSettled"],
      "resume_shape",
    )?;
    if count(r, "attempts", "resume_attempts")? < 2 {
      return fail("resume_attempts");
    }
    let prior_calls = count(r, "priorCalls", "resume_prior_calls")?;
    prior_usd = nonneg(r, "priorEstimatedUsd", "resume_prior_usd")?;
    prior_tokens = count(r, "priorTokens", "resume_prior_tokens")? as f64;
    prior_unpriced = boolean(r, "priorUnpriced", "resume_prior_unpriced")?;
    count(r, "possibleDoubleCountCalls", "resume_double_count")?;
    boolean(r, "discardedPartialTurn", "resume_discarded")?;
    if metered != r.contains_key("priorSettled") {
      return fail("resume_prior_settled");
    }
    if metered {
      prior_settled = nonneg(r, "priorSettled", "resume_prior_settled")?;
      let prior_total = if tokens { prior_tokens } else { prior_usd };
      if (tokens && prior_settled.fract() != 0.0)
        || prior_settled > spent + 1e-9
        || prior_settled + 1e-9 < prior_total
        || (!prior_unpriced && !close(prior_settled, prior_total))
      {
        return fail("resume_prior_settled");
      }
    }
    if prior_calls == 0 && (prior_usd != 0.0 || prior_tokens != 0.0 || prior_unpriced || prior_settled != 0.0) {
      return fail("resume_zero_calls");
    }
  }

  // Totals.
  let total_tokens = count(o, "totalTokens", "total_tokens")? as f64;
  if total_tokens != own_tokens + child_tokens + prior_tokens {
    return fail("total_tokens");
  }
  let total_usd = nonneg(o, "totalEstimatedUsd", "total_estimated_usd")?;
  if !close(total_usd, round10(own_usd + child_usd + prior_usd)) {
    return fail("total_estimated_usd");
  }
  let unpriced = boolean(o, "unpriced", "unpriced")?;
  if unpriced != (own_unpriced || child_unpriced || prior_unpriced) {
    return fail("unpriced");
  }
  let own_breached = metered && spent > max;
  let breached = boolean(o, "capBreached", "cap_breached")?;
  if breached != (own_breached || child_breached) {
    return fail("cap_breached");
  }
  let overspent = nonneg(o, "overspent", "overspent")?;
  let expected_over = if own_breached {
    if tokens {
      spent - max
    } else {
      round10(spent - max)
    }
  } else {
    0.0
  };
  if !close(overspent, expected_over) {
    return fail("overspent");
  }
  if metered {
    let own_spend = if tokens { own_tokens } else { own_usd };
    let floor = prior_settled + own_spend + child_spent;
    if spent + 1e-9 < floor || (!own_unavailable && !unpriced && !close(spent, floor) && spent < floor) {
      return fail("spent");
    }
    if retry_spend + compaction_spend > spent + 1e-9 {
      return fail("measured_spend");
    }
  }
  Ok(Totals {
    tokens: total_tokens,
    usd: total_usd,
    unpriced,
    breached,
    spent,
  })
}

#[cfg(test)]
mod tests {
  use super::*;
  use serde_json::json;

  fn base() -> Value {
    json!({
      "schema": "caveman.agent.run-receipt.v1", "runId": "r1", "agentId": "a",
      "basis": "estimated_list_price_subtotal", "claimBasis": "inferred", "stopReason": "complete",
      "denomination": "tokens", "max": 1000, "released": 1000, "spent": 220,
      "capBreached": false, "overspent": 0, "totalEstimatedUsd": 0, "totalTokens": 220, "unpriced": true,
      "calls": [
        {"provider":"p","model":"m","inputTokens":100,"outputTokens":10,"cacheReadTokens":0,"cacheWriteTokens":0,"reasoningTokens":0,"estimatedUsd":0,"unpriced":true,"usageBasis":"provider_reported"},
        {"provider":"p","model":"m","inputTokens":100,"outputTokens":10,"cacheReadTokens":0,"cacheWriteTokens":0,"reasoningTokens":0,"estimatedUsd":0,"unpriced":true,"usageBasis":"provider_reported"}
      ],
      "tools": [{"name":"x","calls":2,"errors":1,"denied":1}],
      "subagents": [], "tranches": [], "breakers": [], "compactions": []
    })
  }

  fn check(v: &Value) -> Check {
    validate_receipt_json(&v.to_string())
  }

  #[test]
  fn accepts_a_consistent_receipt() {
    assert_eq!(check(&base()), Ok(()));
  }

  #[test]
  fn refuses_each_broken_invariant_with_its_field() {
    let cases: Vec<(&str, Box<dyn Fn(&mut Value)>)> = vec![
      ("identity", Box::new(|v| v["schema"] = json!("x"))),
      ("identity", Box::new(|v| v["extra"] = json!(1))),
      ("run_id", Box::new(|v| v["runId"] = json!("-bad"))),
      ("stop_reason", Box::new(|v| v["stopReason"] = json!("done"))),
      ("total_tokens", Box::new(|v| v["totalTokens"] = json!(221))),
      ("unpriced", Box::new(|v| v["unpriced"] = json!(false))),
      ("tools", Box::new(|v| v["tools"][0]["denied"] = json!(2))),
      ("call_reasoning", Box::new(|v| v["calls"][0]["reasoningTokens"] = json!(11))),
      ("budget_shape", Box::new(|v| v["released"] = json!(2000))),
      ("cap_breached", Box::new(|v| v["capBreached"] = json!(true))),
      ("spent", Box::new(|v| v["spent"] = json!(10))),
      ("tranches", Box::new(|v| v["tranches"] = json!([{"amount": 0, "reason": "x", "atCall": 0}]))),
    ];
    for (field, mutate) in cases {
      let mut v = base();
      mutate(&mut v);
      assert_eq!(check(&v), Err(format!("cave_run_receipt_invalid:{field}")), "{field}");
    }
  }

  #[test]
  fn subagent_tree_ids_are_unique_and_totals_include_children() {
    let mut v = base();
    let mut child = base();
    child["max"] = json!(500);
    child["released"] = json!(500);
    v["subagents"] = json!([child.clone()]);
    assert_eq!(check(&v), Err("cave_run_receipt_invalid:run_id_tree".into()));
    child["runId"] = json!("r2");
    v["subagents"] = json!([child]);
    assert_eq!(check(&v), Err("cave_run_receipt_invalid:total_tokens".into()));
    v["totalTokens"] = json!(440);
    v["spent"] = json!(440);
    assert_eq!(check(&v), Ok(()));
  }
}
