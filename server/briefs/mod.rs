//! Workload briefs: the written plan that a rental is sized and tested against.

pub mod api;
pub mod model;
pub mod pages;
pub mod repo;
pub mod schema;
pub mod service;
