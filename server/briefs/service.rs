//! The brief use cases, the door other domains use: load (or 404), list, create and replace.

use uuid::Uuid;

use super::{
    model::{Brief, BriefFields},
    repo,
};
use crate::error::AppError;

/// The brief, or 404 "brief not found".
pub async fn load(db: impl sqlx::PgExecutor<'_>, id: Uuid) -> Result<Brief, AppError> {
    repo::get(db, id).await?.ok_or(AppError::NotFound("brief"))
}

/// Whether a brief with this id exists (for callers that need no more than that).
pub async fn exists(db: impl sqlx::PgExecutor<'_>, id: Uuid) -> Result<bool, AppError> {
    Ok(repo::get(db, id).await?.is_some())
}

/// The newest briefs first, at most `limit`.
pub async fn list(db: impl sqlx::PgExecutor<'_>, limit: i64) -> Result<Vec<Brief>, AppError> {
    Ok(repo::list(db, limit).await?)
}

pub async fn create(db: impl sqlx::PgExecutor<'_>, fields: &BriefFields) -> Result<Brief, AppError> {
    Ok(repo::insert(db, fields).await?)
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
