//! The request id middleware: tower-http makes the id (`x-request-id`); this keeps it in a
//! task-local (`telemetry::current_request_id`) while the request runs.

use axum::{extract::Request, middleware::Next, response::Response};

use crate::telemetry::{with_request_id, REQUEST_ID_HEADER};

pub async fn scope_request_id(request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_owned();
    with_request_id(id, next.run(request)).await
}
