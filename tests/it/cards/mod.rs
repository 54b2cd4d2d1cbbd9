//! Acceptance cards: the API and the card pages.

mod api;
mod pages;
