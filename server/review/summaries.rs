//! The kept review summaries: each brief's review, summarised for lists, gauges and the webhooks'
//! `decision.changed` / `approval.stale` (noticed against the summary before), remade when a write
//! that can change the review has committed (the triggers queue the brief in
//! `review_changes`). The watcher's round (`refresh_changed`, run by the signals worker)
//! takes queued briefs in the background; a reader about to show some remakes those first.

use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{
    decision::{Status, Verdict},
    model::ApprovalVerdict,
    service::{review_for, Review},
    summaries_repo,
};
use crate::{
    briefs::service as briefs,
    error::AppError,
    ids::{BriefId, TrialId},
    outbox,
    state::AppState,
    trials::service as trials,
};

/// The rules a kept summary is made by. Raise it with any change to what a review or its summary
/// computes: the next start-up then queues every summary made by older rules for remaking, and only
/// those (`mark_outdated`).
pub const RULES_VERSION: i32 = 1;

/// A brief's summary is remade by the watcher at most once per this many `settle`s, however many
/// changes keep arriving (`summaries_repo::claim_dirty`).
const REMAKE_EVERY_SETTLES: u32 = 4;

/// One trial's standing as the signal snapshot keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialSignal {
    pub trial_id: TrialId,
    pub name: String,
    /// Kept as its text (`Verdict::as_str`) in `review_summary_trials.decision`.
    pub decision: Verdict,
    pub accepted: bool,
}

/// The trials whose decision or acceptance moved between two snapshots, as (before, after). A trial
/// new in `after` has no before and gives no event: its first decision is its baseline.
pub fn changed_trials<'a>(
    before: &'a [TrialSignal],
    after: &'a [TrialSignal],
) -> Vec<(&'a TrialSignal, &'a TrialSignal)> {
    after
        .iter()
        .filter_map(|a| {
            before
                .iter()
                .find(|b| b.trial_id == a.trial_id)
                .filter(|b| b.decision != a.decision || b.accepted != a.accepted)
                .map(|b| (b, a))
        })
        .collect()
}

/// The newest evidence per trial: (trial, received at, count).
type LastEvidence = Vec<(TrialId, DateTime<Utc>, i64)>;

/// A brief's review computed now and the newest evidence of each of its trials; `None` when the
/// brief (or its every trial) is gone.
async fn review_and_evidence(state: &AppState, brief_id: BriefId) -> Result<Option<(Review, LastEvidence)>, AppError> {
    let brief = match trials::load_brief(&state.pool, brief_id).await {
        Err(AppError::NotFound(_)) => return Ok(None),
        other => other?,
    };
    let r = match review_for(state, brief).await {
        Err(AppError::NotFound(_)) => return Ok(None),
        other => other?,
    };
    let trial_ids: Vec<TrialId> = r.trials.iter().map(|t| t.context.trial.id).collect();
    let last_evidence = summaries_repo::trial_evidence(&state.pool, brief_id, &trial_ids).await?;
    Ok(Some((r, last_evidence)))
}

