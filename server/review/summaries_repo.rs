//! SQL of the kept review summaries: each brief's summary (`review_summaries`, with every trial's in
//! `review_summary_trials`), the queue of briefs whose review may have changed since
//! (`review_changes`, filled by triggers on every write that can change a review) and the count
//! of changes taken off it (`review_changes_taken`).

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::decision::Verdict;
use crate::{
    db::StoredText,
    ids::{BriefId, TrialId},
};

/// Takes up to `limit` briefs marked changed, removing their marks; answers each brief with how
/// many marks it took. A write after this marks the brief again, so nothing that lands while its
/// review is computed is missed. The evidence counts the taken marks carry are added to the
/// trials' totals in the same statement (`trial_stage_totals`: a reader adds the totals and the
/// marks still queued, one snapshot).
pub async fn claim_dirty(
    db: impl PgExecutor<'_>,
    limit: i64,
    settle: std::time::Duration,
    remade_within: std::time::Duration,
) -> Result<Vec<(BriefId, i64)>, sqlx::Error> {
    // Every queued mark of up to `limit` briefs whose oldest mark has waited `settle`, oldest
    // first; marks of transactions still open are not seen and stay for the next round. A brief
    // whose summary was made less than `remade_within` ago is left for a later round: under a
    // stream of uploads its marks pile up and are taken together, so its review is remade once
    // per interval, not once per round (readers meanwhile compute it themselves: `not_current`).
    // The count of taken changes moves in the same statement (see `review_changes_taken`).
    sqlx::query!(
        r#"WITH taken AS (
             DELETE FROM review_changes WHERE brief_id IN (
                 SELECT d.brief_id FROM review_changes d
                 WHERE d.marked_at <= now() - make_interval(secs => $2)
                   AND NOT EXISTS (SELECT 1 FROM review_summaries s WHERE s.brief_id = d.brief_id
                                     AND s.computed_at > now() - make_interval(secs => $3))
                 ORDER BY d.marked_at LIMIT $1 FOR UPDATE OF d SKIP LOCKED)
             RETURNING brief_id, trial_id, stage, uploads, first_collected_at, last_collected_at,
                       last_received_at),
           counted AS (
             INSERT INTO review_changes_taken (brief_id, taken)
             SELECT brief_id, count(*) FROM taken GROUP BY brief_id ORDER BY brief_id
             ON CONFLICT (brief_id) DO UPDATE SET taken = review_changes_taken.taken + EXCLUDED.taken),
           totals AS (
             INSERT INTO trial_stage_totals (trial_id, stage, uploads, first_collected_at, last_collected_at,
                                             last_received_at)
             SELECT trial_id, stage, sum(uploads), min(first_collected_at), max(last_collected_at),
                    max(last_received_at)
             FROM taken WHERE uploads IS NOT NULL GROUP BY trial_id, stage ORDER BY trial_id, stage
             ON CONFLICT (trial_id, stage) DO UPDATE SET
               uploads = trial_stage_totals.uploads + EXCLUDED.uploads,
               first_collected_at = least(trial_stage_totals.first_collected_at, EXCLUDED.first_collected_at),
               last_collected_at = greatest(trial_stage_totals.last_collected_at, EXCLUDED.last_collected_at),
               last_received_at = greatest(trial_stage_totals.last_received_at, EXCLUDED.last_received_at))
           SELECT brief_id AS "brief_id!", count(*) AS "marks!" FROM taken GROUP BY brief_id"#,
        limit,
        settle.as_secs_f64(),
        remade_within.as_secs_f64(),
    )
    .fetch_all(db)
    .await
    .map(|rows| rows.into_iter().map(|r| (BriefId::from(r.brief_id), r.marks)).collect())
}

/// Dead marks slow every later look at the queue — above all the review JSON's `change_count` on
/// every read — until a vacuum clears them; autovacuum wakes once a minute, far too seldom for a
/// queue taking a thousand marks a second.
pub async fn vacuum_queue(db: impl PgExecutor<'_>) -> Result<(), sqlx::Error> {
    // Runtime query: VACUUM cannot run in a transaction or be prepared (as a macro's statement is).
    sqlx::raw_sql("VACUUM review_changes").execute(db).await.map(|_| ())
}

