//! A trial's body as the OpenAPI document states it: the API reads it field by field from a JSON
//! map (`model::validate`, shared with the form), so this doc-only type states the same rules.

#![allow(dead_code)]

use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

/// Trial fields (trials.md); every field optional on create: the brief's currency and allocation
/// boundary, the sizing's suggested GPU, status planned. Null and blank strings are read as absent;
/// the answer's fields may be sent back and are ignored.
#[derive(ToSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialBody {
    /// unique within the brief (default: the next free name)
    #[schema(
        max_length = 200,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    name: Option<String>,
    /// who rents it
    #[schema(
        max_length = 200,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    provider: Option<String>,
    #[schema(
        max_length = 200,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    region: Option<String>,
    /// a GPU of the catalogue; absent: the sizing's suggestion
    #[schema(max_length = 200)]
    gpu: Option<String>,
    #[schema(minimum = 1, maximum = 4096)]
    gpu_count: Option<i64>,
    /// on-demand (default), spot, reserved or serverless
    #[schema(schema_with = billing)]
    billing: Option<String>,
    /// decimal string, e.g. "2.99"
    #[schema(pattern = "^[0-9]{1,7}(\\.[0-9]{1,6})?$")]
    rate_per_gpu_hour: Option<String>,
    /// ISO 4217; the brief's currency (another one is refused)
    #[schema(pattern = "^[A-Za-z]{3}$")]
    currency: Option<String>,
    #[schema(schema_with = allocation_boundary)]
    allocation_boundary: Option<String>,
    #[schema(schema_with = status)]
    status: Option<String>,
    /// RFC 3339 or a date
    #[schema(max_length = 64)]
    started_at: Option<String>,
    /// RFC 3339 or a date, not before started_at; set when status becomes ended
    #[schema(max_length = 64)]
    ended_at: Option<String>,
    /// free text
    #[schema(
        max_length = 10000,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    notes: Option<String>,
    /// the id of the trial of this brief this one re-runs
    rerun_of: Option<uuid::Uuid>,
    #[schema(read_only)]
    id: Option<Value>,
    #[schema(read_only)]
    brief_id: Option<Value>,
    #[schema(read_only)]
    position: Option<Value>,
    #[schema(read_only)]
    created_at: Option<Value>,
    #[schema(read_only)]
    updated_at: Option<Value>,
    #[schema(read_only)]
    allocation: Option<Value>,
    #[schema(read_only)]
    suggested: Option<Value>,
    #[schema(read_only)]
    links: Option<Value>,
}

fn billing() -> utoipa::openapi::Object {
    let v: Vec<&str> = super::model::Billing::ALL
        .iter()
        .map(super::model::Billing::as_str)
        .collect();
    crate::briefs::schema::choice(&v, "how the allocation is billed", true)
}

fn allocation_boundary() -> utoipa::openapi::Object {
    crate::briefs::schema::choice(
        &["serverless", "vm", "dedicated-node", "cluster"],
        "default: the brief's",
        true,
    )
}

fn status() -> utoipa::openapi::Object {
    let v: Vec<&str> = super::model::TrialStatus::ALL
        .iter()
        .map(super::model::TrialStatus::as_str)
        .collect();
    crate::briefs::schema::choice(&v, "planned (default), running or ended", true)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};
    use utoipa::PartialSchema;

    use super::TrialBody;
    use crate::{
        trials::model::{validate, TrialDefaults},
        validation::Input,
    };

    #[test]
    fn every_documented_field_is_a_trial_field_and_no_other_is() {
        let doc: Value = serde_json::to_value(TrialBody::schema()).unwrap();
        assert_eq!(doc["additionalProperties"], json!(false));
        let defaults = || TrialDefaults {
            currency: "USD".into(),
            allocation_boundary: "vm".into(),
            name: "Trial 2".into(),
        };
        for field in doc["properties"].as_object().unwrap().keys() {
            let map = json!({ field.as_str(): null });
            let result = validate(&Input::Json(map.as_object().unwrap()), &defaults());
            assert!(result.is_ok(), "{field} is documented but refused: {:?}", result.err());
        }
        let map = json!({ "not_a_field": 1 });
        assert!(validate(&Input::Json(map.as_object().unwrap()), &defaults()).is_err());
    }
}
