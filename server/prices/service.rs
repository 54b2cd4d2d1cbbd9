//! The price use cases, the door other domains use: import a sheet or a SkyPilot catalogue (all or
//! nothing, audited), the current prices, and the cheapest current offer for an allocation.

use chrono::{NaiveDate, Utc};
use uuid::Uuid;

use super::{
    model::{cheapest, parse_sheet, PriceRow, Quote, StoredPrice},
    repo,
    skypilot::{self, CatalogueImport},
};
use crate::{audit, error::AppError, ids::PriceId, state::AppState, validation::FieldError};

/// What a person or program imports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// rentcheck's own price sheet (`provider,gpu,gpu_count,…`).
    Sheet,
    /// A SkyPilot catalogue `vms.csv` of one provider.
    Skypilot { provider: String, valid_from: NaiveDate },
}

impl Format {
    /// `format=` (absent or `sheet`, or `skypilot`), with the catalogue's `provider=` and optional
    /// `valid_from=` (default: today, UTC).
    pub fn from_params(
        format: Option<&str>,
        provider: Option<&str>,
        valid_from: Option<&str>,
    ) -> Result<Self, AppError> {
        match format.map(str::trim).unwrap_or("") {
            "" | "sheet" | "csv" => Ok(Format::Sheet),
            "skypilot" => {
                let valid_from = match valid_from.map(str::trim).filter(|v| !v.is_empty()) {
                    None => Utc::now().date_naive(),
                    Some(v) => NaiveDate::parse_from_str(v, "%Y-%m-%d").map_err(|_| {
                        AppError::Validation(vec![FieldError::new("valid_from", "must be a date such as 2026-12-01")])
                    })?,
                };
                Ok(Format::Skypilot {
                    provider: provider.unwrap_or("").trim().to_owned(),
                    valid_from,
                })
            }
            other => Err(AppError::Validation(vec![FieldError::new(
                "format",
                format!(
                    "{other:?} is not a price format; use sheet (rentcheck's CSV) or skypilot (a SkyPilot vms.csv)"
                ),
            )])),
        }
    }
}

/// Checks a sheet without storing it (the page's preview).
pub fn check(text: &[u8]) -> Result<Vec<PriceRow>, AppError> {
    parse_sheet(text).map_err(|e| AppError::Validation(e.0))
}

/// Checks a file of either format without storing it: the rows it would add, and (for a catalogue)
/// what it leaves out.
pub fn check_as(text: &[u8], format: &Format) -> Result<CatalogueImport, AppError> {
    match format {
        Format::Sheet => check(text).map(|rows| CatalogueImport {
            rows_read: rows.len() as u64,
            rows,
            skipped: Vec::new(),
            corrected: Vec::new(),
            instance_gpus: Vec::new(),
        }),
        Format::Skypilot { provider, valid_from } => {
            skypilot::parse_catalogue(text, provider, *valid_from).map_err(|e| AppError::Validation(e.0))
        }
    }
}

/// [`check_as`] on a blocking thread: a 32 MiB catalogue takes seconds of CPU, which the request
/// runtime's threads must not spend while other requests wait.
pub async fn check_off_runtime(text: &[u8], format: &Format) -> Result<CatalogueImport, AppError> {
    let (text, format) = (text.to_vec(), format.clone());
    tokio::task::spawn_blocking(move || check_as(&text, &format))
        .await
        .map_err(|e| AppError::Internal(anyhow::Error::new(e)))?
}

/// Checks and stores a sheet with its audit row, in one transaction.
pub async fn import(
    state: &AppState,
    text: &[u8],
    filename: Option<&str>,
    actor: &str,
) -> Result<(Uuid, Vec<PriceRow>), AppError> {
    let (sheet, checked) = import_as(state, text, &Format::Sheet, filename, actor).await?;
    Ok((sheet, checked.rows))
}

