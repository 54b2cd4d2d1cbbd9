//! Trials: the API, and the migration that gave every brief its first trial.

mod api;
mod migration;
