//! JSON API: the review and approvals.

use std::collections::BTreeMap;

use axum::{
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::Value;

use utoipa_axum::{router::OpenApiRouter, routes};

use super::service::{self, VerdictRequest};
use crate::{
    error::{ApiResult, AppError},
    ids::TrialId,
    state::AppState,
    validation::FieldError,
    web::{
        auth::ApiCall,
        extract::{ApiJson, BriefPath},
    },
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(review)).routes(routes!(approve))
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/review",
    operation_id = "getReview",
    tag = "review",
    summary = "The computed decision (expand, reserve, dedicate, scale, stop) with reasons (`rule` a number, or \
         \"6b\" / \"6c\"), missing criteria, inputs_digest, criteria statuses and the latest approval; \
         `trials[]` has each trial's decision and money at the SLO, all read at its operating point \
         (operating_point: { evidence_id, run, offered_rps, achieved_rps, slo_attainment, goodput_rps, \
         qualified, described } | null; slo_attainment = good ÷ sent, goodput_rps = good ÷ duration, \
         cost_per_hour, price (its one price, billing named), cost_per_million_output_tokens[_at_slo] (at the \
         SLO: good requests' tokens only), capacity_at_slo_rps, replicas, monthly_cost, break_even, \
         api_is_cheaper, money), reservation (what approving it would record: { trial, provider, gpu, \
         gpus_per_node, replicas, gpus, billing, rate_per_gpu_hour, currency, term_months, monthly_cost, \
         start_date, note } | null), gpu_mismatch and other_currency_prices; plus recommended_trial (never a \
         stopped trial; the cheapest per unit of work) and closest_trial; as_of (when it was computed) and refreshing \
         (true: the review from before the brief's latest writes; a brief read by several at once while written to \
         is computed one at a time, at most once a second)",
    params(BriefPath),
    responses(
        (status = 200, description = "the review", body = super::answer::ReviewAnswer),
        (status = 404, description = "no such brief"),
    )
)]
async fn review(ApiCall { state, caller }: ApiCall, BriefPath { id }: BriefPath) -> ApiResult<Response> {
    caller.may_read_brief(id)?;
    let body = super::answer::review_body(&state, id).await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

fn text(body: &Value, field: &str) -> Result<String, AppError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(AppError::Validation(vec![FieldError::new(field, "must be a string")])),
    }
}

#[utoipa::path(
    post,
    path = "/api/v1/briefs/{id}/approvals",
    operation_id = "recordApproval",
    tag = "review",
    summary = "A manager approves or rejects the current decision of a trial (`trial`, the recommended one when \
         absent); `decision` other than the trial's computed one is an override and needs `override_reason` (at \
         least 20 characters), recorded as `override: { computed, approved, reason }`",
    params(BriefPath),
    request_body = super::schema::ApprovalBody,
    responses(
        (status = 201, description = "recorded", body = super::repo::ApprovalRow),
        (status = 403, description = "not a manager"),
        (status = 404, description = "no such brief"),
        (status = 409, description = "inputs_digest is no longer current"),
        (status = 422, description = "invalid fields, e.g. a rejection without a comment"),
    )
)]
async fn approve(
    ApiCall { state, caller }: ApiCall,
    BriefPath { id }: BriefPath,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Response> {
    caller.may_read_brief(id)?;
    let request = verdict_request(&body)?;
    let row = service::record_verdict(&state, id, &caller, request).await?;
    Ok((StatusCode::CREATED, Json(row)).into_response())
}

/// The approval body, each field read and refused at its own name, in the order the API documents
/// them.
fn verdict_request(body: &Value) -> Result<VerdictRequest, AppError> {
    if !body.is_object() {
        return Err(AppError::BadRequest("the body must be a JSON object".into()));
    }
    let reservation = reservation_choices(body)?;
    let trial = match body.get("trial") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.trim().parse::<TrialId>().map_err(|_| {
            AppError::Validation(vec![FieldError::new(
                "trial",
                "must be the id of one of the brief's trials",
            )])
        })?),
        Some(_) => {
            return Err(AppError::Validation(vec![FieldError::new(
                "trial",
                "must be a trial id (a string)",
            )]))
        }
    };
    let request = VerdictRequest {
        verdict: text(body, "verdict")?,
        comment: text(body, "comment")?,
        inputs_digest: text(body, "inputs_digest")?,
        trial,
        reservation,
        decision: match body.get("decision") {
            None | Some(Value::Null) => None,
            Some(Value::String(d)) => Some(d.clone()),
            Some(_) => {
                return Err(AppError::Validation(vec![FieldError::new(
                    "decision",
                    "must be a string",
                )]))
            }
        },
        override_reason: text(body, "override_reason")?,
        acknowledge_mismatch: match body.get("acknowledge_mismatch") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(AppError::Validation(vec![FieldError::new(
                    "acknowledge_mismatch",
                    "must be true or false",
                )]))
            }
        },
    };
    if request.inputs_digest.is_empty() {
        return Err(AppError::Validation(vec![FieldError::new(
            "inputs_digest",
            "is required: the digest of the review you decided on",
        )]));
    }
    Ok(request)
}

/// The reservation choices of the body (`term_months`, `start`, …), each a string or a number.
fn reservation_choices(body: &Value) -> Result<BTreeMap<String, String>, AppError> {
    let mut reservation = BTreeMap::new();
    match body.get("reservation") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let v = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => {
                        return Err(AppError::Validation(vec![FieldError::new(
                            format!("reservation.{k}"),
                            "must be a string or number",
                        )]))
                    }
                };
                reservation.insert(k.clone(), v);
            }
        }
        Some(_) => {
            return Err(AppError::Validation(vec![FieldError::new(
                "reservation",
                "must be an object",
            )]))
        }
    }
    Ok(reservation)
}
