//! SQL for briefs. Free functions over any executor; no repository trait.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::{Map, Value};
use sqlx::{types::Json, PgExecutor};
use uuid::Uuid;

use super::model::{Brief, BriefFields, Targets};
use crate::{db::parse_stored, sizing::ArchitectureFields};

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
    headroom_pct: Option<f64>,
    api_price_input_per_million: Option<Decimal>,
    api_price_output_per_million: Option<Decimal>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<BriefRow> for Brief {
    type Error = sqlx::Error;
    fn try_from(r: BriefRow) -> Result<Self, Self::Error> {
        Ok(Brief {
            id: r.id,
            fields: BriefFields {
                workload_kind: parse_stored("briefs.workload_kind", &r.workload_kind)?,
                precision: parse_stored("briefs.precision", &r.precision)?,
                data_boundary: parse_stored("briefs.data_boundary", &r.data_boundary)?,
                cost_unit: parse_stored("briefs.cost_unit", &r.cost_unit)?,
                allocation_boundary: parse_stored("briefs.allocation_boundary", &r.allocation_boundary)?,
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
        })
    }
}

pub async fn insert(db: impl PgExecutor<'_>, fields: &BriefFields) -> Result<Brief, sqlx::Error> {
    insert_with_id(db, Uuid::now_v7(), fields)
        .await?
        .ok_or(sqlx::Error::RowNotFound)
}

/// Inserts with a chosen id (the demo's fixed one); `None` when that id is taken already.
// Long, and reads better whole: one INSERT binding every column, in the table's order.
pub async fn insert_with_id(
    db: impl PgExecutor<'_>,
    id: Uuid,
    fields: &BriefFields,
) -> Result<Option<Brief>, sqlx::Error> {
    let row = sqlx::query_as!(
        BriefRow,
        // The brief and its first trial (which `trial_gpu` / `trial_gpu_count` describe) in one statement.
        r#"WITH b AS (
             INSERT INTO briefs (id, name, owner, workload_kind, model_name, model_revision, catalog_model, params_b,
               precision, context_length, concurrency, num_layers, num_kv_heads, head_dim, targets, data_boundary,
               needs_host_control, only_needs_model_output, persist, restore_plan, fallback_plan, max_cost_per_job,
               currency, cost_unit, allocation_boundary, k8s_manifest, model_config, architecture, expected_peak_rps,
               api_price_per_million_tokens, headroom_pct, api_price_input_per_million, api_price_output_per_million)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
               $21, $22, $23, $24, $25, $28, $30, $31, $32, $33, $34, $35, $36)
             ON CONFLICT (id) DO NOTHING
             RETURNING id, name, owner, workload_kind, model_name, model_revision, catalog_model, params_b,
             precision, context_length, concurrency, num_layers, num_kv_heads, head_dim, targets, data_boundary,
             needs_host_control, only_needs_model_output, persist, restore_plan, fallback_plan, max_cost_per_job,
             currency, cost_unit, allocation_boundary, k8s_manifest, model_config, architecture, expected_peak_rps,
               api_price_per_million_tokens, headroom_pct, api_price_input_per_million,
               api_price_output_per_million, created_at, updated_at
           ), t AS (
             INSERT INTO trials (id, brief_id, position, name, gpu, gpu_count, currency, allocation_boundary)
             SELECT $29, b.id, 1, 'Trial 1', $26, $27, b.currency, b.allocation_boundary FROM b
             RETURNING brief_id, gpu, gpu_count
           )
           SELECT b.id AS "id!", b.name AS "name!", b.owner AS "owner!", b.workload_kind AS "workload_kind!",
             b.model_name AS "model_name!", b.model_revision, b.catalog_model, b.params_b AS "params_b!",
             b.precision AS "precision!", b.context_length AS "context_length!", b.concurrency AS "concurrency!",
             b.num_layers, b.num_kv_heads, b.head_dim, b.targets AS "targets!: Json<Targets>",
             b.data_boundary AS "data_boundary!", b.needs_host_control AS "needs_host_control!",
             b.only_needs_model_output AS "only_needs_model_output!", b.persist AS "persist!", b.restore_plan,
             b.fallback_plan, b.max_cost_per_job, b.currency AS "currency!", b.cost_unit AS "cost_unit!",
             b.allocation_boundary AS "allocation_boundary!", b.model_config AS "model_config: Json<Map<String, Value>>",
             b.architecture AS "architecture!: Json<ArchitectureFields>", b.expected_peak_rps,
             b.api_price_per_million_tokens, b.headroom_pct, b.api_price_input_per_million,
             b.api_price_output_per_million, t.gpu AS trial_gpu, t.gpu_count AS trial_gpu_count,
             b.k8s_manifest, b.created_at AS "created_at!", b.updated_at AS "updated_at!"
           FROM b JOIN t ON t.brief_id = b.id"#,
        id,
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
        fields.trial_gpu.as_deref(),
        fields.trial_gpu_count,
        fields.k8s_manifest.as_deref(),
        Uuid::now_v7(),
        // jsonb: typed `Json` values bound as they are (`as _`), like `targets`.
        fields.model_config.as_ref().map(Json) as _,
        Json(&fields.architecture) as _,
        fields.expected_peak_rps,
        fields.api_price_per_million_tokens,
        fields.headroom_pct,
        fields.api_price_input_per_million,
        fields.api_price_output_per_million,
    )
    .fetch_optional(db)
    .await?;
    row.map(Brief::try_from).transpose()
}

