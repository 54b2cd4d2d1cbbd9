//! SQL for briefs. Free functions over any executor; no repository trait.

use serde_json::{Map, Value};
use sqlx::{types::Json, PgExecutor};
use uuid::Uuid;

use super::{
    model::{AllocationBoundary, Brief, BriefFields, CostUnit, DataBoundary, Targets},
    row::query_brief_row,
};
use crate::{
    db::StoredText,
    ids::BriefId,
    sizing::{ArchitectureFields, Precision, WorkloadKind},
};

pub async fn insert(db: impl PgExecutor<'_>, fields: &BriefFields) -> Result<Brief, sqlx::Error> {
    insert_with_id(db, BriefId::from(Uuid::now_v7()), fields)
        .await?
        .ok_or(sqlx::Error::RowNotFound)
}

/// Runs `$sql`, an INSERT or an UPDATE of every field, with the id as `$1` and the fields as `$2` to
/// `$33` in the table's order; it ends in `RETURNING` and reads back the brief without trial 1's
/// allocation. `None` when it wrote no row.
macro_rules! write_brief {
    ($sql:literal, $db:expr, $id:expr, $fields:expr) => {{
        let fields: &BriefFields = $fields;
        let row = query_brief_row!(
            $sql,
            r#"NULL::text AS "trial_gpu?", NULL::int4 AS "trial_gpu_count?""#,
            $id.as_uuid(),
            &fields.name,
            &fields.owner,
            fields.workload_kind.as_str(),
            &fields.model_name,
            fields.model_revision.as_deref(),
            fields.catalog_model.as_deref(),
            fields.params_b,
            fields.precision.as_str(),
            fields.context_length,
            fields.concurrency,
            fields.num_layers,
            fields.num_kv_heads,
            fields.head_dim,
            // jsonb: the macro expects a `serde_json::Value`; `as _` binds the typed `Json` as it is.
            Json(&fields.targets) as _,
            fields.data_boundary.as_str(),
            fields.needs_host_control,
            fields.only_needs_model_output,
            &fields.persist,
            fields.restore_plan.as_deref(),
            fields.fallback_plan.as_deref(),
            fields.max_cost_per_job,
            &fields.currency,
            fields.cost_unit.as_str(),
            fields.allocation_boundary.as_str(),
            fields.k8s_manifest.as_deref(),
            // jsonb: typed `Json` values bound as they are (`as _`), like `targets`.
            fields.model_config.as_ref().map(Json) as _,
            Json(&fields.architecture) as _,
            fields.expected_peak_rps,
            fields.api_price_per_million_tokens,
            fields.headroom_pct,
            fields.api_price_input_per_million,
            fields.api_price_output_per_million,
        )
        .fetch_optional($db)
        .await?;
        Ok(row.map(Brief::from))
    }};
}

/// Inserts with a chosen id (the demo's fixed one); `None` when that id is taken already.
pub async fn insert_with_id(
    db: impl PgExecutor<'_>,
    id: BriefId,
    fields: &BriefFields,
) -> Result<Option<Brief>, sqlx::Error> {
    write_brief!(
        // Trial 1's allocation (`trial_gpu`, `trial_gpu_count`) is the trials domain's: the brief's
        // own statements leave it empty and `trials::service` writes and reads it.
        r#"INSERT INTO briefs AS b (id, name, owner, workload_kind, model_name, model_revision, catalog_model, params_b,
             precision, context_length, concurrency, num_layers, num_kv_heads, head_dim, targets, data_boundary,
             needs_host_control, only_needs_model_output, persist, restore_plan, fallback_plan, max_cost_per_job,
             currency, cost_unit, allocation_boundary, k8s_manifest, model_config, architecture, expected_peak_rps,
             api_price_per_million_tokens, headroom_pct, api_price_input_per_million, api_price_output_per_million)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
             $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33)
           ON CONFLICT (id) DO NOTHING
           RETURNING"#,
        db,
        id,
        fields
    )
}

