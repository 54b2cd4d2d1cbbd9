//! The integration tests, one module per area, linked into one binary so that a change to the
//! library links once instead of once per file. Each test makes its own database (`common`).
//! `tests/migrations_landed.rs` stays a binary of its own: it reads files only and runs without a
//! database, so a release check can run it alone in a second.

mod common;

mod architecture;
mod auth_api;
mod auth_pages;
mod backup_restore;
mod brief_list;
mod briefs_api;
mod briefs_model_config;
mod browser_a11y;
mod browser_auth;
mod browser_briefs;
mod browser_cards;
mod browser_engineer;
mod browser_pages;
mod browser_review;
mod browser_trials;
mod cards_api;
mod cards_pages;
mod cli;
mod collect;
mod collect_plan;
mod commitments;
mod decision_truth;
mod demo;
mod docs;
mod evidence_api;
mod evidence_batch;
mod evidence_group_insert;
mod evidence_metrics_compaction;
mod evidence_object_store;
mod evidence_pages;
mod first_run;
mod hostile_input;
mod kv_capacity;
mod ledger;
mod ledger_api;
mod ledger_focus;
mod ledger_pages;
mod money_at_slo;
mod openapi;
mod parsers;
mod parsers_conformance;
mod parsers_formats;
mod parsers_ingest;
mod parsers_load_points;
mod plan_hostile;
mod prices;
mod prices_imports;
mod private_cluster;
mod resilience;
mod review_api;
mod review_hardware;
mod review_summaries;
mod security;
mod security_review3;
mod security_review4;
mod teams;
mod test_script;
mod trials_api;
mod trials_migration;
mod webhooks;
