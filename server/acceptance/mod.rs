//! Acceptance cards, their evaluation over the evidence, the staged timeline, the readiness
//! checklist and the Kubernetes manifest lint. See docs/acceptance.md.
//!
//! For the review engine: `service::current_card`, `service::evaluate_brief` (I/O) and the pure
//! [`evaluate::evaluate`] over a [`evaluate::MetricsSnapshot`] and a map of derived figures.

pub mod api;
pub mod defaults;
pub mod evaluate;
pub mod manifest_lint;
pub mod model;
pub mod pages;
pub mod readiness;
pub mod repo;
pub mod schema;
pub mod service;

pub use evaluate::{
    evaluate, CardEvaluation, EvaluatedCriterion, MetricsSnapshot, Observation, StageEvaluation, Status,
};
pub use model::{Card, Criterion, Op, Threshold};
