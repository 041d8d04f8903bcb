//! The model catalog: every model knap knows by `"provider/id"`, with what a Pi `Model` object
//! carries (api, base URL, input kinds, list prices, context window, output cap). Generated from
//! pi-ai's catalog into `catalog/models.json` by `scripts/gen-catalog.mjs` and embedded here, so
//! the kernel's budgets, the JS price helpers and the AI SDK budget tracker read one table.
//!
//! Also the one place that prices a usage: pi's usage (USD per million tokens, for the kernel and
//! `estimateCostUsd`) and the AI SDK's step usage (USD per token, for `createBudgetTracker`), and
//! the one fuzzy model-id matcher (`match_model_id`) and "did you mean" (`nearest`, on
//! `suggest`).

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Price {
  pub input: f64,
  pub output: f64,
  #[serde(default)]
  pub cache_read: f64,
  #[serde(default)]
  pub cache_write: f64,
}

impl Price {
  /// A list price a USD budget can meter: no price negative (OpenRouter's "variable") and not
  /// all zero (free, local or subscription-billed).
  pub fn is_priced(&self) -> bool {
    let all = [self.input, self.output, self.cache_read, self.cache_write];
    all.iter().all(|p| p.is_finite() && *p >= 0.0) && all.iter().any(|p| *p > 0.0)
  }

  /// USD of pi-style token counts (`input` excludes cache reads and writes; reasoning is billed
  /// inside `output`).
  pub fn cost(&self, input: f64, output: f64, cache_read: f64, cache_write: f64) -> f64 {
    (input * self.input + output * self.output + cache_read * self.cache_read + cache_write * self.cache_write)
      / 1_000_000.0
  }
}

/// One catalog entry: the fields of a Pi `Model`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Model {
  pub id: String,
  pub name: String,
  pub api: String,
  pub provider: String,
  pub base_url: String,
  pub reasoning: bool,
  pub input: Vec<String>,
  pub cost: Price,
  pub context_window: u64,
  pub max_tokens: u64,
  #[serde(default)]
  pub headers: Option<HashMap<String, String>>,
  /// Provider-specific request switches, opaque to knap (pi-ai's `compat`).
  #[serde(default)]
  pub compat: Option<Value>,
  /// pi-ai's thinking-level names per provider; `null` values mean "not supported", so opaque.
  #[serde(default)]
  pub thinking_level_map: Option<Value>,
}

impl Model {
  pub fn key(&self) -> String {
    format!("{}/{}", self.provider, self.id)
  }

  /// The list price, or `None` when the model is unpriced.
  pub fn price(&self) -> Option<Price> {
    self.cost.is_priced().then_some(self.cost)
  }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
  version: u32,
  source: String,
  models: Vec<Model>,
}

struct Catalog {
  source: String,
  models: Vec<Model>,
  by_key: HashMap<String, usize>,
}

fn catalog() -> &'static Catalog {
  static CATALOG: OnceLock<Catalog> = OnceLock::new();
  CATALOG.get_or_init(|| {
    // The file is generated and checked in CI; a parse failure is a build defect, caught by the
    // tests below, so it is not a runtime condition to recover from.
    let file: File = serde_json::from_str(include_str!("../catalog/models.json")).expect("catalog/models.json");
    assert_eq!(file.version, 2, "catalog/models.json version");
    let by_key = file.models.iter().enumerate().map(|(i, m)| (m.key(), i)).collect();
    Catalog {
      source: file.source,
      models: file.models,
      by_key,
    }
  })
}

/// Where the catalog came from (pi-ai's version).
pub fn source() -> &'static str {
  &catalog().source
}

/// Every model, sorted by `provider/id`.
pub fn models() -> &'static [Model] {
  &catalog().models
}

/// The providers, sorted, each once.
pub fn providers() -> Vec<&'static str> {
  let mut out: Vec<&str> = models().iter().map(|m| m.provider.as_str()).collect();
  out.sort_unstable();
  out.dedup();
  out
}

