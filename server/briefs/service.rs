//! The brief use cases, the door other domains use: load (or 404), create and replace.

use super::{
    model::{Brief, BriefFields, BriefRecord},
    repo,
};
use crate::{
    audit,
    auth::{teams, Principal},
    error::AppError,
    ids::BriefId,
};

/// The brief's own record, or 404 "brief not found". Trial 1's allocation is the trials domain's:
/// `trials::service::load_brief` makes the whole brief of it, and it is the loader everyone uses.
pub async fn load_record(db: impl sqlx::PgExecutor<'_>, id: BriefId) -> Result<BriefRecord, AppError> {
    repo::get(db, id)
        .await?
        .map(BriefRecord::new)
        .ok_or(AppError::NotFound("brief"))
}

/// The brief's name, or 404 "brief not found" (for a caller that needs no more).
pub async fn name(db: impl sqlx::PgExecutor<'_>, id: BriefId) -> Result<String, AppError> {
    repo::names(db, &[id])
        .await?
        .pop()
        .map(|(_, name)| name)
        .ok_or(AppError::NotFound("brief"))
}

/// (id, name) of each of the given briefs that exists, in one statement.
pub async fn names(db: impl sqlx::PgExecutor<'_>, ids: &[BriefId]) -> Result<Vec<(BriefId, String)>, AppError> {
    Ok(repo::names(db, ids).await?)
}

/// Whether a brief with this id exists (for callers that need no more than that).
pub async fn exists(db: impl sqlx::PgExecutor<'_>, id: BriefId) -> Result<bool, AppError> {
    Ok(repo::exists(db, id).await?)
}

/// Every brief's id.
pub async fn all_ids(db: impl sqlx::PgExecutor<'_>) -> Result<Vec<BriefId>, AppError> {
    Ok(repo::all_ids(db).await?)
}

/// The newest `limit` briefs whose id is not in `ids` (the admin page's briefs nobody owns):
/// (id, name).
pub async fn newest_not_in(
    db: impl sqlx::PgExecutor<'_>,
    ids: &[BriefId],
    limit: i64,
) -> Result<Vec<(BriefId, String)>, AppError> {
    Ok(repo::newest_not_in(db, ids, limit).await?)
}

/// Creates a brief owned by the person behind `actor` (a token limited to one brief may not
/// create any) and records it in the audit log, in the caller's transaction. Its trial 1 is the
/// trials domain's: `trials::service::create_brief` is the whole use case.
pub async fn create_owned_in(
    conn: &mut sqlx::PgConnection,
    fields: &BriefFields,
    actor: &Principal,
) -> Result<BriefRecord, AppError> {
    actor.require_unscoped()?;
    let brief = repo::insert(&mut *conn, fields).await?;
    if let Some(user) = actor.user_id() {
        teams::set_owner(&mut *conn, brief.id, user).await?;
    }
    audit::record(
        &mut *conn,
        &actor.label(),
        "brief.create",
        &format!("brief:{}", brief.id),
        serde_json::json!({ "name": brief.fields.name }),
    )
    .await?;
    Ok(BriefRecord::new(brief))
}

/// Whether `actor` may edit the brief (`teams::may_edit_brief`, the one ownership check): 403 or
/// 404 otherwise.
pub async fn may_edit(pool: &sqlx::PgPool, actor: &Principal, id: BriefId) -> Result<(), AppError> {
    teams::may_edit_brief(pool, actor, id).await
}

/// Replaces the fields of `before` (the brief as it is, read in the caller's transaction under
/// its lock, trial 1's allocation included) and records which fields changed in the audit log, in
/// that transaction; the caller checked [`may_edit`]. Trial 1's allocation is the trials domain's
/// to write (`trials::service::replace_brief`, the whole use case); the audit compares it as asked.
pub async fn replace_in(
    conn: &mut sqlx::PgConnection,
    before: &Brief,
    fields: &BriefFields,
    actor: &Principal,
) -> Result<BriefRecord, AppError> {
    let id = before.id;
    let mut after = repo::update(&mut *conn, id, fields)
        .await?
        .ok_or(AppError::NotFound("brief"))?;
    after.fields.trial_gpu = fields.trial_gpu.clone();
    after.fields.trial_gpu_count = fields.trial_gpu_count;
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
        &mut *conn,
        &actor.label(),
        "brief.update",
        &format!("brief:{id}"),
        serde_json::json!({ "fields": changed }),
    )
    .await?;
    Ok(BriefRecord::new(after))
}

/// Creates a brief with a fixed id unless one exists; `None` when it did (the demo's brief,
/// through `trials::service::create_brief_with_id`, which adds its trial 1).
pub async fn create_with_id(
    db: impl sqlx::PgExecutor<'_>,
    id: BriefId,
    fields: &BriefFields,
) -> Result<Option<BriefRecord>, AppError> {
    Ok(repo::insert_with_id(db, id, fields).await?.map(BriefRecord::new))
}

/// Locks the brief's row for the rest of the transaction; 404 when there is no such brief.
pub async fn lock(db: impl sqlx::PgExecutor<'_>, id: BriefId) -> Result<(), AppError> {
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
    id: BriefId,
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
