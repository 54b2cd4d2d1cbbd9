//! JSON API of commitments: the list, one with its months, and a manager's change.

use axum::Json;
use serde_json::Value;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::service::{self, CommitmentDetail, CommitmentList};
use crate::{
    error::{ApiResult, AppError},
    ids::CommitmentId,
    state::AppState,
    web::{
        auth::ApiCall,
        extract::{ApiJson, ApiQuery, Path},
    },
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list)).routes(routes!(show, change))
}

/// `?state=`, `?cursor=` and `?limit=` on the list.
#[derive(serde::Deserialize)]
struct ListQuery {
    state: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// The fields a manager may change (doc only: the body is read field by field).
#[allow(dead_code)]
#[derive(utoipa::ToSchema, serde::Deserialize)]
struct CommitmentChange {
    /// The provider's id of the commitment (what FOCUS exports call `CommitmentDiscountId`), 1 to
    /// 200 characters; null clears it
    #[schema(min_length = 1, max_length = 200)]
    provider_commitment_id: Option<String>,
    /// Days without a re-run before re-validation is due, 1 to 365
    #[schema(minimum = 1, maximum = 365)]
    revalidate_every_days: Option<i32>,
    /// The day it was given back, inside the term: the commitment is released (final)
    released_on: Option<chrono::NaiveDate>,
}

#[utoipa::path(
    get,
    path = "/api/v1/commitments",
    operation_id = "listCommitments",
    tag = "commitments",
    summary = "The commitments approved reservations opened, newest start first, 50 a page (`limit`), each with its \
         use per calendar month so far, and the totals of them all (managers and admins: all; engineers: \
         those of the briefs they may edit)",
    params(
        ("state" = Option<String>, Query,
            description = "only this state: active, revalidation-due, regressed, renewal-due, ended or released"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
        ("limit" = Option<usize>, Query, description = "commitments a page, 1 to 200 (default 50)"),
    ),
    responses(
        (status = 200, description = "{ items: [commitment], total, needing_attention, totals_per_currency, \
             totals_per_team, next_cursor }", body = CommitmentList),
        (status = 422, description = "an unknown state, a damaged cursor or a limit out of range"),
    )
)]
async fn list(ApiCall { state, caller }: ApiCall, ApiQuery(q): ApiQuery<ListQuery>) -> ApiResult<Json<CommitmentList>> {
    let page = service::Paging::After {
        cursor: q.cursor.as_deref(),
        limit: q.limit.unwrap_or(service::PAGE),
    };
    Ok(Json(service::list(&state, &caller, q.state.as_deref(), page).await?))
}

#[utoipa::path(
    get,
    path = "/api/v1/commitments/{cid}",
    operation_id = "getCommitment",
    tag = "commitments",
    summary = "One commitment with `months`: per calendar month of the term so far, committed and busy \
         GPU-hours, utilization, coverage, idle cost and the on-demand cost avoided",
    params(("cid" = Uuid, Path, description = "the commitment's id")),
    responses(
        (status = 200, description = "the commitment", body = CommitmentDetail),
        (status = 404, description = "no such commitment, or not one of the caller's briefs"),
    )
)]
async fn show(ApiCall { state, caller }: ApiCall, Path(id): Path<CommitmentId>) -> ApiResult<Json<CommitmentDetail>> {
    Ok(Json(service::get(&state, &caller, id).await?))
}

#[utoipa::path(
    patch,
    path = "/api/v1/commitments/{cid}",
    operation_id = "changeCommitment",
    tag = "commitments",
    summary = "Set the provider's commitment id, the re-validation period, or release it (managers)",
    params(("cid" = Uuid, Path, description = "the commitment's id")),
    request_body = CommitmentChange,
    responses(
        (status = 200, description = "the commitment after the change", body = CommitmentDetail),
        (status = 404, description = "no such commitment"),
        (status = 409, description = "it was released already"),
        (status = 422, description = "a field out of range or one that may not be changed"),
    )
)]
async fn change(
    ApiCall { state, caller }: ApiCall,
    Path(id): Path<CommitmentId>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Json<CommitmentDetail>> {
    let Value::Object(map) = body else {
        return Err(AppError::BadRequest("the body must be a JSON object".into()));
    };
    Ok(Json(service::patch(&state, &caller, id, &map).await?))
}