/// One stage of a trial's evidence: how many uploads, when the first and newest were collected,
/// and when the newest was received.
#[derive(Debug, Clone)]
pub struct StageTimes {
    pub trial_id: TrialId,
    pub stage: i16,
    pub uploads: i64,
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    pub last_received: DateTime<Utc>,
}

/// Per trial of `trials` (of `brief`) and stage, its evidence: the kept totals and the brief's
/// marks still queued, added in one statement (one snapshot). As many rows as the trials have
/// stages and the brief has marks waiting, however many items the trials hold; by trial, then
/// stage.
pub async fn stage_totals(
    db: impl PgExecutor<'_>,
    brief: BriefId,
    trials: &[TrialId],
) -> Result<Vec<StageTimes>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT trial_id AS "trial_id!", stage AS "stage!", sum(uploads)::bigint AS "uploads!",
                  min(first_collected_at) AS "first!", max(last_collected_at) AS "last!",
                  max(last_received_at) AS "last_received!"
           FROM (SELECT trial_id, stage, uploads, first_collected_at, last_collected_at, last_received_at
                 FROM trial_stage_totals WHERE trial_id = ANY($2)
                 UNION ALL
                 SELECT trial_id, stage, uploads, first_collected_at, last_collected_at, last_received_at
                 FROM review_changes
                 WHERE brief_id = $1 AND trial_id = ANY($2) AND uploads IS NOT NULL) AS counted
           GROUP BY trial_id, stage HAVING sum(uploads) > 0 ORDER BY trial_id, stage"#,
        brief.as_uuid(),
        trials as _,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| StageTimes {
            trial_id: r.trial_id.into(),
            stage: r.stage,
            uploads: r.uploads,
            first: r.first,
            last: r.last,
            last_received: r.last_received,
        })
        .collect())
}

/// The evidence of each of `trials` (of `brief`) that has any: (trial, newest received, count),
/// from [`stage_totals`].
pub async fn trial_evidence(
    db: impl PgExecutor<'_>,
    brief: BriefId,
    trials: &[TrialId],
) -> Result<Vec<(TrialId, DateTime<Utc>, i64)>, sqlx::Error> {
    let mut per_trial: Vec<(TrialId, DateTime<Utc>, i64)> = Vec::new();
    for s in stage_totals(db, brief, trials).await? {
        match per_trial.last_mut() {
            // Rows come by trial, so a trial's stages are next to each other.
            Some((trial, at, count)) if *trial == s.trial_id => {
                *at = (*at).max(s.last_received);
                *count += s.uploads;
            }
            _ => per_trial.push((s.trial_id, s.last_received, s.uploads)),
        }
    }
    Ok(per_trial)
}

/// The brief page's timeline: per stage of one trial (of `brief`), the uploads and their
/// collection times, from [`stage_totals`].
pub async fn stage_times(
    db: impl PgExecutor<'_>,
    brief: BriefId,
    trial: TrialId,
) -> Result<Vec<StageTimes>, sqlx::Error> {
    stage_totals(db, brief, &[trial]).await
}

/// Of `ids`, those whose snapshot is not current: changes queued, or never made.
pub async fn not_current(db: impl PgExecutor<'_>, ids: &[BriefId]) -> Result<Vec<BriefId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT id AS "id!" FROM unnest($1::uuid[]) AS ids(id)
           WHERE EXISTS (SELECT 1 FROM review_changes d WHERE d.brief_id = ids.id)
              OR NOT EXISTS (SELECT 1 FROM review_summaries s WHERE s.brief_id = ids.id)"#,
        ids as _
    )
    .fetch_all(db)
    .await
    .map(|ids| ids.into_iter().map(BriefId::from).collect())
}

