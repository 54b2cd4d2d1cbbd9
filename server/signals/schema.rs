//! The webhook's body as the OpenAPI document states it: the API reads it field by field from a
//! JSON map (`model::validate`), so this doc-only type states the same rules.

#![allow(dead_code)]

use utoipa::{
    openapi::{
        schema::{ArrayBuilder, ObjectBuilder, Type},
        Array,
    },
    ToSchema,
};

use crate::outbox::EVENTS;

fn events() -> Array {
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(EVENTS.to_vec())),
        )
        .min_items(Some(1))
        .description(Some("the events to send: a non-empty list"))
        .build()
}

/// The subscription.
#[derive(ToSchema, serde::Deserialize)]
pub struct WebhookBody {
    /// https:// URL the events are POSTed to (http:// only with RENTCHECK_WEBHOOK_ALLOW_HTTP=true),
    /// with a host and no user name or password, at most 2048 characters
    #[schema(min_length = 1, max_length = 2048, format = "uri")]
    url: String,
    #[schema(schema_with = events)]
    events: Vec<String>,
    /// 16 to 512 characters (at most 512 bytes); left out, one is generated and answered once
    #[schema(min_length = 16, max_length = 512)]
    secret: Option<String>,
}
