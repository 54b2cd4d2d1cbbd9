//! The integration tests, one folder per domain (`briefs/`, `ledger/`, `review/`, …; browser
//! journeys in `browser/`), linked into one binary so that a change to the library links once
//! instead of once per file. Each test makes its own database (`common`).
//! `tests/migrations_landed.rs` stays a binary of its own: it reads files only and runs without a
//! database, so a release check can run it alone in a second.

mod common;

mod architecture;
mod auth;
mod briefs;
mod browser;
mod cards;
mod collect;
mod commitments;
mod docs;
mod evidence;
mod ledger;
mod openapi;
mod operations;
mod parsers;
mod prices;
mod review;
mod security;
mod stored_text;
mod trials;
mod webhooks;
