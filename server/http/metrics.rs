//! `GET /metrics` and the middleware that counts every request into the registry kept in
//! `telemetry::Metrics`.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request, State},
    http::header,
    middleware::Next,
    response::{IntoResponse, Response},
};

use crate::state::AppState;

/// Middleware: counts and times every request by its matched route (`unmatched` for the fallback,
/// so unknown URLs cannot blow up the label set).
pub async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = method_label(req.method()).to_owned();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let response = next.run(req).await;
    state
        .metrics
        .observe_request(&method, &route, response.status(), start.elapsed().as_secs_f64());
    response
}

/// The standard methods by name, anything else as `other`: a method is any token a client
/// invents, and each new label value is a new series kept for the life of the process.
pub fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

pub async fn endpoint(State(state): State<AppState>) -> Response {
    let body = state.metrics.render(&state.pool);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        body,
    )
        .into_response()
}