/// Replaces every field; `None` when the brief does not exist.
pub async fn update(db: impl PgExecutor<'_>, id: Uuid, fields: &BriefFields) -> Result<Option<Brief>, sqlx::Error> {
    let row = sqlx::query_as!(
        BriefRow,
        // The brief and its first trial's allocation (`trial_gpu` / `trial_gpu_count`) in one statement.
        r#"WITH b AS (
             UPDATE briefs SET name = $2, owner = $3, workload_kind = $4, model_name = $5, model_revision = $6,
               catalog_model = $7, params_b = $8, precision = $9, context_length = $10, concurrency = $11,
               num_layers = $12, num_kv_heads = $13, head_dim = $14, targets = $15, data_boundary = $16,
               needs_host_control = $17, only_needs_model_output = $18, persist = $19, restore_plan = $20,
               fallback_plan = $21, max_cost_per_job = $22, currency = $23, cost_unit = $24,
               allocation_boundary = $25, k8s_manifest = $28, model_config = $29, architecture = $30,
               expected_peak_rps = $31, api_price_per_million_tokens = $32, headroom_pct = $33,
               api_price_input_per_million = $34, api_price_output_per_million = $35, updated_at = now()
             WHERE id = $1
             RETURNING id, name, owner, workload_kind, model_name, model_revision, catalog_model, params_b,
             precision, context_length, concurrency, num_layers, num_kv_heads, head_dim, targets, data_boundary,
             needs_host_control, only_needs_model_output, persist, restore_plan, fallback_plan, max_cost_per_job,
             currency, cost_unit, allocation_boundary, k8s_manifest, model_config, architecture, expected_peak_rps,
               api_price_per_million_tokens, headroom_pct, api_price_input_per_million,
               api_price_output_per_million, created_at, updated_at
           ), t AS (
             UPDATE trials SET gpu = $26, gpu_count = $27, updated_at = now()
             FROM b WHERE trials.brief_id = b.id AND trials.position = 1
             RETURNING trials.brief_id, trials.gpu, trials.gpu_count
           )
           SELECT b.id AS "id!", b.name AS "name!", b.owner AS "owner!", b.workload_kind AS "workload_kind!",
             b.model_name AS "model_name!", b.model_revision, b.catalog_model, b.params_b AS "params_b!",
             b.precision AS "precision!", b.context_length AS "context_length!", b.concurrency AS "concurrency!",
             b.num_layers, b.num_kv_heads, b.head_dim, b.targets AS "targets!: Json<Targets>",
             b.data_boundary AS "data_boundary!", b.needs_host_control AS "needs_host_control!",
             b.only_needs_model_output AS "only_needs_model_output!", b.persist AS "persist!", b.restore_plan,
             b.fallback_plan, b.max_cost_per_job, b.currency AS "currency!", b.cost_unit AS "cost_unit!",
             b.allocation_boundary AS "allocation_boundary!", b.model_config AS "model_config: Json<Map<String, Value>>",
             b.architecture AS "architecture!: Json<ArchitectureFields>", b.expected_peak_rps,
             b.api_price_per_million_tokens, b.headroom_pct, b.api_price_input_per_million,
             b.api_price_output_per_million, t.gpu AS trial_gpu, t.gpu_count AS trial_gpu_count,
             b.k8s_manifest, b.created_at AS "created_at!", b.updated_at AS "updated_at!"
           FROM b LEFT JOIN t ON t.brief_id = b.id"#,
        id,
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
        fields.trial_gpu.as_deref(),
        fields.trial_gpu_count,
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
    .fetch_optional(db)
    .await?;
    row.map(Brief::try_from).transpose()
}