/// Recomputes a brief's review and stores it as the brief's signal snapshot; against the snapshot
/// before, a trial whose decision moved gives `decision.changed` and an approval that went stale
/// gives `approval.stale`, written with the snapshot in one transaction. The first snapshot of a
/// brief is its baseline and gives no event. A snapshot computed later than this one is kept.
/// Load, compare, write events and the snapshot in one transaction, in that order.
pub async fn refresh(state: &AppState, brief_id: BriefId) -> Result<(), AppError> {
    let started = Utc::now();
    let Some((r, last_evidence)) = review_and_evidence(state, brief_id).await? else {
        return Ok(());
    };
    let evidence_count = last_evidence.iter().map(|(_, _, n)| n).sum();
    let summary = summarize(&r, evidence_count, last_evidence.iter().map(|(_, at, _)| *at).max());
    let trials = trial_snapshots(&r, &last_evidence);
    let after: Vec<TrialSignal> = r
        .trials
        .iter()
        .map(|t| TrialSignal {
            trial_id: t.context.trial.id,
            name: t.context.trial.fields.name.clone(),
            decision: t.decision.decision,
            accepted: t.decision.accepted,
        })
        .collect();

    let mut tx = state.pool.begin().await?;
    let before = summaries_repo::lock_snapshot(&mut tx, brief_id).await?;
    if before.as_ref().is_some_and(|b| b.computed_at > started) {
        return Ok(());
    }
    let before_trials: Vec<TrialSignal> = summaries_repo::trial_snapshots(&mut tx, brief_id)
        .await?
        .into_iter()
        .map(|t| TrialSignal {
            trial_id: t.trial_id,
            name: String::new(),
            decision: t.decision,
            accepted: t.accepted,
        })
        .collect();
    let public_url = &state.config.public_url;
    if let Some(before) = &before {
        enqueue_decision_changes(&mut tx, &r, &before_trials, &after, public_url).await?;
        enqueue_stale_approval(&mut tx, &r, before, public_url).await?;
    }
    summaries_repo::store_snapshot(
        &mut tx,
        &summaries_repo::NewSnapshot {
            brief_id,
            trial_id: r.context.trial.id,
            decision: r.decision.decision.as_str().to_owned(),
            accepted: r.decision.accepted,
            approval_id: r.approval.as_ref().map(|a| a.row.id.as_uuid()),
            approval_stale: r.approval.as_ref().is_some_and(|a| a.stale),
            computed_at: started,
            summary,
            rules_version: RULES_VERSION,
        },
        &trials,
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Each trial's row of the snapshot: its decision, cost per job, criteria passed and newest
/// evidence.
fn trial_snapshots(r: &Review, last_evidence: &LastEvidence) -> Vec<summaries_repo::NewTrialSnapshot> {
    r.trials
        .iter()
        .map(|t| {
            let (passed, required) = t.criteria_passed();
            summaries_repo::NewTrialSnapshot {
                trial_id: t.context.trial.id,
                decision: t.decision.decision,
                accepted: t.decision.accepted,
                cost_per_job: t.context.inputs.ledger.as_ref().and_then(|l| l.cost_per_job),
                utilization: t.decision.utilization,
                criteria_passed: i32::try_from(passed).unwrap_or(i32::MAX),
                criteria_required: i32::try_from(required).unwrap_or(i32::MAX),
                last_evidence_at: last_evidence
                    .iter()
                    .find(|(id, _, _)| *id == t.context.trial.id)
                    .map(|(_, at, _)| *at),
            }
        })
        .collect()
}

/// A `decision.changed` event for each trial whose decision moved since the snapshot before.
async fn enqueue_decision_changes(
    conn: &mut sqlx::PgConnection,
    r: &Review,
    before_trials: &[TrialSignal],
    after: &[TrialSignal],
    public_url: &str,
) -> Result<(), AppError> {
    let (brief_id, name) = (r.brief.id, &r.brief.fields.name);
    for (old, new) in changed_trials(before_trials, after) {
        let recommended = r.recommendation.recommended == Some(new.trial_id);
        let state_json = |t: &TrialSignal| json!({ "decision": t.decision, "accepted": t.accepted });
        outbox::enqueue(
            &mut *conn,
            public_url,
            &outbox::Event {
                kind: outbox::DECISION_CHANGED,
                brief_id,
                brief_name: name,
                trial_id: Some(new.trial_id),
                old: state_json(old),
                new: json!({ "decision": new.decision, "accepted": new.accepted, "recommended": recommended }),
                text: format!(
                    "Brief {name}, trial {}: the decision is now {}{} (was {}{})",
                    new.name,
                    new.decision,
                    if new.accepted { ", accepted" } else { "" },
                    old.decision,
                    if old.accepted { ", accepted" } else { "" },
                ),
            },
        )
        .await?;
    }
    Ok(())
}

/// An `approval.stale` event when the approval went stale since the snapshot before.
async fn enqueue_stale_approval(
    conn: &mut sqlx::PgConnection,
    r: &Review,
    before: &summaries_repo::SnapshotRow,
    public_url: &str,
) -> Result<(), AppError> {
    let (brief_id, name) = (r.brief.id, &r.brief.fields.name);
    if let Some(approval) = r.approval.as_ref().filter(|a| a.stale) {
        let known = before.approval_id == Some(approval.row.id.as_uuid()) && before.approval_stale;
        if !known {
            outbox::enqueue(
                &mut *conn,
                public_url,
                &outbox::Event {
                    kind: outbox::APPROVAL_STALE,
                    brief_id,
                    brief_name: name,
                    trial_id: approval.row.trial_id,
                    old: json!({
                        "approval": approval.row.id,
                        "verdict": approval.row.verdict,
                        "decision": approval.row.decision,
                        "inputs_digest": approval.row.inputs_digest,
                        "stale": false,
                    }),
                    new: json!({
                        "stale": true,
                        "inputs_digest": r.decision.inputs_digest,
                        "changed": approval.changed,
                    }),
                    text: format!(
                        "Brief {name}: the {} of {} by {} is stale, its inputs changed ({})",
                        if approval.row.verdict == ApprovalVerdict::Approve {
                            "approval"
                        } else {
                            "rejection"
                        },
                        approval.row.decision,
                        approval.row.decided_by,
                        if approval.changed.is_empty() {
                            "see the review".to_owned()
                        } else {
                            approval.changed.join(", ")
                        },
                    ),
                },
            )
            .await?;
        }
    }
    Ok(())
}

pub use super::summaries_repo::{BriefSummary, GaugeRow, StageTimes, SummaryRow};

/// Per stage of one trial of `brief`: how many uploads, and when the first and newest were
/// collected (the brief page's timeline), from the kept totals.
pub async fn stage_times(state: &AppState, brief: BriefId, trial: TrialId) -> Result<Vec<StageTimes>, AppError> {
    Ok(summaries_repo::stage_times(&state.pool, brief, trial).await?)
}

/// What lists show of a computed review: the decided trial's cost per completed job and required
/// criteria, whether one of those fails, the evidence, and where the approval stands.
pub fn summarize(
    r: &Review,
    evidence_count: i64,
    last_evidence_at: Option<DateTime<Utc>>,
) -> summaries_repo::BriefSummary {
    let chosen = &r.trials[r.chosen];
    let (passed, required) = chosen.criteria_passed();
    let state = match &r.approval {
        None if evidence_count == 0 => "awaiting-evidence",
        None => "needs-approval",
        Some(a) if a.stale => "stale",
        Some(a) if a.row.verdict == ApprovalVerdict::Approve => "approved",
        Some(_) => "rejected",
    };
    summaries_repo::BriefSummary {
        cost_per_job: chosen.context.inputs.ledger.as_ref().and_then(|l| l.cost_per_job),
        criteria_passed: i32::try_from(passed).unwrap_or(i32::MAX),
        criteria_required: i32::try_from(required).unwrap_or(i32::MAX),
        failing: chosen
            .context
            .inputs
            .criteria
            .iter()
            .any(|c| c.required && c.status == Status::Fail),
        evidence_count,
        last_evidence_at,
        approval_verdict: r.approval.as_ref().map(|a| a.row.verdict.as_str().to_owned()),
        approval_decision: r.approval.as_ref().map(|a| a.row.decision.as_str().to_owned()),
        state: state.to_owned(),
    }
}

/// The current summaries of `ids`, in that order (a brief that is gone has none). A brief with
/// changes still queued (or never summarised) is summarised here from its review computed now, so
/// a reader never waits for the watcher and never shows a summary older than the last committed
/// change; a reader only reads: it stores nothing and tells no webhook, which is the watcher's
/// work (`refresh_changed`).
pub async fn current(state: &AppState, ids: &[BriefId]) -> Result<Vec<summaries_repo::SummaryRow>, AppError> {
    let not_current = summaries_repo::not_current(&state.pool, ids).await?;
    let mut rows: Vec<SummaryRow> = summaries_repo::summaries(&state.pool, ids)
        .await?
        .into_iter()
        .filter(|r| !not_current.contains(&r.brief_id))
        .collect();
    for id in not_current {
        if let Some((r, last_evidence)) = review_and_evidence(state, id).await? {
            let evidence_count = last_evidence.iter().map(|(_, _, n)| n).sum();
            rows.push(SummaryRow {
                brief_id: id,
                trial_id: r.context.trial.id,
                decision: r.decision.decision.as_str().to_owned(),
                accepted: r.decision.accepted,
                summary: summarize(&r, evidence_count, last_evidence.iter().map(|(_, at, _)| *at).max()),
            });
        }
    }
    rows.sort_by_key(|r| ids.iter().position(|id| *id == r.brief_id));
    Ok(rows)
}

/// Marks taken off the change queue between two vacuums of it (`summaries_repo::vacuum_queue`).
const VACUUM_AFTER_MARKS: u64 = 2_000;

/// Marks this server's watcher took since it last vacuumed the change queue.
#[derive(Default)]
struct MarksSinceVacuum(AtomicU64);

/// Refreshes up to `limit` briefs marked changed at least `settle` ago; answers how many it took.
/// A brief whose refresh fails is marked again, for the next round.
pub async fn refresh_changed(state: &AppState, limit: i64, settle: std::time::Duration) -> Result<usize, AppError> {
    let taken = summaries_repo::claim_dirty(&state.pool, limit, settle, settle * REMAKE_EVERY_SETTLES).await?;
    let marks: u64 = taken.iter().map(|(_, n)| u64::try_from(*n).unwrap_or(0)).sum();
    let since = state.slots.get::<MarksSinceVacuum>();
    if since.0.fetch_add(marks, Ordering::Relaxed) + marks >= VACUUM_AFTER_MARKS {
        since.0.store(0, Ordering::Relaxed);
        if let Err(e) = summaries_repo::vacuum_queue(&state.pool).await {
            tracing::warn!(error = %e, "vacuuming the review change queue failed");
        }
    }
    let ids: Vec<BriefId> = taken.into_iter().map(|(id, _)| id).collect();
    for &id in &ids {
        if let Err(e) = refresh(state, id).await {
            tracing::warn!(brief = %id, error = %e, "refreshing a brief's signals failed; will try again");
            summaries_repo::mark_dirty(&state.pool, id).await?;
        }
    }
    Ok(ids.len())
}

/// Queues the briefs whose kept summary was made by older rules than [`RULES_VERSION`], or that
/// have none, for remaking (at start-up: a deploy that changed no rules remakes nothing).
pub async fn mark_outdated(state: &AppState) -> Result<u64, AppError> {
    let ids = briefs::all_ids(&state.pool).await?;
    Ok(summaries_repo::mark_outdated(&state.pool, &ids, RULES_VERSION).await?)
}

/// Every trial's kept summary with its brief's, for `/metrics/briefs`: one query, no review
/// computed.
pub async fn gauge_rows(state: &AppState) -> Result<Vec<GaugeRow>, AppError> {
    Ok(summaries_repo::gauges(&state.pool).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_decision_is_a_change_and_a_new_trial_is_not() {
        let t = |id: u128, d: Verdict, a: bool| TrialSignal {
            trial_id: TrialId::from(uuid::Uuid::from_u128(id)),
            name: format!("t{id}"),
            decision: d,
            accepted: a,
        };
        let before = [t(1, Verdict::Expand, false), t(2, Verdict::Stop, false)];
        let after = [
            t(1, Verdict::Reserve, true),
            t(2, Verdict::Stop, false),
            t(3, Verdict::Stop, false),
        ];
        let changed = changed_trials(&before, &after);
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].0.decision, Verdict::Expand);
        assert_eq!(changed[0].1.decision, Verdict::Reserve);
    }
}
