//! Process-wide kernel counters for profiling and the kernel bench: how long runs spent waiting
//! for the model transport, executing tools, and how many of each. Relaxed atomics; a few
//! nanoseconds per call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static MODEL_CALLS: AtomicU64 = AtomicU64::new(0);
static MODEL_WAIT_NS: AtomicU64 = AtomicU64::new(0);
static TOOL_CALLS: AtomicU64 = AtomicU64::new(0);
static TOOL_EXEC_NS: AtomicU64 = AtomicU64::new(0);

/// A snapshot of the counters since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelStats {
  /// Provider calls the kernel made, and the time from sending each to its reply.
  pub model_calls: u64,
  pub model_wait_ns: u64,
  /// Tool calls that executed (admitted ones), and the time from starting each to its result.
  pub tool_calls: u64,
  pub tool_exec_ns: u64,
}

pub fn snapshot() -> KernelStats {
  KernelStats {
    model_calls: MODEL_CALLS.load(Ordering::Relaxed),
    model_wait_ns: MODEL_WAIT_NS.load(Ordering::Relaxed),
    tool_calls: TOOL_CALLS.load(Ordering::Relaxed),
    tool_exec_ns: TOOL_EXEC_NS.load(Ordering::Relaxed),
  }
}

pub(crate) fn model_call(elapsed: Duration) {
  MODEL_CALLS.fetch_add(1, Ordering::Relaxed);
  MODEL_WAIT_NS.fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
}

pub(crate) fn tool_call(elapsed: Duration) {
  TOOL_CALLS.fetch_add(1, Ordering::Relaxed);
  TOOL_EXEC_NS.fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
}
