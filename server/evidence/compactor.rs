//! Keeps `evidence_metrics_latest` current: moves uploads from `evidence_metrics_pending` in
//! batches (migration 8 explains why the upload itself does not). Readers never wait for it:
//! `newest_evidence_metrics` also reads what is still pending, so this only bounds how much that is.

use std::{sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio::task::JoinHandle;

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

/// One batch: returns how many pending items it took (0 when there was nothing to do).
pub async fn compact_once(pool: &PgPool, batch: i32) -> Result<i32, sqlx::Error> {
    // The function ends in `SELECT count(*)::integer` (migration 9): never NULL.
    sqlx::query_scalar!(r#"SELECT evidence_metrics_compact($1) AS "moved!""#, batch)
        .fetch_one(pool)
        .await
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
