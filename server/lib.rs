//! rentcheck: turns renting a GPU server into an acceptance test.
//!
//! The library holds everything; `main.rs` is a thin CLI over it. The modules stand on floors
//! (docs/architecture.md, checked by `tests/it/architecture.rs`): on the ground the pure engines
//! (sizing, the evidence parsers, the decision rules, ledger arithmetic, the page formatter of
//! amounts `figures`), in the workspace's `engine` crate, which has no database, web or async
//! dependency (re-exported here at their old paths: `crate::sizing`, `crate::evidence::parsers`,
//! …), beside the server's `ids` (one type per record's id); the core (errors, state, config,
//! database, auth, the outbox) and the web kit above them; then the domains, each `model` → `repo`
//! → `service` → `api`/`pages`; the overview pages and the demo; and `http`, the URL map.

pub mod acceptance;
pub mod audit;
pub mod auth;
pub mod briefs;
pub mod collect;
pub mod commitments;
pub mod config;
pub mod db;
pub mod demo;
pub mod error;
pub mod evidence;
pub mod evidence_store;
pub mod http;
pub mod ids;
pub mod ledger;
pub mod outbox;
pub mod overview;
pub mod people;
pub mod plan;
pub mod prices;
pub mod review;
pub mod secrets;
pub mod signals;
pub mod state;
pub mod telemetry;
pub mod trials;
pub mod versioned_cache;
pub mod web;

// The pure engines, from the engine crate, at the paths they always had here.
pub use engine::{criteria, figures, sizing, text_enum, thresholds, validation};
