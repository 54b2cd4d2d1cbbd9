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
