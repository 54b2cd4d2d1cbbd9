//! The pages and JSON API for people, over the core `auth` (who is who): sign-in, first-run setup,
//! a brief's tokens and sharing, a person's account, the admin's users and teams page
//! (`pages.rs`, `admin.rs`, templates in `templates/people/`) and `/api/v1/users` (`api.rs`).

pub mod admin;
pub mod api;
pub mod pages;
pub mod service;
