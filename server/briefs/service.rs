//! The brief use cases, the door other domains use: load (or 404), create and replace.

use uuid::Uuid;

use super::{
    model::{Brief, BriefFields},
    repo,
};
use crate::{
    audit,
    auth::{teams, Principal},
    error::AppError,
};

/// The brief, or 404 "brief not found".
pub async fn load(db: impl sqlx::PgExecutor<'_>, id: Uuid) -> Result<Brief, AppError> {
    repo::get(db, id).await?.ok_or(AppError::NotFound("brief"))
}

/// Whether a brief with this id exists (for callers that need no more than that).
pub async fn exists(db: impl sqlx::PgExecutor<'_>, id: Uuid) -> Result<bool, AppError> {
    Ok(repo::exists(db, id).await?)
}

/// Every brief's id.
pub async fn all_ids(db: impl sqlx::PgExecutor<'_>) -> Result<Vec<Uuid>, AppError> {
    Ok(repo::all_ids(db).await?)
}

/// The newest `limit` briefs whose id is not in `ids` (the admin page's briefs nobody owns):
/// (id, name).
pub async fn newest_not_in(
    db: impl sqlx::PgExecutor<'_>,
    ids: &[Uuid],
    limit: i64,
) -> Result<Vec<(Uuid, String)>, AppError> {
    Ok(repo::newest_not_in(db, ids, limit).await?)
}

pub async fn create(db: impl sqlx::PgExecutor<'_>, fields: &BriefFields) -> Result<Brief, AppError> {
    Ok(repo::insert(db, fields).await?)
}

/// Creates a brief owned by the person behind `actor` (a token limited to one brief may not
/// create any), records it in the audit log, all in one transaction.
pub async fn create_owned(pool: &sqlx::PgPool, fields: &BriefFields, actor: &Principal) -> Result<Brief, AppError> {
    actor.require_unscoped()?;
    let mut tx = pool.begin().await?;
    let brief = repo::insert(&mut *tx, fields).await?;
    if let Some(user) = actor.user_id() {
        teams::set_owner(&mut *tx, brief.id, user).await?;
    }
    audit::record(
        &mut *tx,
        &actor.label(),
        "brief.create",
        &format!("brief:{}", brief.id),
        serde_json::json!({ "name": brief.fields.name }),
    )
    .await?;
    tx.commit().await?;
    Ok(brief)
}

/// Replaces a brief's fields if `actor` may edit it (`teams::may_edit_brief`), and records which
/// fields changed in the audit log, in one transaction. 403 or 404 otherwise.
pub async fn replace_checked(
    pool: &sqlx::PgPool,
    id: Uuid,
    fields: &BriefFields,
    actor: &Principal,
) -> Result<Brief, AppError> {
    teams::may_edit_brief(pool, actor, id).await?;
    let mut tx = pool.begin().await?;
    repo::lock(&mut *tx, id).await?;
    let before = repo::get(&mut *tx, id).await?.ok_or(AppError::NotFound("brief"))?;
    let after = repo::update(&mut *tx, id, fields)
        .await?
        .ok_or(AppError::NotFound("brief"))?;
    let (old, new) = (
        serde_json::to_value(&before.fields).unwrap_or_default(),
        serde_json::to_value(&after.fields).unwrap_or_default(),
    );
    let changed: Vec<&String> = match (&old, &new) {
        (serde_json::Value::Object(o), serde_json::Value::Object(n)) => {
            n.iter().filter(|(k, v)| o.get(*k) != Some(v)).map(|(k, _)| k).collect()
        }
        _ => Vec::new(),
    };
    audit::record(
        &mut *tx,
        &actor.label(),
        "brief.update",
        &format!("brief:{id}"),
        serde_json::json!({ "fields": changed }),
    )
    .await?;
    tx.commit().await?;
    Ok(after)
}

/// Creates a brief with a fixed id unless one exists; `None` when it did (the demo's brief).
pub async fn create_with_id(
    db: impl sqlx::PgExecutor<'_>,
    id: Uuid,
    fields: &BriefFields,
) -> Result<Option<Brief>, AppError> {
    Ok(repo::insert_with_id(db, id, fields).await?)
}

/// Replaces a brief's fields (its sizing follows); 404 when there is no such brief.
pub async fn replace(db: impl sqlx::PgExecutor<'_>, id: Uuid, fields: &BriefFields) -> Result<Brief, AppError> {
    repo::update(db, id, fields).await?.ok_or(AppError::NotFound("brief"))
}

/// Locks the brief's row for the rest of the transaction; 404 when there is no such brief.
pub async fn lock(db: impl sqlx::PgExecutor<'_>, id: Uuid) -> Result<(), AppError> {
    if repo::lock(db, id).await? {
        Ok(())
    } else {
        Err(AppError::NotFound("brief"))
    }
}

/// Times [`begin_locked`] tries for the brief's lock before it answers 409.
const LOCK_TRIES: usize = 50;

/// A transaction that holds the brief's lock and reads one snapshot of the whole database, taken
/// the moment it got the lock (REPEATABLE READ): every statement in it sees the same state, and a
/// write under the brief (evidence, ledger lines, card revisions: their key to the brief) waits
/// until it ends. A snapshot is taken when a statement starts, before it waits for a lock, so the
/// lock is taken without waiting: while another holds it, this waits outside any snapshot and
/// tries again, so nothing committed before the lock was got is missing from what is read.
/// 404 without the brief; 409 when the brief stays busy.
pub async fn begin_locked(
    pool: &sqlx::PgPool,
    id: Uuid,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, AppError> {
    for _ in 0..LOCK_TRIES {
        let mut tx = pool.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ").await?;
        match repo::lock_nowait(&mut *tx, id).await {
            Ok(true) => return Ok(tx),
            Ok(false) => return Err(AppError::NotFound("brief")),
            // 55P03: held by another; 40001: changed since this snapshot was taken.
            Err(sqlx::Error::Database(e)) if matches!(e.code().as_deref(), Some("55P03" | "40001")) => {
                tx.rollback().await?;
                let mut wait = pool.begin().await?;
                repo::lock(&mut *wait, id).await?;
                wait.rollback().await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(AppError::Conflict(
        "the brief is busy with other changes; try again".into(),
    ))
}
