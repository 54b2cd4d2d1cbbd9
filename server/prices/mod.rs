//! Price sheets: what providers charge, imported by people as CSV, kept as imported; the current
//! price of each offer; the cheapest offer for an allocation.

pub mod api;
pub mod model;
pub mod pages;
pub mod repo;
pub mod service;
pub mod skypilot;

/// Which import a CSV header belongs to: pure, in the engine crate (the ledger's CSV reader asks it too).
pub use engine::prices::detect;
