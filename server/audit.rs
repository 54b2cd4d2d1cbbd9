//! The append-only audit log: who did what to which target, and when.

use serde_json::Value;
use sqlx::{types::Json, PgConnection, PgExecutor, PgPool};
use uuid::Uuid;

use crate::ids::BriefId;

/// One row of the log, made by the change it records.
#[derive(Debug, Clone)]
pub struct Entry {
    pub actor: String,
    pub action: &'static str,
    pub target: String,
    pub details: Value,
}

impl Entry {
    pub fn new(actor: &str, action: &'static str, target: &str, details: Value) -> Self {
        Self {
            actor: actor.to_owned(),
            action,
            target: target.to_owned(),
            details,
        }
    }

    /// Writes the row with `db`: the change's own transaction.
    pub async fn record(self, db: impl PgExecutor<'_>) -> Result<(), sqlx::Error> {
        record(db, &self.actor, self.action, &self.target, self.details).await
    }
}

/// Runs `change` in one transaction with the audit row `entry` makes of its outcome (`None`: it
/// changed nothing, no row), so a change is never stored without its row nor a row without its
/// change.
pub async fn audited<T, E: From<sqlx::Error>>(
    pool: &PgPool,
    change: impl AsyncFnOnce(&mut PgConnection) -> Result<T, E>,
    entry: impl FnOnce(&T) -> Option<Entry>,
) -> Result<T, E> {
    let mut tx = pool.begin().await?;
    let done = change(&mut tx).await?;
    if let Some(row) = entry(&done) {
        row.record(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(done)
}

pub async fn record(
    db: impl PgExecutor<'_>,
    actor: &str,
    action: &str,
    target: &str,
    details: Value,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO audit_log (id, actor, action, target, details) VALUES ($1, $2, $3, $4, $5)",
        Uuid::now_v7(),
        actor,
        action,
        target,
        details,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Refusals that cost an attacker nothing (a throttled sign-in, a forged bearer token) would each
/// write a row: a flood would fill the log and bury what matters. The first refusal of a kind, per
/// target and client, is written; the same again within [`REFUSALS_WINDOW`] is counted here and
/// its count written with the next row after the window. Per process: each server of several
/// writes its own.
pub const REFUSALS_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);

/// How many keys the limiter remembers before forgetting those past their window.
const LIMITER_KEYS: usize = 10_000;

#[derive(Debug, Default)]
pub struct RefusalLimiter {
    /// key → (when its row was last written, refusals not written since)
    seen: std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, u64)>>,
}

impl RefusalLimiter {
    /// `Some(suppressed since the last row)` when a row should be written now; `None` within the window.
    fn admit(&self, key: &str) -> Option<u64> {
        let now = std::time::Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((at, suppressed)) = seen.get_mut(key) {
            if now.duration_since(*at) < REFUSALS_WINDOW {
                *suppressed += 1;
                return None;
            }
            let before = *suppressed;
            *at = now;
            *suppressed = 0;
            return Some(before);
        }
        if seen.len() >= LIMITER_KEYS {
            seen.retain(|_, (at, _)| now.duration_since(*at) < REFUSALS_WINDOW);
            if seen.len() >= LIMITER_KEYS {
                seen.clear();
            }
        }
        seen.insert(key.to_owned(), (now, 0));
        Some(0)
    }
}

/// Records a refusal unless the same (`action`, `target`, `client`) was written within
/// [`REFUSALS_WINDOW`]; the row says how many were not written before it. True when written.
#[allow(clippy::too_many_arguments)]
pub async fn record_refusal(
    db: impl PgExecutor<'_>,
    limiter: &RefusalLimiter,
    actor: &str,
    action: &str,
    target: &str,
    client: &str,
    mut details: Value,
) -> Result<bool, sqlx::Error> {
    let Some(suppressed) = limiter.admit(&format!("{action}\u{1f}{target}\u{1f}{client}")) else {
        return Ok(false);
    };
    if let Value::Object(map) = &mut details {
        map.insert("client".into(), Value::String(client.to_owned()));
        if suppressed > 0 {
            map.insert("not_written_before".into(), Value::from(suppressed));
        }
    }
    record(db, actor, action, target, details).await?;
    Ok(true)
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditEntry {
    pub at: chrono::DateTime<chrono::Utc>,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub details: sqlx::types::Json<Value>,
}

/// A brief's audit trail, newest first (at most 500 entries).
pub async fn for_brief(db: impl PgExecutor<'_>, brief_id: BriefId) -> Result<Vec<AuditEntry>, sqlx::Error> {
    sqlx::query_as!(
        AuditEntry,
        r#"SELECT at, actor, action, target, details AS "details: Json<Value>"
           FROM audit_log WHERE target = $1 ORDER BY at DESC LIMIT 500"#,
        format!("brief:{brief_id}"),
    )
    .fetch_all(db)
    .await
}

/// The newest sign-in troubles of an account (failed, refused, locked, unlocked, a refused current
/// password), for its person's account page.
pub async fn sign_in_activity(
    db: impl PgExecutor<'_>,
    email: &str,
    limit: i64,
) -> Result<Vec<AuditEntry>, sqlx::Error> {
    sqlx::query_as!(
        AuditEntry,
        r#"SELECT at, actor, action, target, details AS "details: sqlx::types::Json<Value>" FROM audit_log
           WHERE target = $1
             AND action IN ('login.failed', 'login.refused', 'login.lock', 'login.unlock', 'user.password.refused')
           ORDER BY at DESC LIMIT $2"#,
        email,
        limit,
    )
    .fetch_all(db)
    .await
}

/// Failed logins for one email in the last `minutes`, for lockout.
pub async fn recent_login_failures(db: impl PgExecutor<'_>, email: &str, minutes: i32) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM audit_log WHERE action = 'login.failed' AND target = $1
           AND at > now() - make_interval(mins => $2)"#,
        email,
        minutes,
    )
    .fetch_one(db)
    .await
}
