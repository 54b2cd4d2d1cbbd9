//! JSON API of webhooks (admins) and `GET /metrics/briefs`, the per-brief gauges for Prometheus.

use axum::{
    extract::State,
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{delete, get},
    Json, Router,
};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::service;
use crate::{
    error::{ApiResult, AppError},
    state::AppState,
    web::{
        auth::ApiCaller,
        extract::{ApiJson, Path},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/webhooks", get(list).post(create))
        .route("/api/v1/webhooks/{wid}", delete(remove))
        .route("/metrics/briefs", get(gauges))
}

async fn create(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Response> {
    if !body.is_object() {
        return Err(AppError::BadRequest("the body must be a JSON object".into()));
    }
    let created = service::create(&state, &caller, &body).await?;
    let mut answer = serde_json::to_value(&created.row).map_err(|e| AppError::Internal(e.into()))?;
    if let (Some(secret), Some(map)) = (created.generated_secret, answer.as_object_mut()) {
        // Shown this once: it is never answered again.
        map.insert("secret".into(), Value::String(secret));
    }
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

async fn list(State(state): State<AppState>, ApiCaller(caller): ApiCaller) -> ApiResult<Json<Value>> {
    let items = service::list(&state, &caller).await?;
    Ok(Json(json!({ "items": items })))
}

async fn remove(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    service::delete(&state, &caller, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Per-brief gauges. The caller is a Prometheus server, not a person: it sends
/// `Authorization: Bearer $RENTCHECK_METRICS_TOKEN`, compared in constant time. Without that
/// setting the route answers 404, so the figures are never public by accident.
async fn gauges(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    // A token too short to be a secret (refused at start; `AppConfig` built in code may still
    // hold one) keeps the route off rather than open.
    let configured = state
        .config
        .metrics_token
        .as_ref()
        .filter(|t| t.expose().trim().chars().count() >= crate::config::MIN_METRICS_TOKEN_CHARS);
    let Some(expected) = configured else {
        // As an unknown URL: an unconfigured server does not advertise the route.
        return Err(AppError::NotFound("route"));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !bool::from(given.as_bytes().ct_eq(expected.expose().as_bytes())) {
        let mut r =
            AppError::Unauthorized("send Authorization: Bearer <RENTCHECK_METRICS_TOKEN>".into()).into_response();
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        return Ok(r);
    }
    let body = service::gauges_text(&state).await?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        body,
    )
        .into_response())
}
