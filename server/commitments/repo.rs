//! SQL of commitments: open, read, change, and what their use is computed from.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::PgExecutor;
use uuid::Uuid;

use super::model::AcceleratorUse;
use crate::ids::{BriefId, TrialId};

/// A commitment as stored, with its brief's and trial's names.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = Commitment)]
pub struct CommitmentRow {
    pub id: Uuid,
    /// The brief's id.
    #[serde(rename = "brief")]
    #[schema(value_type = Uuid)]
    pub brief_id: BriefId,
    pub brief_name: String,
    /// The committed trial's id.
    #[serde(rename = "trial")]
    #[schema(value_type = Uuid)]
    pub trial_id: TrialId,
    pub trial_name: String,
    /// The approval that recorded the reservation.
    pub approval_id: Uuid,
    pub provider: String,
    pub gpu: String,
    pub gpus_per_node: i32,
    pub gpus: i32,
    pub billing: String,
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub rate_per_gpu_hour: Decimal,
    /// The offer's on-demand rate when the approval was recorded (null when none was known).
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub on_demand_rate_per_gpu_hour: Option<Decimal>,
    pub currency: String,
    pub term_months: i32,
    pub start_date: NaiveDate,
    /// The term's last day (included).
    pub end_date: NaiveDate,
    /// GPUs × rate × 730.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub monthly_cost: Decimal,
    pub provider_commitment_id: Option<String>,
    pub revalidate_every_days: i32,
    /// active | revalidation-due | regressed | renewal-due | ended | released.
    pub state: String,
    /// Why it is in that state, in words.
    pub state_reason: String,
    pub state_changed_at: DateTime<Utc>,
    pub released_on: Option<NaiveDate>,
    /// The commitment this one renews.
    pub renews: Option<Uuid>,
    pub created_at: DateTime<Utc>,
}

/// A commitment to open.
pub struct NewCommitment<'a> {
    pub brief_id: BriefId,
    pub trial_id: TrialId,
    pub approval_id: Uuid,
    pub provider: &'a str,
    pub gpu: &'a str,
    pub gpus_per_node: i32,
    pub gpus: i32,
    pub billing: &'a str,
    pub rate_per_gpu_hour: Decimal,
    pub on_demand_rate_per_gpu_hour: Option<Decimal>,
    pub currency: &'a str,
    pub term_months: i32,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub monthly_cost: Decimal,
    pub renews: Option<Uuid>,
}

pub async fn insert(db: impl PgExecutor<'_>, c: &NewCommitment<'_>) -> Result<Uuid, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO commitments (id, brief_id, trial_id, approval_id, provider, gpu, gpus_per_node, gpus, billing,
             rate_per_gpu_hour, on_demand_rate_per_gpu_hour, currency, term_months, start_date, end_date,
             monthly_cost, renews)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
         RETURNING id",
        Uuid::now_v7(),
        c.brief_id.as_uuid(),
        c.trial_id.as_uuid(),
        c.approval_id,
        c.provider,
        c.gpu,
        c.gpus_per_node,
        c.gpus,
        c.billing,
        c.rate_per_gpu_hour,
        c.on_demand_rate_per_gpu_hour,
        c.currency,
        c.term_months,
        c.start_date,
        c.end_date,
        c.monthly_cost,
        c.renews,
    )
    .fetch_one(db)
    .await
}

/// The brief's commitment a new reservation renews: its newest one whose renewal is due.
pub async fn renewal_due_of(db: impl PgExecutor<'_>, brief_id: BriefId) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT id FROM commitments WHERE brief_id = $1 AND state = 'renewal-due'
         ORDER BY end_date DESC, id DESC LIMIT 1",
        brief_id.as_uuid()
    )
    .fetch_optional(db)
    .await
}

