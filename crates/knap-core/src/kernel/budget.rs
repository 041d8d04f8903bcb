//! Prices and the budget meter: reserve the worst case before a provider call, clamp the
//! output down to the floor, stop when even the floor does not fit, settle what was used.

use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use super::message::{count, MessageUsage};
use crate::code::{Code, Error};
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

/// A staged release (`BudgetTranche`): `at_call` is the reservations taken before it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tranche {
  pub amount: f64,
  pub reason: String,
  pub at_call: u64,
}

/// `BudgetExhaustionContext`, what `onBudgetExhausted` is handed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExhaustionContext {
  pub denomination: &'static str,
  pub max: f64,
  pub released: f64,
  pub spent: f64,
  pub remaining: f64,
  pub releasable: f64,
  pub calls: u64,
}

/// What an `onBudgetExhausted` handler answered, as the host read it off the JS value.
#[derive(Debug, Clone, PartialEq)]
pub enum ExhaustionAnswer {
  Stop,
  /// `{release, reason}`: a number and a string (the meter's release judges their values).
  Release {
    amount: f64,
    reason: String,
  },
  /// Anything else: `cave_budget_exhaustion_result_invalid`.
  Invalid,
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
  /// Staged releases, in order (journaled ones first).
  pub tranches: Vec<Tranche>,
  /// Reservations taken: the provider calls this meter admitted (`atCall` of a tranche).
  pub calls: u64,
  /// Tranches already in the durable journal.
  pub journaled_tranches: usize,
  /// A revoked wallet releases nothing more (`cave_budget_revoked`).
  pub revoked: bool,
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
      tranches: Vec::new(),
      calls: 0,
      journaled_tranches: 0,
      revoked: false,
    }
  }

  /// `releaseBudget(amount, reason)` / the meter's `release`: checks in the reference's order,
  /// then appends the tranche.
  pub fn release(&mut self, amount: f64, reason: Option<&str>) -> Result<Tranche, Error> {
    let tokens = self.denomination == Denomination::Tokens;
    if !(amount.is_finite() && amount > 0.0) || (tokens && amount.fract() != 0.0) {
      let kind = if tokens {
        "a positive whole number of tokens"
      } else {
        "a positive number of US dollars"
      };
      return Err(Error::coded(
        Code::BudgetReleaseInvalid,
        format!("amount must be {kind}, got {}", number_text(amount)),
      ));
    }
    let Some(reason) = reason.filter(|r| !r.trim().is_empty()) else {
      return Err(Error::coded(
        Code::BudgetReleaseReasonRequired,
        "a release needs a non-blank reason (it is recorded in the receipt's tranches)",
      ));
    };
    if self.revoked {
      return Err(Error::coded(Code::BudgetRevoked, "the wallet was revoked"));
    }
    if self.cap_breached {
      return Err(Error::coded(
        Code::BudgetCapBreached,
        format!(
          "spend ({}) already passed the released budget; a breach is terminal",
          number_text(round10(self.spent))
        ),
      ));
    }
    let releasable = round10(self.max - self.released);
    if amount > releasable + 1e-12 {
      return Err(Error::coded(
        Code::BudgetReleaseExceedsMax,
        format!(
          "amount {} is more than max - released ({} - {} = {})",
          number_text(amount),
          number_text(self.max),
          number_text(round10(self.released)),
          number_text(releasable)
        ),
      ));
    }
    self.released = (self.released + amount).min(self.max);
    let tranche = Tranche {
      amount,
      reason: reason.to_string(),
      at_call: self.calls,
    };
    self.tranches.push(tranche.clone());
    Ok(tranche)
  }

  /// A journaled tranche restored on resume (before settled spend: `restorePrior`'s order).
  pub fn restore_tranche(&mut self, tranche: Tranche) {
    self.released = (self.released + tranche.amount).min(self.max);
    self.tranches.push(tranche);
    self.journaled_tranches = self.tranches.len();
  }

  /// Tranches not journaled yet (marked journaled).
  pub fn take_unjournaled(&mut self) -> Vec<Tranche> {
    let fresh = self.tranches[self.journaled_tranches.min(self.tranches.len())..].to_vec();
    self.journaled_tranches = self.tranches.len();
    fresh
  }

  pub fn context(&self) -> ExhaustionContext {
    ExhaustionContext {
      denomination: self.denomination.as_str(),
      max: self.max,
      released: round10(self.released),
      spent: round10(self.spent),
      remaining: round10(self.remaining()),
      releasable: round10((self.max - self.released).max(0.0)),
      calls: self.calls,
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

/// A number as JS prints it (`1`, `0.5`).
fn number_text(f: f64) -> String {
  if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 {
    format!("{}", f as i64)
  } else {
    format!("{f}")
  }
}

/// A run's root meter, shared with the host (a `BudgetController` reads and releases it between
/// polls, while the kernel is not running). Every meter of a run tree is one of these.
#[derive(Debug, Clone)]
pub struct MeterCell(Arc<Mutex<Meter>>);

impl MeterCell {
  pub fn new(meter: Meter) -> Self {
    Self(Arc::new(Mutex::new(meter)))
  }

  pub fn lock(&self) -> MutexGuard<'_, Meter> {
    self.0.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// A copy, for arithmetic that spans an await.
  pub fn snapshot(&self) -> Meter {
    self.lock().clone()
  }

  pub fn exhausted(&self) -> bool {
    self.lock().exhausted()
  }

  pub fn denomination(&self) -> Denomination {
    self.lock().denomination
  }
}

/// The legacy `maxCostUsd` cap: a best-effort USD ledger over the whole run tree. Unlike the
/// meter it reserves nothing: a call is refused (and the run fails) once the spend so far has
/// reached the cap, so the call that crosses it is the last one made.
#[derive(Debug)]
pub struct LegacyLedger {
  pub max_usd: f64,
  spent: Mutex<f64>,
}

impl LegacyLedger {
  pub fn new(max_usd: f64) -> Self {
    Self {
      max_usd,
      spent: Mutex::new(0.0),
    }
  }

  pub fn spent(&self) -> f64 {
    *self.spent.lock().unwrap_or_else(|e| e.into_inner())
  }

  pub fn spend(&self, usd: f64) {
    if usd.is_finite() && usd > 0.0 {
      *self.spent.lock().unwrap_or_else(|e| e.into_inner()) += usd;
    }
  }

  /// Before a provider call of a model (`priced`: it has a catalog price).
  pub fn admit(&self, priced: bool, provider: &str, model: &str) -> Result<(), Error> {
    if !priced {
      return Err(Error::coded(
        Code::SubagentUnpricedBudget,
        format!("{provider}/{model} is not in the public catalog, so maxCostUsd cannot meter it; pick a cataloged model, or use budget.maxTokens"),
      ));
    }
    let spent = self.spent();
    if spent >= self.max_usd {
      return Err(Error::coded(
        Code::RunCostBudgetExceeded,
        format!(
          "spent ${} of maxCostUsd ${} before the next model call",
          number_text(round10(spent)),
          number_text(self.max_usd)
        ),
      ));
    }
    Ok(())
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
  fn release_checks_in_the_references_order() {
    let mut m = Meter::new(Denomination::Tokens, 1_000.0, Some(100.0), None);
    let code = |r: Result<Tranche, Error>| r.unwrap_err().code;
    assert_eq!(code(m.release(0.0, Some("x"))), Code::BudgetReleaseInvalid);
    assert_eq!(code(m.release(1.5, Some("x"))), Code::BudgetReleaseInvalid);
    assert_eq!(code(m.release(f64::NAN, None)), Code::BudgetReleaseInvalid);
    assert_eq!(
      code(m.release(10.0, Some("  "))),
      Code::BudgetReleaseReasonRequired
    );
    assert_eq!(code(m.release(10.0, None)), Code::BudgetReleaseReasonRequired);
    assert_eq!(code(m.release(901.0, Some("x"))), Code::BudgetReleaseExceedsMax);
    m.calls = 3;
    let t = m.release(900.0, Some("all of it")).expect("fits");
    assert_eq!((t.amount, t.at_call, m.released), (900.0, 3, 1_000.0));
    assert_eq!(code(m.release(1.0, Some("x"))), Code::BudgetReleaseExceedsMax);
    m.settle(1_001.0);
    assert_eq!(code(m.release(1.0, Some("x"))), Code::BudgetCapBreached);
    m.revoked = true;
    assert_eq!(code(m.release(1.0, Some("x"))), Code::BudgetRevoked);
    let usd = Meter::new(Denomination::Usd, 1.0, Some(0.25), None);
    assert_eq!(usd.context().releasable, 0.75);
  }

  #[test]
  fn the_legacy_ledger_refuses_once_spent() {
    let l = LegacyLedger::new(0.01);
    assert!(l.admit(true, "p", "m").is_ok());
    l.spend(0.004);
    assert!(l.admit(true, "p", "m").is_ok());
    l.spend(0.007);
    let e = l.admit(true, "p", "m").unwrap_err();
    assert_eq!(e.code, Code::RunCostBudgetExceeded);
    assert_eq!(
      e.message,
      "cave_run_cost_budget_exceeded: spent $0.011 of maxCostUsd $0.01 before the next model call"
    );
    assert_eq!(
      l.admit(false, "p", "m").unwrap_err().code,
      Code::SubagentUnpricedBudget
    );
  }

  #[test]
  fn unpriced_usd_never_admits() {
    let m = Meter::new(Denomination::Usd, 1.0, None, None);
    assert_eq!(m.admit(10, 10, None), Admission::Stop);
  }
}
