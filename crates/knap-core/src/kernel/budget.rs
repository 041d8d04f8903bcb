//! Prices and the budget meter: reserve the worst case before a provider call, clamp the
//! output down to the floor, stop when even the floor does not fit, settle what was used.

use super::message::{count, MessageUsage};
use crate::limits::{BUDGET_FRAMING_TOKENS_PER_MESSAGE, OUTPUT_CLAMP_FLOOR_TOKENS};

// Prices live in the one model catalog of the core.
pub use crate::catalog::{price as catalog_price, Price};

/// Token usage of one provider call (pi's `Usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
  pub input: u64,
  pub output: u64,
  pub cache_read: u64,
  pub cache_write: u64,
  pub reasoning: u64,
}

impl Usage {
  /// A message's usage; counts that are missing, negative or not finite are 0.
  pub fn of(u: &MessageUsage) -> Self {
    Self {
      input: count(&u.input),
      output: count(&u.output),
      cache_read: count(&u.cache_read),
      cache_write: count(&u.cache_write),
      reasoning: count(&u.reasoning),
    }
  }

  pub fn total(&self) -> u64 {
    self.input + self.output + self.cache_read + self.cache_write
  }

  pub fn cost(&self, price: &Price) -> f64 {
    price.cost(
      self.input as f64,
      self.output as f64,
      self.cache_read as f64,
      self.cache_write as f64,
    )
  }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Denomination {
  Usd,
  Tokens,
}

impl Denomination {
  pub fn as_str(self) -> &'static str {
    match self {
      Denomination::Usd => "usd",
      Denomination::Tokens => "tokens",
    }
  }
}

/// What a budget allows for the next call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Admission {
  /// Go, with the output capped at `max_output` tokens (`clamped` when below the model's cap).
  Go { max_output: u64, clamped: bool },
  /// Not even the floor fits: stop with `budget_exhausted`.
  Stop,
}

#[derive(Debug, Clone)]
pub struct Meter {
  pub denomination: Denomination,
  pub max: f64,
  pub released: f64,
  pub spent: f64,
  pub floor: u64,
  pub cap_breached: bool,
  pub overspent: f64,
}

impl Meter {
  pub fn new(denomination: Denomination, max: f64, initial: Option<f64>, floor: Option<u64>) -> Self {
    Self {
      denomination,
      max,
      released: initial.unwrap_or(max),
      spent: 0.0,
      floor: floor.unwrap_or(OUTPUT_CLAMP_FLOOR_TOKENS),
      cap_breached: false,
      overspent: 0.0,
    }
  }

  pub fn remaining(&self) -> f64 {
    (self.released - self.spent).max(0.0)
  }

  /// Input ceiling: serialized bytes (one token per byte at worst is far too pessimistic; the
  /// reference uses bytes/4 rounded up) plus per-message framing, capped at the context window.
  pub fn input_ceiling(context_bytes: usize, messages: usize, context_window: Option<u64>) -> u64 {
    let tokens = (context_bytes as u64).div_ceil(4) + messages as u64 * BUDGET_FRAMING_TOKENS_PER_MESSAGE;
    match context_window {
      Some(w) if w > 0 => tokens.min(w),
      _ => tokens,
    }
  }

  pub fn cost_of(&self, input: u64, output: u64, price: Option<&Price>) -> f64 {
    match self.denomination {
      Denomination::Tokens => (input + output) as f64,
      Denomination::Usd => price
        .map(|p| (input as f64 * p.input + output as f64 * p.output) / 1_000_000.0)
        .unwrap_or(f64::INFINITY),
    }
  }

  /// The ladder: full allowance, else the largest output ≥ floor that fits, else stop.
  pub fn admit(&self, input_ceiling: u64, max_output: u64, price: Option<&Price>) -> Admission {
    let remaining = self.remaining();
    if self.cap_breached || remaining <= 0.0 {
      return Admission::Stop;
    }
    if self.cost_of(input_ceiling, max_output, price) <= remaining {
      return Admission::Go {
        max_output,
        clamped: false,
      };
    }
    let floor = self.floor.min(max_output);
    if self.cost_of(input_ceiling, floor, price) > remaining {
      return Admission::Stop;
    }
    let (mut lo, mut hi) = (floor, max_output);
    while lo < hi {
      let mid = lo + (hi - lo).div_ceil(2);
      if self.cost_of(input_ceiling, mid, price) <= remaining {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    Admission::Go {
      max_output: lo,
      clamped: true,
    }
  }

  /// Settles a call's measured spend (tokens or USD).
  pub fn settle(&mut self, amount: f64) {
    let amount = if amount.is_finite() { amount } else { 0.0 };
    self.spent += amount;
    if self.spent > self.released + 1e-12 {
      self.cap_breached = true;
      self.overspent = round10(self.spent - self.released);
    }
  }

  pub fn exhausted(&self) -> bool {
    self.cap_breached || self.remaining() <= 0.0
  }
}

/// Rounds to 1e-10, as receipts do.
pub fn round10(f: f64) -> f64 {
  (f * 1e10).round() / 1e10
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn catalog_has_haiku() {
    let p = catalog_price("anthropic", "claude-haiku-4-5").expect("bundled price");
    let five = Usage {
      input: 100,
      output: 10,
      ..Default::default()
    }
    .cost(&p)
      * 5.0;
    assert!(five > 0.0 && five < 0.05);
    assert!(catalog_price("anthropic", "faux-unknown").is_none());
  }

  #[test]
  fn ladder_clamps_then_stops() {
    let m = Meter::new(Denomination::Tokens, 2_000.0, None, None);
    assert_eq!(
      m.admit(100, 1_000, None),
      Admission::Go {
        max_output: 1_000,
        clamped: false
      }
    );
    assert_eq!(
      m.admit(1_500, 1_000, None),
      Admission::Go {
        max_output: 500,
        clamped: true
      }
    );
    assert_eq!(m.admit(1_800, 1_000, None), Admission::Stop);
    let mut m = m;
    m.settle(2_100.0);
    assert!(m.cap_breached && m.exhausted());
    assert_eq!(m.overspent, 100.0);
  }

  #[test]
  fn unpriced_usd_never_admits() {
    let m = Meter::new(Denomination::Usd, 1.0, None, None);
    assert_eq!(m.admit(10, 10, None), Admission::Stop);
  }
}
