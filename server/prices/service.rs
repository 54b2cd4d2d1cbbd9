//! The price use cases, the door other domains use: import a sheet (all or nothing, audited), the
//! current prices, and the cheapest current offer for an allocation.

use chrono::Utc;
use uuid::Uuid;

use super::{
    model::{cheapest, parse_sheet, PriceRow, Quote, StoredPrice},
    repo,
};
use crate::{audit, error::AppError, state::AppState};

/// Checks a sheet without storing it (the page's preview).
pub fn check(text: &[u8]) -> Result<Vec<PriceRow>, AppError> {
    parse_sheet(text).map_err(|e| AppError::Validation(e.0))
}

/// Checks and stores a sheet with its audit row, in one transaction.
pub async fn import(
    state: &AppState,
    text: &[u8],
    filename: Option<&str>,
    actor: &str,
) -> Result<(Uuid, Vec<PriceRow>), AppError> {
    let rows = check(text)?;
    let mut tx = state.pool.begin().await?;
    let sheet = repo::insert_sheet(&mut tx, actor, filename, &rows).await?;
    audit::record(
        &mut *tx,
        actor,
        "prices.import",
        &format!("price_sheet:{sheet}"),
        serde_json::json!({ "rows": rows.len(), "filename": filename }),
    )
    .await?;
    tx.commit().await?;
    Ok((sheet, rows))
}

/// Every offer's current row (today, UTC).
pub async fn current(state: &AppState) -> Result<Vec<StoredPrice>, AppError> {
    Ok(repo::current(&state.pool, Utc::now().date_naive()).await?)
}

pub async fn get(state: &AppState, id: Uuid) -> Result<StoredPrice, AppError> {
    repo::get(&state.pool, id).await?.ok_or(AppError::NotFound("price"))
}

/// The cheapest current offer for `count` × `gpu` in `currency`, from prices already read.
pub fn cheapest_of(current: &[StoredPrice], gpu: &str, count: u32, currency: &str) -> Option<Quote> {
    cheapest(current, gpu, count, currency)
}

/// `sizing` with each option's cheapest current price in `currency`, ordered by that price when
/// `by_price` (else the engine's order: memory rented).
pub async fn priced(
    state: &AppState,
    mut sizing: crate::sizing::Sizing,
    currency: &str,
    by_price: bool,
) -> Result<crate::sizing::Sizing, AppError> {
    let current = current(state).await?;
    super::model::price_options(&mut sizing, &current, currency);
    if by_price {
        super::model::order_by_price(&mut sizing);
    }
    Ok(sizing)
}
