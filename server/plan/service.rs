//! The test plan use cases: the plan of one trial, with the steps the trial already holds.

use std::collections::HashMap;

use super::build::{build, PlanInput};
use crate::{
    acceptance::service as acceptance,
    briefs::model::Brief,
    collect::plan::{Held, TestPlan},
    error::AppError,
    evidence::service::{self as evidence, HeldStep},
    ids::{BriefId, TrialId},
    state::AppState,
    trials::{
        model::{Allocation, Trial},
        service as trials,
    },
};

/// A trial's plan and what it was written from.
pub struct TrialPlan {
    pub brief: Brief,
    pub trial: Trial,
    pub plan: TestPlan,
}

/// `GET /api/v1/briefs/{id}/trials/{tid}/plan`: the plan and where it and its trial are.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct PlanAnswer<'a> {
    #[serde(flatten)]
    pub plan: &'a TestPlan,
    pub links: PlanLinks,
}

/// Where the plan, its page, its Kubernetes Jobs and its trial are.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct PlanLinks {
    #[serde(rename = "self")]
    pub this: String,
    pub page: String,
    pub job: String,
    /// The SkyPilot task that runs it.
    pub sky: String,
    pub trial: String,
}

impl TrialPlan {
    pub fn answer(&self) -> PlanAnswer<'_> {
        let (brief_id, trial_id) = (self.brief.id, self.trial.id);
        PlanAnswer {
            plan: &self.plan,
            links: PlanLinks {
                this: format!("/api/v1/briefs/{brief_id}/trials/{trial_id}/plan"),
                page: format!("/briefs/{brief_id}/trials/{trial_id}/plan"),
                job: format!("/api/v1/briefs/{brief_id}/trials/{trial_id}/plan/job.yaml"),
                sky: format!("/api/v1/briefs/{brief_id}/trials/{trial_id}/plan/sky.yaml"),
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
        if let (true, Some(newest)) = (h.is_held(), h.newest_parsed) {
            step.held = Some(Held {
                evidence: h.parsed.clone(),
                received_at: newest,
            });
        }
    }
    Ok(TrialPlan { brief, trial, plan })
}
