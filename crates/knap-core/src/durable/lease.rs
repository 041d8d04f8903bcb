//! What the lease-based remote stores (HTTP, object storage) share: the leases this store
//! instance holds, each renewed every third of its TTL by a task of its own, and the sticky
//! "lease lost" error a failed renewal leaves behind, which refuses every later append of that
//! run (the reference's poisoning) until the run is acquired again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::DurableError;
use crate::code::Code;
use crate::limits::{DURABLE_LEASE_TTL_DEFAULT_MS, DURABLE_LEASE_TTL_MIN_MS};

/// Milliseconds since the epoch (lease expiries are wall-clock instants shared across machines).
pub fn now_ms() -> u64 {
  std::time::SystemTime::now()
    .duration_since(std::time::UNIX_EPOCH)
    .map(|d| d.as_millis() as u64)
    .unwrap_or(0)
}

/// A lease TTL option: absent → 30 s; else a safe integer of at least 3 s, or `code`.
pub fn lease_ttl(value: Option<f64>, code: Code, name: &str) -> Result<u64, DurableError> {
  match value {
    None => Ok(DURABLE_LEASE_TTL_DEFAULT_MS),
    Some(v)
      if v.is_finite()
        && v.fract() == 0.0
        && v >= DURABLE_LEASE_TTL_MIN_MS as f64
        && v <= 9_007_199_254_740_991.0 =>
    {
      Ok(v as u64)
    }
    Some(_) => Err(DurableError::coded(
      code,
      format!("{name} must be an integer of at least {DURABLE_LEASE_TTL_MIN_MS} ms"),
    )),
  }
}

/// `cave_durable_run_lock_lost` as the SQL store words it.
pub fn lock_lost(run_id: &str) -> DurableError {
  DurableError::coded(
    Code::DurableRunLockLost,
    format!("run \"{run_id}\" is no longer held by this process"),
  )
}

struct Held<L> {
  id: u64,
  lease: L,
  stop: CancellationToken,
}

/// The leases one store instance holds, by run id, and the runs whose lease it lost.
pub struct LeaseBook<L> {
  held: Mutex<HashMap<String, Held<L>>>,
  lost: Mutex<HashMap<String, DurableError>>,
  next: AtomicU64,
}

impl<L> Default for LeaseBook<L> {
  fn default() -> Self {
    Self {
      held: Mutex::default(),
      lost: Mutex::default(),
      next: AtomicU64::new(1),
    }
  }
}

impl<L: Clone + Send + 'static> LeaseBook<L> {
  /// The sticky error of a run whose lease was lost, if any.
  pub fn lost(&self, run_id: &str) -> Option<DurableError> {
    self
      .lost
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .get(run_id)
      .cloned()
  }

  /// The lease held for `run_id` and its id.
  pub fn get(&self, run_id: &str) -> Option<(u64, L)> {
    self
      .held
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .get(run_id)
      .map(|h| (h.id, h.lease.clone()))
  }

  /// Updates the held lease `id` (a renewal's new expiry); false when it is no longer held.
  pub fn update(&self, run_id: &str, id: u64, f: impl FnOnce(&mut L)) -> bool {
    let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
    match held.get_mut(run_id) {
      Some(h) if h.id == id => {
        f(&mut h.lease);
        true
      }
      _ => false,
    }
  }

  /// Records a newly taken lease (clearing an earlier loss) and starts its renewal: `renew` is
  /// called every `period` until the lease is given back; its first error is kept as the run's
  /// sticky error and ends the renewals. Returns the lease's id.
  pub fn hold<F, Fut>(self: &Arc<Self>, run_id: &str, lease: L, period: Duration, renew: F) -> u64
  where
    F: Fn(u64) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), DurableError>> + Send,
  {
    let id = self.next.fetch_add(1, Ordering::Relaxed);
    let stop = CancellationToken::new();
    let old = self.held.lock().unwrap_or_else(|e| e.into_inner()).insert(
      run_id.to_string(),
      Held {
        id,
        lease,
        stop: stop.clone(),
      },
    );
    if let Some(old) = old {
      old.stop.cancel();
    }
    self.lost.lock().unwrap_or_else(|e| e.into_inner()).remove(run_id);
    let book = Arc::downgrade(self);
    let run = run_id.to_string();
    tokio::spawn(async move {
      loop {
        tokio::select! {
          _ = stop.cancelled() => return,
          _ = tokio::time::sleep(period) => {}
        }
        let result = tokio::select! {
          _ = stop.cancelled() => return,
          r = renew(id) => r,
        };
        if let Err(e) = result {
          if let Some(book) = book.upgrade() {
            book.lose(&run, id, e);
          }
          return;
        }
      }
    });
    id
  }

  /// The lease `id` (any when `None`) is no longer held: renewals stop; returns it.
  pub fn take(&self, run_id: &str, id: Option<u64>) -> Option<L> {
    let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
    match held.get(run_id) {
      Some(h) if id.is_none_or(|i| i == h.id) => {
        let h = held.remove(run_id)?;
        h.stop.cancel();
        Some(h.lease)
      }
      _ => None,
    }
  }

  /// The lease `id` was lost: it is dropped and `error` refuses every later append of the run.
  pub fn lose(&self, run_id: &str, id: u64, error: DurableError) {
    if self.take(run_id, Some(id)).is_some() {
      self
        .lost
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(run_id.to_string(), error);
    }
  }
}

impl<L> Drop for LeaseBook<L> {
  fn drop(&mut self) {
    for h in self.held.lock().unwrap_or_else(|e| e.into_inner()).values() {
      h.stop.cancel();
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn ttl_defaults_and_bounds() {
    let c = || Code::DurableHttpLockTtlInvalid;
    assert_eq!(lease_ttl(None, c(), "lockTtlMs").unwrap(), 30_000);
    assert_eq!(lease_ttl(Some(3_000.0), c(), "lockTtlMs").unwrap(), 3_000);
    for bad in [2_999.0, 3_000.5, f64::NAN, f64::INFINITY, -1.0, 1e300] {
      let e = lease_ttl(Some(bad), c(), "lockTtlMs").unwrap_err();
      assert_eq!(e.code, Code::DurableHttpLockTtlInvalid, "{bad}");
      assert!(e.message.starts_with("cave_durable_http_lock_ttl_invalid: "));
    }
  }

  #[tokio::test(start_paused = true)]
  async fn renewals_run_until_taken_and_a_failure_is_sticky() {
    let book: Arc<LeaseBook<u32>> = Arc::default();
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    let id = book.hold("r", 7, Duration::from_millis(100), move |_| {
      let c = c.clone();
      async move {
        c.fetch_add(1, Ordering::Relaxed);
        Ok(())
      }
    });
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(count.load(Ordering::Relaxed), 3);
    assert_eq!(book.get("r"), Some((id, 7)));
    assert_eq!(
      book.take("r", Some(id + 1)),
      None,
      "another lease id releases nothing"
    );
    assert_eq!(book.take("r", Some(id)), Some(7));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(count.load(Ordering::Relaxed), 3, "renewals stopped");

    let id = book.hold("r", 8, Duration::from_millis(100), |_| async {
      Err(DurableError::coded(Code::DurableHttpLockLost, "gone"))
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(book.get("r"), None);
    assert_eq!(book.lost("r").unwrap().code, Code::DurableHttpLockLost);
    assert_eq!(book.take("r", Some(id)), None);
    // A new lease clears the loss.
    book.hold("r", 9, Duration::from_secs(60), |_| async { Ok(()) });
    assert!(book.lost("r").is_none());
  }
}
