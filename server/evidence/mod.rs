//! Evidence: raw tool output uploaded from a rented machine, and what it says.

pub mod api;
pub mod compactor;
pub mod group_insert;
pub mod model;
pub mod pages;
pub mod repo;
pub mod schema;
pub mod service;
pub mod upload;

/// The parsers and the load points are pure: they live in the engine crate, at these paths still.
pub use engine::evidence::{load_points, parsers};
