//! Pages that show every domain at once: the dashboard and the brief page. They sit above the
//! domains and read them through their services (and the page sections their `pages` export).

pub mod brief_list;
pub mod brief_page;
pub mod briefs_api;
pub mod dashboard;
pub mod glossary;
pub mod list_query;
pub mod problems;

use axum::{
    routing::{get, post},
    Router,
};

use utoipa_axum::{router::OpenApiRouter, routes};

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(dashboard::dashboard))
        .route("/briefs/{id}", get(brief_page::brief_page))
        .route("/briefs/{id}/ledger/lines", post(brief_page::add_ledger_line))
        .route("/briefs/{id}/ledger/outputs", post(brief_page::set_ledger_outputs))
        .route("/briefs/{id}/readiness", post(brief_page::confirm_readiness))
        .route("/glossary", get(glossary::glossary))
        .route("/docs/problems", get(problems::problems))
}

/// The API route of the overview (its document is generated from the handler).
pub fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(briefs_api::list))
        .routes(routes!(briefs_api::show, briefs_api::replace))
}
