//! The review: the decision over everything gathered for a brief, its approval and its record.

pub mod answer;
pub mod api;
pub mod comparison;
pub mod cost_at_slo_view;
pub mod decision_view;
pub mod first_screen;
pub mod gather;
pub mod model;
pub mod pages;
pub mod repo;
pub mod schema;
pub mod service;
pub mod summaries;
pub mod summaries_repo;

/// The decision rules and the money they read are pure: they live in the engine crate, at these
/// paths still.
pub use engine::review::{cost_at_slo, decision};
