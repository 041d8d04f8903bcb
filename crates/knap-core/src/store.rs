//! The in-memory output store behind `read_tool_output`: one per `shellTools()` call, entries
//! of at most 8 MiB, 16 MiB in all, oldest evicted first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::limits::{STORE_ENTRY_MAX_BYTES, STORE_TOTAL_MAX_BYTES};

#[derive(Debug)]
pub struct StoredOutput {
  pub label: String,
  pub text: String,
  pub complete: bool,
}

#[derive(Default)]
struct Inner {
  entries: HashMap<String, Arc<StoredOutput>>,
  order: VecDeque<String>,
  total: usize,
}

#[derive(Default)]
pub struct OutputStore {
  inner: Mutex<Inner>,
  entry_max: usize,
  total_max: usize,
}

impl OutputStore {
  pub fn new() -> Self {
    Self::with_limits(STORE_ENTRY_MAX_BYTES, STORE_TOTAL_MAX_BYTES)
  }

  pub fn with_limits(entry_max: usize, total_max: usize) -> Self {
    Self {
      inner: Mutex::default(),
      entry_max,
      total_max,
    }
  }

  /// Stores the full text and returns its handle, or `None` when it is over the entry limit.
  pub fn put(&self, label: &str, text: &str, complete: bool) -> Option<String> {
    let size = text.len();
    if size > self.entry_max {
      return None;
    }
    let handle = new_handle();
    let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
    while inner.total + size > self.total_max {
      let Some(oldest) = inner.order.pop_front() else {
        break;
      };
      if let Some(old) = inner.entries.remove(&oldest) {
        inner.total -= old.text.len();
      }
    }
    inner.total += size;
    inner.order.push_back(handle.clone());
    let entry = StoredOutput {
      label: label.to_string(),
      text: text.to_string(),
      complete,
    };
    inner.entries.insert(handle.clone(), Arc::new(entry));
    Some(handle)
  }

  pub fn get(&self, handle: &str) -> Option<Arc<StoredOutput>> {
    self
      .inner
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .entries
      .get(handle)
      .cloned()
  }

  pub fn total_bytes(&self) -> usize {
    self.inner.lock().unwrap_or_else(|e| e.into_inner()).total
  }

  pub fn len(&self) -> usize {
    self.inner.lock().unwrap_or_else(|e| e.into_inner()).entries.len()
  }

  pub fn is_empty(&self) -> bool {
    self.len() == 0
  }
}

/// `"tool_" + randomUUID()` without dashes: 32 lowercase hex characters.
fn new_handle() -> String {
  format!("tool_{}", uuid::Uuid::new_v4().simple())
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn handle_format() {
    let s = OutputStore::new();
    let h = s.put("l", "abc", true).unwrap();
    assert!(h.starts_with("tool_"));
    assert_eq!(h.len(), 37);
    assert!(h[5..]
      .bytes()
      .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
  }

  #[test]
  fn evicts_oldest_first() {
    let s = OutputStore::with_limits(10, 20);
    let a = s.put("a", &"a".repeat(8), true).unwrap();
    let b = s.put("b", &"b".repeat(8), true).unwrap();
    let c = s.put("c", &"c".repeat(8), true).unwrap();
    assert!(s.get(&a).is_none(), "oldest evicted");
    assert!(s.get(&b).is_some());
    assert!(s.get(&c).is_some());
    assert_eq!(s.total_bytes(), 16);
    assert!(
      s.put("d", &"d".repeat(11), true).is_none(),
      "over entry limit is refused"
    );
    assert_eq!(s.len(), 2);
  }

  #[test]
  fn real_limits() {
    let s = OutputStore::new();
    let mib = 1024 * 1024;
    let first = s.put("1", &"x".repeat(8 * mib), true).unwrap();
    s.put("2", &"y".repeat(8 * mib), true).unwrap();
    assert!(s.get(&first).is_some(), "16 MiB exactly fits");
    s.put("3", "z", true).unwrap();
    assert!(s.get(&first).is_none());
    assert_eq!(s.total_bytes(), 8 * mib + 1);
  }
}
