//! The ledger use cases, the door other domains use: store lines (all or nothing, with the audit
//! row), the summary (cost per completed job), the CSV export, and the demo import.

use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use super::{
    csv::{self, CsvError, MAX_IMPORT_LINES},
    model::{Category, LedgerLine, LedgerSummary, Outputs, OutputsPatch},
    repo::{self, StoredLine},
};
use crate::{audit, briefs::service as briefs, error::AppError, state::AppState};

/// A CSV import that fails validation is 422 with each bad cell; one with too many lines is 413.
impl From<CsvError> for AppError {
    fn from(e: CsvError) -> Self {
        match e {
            CsvError::Invalid(errors) => AppError::Validation(errors),
            CsvError::TooManyLines => AppError::TooLarge(format!(
                "more than {MAX_IMPORT_LINES} lines in one import; split the file"
            )),
        }
    }
}

/// The brief's currency, or 404.
pub async fn brief_currency(state: &AppState, id: Uuid) -> Result<String, AppError> {
    Ok(briefs::load(&state.pool, id).await?.fields.currency)
}

/// Stores lines and an outputs update in one transaction with its audit row. All or nothing.
pub async fn store(
    state: &AppState,
    brief_id: Uuid,
    actor: &str,
    source: &str,
    lines: &[LedgerLine],
    outputs: Option<&OutputsPatch>,
) -> Result<u64, AppError> {
    let mut tx = state.pool.begin().await?;
    if !repo::lock_brief(&mut *tx, brief_id).await? {
        return Err(AppError::NotFound("brief"));
    }
    let import_id = Uuid::now_v7();
    let added = repo::insert_lines(&mut tx, brief_id, import_id, lines).await?;
    let mut touched: Vec<&str> = lines
        .iter()
        .filter(|l| l.category == Category::Accelerator)
        .map(|l| l.resource.as_str())
        .collect();
    touched.sort_unstable();
    touched.dedup();
    repo::remerge(&mut tx, brief_id, &touched).await?;
    if let Some(patch) = outputs {
        repo::upsert_outputs(&mut *tx, brief_id, patch).await?;
    }
    audit::record(
        &mut *tx,
        actor,
        "ledger.import",
        &format!("brief:{brief_id}"),
        json!({
            "import_id": import_id,
            "source": source,
            "lines": added,
            "outputs": outputs.map(|p| json!({
                "accepted": p.accepted, "rejected": p.rejected, "retries": p.retries,
                "failed_jobs": p.failed_jobs, "idle_hours": p.idle_hours,
            })),
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(added)
}

pub async fn summary(state: &AppState, brief_id: Uuid, currency: &str) -> Result<LedgerSummary, AppError> {
    let mut conn = state.pool.acquire().await?;
    Ok(repo::summary(&mut conn, brief_id, currency).await?)
}

/// The brief's output counts.
pub async fn outputs(state: &AppState, brief_id: Uuid) -> Result<Outputs, AppError> {
    Ok(repo::outputs(&state.pool, brief_id).await?)
}

/// A page of lines, newest first, older than `cursor` (a line's `seq`), and the next cursor.
pub async fn lines_page(
    state: &AppState,
    brief_id: Uuid,
    cursor: Option<i64>,
    limit: i64,
) -> Result<(Vec<StoredLine>, Option<i64>), AppError> {
    let mut lines = repo::newest_lines(&state.pool, brief_id, cursor, limit + 1).await?;
    let next_cursor = if lines.len() as i64 > limit {
        lines.truncate(limit as usize);
        lines.last().map(|l| l.seq)
    } else {
        None
    };
    Ok((lines, next_cursor))
}

/// The summary for callers holding only a pool (the card's derived figures).
pub async fn summary_from_pool(pool: &PgPool, brief_id: Uuid, currency: &str) -> Result<LedgerSummary, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    repo::summary(&mut conn, brief_id, currency).await
}

/// Whether the brief has any ledger line (the readiness checklist's "cost view exists").
pub async fn has_lines(pool: &PgPool, brief_id: Uuid) -> Result<bool, sqlx::Error> {
    Ok(repo::count_lines(pool, brief_id).await? > 0)
}

pub async fn count_lines(state: &AppState, brief_id: Uuid) -> Result<i64, AppError> {
    Ok(repo::count_lines(&state.pool, brief_id).await?)
}

/// Every line as CSV with the import header, in the order they were added; 404 without the brief.
pub async fn export_csv(state: &AppState, brief_id: Uuid) -> Result<Vec<u8>, AppError> {
    brief_currency(state, brief_id).await?;
    let lines = repo::all_lines(&state.pool, brief_id).await?;
    csv::write(Vec::new(), &lines).map_err(|e| AppError::Internal(anyhow::Error::new(e)))
}

/// Imports the demo ledger (and its output counts) once: nothing happens when the brief already
/// has ledger lines. Goes through the same validated, all-or-nothing store as the API.
pub async fn demo_import(state: &AppState, brief_id: Uuid, csv_text: &str) -> Result<bool, AppError> {
    if repo::count_lines(&state.pool, brief_id).await? > 0 {
        return Ok(false);
    }
    let currency = brief_currency(state, brief_id).await?;
    let lines = csv::parse(csv_text.as_bytes(), &currency)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("the demo ledger is invalid: {e:?}")))?;
    let outputs = OutputsPatch {
        accepted: Some(1_200_000),
        rejected: Some(3_100),
        retries: Some(5_400),
        failed_jobs: Some(120),
        idle_hours: Some(rust_decimal::Decimal::from(600)),
    };
    store(state, brief_id, "rentcheck demo", "demo", &lines, Some(&outputs)).await?;
    Ok(true)
}

/// Stores already-validated lines for a brief in one all-or-nothing import (tools and benchmarks).
pub async fn import_lines(
    state: &AppState,
    brief_id: Uuid,
    actor: &str,
    lines: &[LedgerLine],
) -> Result<u64, AppError> {
    store(state, brief_id, actor, "import", lines, None).await
}
