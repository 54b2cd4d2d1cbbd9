//! SQL the review reads and writes: approvals.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::Value;
use sqlx::{types::Json, PgExecutor};
use uuid::Uuid;

use super::{decision::Verdict, model::ApprovalVerdict};
use crate::{
    db::StoredText,
    ids::{ApprovalId, BriefId, TrialId},
};

/// `query_as!` moves a column read as `StoredText<Verdict>` (`decision AS "decision: StoredText<Verdict>"`)
/// into its `Verdict` field with `From`. The orphan rule allows that impl only for a named type, not
/// for every `StoredText<T>` at once, so the one enumeration rows hold bare has it here.
impl From<StoredText<Verdict>> for Verdict {
    fn from(stored: StoredText<Verdict>) -> Self {
        stored.0
    }
}

/// A recorded verdict, as the approval's answer and the review's `approval` give it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[schema(as = Approval)]
pub struct ApprovalRow {
    #[schema(value_type = Uuid)]
    pub id: ApprovalId,
    #[schema(value_type = Uuid)]
    pub brief_id: BriefId,
    /// The trial the verdict names (the one it reserves).
    #[schema(value_type = Option<Uuid>)]
    pub trial_id: Option<TrialId>,
    pub verdict: ApprovalVerdict,
    pub decision: Verdict,
    pub inputs_digest: String,
    pub comment: String,
    pub decided_by: String,
    pub decided_at: DateTime<Utc>,
    pub reservation_gpu: Option<String>,
    pub reservation_count: Option<i32>,
    pub reservation_billing: Option<String>,
    pub reservation_term_months: Option<i32>,
    pub reservation_start: Option<chrono::NaiveDate>,
    pub reservation_monthly_cost: Option<Decimal>,
    pub reservation_provider: Option<String>,
    pub reservation_rate_per_gpu_hour: Option<Decimal>,
    /// The whole reservation the review computed, exactly as `trials[].reservation` showed it
    /// (absent on approvals recorded before it was kept, and on verdicts that reserve nothing).
    #[schema(value_type = Option<super::model::Reservation>)]
    pub reservation: Option<Json<Value>>,
    /// An override (decision.md, "Override"): `{ computed, approved, reason }`; null when the
    /// verdict is of the computed decision.
    #[serde(rename = "override")]
    #[schema(value_type = Option<super::model::DecisionOverride>)]
    pub decision_override: Option<Json<Value>>,
    /// The GPU model the trial's evidence named, other than the trial's, that the manager
    /// acknowledged when approving; null when the evidence named none.
    pub mismatch_acknowledged: Option<String>,
    /// What the decision read when it was recorded: one trial's inputs, or every trial's by id.
    #[schema(value_type = Object)]
    pub inputs: Json<Value>,
}

pub struct NewApproval<'a> {
    pub brief_id: BriefId,
    pub trial_id: TrialId,
    pub verdict: ApprovalVerdict,
    pub decision: Verdict,
    pub inputs_digest: &'a str,
    pub comment: &'a str,
    pub decided_by: &'a str,
    pub reservation: Option<&'a super::model::Reservation>,
    pub decision_override: Option<&'a super::model::DecisionOverride>,
    pub mismatch_acknowledged: Option<&'a str>,
    pub inputs: &'a Value,
}

