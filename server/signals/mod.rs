//! Signals out (issue 21): webhooks told of decisions, approvals and failed evidence, delivered
//! from the outbox (`crate::outbox`) by a background worker; and per-brief gauges for Prometheus
//! read from the signal snapshot the worker keeps (docs/operations.md, "Webhooks" and "Per-brief
//! gauges").

pub mod api;
pub mod model;
pub mod pages;
pub mod repo;
pub mod schema;
pub mod service;
pub mod worker;
