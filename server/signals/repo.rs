//! SQL of webhooks, their deliveries and attempts, and the signal snapshot.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::Value;
use sqlx::{types::Json, PgConnection, PgExecutor};
use uuid::Uuid;

/// A webhook as listed: never its secret.
#[derive(Debug, Clone, Serialize)]
pub struct WebhookRow {
    pub id: Uuid,
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
pub async fn delete_webhook(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!("DELETE FROM webhooks WHERE id = $1 RETURNING url", id)
        .fetch_optional(db)
        .await
}

#[derive(Debug, Clone, Serialize)]
pub struct DeliveryRow {
    pub id: Uuid,
    pub webhook_id: Uuid,
    pub event_id: Uuid,
    pub event: String,
    pub brief_id: Uuid,
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
    webhooks: &[Uuid],
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
        webhooks,
        per_webhook,
    )
    .fetch_all(db)
    .await
}

#[derive(Debug, Clone, Serialize)]
pub struct AttemptRow {
    pub delivery_id: Uuid,
    pub attempted_at: DateTime<Utc>,
    /// The receiver's HTTP status; none when it never answered.
    pub status_code: Option<i32>,
    pub error: Option<String>,
    pub duration_ms: i32,
}

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

/// Takes up to `limit` briefs marked changed, removing their marks. A write after this marks the
/// brief again, so nothing that lands while its review is computed is missed.
pub async fn claim_dirty(
    db: impl PgExecutor<'_>,
    limit: i64,
    settle: std::time::Duration,
) -> Result<Vec<Uuid>, sqlx::Error> {
    // Every queued mark of up to `limit` briefs whose oldest mark has waited `settle`, oldest
    // first; marks of transactions still open are not seen and stay for the next round.
    // The count of taken changes moves in the same statement (see `brief_changes_taken`).
    sqlx::query_scalar!(
        r#"WITH taken AS (
             DELETE FROM brief_signals_dirty WHERE brief_id IN (
                 SELECT brief_id FROM brief_signals_dirty
                 WHERE marked_at <= now() - make_interval(secs => $2)
                 ORDER BY marked_at LIMIT $1 FOR UPDATE SKIP LOCKED)
             RETURNING brief_id),
           counted AS (
             INSERT INTO brief_changes_taken (brief_id, taken)
             SELECT brief_id, count(*) FROM taken GROUP BY brief_id ORDER BY brief_id
             ON CONFLICT (brief_id) DO UPDATE SET taken = brief_changes_taken.taken + EXCLUDED.taken)
           SELECT DISTINCT brief_id AS "brief_id!" FROM taken"#,
        limit,
        settle.as_secs_f64(),
    )
    .fetch_all(db)
    .await
}

/// Takes the queued marks of `ids` (a reader about to show them refreshes them itself).
pub async fn claim_dirty_of(db: impl PgExecutor<'_>, ids: &[Uuid]) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!(
        "WITH taken AS (DELETE FROM brief_signals_dirty WHERE brief_id = ANY($1) RETURNING brief_id),
                  counted AS (
                    INSERT INTO brief_changes_taken (brief_id, taken)
                    SELECT brief_id, count(*) FROM taken GROUP BY brief_id ORDER BY brief_id
                    ON CONFLICT (brief_id) DO UPDATE SET taken = brief_changes_taken.taken + EXCLUDED.taken)
             SELECT count(*) FROM taken",
        ids
    )
    .fetch_one(db)
    .await?
    .count
    .unwrap_or(0) as u64)
}

/// Of `ids`, those whose snapshot is not current: changes queued, or never made.
pub async fn not_current(db: impl PgExecutor<'_>, ids: &[Uuid]) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT id AS "id!" FROM unnest($1::uuid[]) AS ids(id)
           WHERE EXISTS (SELECT 1 FROM brief_signals_dirty d WHERE d.brief_id = ids.id)
              OR NOT EXISTS (SELECT 1 FROM brief_signals s WHERE s.brief_id = ids.id)"#,
        ids
    )
    .fetch_all(db)
    .await
}

/// Queues a mark for every brief (at start-up: the rules that made the snapshots may have changed).
pub async fn mark_all(db: impl PgExecutor<'_>) -> Result<u64, sqlx::Error> {
    Ok(
        sqlx::query!("INSERT INTO brief_signals_dirty (brief_id) SELECT id FROM briefs")
            .execute(db)
            .await?
            .rows_affected(),
    )
}

