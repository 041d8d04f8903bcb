//! The agent kernel: the run loop of `@caveman-ai/agent`'s `run()`, in Rust. The host (Node)
//! supplies the model transport, user tools, the policy and the event sink; native shell tools
//! run here with no round trip through JS.

pub mod budget;
pub mod host;
mod journaling;
pub mod receipt;
mod run;
pub mod schema;
pub mod spec;
pub mod stats;

pub use journaling::error_code;
pub use run::{
  definition_sha256, run_agent, system_prompt, tool_schemas, DurableSetup, Prepared, RunFailure,
};

#[cfg(test)]
mod tests;