/// Replaces every field but trial 1's allocation; `None` when the brief does not exist.
pub async fn update(db: impl PgExecutor<'_>, id: BriefId, fields: &BriefFields) -> Result<Option<Brief>, sqlx::Error> {
    write_brief!(
        // Trial 1's allocation is the trials domain's (`trials::service` writes it with the brief).
        r#"UPDATE briefs AS b SET name = $2, owner = $3, workload_kind = $4, model_name = $5, model_revision = $6,
             catalog_model = $7, params_b = $8, precision = $9, context_length = $10, concurrency = $11,
             num_layers = $12, num_kv_heads = $13, head_dim = $14, targets = $15, data_boundary = $16,
             needs_host_control = $17, only_needs_model_output = $18, persist = $19, restore_plan = $20,
             fallback_plan = $21, max_cost_per_job = $22, currency = $23, cost_unit = $24,
             allocation_boundary = $25, k8s_manifest = $26, model_config = $27, architecture = $28,
             expected_peak_rps = $29, api_price_per_million_tokens = $30, headroom_pct = $31,
             api_price_input_per_million = $32, api_price_output_per_million = $33, updated_at = now()
           WHERE b.id = $1
           RETURNING"#,
        db,
        id,
        fields
    )
}

/// Whether the brief exists (one index probe).
pub async fn exists(db: impl PgExecutor<'_>, brief_id: BriefId) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM briefs WHERE id = $1) AS "exists!""#,
        brief_id.as_uuid()
    )
    .fetch_one(db)
    .await
}

/// (id, name) of each of the given briefs that exists.
pub async fn names(db: impl PgExecutor<'_>, ids: &[BriefId]) -> Result<Vec<(BriefId, String)>, sqlx::Error> {
    let ids: Vec<Uuid> = ids.iter().map(|b| b.as_uuid()).collect();
    let rows = sqlx::query!("SELECT id, name FROM briefs WHERE id = ANY($1)", &ids[..])
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(|r| (BriefId::from(r.id), r.name)).collect())
}

/// The brief, without trial 1's allocation (`trials::service::load_brief` reads the whole brief).
pub async fn get(db: impl PgExecutor<'_>, id: BriefId) -> Result<Option<Brief>, sqlx::Error> {
    let row = query_brief_row!(
        "SELECT",
        r#"NULL::text AS "trial_gpu?", NULL::int4 AS "trial_gpu_count?" FROM briefs b WHERE b.id = $1"#,
        id.as_uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(Brief::from))
}

/// Every brief's id (start-up queues every brief's review summary for remaking).
pub async fn all_ids(db: impl PgExecutor<'_>) -> Result<Vec<BriefId>, sqlx::Error> {
    let ids = sqlx::query_scalar!("SELECT id FROM briefs").fetch_all(db).await?;
    Ok(ids.into_iter().map(BriefId::from).collect())
}

/// The newest `limit` briefs whose id is not in `ids`: (id, name).
pub async fn newest_not_in(
    db: impl PgExecutor<'_>,
    ids: &[BriefId],
    limit: i64,
) -> Result<Vec<(BriefId, String)>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT id, name FROM briefs WHERE id <> ALL ($1) ORDER BY created_at DESC LIMIT $2",
        ids as _,
        limit
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id.into(), r.name)).collect())
}

/// Locks the brief's row for the rest of the transaction (changes that must not interleave, such as
/// adding a trial at the next position); `false` when the brief does not exist.
pub async fn lock(db: impl PgExecutor<'_>, id: BriefId) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query_scalar!("SELECT 1 AS one FROM briefs WHERE id = $1 FOR UPDATE", id.as_uuid())
            .fetch_optional(db)
            .await?
            .is_some(),
    )
}

/// The brief's lock without waiting: `Err` with SQLSTATE 55P03 when another transaction holds it
/// (or holds a key share: a row being written under the brief), `Ok(false)` without the brief.
pub async fn lock_nowait(db: impl PgExecutor<'_>, id: BriefId) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query_scalar!(
        "SELECT 1 AS one FROM briefs WHERE id = $1 FOR UPDATE NOWAIT",
        id.as_uuid()
    )
    .fetch_optional(db)
    .await?
    .is_some())
}
