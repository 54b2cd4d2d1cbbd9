//! What the bench-serving parser stores for each load point (docs/evidence.md): a `vllm bench sweep`
//! array is one point per element with its offered rate and duration; a run where nothing completed
//! keeps no latency; percentiles from per-request arrays are over the completed requests only. The
//! inputs are the real `vllm bench serve --save-detailed` file of tests/fixtures, transformed as
//! `common::vllm_points` states; every figure is worked out here from the arrays.

use crate::common::vllm_points::{good, load_point, requests, Load};
use rentcheck::evidence::parsers::*;
use serde_json::Value;

fn num(p: &Parsed, k: &str) -> Option<f64> {
    match p.metrics.get(k) {
        Some(MetricValue::Number(n)) => Some(*n),
        _ => None,
    }
}

fn close(p: &Parsed, k: &str, want: f64) {
    let got = num(p, k).unwrap_or_else(|| panic!("{k} missing: {:?}", p.metrics.keys().collect::<Vec<_>>()));
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "{k}: got {got}, want {want}"
    );
}

fn targets() -> SloTargets {
    SloTargets {
        ttft_ms: Some(500.0),
        tpot_ms: Some(60.0),
        e2e_ms: None,
    }
}

fn parse_json(v: &Value) -> Parsed {
    parse_with(EvidenceKind::BenchServing, v.to_string().as_bytes(), &targets()).unwrap()
}

/// numpy's linear percentile, as vLLM computes it.
fn percentile(mut xs: Vec<f64>, q: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let pos = q * (xs.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(xs.len() - 1);
    xs[lo] + (xs[hi] - xs[lo]) * (pos - lo as f64)
}

#[test]
fn a_sweep_array_is_one_load_point_per_element_with_its_rate_and_duration() {
    // `vllm bench sweep`'s summary.json: the real run at 4 requests/s over 50 s, and at 8 over
    // 25.3 s with 20 ms more queueing, in one array.
    let a = load_point(Load::at(4.0, 50.0));
    let b = load_point(Load::at(8.0, 25.3).queued(20.0));
    let p = parse_json(&Value::Array(vec![a.clone(), b.clone()]));
    assert_eq!(p.tool.as_deref(), Some("vllm bench sweep"));
    for (run, point, rate, duration) in [("rate_4", &a, 4.0, 50.0), ("rate_8", &b, 8.0, 25.3)] {
        let key = |k: &str| format!("serving.by_run.{run}.{k}");
        close(&p, &key("offered_rps"), rate);
        close(&p, &key("duration_s"), duration);
        close(&p, &key("completed"), 200.0);
        close(&p, &key("failed"), 0.0);
        close(&p, &key("request_throughput_rps"), 200.0 / duration);
        let good = good(point, 500.0, 60.0);
        close(&p, &key("good_requests"), good.len() as f64);
        close(&p, &key("slo_attainment"), good.len() as f64 / 200.0);
        close(&p, &key("goodput_rps"), good.len() as f64 / duration);
        let tokens: f64 = good.iter().map(|r| r.output_tokens).sum();
        close(&p, &key("good_output_tokens_per_s"), tokens / duration);
        close(&p, &key("good_mean_output_tokens"), tokens / good.len() as f64);
        let prompt: f64 = good.iter().map(|r| r.input_tokens).sum();
        close(&p, &key("good_mean_input_tokens"), prompt / good.len() as f64);
    }
    // The un-suffixed keys are the busiest point's.
    close(&p, "serving.offered_rps", 8.0);
}

#[test]
fn a_run_where_nothing_completed_keeps_no_latency() {
    // Every request of the real run failed, written as vLLM writes failures: TTFT 0, no gaps, and a
    // summary of zeros (the tool's statistics over no request).
    let mut point = load_point(Load::at(8.0, 25.0).failing(200));
    for k in [
        "mean_ttft_ms",
        "median_ttft_ms",
        "p99_ttft_ms",
        "mean_itl_ms",
        "p99_e2el_ms",
    ] {
        point[k] = Value::from(0.0);
    }
    let p = parse_json(&point);
    close(&p, "serving.completed", 0.0);
    close(&p, "serving.failed", 200.0);
    close(&p, "serving.error_rate", 1.0);
    let latency: Vec<&String> = p.metrics.keys().filter(|k| k.ends_with("_ms")).collect();
    assert!(latency.is_empty(), "a latency of 0 passes every target: {latency:?}");
    assert!(
        p.warnings.iter().any(|w| w.contains("no request completed")),
        "{:?}",
        p.warnings
    );
    close(&p, "serving.slo_attainment", 0.0);
    close(&p, "serving.goodput_rps", 0.0);
}

#[test]
fn percentiles_from_per_request_arrays_are_over_completed_requests_only() {
    // The first 20 requests failed: their array entries (TTFT 0) are the tool's filler.
    let point = load_point(Load::at(8.0, 25.0).failing(20));
    let p = parse_json(&point);
    let completed: Vec<f64> = requests(&point)
        .into_iter()
        .filter(|r| r.ok)
        .map(|r| r.ttft_ms)
        .collect();
    assert_eq!(completed.len(), 180);
    for (stat, q) in [("p50", 0.5), ("p95", 0.95), ("p99", 0.99)] {
        close(&p, &format!("serving.ttft_{stat}_ms"), percentile(completed.clone(), q));
    }
    close(&p, "serving.error_rate", 20.0 / 200.0);
    // The file's summary has no TPOT percentile: the per-request figures give it, over completed
    // requests with more than one output token (vLLM's own rule), so the card's inter-token
    // criterion has its figure.
    let tpots: Vec<f64> = requests(&point)
        .into_iter()
        .filter(|r| r.ok && r.output_tokens > 1.0)
        .map(|r| r.tpot_ms)
        .collect();
    assert!(tpots.len() <= 180);
    for (stat, q) in [("p50", 0.5), ("p95", 0.95), ("p99", 0.99)] {
        close(&p, &format!("serving.tpot_{stat}_ms"), percentile(tpots.clone(), q));
    }
    // Attainment is over the requests sent: 20 failed ones are not good.
    let good = good(&point, 500.0, 60.0).len() as f64;
    close(&p, "serving.slo_attainment", good / 200.0);
    close(&p, "serving.goodput_rps", good / 25.0);
}
