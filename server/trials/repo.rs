//! SQL for trials. Free functions over any executor; no repository trait.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::model::{Billing, Trial, TrialFields, TrialStatus};
use crate::{
    db::StoredText,
    ids::{BriefId, TrialId},
};

struct TrialRow {
    id: TrialId,
    brief_id: BriefId,
    position: i32,
    name: String,
    provider: String,
    region: Option<String>,
    gpu: Option<String>,
    gpu_count: Option<i32>,
    billing: StoredText<Billing>,
    rate_per_gpu_hour: Option<Decimal>,
    currency: String,
    allocation_boundary: String,
    status: StoredText<TrialStatus>,
    started_at: Option<DateTime<Utc>>,
    ended_at: Option<DateTime<Utc>>,
    notes: Option<String>,
    rerun_of: Option<TrialId>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

/// `sqlx::query_as!` into a [`TrialRow`]: `$head`, then every column of the trial, then `$tail`.
/// Every statement that reads a whole trial writes its column list here once; sqlx still checks
/// each whole statement (it takes literals joined with `+`).
macro_rules! query_trial_row {
    ($head:literal, $tail:literal $(, $($args:tt)*)?) => {
        sqlx::query_as!(
            TrialRow,
            $head
                + " id, brief_id, position, name, provider, region, gpu, gpu_count, \
                  billing AS \"billing: StoredText<Billing>\", rate_per_gpu_hour, currency, allocation_boundary, \
                  status AS \"status: StoredText<TrialStatus>\", started_at, ended_at, notes, \
                  rerun_of AS \"rerun_of: TrialId\", created_at, updated_at "
                + $tail
            $(, $($args)*)?
        )
    };
}

/// Runs `$sql`, an INSERT or an UPDATE that ends in `RETURNING`, binding `$lead` (the ids) and then
/// every field in the table's order, and reads back the trial.
macro_rules! write_trial {
    ($sql:literal, [$($lead:expr),+], $fields:expr) => {{
        let fields: &TrialFields = $fields;
        query_trial_row!(
            $sql,
            "",
            $($lead,)+
            fields.name,
            fields.provider,
            fields.region,
            fields.gpu,
            fields.gpu_count,
            fields.billing.as_str(),
            fields.rate_per_gpu_hour,
            fields.currency,
            fields.allocation_boundary,
            fields.status.as_str(),
            fields.started_at,
            fields.ended_at,
            fields.notes,
            fields.rerun_of.map(TrialId::as_uuid),
        )
    }};
}

impl From<TrialRow> for Trial {
    fn from(r: TrialRow) -> Self {
        Trial {
            id: r.id,
            brief_id: r.brief_id,
            position: r.position,
            fields: TrialFields {
                billing: r.billing.0,
                status: r.status.0,
                name: r.name,
                provider: r.provider,
                region: r.region,
                gpu: r.gpu,
                gpu_count: r.gpu_count,
                rate_per_gpu_hour: r.rate_per_gpu_hour.map(|d| d.normalize()),
                currency: r.currency,
                allocation_boundary: r.allocation_boundary,
                started_at: r.started_at,
                ended_at: r.ended_at,
                notes: r.notes,
                rerun_of: r.rerun_of,
            },
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// A brief's trials in their order (the first is the one `trial_gpu` describes).
pub async fn list_for_brief(db: impl PgExecutor<'_>, brief_id: BriefId) -> Result<Vec<Trial>, sqlx::Error> {
    let rows = query_trial_row!(
        "SELECT",
        "FROM trials WHERE brief_id = $1 ORDER BY position",
        brief_id.as_uuid(),
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Trial::from).collect())
}

pub async fn get(db: impl PgExecutor<'_>, id: TrialId) -> Result<Option<Trial>, sqlx::Error> {
    let row = query_trial_row!("SELECT", "FROM trials WHERE id = $1", id.as_uuid(),)
        .fetch_optional(db)
        .await?;
    Ok(row.map(Trial::from))
}

/// A trial as an upload needs it: which, what it is called, and whether it is still planned.
#[derive(Clone)]
pub struct TrialName {
    pub id: TrialId,
    pub brief_id: BriefId,
    pub name: String,
    pub planned: bool,
}

/// Each trial of a brief, in order: enough to place an upload. Empty when the brief does not exist.
pub async fn names(db: impl PgExecutor<'_>, brief_id: BriefId) -> Result<Vec<TrialName>, sqlx::Error> {
    sqlx::query_as!(
        TrialName,
        r#"SELECT id, brief_id, name, status = 'planned' AS "planned!" FROM trials WHERE brief_id = $1 ORDER BY position"#,
        brief_id.as_uuid(),
    )
    .fetch_all(db)
    .await
}

/// [`names`] of many briefs at once, by brief and position.
pub async fn names_of_briefs(db: impl PgExecutor<'_>, brief_ids: &[BriefId]) -> Result<Vec<TrialName>, sqlx::Error> {
    sqlx::query_as!(
        TrialName,
        r#"SELECT id, brief_id, name, status = 'planned' AS "planned!" FROM trials WHERE brief_id = ANY($1)
           ORDER BY brief_id, position"#,
        brief_ids as _,
    )
    .fetch_all(db)
    .await
}

/// Adds a trial after the brief's last one. Run it in a transaction that locked the brief row, so
/// two trials added at once cannot take the same position.
pub async fn insert(conn: &mut PgConnection, brief_id: BriefId, fields: &TrialFields) -> Result<Trial, sqlx::Error> {
    let id = TrialId::from(Uuid::now_v7());
    let row = write_trial!(
        "INSERT INTO trials (id, brief_id, position, name, provider, region, gpu, gpu_count, billing, \
         rate_per_gpu_hour, currency, allocation_boundary, status, started_at, ended_at, notes, rerun_of) \
         VALUES ($1, $2, (SELECT COALESCE(max(position), 0) + 1 FROM trials WHERE brief_id = $2), \
         $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
         RETURNING",
        [id.as_uuid(), brief_id.as_uuid()],
        fields
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.into())
}

pub async fn update(db: impl PgExecutor<'_>, id: TrialId, fields: &TrialFields) -> Result<Option<Trial>, sqlx::Error> {
    let row = write_trial!(
        "UPDATE trials SET name = $2, provider = $3, region = $4, gpu = $5, gpu_count = $6, billing = $7, \
         rate_per_gpu_hour = $8, currency = $9, allocation_boundary = $10, status = $11, started_at = $12, \
         ended_at = $13, notes = $14, rerun_of = $15, updated_at = now() WHERE id = $1 \
         RETURNING",
        [id.as_uuid()],
        fields
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(Trial::from))
}

/// Sets the first trial's allocation (a brief's `trial_gpu` / `trial_gpu_count`), creating the
/// first trial when the brief has none yet. Run it in the brief's own transaction.
pub async fn set_first_allocation(
    conn: &mut PgConnection,
    brief_id: BriefId,
    gpu: Option<&str>,
    gpu_count: Option<i32>,
    currency: &str,
    allocation_boundary: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO trials (id, brief_id, position, name, gpu, gpu_count, currency, allocation_boundary) \
         VALUES ($1, $2, 1, 'Trial 1', $3, $4, $5, $6) \
         ON CONFLICT (brief_id, position) DO UPDATE SET gpu = EXCLUDED.gpu, gpu_count = EXCLUDED.gpu_count, \
         updated_at = now()",
        Uuid::now_v7(),
        brief_id.as_uuid(),
        gpu,
        gpu_count,
        currency,
        allocation_boundary,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The first trial's allocation (a brief's `trial_gpu` / `trial_gpu_count`); `None` without one.
pub async fn first_allocation(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
) -> Result<Option<(Option<String>, Option<i32>)>, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT gpu, gpu_count FROM trials WHERE brief_id = $1 AND position = 1",
        brief_id.as_uuid()
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.gpu, r.gpu_count)))
}

/// Marks a planned trial running when its first evidence or ledger line arrives.
pub async fn mark_running(db: impl PgExecutor<'_>, id: TrialId) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE trials SET status = 'running', started_at = COALESCE(started_at, now()), updated_at = now() \
         WHERE id = $1 AND status = 'planned'",
        id.as_uuid(),
    )
    .execute(db)
    .await?;
    Ok(())
}
