//! The approval's body as the OpenAPI document states it: the API reads it field by field from a
//! JSON map (`api::approve`, `service::record_verdict`), so this doc-only type states those rules.

#![allow(dead_code)]

use serde_json::Value;
use utoipa::ToSchema;

/// A reservation field: a string or a number.
#[derive(ToSchema, serde::Deserialize)]
#[serde(untagged)]
pub enum ReservationValue {
    Text(String),
    Number(f64),
}

/// { verdict: approve | reject, comment, inputs_digest, trial?, reservation? }
#[derive(ToSchema, serde::Deserialize)]
pub struct ApprovalBody {
    #[schema(schema_with = verdict)]
    verdict: String,
    /// the trial decided on (default: the recommended one); another needs a comment
    trial: Option<uuid::Uuid>,
    /// required to reject
    comment: Option<String>,
    /// the digest of the review decided on
    #[schema(min_length = 1)]
    inputs_digest: String,
    /// the manager's choices on the computed reservation: term_months (1–60) and start_date
    /// (YYYY-MM-DD); any other field sent must equal the review's trials[].reservation, which the
    /// approval records exactly (its answer's `reservation`)
    #[schema(value_type = Option<std::collections::BTreeMap<String, ReservationValue>>)]
    reservation: Option<Value>,
    /// an action other than the trial's computed one (an override: expand, reserve, dedicate, scale
    /// or stop); needs `override_reason`; reserve only when a reserved price of the offer is known
    decision: Option<String>,
    /// why the computed action is overridden, at least 20 characters
    override_reason: Option<String>,
    /// required (true) to approve a trial whose evidence names another GPU model than the trial's
    /// (`trials[].gpu_mismatch`); recorded as `mismatch_acknowledged`
    acknowledge_mismatch: Option<bool>,
}

fn verdict() -> utoipa::openapi::Object {
    crate::briefs::schema::choice(&["approve", "reject"], "approve or reject", false)
}
