//! What the lease-based remote stores (HTTP, object storage) share: the store itself over an
//! engine ([`Leased`]: run-id checks, the [`DurableStore`] and [`LeaseStore`] faces), the leases
//! this store instance holds, each renewed every third of its TTL by a task of its own, and the
//! sticky "lease lost" error a failed renewal leaves behind, which refuses every later append of
//! that run (the reference's poisoning) until the run is acquired again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::store::DurableStore;
// Lease expiries are wall-clock instants shared across machines.
pub use super::record::now_ms;
use super::{check_run_id, DurableError};
use crate::code::Code;
use crate::exec::BoxFuture;
use crate::limits::{DURABLE_LEASE_TTL_DEFAULT_MS, DURABLE_LEASE_TTL_MIN_MS};

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

impl<L: Clone + Send + 'static> LeaseBook<L> {
  /// [`Self::hold`] renewed every third of `ttl_ms` by `renew(engine, run id, lease id)`, for
  /// as long as `engine` lives (a dropped store renews nothing).
  pub fn hold_for<E, F, Fut>(self: &Arc<Self>, engine: &Arc<E>, run_id: &str, lease: L, ttl_ms: u64, renew: F) -> u64
  where
    E: Send + Sync + 'static,
    F: Fn(Arc<E>, String, u64) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), DurableError>> + Send,
  {
    let engine = Arc::downgrade(engine);
    let run = run_id.to_string();
    let period = Duration::from_millis((ttl_ms / 3).max(1));
    self.hold(run_id, lease, period, move |id| {
      let renewal = engine.upgrade().map(|e| renew(e, run.clone(), id));
      async move {
        match renewal {
          Some(r) => r.await,
          None => Ok(()),
        }
      }
    })
  }
}

impl<L> Drop for LeaseBook<L> {
  fn drop(&mut self) {
    for h in self.held.lock().unwrap_or_else(|e| e.into_inner()).values() {
      h.stop.cancel();
    }
  }
}

/// The engine of a lease-based store: its operations, called by [`Leased`] with the run id
/// already checked where one names a run to read, write or lock.
pub trait LeaseEngine: Send + Sync + 'static {
  fn load(&self, run_id: &str) -> impl Future<Output = Result<Vec<String>, DurableError>> + Send;
  fn append(&self, run_id: &str, data: String) -> impl Future<Output = Result<(), DurableError>> + Send;
  /// Takes the run's lease and starts renewing it; resolves to the lease's id.
  fn acquire(self: Arc<Self>, run_id: &str) -> impl Future<Output = Result<u64, DurableError>> + Send;
  /// Gives lease `id` back (any lease of the run when `None`).
  fn release(&self, run_id: &str, id: Option<u64>) -> impl Future<Output = Result<(), DurableError>> + Send;
  /// Gives back a lease still held (as the SQL store's close); an engine adds what it caches.
  fn close(&self, run_id: &str) -> impl Future<Output = Result<(), DurableError>> + Send {
    self.release(run_id, None)
  }
  fn list(&self) -> impl Future<Output = Result<Vec<String>, DurableError>> + Send;
}

/// A lease-based store over its engine (`HttpStore`, `ObjectStore`).
pub struct Leased<E>(pub(super) Arc<E>);

impl<E> Clone for Leased<E> {
  fn clone(&self) -> Self {
    Self(self.0.clone())
  }
}

impl<E: LeaseEngine> Leased<E> {
  pub(super) fn over(engine: E) -> Self {
    Self(Arc::new(engine))
  }

  pub(super) fn engine(&self) -> &E {
    &self.0
  }

  pub async fn load(&self, run_id: &str) -> Result<Vec<String>, DurableError> {
    check_run_id(run_id)?;
    self.0.load(run_id).await
  }

  pub async fn append(&self, run_id: &str, data: String) -> Result<(), DurableError> {
    check_run_id(run_id)?;
    self.0.append(run_id, data).await
  }

  /// Takes the run's lease and starts renewing it; returns the lease's id for [`Self::release`].
  pub async fn acquire_lease(&self, run_id: &str) -> Result<u64, DurableError> {
    check_run_id(run_id)?;
    self.0.clone().acquire(run_id).await
  }

  /// Gives the lease back (`id`: only that lease, not a later one of the same run).
  pub async fn release(&self, run_id: &str, id: Option<u64>) -> Result<(), DurableError> {
    self.0.release(run_id, id).await
  }

  pub async fn close(&self, run_id: &str) -> Result<(), DurableError> {
    self.0.close(run_id).await
  }

  pub async fn list(&self) -> Result<Vec<String>, DurableError> {
    self.0.list().await
  }
}

impl<E: LeaseEngine> DurableStore for Leased<E> {
  fn load(&self, run_id: &str) -> BoxFuture<Result<Vec<String>, DurableError>> {
    let (s, run) = (self.clone(), run_id.to_string());
    Box::pin(async move { s.load(&run).await })
  }

  fn append(&self, run_id: &str, data: String) -> BoxFuture<Result<(), DurableError>> {
    let (s, run) = (self.clone(), run_id.to_string());
    Box::pin(async move { s.append(&run, data).await })
  }

  fn acquire(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>> {
    let (s, run) = (self.clone(), run_id.to_string());
    Box::pin(async move { s.acquire_lease(&run).await.map(|_| ()) })
  }

  fn release(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>> {
    let (s, run) = (self.clone(), run_id.to_string());
    Box::pin(async move { s.release(&run, None).await })
  }

  fn close(&self, run_id: &str) -> BoxFuture<Result<(), DurableError>> {
    let (s, run) = (self.clone(), run_id.to_string());
    Box::pin(async move { s.close(&run).await })
  }

  fn list(&self) -> Option<BoxFuture<Result<Vec<String>, DurableError>>> {
    let s = self.clone();
    Some(Box::pin(async move { s.list().await }))
  }
}

/// A lease-based store as one object type, whichever its engine: the [`DurableStore`]
/// operations plus lease ids, so a caller gives back only the lease it took (the JS stores'
/// `acquire()` → release function).
pub trait LeaseStore: DurableStore {
  fn acquire_lease(&self, run_id: &str) -> BoxFuture<Result<u64, DurableError>>;
  fn release_lease(&self, run_id: &str, id: Option<u64>) -> BoxFuture<Result<(), DurableError>>;
}

impl<E: LeaseEngine> LeaseStore for Leased<E> {
  fn acquire_lease(&self, run_id: &str) -> BoxFuture<Result<u64, DurableError>> {
    let (s, run) = (self.clone(), run_id.to_string());
    Box::pin(async move { Leased::acquire_lease(&s, &run).await })
  }

  fn release_lease(&self, run_id: &str, id: Option<u64>) -> BoxFuture<Result<(), DurableError>> {
    let (s, run) = (self.clone(), run_id.to_string());
    Box::pin(async move { s.release(&run, id).await })
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
