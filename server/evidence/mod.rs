//! Evidence: raw tool output uploaded from a rented machine, and what it says.

pub mod api;
pub mod compactor;
pub mod group_insert;
pub mod load_points;
pub mod model;
pub mod pages;
pub mod parsers;
pub mod repo;
pub mod schema;
pub mod service;
pub mod upload;
