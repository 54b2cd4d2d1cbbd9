//! JSON API for test plans: `GET /api/v1/briefs/{id}/trials/{tid}/plan` (what `collect --plan`
//! runs) and `…/plan/job.yaml` (Kubernetes Jobs that run it).

use axum::{
    extract::State,
    http::header,
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use uuid::Uuid;

use super::{
    job::{manifest, JobSettings},
    service,
};
use crate::{
    error::ApiResult,
    state::AppState,
    web::{auth::ApiCaller, extract::Path},
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/briefs/{id}/trials/{tid}/plan", get(show))
        .route("/api/v1/briefs/{id}/trials/{tid}/plan/job.yaml", get(job))
}

async fn show(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path((brief_id, trial_id)): Path<(Uuid, Uuid)>,
) -> ApiResult<Response> {
    caller.may_read_test_plan(brief_id, trial_id)?;
    let p = service::plan_for(&state, brief_id, trial_id).await?;
    let mut body = serde_json::to_value(&p.plan).unwrap_or_default();
    body["links"] = serde_json::json!({
        "self": format!("/api/v1/briefs/{brief_id}/trials/{trial_id}/plan"),
        "page": format!("/briefs/{brief_id}/trials/{trial_id}/plan"),
        "job": format!("/api/v1/briefs/{brief_id}/trials/{trial_id}/plan/job.yaml"),
        "trial": format!("/api/v1/trials/{trial_id}"),
    });
    Ok(Json(body).into_response())
}

async fn job(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path((brief_id, trial_id)): Path<(Uuid, Uuid)>,
) -> ApiResult<Response> {
    caller.may_read_test_plan(brief_id, trial_id)?;
    let p = service::plan_for(&state, brief_id, trial_id).await?;
    let yaml = manifest(
        &p.plan,
        &JobSettings {
            server_url: &state.config.public_url,
            ..JobSettings::default()
        },
    );
    Ok(([(header::CONTENT_TYPE, "application/yaml; charset=utf-8")], yaml).into_response())
}
