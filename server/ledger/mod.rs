//! The cost ledger: what a trial cost, and what it cost per completed job.
//!
//! Lines (`accelerator`, `host`, `storage`, `network`, `support`, `license`) come as JSON, as a CSV
//! import (`csv.rs`: streamed, capped, all-or-nothing, errors by line and column) or from the brief
//! page. Money is `Decimal` in Rust, `numeric` in SQL and a decimal string in JSON; never a float.
//! A brief's ledger has one currency, the brief's: a line in another is refused (422, naming it).
//!
//! # Rules
//! - **Accelerator amounts.** An accelerator line gives `resource`, an interval and `gpus`, and either
//!   `amount` or `rate_per_gpu_hour`. With a rate only, amount = (µs × gpus × rate) ÷ 3.6e9: the exact
//!   elapsed microseconds (RFC 3339 inputs in any offset are converted to UTC first, so a daylight-saving
//!   change is counted as the real elapsed time), multiplied before the single division. When both are
//!   given, the billed `amount` wins and the rate is kept for reference.
//! - **Accelerator hours** are GPU-hours. Intervals are half-open `[starts_at, ends_at)`: touching lines
//!   do not overlap. Lines of *one* `resource` that overlap count their common time once; lines of two
//!   resources never merge (two allocations running at once both count).
//! - **GPU count over an overlap**: the largest GPU count among the lines covering that time. (A line
//!   for 8 GPUs overlapping a line for 4 GPUs of the same resource means the resource had 8 GPUs then,
//!   billed twice, not 12.)
//! - **Accelerator cost over an overlap**: the same time is billed once, by the costliest covering line
//!   (largest amount per second), pro rata. Each line's counted share is
//!   amount × (time it was the billing line) ÷ its duration; a line that is the billing line over its
//!   whole interval (every line without overlaps, and the first of identical duplicates) counts its
//!   amount exactly. So a duplicated billing export never doubles the accelerator total, and a longer
//!   or larger line absorbs a shorter, cheaper one. Other categories are plain sums.
//! - **Outputs** are one row per brief holding running figures: each post *replaces* the figures it
//!   names and keeps the others (not accumulated), so an agent re-sending its counters never double
//!   counts. `idle_hours` are GPU-hours, like `accelerator_hours`.
//! - **Summary** (docs/ledger.md): totals per category, `total` = their sum, `cost_per_job` = total ÷ accepted
//!   (null when nothing was accepted). Diagnostics — idle hours, failed jobs, rejected outputs,
//!   retries — are shown beside it and never added into it (the cost of failed work is already in the
//!   lines; dividing by *accepted* outputs is what charges it to the completed jobs).
//! - `utilization` (decision.md) = (accelerator_hours − idle_hours) ÷ accelerator_hours; undefined
//!   without an idle figure.
//!
//! The server sums non-accelerator categories in SQL (index-only scan). The accelerator figures are
//! kept per resource in `ledger_accelerator_merged`: each import, in its transaction and under a lock
//! on the brief row, re-merges the resources it touched — their spans fetched in merge order from a
//! byte-ordered index and merged in one sorted pass by the same `merge_spans` as the pure
//! [`model::summarize`] (which the review engine calls). Lines are append-only, so this is exact; the
//! summary of 100,000 lines then reads a handful of rows (docs/benchmarks.md).

pub mod api;
pub mod channel;
pub mod focus;
pub mod pages;
pub mod repo;
pub mod schema;
pub mod service;

/// The pure arithmetic and the CSV format live in the engine crate, at these paths still.
pub use engine::ledger::{csv, model};
pub use model::{summarize, utilization, Category, LedgerLine, LedgerSummary, Outputs};
