//! SQL of the webhook store the outbox owns: the webhooks (subscribers), the events, one delivery
//! per subscriber and each attempt. The `signals` domain manages webhooks and delivers events
//! through these functions; domains write events with [`super::enqueue`].

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::{types::Json, PgConnection, PgExecutor};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::ids::{BriefId, WebhookId};

/// A webhook as listed: never its secret.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebhookRow {
    #[schema(value_type = Uuid)]
    pub id: WebhookId,
    pub url: String,
    pub events: Vec<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

pub async fn insert_webhook(
    db: impl PgExecutor<'_>,
    url: &str,
    events: &[String],
    secret: &str,
    created_by: &str,
) -> Result<WebhookRow, sqlx::Error> {
    sqlx::query_as!(
        WebhookRow,
        "INSERT INTO webhooks (id, url, events, secret, created_by) VALUES ($1, $2, $3, $4, $5)
         RETURNING id, url, events, created_by, created_at",
        Uuid::now_v7(),
        url,
        events,
        secret,
        created_by,
    )
    .fetch_one(db)
    .await
}

pub async fn list_webhooks(db: impl PgExecutor<'_>) -> Result<Vec<WebhookRow>, sqlx::Error> {
    sqlx::query_as!(
        WebhookRow,
        "SELECT id, url, events, created_by, created_at FROM webhooks ORDER BY created_at, id"
    )
    .fetch_all(db)
    .await
}

/// Deletes a webhook with its deliveries and attempts; false when there was none.
pub async fn delete_webhook(db: impl PgExecutor<'_>, id: WebhookId) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!("DELETE FROM webhooks WHERE id = $1 RETURNING url", id.as_uuid())
        .fetch_optional(db)
        .await
}

/// One event sent (or being sent) to one webhook.
// Deliveries and events keep bare ids: the outbox writes them for any domain's record, and nothing
// else passes them around. (A plain comment: the doc comment is the published description.)
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeliveryRow {
    pub id: Uuid,
    #[schema(value_type = Uuid)]
    pub webhook_id: WebhookId,
    pub event_id: Uuid,
    pub event: String,
    #[schema(value_type = Uuid)]
    pub brief_id: BriefId,
    /// pending, delivered or failed (given up).
    pub state: String,
    pub attempts: i32,
    pub created_at: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// The newest `per_webhook` deliveries of each webhook.
pub async fn recent_deliveries(
    db: impl PgExecutor<'_>,
    webhooks: &[WebhookId],
    per_webhook: i64,
) -> Result<Vec<DeliveryRow>, sqlx::Error> {
    sqlx::query_as!(
        DeliveryRow,
        r#"SELECT d.id AS "id!", d.webhook_id AS "webhook_id!", d.event_id AS "event_id!", e.event,
                  e.brief_id, d.state AS "state!", d.attempts AS "attempts!", d.created_at AS "created_at!",
                  CASE WHEN d.state = 'pending' THEN d.next_attempt_at END AS next_attempt_at,
                  d.finished_at
             FROM unnest($1::uuid[]) AS w (id)
             CROSS JOIN LATERAL (
                 SELECT * FROM webhook_deliveries WHERE webhook_id = w.id
                  ORDER BY created_at DESC, id DESC LIMIT $2
             ) d
             JOIN webhook_events e ON e.id = d.event_id
            ORDER BY d.created_at DESC, d.id DESC"#,
        webhooks as _,
        per_webhook,
    )
    .fetch_all(db)
    .await
}

/// One try at sending a delivery.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AttemptRow {
    pub delivery_id: Uuid,
    pub attempted_at: DateTime<Utc>,
    /// The receiver's HTTP status; none when it never answered.
    pub status_code: Option<i32>,
    pub error: Option<String>,
    pub duration_ms: i32,
}

/// The attempts at `deliveries` (bare ids, as [`DeliveryRow`] keeps them).
pub async fn attempts(db: impl PgExecutor<'_>, deliveries: &[Uuid]) -> Result<Vec<AttemptRow>, sqlx::Error> {
    sqlx::query_as!(
        AttemptRow,
        "SELECT delivery_id, attempted_at, status_code, error, duration_ms FROM webhook_attempts
          WHERE delivery_id = ANY($1) ORDER BY attempted_at, id",
        deliveries,
    )
    .fetch_all(db)
    .await
}

/// A delivery a worker has claimed, with what it needs to send it.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: Uuid,
    pub attempts: i32,
    pub created_at: DateTime<Utc>,
    pub url: String,
    pub secret: String,
    pub event: String,
    pub payload: Json<Value>,
}

/// Claims up to `limit` due deliveries for `lease_secs`: their next attempt moves past the lease,
/// so no other worker (in this server or another on the same database) picks them up while this
/// one sends. `SKIP LOCKED` lets two workers claim side by side without waiting on each other.
/// A worker that dies mid-send leaves the row to be claimed again when the lease ends.
pub async fn claim_due(db: impl PgExecutor<'_>, limit: i64, lease_secs: f64) -> Result<Vec<Claimed>, sqlx::Error> {
    sqlx::query_as!(
        Claimed,
        r#"UPDATE webhook_deliveries d
              SET next_attempt_at = now() + make_interval(secs => $2), attempts = d.attempts + 1
             FROM webhooks w, webhook_events e
            WHERE d.id IN (SELECT id FROM webhook_deliveries
                            WHERE state = 'pending' AND next_attempt_at <= now()
                            ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
              AND w.id = d.webhook_id AND e.id = d.event_id
        RETURNING d.id, d.attempts, d.created_at, w.url, w.secret, e.event, e.payload AS "payload: Json<Value>""#,
        limit,
        lease_secs,
    )
    .fetch_all(db)
    .await
}

/// Keeps one attempt and moves its delivery on: delivered, failed (given up), or due again at
/// `retry_at`. Only a delivery still pending is moved (a deleted webhook's is gone).
pub async fn record_attempt(
    db: &mut PgConnection,
    delivery_id: Uuid,
    status_code: Option<i32>,
    error: Option<&str>,
    duration_ms: i32,
    state: &str,
    retry_at: Option<DateTime<Utc>>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO webhook_attempts (id, delivery_id, status_code, error, duration_ms)
         SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $2)",
        Uuid::now_v7(),
        delivery_id,
        status_code,
        error,
        duration_ms,
    )
    .execute(&mut *db)
    .await?;
    sqlx::query!(
        "UPDATE webhook_deliveries
            SET state = $2,
                next_attempt_at = COALESCE($3, next_attempt_at),
                finished_at = CASE WHEN $2 = 'pending' THEN NULL ELSE now() END
          WHERE id = $1 AND state = 'pending'",
        delivery_id,
        state,
        retry_at,
    )
    .execute(&mut *db)
    .await?;
    Ok(())
}
