//! Signals out: webhooks told of decisions, approvals and failed evidence, delivered from the
//! outbox (`crate::outbox`, which keeps the webhooks, events and deliveries) by a background worker;
//! and per-brief gauges for Prometheus read from the review's kept summaries (`review::summaries`)
//! (docs/operations.md, "Webhooks" and "Per-brief gauges").

pub mod api;
pub mod model;
pub mod pages;
pub mod schema;
pub mod service;
pub mod worker;
