//! Accounts and access: the token API, the sign-in pages and teams.

mod api;
mod pages;
mod teams;
