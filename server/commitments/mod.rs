//! Commitments: what an approved reservation bought, measured every calendar month of its term
//! (committed and busy GPU-hours, utilization, coverage, idle cost, the on-demand cost avoided),
//! kept in a state (active, revalidation-due, regressed, renewal-due, ended, released) and shown
//! on a page per commitment and the portfolio (docs/commitments.md).

pub mod api;
pub mod model;
pub mod pages;
pub mod repo;
pub mod service;
pub mod worker;