/// Queues a mark for each of `briefs` whose kept summary was made by rules older than
/// `rules_version`, or that has none (at start-up: a deploy that changed no rules remakes nothing).
pub async fn mark_outdated(
    db: impl PgExecutor<'_>,
    briefs: &[BriefId],
    rules_version: i32,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!(
        "INSERT INTO review_changes (brief_id)
         SELECT b.id FROM unnest($1::uuid[]) AS b(id)
         WHERE NOT EXISTS (SELECT 1 FROM review_summaries s WHERE s.brief_id = b.id AND s.rules_version >= $2)",
        briefs as _,
        rules_version,
    )
    .execute(db)
    .await?
    .rows_affected())
}

/// Marks a brief again (its refresh failed: try later).
pub async fn mark_dirty(db: impl PgExecutor<'_>, brief_id: BriefId) -> Result<(), sqlx::Error> {
    sqlx::query!("INSERT INTO review_changes (brief_id) VALUES ($1)", brief_id.as_uuid())
        .execute(db)
        .await?;
    Ok(())
}

/// A brief's snapshot as stored, locked until the transaction ends.
pub struct SnapshotRow {
    pub decision: String,
    pub accepted: bool,
    pub approval_id: Option<Uuid>,
    pub approval_stale: bool,
    pub computed_at: DateTime<Utc>,
}

pub async fn lock_snapshot(db: &mut PgConnection, brief_id: BriefId) -> Result<Option<SnapshotRow>, sqlx::Error> {
    sqlx::query_as!(
        SnapshotRow,
        "SELECT decision, accepted, approval_id, approval_stale, computed_at FROM review_summaries
          WHERE brief_id = $1 FOR UPDATE",
        brief_id.as_uuid(),
    )
    .fetch_optional(db)
    .await
}

pub struct TrialSnapshotRow {
    pub trial_id: TrialId,
    pub decision: Verdict,
    pub accepted: bool,
}

pub async fn trial_snapshots(db: &mut PgConnection, brief_id: BriefId) -> Result<Vec<TrialSnapshotRow>, sqlx::Error> {
    sqlx::query_as!(
        TrialSnapshotRow,
        r#"SELECT trial_id, decision AS "decision: StoredText<Verdict>", accepted FROM review_summary_trials WHERE brief_id = $1"#,
        brief_id.as_uuid(),
    )
    .fetch_all(db)
    .await
}

pub struct NewSnapshot {
    pub brief_id: BriefId,
    pub trial_id: TrialId,
    pub decision: String,
    pub accepted: bool,
    pub approval_id: Option<Uuid>,
    pub approval_stale: bool,
    pub computed_at: DateTime<Utc>,
    pub summary: BriefSummary,
    /// The rules that made it (`summaries::RULES_VERSION`).
    pub rules_version: i32,
}

/// What lists show of a brief's review, stored with its snapshot (the `review_summaries`
/// migration).
#[derive(Debug, Clone, PartialEq)]
pub struct BriefSummary {
    pub cost_per_job: Option<Decimal>,
    pub criteria_passed: i32,
    pub criteria_required: i32,
    pub failing: bool,
    pub evidence_count: i64,
    pub last_evidence_at: Option<DateTime<Utc>>,
    pub approval_verdict: Option<String>,
    pub approval_decision: Option<String>,
    /// awaiting-evidence | needs-approval | stale | approved | rejected
    pub state: String,
}

/// A brief's stored summary, with the decision it summarises.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    pub brief_id: BriefId,
    pub trial_id: TrialId,
    pub decision: String,
    pub accepted: bool,
    pub summary: BriefSummary,
}

/// The stored summaries of `ids`, in no particular order.
pub async fn summaries(db: impl PgExecutor<'_>, ids: &[BriefId]) -> Result<Vec<SummaryRow>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT brief_id, trial_id, decision, accepted, cost_per_job, criteria_passed, criteria_required, failing,
                evidence_count, last_evidence_at, approval_verdict, approval_decision, state
           FROM review_summaries WHERE brief_id = ANY($1)",
        ids as _
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| SummaryRow {
            brief_id: r.brief_id.into(),
            trial_id: r.trial_id.into(),
            decision: r.decision,
            accepted: r.accepted,
            summary: BriefSummary {
                cost_per_job: r.cost_per_job,
                criteria_passed: r.criteria_passed,
                criteria_required: r.criteria_required,
                failing: r.failing,
                evidence_count: r.evidence_count,
                last_evidence_at: r.last_evidence_at,
                approval_verdict: r.approval_verdict,
                approval_decision: r.approval_decision,
                state: r.state,
            },
        })
        .collect())
}

