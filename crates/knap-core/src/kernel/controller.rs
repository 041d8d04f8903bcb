//! The run's side of `RunOptions.controller` (`AgentRunController`): the queue the host fills
//! from JS (push, remove, clear, hold) and the kernel drains at turn boundaries without ever
//! waiting on JS. The JS controller keeps the authoritative order for its `state`; this is the
//! copy a running loop reads, one message per turn.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::message::UserMessage;

/// Which of the controller's queues a message is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
  /// Delivered at the next turn boundary of the running loop.
  Steering,
  /// Delivered when the loop would otherwise end.
  FollowUp,
}

#[derive(Default)]
struct Inner {
  steering: VecDeque<(u32, UserMessage)>,
  follow_ups: VecDeque<(u32, UserMessage)>,
  /// After `interrupt()` with messages queued: nothing is delivered until `resume()`.
  held: bool,
}

/// A run's controller queue; `id`s are the JS controller's, so a delivery can be reported back.
#[derive(Default)]
pub struct ControllerQueue {
  inner: Mutex<Inner>,
}

impl ControllerQueue {
  pub fn new() -> Self {
    Self::default()
  }

  fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
    self.inner.lock().unwrap_or_else(|e| e.into_inner())
  }

  pub fn push(&self, kind: QueueKind, id: u32, message: UserMessage) {
    let mut q = self.lock();
    match kind {
      QueueKind::Steering => q.steering.push_back((id, message)),
      QueueKind::FollowUp => q.follow_ups.push_back((id, message)),
    }
  }

  /// Drops message `id` (`clear(index)`); false when it is not queued (delivered already).
  pub fn remove(&self, id: u32) -> bool {
    let mut guard = self.lock();
    let q = &mut *guard;
    for list in [&mut q.steering, &mut q.follow_ups] {
      if let Some(i) = list.iter().position(|(m, _)| *m == id) {
        list.remove(i);
        return true;
      }
    }
    false
  }

  pub fn clear(&self) {
    let mut q = self.lock();
    q.steering.clear();
    q.follow_ups.clear();
  }

  pub fn hold(&self, held: bool) {
    self.lock().held = held;
  }

  /// Removes and returns the next message of `kind`; `None` when there is none or while held.
  pub fn take(&self, kind: QueueKind) -> Option<(u32, UserMessage)> {
    let mut q = self.lock();
    if q.held {
      return None;
    }
    match kind {
      QueueKind::Steering => q.steering.pop_front(),
      QueueKind::FollowUp => q.follow_ups.pop_front(),
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::kernel::message::UserContent;

  fn msg(text: &str) -> UserMessage {
    UserMessage {
      content: UserContent::Text(text.into()),
      timestamp: None,
    }
  }

  fn text(m: Option<(u32, UserMessage)>) -> Option<(u32, String)> {
    m.map(|(id, m)| match m.content {
      UserContent::Text(t) => (id, t),
      UserContent::Parts(_) => (id, String::new()),
    })
  }

  #[test]
  fn queues_in_order_remove_clear_and_hold() {
    let q = ControllerQueue::new();
    q.push(QueueKind::Steering, 1, msg("a"));
    q.push(QueueKind::FollowUp, 2, msg("b"));
    q.push(QueueKind::Steering, 3, msg("c"));
    q.push(QueueKind::FollowUp, 4, msg("d"));
    assert_eq!(text(q.take(QueueKind::Steering)), Some((1, "a".into())));
    assert!(q.remove(3));
    assert!(!q.remove(3), "a removed or delivered id is gone");
    assert_eq!(q.take(QueueKind::Steering), None);
    q.hold(true);
    assert_eq!(q.take(QueueKind::FollowUp), None, "held after an interrupt");
    q.hold(false);
    assert_eq!(text(q.take(QueueKind::FollowUp)), Some((2, "b".into())));
    q.clear();
    assert_eq!(q.take(QueueKind::FollowUp), None);
  }
}
