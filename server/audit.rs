//! The append-only audit log: who did what to which target, and when.

use serde_json::Value;
use sqlx::PgExecutor;
use uuid::Uuid;

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

#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditEntry {
    pub at: chrono::DateTime<chrono::Utc>,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub details: sqlx::types::Json<Value>,
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
