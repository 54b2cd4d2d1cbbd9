//! rentcheck: turns renting a GPU server into an acceptance test.
//!
//! The library holds everything; `main.rs` is a thin CLI over it. Pure domain engines (`sizing`)
//! never touch the database; `briefs` holds the first domain with its SQL, API and pages.

pub mod acceptance;
pub mod audit;
pub mod auth;
pub mod briefs;
pub mod collect;
pub mod commitments;
pub mod config;
pub mod criteria;
pub mod db;
pub mod demo;
pub mod error;
pub mod evidence;
pub mod evidence_store;
pub mod http;
pub mod ids;
pub mod ledger;
pub mod money;
pub mod outbox;
pub mod overview;
pub mod people;
pub mod plan;
pub mod prices;
pub mod review;
pub mod secrets;
pub mod signals;
pub mod sizing;
pub mod state;
pub mod telemetry;
pub mod thresholds;
pub mod trials;
pub mod validation;
pub mod versioned_cache;
pub mod web;
