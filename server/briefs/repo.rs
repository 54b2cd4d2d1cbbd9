//! SQL for briefs. Free functions over any executor; no repository trait.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::{Map, Value};
use sqlx::{types::Json, FromRow, PgExecutor};
use uuid::Uuid;

use super::model::{Brief, BriefFields, Targets};
use crate::sizing::ArchitectureFields;

#[derive(FromRow)]
struct BriefRow {
    id: Uuid,
    name: String,
    owner: String,
    workload_kind: String,
    model_name: String,
    model_revision: Option<String>,
    catalog_model: Option<String>,
    params_b: f64,
    precision: String,
    context_length: i64,
    concurrency: i64,
    num_layers: Option<i32>,
    num_kv_heads: Option<i32>,
    head_dim: Option<i32>,
    targets: Json<Targets>,
    data_boundary: String,
    needs_host_control: bool,
    only_needs_model_output: bool,
    persist: Vec<String>,
    restore_plan: Option<String>,
    fallback_plan: Option<String>,
    max_cost_per_job: Option<Decimal>,
    currency: String,
    cost_unit: String,
    allocation_boundary: String,
    trial_gpu: Option<String>,
    trial_gpu_count: Option<i32>,
    k8s_manifest: Option<String>,
    model_config: Option<Json<Map<String, Value>>>,
    architecture: Json<ArchitectureFields>,
    expected_peak_rps: Option<f64>,
    api_price_per_million_tokens: Option<Decimal>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

fn parse_stored<T: std::str::FromStr>(column: &str, value: &str) -> Result<T, sqlx::Error> {
    value
        .parse()
        .map_err(|_| sqlx::Error::Decode(format!("briefs.{column} holds unknown value {value:?}").into()))
}

impl TryFrom<BriefRow> for Brief {
    type Error = sqlx::Error;
    fn try_from(r: BriefRow) -> Result<Self, Self::Error> {
        Ok(Brief {
            id: r.id,
            fields: BriefFields {
                workload_kind: parse_stored("workload_kind", &r.workload_kind)?,
                precision: parse_stored("precision", &r.precision)?,
                data_boundary: parse_stored("data_boundary", &r.data_boundary)?,
                cost_unit: parse_stored("cost_unit", &r.cost_unit)?,
                allocation_boundary: parse_stored("allocation_boundary", &r.allocation_boundary)?,
                name: r.name,
                owner: r.owner,
                model_name: r.model_name,
                model_revision: r.model_revision,
                catalog_model: r.catalog_model,
                params_b: r.params_b,
                context_length: r.context_length,
                concurrency: r.concurrency,
                num_layers: r.num_layers,
                num_kv_heads: r.num_kv_heads,
                head_dim: r.head_dim,
                targets: r.targets.0,
                needs_host_control: r.needs_host_control,
                only_needs_model_output: r.only_needs_model_output,
                persist: r.persist,
                restore_plan: r.restore_plan,
                fallback_plan: r.fallback_plan,
                max_cost_per_job: r.max_cost_per_job.map(|d| d.normalize()),
                currency: r.currency,
                trial_gpu: r.trial_gpu,
                trial_gpu_count: r.trial_gpu_count,
                k8s_manifest: r.k8s_manifest,
                model_config: r.model_config.map(|j| j.0),
                architecture: r.architecture.0,
                expected_peak_rps: r.expected_peak_rps,
                api_price_per_million_tokens: r.api_price_per_million_tokens.map(|d| d.normalize()),
            },
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

const COLUMNS: &str = "id, name, owner, workload_kind, model_name, model_revision, catalog_model, params_b, \
    precision, context_length, concurrency, num_layers, num_kv_heads, head_dim, targets, data_boundary, \
    needs_host_control, only_needs_model_output, persist, restore_plan, fallback_plan, max_cost_per_job, \
    currency, cost_unit, allocation_boundary, trial_gpu, trial_gpu_count, k8s_manifest, model_config, architecture, \
    expected_peak_rps, api_price_per_million_tokens, created_at, updated_at";

/// Binds the 31 writable columns in `COLUMNS` order (after `id`) as $2..$32.
macro_rules! bind_fields {
    ($query:expr, $f:expr) => {
        $query
            .bind(&$f.name)
            .bind(&$f.owner)
            .bind($f.workload_kind.as_str())
            .bind(&$f.model_name)
            .bind(&$f.model_revision)
            .bind(&$f.catalog_model)
            .bind($f.params_b)
            .bind($f.precision.as_str())
            .bind($f.context_length)
            .bind($f.concurrency)
            .bind($f.num_layers)
            .bind($f.num_kv_heads)
            .bind($f.head_dim)
            .bind(Json(&$f.targets))
            .bind($f.data_boundary.as_str())
            .bind($f.needs_host_control)
            .bind($f.only_needs_model_output)
            .bind(&$f.persist)
            .bind(&$f.restore_plan)
            .bind(&$f.fallback_plan)
            .bind($f.max_cost_per_job)
            .bind(&$f.currency)
            .bind($f.cost_unit.as_str())
            .bind($f.allocation_boundary.as_str())
            .bind(&$f.trial_gpu)
            .bind($f.trial_gpu_count)
            .bind(&$f.k8s_manifest)
            .bind($f.model_config.as_ref().map(Json))
            .bind(Json(&$f.architecture))
            .bind($f.expected_peak_rps)
            .bind($f.api_price_per_million_tokens)
    };
}

pub async fn insert(db: impl PgExecutor<'_>, fields: &BriefFields) -> Result<Brief, sqlx::Error> {
    insert_with_id(db, Uuid::now_v7(), fields)
        .await?
        .ok_or(sqlx::Error::RowNotFound)
}

/// Inserts with a chosen id (the demo's fixed one); `None` when that id is taken already.
pub async fn insert_with_id(
    db: impl PgExecutor<'_>,
    id: Uuid,
    fields: &BriefFields,
) -> Result<Option<Brief>, sqlx::Error> {
    let sql = format!(
        "INSERT INTO briefs (id, name, owner, workload_kind, model_name, model_revision, catalog_model, params_b, \
         precision, context_length, concurrency, num_layers, num_kv_heads, head_dim, targets, data_boundary, \
         needs_host_control, only_needs_model_output, persist, restore_plan, fallback_plan, max_cost_per_job, \
         currency, cost_unit, allocation_boundary, trial_gpu, trial_gpu_count, k8s_manifest, model_config, \
         architecture, expected_peak_rps, api_price_per_million_tokens) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, \
         $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32) ON CONFLICT (id) DO NOTHING RETURNING {COLUMNS}"
    );
    let row: Option<BriefRow> = bind_fields!(sqlx::query_as(&sql).bind(id), fields)
        .fetch_optional(db)
        .await?;
    row.map(Brief::try_from).transpose()
}

/// Replaces every field; `None` when the brief does not exist.
pub async fn update(db: impl PgExecutor<'_>, id: Uuid, fields: &BriefFields) -> Result<Option<Brief>, sqlx::Error> {
    let sql = format!(
        "UPDATE briefs SET name = $2, owner = $3, workload_kind = $4, model_name = $5, model_revision = $6, \
         catalog_model = $7, params_b = $8, precision = $9, context_length = $10, concurrency = $11, \
         num_layers = $12, num_kv_heads = $13, head_dim = $14, targets = $15, data_boundary = $16, \
         needs_host_control = $17, only_needs_model_output = $18, persist = $19, restore_plan = $20, \
         fallback_plan = $21, max_cost_per_job = $22, currency = $23, cost_unit = $24, \
         allocation_boundary = $25, trial_gpu = $26, trial_gpu_count = $27, k8s_manifest = $28, \
         model_config = $29, architecture = $30, expected_peak_rps = $31, api_price_per_million_tokens = $32, \
         updated_at = now() WHERE id = $1 RETURNING {COLUMNS}"
    );
    let row: Option<BriefRow> = bind_fields!(sqlx::query_as(&sql).bind(id), fields)
        .fetch_optional(db)
        .await?;
    row.map(Brief::try_from).transpose()
}

pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<Brief>, sqlx::Error> {
    let row: Option<BriefRow> = sqlx::query_as(&format!("SELECT {COLUMNS} FROM briefs WHERE id = $1"))
        .bind(id)
        .fetch_optional(db)
        .await?;
    row.map(Brief::try_from).transpose()
}

/// Newest first.
pub async fn list(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<Brief>, sqlx::Error> {
    let rows: Vec<BriefRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM briefs ORDER BY created_at DESC, id DESC LIMIT $1"
    ))
    .bind(limit)
    .fetch_all(db)
    .await?;
    rows.into_iter().map(Brief::try_from).collect()
}