/// The model `provider/id` (the id may itself contain `/`).
pub fn lookup(provider: &str, id: &str) -> Option<&'static Model> {
  let c = catalog();
  c.by_key.get(&format!("{provider}/{id}")).map(|&i| &c.models[i])
}

/// The list price of `provider/id`; `None` when unknown or unpriced.
pub fn price(provider: &str, id: &str) -> Option<Price> {
  lookup(provider, id).and_then(Model::price)
}

/// The context window of `provider/id` in tokens; `None` when unknown.
pub fn context_window(provider: &str, id: &str) -> Option<u64> {
  lookup(provider, id).map(|m| m.context_window).filter(|&w| w > 0)
}

/// Up to `limit` catalog keys (`provider/id`) closest to `reference`, for "did you mean", by
/// `suggest::distance` (case, `-`, `_` and `.` ignored; edit distance within a third of the
/// length, or one containing the other); closest first, then alphabetical. A reference with the
/// provider of a model compares ids, one with another provider compares whole keys, one
/// without a provider compares ids.
pub fn nearest(reference: &str, limit: usize) -> Vec<String> {
  let want = reference.to_lowercase();
  let (want_provider, want_id) = match want.split_once('/') {
    Some((p, i)) => (Some(p), i),
    None => (None, want.as_str()),
  };
  let mut scored: Vec<(usize, &Model)> = Vec::new();
  for m in models() {
    let distance = match want_provider {
      Some(p) if p == m.provider.to_lowercase() => crate::suggest::distance(want_id, &m.id),
      Some(_) => crate::suggest::distance(&want, &m.key()),
      None => crate::suggest::distance(want_id, &m.id),
    };
    if let Some(d) = distance {
      scored.push((d, m));
    }
  }
  scored.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.key().cmp(&b.1.key())));
  scored.into_iter().take(limit).map(|(_, m)| m.key()).collect()
}

// ------------------------------------------------------------------ the AI SDK's step usage

/// USD per token, as OpenRouter's endpoint and bashkit's `modelPricing` give them. The cache
/// prices default to the input price.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TokenPricing {
  pub input_per_token: f64,
  pub output_per_token: f64,
  pub cache_read_per_token: Option<f64>,
  pub cache_write_per_token: Option<f64>,
}

impl From<Price> for TokenPricing {
  fn from(p: Price) -> Self {
    Self {
      input_per_token: p.input / 1_000_000.0,
      output_per_token: p.output / 1_000_000.0,
      cache_read_per_token: Some(p.cache_read / 1_000_000.0),
      cache_write_per_token: Some(p.cache_write / 1_000_000.0),
    }
  }
}

/// The token counts of one AI SDK step: ai@6's usage with `inputTokenDetails`, or ai@5's flat
/// usage with `cachedInputTokens`. A missing count is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepUsage {
  pub input_tokens: Option<f64>,
  pub output_tokens: Option<f64>,
  pub no_cache_tokens: Option<f64>,
  pub cache_read_tokens: Option<f64>,
  pub cache_write_tokens: Option<f64>,
  pub cached_input_tokens: Option<f64>,
}

/// The USD of one AI SDK step. With cache details (ai@6) each kind of input token is priced on
/// its own; with ai@5's `cachedInputTokens` the cached part is priced as cache reads; else all
/// input tokens at the input price.
pub fn step_cost(u: &StepUsage, p: &TokenPricing) -> f64 {
  let n = |v: Option<f64>| v.unwrap_or(0.0);
  let read = p.cache_read_per_token.unwrap_or(p.input_per_token);
  let write = p.cache_write_per_token.unwrap_or(p.input_per_token);
  let input = if u.no_cache_tokens.is_some() || u.cache_read_tokens.is_some() || u.cache_write_tokens.is_some() {
    n(u.no_cache_tokens) * p.input_per_token + n(u.cache_read_tokens) * read + n(u.cache_write_tokens) * write
  } else if let Some(cached) = u.cached_input_tokens {
    (n(u.input_tokens) - cached).max(0.0) * p.input_per_token + cached * read
  } else {
    n(u.input_tokens) * p.input_per_token
  };
  input + n(u.output_tokens) * p.output_per_token
}

