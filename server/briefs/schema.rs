//! The brief's body as the OpenAPI document states it. The API reads a brief field by field from a
//! JSON map (`model::validate`, shared with the form), so there is no request struct to derive the
//! document from: these doc-only types state the same rules (required fields, choices, bounds,
//! lengths, no unknown field) for `/api/openapi.json`. A change to `validate` needs the same change here (the tests below
//! check the field names and the required ones).

#![allow(dead_code)]

use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{
    openapi::{
        schema::{ArrayBuilder, ObjectBuilder, SchemaType, Type},
        Array, Object,
    },
    ToSchema,
};

use super::model::{AllocationBoundary, CostUnit, DataBoundary};
use crate::sizing::{KvCacheDtype, Precision, WorkloadKind};

/// Text without control characters (tabs and line breaks aside), as every text field is read. (The
/// attributes below spell the same patterns out: a `#[schema]` attribute takes a literal.)
pub const TEXT: &str = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$";

/// A string that must be one of `values`; `nullable`: null is read as absent.
pub fn choice(values: &[&str], description: &str, nullable: bool) -> Object {
    let t = if nullable {
        SchemaType::from_iter([Type::String, Type::Null])
    } else {
        SchemaType::new(Type::String)
    };
    let mut values: Vec<Option<&str>> = values.iter().copied().map(Some).collect();
    if nullable {
        values.push(None);
    }
    ObjectBuilder::new()
        .schema_type(t)
        .enum_values(Some(values))
        .description(Some(description))
        .build()
}

fn workload_kind() -> Object {
    let v: Vec<&str> = WorkloadKind::ALL.iter().map(WorkloadKind::as_str).collect();
    choice(&v, "the kind of workload", false)
}

fn precision() -> Object {
    let v: Vec<&str> = Precision::ALL.iter().map(Precision::as_str).collect();
    choice(&v, "the weights' precision", false)
}

fn data_boundary() -> Object {
    let v: Vec<&str> = DataBoundary::ALL.iter().map(DataBoundary::as_str).collect();
    choice(&v, "how far the workload's data may travel", false)
}

fn allocation_boundary() -> Object {
    let v: Vec<&str> = AllocationBoundary::ALL.iter().map(AllocationBoundary::as_str).collect();
    choice(&v, "the kind of allocation the brief asks to rent", false)
}

fn cost_unit() -> Object {
    let v: Vec<&str> = CostUnit::ALL.iter().map(CostUnit::as_str).collect();
    choice(&v, "what one completed job is, for cost per job", true)
}

fn kv_cache_dtype() -> Object {
    let v: Vec<&str> = KvCacheDtype::ALL.iter().map(KvCacheDtype::as_str).collect();
    choice(
        &v,
        "auto (default: 16-bit KV whatever the weight precision) or fp8",
        true,
    )
}

fn persist() -> Array {
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(100))
                .pattern(Some(TEXT)),
        )
        .max_items(Some(20))
        .description(Some(
            "what must survive a restart: at most 20 items of at most 100 characters",
        ))
        .build()
}

/// Latency and throughput targets; each optional, each greater than 0 (error_rate: a fraction).
#[derive(ToSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetsBody {
    #[schema(exclusive_minimum = 0, maximum = 1000000000)]
    ttft_p95_ms: Option<f64>,
    #[schema(exclusive_minimum = 0, maximum = 1000000000)]
    itl_p95_ms: Option<f64>,
    #[schema(exclusive_minimum = 0, maximum = 1000000000)]
    e2e_p95_ms: Option<f64>,
    #[schema(exclusive_minimum = 0, maximum = 1000000000)]
    output_tokens_per_s: Option<f64>,
    #[schema(exclusive_minimum = 0, maximum = 1000000000)]
    request_throughput_rps: Option<f64>,
    /// a fraction from 0 to 1
    #[schema(minimum = 0, maximum = 1)]
    error_rate: Option<f64>,
}

