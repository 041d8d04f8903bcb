//! The agent kernel: the run loop of `@caveman-ai/agent`'s `run()`, in Rust. The host (Node)
//! supplies the model transport, user tools, the policy and the event sink; native shell tools
//! run here with no round trip through JS.

mod accounting;
mod admission;
mod breakers;
pub mod budget;
mod compact;
pub mod controller;
pub mod event;
mod execute;
pub mod host;
mod journaling;
mod level;
pub mod local;
pub mod message;
pub mod nested;
pub mod receipt;
pub mod result;
pub mod route;
mod run;
pub mod schema;
pub mod spec;
pub mod speculation;
pub mod stats;
mod transcript;

pub use result::{RunFailure, RunOutput};
pub use run::{definition_sha256, run_agent, system_prompt, tool_schemas, DurableSetup, Prepared};

#[cfg(test)]
mod tests;
