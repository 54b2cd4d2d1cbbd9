//! JSON API: the review and approvals.

use std::collections::BTreeMap;

use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use serde_json::Value;

use uuid::Uuid;

use super::service::{self, VerdictRequest};
use crate::{
    error::{ApiResult, AppError},
    state::AppState,
    validation::FieldError,
    web::{
        auth::ApiCaller,
        extract::{ApiJson, Path},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/briefs/{id}/review", get(review))
        .route("/api/v1/briefs/{id}/approvals", post(approve))
}

async fn review(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> ApiResult<Response> {
    caller.may_read_brief(id)?;
    let body = service::review_body(&state, id).await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

fn text(body: &Value, field: &str) -> Result<String, AppError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(AppError::Validation(vec![FieldError::new(field, "must be a string")])),
    }
}

async fn approve(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Response> {
    caller.may_read_brief(id)?;
    if !body.is_object() {
        return Err(AppError::BadRequest("the body must be a JSON object".into()));
    }
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
    let trial = match body.get("trial") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(Uuid::parse_str(t.trim()).map_err(|_| {
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
        verdict: text(&body, "verdict")?,
        comment: text(&body, "comment")?,
        inputs_digest: text(&body, "inputs_digest")?,
        trial,
        reservation,
    };
    if request.inputs_digest.is_empty() {
        return Err(AppError::Validation(vec![FieldError::new(
            "inputs_digest",
            "is required: the digest of the review you decided on",
        )]));
    }
    let row = service::record_verdict(&state, id, &caller, request).await?;
    Ok((StatusCode::CREATED, Json(row)).into_response())
}