/// Every commitment `viewer` may see, newest start first: all of them when `viewer` is `None`
/// (managers and admins), else those of the briefs the person may edit (owner, a team it is
/// shared with, or a brief nobody owns); `state` filters when given.
pub async fn list(
    db: impl PgExecutor<'_>,
    viewer: Option<Uuid>,
    state: Option<&str>,
) -> Result<Vec<CommitmentRow>, sqlx::Error> {
    sqlx::query_as!(
        CommitmentRow,
        r#"SELECT c.id, c.brief_id, b.name AS brief_name, c.trial_id, t.name AS trial_name, c.approval_id,
                  c.provider, c.gpu, c.gpus_per_node, c.gpus, c.billing, c.rate_per_gpu_hour,
                  c.on_demand_rate_per_gpu_hour, c.currency, c.term_months, c.start_date, c.end_date,
                  c.monthly_cost, c.provider_commitment_id, c.revalidate_every_days, c.state, c.state_reason,
                  c.state_changed_at, c.released_on, c.renews, c.created_at
           FROM commitments c
           JOIN briefs b ON b.id = c.brief_id
           JOIN trials t ON t.id = c.trial_id
           WHERE ($2::text IS NULL OR c.state = $2)
             AND ($1::uuid IS NULL
                  OR (NOT EXISTS (SELECT 1 FROM brief_owners o WHERE o.brief_id = c.brief_id)
                      AND NOT EXISTS (SELECT 1 FROM brief_teams bt WHERE bt.brief_id = c.brief_id))
                  OR EXISTS (SELECT 1 FROM brief_owners o WHERE o.brief_id = c.brief_id AND o.user_id = $1)
                  OR EXISTS (SELECT 1 FROM brief_teams bt JOIN team_members m ON m.team_id = bt.team_id
                             WHERE bt.brief_id = c.brief_id AND m.user_id = $1))
           ORDER BY c.start_date DESC, c.id DESC"#,
        viewer,
        state,
    )
    .fetch_all(db)
    .await
}

pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<CommitmentRow>, sqlx::Error> {
    sqlx::query_as!(
        CommitmentRow,
        r#"SELECT c.id, c.brief_id, b.name AS brief_name, c.trial_id, t.name AS trial_name, c.approval_id,
                  c.provider, c.gpu, c.gpus_per_node, c.gpus, c.billing, c.rate_per_gpu_hour,
                  c.on_demand_rate_per_gpu_hour, c.currency, c.term_months, c.start_date, c.end_date,
                  c.monthly_cost, c.provider_commitment_id, c.revalidate_every_days, c.state, c.state_reason,
                  c.state_changed_at, c.released_on, c.renews, c.created_at
           FROM commitments c
           JOIN briefs b ON b.id = c.brief_id
           JOIN trials t ON t.id = c.trial_id
           WHERE c.id = $1"#,
        id,
    )
    .fetch_optional(db)
    .await
}

/// Locks one commitment for a change; `None` when there is none.
pub async fn lock(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!("SELECT id FROM commitments WHERE id = $1 FOR UPDATE", id)
        .fetch_optional(db)
        .await
}

/// What a manager may change: the provider's id, the re-validation period and the release.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: Uuid,
    provider_commitment_id: Option<&str>,
    revalidate_every_days: i32,
    released_on: Option<NaiveDate>,
    state: &str,
    state_reason: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE commitments SET provider_commitment_id = $2, revalidate_every_days = $3, released_on = $4,
             state_changed_at = CASE WHEN state <> $5 THEN now() ELSE state_changed_at END,
             state = $5, state_reason = $6
         WHERE id = $1",
        id,
        provider_commitment_id,
        revalidate_every_days,
        released_on,
        state,
        state_reason,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The accelerator lines of every trial of the brief that overlap `[from, to)`.
pub async fn accelerator_lines(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<AcceleratorUse>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT trial_id, resource, starts_at AS "starts_at!", ends_at AS "ends_at!", gpus AS "gpus!"
           FROM ledger_lines
           WHERE brief_id = $1 AND category = 'accelerator' AND starts_at < $3 AND ends_at > $2"#,
        brief_id.as_uuid(),
        from,
        to,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| AcceleratorUse {
            trial: r.trial_id.into(),
            resource: r.resource,
            starts_at: r.starts_at,
            ends_at: r.ends_at,
            gpus: r.gpus,
        })
        .collect())
}

/// The trial's billed GPU-hours as the ledger keeps them merged, and its idle GPU-hours.
pub async fn trial_hours(db: impl PgExecutor<'_>, trial_id: TrialId) -> Result<(Decimal, Option<Decimal>), sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT COALESCE((SELECT sum(gpu_micros) FROM ledger_accelerator_merged WHERE trial_id = $1), 0)
                      / 3600000000 AS "billed!",
                  (SELECT idle_hours FROM ledger_outputs WHERE trial_id = $1) AS idle"#,
        trial_id.as_uuid(),
    )
    .fetch_one(db)
    .await?;
    Ok((row.billed, row.idle))
}
