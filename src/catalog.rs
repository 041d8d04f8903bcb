//! The core's model catalog for JS (`lib/prices.mjs`, `lib/ai-sdk/budget.mjs`): lookups, prices,
//! context windows, "did you mean", the AI SDK step cost and model-id matching. Typed objects;
//! all synchronous (an in-memory table, nothing that can block).

use std::collections::HashMap;

use knap_core::catalog::{self, Model, Price, StepUsage, TokenPricing};
use napi_derive::napi;
use serde_json::Value;

/// USD per million tokens.
#[napi(object)]
pub struct CatalogCost {
  pub input: f64,
  pub output: f64,
  pub cache_read: f64,
  pub cache_write: f64,
}

impl From<Price> for CatalogCost {
  fn from(p: Price) -> Self {
    Self {
      input: p.input,
      output: p.output,
      cache_read: p.cache_read,
      cache_write: p.cache_write,
    }
  }
}

/// A catalog entry, shaped as a Pi `Model`.
#[napi(object)]
pub struct CatalogModel {
  pub id: String,
  pub name: String,
  pub api: String,
  pub provider: String,
  pub base_url: String,
  pub reasoning: bool,
  pub input: Vec<String>,
  pub cost: CatalogCost,
  pub context_window: u32,
  pub max_tokens: u32,
  pub headers: Option<HashMap<String, String>>,
  pub compat: Option<Value>,
  pub thinking_level_map: Option<Value>,
}

fn clamp_u32(n: u64) -> u32 {
  n.min(u32::MAX as u64) as u32
}

impl From<&Model> for CatalogModel {
  fn from(m: &Model) -> Self {
    Self {
      id: m.id.clone(),
      name: m.name.clone(),
      api: m.api.clone(),
      provider: m.provider.clone(),
      base_url: m.base_url.clone(),
      reasoning: m.reasoning,
      input: m.input.clone(),
      cost: m.cost.into(),
      context_window: clamp_u32(m.context_window),
      max_tokens: clamp_u32(m.max_tokens),
      headers: m.headers.clone(),
      compat: m.compat.clone(),
      thinking_level_map: m.thinking_level_map.clone(),
    }
  }
}

/// Pi usage counts; a missing count is 0.
#[napi(object)]
pub struct CatalogUsage {
  pub input: Option<f64>,
  pub output: Option<f64>,
  pub cache_read: Option<f64>,
  pub cache_write: Option<f64>,
}

/// The catalog's origin (pi-ai's version).
#[napi]
pub fn catalog_source() -> String {
  catalog::source().to_string()
}

/// Every model (optionally of one provider), sorted by `provider/id`.
#[napi]
pub fn catalog_models(provider: Option<String>) -> Vec<CatalogModel> {
  catalog::models()
    .iter()
    .filter(|m| provider.as_deref().is_none_or(|p| m.provider == p))
    .map(CatalogModel::from)
    .collect()
}

#[napi]
pub fn catalog_providers() -> Vec<String> {
  catalog::providers().into_iter().map(str::to_string).collect()
}

#[napi]
pub fn catalog_model(provider: String, id: String) -> Option<CatalogModel> {
  catalog::lookup(&provider, &id).map(CatalogModel::from)
}

/// The list price of `provider/id`, or `undefined` when unknown or unpriced.
#[napi]
pub fn catalog_price(provider: String, id: String) -> Option<CatalogCost> {
  catalog::price(&provider, &id).map(CatalogCost::from)
}

/// The USD of pi usage counts for `provider/id`, or `undefined` when unpriced.
#[napi]
pub fn catalog_cost_usd(provider: String, id: String, usage: CatalogUsage) -> Option<f64> {
  let n = |v: Option<f64>| v.filter(|f| f.is_finite()).unwrap_or(0.0);
  catalog::price(&provider, &id)
    .map(|p| p.cost(n(usage.input), n(usage.output), n(usage.cache_read), n(usage.cache_write)))
}

#[napi]
pub fn catalog_context_window(provider: String, id: String) -> Option<u32> {
  catalog::context_window(&provider, &id).map(clamp_u32)
}

/// Up to `limit` (default 3) `provider/id` keys near `reference`, closest first.
#[napi]
pub fn catalog_nearest(reference: String, limit: Option<u32>) -> Vec<String> {
  catalog::nearest(&reference, limit.unwrap_or(3) as usize)
}

/// Up to `limit` (default 1) of `candidates` near `reference`, nearest first (knap_core::suggest:
/// case, `-`, `_`, `.` ignored): "did you mean" for option keys and other names knap refuses.
#[napi]
pub fn suggest_names(reference: String, candidates: Vec<String>, limit: Option<u32>) -> Vec<String> {
  let names = candidates.iter().map(String::as_str);
  let near = knap_core::suggest::nearest(&reference, names, limit.unwrap_or(1) as usize);
  near.into_iter().map(str::to_string).collect()
}

/// USD per token (`createBudgetTracker`'s `modelPricing`, OpenRouter's prices).
#[napi(object)]
pub struct TokenPricingInput {
  pub input_per_token: f64,
  pub output_per_token: f64,
  pub cache_read_per_token: Option<f64>,
  pub cache_write_per_token: Option<f64>,
}

/// The counts of an AI SDK step's usage: ai@6's `inputTokenDetails` flattened, or ai@5's
/// `cachedInputTokens`.
#[napi(object)]
pub struct StepUsageInput {
  pub input_tokens: Option<f64>,
  pub output_tokens: Option<f64>,
  pub no_cache_tokens: Option<f64>,
  pub cache_read_tokens: Option<f64>,
  pub cache_write_tokens: Option<f64>,
  pub cached_input_tokens: Option<f64>,
}

/// The USD of one AI SDK step.
#[napi]
pub fn step_cost_usd(usage: StepUsageInput, pricing: TokenPricingInput) -> f64 {
  catalog::step_cost(
    &StepUsage {
      input_tokens: usage.input_tokens,
      output_tokens: usage.output_tokens,
      no_cache_tokens: usage.no_cache_tokens,
      cache_read_tokens: usage.cache_read_tokens,
      cache_write_tokens: usage.cache_write_tokens,
      cached_input_tokens: usage.cached_input_tokens,
    },
    &TokenPricing {
      input_per_token: pricing.input_per_token,
      output_per_token: pricing.output_per_token,
      cache_read_per_token: pricing.cache_read_per_token,
      cache_write_per_token: pricing.cache_write_per_token,
    },
  )
}

/// Three-tier model-id matching: the index of the candidate `model` resolves to, or `undefined`.
#[napi]
pub fn match_model_id(model: String, candidates: Vec<String>) -> Option<u32> {
  catalog::match_model_id(&model, &candidates).map(|i| i as u32)
}
