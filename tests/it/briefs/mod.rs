//! Briefs: the JSON API, the list, a model's config.json and architecture fields, and the KV-cache
//! capacity beside vLLM's.

mod api;
mod kv_capacity;
mod list;
mod model_config;
