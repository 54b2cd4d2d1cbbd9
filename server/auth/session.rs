//! Server-side sessions: a random id in an HttpOnly, SameSite=Lax cookie; only its SHA-256 is stored.

use axum::http::{header, HeaderMap};
use chrono::{DateTime, Duration, Utc};
use sqlx::{PgExecutor, PgPool};

use super::Role;
use crate::{
    ids::UserId,
    secrets::{random_token, sha256},
};

pub const COOKIE: &str = "rentcheck_session";

/// How long a session lives (`RENTCHECK_SESSION_IDLE_MINUTES`, `RENTCHECK_SESSION_MAX_HOURS`).
/// The defaults are NIST SP 800-63B's AAL2 limits, which OWASP ASVS level 2 points to: signed out
/// after 30 minutes without a request, and after 12 hours whatever happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    pub idle: Duration,
    pub absolute: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            idle: Duration::minutes(30),
            absolute: Duration::hours(12),
        }
    }
}

/// A signed-in person, as a request sees them.
#[derive(Debug, Clone)]
pub struct SessionUser {
    pub id: UserId,
    pub email: String,
    pub role: Role,
    pub csrf_token: String,
}

struct SessionRow {
    id: UserId,
    email: String,
    role: Role,
    csrf_token: String,
    last_seen_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
}

/// Creates a session; returns the cookie value (shown to the browser only).
pub async fn create(db: impl PgExecutor<'_>, user_id: UserId, limits: SessionLimits) -> Result<String, sqlx::Error> {
    let id = random_token();
    sqlx::query!(
        "INSERT INTO sessions (id_hash, user_id, csrf_token, expires_at) VALUES ($1, $2, $3, $4)",
        sha256(id.as_bytes()),
        user_id.as_uuid(),
        random_token(),
        Utc::now() + limits.absolute,
    )
    .execute(db)
    .await?;
    Ok(id)
}

/// The live session behind a cookie value, if any; refreshes its idle clock. A disabled person's
/// session is no session (disabling deletes them too; this holds even mid-request).
pub async fn lookup(
    pool: &PgPool,
    cookie_value: &str,
    limits: SessionLimits,
) -> Result<Option<SessionUser>, sqlx::Error> {
    let hash = sha256(cookie_value.as_bytes());
    let row = sqlx::query_as!(
        SessionRow,
        r#"SELECT u.id, u.email, u.role AS "role: Role", s.csrf_token, s.last_seen_at, s.expires_at
           FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_hash = $1 AND u.disabled_at IS NULL"#,
        &hash,
    )
    .fetch_optional(pool)
    .await?;
    let Some(SessionRow {
        id,
        email,
        role,
        csrf_token,
        last_seen_at: last_seen,
        expires_at: expires,
    }) = row
    else {
        return Ok(None);
    };
    let now = Utc::now();
    if expires <= now || last_seen + limits.idle <= now {
        delete_by_hash(pool, &hash).await?;
        return Ok(None);
    }
    if now - last_seen > Duration::minutes(1) {
        sqlx::query!("UPDATE sessions SET last_seen_at = now() WHERE id_hash = $1", &hash)
            .execute(pool)
            .await?;
    }
    Ok(Some(SessionUser {
        id,
        email,
        role,
        csrf_token,
    }))
}

pub async fn delete(db: impl PgExecutor<'_>, cookie_value: &str) -> Result<(), sqlx::Error> {
    delete_by_hash(db, &sha256(cookie_value.as_bytes())).await
}

/// Ends every session of a person ("sign out everywhere", a disabled account, a new password),
/// but the one behind `keep` when given. Returns how many ended.
pub async fn delete_for_user(db: impl PgExecutor<'_>, user_id: UserId, keep: Option<&str>) -> Result<u64, sqlx::Error> {
    let keep = keep.map(|k| sha256(k.as_bytes())).unwrap_or_default();
    let done = sqlx::query!(
        "DELETE FROM sessions WHERE user_id = $1 AND id_hash <> $2",
        user_id.as_uuid(),
        &keep,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

async fn delete_by_hash(db: impl PgExecutor<'_>, hash: &[u8]) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM sessions WHERE id_hash = $1", hash)
        .execute(db)
        .await?;
    Ok(())
}

/// A cookie's value from the request's `Cookie` headers.
pub fn read_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// `Set-Cookie` for a cookie only the server reads.
pub fn set_cookie(name: &str, value: &str, max_age: Duration, secure: bool) -> String {
    format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{}",
        max_age.num_seconds(),
        if secure { "; Secure" } else { "" }
    )
}

pub fn clear_cookie(name: &str, secure: bool) -> String {
    set_cookie(name, "", Duration::zero(), secure)
}
