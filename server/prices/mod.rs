//! Price sheets: what providers charge, imported by people as CSV, kept as imported; the current
//! price of each offer; the cheapest offer for an allocation.

pub mod api;
pub mod detect;
pub mod model;
pub mod pages;
pub mod repo;
pub mod service;
pub mod skypilot;
