//! `sandbox: "required"` with `RunOptions.entryPath`: the limits the JS worker pool
//! (lib/sandbox.mjs) runs under. The kernel itself only routes: it admits a required level's
//! tools when an entry is given, and the JS side runs their closures in worker processes.

use knap_core::limits;
use napi_derive::napi;

#[napi(object)]
pub struct BindingSandboxLimits {
  pub workers_per_run: u32,
  pub start_timeout_ms: u32,
  pub abort_grace_ms: u32,
  /// A worker refuses to send a result longer than this (`cave_tool_result_limit:<name>`), so
  /// an oversized value never crosses the IPC channel.
  pub tool_result_max_bytes: u32,
}

#[napi]
pub fn sandbox_limits() -> BindingSandboxLimits {
  BindingSandboxLimits {
    workers_per_run: limits::SANDBOX_WORKERS_PER_RUN,
    start_timeout_ms: limits::SANDBOX_START_TIMEOUT_MS as u32,
    abort_grace_ms: limits::SANDBOX_ABORT_GRACE_MS as u32,
    tool_result_max_bytes: limits::TOOL_RESULT_MAX_BYTES as u32,
  }
}

/// Makes this process non-dumpable (unless `KNAP_DUMPABLE=1`) before its first sandbox worker
/// starts, as the first `bash` command does: a worker of the same non-root user cannot read the
/// parent's environment or memory through `/proc`. A no-op off Linux.
#[napi]
pub fn sandbox_protect_parent() {
  #[cfg(target_os = "linux")]
  knap_core::launch::hide_knap_process();
}
