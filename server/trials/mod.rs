//! Trials: the allocations a brief is tested on (provider, GPU, count, billing, rate). Evidence,
//! ledger lines and verdicts belong to a trial; the review compares a brief's trials.

pub mod api;
pub mod brief_api;
pub mod brief_pages;
pub mod choices;
pub mod model;
pub mod pages;
pub mod repo;
pub mod schema;
pub mod service;
