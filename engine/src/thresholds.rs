//! Thresholds that the default card (`acceptance::defaults`) and the review decision
//! (`review::decision`) must agree on: what "saturated" means (docs/decision.md "Derived figures",
//! docs/acceptance.md). Plain constants on the ground floor, so both read one value and neither
//! domain imports the other for it.
//!
//! `saturated` = any of: `serving.preemptions_total` > 0 in the load window;
//! `serving.kv_cache_usage_max_pct` ≥ 90; `serving.queue_time_p95_ms` ≥ 20 % of `serving.e2e_p95_ms`.

/// KV-cache usage (percent) at or above which the server counts as saturated; the card asks for
/// usage below it.
pub const KV_CACHE_SATURATED_PCT: f64 = 90.0;
/// Queue time p95 as a share of end-to-end p95 at or above which requests are queueing.
pub const QUEUE_SHARE_SATURATED: f64 = 0.20;
/// Preemptions above this count in the load window mean KV pressure; the card asks for exactly it.
pub const PREEMPTIONS_SATURATED_ABOVE: f64 = 0.0;
