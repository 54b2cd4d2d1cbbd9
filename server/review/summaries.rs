//! Review summaries: the decision, cost per completed job, required criteria passing, approval
//! state and evidence counts of each brief, kept in `review_summaries` so lists of briefs never
//! compute a full review per row.
//!
//! Every write that can change a review marks its brief dirty in the same transaction (database
//! triggers, migration `review_summaries`). A background task recomputes dirty briefs one at a
//! time; a reader calls [`current`] for the briefs it is about to show, which recomputes those
//! still dirty first, so what it shows is never older than the last committed write (it never
//! waits for the background task). The summary is made from the same [`Review`] the review page
//! computes ([`summarize`]); a test holds the two equal.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::types::Json;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::{
    decision::Status,
    repo::{self, SummaryRow},
    service::{review_for, Review},
};
use crate::{briefs::service as briefs, error::AppError, state::AppState};

/// How often an idle refresher looks for dirty briefs.
const IDLE_POLL: Duration = Duration::from_millis(500);
/// How long to wait after an error before trying again.
const ERROR_BACKOFF: Duration = Duration::from_secs(1);

/// The summary of a computed review. `evidence` is the brief's evidence count and newest arrival.
pub fn summarize(review: &Review, evidence: (i64, Option<DateTime<Utc>>)) -> SummaryRow {
    let chosen = &review.trials[review.chosen];
    let (passed, required) = chosen.criteria_passed();
    let failing = chosen
        .context
        .inputs
        .criteria
        .iter()
        .any(|c| c.required && c.status == Status::Fail);
    let (evidence_count, last_evidence_at) = evidence;
    let state = match &review.approval {
        None if evidence_count == 0 => "awaiting-evidence",
        None => "needs-approval",
        Some(a) if a.stale => "stale",
        Some(a) if a.row.verdict == "approve" => "approved",
        Some(_) => "rejected",
    };
    let trials = review
        .trials
        .iter()
        .map(|t| {
            let (passed, required) = t.criteria_passed();
            json!({
                "trial": t.context.trial.id,
                "name": t.context.trial.fields.name,
                "decision": t.decision.decision,
                "accepted": t.decision.accepted,
                "cost_per_job": t.context.inputs.ledger.as_ref().and_then(|l| l.cost_per_job),
                "criteria_passed": passed,
                "criteria_required": required,
            })
        })
        .collect();
    SummaryRow {
        brief_id: review.brief.id,
        trial_id: Some(chosen.context.trial.id),
        decision: review.decision.decision.as_str().to_owned(),
        accepted: review.decision.accepted,
        cost_per_job: review.context.inputs.ledger.as_ref().and_then(|l| l.cost_per_job),
        criteria_passed: i32::try_from(passed).unwrap_or(i32::MAX),
        criteria_required: i32::try_from(required).unwrap_or(i32::MAX),
        failing,
        evidence_count,
        last_evidence_at,
        approval_verdict: review.approval.as_ref().map(|a| a.row.verdict.clone()),
        approval_decision: review.approval.as_ref().map(|a| a.row.decision.clone()),
        state: state.to_owned(),
        trials: Json(serde_json::Value::Array(trials)),
    }
}

/// Recomputes one brief's summary: `brief_id`, or with `None` the oldest dirty brief no other
/// refresher holds. Its dirty mark is taken in the same transaction as the new summary is written,
/// so a crash leaves it dirty, and a write meanwhile marks it again. `false` when there was
/// nothing to do.
pub async fn refresh(state: &AppState, brief_id: Option<Uuid>) -> Result<bool, AppError> {
    let mut tx = state.pool.begin().await?;
    let id = match brief_id {
        Some(id) => {
            repo::take_dirty_of(&mut *tx, &[id]).await?;
            id
        }
        None => match repo::take_dirty(&mut *tx, 1).await?.first() {
            Some(id) => *id,
            None => return Ok(false),
        },
    };
    let brief = match briefs::load(&state.pool, id).await {
        Ok(b) => b,
        // Deleted meanwhile: its mark and summary went with it.
        Err(AppError::NotFound(_)) => {
            tx.commit().await?;
            return Ok(true);
        }
        Err(e) => return Err(e),
    };
    let (review, evidence) = tokio::try_join!(review_for(state, brief), async {
        Ok(repo::evidence_stats(&state.pool, id).await?)
    })?;
    repo::upsert_summary(&mut *tx, &summarize(&review, evidence)).await?;
    tx.commit().await?;
    Ok(true)
}

/// The current summaries of `ids`, in that order: those still dirty (or never summarised) are
/// recomputed first.
pub async fn current(state: &AppState, ids: &[Uuid]) -> Result<Vec<SummaryRow>, AppError> {
    for id in repo::not_current(&state.pool, ids).await? {
        refresh(state, Some(id)).await?;
    }
    let mut rows = repo::summaries(&state.pool, ids).await?;
    rows.sort_by_key(|r| ids.iter().position(|id| *id == r.brief_id));
    Ok(rows)
}

/// Runs for as long as the server does: first marks every brief dirty (the rules may have changed
/// since the stored summaries were made), then keeps recomputing dirty briefs. Several instances
/// may run at once; they take different briefs.
pub fn spawn(state: AppState) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = repo::mark_all_dirty(&state.pool).await {
            tracing::warn!(error = %e, "could not mark the review summaries for recomputing");
        }
        loop {
            match refresh(&state, None).await {
                Ok(true) => tokio::task::yield_now().await,
                Ok(false) => tokio::time::sleep(IDLE_POLL).await,
                Err(e) => {
                    tracing::warn!(error = %e, "review summary refresh failed");
                    tokio::time::sleep(ERROR_BACKOFF).await;
                }
            }
        }
    })
}
