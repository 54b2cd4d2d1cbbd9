//! SQL for price sheets. Free functions over any executor; no repository trait.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::model::{PriceRow, StoredPrice};
use crate::ids::PriceId;

struct Row {
    id: Uuid,
    sheet_id: Uuid,
    line: i32,
    provider: String,
    gpu: String,
    gpu_count: i32,
    billing: String,
    rate_per_gpu_hour: Decimal,
    currency: String,
    region: String,
    valid_from: NaiveDate,
    source: String,
}

impl From<Row> for StoredPrice {
    fn from(r: Row) -> Self {
        StoredPrice {
            id: r.id,
            sheet_id: r.sheet_id,
            row: PriceRow {
                line: u32::try_from(r.line).unwrap_or(0),
                provider: r.provider,
                gpu: r.gpu,
                gpu_count: r.gpu_count,
                billing: r.billing,
                rate_per_gpu_hour: r.rate_per_gpu_hour.normalize(),
                currency: r.currency,
                region: r.region,
                valid_from: r.valid_from,
                source: r.source,
            },
        }
    }
}

/// Stores a sheet and its rows in the caller's transaction (all or nothing); returns the sheet id.
pub async fn insert_sheet(
    conn: &mut PgConnection,
    imported_by: &str,
    filename: Option<&str>,
    rows: &[PriceRow],
) -> Result<Uuid, sqlx::Error> {
    let sheet = Uuid::now_v7();
    sqlx::query!(
        "INSERT INTO price_sheets (id, imported_by, filename, row_count) VALUES ($1, $2, $3, $4)",
        sheet,
        imported_by,
        filename,
        rows.len() as i32,
    )
    .execute(&mut *conn)
    .await?;
    let ids: Vec<Uuid> = rows.iter().map(|_| Uuid::now_v7()).collect();
    let lines: Vec<i32> = rows.iter().map(|r| r.line as i32).collect();
    let providers: Vec<String> = rows.iter().map(|r| r.provider.clone()).collect();
    let gpus: Vec<String> = rows.iter().map(|r| r.gpu.clone()).collect();
    let counts: Vec<i32> = rows.iter().map(|r| r.gpu_count).collect();
    let billings: Vec<String> = rows.iter().map(|r| r.billing.clone()).collect();
    let rates: Vec<Decimal> = rows.iter().map(|r| r.rate_per_gpu_hour).collect();
    let currencies: Vec<String> = rows.iter().map(|r| r.currency.clone()).collect();
    let regions: Vec<String> = rows.iter().map(|r| r.region.clone()).collect();
    let valid: Vec<NaiveDate> = rows.iter().map(|r| r.valid_from).collect();
    let sources: Vec<String> = rows.iter().map(|r| r.source.clone()).collect();
    sqlx::query!(
        "INSERT INTO prices (id, sheet_id, line, provider, gpu, gpu_count, billing, rate_per_gpu_hour, currency, \
         region, valid_from, source) \
         SELECT t.id, $1, t.line, t.provider, t.gpu, t.gpu_count, t.billing, t.rate, t.currency, t.region, \
         t.valid_from, t.source \
         FROM UNNEST($2::uuid[], $3::int4[], $4::text[], $5::text[], $6::int4[], $7::text[], $8::numeric[], \
         $9::text[], $10::text[], $11::date[], $12::text[]) \
         AS t(id, line, provider, gpu, gpu_count, billing, rate, currency, region, valid_from, source)",
        sheet,
        &ids,
        &lines,
        &providers,
        &gpus,
        &counts,
        &billings,
        &rates,
        &currencies,
        &regions,
        &valid,
        &sources,
    )
    .execute(&mut *conn)
    .await?;
    Ok(sheet)
}

/// The current row of every offer: per (provider, gpu, gpu_count, billing, region, currency), the
/// newest `valid_from` on or before `today`, ties to the later import. The currency is part of the
/// key: a row in euros never hides the same offer's row in dollars. Provider and region are one
/// offer in any case (a sheet's "lambda" replaces an older "Lambda", as trials match them).
pub async fn current(db: impl PgExecutor<'_>, today: NaiveDate) -> Result<Vec<StoredPrice>, sqlx::Error> {
    let rows = sqlx::query_as!(
        Row,
        "SELECT DISTINCT ON (lower(provider), gpu, gpu_count, billing, lower(region), currency) id, sheet_id, line, \
         provider, gpu, gpu_count, billing, rate_per_gpu_hour, currency, region, valid_from, source \
         FROM prices WHERE valid_from <= $1 \
         ORDER BY lower(provider), gpu, gpu_count, billing, lower(region), currency, valid_from DESC, id DESC",
        today,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(StoredPrice::from).collect())
}

/// Every row ever imported, newest sheet first (the history).
pub async fn all(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<StoredPrice>, sqlx::Error> {
    let rows = sqlx::query_as!(
        Row,
        "SELECT id, sheet_id, line, provider, gpu, gpu_count, billing, rate_per_gpu_hour, currency, region, \
         valid_from, source FROM prices ORDER BY sheet_id DESC, line LIMIT $1",
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(StoredPrice::from).collect())
}

pub async fn get(db: impl PgExecutor<'_>, id: PriceId) -> Result<Option<StoredPrice>, sqlx::Error> {
    let row = sqlx::query_as!(
        Row,
        "SELECT id, sheet_id, line, provider, gpu, gpu_count, billing, rate_per_gpu_hour, currency, region, \
         valid_from, source FROM prices WHERE id = $1",
        id.as_uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(StoredPrice::from))
}

/// A sheet as the page lists it.
pub struct Sheet {
    pub id: Uuid,
    pub imported_by: String,
    pub imported_at: chrono::DateTime<chrono::Utc>,
    pub filename: Option<String>,
    pub row_count: i32,
}

pub async fn sheets(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<Sheet>, sqlx::Error> {
    sqlx::query_as!(
        Sheet,
        "SELECT id, imported_by, imported_at, filename, row_count FROM price_sheets ORDER BY imported_at DESC, id DESC \
         LIMIT $1",
        limit,
    )
    .fetch_all(db)
    .await
}

/// The GPUs per instance of every instance type an imported SkyPilot catalogue priced (the cheapest
/// of an offer and the dearer ones alike), for reading GPU counts off a bill.
pub async fn catalogue_instance_gpus(db: impl PgExecutor<'_>) -> Result<Vec<(String, i32)>, sqlx::Error> {
    let rows = sqlx::query!("SELECT DISTINCT instance_type, gpu_count FROM price_catalogue_instances ORDER BY 1, 2",)
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(|r| (r.instance_type, r.gpu_count)).collect())
}

/// Stores a catalogue's instance types with their GPUs per instance, in the caller's transaction.
pub async fn insert_catalogue_instances(
    conn: &mut PgConnection,
    sheet: Uuid,
    instances: &[(String, i32)],
) -> Result<(), sqlx::Error> {
    if instances.is_empty() {
        return Ok(());
    }
    let (types, gpus): (Vec<String>, Vec<i32>) = instances.iter().cloned().unzip();
    sqlx::query!(
        "INSERT INTO price_catalogue_instances (sheet_id, instance_type, gpu_count)
         SELECT $1, t, g FROM UNNEST($2::text[], $3::int[]) AS u (t, g)",
        sheet,
        &types,
        &gpus,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