/// Marks a brief again (its refresh failed: try later).
pub async fn mark_dirty(db: impl PgExecutor<'_>, brief_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!("INSERT INTO brief_signals_dirty (brief_id) VALUES ($1)", brief_id)
        .execute(db)
        .await?;
    Ok(())
}

/// A brief's snapshot as stored, locked until the transaction ends.
pub struct SnapshotRow {
    pub decision: String,
    pub accepted: bool,
    pub approval_id: Option<Uuid>,
    pub approval_stale: bool,
    pub computed_at: DateTime<Utc>,
}

pub async fn lock_snapshot(db: &mut PgConnection, brief_id: Uuid) -> Result<Option<SnapshotRow>, sqlx::Error> {
    sqlx::query_as!(
        SnapshotRow,
        "SELECT decision, accepted, approval_id, approval_stale, computed_at FROM brief_signals
          WHERE brief_id = $1 FOR UPDATE",
        brief_id,
    )
    .fetch_optional(db)
    .await
}

pub struct TrialSnapshotRow {
    pub trial_id: Uuid,
    pub decision: String,
    pub accepted: bool,
}

pub async fn trial_snapshots(db: &mut PgConnection, brief_id: Uuid) -> Result<Vec<TrialSnapshotRow>, sqlx::Error> {
    sqlx::query_as!(
        TrialSnapshotRow,
        "SELECT trial_id, decision, accepted FROM brief_signal_trials WHERE brief_id = $1",
        brief_id,
    )
    .fetch_all(db)
    .await
}

pub struct NewSnapshot {
    pub brief_id: Uuid,
    pub trial_id: Uuid,
    pub decision: String,
    pub accepted: bool,
    pub approval_id: Option<Uuid>,
    pub approval_stale: bool,
    pub computed_at: DateTime<Utc>,
    pub summary: BriefSummary,
}

/// What lists show of a brief's review, stored with its snapshot (the `review_summaries`
/// migration).
#[derive(Debug, Clone, PartialEq)]
pub struct BriefSummary {
    pub cost_per_job: Option<Decimal>,
    pub criteria_passed: i32,
    pub criteria_required: i32,
    pub failing: bool,
    pub evidence_count: i64,
    pub last_evidence_at: Option<DateTime<Utc>>,
    pub approval_verdict: Option<String>,
    pub approval_decision: Option<String>,
    /// awaiting-evidence | needs-approval | stale | approved | rejected
    pub state: String,
}

/// A brief's stored summary, with the decision it summarises.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    pub brief_id: Uuid,
    pub trial_id: Uuid,
    pub decision: String,
    pub accepted: bool,
    pub summary: BriefSummary,
}

/// The stored summaries of `ids`, in no particular order.
pub async fn summaries(db: impl PgExecutor<'_>, ids: &[Uuid]) -> Result<Vec<SummaryRow>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT brief_id, trial_id, decision, accepted, cost_per_job, criteria_passed, criteria_required, failing,
                evidence_count, last_evidence_at, approval_verdict, approval_decision, state
           FROM brief_signals WHERE brief_id = ANY($1)",
        ids
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| SummaryRow {
            brief_id: r.brief_id,
            trial_id: r.trial_id,
            decision: r.decision,
            accepted: r.accepted,
            summary: BriefSummary {
                cost_per_job: r.cost_per_job,
                criteria_passed: r.criteria_passed,
                criteria_required: r.criteria_required,
                failing: r.failing,
                evidence_count: r.evidence_count,
                last_evidence_at: r.last_evidence_at,
                approval_verdict: r.approval_verdict,
                approval_decision: r.approval_decision,
                state: r.state,
            },
        })
        .collect())
}

pub struct NewTrialSnapshot {
    pub trial_id: Uuid,
    pub decision: String,
    pub accepted: bool,
    pub cost_per_job: Option<Decimal>,
    pub utilization: Option<Decimal>,
    pub criteria_passed: i32,
    pub criteria_required: i32,
    pub last_evidence_at: Option<DateTime<Utc>>,
}

