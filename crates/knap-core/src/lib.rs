//! knap's engine: the workspace tools of `@caveman-ai/agent`'s `shellTools()` with their caps,
//! output store and workspace boundary, the execution backend, and the tool-policy evaluator.
//! No napi types live here; the binding crate converts and implements the host traits.

pub mod agent_tools;
pub mod apply_patch;
pub mod canonical;
pub mod cap;
pub mod command_session;
pub mod compaction;
pub mod catalog;
pub mod code;
pub mod durable;
pub mod edit;
pub mod error;
pub mod exec;
pub mod glob;
pub mod kernel;
mod kept;
pub mod launch;
pub mod limits;
pub mod memory;
pub mod lines;
pub mod policy;
pub mod program;
pub mod progress;
pub mod receipt_check;
mod rg_rules;
pub mod sandbox;
pub mod schema;
pub mod search;
pub mod skills;
pub mod serve;
pub mod store;
pub mod suggest;
pub mod text;
pub mod tools;
pub mod truncate;
pub mod walk;
pub mod workspace;

#[cfg(all(test, target_os = "linux"))]
mod race_tests;
#[cfg(test)]
mod walk_tests;

#[cfg(all(test, target_os = "linux"))]
mod prop_tests;

#[cfg(all(test, target_os = "linux"))]
mod race_write_tests;

pub use error::ToolError;
