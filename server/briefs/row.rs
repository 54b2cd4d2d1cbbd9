//! A brief as a statement reads it, and the brief it makes: shared by the briefs' own SQL and the
//! overview's list query, so every reader decodes the stored values the same way.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::{Map, Value};
use sqlx::types::Json;

use super::model::{AllocationBoundary, Brief, BriefFields, CostUnit, DataBoundary, Targets};
use crate::{
    db::StoredText,
    ids::BriefId,
    sizing::{ArchitectureFields, Precision, WorkloadKind},
};

/// One brief row with its first trial's allocation (`trial_gpu`, `trial_gpu_count`).
pub struct BriefRow {
    pub id: BriefId,
    pub name: String,
    pub owner: String,
    pub workload_kind: StoredText<WorkloadKind>,
    pub model_name: String,
    pub model_revision: Option<String>,
    pub catalog_model: Option<String>,
    pub params_b: f64,
    pub precision: StoredText<Precision>,
    pub context_length: i64,
    pub concurrency: i64,
    pub num_layers: Option<i32>,
    pub num_kv_heads: Option<i32>,
    pub head_dim: Option<i32>,
    pub targets: Json<Targets>,
    pub data_boundary: StoredText<DataBoundary>,
    pub needs_host_control: bool,
    pub only_needs_model_output: bool,
    pub persist: Vec<String>,
    pub restore_plan: Option<String>,
    pub fallback_plan: Option<String>,
    pub max_cost_per_job: Option<Decimal>,
    pub currency: String,
    pub cost_unit: StoredText<CostUnit>,
    pub allocation_boundary: StoredText<AllocationBoundary>,
    pub trial_gpu: Option<String>,
    pub trial_gpu_count: Option<i32>,
    pub k8s_manifest: Option<String>,
    pub model_config: Option<Json<Map<String, Value>>>,
    pub architecture: Json<ArchitectureFields>,
    pub expected_peak_rps: Option<f64>,
    pub api_price_per_million_tokens: Option<Decimal>,
    pub headroom_pct: Option<f64>,
    pub api_price_input_per_million: Option<Decimal>,
    pub api_price_output_per_million: Option<Decimal>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// `sqlx::query_as!` into a [`BriefRow`]: `$head`, then every column of the brief but trial 1's
/// allocation (read through the alias `b`), then `$tail`, which names `trial_gpu` and
/// `trial_gpu_count` and goes on with the statement. Every statement that reads a whole brief
/// writes its column list here once; sqlx still checks each whole statement (it takes literals
/// joined with `+`). A caller imports the types the list names (`StoredText`, `WorkloadKind`, …):
/// sqlx resolves them where the statement is, and PostgreSQL cuts a column name (type included)
/// at 63 bytes, too short for full paths.
macro_rules! query_brief_row {
    ($head:literal, $tail:literal $(, $($args:tt)*)?) => {
        sqlx::query_as!(
            $crate::briefs::row::BriefRow,
            $head
                + r#" b.id AS "id!", b.name AS "name!", b.owner AS "owner!",
             b.workload_kind AS "workload_kind!: StoredText<WorkloadKind>",
             b.model_name AS "model_name!", b.model_revision, b.catalog_model, b.params_b AS "params_b!",
             b.precision AS "precision!: StoredText<Precision>",
             b.context_length AS "context_length!", b.concurrency AS "concurrency!",
             b.num_layers, b.num_kv_heads, b.head_dim, b.targets AS "targets!: Json<Targets>",
             b.data_boundary AS "data_boundary!: StoredText<DataBoundary>",
             b.needs_host_control AS "needs_host_control!",
             b.only_needs_model_output AS "only_needs_model_output!", b.persist AS "persist!", b.restore_plan,
             b.fallback_plan, b.max_cost_per_job, b.currency AS "currency!",
             b.cost_unit AS "cost_unit!: StoredText<CostUnit>",
             b.allocation_boundary AS "allocation_boundary!: StoredText<AllocationBoundary>",
             b.model_config AS "model_config: Json<Map<String, Value>>",
             b.architecture AS "architecture!: Json<ArchitectureFields>", b.expected_peak_rps,
             b.api_price_per_million_tokens, b.headroom_pct, b.api_price_input_per_million,
             b.api_price_output_per_million, b.k8s_manifest, b.created_at AS "created_at!",
             b.updated_at AS "updated_at!", "#
                + $tail
            $(, $($args)*)?
        )
    };
}
pub(crate) use query_brief_row;

impl From<BriefRow> for Brief {
    fn from(r: BriefRow) -> Self {
        Brief {
            id: r.id,
            fields: BriefFields {
                workload_kind: r.workload_kind.0,
                precision: r.precision.0,
                data_boundary: r.data_boundary.0,
                cost_unit: r.cost_unit.0,
                allocation_boundary: r.allocation_boundary.0,
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
                headroom_pct: r.headroom_pct,
                api_price_input_per_million: r.api_price_input_per_million.map(|d| d.normalize()),
                api_price_output_per_million: r.api_price_output_per_million.map(|d| d.normalize()),
            },
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}
