//! Operational endpoints: liveness and readiness.

use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use serde_json::{json, Value};

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// Ready when the database answers and every migration this binary knows is applied; a 503 says
/// when to ask again (`Retry-After`), like every other 503 of this server.
async fn readyz(State(state): State<AppState>) -> Response {
    let (status, body) = readiness(&state).await;
    if status == StatusCode::SERVICE_UNAVAILABLE {
        return (status, [(header::RETRY_AFTER, "5")], body).into_response();
    }
    (status, body).into_response()
}

async fn readiness(state: &AppState) -> (StatusCode, Json<Value>) {
    let expected = sqlx::migrate!("./migrations")
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0);
    let applied: Result<Option<i64>, sqlx::Error> =
        sqlx::query_scalar!("SELECT max(version) AS version FROM _sqlx_migrations WHERE success")
            .fetch_one(&state.pool)
            .await;
    match applied {
        Ok(Some(v)) if v >= expected => (StatusCode::OK, Json(json!({ "status": "ready", "migration": v }))),
        Ok(v) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "migrations pending", "applied": v, "expected": expected })),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check: database unreachable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "status": "database unreachable" })),
            )
        }
    }
}
