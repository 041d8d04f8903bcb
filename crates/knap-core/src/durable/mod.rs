//! Durable runs: the journal written before work and read back to resume after a crash
//! without buying the same work twice (`@caveman-ai/agent`'s `durable.ts`, journal v2).

pub mod canonical;
pub mod journal;
pub mod store;
pub mod summary;

use std::fmt;

/// A durable failure with its stable `cave_durable_*` code; `message` starts with the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableError {
  pub code: String,
  pub message: String,
}

impl DurableError {
  pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
    Self {
      code: code.into(),
      message: message.into(),
    }
  }

  pub fn coded(code: &str, detail: impl fmt::Display) -> Self {
    Self::new(code, format!("{code}: {detail}"))
  }
}

impl fmt::Display for DurableError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(&self.message)
  }
}

impl std::error::Error for DurableError {}

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

pub fn run_id_error() -> DurableError {
  DurableError::new(
    "cave_durable_run_id_invalid",
    "cave_durable_run_id_invalid: durable.runId must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}",
  )
}
