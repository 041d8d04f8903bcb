//! Small pure root exports over the core: receipt validation, canonical JSON and digests,
//! durable summaries. Synchronous: each is a bounded computation on the caller's data.

use napi::bindgen_prelude::{Buffer, Either};
use napi_derive::napi;

use crate::ErrorCode;

fn code_of(message: &str) -> String {
  message.split([':', ' ']).next().unwrap_or(message).to_string()
}

fn coded(message: String) -> napi::Error<ErrorCode> {
  napi::Error::new(ErrorCode(code_of(&message)), message)
}

/// `defineRunReceipt`'s checks on snapshotted receipt JSON; throws `cave_run_receipt_invalid:<field>`.
#[napi]
pub fn validate_run_receipt_json(json: String) -> napi::Result<(), ErrorCode> {
  knap_core::receipt_check::validate_receipt_json(&json).map_err(coded)
}

/// Canonical JSON of JSON text: keys sorted recursively, no whitespace (`stableStringify`).
#[napi]
pub fn canonical_json(json: String) -> napi::Result<String, ErrorCode> {
  let value: serde_json::Value =
    serde_json::from_str(&json).map_err(|_| coded("caveman agent: value is not canonically serializable".into()))?;
  Ok(knap_core::canonical::stable_json(&value))
}

/// Lowercase hex SHA-256 of UTF-8 text or bytes.
#[napi]
pub fn sha256_hex(data: Either<String, Buffer>) -> String {
  match data {
    Either::A(s) => knap_core::canonical::sha256_hex(s.as_bytes()),
    Either::B(b) => knap_core::canonical::sha256_hex(&*b),
  }
}

/// `durableRunSummary(lines)` as JSON text.
#[napi]
pub fn durable_run_summary_json(lines: Vec<String>) -> napi::Result<String, ErrorCode> {
  knap_core::durable::summary::summarize(&lines)
    .map(|v| v.to_string())
    .map_err(|e| napi::Error::new(ErrorCode(e.code.to_string()), e.message))
}

#[napi]
pub fn durable_input_is_replayable(input: String) -> bool {
  knap_core::durable::summary::input_is_replayable(&input)
}
