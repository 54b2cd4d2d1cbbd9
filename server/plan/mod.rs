//! Test plans: the acceptance test of one trial written out as steps — per stage of the card, the
//! commands that produce its criteria with the brief's values filled in — served as JSON to
//! `rentcheck collect --plan`, as a page to people, and as Kubernetes Jobs and a SkyPilot task that
//! run it.
//! docs/test-plan.md says how each step is chosen.

pub mod api;
pub mod build;
pub mod job;
pub mod pages;
pub mod service;
pub mod sky;
