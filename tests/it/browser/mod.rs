//! Journeys in a real browser (headless Chromium through chromedriver, `common::browser`): what a
//! person sees and does on each page, accessibility included (`browser::a11y`).

mod a11y;
mod auth;
mod briefs;
mod cards;
mod engineer;
mod pages;
mod review;
mod trials;
