//! The napi binding: converts types and implements core traits over JS callbacks. No tool
//! logic lives here; see `crates/knap-core`.

mod agent_tools;
mod ai_sdk;
mod budget;
mod catalog;
mod command_session;
mod compaction;
mod durable;
mod durable_remote;
mod execution_backend;
pub mod js;
mod kernel;
mod memory;
mod code;
mod policy;
mod route;
mod sandbox;
mod serve;
mod shell_tools;
mod skills;
mod surface;
mod system_context;

pub use agent_tools::*;
pub use ai_sdk::*;
pub use catalog::*;
pub use command_session::*;
pub use durable::*;
pub use durable_remote::*;
pub use execution_backend::*;
pub use kernel::*;
pub use memory::*;
pub use code::*;
pub use policy::*;
pub use sandbox::*;
pub use serve::*;
pub use shell_tools::*;
pub use skills::*;
pub use surface::*;

use napi_derive::napi;

/// `TOOL_POLICY_TIMEOUT_MS` of the reference: 10,000 ms.
#[napi]
pub const TOOL_POLICY_TIMEOUT_MS: u32 = knap_core::limits::TOOL_POLICY_TIMEOUT_MS as u32;

/// A JS error code for a thrown `napi::Error` (becomes `error.code`).
pub struct ErrorCode(pub String);

impl AsRef<str> for ErrorCode {
  fn as_ref(&self) -> &str {
    &self.0
  }
}

pub(crate) fn coded_error(err: knap_core::ToolError) -> napi::Error<ErrorCode> {
  napi::Error::new(ErrorCode(err.code), err.message)
}

/// Async exports cannot reject with a custom `code`: they reject with `knap:` and the JSON of
/// `{code, message}`, which `lib/native.mjs` (`call`) turns back into an `Error` with `.code`
/// (JSON, so a code may hold `:` as `cave_…_invalid:<field>` does).
pub(crate) fn async_error(code: &str, message: &str) -> napi::Error {
  let body = serde_json::json!({ "code": code, "message": message });
  napi::Error::new(napi::Status::GenericFailure, format!("knap:{body}"))
}