pub async fn insert_approval(db: impl PgExecutor<'_>, a: &NewApproval<'_>) -> Result<ApprovalRow, sqlx::Error> {
    let r = a.reservation;
    sqlx::query_as!(
        ApprovalRow,
        r#"INSERT INTO approvals (id, brief_id, verdict, decision, inputs_digest, comment, decided_by,
             reservation_gpu, reservation_count, reservation_billing, reservation_term_months, reservation_start,
             reservation_monthly_cost, inputs, trial_id, reservation_provider, reservation_rate_per_gpu_hour,
             reservation, decision_override, mismatch_acknowledged)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
           RETURNING id, brief_id, trial_id AS "trial_id: TrialId", verdict AS "verdict: ApprovalVerdict", decision AS "decision: StoredText<Verdict>",
             inputs_digest, comment, decided_by, decided_at,
             reservation_gpu, reservation_count, reservation_billing, reservation_term_months, reservation_start,
             reservation_monthly_cost, reservation_provider, reservation_rate_per_gpu_hour,
             reservation AS "reservation: Json<Value>", decision_override AS "decision_override: Json<Value>", mismatch_acknowledged,
             inputs AS "inputs: Json<Value>""#,
        Uuid::now_v7(),
        a.brief_id.as_uuid(),
        a.verdict.as_str(),
        a.decision.as_str(),
        a.inputs_digest,
        a.comment,
        a.decided_by,
        r.map(|r| r.gpu.as_str()),
        r.map(|r| r.gpus as i32),
        r.map(|r| r.billing.as_str()),
        r.map(|r| r.term_months as i32),
        r.map(|r| r.start_date),
        r.map(|r| r.monthly_cost),
        a.inputs,
        a.trial_id.as_uuid(),
        r.and_then(|r| r.provider.as_deref()),
        r.map(|r| r.rate_per_gpu_hour),
        r.and_then(|r| serde_json::to_value(r).ok()),
        a.decision_override.and_then(|o| serde_json::to_value(o).ok()),
        a.mismatch_acknowledged,
    )
    .fetch_one(db)
    .await
}

/// The newest approval or rejection of a brief.
pub async fn latest_approval(db: impl PgExecutor<'_>, brief_id: BriefId) -> Result<Option<ApprovalRow>, sqlx::Error> {
    sqlx::query_as!(
        ApprovalRow,
        r#"SELECT id, brief_id, trial_id AS "trial_id: TrialId", verdict AS "verdict: ApprovalVerdict", decision AS "decision: StoredText<Verdict>",
             inputs_digest, comment, decided_by, decided_at,
             reservation_gpu, reservation_count, reservation_billing, reservation_term_months, reservation_start,
             reservation_monthly_cost, reservation_provider, reservation_rate_per_gpu_hour,
             reservation AS "reservation: Json<Value>", decision_override AS "decision_override: Json<Value>", mismatch_acknowledged,
             inputs AS "inputs: Json<Value>"
           FROM approvals WHERE brief_id = $1 ORDER BY decided_at DESC, id DESC LIMIT 1"#,
        brief_id.as_uuid(),
    )
    .fetch_optional(db)
    .await
}

/// The newest approval state of many briefs at once, for the dashboard.
pub async fn latest_approvals(db: impl PgExecutor<'_>, brief_ids: &[BriefId]) -> Result<Vec<ApprovalRow>, sqlx::Error> {
    sqlx::query_as!(
        ApprovalRow,
        r#"SELECT DISTINCT ON (brief_id) id, brief_id, trial_id AS "trial_id: TrialId", verdict AS "verdict: ApprovalVerdict",
             decision AS "decision: StoredText<Verdict>", inputs_digest, comment,
             decided_by, decided_at, reservation_gpu, reservation_count, reservation_billing,
             reservation_term_months, reservation_start, reservation_monthly_cost, reservation_provider,
             reservation_rate_per_gpu_hour, reservation AS "reservation: Json<Value>",
             decision_override AS "decision_override: Json<Value>", mismatch_acknowledged, inputs AS "inputs: Json<Value>"
           FROM approvals WHERE brief_id = ANY($1)
           ORDER BY brief_id, decided_at DESC, id DESC"#,
        brief_ids as _,
    )
    .fetch_all(db)
    .await
}

/// When this trial of the brief was last approved (a rejection does not count); `None` when never.
/// Separation of duties is per trial: an approval of another trial proves nothing about this one.
pub async fn last_approved_at(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    trial_id: TrialId,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT max(decided_at) FROM approvals WHERE brief_id = $1 AND trial_id = $2 AND verdict = 'approve'",
        brief_id.as_uuid(),
        trial_id.as_uuid()
    )
    .fetch_one(db)
    .await
}

/// How many committed writes could have changed the brief's review: changes taken off the change
/// queue plus those still on it (the `review_changes_taken` migration). One statement, so one
/// snapshot: a write that commits moves it by at least one, and nothing else moves it back.
pub async fn change_count(db: impl PgExecutor<'_>, brief_id: BriefId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT COALESCE((SELECT taken FROM review_changes_taken WHERE brief_id = $1), 0)
                + (SELECT count(*) FROM review_changes WHERE brief_id = $1) AS "count!""#,
        brief_id.as_uuid()
    )
    .fetch_one(db)
    .await
}
