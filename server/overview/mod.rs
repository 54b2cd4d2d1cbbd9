//! Pages that show every domain at once: the dashboard and the brief page. They sit above the
//! domains and read them through their services (and the page sections their `pages` export).

pub mod brief_page;
pub mod dashboard;

use axum::{routing::get, Router};

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(dashboard::dashboard))
        .route("/briefs/{id}", get(brief_page::brief_page))
}