/// Replaces a brief's snapshot (its row and every trial's).
pub async fn store_snapshot(
    db: &mut PgConnection,
    s: &NewSnapshot,
    trials: &[NewTrialSnapshot],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO brief_signals (brief_id, trial_id, decision, accepted, approval_id, approval_stale, computed_at,
             cost_per_job, criteria_passed, criteria_required, failing, evidence_count, last_evidence_at,
             approval_verdict, approval_decision, state)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
         ON CONFLICT (brief_id) DO UPDATE SET trial_id = $2, decision = $3, accepted = $4, approval_id = $5,
             approval_stale = $6, computed_at = $7, cost_per_job = $8, criteria_passed = $9,
             criteria_required = $10, failing = $11, evidence_count = $12, last_evidence_at = $13,
             approval_verdict = $14, approval_decision = $15, state = $16",
        s.brief_id,
        s.trial_id,
        s.decision,
        s.accepted,
        s.approval_id,
        s.approval_stale,
        s.computed_at,
        s.summary.cost_per_job,
        s.summary.criteria_passed,
        s.summary.criteria_required,
        s.summary.failing,
        s.summary.evidence_count,
        s.summary.last_evidence_at,
        s.summary.approval_verdict,
        s.summary.approval_decision,
        s.summary.state,
    )
    .execute(&mut *db)
    .await?;
    sqlx::query!("DELETE FROM brief_signal_trials WHERE brief_id = $1", s.brief_id)
        .execute(&mut *db)
        .await?;
    for t in trials {
        sqlx::query!(
            "INSERT INTO brief_signal_trials (brief_id, trial_id, decision, accepted, cost_per_job, utilization,
                 criteria_passed, criteria_required, last_evidence_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            s.brief_id,
            t.trial_id,
            t.decision,
            t.accepted,
            t.cost_per_job,
            t.utilization,
            t.criteria_passed,
            t.criteria_required,
            t.last_evidence_at,
        )
        .execute(&mut *db)
        .await?;
    }
    Ok(())
}

/// The newest evidence received per trial of a brief, with each trial's evidence count (one read
/// serves the gauges and the brief's summary). Counted per trial from `evidence_trial_received_idx`
/// alone (an index-only scan) rather than by reading every item's row: 15 ms against 45 ms for a
/// trial of 100,000 vacuumed items (items written since the last vacuum are still read from their
/// rows, so under heavy ingest the two cost about the same).
pub async fn last_evidence(
    db: impl PgExecutor<'_>,
    brief_id: Uuid,
) -> Result<Vec<(Uuid, DateTime<Utc>, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT t.id AS "trial_id!", e.at AS "at!", e.count AS "count!"
           FROM trials t
           CROSS JOIN LATERAL (SELECT max(received_at) AS at, count(*) AS count FROM evidence
                               WHERE trial_id = t.id) AS e
           WHERE t.brief_id = $1 AND e.count > 0"#,
        brief_id,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.trial_id, r.at, r.count)).collect())
}

/// Every trial's snapshot with its brief's, for `/metrics/briefs`.
pub struct GaugeRow {
    pub brief_id: Uuid,
    pub trial_id: Uuid,
    pub recommended: bool,
    pub brief_decision: String,
    pub approval_stale: bool,
    pub decision: String,
    pub accepted: bool,
    pub cost_per_job: Option<Decimal>,
    pub utilization: Option<Decimal>,
    pub criteria_passed: i32,
    pub criteria_required: i32,
    pub days_since_evidence: Option<f64>,
}

pub async fn gauges(db: impl PgExecutor<'_>) -> Result<Vec<GaugeRow>, sqlx::Error> {
    sqlx::query_as!(
        GaugeRow,
        r#"SELECT t.brief_id, t.trial_id, (t.trial_id = b.trial_id) AS "recommended!", b.decision AS brief_decision,
                  b.approval_stale, t.decision, t.accepted, t.cost_per_job, t.utilization, t.criteria_passed,
                  t.criteria_required,
                  (extract(epoch FROM now() - t.last_evidence_at) / 86400)::float8 AS days_since_evidence
             FROM brief_signal_trials t JOIN brief_signals b ON b.brief_id = t.brief_id
            ORDER BY t.brief_id, t.trial_id"#
    )
    .fetch_all(db)
    .await
}
