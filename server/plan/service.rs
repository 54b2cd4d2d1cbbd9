//! The test plan use cases: the plan of one trial, with the steps the trial already holds.

use std::collections::HashMap;

use super::{
    build::{build, PlanInput},
    job::schedule,
};
use crate::{
    acceptance::service as acceptance,
    briefs::model::Brief,
    collect::plan::{Held, TestPlan},
    commitments::service as commitments,
    error::AppError,
    evidence::service::{self as evidence, HeldStep},
    ids::{BriefId, CommitmentId, TrialId},
    state::AppState,
    trials::{
        model::{Allocation, Trial},
        service as trials,
    },
};

/// `/briefs/{id}/trials/{tid}/plan…`: the brief and the trial whose plan a route names, as the
/// path and the OpenAPI parameters read them. The trial must be the brief's ([`plan_for`]).
#[derive(Debug, Clone, Copy, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct PlanPath {
    /// brief id
    #[param(value_type = uuid::Uuid)]
    pub id: BriefId,
    /// the trial's id
    #[param(value_type = uuid::Uuid)]
    pub tid: TrialId,
}

/// A trial's plan and what it was written from.
pub struct TrialPlan {
    pub brief: Brief,
    pub trial: Trial,
    pub plan: TestPlan,
    /// The re-validation schedule of the trial's running commitment; `None` without one.
    pub revalidation: Option<Revalidation>,
}

/// The re-validation of a committed trial: `collect --plan --rerun` on a schedule.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Revalidation {
    /// The running commitment of the trial.
    #[schema(value_type = Uuid)]
    pub commitment: CommitmentId,
    /// Its `revalidate_every_days`.
    pub every_days: u32,
    /// The cron schedule (03:00 UTC) that never leaves more than `every_days` days between runs.
    pub schedule: String,
}

/// Re-validation every this many days when the trial has no commitment yet (the default period).
pub const DEFAULT_EVERY_DAYS: u32 = 30;

/// `GET /api/v1/briefs/{id}/trials/{tid}/plan`: the plan and where it and its trial are.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct PlanAnswer<'a> {
    #[serde(flatten)]
    pub plan: &'a TestPlan,
    /// The re-validation schedule of the trial's running commitment; null without one.
    pub revalidation: Option<&'a Revalidation>,
    pub links: PlanLinks,
}

/// Where the plan, its page, its Kubernetes Jobs (and re-validation CronJobs) and its trial are.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct PlanLinks {
    #[serde(rename = "self")]
    pub this: String,
    pub page: String,
    pub job: String,
    /// The SkyPilot task that runs it.
    pub sky: String,
    /// The Kubernetes CronJobs that re-validate the trial after an approval (`collect --plan --rerun`).
    pub cronjob: String,
    pub trial: String,
}

impl TrialPlan {
    pub fn answer(&self) -> PlanAnswer<'_> {
        let (brief_id, trial_id) = (self.brief.id, self.trial.id);
        PlanAnswer {
            plan: &self.plan,
            revalidation: self.revalidation.as_ref(),
            links: PlanLinks {
                this: format!("/api/v1/briefs/{brief_id}/trials/{trial_id}/plan"),
                page: format!("/briefs/{brief_id}/trials/{trial_id}/plan"),
                job: format!("/api/v1/briefs/{brief_id}/trials/{trial_id}/plan/job.yaml"),
                sky: format!("/api/v1/briefs/{brief_id}/trials/{trial_id}/plan/sky.yaml"),
                cronjob: format!("/api/v1/briefs/{brief_id}/trials/{trial_id}/plan/cronjob.yaml"),
                trial: format!("/api/v1/trials/{trial_id}"),
            },
        }
    }
}

/// The plan of trial `trial_id` of brief `brief_id` (404 when the trial is not the brief's), each
/// step marked with the evidence the trial already holds of it.
pub async fn plan_for(state: &AppState, brief_id: BriefId, trial_id: TrialId) -> Result<TrialPlan, AppError> {
    let brief = trials::load_brief(&state.pool, brief_id).await?;
    let trial = trials::pick(state, brief_id, Some(trial_id)).await?;
    let sizing = brief.fields.sizing();
    let allocation = Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, &sizing);
    let card = acceptance::current_card(&state.pool, &brief).await?;
    let (criteria, _) = acceptance::criteria_for_trial(&brief, &card, allocation.as_ref());
    let mut plan = build(&PlanInput {
        brief_id,
        brief: &brief.fields,
        sizing: &sizing,
        trial_id: trial.id,
        trial_name: &trial.fields.name,
        allocation: allocation.as_ref(),
        criteria: &criteria,
        card_revision: card.revision,
    });
    let held: HashMap<String, HeldStep> = evidence::plan_steps_held(state, trial.id)
        .await?
        .into_iter()
        .map(|h| (h.step.clone(), h))
        .collect();
    for step in plan.stages.iter_mut().flat_map(|s| s.steps.iter_mut()) {
        let Some(h) = held.get(&step.key) else { continue };
        step.failed_uploads = u32::try_from(h.failed).unwrap_or(u32::MAX);
        if let (true, Some(newest)) = (h.is_held(&step.kind), h.newest_parsed) {
            step.held = Some(Held {
                evidence: h.parsed.clone(),
                received_at: newest,
            });
        }
    }
    let revalidation = commitments::running_of_trial(state, trial.id)
        .await?
        .map(|(commitment, every_days)| Revalidation {
            commitment,
            every_days,
            schedule: schedule(every_days),
        });
    Ok(TrialPlan {
        brief,
        trial,
        plan,
        revalidation,
    })
}
