//! Property tests (proptest) for the parsers and the boundary: the apply-patch parser and
//! matcher, the byte-exact edit, the durable journal's reader and torn-tail repair, and path
//! resolution against the reference's realpath algorithm. They run inside `cargo test` with a
//! bounded number of cases each (a few seconds in all); `KNAP_FUZZ_CASES=<n>` runs `n` cases per
//! property for a longer local search, and a failure prints the shrunk input to add as a unit
//! test.

mod apply_patch;
mod edit;
mod journal;
mod paths;

use proptest::test_runner::{Config, FileFailurePersistence};

/// `default` cases per property, or `KNAP_FUZZ_CASES`. Failures are not persisted to files
/// (the shrunk case is printed; a fixed regression belongs in a unit test).
pub(crate) fn config(default: u32) -> Config {
  let cases = std::env::var("KNAP_FUZZ_CASES")
    .ok()
    .and_then(|v| v.parse().ok())
    .unwrap_or(default);
  Config {
    cases,
    failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
    ..Config::default()
  }
}
