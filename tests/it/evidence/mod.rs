//! Evidence: uploads through the API (raw, JSON and batches), grouped inserts, the metrics
//! compaction, raw bytes in an object store, and the evidence pages.

mod api;
mod batch;
mod group_insert;
mod metrics_compaction;
mod object_store;
mod pages;
