//! The card's body as the OpenAPI document states it: the API reads criteria field by field from a
//! JSON map (`model::validate_json`, `model::check`), so these doc-only types state the same rules.

#![allow(dead_code)]

use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

/// A criterion's threshold: a number, a boolean or a string (a known key's type decides which).
#[derive(ToSchema, Deserialize)]
#[serde(untagged)]
pub enum ThresholdBody {
    Number(f64),
    Bool(bool),
    /// at most 200 characters
    Text(String),
}

/// One criterion. A known key's threshold must have its type (ge compares numbers, a boolean key
/// takes eq or ne); unknown keys pass with a warning. What a GET adds (status, value, evidence_id,
/// reason, source) may be sent back and is ignored.
#[derive(ToSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriterionBody {
    /// a lower-case dotted metric key: a-z, 0-9, '.', '_', '-'
    #[schema(min_length = 1, max_length = 120, pattern = "^\\s*[a-z0-9._-]+\\s*$")]
    key: String,
    #[schema(schema_with = op)]
    op: String,
    threshold: ThresholdBody,
    /// default: the known key's unit
    #[schema(max_length = 32)]
    unit: Option<String>,
    #[schema(minimum = 1, maximum = 5)]
    stage: u8,
    /// default true
    required: Option<bool>,
    #[schema(max_length = 300)]
    why: Option<String>,
    #[schema(read_only)]
    status: Option<Value>,
    #[schema(read_only)]
    value: Option<Value>,
    #[schema(read_only)]
    evidence_id: Option<Value>,
    #[schema(read_only)]
    reason: Option<Value>,
    #[schema(read_only)]
    source: Option<Value>,
}

fn op() -> utoipa::openapi::Object {
    crate::briefs::schema::choice(
        &["lt", "le", "gt", "ge", "eq", "ne"],
        "how the value is compared",
        false,
    )
}

/// A card to save as the next revision.
#[derive(ToSchema, Deserialize)]
pub struct CardBody {
    /// at most 200 criteria
    #[schema(max_items = 200)]
    criteria: Vec<CriterionBody>,
}
