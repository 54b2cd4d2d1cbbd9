//! JSON API for test plans: `GET /api/v1/briefs/{id}/trials/{tid}/plan` (what `collect --plan`
//! runs), `…/plan/job.yaml` (Kubernetes Jobs that run it), `…/plan/sky.yaml` (a SkyPilot task) and
//! `…/plan/cronjob.yaml` (the re-validation after an approval, on a schedule).

use axum::{
    http::header,
    response::{IntoResponse, Response},
    Json,
};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    job::{cronjobs, manifest, JobSettings},
    service::{self, PlanPath},
    sky,
};
use crate::{
    auth::Principal,
    error::{ApiResult, AppError},
    state::AppState,
    web::{auth::ApiCall, extract::Path},
};

/// The trial's plan, once the caller may read it (people of the brief; its agent tokens).
async fn readable_plan(state: &AppState, caller: &Principal, path: PlanPath) -> Result<service::TrialPlan, AppError> {
    caller.may_read_test_plan(path.id, path.tid)?;
    service::plan_for(state, path.id, path.tid).await
}

/// A YAML document as the plan's files are served.
fn yaml_answer(yaml: String) -> Response {
    ([(header::CONTENT_TYPE, "application/yaml; charset=utf-8")], yaml).into_response()
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(show))
        .routes(routes!(job))
        .routes(routes!(sky))
        .routes(routes!(cronjob))
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/trials/{tid}/plan",
    operation_id = "getTestPlan",
    tag = "trials",
    summary = "The trial's test plan: per stage of the card, the steps that produce its criteria",
    description = "Each step has a stable `key`, its `runner` (command | load | file | manual), the evidence `kind` \
         it posts, the criteria it `feeds`, `why` it is there, a `timeout_s`, its `commands` in order of \
         preference (tool, argv with ${NAME} variables, shell line, install_hint), and `held` (the \
         evidence the trial already has of it, from uploads labelled plan_step=<key>). Load steps add \
         `load` (rate, prompts, lengths), `scrapes` and `window`. `rentcheck collect --plan` runs it; \
         engineers, managers and an agent token of the brief (and trial) may read it.",
    params(PlanPath),
    responses(
        (status = 200, description = "the plan", body = super::service::PlanAnswer),
        (status = 403, description = "a token scoped to another brief or trial"),
        (status = 404, description = "no such brief, or the trial is not the brief's"),
    )
)]
async fn show(ApiCall { state, caller }: ApiCall, Path(path): Path<PlanPath>) -> ApiResult<Response> {
    let p = readable_plan(&state, &caller, path).await?;
    Ok(Json(p.answer()).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/trials/{tid}/plan/job.yaml",
    operation_id = "getTestPlanJob",
    tag = "trials",
    summary = "Kubernetes Jobs (YAML) that run the trial's test plan with `rentcheck collect --plan`, one per stage",
    params(PlanPath),
    responses(
        (status = 200, description = "multi-document YAML", content((String = "application/yaml"))),
        (status = 404, description = "no such brief, or the trial is not the brief's"),
    )
)]
async fn job(ApiCall { state, caller }: ApiCall, Path(path): Path<PlanPath>) -> ApiResult<Response> {
    let p = readable_plan(&state, &caller, path).await?;
    let yaml = manifest(
        &p.plan,
        &JobSettings {
            server_url: &state.config.public_url,
            ..JobSettings::default()
        },
    );
    Ok(yaml_answer(yaml))
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/trials/{tid}/plan/sky.yaml",
    operation_id = "getTestPlanSkyTask",
    tag = "trials",
    summary = "A SkyPilot task (YAML) that runs the trial's test plan with `rentcheck collect --plan` on the offer under test",
    description = "`resources.accelerators` is the trial's GPU and count per node (`num_nodes` when it spans several); \
         `run` is the one `collect --plan` line; the agent token is a SkyPilot secret \
         (`sky launch --secret RENTCHECK_TOKEN sky.yaml`), never written in the file.",
    params(PlanPath),
    responses(
        (status = 200, description = "one YAML document", content((String = "application/yaml"))),
        (status = 404, description = "no such brief, or the trial is not the brief's"),
    )
)]
async fn sky(ApiCall { state, caller }: ApiCall, Path(path): Path<PlanPath>) -> ApiResult<Response> {
    let p = readable_plan(&state, &caller, path).await?;
    let yaml = sky::task(&p.plan, &state.config.public_url);
    Ok(yaml_answer(yaml))
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/trials/{tid}/plan/cronjob.yaml",
    operation_id = "getTestPlanCronJob",
    tag = "trials",
    summary = "Kubernetes CronJobs (YAML) that re-validate the trial after an approval: `rentcheck collect --plan --rerun`, one per stage",
    description = "The same Jobs as `job.yaml` (the same memory and CPU requests), each under a CronJob at 03:00 UTC \
         that never leaves more than the trial's commitment's `revalidate_every_days` between two runs (30 \
         days while the trial has no commitment; the plan's `revalidation` says which). A stage that runs the \
         GPU tools is suspended: it needs the node's GPUs free. Every run's uploads are a re-run of the trial \
         (docs/commitments.md).",
    params(PlanPath),
    responses(
        (status = 200, description = "multi-document YAML", content((String = "application/yaml"))),
        (status = 404, description = "no such brief, or the trial is not the brief's"),
    )
)]
async fn cronjob(ApiCall { state, caller }: ApiCall, Path(path): Path<PlanPath>) -> ApiResult<Response> {
    let p = readable_plan(&state, &caller, path).await?;
    let every = p
        .revalidation
        .as_ref()
        .map_or(service::DEFAULT_EVERY_DAYS, |r| r.every_days);
    let yaml = cronjobs(
        &p.plan,
        &JobSettings {
            server_url: &state.config.public_url,
            ..JobSettings::default()
        },
        every,
    );
    Ok(yaml_answer(yaml))
}
