//! SQL for cards, evaluation and readiness. Free functions over any executor.

use chrono::{DateTime, Utc};
use sqlx::{types::Json, PgConnection, PgExecutor};
use uuid::Uuid;

use super::model::Criterion;
use crate::ids::{BriefId, TokenId};

/// One stored revision of a card.
#[derive(Debug, Clone)]
pub struct CardRevision {
    pub brief_id: BriefId,
    pub revision: i32,
    pub criteria: Vec<Criterion>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    /// The allocation under test its allocation-dependent thresholds were generated for (GPU model,
    /// count); `None` for revisions saved before it was kept.
    pub allocation: Option<(String, i32)>,
}

struct RevisionRow {
    brief_id: BriefId,
    revision: i32,
    criteria: Json<Vec<Criterion>>,
    created_by: String,
    created_at: DateTime<Utc>,
    allocation_gpu: Option<String>,
    allocation_count: Option<i32>,
}

impl From<RevisionRow> for CardRevision {
    fn from(r: RevisionRow) -> Self {
        CardRevision {
            brief_id: r.brief_id,
            revision: r.revision,
            criteria: r.criteria.0,
            created_by: r.created_by,
            created_at: r.created_at,
            allocation: r.allocation_gpu.zip(r.allocation_count),
        }
    }
}

/// The current (highest) revision, if the card was ever saved.
pub async fn current(db: impl PgExecutor<'_>, brief: BriefId) -> Result<Option<CardRevision>, sqlx::Error> {
    let row = sqlx::query_as!(
        RevisionRow,
        r#"SELECT brief_id, revision, criteria AS "criteria: Json<Vec<Criterion>>", created_by, created_at,
             allocation_gpu, allocation_count
           FROM card_revisions WHERE brief_id = $1 ORDER BY revision DESC LIMIT 1"#,
        brief.as_uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(Into::into))
}

pub async fn revision(
    db: impl PgExecutor<'_>,
    brief: BriefId,
    revision: i32,
) -> Result<Option<CardRevision>, sqlx::Error> {
    let row = sqlx::query_as!(
        RevisionRow,
        r#"SELECT brief_id, revision, criteria AS "criteria: Json<Vec<Criterion>>", created_by, created_at,
             allocation_gpu, allocation_count
           FROM card_revisions WHERE brief_id = $1 AND revision = $2"#,
        brief.as_uuid(),
        revision,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(Into::into))
}

/// Every revision, newest first.
pub async fn revisions(db: impl PgExecutor<'_>, brief: BriefId) -> Result<Vec<CardRevision>, sqlx::Error> {
    let rows = sqlx::query_as!(
        RevisionRow,
        r#"SELECT brief_id, revision, criteria AS "criteria: Json<Vec<Criterion>>", created_by, created_at,
             allocation_gpu, allocation_count
           FROM card_revisions WHERE brief_id = $1 ORDER BY revision DESC"#,
        brief.as_uuid(),
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// The newest revision of a brief's card saved after `since` by `email` or through one of the
/// tokens `jtis` (labelled `token:<jti> (<subject>)`); `None` when there is none.
pub async fn revision_saved_by(
    db: impl PgExecutor<'_>,
    brief: BriefId,
    since: Option<DateTime<Utc>>,
    email: &str,
    jtis: &[TokenId],
) -> Result<Option<i32>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT max(r.revision) FROM card_revisions r
           WHERE r.brief_id = $1 AND r.created_at > COALESCE($2, '-infinity'::timestamptz)
             AND (r.created_by = $3
                  OR (r.created_by LIKE 'token:%' AND EXISTS (
                        SELECT 1 FROM unnest($4::uuid[]) AS t (jti)
                        WHERE r.created_by LIKE 'token:' || t.jti::text || ' %')))"#,
        brief.as_uuid(),
        since,
        email,
        jtis as _,
    )
    .fetch_one(db)
    .await
}

/// Appends a revision. Call inside a transaction after `briefs::service::lock`, so concurrent saves
/// number themselves in turn.
pub async fn append(
    conn: &mut PgConnection,
    brief: BriefId,
    criteria: &[Criterion],
    by: &str,
    allocation: Option<(&str, i32)>,
) -> Result<CardRevision, sqlx::Error> {
    let row = sqlx::query_as!(
        RevisionRow,
        r#"INSERT INTO card_revisions (id, brief_id, revision, criteria, created_by, allocation_gpu, allocation_count)
           SELECT $1, $2, COALESCE(MAX(revision), 0) + 1, $3, $4, $5, $6 FROM card_revisions WHERE brief_id = $2
           RETURNING brief_id, revision, criteria AS "criteria: Json<Vec<Criterion>>", created_by, created_at,
             allocation_gpu, allocation_count"#,
        Uuid::now_v7(),
        brief.as_uuid(),
        // jsonb: the macro expects a `serde_json::Value`; `as _` binds the typed `Json` as it is.
        Json(criteria) as _,
        by,
        allocation.map(|(gpu, _)| gpu),
        allocation.map(|(_, count)| count),
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.into())
}

/// One readiness confirmation.
#[derive(Debug, Clone)]
pub struct Confirmation {
    pub item: String,
    pub confirmed_by: String,
    pub confirmed_at: DateTime<Utc>,
    pub link: Option<String>,
}

/// The newest confirmation of each item.
pub async fn confirmations(db: impl PgExecutor<'_>, brief: BriefId) -> Result<Vec<Confirmation>, sqlx::Error> {
    sqlx::query_as!(
        Confirmation,
        "SELECT DISTINCT ON (item) item, confirmed_by, confirmed_at, link FROM readiness_confirmations \
         WHERE brief_id = $1 ORDER BY item, confirmed_at DESC, id DESC",
        brief.as_uuid(),
    )
    .fetch_all(db)
    .await
}

pub async fn confirm(
    db: impl PgExecutor<'_>,
    brief: BriefId,
    item: &str,
    by: &str,
    link: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO readiness_confirmations (id, brief_id, item, confirmed_by, link) VALUES ($1, $2, $3, $4, $5)",
        Uuid::now_v7(),
        brief.as_uuid(),
        item,
        by,
        link,
    )
    .execute(db)
    .await?;
    Ok(())
}
