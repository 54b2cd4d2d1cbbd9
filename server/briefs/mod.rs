//! Workload briefs: the written plan that a rental is sized and tested against.

pub mod model;
pub mod repo;
pub mod row;
pub mod schema;
pub mod service;
