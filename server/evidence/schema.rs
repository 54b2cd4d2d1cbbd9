//! Evidence bodies as the OpenAPI document states them. An upload is read from a JSON map, a
//! multipart form or a raw body (`upload.rs`, `model.rs`), so these doc-only types state the rules
//! those apply for `/api/openapi.json`.

#![allow(dead_code)]

use std::collections::BTreeMap;

use serde_json::Value;
use utoipa::{
    openapi::{
        schema::{ObjectBuilder, SchemaType, Type},
        Object,
    },
    ToSchema,
};

use super::parsers::EvidenceKind;

fn kind() -> Object {
    let values: Vec<&str> = std::iter::once("auto")
        .chain(EvidenceKind::ALL.iter().map(EvidenceKind::as_str))
        .collect();
    ObjectBuilder::new()
        .schema_type(SchemaType::new(Type::String))
        .enum_values(Some(values))
        .description(Some("the tool that produced it, or auto (detected from the content)"))
        .build()
}

fn labels() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(256))
                .pattern(Some("^[^\\u0000-\\u001F\\u007F-\\u009F]*$")),
        ))
        .max_properties(Some(32))
        .description(Some(
            "string labels (at most 32, names and values at most 256 bytes, no control characters); \
             {window, phase: before|after} pair vLLM scrapes into a window",
        ))
        .build()
}

/// JSON envelope for an evidence upload: exactly one of content, content_base64 or data.
#[derive(ToSchema)]
pub struct EvidenceEnvelope {
    /// the trial it belongs to; needed when the brief has several and the token names none
    trial: Option<uuid::Uuid>,
    #[schema(schema_with = kind)]
    kind: String,
    #[schema(minimum = 1, maximum = 5)]
    stage: i16,
    /// RFC 3339; default: now
    collected_at: Option<chrono::DateTime<chrono::Utc>>,
    #[schema(schema_with = labels)]
    labels: Option<BTreeMap<String, String>>,
    /// the tool output as text
    content: Option<String>,
    /// the tool output as base64 bytes
    content_base64: Option<String>,
    /// content type of content_base64's bytes
    content_type: Option<String>,
    /// the tool output as a JSON object or array
    #[schema(value_type = Option<Object>)]
    data: Option<Value>,
    /// batch items only: this item's Idempotency-Key
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    idempotency_key: Option<String>,
}

/// multipart/form-data: a `file` part, and kind, stage, collected_at, labels (JSON) or label.<name>
/// as text parts or query parameters.
#[derive(ToSchema)]
pub struct EvidenceMultipart {
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// a kind or auto
    kind: Option<String>,
    /// 1 to 5
    stage: Option<String>,
    /// RFC 3339
    collected_at: Option<String>,
    /// a JSON object of string labels
    labels: Option<String>,
}

/// A batch of evidence items.
#[derive(ToSchema)]
pub struct EvidenceBatch {
    /// 1 to 500 envelopes, each with its own idempotency_key if it wants one
    #[schema(min_items = 1, max_items = 500)]
    items: Vec<EvidenceEnvelope>,
}

/// Bytes as they were sent, of any content type.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct RawBytes(Vec<u8>);
