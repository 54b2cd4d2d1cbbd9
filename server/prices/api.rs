//! JSON API for price sheets: `POST /api/v1/prices` (a CSV sheet; managers and admins) and
//! `GET /api/v1/prices` (the current prices, or every row with `?all=true`).

use axum::{
    body::Bytes,
    extract::{DefaultBodyLimit, FromRequest, Request, State},
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use serde::Deserialize;
use serde_json::json;

use super::{model::MAX_ROWS, repo, service};
use crate::{
    auth::Role,
    error::{ApiResult, AppError},
    state::AppState,
    web::{
        auth::ApiCaller,
        extract::{content_type, ApiQuery},
    },
};

/// A sheet of `MAX_ROWS` rows of a few hundred bytes fits well inside this.
const MAX_SHEET_BYTES: usize = 4 * 1024 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/api/v1/prices",
        get(list).post(import).layer(DefaultBodyLimit::max(MAX_SHEET_BYTES)),
    )
}

#[derive(Deserialize)]
struct ListQuery {
    /// Every row ever imported (the history), not only the current ones.
    #[serde(default)]
    all: bool,
}

async fn list(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<serde_json::Value>> {
    caller.require_person(Role::Engineer)?;
    // Prices belong to no brief: a token limited to one brief reads its brief's money there.
    caller.require_unscoped()?;
    let items = if q.all {
        repo::all(&state.pool, MAX_ROWS as i64 * 10).await?
    } else {
        service::current(&state).await?
    };
    Ok(Json(json!({ "items": items })))
}

/// `text/csv` with the header `provider,gpu,gpu_count,billing,rate_per_gpu_hour,currency,region,
/// valid_from,source`; all or nothing, every bad cell named by line and column.
async fn import(State(state): State<AppState>, ApiCaller(caller): ApiCaller, req: Request) -> ApiResult<Response> {
    caller.require_person(Role::Manager)?;
    // A sheet changes every brief's money: never through a token limited to one brief.
    caller.require_unscoped()?;
    let ct = content_type(&req);
    if !(ct.starts_with("text/csv") || ct.starts_with("application/csv")) {
        return Err(AppError::UnsupportedMediaType(
            "send the price sheet as text/csv".into(),
        ));
    }
    #[allow(clippy::disallowed_types)]
    let body = Bytes::from_request(req, &state)
        .await
        .map_err(|_| AppError::PayloadTooLarge(MAX_SHEET_BYTES))?;
    let (sheet, rows) = service::import(&state, &body, None, &caller.label()).await?;
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, "/api/v1/prices".to_owned())],
        Json(json!({ "sheet_id": sheet, "rows": rows.len(), "prices": rows })),
    )
        .into_response())
}
