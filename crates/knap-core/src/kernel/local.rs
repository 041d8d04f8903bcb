//! A single-thread executor for one future (a run's kernel): polled on the thread that made it
//! (Node's JS thread), so a host answer given on that thread resumes the kernel at once, with
//! no hand-off to a runtime worker and back.
//!
//! A wake on the home thread while a turn is in progress only asks that turn to poll again. A
//! wake from anywhere else (a native tool finishing on the blocking pool, a timer) calls the
//! `remote` hook once until the next [`LocalExecutor::pump`], which the host answers by calling
//! `pump` on the home thread.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::ThreadId;

use crate::exec::BoxFuture;

struct WakeState {
  home: ThreadId,
  /// A turn is in progress on the home thread.
  inside: AtomicBool,
  /// Woken during the turn: poll again before returning.
  again: AtomicBool,
  /// `remote` was called and `pump` has not come yet.
  scheduled: AtomicBool,
  remote: Box<dyn Fn() + Send + Sync>,
}

impl Wake for WakeState {
  fn wake(self: Arc<Self>) {
    self.wake_by_ref();
  }

  fn wake_by_ref(self: &Arc<Self>) {
    if std::thread::current().id() == self.home && self.inside.load(Ordering::SeqCst) {
      self.again.store(true, Ordering::SeqCst);
      return;
    }
    if !self.scheduled.swap(true, Ordering::SeqCst) {
      (self.remote)();
    }
  }
}

/// What the host side of a run holds to ask for a poll from outside a turn.
#[derive(Clone)]
pub struct LocalHandle(Arc<WakeState>);

impl LocalHandle {
  /// Inside a turn on the home thread (work queued now is seen before the turn ends).
  pub fn in_turn(&self) -> bool {
    std::thread::current().id() == self.0.home && self.0.inside.load(Ordering::SeqCst)
  }

  /// Makes sure a turn follows: at once if one is in progress here, else through `remote`.
  pub fn nudge(&self) {
    Waker::from(self.0.clone()).wake_by_ref();
  }
}

pub struct LocalExecutor<T> {
  future: Mutex<Option<BoxFuture<T>>>,
  wake: Arc<WakeState>,
}

impl<T> LocalExecutor<T> {
  /// An executor whose home is the calling thread.
  pub fn new(
    future: impl Future<Output = T> + Send + 'static,
    remote: impl Fn() + Send + Sync + 'static,
  ) -> Self {
    Self {
      future: Mutex::new(Some(Box::pin(future))),
      wake: Arc::new(WakeState {
        home: std::thread::current().id(),
        inside: AtomicBool::new(false),
        again: AtomicBool::new(false),
        scheduled: AtomicBool::new(false),
        remote: Box::new(remote),
      }),
    }
  }

  pub fn handle(&self) -> LocalHandle {
    LocalHandle(self.wake.clone())
  }

  pub fn is_done(&self) -> bool {
    self.future.lock().unwrap_or_else(|e| e.into_inner()).is_none()
  }

  /// One turn on the home thread: `before` (which may wake the future: settling a host answer),
  /// then polls while woken here, calling `between` after every poll (the host delivers what the
  /// poll queued; that may wake the future again). The output once the future completes.
  ///
  /// Re-entered from `between` (a host callback answering synchronously), it only runs `before`
  /// and leaves the polling to the turn in progress.
  pub fn turn(&self, before: impl FnOnce(), mut between: impl FnMut()) -> Option<T> {
    debug_assert_eq!(
      std::thread::current().id(),
      self.wake.home,
      "turns run on the home thread"
    );
    if self.wake.inside.swap(true, Ordering::SeqCst) {
      before();
      self.wake.again.store(true, Ordering::SeqCst);
      return None;
    }
    before();
    let waker = Waker::from(self.wake.clone());
    let mut cx = Context::from_waker(&waker);
    let mut out = None;
    loop {
      self.wake.again.store(false, Ordering::SeqCst);
      {
        let mut slot = self.future.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(future) = slot.as_mut() {
          if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            *slot = None;
            out = Some(v);
          }
        }
      }
      between();
      if out.is_some() || !self.wake.again.load(Ordering::SeqCst) || self.is_done() {
        break;
      }
    }
    self.wake.inside.store(false, Ordering::SeqCst);
    out
  }

  /// The turn `remote` asked for.
  pub fn pump(&self, between: impl FnMut()) -> Option<T> {
    self.wake.scheduled.store(false, Ordering::SeqCst);
    self.turn(|| {}, between)
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::sync::atomic::AtomicUsize;
  use std::sync::mpsc;

  #[test]
  fn a_local_answer_resumes_the_future_in_the_same_turn() {
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let remote_calls = Arc::new(AtomicUsize::new(0));
    let r = remote_calls.clone();
    let ex = LocalExecutor::new(async move { rx.await.unwrap() + 1 }, move || {
      r.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(ex.turn(|| {}, || {}), None);
    let mut tx = Some(tx);
    assert_eq!(ex.turn(|| tx.take().unwrap().send(41).unwrap(), || {}), Some(42));
    assert!(ex.is_done());
    assert_eq!(remote_calls.load(Ordering::SeqCst), 0, "no wake left the thread");
  }

  #[test]
  fn an_answer_from_between_is_polled_before_the_turn_returns() {
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let ex = Arc::new(LocalExecutor::new(async move { rx.await.unwrap() }, || {}));
    let mut tx = Some(tx);
    let inner = ex.clone();
    // `between` answers synchronously through a re-entrant turn (a sync host callback).
    let out = ex.turn(
      || {},
      || {
        if let Some(tx) = tx.take() {
          assert_eq!(inner.turn(|| tx.send(7).unwrap(), || {}), None);
        }
      },
    );
    assert_eq!(out, Some(7));
  }

  #[test]
  fn a_wake_from_another_thread_schedules_one_pump() {
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let (pumps_tx, pumps) = mpsc::channel::<()>();
    let ex = LocalExecutor::new(async move { rx.await.unwrap() * 2 }, move || {
      let _ = pumps_tx.send(());
    });
    assert_eq!(ex.turn(|| {}, || {}), None);
    std::thread::spawn(move || tx.send(21).unwrap()).join().unwrap();
    pumps.recv().unwrap();
    assert!(pumps.try_recv().is_err(), "one pump per wake-up");
    assert_eq!(ex.pump(|| {}), Some(42));
    let handle = ex.handle();
    assert!(!handle.in_turn());
  }
}