pub struct NewTrialSnapshot {
    pub trial_id: TrialId,
    pub decision: Verdict,
    pub accepted: bool,
    pub cost_per_job: Option<Decimal>,
    pub utilization: Option<Decimal>,
    pub criteria_passed: i32,
    pub criteria_required: i32,
    pub last_evidence_at: Option<DateTime<Utc>>,
}

/// Replaces a brief's snapshot (its row and every trial's).
pub async fn store_snapshot(
    db: &mut PgConnection,
    s: &NewSnapshot,
    trials: &[NewTrialSnapshot],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO review_summaries (brief_id, trial_id, decision, accepted, approval_id, approval_stale, computed_at,
             cost_per_job, criteria_passed, criteria_required, failing, evidence_count, last_evidence_at,
             approval_verdict, approval_decision, state, rules_version)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
         ON CONFLICT (brief_id) DO UPDATE SET trial_id = $2, decision = $3, accepted = $4, approval_id = $5,
             approval_stale = $6, computed_at = $7, cost_per_job = $8, criteria_passed = $9,
             criteria_required = $10, failing = $11, evidence_count = $12, last_evidence_at = $13,
             approval_verdict = $14, approval_decision = $15, state = $16, rules_version = $17",
        s.brief_id.as_uuid(),
        s.trial_id.as_uuid(),
        s.decision,
        s.accepted,
        s.approval_id,
        s.approval_stale,
        s.computed_at,
        s.summary.cost_per_job,
        s.summary.criteria_passed,
        s.summary.criteria_required,
        s.summary.failing,
        s.summary.evidence_count,
        s.summary.last_evidence_at,
        s.summary.approval_verdict,
        s.summary.approval_decision,
        s.summary.state,
        s.rules_version,
    )
    .execute(&mut *db)
    .await?;
    sqlx::query!(
        "DELETE FROM review_summary_trials WHERE brief_id = $1",
        s.brief_id.as_uuid()
    )
    .execute(&mut *db)
    .await?;
    for t in trials {
        sqlx::query!(
            "INSERT INTO review_summary_trials (brief_id, trial_id, decision, accepted, cost_per_job, utilization,
                 criteria_passed, criteria_required, last_evidence_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            s.brief_id.as_uuid(),
            t.trial_id.as_uuid(),
            t.decision.as_str(),
            t.accepted,
            t.cost_per_job,
            t.utilization,
            t.criteria_passed,
            t.criteria_required,
            t.last_evidence_at,
        )
        .execute(&mut *db)
        .await?;
    }
    Ok(())
}

/// Every trial's snapshot with its brief's, for `/metrics/briefs`.
pub struct GaugeRow {
    pub brief_id: BriefId,
    pub trial_id: TrialId,
    pub recommended: bool,
    pub brief_decision: String,
    pub approval_stale: bool,
    pub decision: String,
    pub accepted: bool,
    pub cost_per_job: Option<Decimal>,
    pub utilization: Option<Decimal>,
    pub criteria_passed: i32,
    pub criteria_required: i32,
    pub days_since_evidence: Option<f64>,
}

pub async fn gauges(db: impl PgExecutor<'_>) -> Result<Vec<GaugeRow>, sqlx::Error> {
    sqlx::query_as!(
        GaugeRow,
        r#"SELECT t.brief_id, t.trial_id, (t.trial_id = b.trial_id) AS "recommended!", b.decision AS brief_decision,
                  b.approval_stale, t.decision, t.accepted, t.cost_per_job, t.utilization, t.criteria_passed,
                  t.criteria_required,
                  (extract(epoch FROM now() - t.last_evidence_at) / 86400)::float8 AS days_since_evidence
             FROM review_summary_trials t JOIN review_summaries b ON b.brief_id = t.brief_id
            ORDER BY t.brief_id, t.trial_id"#
    )
    .fetch_all(db)
    .await
}