/// Whether the brief exists (one index probe; `get` also reads its trials).
pub async fn exists(db: impl PgExecutor<'_>, brief_id: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM briefs WHERE id = $1) AS "exists!""#,
        brief_id
    )
    .fetch_one(db)
    .await
}

pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<Brief>, sqlx::Error> {
    let row = sqlx::query_as!(
        BriefRow,
        r#"SELECT b.id AS "id!", b.name AS "name!", b.owner AS "owner!", b.workload_kind AS "workload_kind!",
             b.model_name AS "model_name!", b.model_revision, b.catalog_model, b.params_b AS "params_b!",
             b.precision AS "precision!", b.context_length AS "context_length!", b.concurrency AS "concurrency!",
             b.num_layers, b.num_kv_heads, b.head_dim, b.targets AS "targets!: Json<Targets>",
             b.data_boundary AS "data_boundary!", b.needs_host_control AS "needs_host_control!",
             b.only_needs_model_output AS "only_needs_model_output!", b.persist AS "persist!", b.restore_plan,
             b.fallback_plan, b.max_cost_per_job, b.currency AS "currency!", b.cost_unit AS "cost_unit!",
             b.allocation_boundary AS "allocation_boundary!", b.model_config AS "model_config: Json<Map<String, Value>>",
             b.architecture AS "architecture!: Json<ArchitectureFields>", b.expected_peak_rps,
             b.api_price_per_million_tokens, b.headroom_pct, b.api_price_input_per_million,
             b.api_price_output_per_million, t.gpu AS "trial_gpu?", t.gpu_count AS "trial_gpu_count?",
             b.k8s_manifest, b.created_at AS "created_at!", b.updated_at AS "updated_at!"
           FROM briefs b LEFT JOIN trials t ON t.brief_id = b.id AND t.position = 1 WHERE b.id = $1"#,
        id,
    )
    .fetch_optional(db)
    .await?;
    row.map(Brief::try_from).transpose()
}

/// Newest first: the unfiltered first page of [`list_filtered`].
pub async fn list(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<Brief>, sqlx::Error> {
    list_filtered(db, &BriefFilter::default(), None, limit).await
}

/// Locks the brief's row for the rest of the transaction (changes that must not interleave, such as
/// adding a trial at the next position); `false` when the brief does not exist.
pub async fn lock(db: impl PgExecutor<'_>, id: Uuid) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query_scalar!("SELECT 1 AS one FROM briefs WHERE id = $1 FOR UPDATE", id)
            .fetch_optional(db)
            .await?
            .is_some(),
    )
}

/// What lists (the dashboard, `GET /api/v1/briefs`) narrow briefs by in SQL.
///
/// `states` and `failing` read each brief's review summary (the `brief_signals` row the signals
/// watcher keeps). A brief whose summary is not current (changes still queued, or never made)
/// stays a candidate whatever its stored summary says: the caller remakes its summary and checks
/// again, so a list never answers from a summary older than the last committed change.
#[derive(Debug, Clone, Default)]
pub struct BriefFilter {
    /// Words in the name, model name or catalogue model (case-insensitive, as typed).
    pub search: Option<String>,
    /// Only briefs with (true) or without (false) any evidence.
    pub has_evidence: Option<bool>,
    /// Only briefs owned by this account.
    pub owner: Option<Uuid>,
    /// Only briefs shared with this team.
    pub team: Option<Uuid>,
    /// Only briefs whose summary state is one of these (`awaiting-evidence`, `needs-approval`,
    /// `stale`, `approved`, `rejected`).
    pub states: Option<Vec<String>>,
    /// Only briefs whose summary has (true) or has not (false) a failing required criterion.
    pub failing: Option<bool>,
    /// Only this brief (a token limited to one brief).
    pub only: Option<Uuid>,
}

impl BriefFilter {
    /// Whether the filter reads review summaries (and so its candidates must be checked again).
    pub fn reads_summaries(&self) -> bool {
        self.states.is_some() || self.failing.is_some()
    }
}

/// The orders a list of briefs can take besides newest first (the dashboard's sortable columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BriefOrder {
    /// Name, A to Z.
    Name,
    /// Owner's email, A to Z.
    Owner,
    /// The kept summary's decision, A to Z.
    Decision,
    /// The kept summary's cost per completed job, cheapest first, unknown last.
    Cost,
    /// The kept summary's approval state, A to Z.
    Approval,
    /// The newest evidence first, none last.
    Evidence,
}

