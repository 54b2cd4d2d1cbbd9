//! JSON API for a brief: `POST /api/v1/briefs`, `GET`/`PUT /api/v1/briefs/{id}` and its sizing.
//! Here, above the briefs domain, because a brief and its trial 1 are one use case
//! (`trials::service::create_brief`, `replace_brief`, `load_brief`); the list is `overview/`'s.

use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use serde_json::Value;

use uuid::Uuid;

use super::service;
use crate::{
    auth::Role,
    briefs::{
        model::{validate, BriefInput, BriefView},
        service as briefs,
    },
    error::{ApiResult, AppError},
    prices::service as prices,
    sizing::Sizing,
    state::AppState,
    web::{
        auth::ApiCaller,
        extract::{ApiJson, ApiQuery, Path},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/briefs", post(create))
        .route("/api/v1/briefs/{id}", get(show).put(replace))
        .route("/api/v1/briefs/{id}/sizing", get(sizing))
}

fn brief_input(body: &Value) -> Result<BriefInput<'_>, AppError> {
    match body {
        Value::Object(map) => Ok(BriefInput::Json(map)),
        _ => Err(AppError::BadRequest(
            "the body must be a JSON object of brief fields".into(),
        )),
    }
}

async fn create(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Response> {
    caller.require_person(Role::Engineer)?;
    caller.require_unscoped()?;
    let fields = validate(&brief_input(&body)?).map_err(AppError::Validation)?;
    let brief = service::create_brief(&state.pool, &fields, &caller).await?;
    let location = format!("/api/v1/briefs/{}", brief.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(BriefView::new(&brief)),
    )
        .into_response())
}

async fn show(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> ApiResult<Response> {
    caller.may_read_brief(id)?;
    let brief = service::load_brief(&state.pool, id).await?;
    Ok(Json(BriefView::new(&brief)).into_response())
}

async fn replace(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Response> {
    caller.may_read_brief(id)?;
    let fields = validate(&brief_input(&body)?).map_err(AppError::Validation)?;
    let brief = service::replace_brief(&state.pool, id, &fields, &caller).await?;
    Ok(Json(BriefView::new(&brief)).into_response())
}

#[derive(serde::Deserialize)]
struct SizingQuery {
    /// `price`: fitting options by their cheapest current price per hour.
    order: Option<String>,
}

/// The per-GPU sizing table, each option with its cheapest current price (when a price sheet has
/// one in the brief's currency); `?order=price` orders fitting options by that price.
async fn sizing(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
    ApiQuery(q): ApiQuery<SizingQuery>,
) -> ApiResult<Json<Sizing>> {
    caller.may_read_brief(id)?;
    let brief = briefs::load(&state.pool, id).await?;
    let by_price = match q.order.as_deref() {
        None | Some("memory") => false,
        Some("price") => true,
        Some(_) => {
            return Err(AppError::Validation(vec![crate::validation::FieldError::new(
                "order",
                "must be memory or price",
            )]))
        }
    };
    Ok(Json(
        prices::priced(&state, brief.fields.sizing(), &brief.fields.currency, by_price).await?,
    ))
}
