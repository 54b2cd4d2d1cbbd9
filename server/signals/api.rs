//! JSON API of webhooks (admins) and `GET /metrics/briefs`, the per-brief gauges for Prometheus.

use axum::{
    extract::State,
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Json,
};
use serde_json::Value;
use subtle::ConstantTimeEq;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::service;
use crate::{
    error::{ApiResult, AppError},
    ids::WebhookId,
    state::AppState,
    web::{
        auth::ApiCall,
        extract::{ApiJson, Path},
    },
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(remove))
        // Prometheus's scrape, outside the API and its document.
        .route("/metrics/briefs", get(gauges))
}

#[utoipa::path(
    post,
    path = "/api/v1/webhooks",
    operation_id = "createWebhook",
    tag = "webhooks",
    summary = "Subscribe a URL to events (admins). Each event is POSTed as JSON signed with HMAC-SHA256 \
         over the body (X-Rentcheck-Signature: sha256=hex of HMAC(secret, body); the body's sent_at, also in \
         X-Rentcheck-Timestamp, dates the attempt against replays), retried with \
         backoff for a day; only https:// URLs unless RENTCHECK_WEBHOOK_ALLOW_HTTP=true, and only to public \
         addresses (a host that is or resolves to a loopback, link-local, private or unique-local one is refused) \
         unless RENTCHECK_WEBHOOK_ALLOW_PRIVATE=true",
    request_body = super::schema::WebhookBody,
    responses(
        (status = 201, description = "the webhook (with `secret` only when generated)", body = service::Created),
        (status = 422, description = "a bad URL (not https://), unknown events or a short secret"),
    )
)]
async fn create(ApiCall { state, caller }: ApiCall, ApiJson(body): ApiJson<Value>) -> ApiResult<Response> {
    if !body.is_object() {
        return Err(AppError::BadRequest("the body must be a JSON object".into()));
    }
    let created = service::create(&state, &caller, &body).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/webhooks",
    operation_id = "listWebhooks",
    tag = "webhooks",
    summary = "Every webhook with its newest deliveries and each delivery's attempts (admins); never a secret",
    responses((status = 200, description = "{ items: [webhook] }", body = service::WebhookList))
)]
async fn list(ApiCall { state, caller }: ApiCall) -> ApiResult<Json<service::WebhookList>> {
    let items = service::list(&state, &caller).await?;
    Ok(Json(service::WebhookList { items }))
}

#[utoipa::path(
    delete,
    path = "/api/v1/webhooks/{wid}",
    operation_id = "deleteWebhook",
    tag = "webhooks",
    summary = "Remove a webhook and its deliveries (admins)",
    params(("wid" = Uuid, Path, description = "the webhook's id")),
    responses(
        (status = 204, description = "removed"),
        (status = 404, description = "no such webhook"),
    )
)]
async fn remove(ApiCall { state, caller }: ApiCall, Path(id): Path<WebhookId>) -> ApiResult<StatusCode> {
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