impl BriefOrder {
    fn as_str(self) -> &'static str {
        match self {
            BriefOrder::Name => "name",
            BriefOrder::Owner => "owner",
            BriefOrder::Decision => "decision",
            BriefOrder::Cost => "cost",
            BriefOrder::Approval => "approval",
            BriefOrder::Evidence => "evidence",
        }
    }
}

/// Briefs narrowed by `filter` in `order` (ties newest first), `limit` of them from `offset`.
/// Paged by offset, not by keyset: a sorted list is read a page or two deep by people, and the
/// newest-first list (`list_filtered`) keeps its keyset for the API and for deep paging. Its own
/// statement rather than an ORDER BY parameter of `list_filtered`'s: there, newest first must stay a
/// walk of the creation index, which a computed sort key would turn into a sort of every brief; the
/// column list is repeated because sqlx checks only literal statements.
pub async fn list_sorted(
    db: impl PgExecutor<'_>,
    filter: &BriefFilter,
    order: BriefOrder,
    offset: i64,
    limit: i64,
) -> Result<Vec<Brief>, sqlx::Error> {
    let pattern = filter
        .search
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(like_pattern);
    let rows = sqlx::query_as!(
        BriefRow,
        r#"SELECT b.id AS "id!", b.name AS "name!", b.owner AS "owner!", b.workload_kind AS "workload_kind!",
             b.model_name AS "model_name!", b.model_revision, b.catalog_model, b.params_b AS "params_b!",
             b.precision AS "precision!", b.context_length AS "context_length!", b.concurrency AS "concurrency!",
             b.num_layers, b.num_kv_heads, b.head_dim, b.targets AS "targets!: Json<Targets>",
             b.data_boundary AS "data_boundary!", b.needs_host_control AS "needs_host_control!",
             b.only_needs_model_output AS "only_needs_model_output!", b.persist AS "persist!", b.restore_plan,
             b.fallback_plan, b.max_cost_per_job, b.currency AS "currency!", b.cost_unit AS "cost_unit!",
             b.allocation_boundary AS "allocation_boundary!", b.model_config AS "model_config: Json<Map<String, Value>>",
             b.architecture AS "architecture!: Json<ArchitectureFields>", b.expected_peak_rps,
             b.api_price_per_million_tokens, b.headroom_pct, b.api_price_input_per_million,
             b.api_price_output_per_million, t.gpu AS "trial_gpu?", t.gpu_count AS "trial_gpu_count?",
             b.k8s_manifest, b.created_at AS "created_at!", b.updated_at AS "updated_at!"
           FROM briefs b LEFT JOIN trials t ON t.brief_id = b.id AND t.position = 1
             LEFT JOIN brief_signals s ON s.brief_id = b.id
           WHERE ($1::text IS NULL OR b.name ILIKE $1 OR b.model_name ILIKE $1 OR b.catalog_model ILIKE $1)
             AND ($2::bool IS NULL OR EXISTS (SELECT 1 FROM evidence e WHERE e.brief_id = b.id) = $2)
             AND ($3::uuid IS NULL OR b.id = ANY (ARRAY(SELECT o.brief_id FROM brief_owners o WHERE o.user_id = $3)))
             AND ($4::uuid IS NULL OR EXISTS (SELECT 1 FROM brief_teams bt WHERE bt.brief_id = b.id AND bt.team_id = $4))
             AND (($5::text[] IS NULL AND $6::bool IS NULL) OR s.brief_id IS NULL
                  OR (($5::text[] IS NULL OR s.state = ANY($5)) AND ($6::bool IS NULL OR s.failing = $6))
                  OR EXISTS (SELECT 1 FROM brief_signals_dirty d WHERE d.brief_id = b.id))
             AND ($7::uuid IS NULL OR b.id = $7)
           ORDER BY CASE $8 WHEN 'name' THEN lower(b.name) WHEN 'owner' THEN lower(b.owner)
                            WHEN 'decision' THEN s.decision WHEN 'approval' THEN s.state END ASC NULLS LAST,
                    CASE WHEN $8 = 'cost' THEN s.cost_per_job END ASC NULLS LAST,
                    CASE WHEN $8 = 'evidence' THEN s.last_evidence_at END DESC NULLS LAST,
                    b.created_at DESC, b.id DESC
           OFFSET $9 LIMIT $10"#,
        pattern,
        filter.has_evidence,
        filter.owner,
        filter.team,
        filter.states.as_deref(),
        filter.failing,
        filter.only,
        order.as_str(),
        offset,
        limit,
    )
    .fetch_all(db)
    .await?;
    rows.into_iter().map(Brief::try_from).collect()
}