/// The spellings one id is compared under: lowercase, kebab-case, and both without a provider.
fn variants(id: &str) -> Vec<String> {
  let lower = id.to_lowercase();
  let kebab = |s: &str| {
    let mut out = String::with_capacity(s.len());
    let mut dash = false;
    for c in s.chars() {
      if c.is_ascii_lowercase() || c.is_ascii_digit() {
        out.push(c);
        dash = false;
      } else if !dash {
        out.push('-');
        dash = true;
      }
    }
    out
  };
  let bare = lower.rsplit_once('/').map(|(_, b)| b.to_string()).unwrap_or_else(|| lower.clone());
  let mut out = vec![lower.clone(), kebab(&lower), bare.clone(), kebab(&bare)];
  let mut seen = std::collections::HashSet::new();
  out.retain(|v| seen.insert(v.clone()));
  out
}

/// Three-tier model-id matching (PostHog's, as bashkit uses it): (1) exact, case-insensitive,
/// also as kebab-case and without the provider prefix; (2) the longest candidate contained in
/// the id (`claude-sonnet-4-5-20250929` → `claude-sonnet-4.5`); (3) the shortest candidate that
/// contains the id. Returns the index of the chosen candidate; ties go to the earlier one.
pub fn match_model_id<S: AsRef<str>>(model: &str, candidates: &[S]) -> Option<usize> {
  let mine = variants(model);
  let keys: Vec<String> = candidates.iter().map(|c| c.as_ref().to_lowercase()).collect();
  for v in &mine {
    if let Some(i) = keys.iter().position(|k| k == v) {
      return Some(i);
    }
  }
  let theirs: Vec<Vec<String>> = keys.iter().map(|k| variants(k)).collect();
  let mut best: Option<(usize, usize)> = None;
  for (i, ts) in theirs.iter().enumerate() {
    for m in &mine {
      for t in ts {
        if t.len() > best.map_or(0, |b| b.1) && m.contains(t.as_str()) {
          best = Some((i, t.len()));
        }
      }
    }
  }
  if let Some((i, _)) = best {
    return Some(i);
  }
  let mut reverse: Option<(usize, usize)> = None;
  for (i, ts) in theirs.iter().enumerate() {
    for m in &mine {
      for t in ts {
        if t.len() < reverse.map_or(usize::MAX, |r| r.1) && t.contains(m.as_str()) {
          reverse = Some((i, t.len()));
        }
      }
    }
  }
  reverse.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn embedded_catalog_parses_with_every_pi_field() {
    assert!(models().len() > 500);
    assert!(source().contains("@mariozechner/pi-ai@"));
    let m = lookup("anthropic", "claude-haiku-4-5").expect("haiku");
    assert_eq!(m.api, "anthropic-messages");
    assert_eq!(m.base_url, "https://api.anthropic.com");
    assert!(m.context_window >= 200_000 && m.max_tokens > 0);
    assert!(m.input.iter().any(|i| i == "text"));
    assert!(price("anthropic", "claude-haiku-4-5").is_some());
    assert_eq!(context_window("anthropic", "claude-haiku-4-5"), Some(m.context_window));
    assert!(lookup("anthropic", "faux-1").is_none());
    // Ids with '/' (openrouter) resolve as provider + the rest.
    let or = models().iter().find(|m| m.provider == "openrouter" && m.id.contains('/')).expect("openrouter id");
    assert_eq!(lookup("openrouter", &or.id).map(|m| &m.id), Some(&or.id));
    let ps = providers();
    assert!(ps.windows(2).all(|w| w[0] < w[1]) && ps.contains(&"openai"));
  }

  #[test]
  fn zero_priced_models_resolve_but_are_unpriced() {
    let free = models().iter().find(|m| m.cost == Price::default()).expect("a free model");
    assert!(lookup(&free.provider, &free.id).is_some());
    assert!(price(&free.provider, &free.id).is_none());
    let variable = lookup("openrouter", "openrouter/auto").expect("openrouter/openrouter/auto");
    assert!(variable.cost.input < 0.0 && variable.price().is_none());
  }

  #[test]
  fn pi_usage_cost() {
    let p = price("anthropic", "claude-haiku-4-5").unwrap();
    let five = p.cost(100.0, 10.0, 0.0, 0.0) * 5.0;
    assert!(five > 0.0 && five < 0.05);
    let q = Price {
      input: 1.0,
      output: 2.0,
      cache_read: 0.5,
      cache_write: 4.0,
    };
    assert_eq!(q.cost(1e6, 1e6, 1e6, 1e6), 7.5);
  }

  #[test]
  fn did_you_mean() {
    let near = nearest("anthropic/claude-haiku-4.5", 3);
    assert_eq!(near.first().map(String::as_str), Some("anthropic/claude-haiku-4-5"), "{near:?}");
    let near = nearest("Anthropic/Claude_Haiku_4_5", 3);
    assert_eq!(near.first().map(String::as_str), Some("anthropic/claude-haiku-4-5"), "{near:?}");
    let near = nearest("claude-haiku-4-5", 50);
    assert!(near.iter().any(|k| k == "anthropic/claude-haiku-4-5"), "{near:?}");
    assert!(nearest("zzzzzzzzzzzzzzzzzzzzzzzz", 5).is_empty());
    assert_eq!(nearest("gpt-4o", 2).len(), 2);
  }

  #[test]
  fn three_tier_matching() {
    let c = ["claude-sonnet-4.5", "gpt-4o", "gpt-4o-mini", "anthropic/claude-haiku-4.5-extended"];
    assert_eq!(match_model_id("CLAUDE-SONNET-4.5", &c), Some(0));
    assert_eq!(match_model_id("openai/gpt-4o-mini-2024-07-18", &c), Some(2));
    assert_eq!(match_model_id("claude-sonnet-4-5-20250929", &c), Some(0));
    assert_eq!(match_model_id("claude-haiku-4.5", &c), Some(3));
    assert_eq!(match_model_id("unknown-model", &c), None);
    assert_eq!(match_model_id::<&str>("x", &[]), None);
  }

  #[test]
  fn step_costs() {
    let p = TokenPricing {
      input_per_token: 1.0,
      output_per_token: 0.0,
      cache_read_per_token: Some(0.1),
      cache_write_per_token: Some(2.0),
    };
    let u = StepUsage {
      input_tokens: Some(100.0),
      no_cache_tokens: Some(10.0),
      cache_read_tokens: Some(80.0),
      cache_write_tokens: Some(10.0),
      ..Default::default()
    };
    assert_eq!(step_cost(&u, &p), 38.0);
    let p = TokenPricing {
      input_per_token: 1.0,
      cache_read_per_token: Some(0.5),
      ..Default::default()
    };
    let flat = StepUsage {
      input_tokens: Some(100.0),
      cached_input_tokens: Some(40.0),
      ..Default::default()
    };
    assert_eq!(step_cost(&flat, &p), 80.0);
    let plain = StepUsage {
      input_tokens: Some(1000.0),
      output_tokens: Some(50.0),
      ..Default::default()
    };
    let p = TokenPricing {
      input_per_token: 3e-6,
      output_per_token: 15e-6,
      ..Default::default()
    };
    assert!((step_cost(&plain, &p) - (1000.0 * 3e-6 + 50.0 * 15e-6)).abs() < 1e-15);
  }
}
