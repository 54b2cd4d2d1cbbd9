//! JSON API for a brief: `POST /api/v1/briefs` and its sizing. Here, above the briefs domain,
//! because a brief and its trial 1 are one use case (`trials::service::create_brief`); the list,
//! `GET` and `PUT /api/v1/briefs/{id}` are `overview/`'s, as their `status` is the review's.

use axum::{
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::Value;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::service;
use crate::{
    auth::Role,
    briefs::model::{validate, BriefInput, BriefView, NEW_BRIEF_STATUS},
    error::{ApiResult, AppError},
    prices::service as prices,
    sizing::Sizing,
    state::AppState,
    web::{
        auth::ApiCall,
        extract::{ApiJson, ApiQuery, BriefPath},
    },
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create)).routes(routes!(sizing))
}

pub(crate) fn brief_input(body: &Value) -> Result<BriefInput<'_>, AppError> {
    match body {
        Value::Object(map) => Ok(BriefInput::Json(map)),
        _ => Err(AppError::BadRequest(
            "the body must be a JSON object of brief fields".into(),
        )),
    }
}

#[utoipa::path(
    post,
    path = "/api/v1/briefs",
    operation_id = "createBrief",
    tag = "briefs",
    summary = "Create a brief; sizing is computed",
    request_body = crate::briefs::schema::BriefBody,
    responses(
        (status = 201, description = "the brief with id, sizing and status", body = BriefView,
            headers(("Location" = String, description = "the brief's URL"))),
        (status = 400, description = "malformed JSON"),
        (status = 415, description = "not JSON"),
        (status = 422, description = "invalid fields"),
    )
)]
async fn create(ApiCall { state, caller }: ApiCall, ApiJson(body): ApiJson<Value>) -> ApiResult<Response> {
    caller.require_person(Role::Engineer)?;
    caller.require_unscoped()?;
    let fields = validate(&brief_input(&body)?).map_err(AppError::Validation)?;
    let brief = service::create_brief(&state.pool, &fields, &caller).await?;
    let location = format!("/api/v1/briefs/{}", brief.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(BriefView::new(&brief, NEW_BRIEF_STATUS)),
    )
        .into_response())
}

#[derive(serde::Deserialize)]
struct SizingQuery {
    /// `price`: fitting options by their cheapest current price per hour.
    order: Option<String>,
}

/// The per-GPU sizing table, each option with its cheapest current price (when a price sheet has
/// one in the brief's currency); `?order=price` orders fitting options by that price.
#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/sizing",
    operation_id = "getBriefSizing",
    tag = "briefs",
    summary = "The per-GPU sizing table of a brief, each option with its cheapest current price in the brief's currency \
         when a sheet has one (price_per_hour, price_per_month, provider, currency, price_id, gpus_billed and \
         billing: a spot price always says spot)",
    params(
        BriefPath,
        ("order" = inline(Option<crate::briefs::schema::SizingOrder>), Query,
            description = "memory (default: memory rented) or price (fitting options by cheapest price per hour)"),
    ),
    responses(
        (status = 200, description = "weights_gib, kv_cache_gib (the attention layers' KV, growing with tokens), state_gib (a hybrid \
                 model's constant per-sequence state of its Gated DeltaNet / Mamba-2 layers, for all sequences; \
                 0 otherwise), overhead_gib, total_gib, kv_bytes_per_token, architecture_notes, \
                 options (gpu, memory_gib (the driver's memory.total), count, fits, headroom_pct, \
                 decode_tokens_per_s_max, interconnect_note, tensor_parallel, pipeline_parallel, load_note), \
                 billing_advice", body = Sizing),
        (status = 404, description = "no such brief"),
        (status = 422, description = "order is neither memory nor price"),
    )
)]
async fn sizing(
    ApiCall { state, caller }: ApiCall,
    path: BriefPath,
    ApiQuery(q): ApiQuery<SizingQuery>,
) -> ApiResult<Json<Sizing>> {
    caller.may_read_brief(path.id)?;
    let brief = path.load(&state).await?;
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
        prices::priced(
            &state,
            brief.fields.sizing(),
            &brief.fields.currency,
            brief.fields.workload_kind,
            by_price,
        )
        .await?,
    ))
}