/// Checks and stores a sheet or a catalogue with its audit row, in one transaction; the rows go
/// in through the same insert as a sheet's.
pub async fn import_as(
    state: &AppState,
    text: &[u8],
    format: &Format,
    filename: Option<&str>,
    actor: &str,
) -> Result<(Uuid, CatalogueImport), AppError> {
    let checked = check_off_runtime(text, format).await?;
    let mut tx = state.pool.begin().await?;
    let sheet = repo::insert_sheet(&mut tx, actor, filename, &checked.rows).await?;
    repo::insert_catalogue_instances(&mut tx, sheet, &checked.instance_gpus).await?;
    let detail = match format {
        Format::Sheet => serde_json::json!({ "rows": checked.rows.len(), "filename": filename }),
        Format::Skypilot { provider, valid_from } => serde_json::json!({
            "rows": checked.rows.len(),
            "filename": filename,
            "format": "skypilot",
            "provider": provider,
            "valid_from": valid_from,
            "catalogue_rows": checked.rows_read,
            "skipped": checked.skipped.iter().map(|s| s.rows).sum::<u64>(),
        }),
    };
    audit::record(
        &mut *tx,
        actor,
        "prices.import",
        &format!("price_sheet:{sheet}"),
        detail,
    )
    .await?;
    tx.commit().await?;
    Ok((sheet, checked))
}

/// Every offer's current row (today, UTC).
pub async fn current(state: &AppState) -> Result<Vec<StoredPrice>, AppError> {
    Ok(repo::current(&state.pool, Utc::now().date_naive()).await?)
}

/// The current prices as the caller's connection or transaction sees them.
pub async fn current_in(db: impl sqlx::PgExecutor<'_>) -> Result<Vec<StoredPrice>, AppError> {
    Ok(repo::current(db, Utc::now().date_naive()).await?)
}

pub async fn get(state: &AppState, id: PriceId) -> Result<StoredPrice, AppError> {
    repo::get(&state.pool, id).await?.ok_or(AppError::NotFound("price"))
}

/// The cheapest current offer for `count` × `gpu` in `currency`, from prices already read.
pub fn cheapest_of(current: &[StoredPrice], gpu: &str, count: u32, currency: &str) -> Option<Quote> {
    cheapest(current, gpu, count, currency)
}

/// `sizing` with each option's cheapest current price in `currency` (for a `workload` served in
/// real time, spot only where nothing else prices it), ordered by that price when `by_price` (else
/// the engine's order: memory rented).
pub async fn priced(
    state: &AppState,
    mut sizing: crate::sizing::Sizing,
    currency: &str,
    workload: crate::sizing::WorkloadKind,
    by_price: bool,
) -> Result<crate::sizing::Sizing, AppError> {
    let current = current(state).await?;
    super::model::price_options(&mut sizing, &current, currency, workload);
    if by_price {
        super::model::order_by_price(&mut sizing);
    }
    Ok(sizing)
}

/// Instance type → GPUs per instance, from every imported SkyPilot catalogue row (the offer
/// catalogue a bill's instance types are read against). An instance type that is only a GPU's
/// name (Paperspace's `H100`, one GPU) is left out: a bill's description names the GPU of any
/// provider's machine ("ND96isr H100 v5", "Nvidia H100 80GB GPU"), and would take its count.
pub async fn catalogue_instance_gpus(state: &AppState) -> Result<std::collections::HashMap<String, i32>, AppError> {
    let mut map = std::collections::HashMap::new();
    for (instance_type, gpus) in repo::catalogue_instance_gpus(&state.pool).await? {
        if skypilot::gpu_for(&instance_type, "").is_some() {
            continue;
        }
        map.entry(instance_type).or_insert(gpus);
    }
    Ok(map)
}

/// SkyPilot's accelerator name for a GPU of the catalogue (`RTX A6000` → `A6000`), from the table
/// the catalogue import reads; `None` for a GPU it does not name.
pub fn skypilot_accelerator(gpu: &str) -> Option<&'static str> {
    skypilot::accelerator_for(gpu)
}
