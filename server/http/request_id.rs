//! The request id (`x-request-id`), made by tower-http and kept in a task-local while the request
//! runs, so error bodies and logs can name it without threading it through every function.

use axum::{extract::Request, middleware::Next, response::Response};

tokio::task_local! {
    static REQUEST_ID: String;
}

pub const HEADER: &str = "x-request-id";

/// The id of the request being served on this task, if any.
pub fn current_request_id() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

pub async fn scope_request_id(request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_owned();
    REQUEST_ID.scope(id, next.run(request)).await
}
