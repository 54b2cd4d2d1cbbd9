//! Keeps `evidence_metrics_latest` current: moves uploads from `evidence_metrics_pending` in
//! batches (migration 8 explains why the upload itself does not). Readers never wait for it:
//! `newest_evidence_metrics` also reads what is still pending, so this only bounds how much that is.
//!
//! Every statement runs under a `statement_timeout` ([`ROUND_TIMEOUT`]): whatever was uploaded, no
//! compaction holds the database longer than that. A batch that runs out of time is retried one item
//! at a time; an item that runs out of time alone is set aside (`evidence_metrics_set_aside`, with a
//! warning on the item) and never taken again (migration 20261203100000).

use std::{sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::telemetry::Metrics;

/// Items moved per statement: large enough that a burst of uploads collapses into a few upserts,
/// small enough that one statement stays in the tens of milliseconds.
pub const BATCH: i32 = 2_000;
/// How soon a compactor that just moved items looks again. Readers read the queue too, and their
/// cost grows with its length: under steady ingest a short pause keeps the queue at a few dozen
/// items. Measured at 1,000 uploads/s: the card's metric read fell from 3.1 ms to 0.7 ms (100 ms
/// pause before), for about 4 % of a core of extra compactor round trips.
const BUSY_POLL: Duration = Duration::from_millis(20);
/// How often an idle compactor looks for work.
const IDLE_POLL: Duration = Duration::from_millis(250);
/// Queue rows moved between two vacuums of the queue.
const VACUUM_AFTER: u64 = 10_000;
/// How long to wait after a database error before trying again.
const ERROR_BACKOFF: Duration = Duration::from_secs(1);

/// The longest any compaction statement may run. A batch of items within the upload limits (1,000
/// keys each) takes tens of milliseconds; this is two orders of magnitude of room.
pub const ROUND_TIMEOUT: Duration = Duration::from_secs(5);

/// What one round did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Pending items moved into `evidence_metrics_latest`.
    pub moved: i32,
    /// Items set aside because compacting them alone ran out of time.
    pub set_aside: Vec<Uuid>,
}

/// One batch: returns how many pending items it took (0 when there was nothing to do).
pub async fn compact_once(pool: &PgPool, batch: i32) -> Result<i32, sqlx::Error> {
    compact_round(pool, batch, ROUND_TIMEOUT).await.map(|r| r.moved)
}

/// `statement_timeout`'s SQLSTATE: the statement was cancelled.
fn timed_out(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("57014"))
}

/// Runs `sql` (one integer-valued function call taking `arg`) in a transaction whose statements
/// may run at most `timeout`.
async fn bounded<'a, A>(pool: &PgPool, timeout: Duration, sql: &'static str, arg: A) -> Result<i32, sqlx::Error>
where
    A: 'a + Send + sqlx::Encode<'a, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    let mut tx = pool.begin().await?;
    // Runtime queries (here and below): set_config and these functions' calls need no checked
    // columns, and `SET LOCAL` cannot take a bind parameter.
    sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(format!("{}ms", timeout.as_millis().max(1)))
        .execute(&mut *tx)
        .await?;
    let n: Option<i32> = match sqlx::query_scalar(sql).bind(arg).fetch_one(&mut *tx).await {
        Ok(n) => n,
        Err(e) => {
            // Roll back now, not when the dropped transaction's connection is next used: until then
            // it holds its batch's queue rows, and the single-item pass that follows a timed-out
            // batch (on another connection) would skip them as locked, so a poisoned item was not
            // set aside in its round on a busy machine.
            let _ = tx.rollback().await;
            return Err(e);
        }
    };
    tx.commit().await?;
    Ok(n.unwrap_or(0))
}

/// One round, no statement longer than `timeout`: a batch of up to `batch` items; if that runs out
/// of time, the pending items one at a time until one runs out of time alone, which is set aside.
/// A round's cost is thus at most two timeouts plus `batch` single-item statements.
pub async fn compact_round(pool: &PgPool, batch: i32, timeout: Duration) -> Result<Round, sqlx::Error> {
    match bounded(pool, timeout, "SELECT evidence_metrics_compact($1)", batch).await {
        Ok(moved) => {
            return Ok(Round {
                moved,
                set_aside: Vec::new(),
            })
        }
        Err(e) if timed_out(&e) => {
            tracing::warn!(
                batch,
                "an evidence metrics compaction batch ran out of time; taking its items one at a time"
            );
        }
        Err(e) => return Err(e),
    }
    let ids: Vec<Uuid> = sqlx::query_scalar("SELECT evidence_id FROM evidence_metrics_pending LIMIT $1")
        .bind(i64::from(batch.max(1)))
        .fetch_all(pool)
        .await?;
    let mut round = Round::default();
    for id in ids {
        match bounded(pool, timeout, "SELECT evidence_metrics_compact_items($1)", vec![id]).await {
            Ok(n) => round.moved += n,
            Err(e) if timed_out(&e) => {
                let why = format!(
                    "this item's metrics were set aside: compacting them alone took longer than {} s, so \
                     they are not on the card",
                    timeout.as_secs_f64()
                );
                let taken: bool = sqlx::query_scalar("SELECT evidence_metrics_set_aside_item($1, $2)")
                    .bind(id)
                    .bind(&why)
                    .fetch_one(pool)
                    .await?;
                if taken {
                    tracing::warn!(evidence = %id, "{why}");
                    round.set_aside.push(id);
                }
                // One poisoned item per round: the next round starts with a whole batch again.
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(round)
}

/// Compacts until nothing is pending; returns the number of items moved.
pub async fn compact_all(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut moved = 0u64;
    loop {
        let n = compact_once(pool, BATCH).await?;
        moved += n as u64;
        if n < BATCH {
            return Ok(moved);
        }
    }
}

/// Dead queue rows slow every later batch (and the readers' look at pending items) until a vacuum
/// clears them; autovacuum wakes once a minute, far too seldom for a queue taking thousands a second.
async fn vacuum_queue(pool: &PgPool) -> Result<(), sqlx::Error> {
    // Runtime query: VACUUM cannot run in a transaction or be prepared (as a macro's statement is).
    sqlx::raw_sql("VACUUM evidence_metrics_pending")
        .execute(pool)
        .await
        .map(|_| ())
}

/// Runs for as long as the server does, counting its work in `metrics` (`GET /metrics`). Several
/// instances may run at once (one per app server); they take disjoint batches.
pub fn spawn(pool: PgPool, metrics: Arc<Metrics>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut moved_since_vacuum = 0u64;
        loop {
            let outcome = compact_once(&pool, BATCH).await;
            metrics.observe_compaction(outcome.as_ref().map(|n| *n as u64).map_err(|_| ()));
            if let Ok(n) = outcome {
                moved_since_vacuum += n as u64;
            }
            if moved_since_vacuum >= VACUUM_AFTER {
                moved_since_vacuum = 0;
                if let Err(e) = vacuum_queue(&pool).await {
                    tracing::warn!(error = %e, "vacuuming the evidence metrics queue failed");
                }
            }
            match outcome {
                Ok(n) if n >= BATCH => continue,
                Ok(0) => tokio::time::sleep(IDLE_POLL).await,
                Ok(_) => tokio::time::sleep(BUSY_POLL).await,
                Err(e) => {
                    // An outage or a deadlock with another instance; the work stays pending.
                    tracing::warn!(error = %e, "evidence metrics compaction failed; retrying");
                    tokio::time::sleep(ERROR_BACKOFF).await;
                }
            }
        }
    })
}
