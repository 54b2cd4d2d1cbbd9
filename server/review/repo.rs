//! SQL the review reads and writes: newest metric values, approvals.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::Value;
use sqlx::{FromRow, PgExecutor};
use uuid::Uuid;

use super::decision::MetricFact;

/// The newest value of each of `keys` on a brief (newest by `collected_at`, ties by upload order),
/// with the evidence it came from, over all stages (`newest_evidence_metrics`, migration 8).
pub async fn newest_metrics(
    db: impl PgExecutor<'_>,
    brief_id: Uuid,
    keys: &[String],
) -> Result<BTreeMap<String, MetricFact>, sqlx::Error> {
    let rows: Vec<(String, Value, Uuid)> = sqlx::query_as(
        "SELECT DISTINCT ON (key) key, value, evidence_id FROM newest_evidence_metrics($1, $2) \
         ORDER BY key, collected_at DESC, received_at DESC, evidence_id DESC",
    )
    .bind(brief_id)
    .bind(keys)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(key, value, evidence_id)| (key, MetricFact { value, evidence_id }))
        .collect())
}

#[derive(Debug, Clone, FromRow, serde::Serialize)]
pub struct ApprovalRow {
    pub id: Uuid,
    pub brief_id: Uuid,
    pub verdict: String,
    pub decision: String,
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
    pub inputs: sqlx::types::Json<Value>,
}

const APPROVAL_COLUMNS: &str = "id, brief_id, verdict, decision, inputs_digest, comment, decided_by, decided_at, \
    reservation_gpu, reservation_count, reservation_billing, reservation_term_months, reservation_start, \
    reservation_monthly_cost, inputs";

pub struct NewApproval<'a> {
    pub brief_id: Uuid,
    pub verdict: &'a str,
    pub decision: &'a str,
    pub inputs_digest: &'a str,
    pub comment: &'a str,
    pub decided_by: &'a str,
    pub reservation: Option<&'a super::model::Reservation>,
    pub inputs: &'a Value,
}

pub async fn insert_approval(db: impl PgExecutor<'_>, a: &NewApproval<'_>) -> Result<ApprovalRow, sqlx::Error> {
    let r = a.reservation;
    sqlx::query_as(&format!(
        "INSERT INTO approvals (id, brief_id, verdict, decision, inputs_digest, comment, decided_by, \
         reservation_gpu, reservation_count, reservation_billing, reservation_term_months, reservation_start, \
         reservation_monthly_cost, inputs) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING {APPROVAL_COLUMNS}"
    ))
    .bind(Uuid::now_v7())
    .bind(a.brief_id)
    .bind(a.verdict)
    .bind(a.decision)
    .bind(a.inputs_digest)
    .bind(a.comment)
    .bind(a.decided_by)
    .bind(r.map(|r| r.gpu.as_str()))
    .bind(r.map(|r| r.count as i32))
    .bind(r.map(|r| r.billing.as_str()))
    .bind(r.map(|r| r.term_months as i32))
    .bind(r.map(|r| r.start))
    .bind(r.map(|r| r.monthly_cost))
    .bind(sqlx::types::Json(a.inputs))
    .fetch_one(db)
    .await
}

/// The newest approval or rejection of a brief.
pub async fn latest_approval(db: impl PgExecutor<'_>, brief_id: Uuid) -> Result<Option<ApprovalRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE brief_id = $1 ORDER BY decided_at DESC, id DESC LIMIT 1"
    ))
    .bind(brief_id)
    .fetch_optional(db)
    .await
}

/// The newest approval state of many briefs at once, for the dashboard.
pub async fn latest_approvals(db: impl PgExecutor<'_>, brief_ids: &[Uuid]) -> Result<Vec<ApprovalRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT DISTINCT ON (brief_id) {APPROVAL_COLUMNS} FROM approvals WHERE brief_id = ANY($1) \
         ORDER BY brief_id, decided_at DESC, id DESC"
    ))
    .bind(brief_ids)
    .fetch_all(db)
    .await
}

/// Locks the brief row so two approvals of one brief are decided one after the other.
pub async fn lock_brief(db: impl PgExecutor<'_>, brief_id: Uuid) -> Result<bool, sqlx::Error> {
    let found: Option<Uuid> = sqlx::query_scalar("SELECT id FROM briefs WHERE id = $1 FOR UPDATE")
        .bind(brief_id)
        .fetch_optional(db)
        .await?;
    Ok(found.is_some())
}

pub async fn audit_for_brief(
    db: impl PgExecutor<'_>,
    brief_id: Uuid,
) -> Result<Vec<crate::audit::AuditEntry>, sqlx::Error> {
    sqlx::query_as(
        "SELECT at, actor, action, target, details FROM audit_log WHERE target = $1 ORDER BY at DESC LIMIT 500",
    )
    .bind(format!("brief:{brief_id}"))
    .fetch_all(db)
    .await
}
