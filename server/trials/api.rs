//! JSON API for trials: `/api/v1/briefs/{id}/trials` and `/api/v1/trials/{tid}`.

use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::{
    model::{Allocation, Trial},
    service,
};
use crate::{
    auth::{teams, Role},
    briefs::service as briefs,
    error::{ApiResult, AppError},
    sizing::Sizing,
    state::AppState,
    validation::Input,
    web::{
        auth::ApiCaller,
        extract::{ApiJson, Path},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/briefs/{id}/trials", get(list).post(create))
        .route("/api/v1/trials/{tid}", get(show).put(replace))
}

/// The allocation as the API shows it.
#[derive(Serialize)]
pub struct AllocationView {
    pub gpu: String,
    pub count: u32,
    /// True while the trial names no GPU and tests the sizing's suggestion.
    pub suggested: bool,
    /// True when the sizing says this allocation cannot hold the brief.
    pub under_sized: bool,
}

#[derive(Serialize)]
pub struct TrialView<'a> {
    #[serde(flatten)]
    pub trial: &'a Trial,
    pub allocation: Option<AllocationView>,
    pub links: Links,
}

#[derive(Serialize)]
pub struct Links {
    #[serde(rename = "self")]
    pub this: String,
    pub brief: String,
}

impl<'a> TrialView<'a> {
    pub fn new(trial: &'a Trial, sizing: &Sizing) -> Self {
        let allocation =
            Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, sizing).map(|a| AllocationView {
                gpu: a.gpu.model.clone(),
                count: a.count,
                suggested: a.suggested,
                under_sized: a.under_sized,
            });
        Self {
            trial,
            allocation,
            links: Links {
                this: format!("/api/v1/trials/{}", trial.id),
                brief: format!("/api/v1/briefs/{}", trial.brief_id),
            },
        }
    }
}

fn object(body: &Value) -> Result<Input<'_>, AppError> {
    match body {
        Value::Object(map) => Ok(Input::Json(map)),
        _ => Err(AppError::BadRequest(
            "the body must be a JSON object of trial fields".into(),
        )),
    }
}

async fn list(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(brief_id): Path<Uuid>,
) -> ApiResult<Json<Value>> {
    caller.may_read_brief(brief_id)?;
    let brief = briefs::load(&state.pool, brief_id).await?;
    let sizing = brief.fields.sizing();
    let trials = service::list(&state, brief_id).await?;
    let items: Vec<TrialView<'_>> = trials.iter().map(|t| TrialView::new(t, &sizing)).collect();
    Ok(Json(serde_json::json!({ "items": items })))
}

async fn create(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(brief_id): Path<Uuid>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Response> {
    caller.require_person(Role::Engineer)?;
    teams::may_edit_brief(&state.pool, &caller, brief_id).await?;
    let trial = service::create(&state, brief_id, &object(&body)?, &caller.label()).await?;
    let sizing = briefs::load(&state.pool, brief_id).await?.fields.sizing();
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/api/v1/trials/{}", trial.id))],
        Json(TrialView::new(&trial, &sizing)),
    )
        .into_response())
}

async fn show(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> ApiResult<Response> {
    let trial = service::load(&state, id).await?;
    caller.may_read_brief(trial.brief_id)?;
    let sizing = briefs::load(&state.pool, trial.brief_id).await?.fields.sizing();
    Ok(Json(TrialView::new(&trial, &sizing)).into_response())
}

async fn replace(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Response> {
    caller.require_person(Role::Engineer)?;
    let current = service::load(&state, id).await?;
    caller.may_read_brief(current.brief_id)?;
    teams::may_edit_brief(&state.pool, &caller, current.brief_id).await?;
    let trial = service::replace(&state, id, &object(&body)?, &caller.label()).await?;
    let sizing = briefs::load(&state.pool, trial.brief_id).await?.fields.sizing();
    Ok(Json(TrialView::new(&trial, &sizing)).into_response())
}