/// A workload brief as it is sent (create, replace). Rules beyond one field (model_name or
/// catalog_model; params_b unless the catalogue knows the model; an architecture the sizing can
/// resolve; trial_gpu_count 1, 2, 4, 8 or a multiple of 8) are answered 422 on their field. Null is
/// read as absent, as is a blank string. The answer's fields (id, sizing, status, created_at,
/// updated_at) may be sent back and are ignored.
#[derive(ToSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BriefBody {
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    name: String,
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    owner: String,
    #[schema(schema_with = workload_kind)]
    workload_kind: String,
    /// required unless catalog_model names a catalogue model
    #[schema(
        max_length = 200,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    model_name: Option<String>,
    #[schema(
        max_length = 200,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    model_revision: Option<String>,
    /// a Hugging Face id of the model catalogue
    #[schema(
        max_length = 200,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    catalog_model: Option<String>,
    /// billions of parameters; required unless the catalogue knows the model
    #[schema(exclusive_minimum = 0, maximum = 10000)]
    params_b: Option<f64>,
    #[schema(schema_with = precision)]
    precision: String,
    #[schema(minimum = 1, maximum = 10000000)]
    context_length: i64,
    #[schema(minimum = 1, maximum = 100000)]
    concurrency: i64,
    #[schema(minimum = 1, maximum = 1000)]
    num_layers: Option<i64>,
    #[schema(minimum = 1, maximum = 1024)]
    num_kv_heads: Option<i64>,
    #[schema(minimum = 1, maximum = 4096)]
    head_dim: Option<i64>,
    targets: Option<TargetsBody>,
    #[schema(schema_with = data_boundary)]
    data_boundary: String,
    needs_host_control: Option<bool>,
    only_needs_model_output: Option<bool>,
    #[schema(schema_with = persist)]
    persist: Option<Vec<String>>,
    #[schema(
        max_length = 10000,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    restore_plan: Option<String>,
    #[schema(
        max_length = 10000,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    fallback_plan: Option<String>,
    /// a decimal string, at most 1000000000
    #[schema(pattern = "^[0-9]{1,10}(\\.[0-9]{1,6})?$")]
    max_cost_per_job: Option<String>,
    /// a three-letter ISO 4217 code such as USD
    #[schema(pattern = "^[A-Za-z]{3}$")]
    currency: Option<String>,
    #[schema(schema_with = cost_unit)]
    cost_unit: Option<String>,
    #[schema(schema_with = allocation_boundary)]
    allocation_boundary: String,
    /// a GPU of the catalogue
    #[schema(
        max_length = 200,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    trial_gpu: Option<String>,
    /// 1, 2, 4, 8 or a multiple of 8 (whole nodes), at most 64
    #[schema(minimum = 1, maximum = 64)]
    trial_gpu_count: Option<i64>,
    #[schema(
        max_length = 262144,
        pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"
    )]
    k8s_manifest: Option<String>,
    /// the model's config.json (at most 256 KiB)
    model_config: Option<Map<String, Value>>,
    /// requests per second at the peak
    #[schema(exclusive_minimum = 0, maximum = 1000000000)]
    expected_peak_rps: Option<f64>,
    /// the older name of api_price_output_per_million (input free); a decimal string
    #[schema(pattern = "^[0-9]{1,10}(\\.[0-9]{1,6})?$")]
    api_price_per_million_tokens: Option<String>,
    /// percent above the peak, default 0
    #[schema(minimum = 0, maximum = 1000)]
    headroom_pct: Option<f64>,
    /// a decimal string
    #[schema(pattern = "^[0-9]{1,10}(\\.[0-9]{1,6})?$")]
    api_price_input_per_million: Option<String>,
    /// a decimal string
    #[schema(pattern = "^[0-9]{1,10}(\\.[0-9]{1,6})?$")]
    api_price_output_per_million: Option<String>,
    #[schema(minimum = 1, maximum = 1024)]
    num_attention_heads: Option<i64>,
    #[schema(minimum = 1, maximum = 1048576)]
    kv_lora_rank: Option<i64>,
    #[schema(minimum = 1, maximum = 4096)]
    qk_rope_head_dim: Option<i64>,
    #[schema(minimum = 1, maximum = 100000000)]
    sliding_window: Option<i64>,
    #[schema(minimum = 0, maximum = 1000)]
    sliding_window_layers: Option<i64>,
    /// one entry per layer (at most 1000), e.g. full_attention, sliding_attention, linear_attention
    #[schema(max_items = 1000)]
    layer_types: Option<Vec<String>>,
    #[schema(minimum = 1, maximum = 100000000)]
    attention_chunk_size: Option<i64>,
    #[schema(minimum = 0, maximum = 1000)]
    chunked_layers: Option<i64>,
    #[schema(minimum = 1, maximum = 4096)]
    num_experts: Option<i64>,
    #[schema(minimum = 1, maximum = 4096)]
    experts_per_token: Option<i64>,
    #[schema(exclusive_minimum = 0, maximum = 10000)]
    active_params_b: Option<f64>,
    #[schema(schema_with = kv_cache_dtype)]
    kv_cache_dtype: Option<String>,
    /// multi-token-prediction layers' KV counts only when true (default false)
    speculative_decoding: Option<bool>,
    /// answer field: ignored when sent
    #[schema(read_only)]
    id: Option<Value>,
    /// answer field: ignored when sent
    #[schema(read_only)]
    sizing: Option<Value>,
    /// answer field: ignored when sent
    #[schema(read_only)]
    status: Option<Value>,
    /// answer field: ignored when sent
    #[schema(read_only)]
    created_at: Option<Value>,
    /// answer field: ignored when sent
    #[schema(read_only)]
    updated_at: Option<Value>,
}

/// How the sizing's options are ordered: memory (default: memory rented) or price (fitting options
/// by cheapest price per hour).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum SizingOrder {
    Memory,
    Price,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::{json, Value};
    use utoipa::PartialSchema;

    use super::BriefBody;
    use crate::briefs::model::{validate, BriefInput};

    fn documented() -> Value {
        serde_json::to_value(BriefBody::schema()).unwrap()
    }

    #[test]
    fn every_documented_field_is_a_brief_field() {
        let doc = documented();
        assert_eq!(doc["additionalProperties"], json!(false));
        for field in doc["properties"].as_object().unwrap().keys() {
            let map = json!({ field.as_str(): null });
            let errors = validate(&BriefInput::Json(map.as_object().unwrap())).unwrap_err();
            assert!(
                !errors
                    .iter()
                    .any(|e| e.field == *field && e.message.contains("not a brief field")),
                "{field} is documented but refused"
            );
        }
        let map = json!({ "not_a_field": 1 });
        let errors = validate(&BriefInput::Json(map.as_object().unwrap())).unwrap_err();
        assert!(
            errors.iter().any(|e| e.field == "not_a_field"),
            "unknown fields are refused"
        );
    }

    #[test]
    fn the_documented_required_fields_are_the_ones_validate_requires() {
        let doc = documented();
        let required: BTreeSet<&str> = doc["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let empty = serde_json::Map::new();
        let errors = validate(&BriefInput::Json(&empty)).unwrap_err();
        // model_name and params_b are required unless a catalogue model is named: not in the schema.
        let validated: BTreeSet<&str> = errors
            .iter()
            .filter(|e| e.message == "is required")
            .map(|e| e.field.as_str())
            .collect();
        assert_eq!(required, validated);
    }
}