/// `%`, `_` and `\` typed in a search are literal characters, not LIKE patterns.
fn like_pattern(search: &str) -> String {
    let escaped = search
        .trim()
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

/// Briefs newest first after the keyset cursor `after` (created_at, id), narrowed by `filter`.
///
/// A person owns few briefs: their ids (`= ANY (ARRAY(…))`) drive the owner filter through the
/// primary key, where an `EXISTS` would walk every brief newest first looking for them (26 ms
/// against 3 ms for an owner of 250 of 10,000 briefs). A team shares many, so newest first with
/// `EXISTS` stays the faster way there (docs/benchmarks.md has both plans). The summary is
/// joined (one primary-key probe per brief walked) rather than tested with `EXISTS` sub-plans,
/// which hashed the whole summary table on every call (10 ms against 3 ms for `stale`).
pub async fn list_filtered(
    db: impl PgExecutor<'_>,
    filter: &BriefFilter,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Brief>, sqlx::Error> {
    let pattern = filter
        .search
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(like_pattern);
    let (after_at, after_id) = after.unzip();
    let rows = sqlx::query_as!(
        BriefRow,
        r#"SELECT b.id AS "id!", b.name AS "name!", b.owner AS "owner!", b.workload_kind AS "workload_kind!",
             b.model_name AS "model_name!", b.model_revision, b.catalog_model, b.params_b AS "params_b!",
             b.precision AS "precision!", b.context_length AS "context_length!", b.concurrency AS "concurrency!",
             b.num_layers, b.num_kv_heads, b.head_dim, b.targets AS "targets!: Json<Targets>",
             b.data_boundary AS "data_boundary!", b.needs_host_control AS "needs_host_control!",
             b.only_needs_model_output AS "only_needs_model_output!", b.persist AS "persist!", b.restore_plan,
             b.fallback_plan, b.max_cost_per_job, b.currency AS "currency!", b.cost_unit AS "cost_unit!",
             b.allocation_boundary AS "allocation_boundary!", b.model_config AS "model_config: Json<Map<String, Value>>",
             b.architecture AS "architecture!: Json<ArchitectureFields>", b.expected_peak_rps,
             b.api_price_per_million_tokens, b.headroom_pct, b.api_price_input_per_million,
             b.api_price_output_per_million, t.gpu AS "trial_gpu?", t.gpu_count AS "trial_gpu_count?",
             b.k8s_manifest, b.created_at AS "created_at!", b.updated_at AS "updated_at!"
           FROM briefs b LEFT JOIN trials t ON t.brief_id = b.id AND t.position = 1
             LEFT JOIN brief_signals s ON s.brief_id = b.id
           WHERE ($1::text IS NULL OR b.name ILIKE $1 OR b.model_name ILIKE $1 OR b.catalog_model ILIKE $1)
             AND ($2::bool IS NULL OR EXISTS (SELECT 1 FROM evidence e WHERE e.brief_id = b.id) = $2)
             AND ($3::timestamptz IS NULL OR (b.created_at, b.id) < ($3, $4))
             AND ($6::uuid IS NULL OR b.id = ANY (ARRAY(SELECT o.brief_id FROM brief_owners o WHERE o.user_id = $6)))
             AND ($7::uuid IS NULL OR EXISTS (SELECT 1 FROM brief_teams bt WHERE bt.brief_id = b.id AND bt.team_id = $7))
             AND (($8::text[] IS NULL AND $9::bool IS NULL) OR s.brief_id IS NULL
                  OR (($8::text[] IS NULL OR s.state = ANY($8)) AND ($9::bool IS NULL OR s.failing = $9))
                  OR EXISTS (SELECT 1 FROM brief_signals_dirty d WHERE d.brief_id = b.id))
             AND ($10::uuid IS NULL OR b.id = $10)
           ORDER BY b.created_at DESC, b.id DESC LIMIT $5"#,
        pattern,
        filter.has_evidence,
        after_at,
        after_id,
        limit,
        filter.owner,
        filter.team,
        filter.states.as_deref(),
        filter.failing,
        filter.only,
    )
    .fetch_all(db)
    .await?;
    rows.into_iter().map(Brief::try_from).collect()
}
