//! JSON API for trials: `/api/v1/briefs/{id}/trials` and `/api/v1/trials/{tid}`.

use axum::{
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    model::{Allocation, Trial},
    service,
};
use crate::{
    auth::{teams, Role},
    error::{ApiResult, AppError},
    ids::TrialId,
    sizing::Sizing,
    state::AppState,
    validation::Input,
    web::{
        auth::ApiCall,
        extract::{ApiJson, BriefPath, Path},
    },
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(show, replace))
}

/// The GPU and count under test.
#[derive(Serialize, ToSchema)]
#[schema(as = TrialAllocation)]
pub struct AllocationView {
    pub gpu: String,
    pub count: u32,
    /// True while the trial names no GPU and tests the sizing's suggestion.
    pub suggested: bool,
    /// True when the sizing says this allocation cannot hold the brief.
    pub under_sized: bool,
}

/// A trial as the API answers it: its fields, its allocation and links.
#[derive(Serialize, ToSchema)]
#[schema(as = Trial)]
pub struct TrialView<'a> {
    #[serde(flatten)]
    #[schema(inline)]
    pub trial: &'a Trial,
    /// The GPU and count under test (null when none resolves).
    pub allocation: Option<AllocationView>,
    pub links: Links,
}

/// The brief's trials in order.
#[derive(Serialize, ToSchema)]
pub struct TrialList<'a> {
    pub items: Vec<TrialView<'a>>,
}

/// The trial's URL and its brief's.
#[derive(Serialize, ToSchema)]
#[schema(as = TrialLinks)]
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

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/trials",
    operation_id = "listTrials",
    tag = "trials",
    summary = "The brief's trials in order, each with its allocation",
    params(BriefPath),
    responses(
        (status = 200, description = "{ items: [trial] }", body = TrialList),
        (status = 404, description = "no such brief"),
    )
)]
async fn list(ApiCall { state, caller }: ApiCall, path: BriefPath) -> ApiResult<Response> {
    caller.may_read_brief(path.id)?;
    let brief = path.load(&state).await?;
    let sizing = brief.fields.sizing();
    let trials = service::list(&state, brief.id).await?;
    let items: Vec<TrialView<'_>> = trials.iter().map(|t| TrialView::new(t, &sizing)).collect();
    let answer = TrialList { items };
    // Serialized here: the items borrow the trials.
    Ok(Json(answer).into_response())
}

#[utoipa::path(
    post,
    path = "/api/v1/briefs/{id}/trials",
    operation_id = "createTrial",
    tag = "trials",
    summary = "Add a trial (an allocation under test) to a brief",
    params(BriefPath),
    request_body = super::schema::TrialBody,
    responses(
        (status = 201, description = "the trial with its allocation", body = TrialView,
            headers(("Location" = String, description = "the trial's URL"))),
        (status = 404, description = "no such brief"),
        (status = 422, description = "invalid fields, a taken name, or rerun_of not a trial of this brief"),
    )
)]
async fn create(
    ApiCall { state, caller }: ApiCall,
    path: BriefPath,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Response> {
    caller.require_person(Role::Engineer)?;
    teams::may_edit_brief(&state.pool, &caller, path.id).await?;
    let trial = service::create(&state, path.id, &object(&body)?, &caller.label()).await?;
    let sizing = path.load(&state).await?.fields.sizing();
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/api/v1/trials/{}", trial.id))],
        Json(TrialView::new(&trial, &sizing)),
    )
        .into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/trials/{tid}",
    operation_id = "getTrial",
    tag = "trials",
    summary = "One trial with its allocation",
    params(("tid" = Uuid, Path, description = "trial id")),
    responses(
        (status = 200, description = "the trial", body = TrialView),
        (status = 404, description = "no such trial"),
    )
)]
async fn show(ApiCall { state, caller }: ApiCall, Path(id): Path<TrialId>) -> ApiResult<Response> {
    let trial = service::load(&state, id).await?;
    caller.may_read_brief(trial.brief_id)?;
    let sizing = service::load_brief(&state.pool, trial.brief_id).await?.fields.sizing();
    Ok(Json(TrialView::new(&trial, &sizing)).into_response())
}

#[utoipa::path(
    put,
    path = "/api/v1/trials/{tid}",
    operation_id = "replaceTrial",
    tag = "trials",
    summary = "Replace a trial's fields (end it with status: ended)",
    params(("tid" = Uuid, Path, description = "trial id")),
    request_body = super::schema::TrialBody,
    responses(
        (status = 200, description = "the trial", body = TrialView),
        (status = 404, description = "no such trial"),
        (status = 422, description = "invalid fields"),
    )
)]
async fn replace(
    ApiCall { state, caller }: ApiCall,
    Path(id): Path<TrialId>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Response> {
    caller.require_person(Role::Engineer)?;
    let current = service::load(&state, id).await?;
    caller.may_read_brief(current.brief_id)?;
    teams::may_edit_brief(&state.pool, &caller, current.brief_id).await?;
    let trial = service::replace(&state, id, &object(&body)?, &caller.label()).await?;
    let sizing = service::load_brief(&state.pool, trial.brief_id).await?.fields.sizing();
    Ok(Json(TrialView::new(&trial, &sizing)).into_response())
}
