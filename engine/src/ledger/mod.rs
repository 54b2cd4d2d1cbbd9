//! Ledger arithmetic: lines, their validation and summary (`model`), and the CSV format (`csv`).
//! The rules are in the module doc of the server's `ledger`, and docs/ledger.md.

pub mod csv;
pub mod model;

pub use model::{summarize, utilization, Category, LedgerLine, LedgerSummary, Outputs};
