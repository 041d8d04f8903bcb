//! Durable runs: the journal written before work and read back to resume after a crash
//! without buying the same work twice (`@caveman-ai/agent`'s `durable.ts`, journal v2).

pub mod canonical;
pub mod http_store;
pub mod journal;
pub mod lease;
pub mod object_store;
pub mod record;
pub mod replay;
pub mod store;
pub mod summary;

use crate::code::Code;

/// A durable failure: the kernel's error type, with a `cave_durable_*` code; `message` starts
/// with the code.
pub type DurableError = crate::code::Error;

/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`.
pub fn valid_run_id(id: &str) -> bool {
  let b = id.as_bytes();
  !b.is_empty()
    && b.len() <= 128
    && b[0].is_ascii_alphanumeric()
    && b
      .iter()
      .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// `Ok` for a valid run id, else [`run_id_error`].
pub fn check_run_id(run_id: &str) -> Result<(), DurableError> {
  if valid_run_id(run_id) {
    Ok(())
  } else {
    Err(run_id_error())
  }
}

pub fn run_id_error() -> DurableError {
  DurableError::coded(
    Code::DurableRunIdInvalid,
    "durable.runId must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}",
  )
}
