//! The review: the decision over everything gathered for a brief, its approval and its record.

pub mod answer;
pub mod api;
pub mod comparison;
pub mod decision;
pub mod decision_view;
pub mod first_screen;
pub mod gather;
pub mod model;
pub mod money;
pub mod money_view;
pub mod pages;
pub mod repo;
pub mod schema;
pub mod service;
pub mod summaries;
pub mod summaries_repo;
