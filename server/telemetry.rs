//! Telemetry: logging set-up, the service's own Prometheus metrics, and the id of the request being
//! served.
//!
//! Metrics use the `prometheus` crate (tikv, well kept) rather than `metrics` +
//! `metrics-exporter-prometheus` because it gives each app its own `Registry` held in `AppState`: no
//! process-global recorder, so the tests (many apps in one process) each see their own counters, and
//! nothing is installed at start-up. Pool gauges are read from the pool at scrape time, so they are
//! always current. `http::metrics` counts requests into it and serves `GET /metrics`.

use std::future::Future;

use axum::http::StatusCode;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};
use sqlx::PgPool;
use tracing_subscriber::{fmt, EnvFilter};

pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The header that carries the request id (`x-request-id`), made by tower-http.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The id of the request being served on this task, if any. Kept in a task-local while the request
/// runs, so error bodies and logs can name it without threading it through every function.
pub fn current_request_id() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// Runs `work` with `id` as the current request id.
pub async fn with_request_id<F: Future>(id: String, work: F) -> F::Output {
    REQUEST_ID.scope(id, work).await
}

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    ingest_bytes: IntCounterVec,
    ingested: IntCounterVec,
    parse_failures: IntCounterVec,
    pool: IntGaugeVec,
    compacted: IntCounter,
    compaction_failures: IntCounter,
    webhook_attempts: IntCounterVec,
}

/// A counter with labels.
fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

/// A counter without labels.
fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric")
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// One registration per metric, a table to read down.
    pub fn new() -> Self {
        let registry = Registry::new_custom(Some("rentcheck".into()), None).expect("a valid prefix");
        let route = ["method", "route", "status"];
        let requests = counter_vec(
            "http_requests_total",
            "HTTP requests answered, by matched route, method and status class",
            &route,
        );
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "http_request_duration_seconds",
                "Time to answer an HTTP request (until the response head), by matched route, method and status class",
            )
            .buckets(vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
            &route,
        )
        .expect("valid metric");
        let ingest_bytes = counter_vec(
            "evidence_ingest_bytes_total",
            "Raw evidence bytes committed, by kind",
            &["kind"],
        );
        let ingested = counter_vec(
            "evidence_ingested_total",
            "Evidence items committed, by kind and parse status",
            &["kind", "parse_status"],
        );
        let parse_failures = counter_vec(
            "evidence_parse_failures_total",
            "Evidence stored with parse_status failed, by kind",
            &["kind"],
        );
        let pool = IntGaugeVec::new(
            Opts::new(
                "db_pool_connections",
                "Database pool connections, by state (in_use, idle, max)",
            ),
            &["state"],
        )
        .expect("valid metric");
        let compacted = counter(
            "evidence_metrics_compacted_total",
            "Uploads the compactor has folded into the newest-value table (see docs/operations.md)",
        );
        let compaction_failures = counter(
            "evidence_metrics_compaction_failures_total",
            "Compaction batches that failed (database away, conflicts); their uploads stay queued",
        );
        let webhook_attempts = counter_vec(
            "webhook_attempts_total",
            "Webhook delivery attempts, by what became of the delivery: delivered, retrying, gave_up",
            &["result"],
        );
        registry
            .register(Box::new(webhook_attempts.clone()))
            .expect("registered once");
        for c in [&compacted, &compaction_failures] {
            registry.register(Box::new(c.clone())).expect("registered once");
        }
        for c in [&requests, &ingest_bytes, &ingested, &parse_failures] {
            registry.register(Box::new(c.clone())).expect("registered once");
        }
        registry.register(Box::new(latency.clone())).expect("registered once");
        registry.register(Box::new(pool.clone())).expect("registered once");
        Self {
            registry,
            requests,
            latency,
            ingest_bytes,
            ingested,
            parse_failures,
            pool,
            compacted,
            compaction_failures,
            webhook_attempts,
        }
    }

    /// One webhook attempt, by what became of its delivery (`delivered`, `retrying`, `gave_up`):
    /// alert on `gave_up` growing.
    pub fn observe_webhook_attempt(&self, result: &'static str) {
        self.webhook_attempts.with_label_values(&[result]).inc();
    }

    /// One compaction batch: how many uploads it folded, or that it failed.
    pub fn observe_compaction(&self, outcome: Result<u64, ()>) {
        match outcome {
            Ok(n) => self.compacted.inc_by(n),
            Err(()) => self.compaction_failures.inc(),
        }
    }

    pub fn observe_request(&self, method: &str, route: &str, status: StatusCode, seconds: f64) {
        let class = match status.as_u16() {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        let labels = [method, route, class];
        self.requests.with_label_values(&labels).inc();
        self.latency.with_label_values(&labels).observe(seconds);
    }

    /// Called once per committed evidence row (not for idempotent replays).
    pub fn observe_ingest(&self, kind: &str, parse_status: &str, bytes: usize) {
        self.ingest_bytes.with_label_values(&[kind]).inc_by(bytes as u64);
        self.ingested.with_label_values(&[kind, parse_status]).inc();
        if parse_status == "failed" {
            self.parse_failures.with_label_values(&[kind]).inc();
        }
    }

    /// The text exposition, with the pool gauges read from `pool` now.
    pub fn render(&self, pool: &PgPool) -> Vec<u8> {
        let size = i64::from(pool.size());
        let idle = pool.num_idle() as i64;
        self.pool.with_label_values(&["in_use"]).set(size - idle);
        self.pool.with_label_values(&["idle"]).set(idle);
        self.pool
            .with_label_values(&["max"])
            .set(i64::from(pool.options().get_max_connections()));
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        out
    }
}
