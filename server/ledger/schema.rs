//! The ledger's JSON body as the OpenAPI document states it (`api::LedgerPost`, `model::LineInput`,
//! checked by `model::validate_line` and `model::validate_outputs`): doc-only types.

#![allow(dead_code)]

use std::collections::BTreeMap;

use serde::Deserialize;
use utoipa::ToSchema;

/// A cell: a string, or a number read as its text.
#[derive(ToSchema, Deserialize)]
#[serde(untagged)]
pub enum Cell {
    Text(String),
    Number(f64),
}

/// One ledger line, every field a string (or a number): category (accelerator, host, storage,
/// network, support or license), resource, description, starts_at, ends_at, gpus,
/// rate_per_gpu_hour, amount, currency (the brief's), trial (id or name).
#[derive(ToSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineBody {
    category: Option<Cell>,
    resource: Option<Cell>,
    description: Option<Cell>,
    starts_at: Option<Cell>,
    ends_at: Option<Cell>,
    gpus: Option<Cell>,
    rate_per_gpu_hour: Option<Cell>,
    amount: Option<Cell>,
    currency: Option<Cell>,
    trial: Option<Cell>,
}

/// { trial?, lines, outputs: { accepted, rejected, retries, failed_jobs, idle_hours } }
#[derive(ToSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerBody {
    /// the trial the lines and outputs belong to (a line may name its own)
    trial: Option<uuid::Uuid>,
    lines: Option<Vec<LineBody>>,
    /// output counts: accepted, rejected, retries, failed_jobs, idle_hours
    #[schema(value_type = Option<Object>)]
    outputs: Option<BTreeMap<String, serde_json::Value>>,
}

/// Money per category, decimal strings.
#[derive(ToSchema)]
pub struct CategoryTotals {
    accelerator: String,
    host: String,
    storage: String,
    network: String,
    support: String,
    license: String,
}

/// What went to waste.
#[derive(ToSchema)]
pub struct Diagnostics {
    /// a decimal string, or null when not counted
    idle_hours: Option<String>,
    failed_jobs: i64,
    rejected_outputs: i64,
    retries: i64,
}

/// The ledger summary of one trial (money and hours as decimal strings).
#[derive(ToSchema)]
pub struct LedgerSummary {
    currency: String,
    /// GPU-hours over merged intervals (overlaps of one resource counted once)
    accelerator_hours: String,
    totals: CategoryTotals,
    total: String,
    accepted_outputs: i64,
    /// total ÷ accepted_outputs; null when nothing was accepted
    cost_per_job: Option<String>,
    diagnostics: Diagnostics,
}

/// One trial's ledger: its summary, output counts and newest 500 lines.
#[derive(ToSchema)]
pub struct Ledger {
    /// the trial this ledger is of
    trial: uuid::Uuid,
    summary: LedgerSummary,
    #[schema(value_type = Object)]
    outputs: serde_json::Value,
    #[schema(value_type = Vec<Object>)]
    lines: Vec<serde_json::Value>,
    lines_total: i64,
    /// pass as ?cursor= for the next (older) page; null on the last page
    next_cursor: Option<i64>,
}
