//! The kernel's view of the one JSON Schema validator (`crate::schema`).

pub use crate::schema::{coerce, stable_stringify, validate};
