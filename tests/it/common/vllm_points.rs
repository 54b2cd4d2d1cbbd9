//! Load points made from real tool output: the `vllm bench serve --save-detailed` file of
//! tests/fixtures (200 ShareGPT requests of Llama 3.3 70B on 8 × A100, all sent at once) transformed
//! into a run at another load, and every figure of such a run worked out by hand the way vLLM's
//! `--goodput` counts it. What a transformation changes is stated where it is made:
//!
//! * `request_rate` is the rate the run is said to have been offered, `duration` how long it ran;
//!   `completed`, `failed`, `request_throughput` (completed ÷ duration), `output_throughput` and the
//!   token totals are recomputed from the per-request arrays, as vLLM computes them;
//! * `queue_ms` is added to every request's time to first token (the queueing a busier server adds);
//! * the first `failed` requests become failed the way vLLM writes a failed request: an error text,
//!   a TTFT of 0, no inter-token gaps and no output tokens;
//! * the summary statistics of the original run (`mean_ttft_ms`, `p99_itl_ms`, …) are dropped:
//!   they describe the original run, and the parser computes the percentiles from the arrays.

use serde_json::{json, Value};

use super::fixture;

pub const REAL_RUN: &str = "bench-serving/vllm-benchmark-serving-llama3.3-70b-tp8-8xa100-qps-inf.json";

/// The real run as the tool wrote it.
pub fn real_run() -> Value {
    serde_json::from_slice(&fixture(REAL_RUN)).unwrap()
}

/// How a load point differs from the real run.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub rate: f64,
    pub duration: f64,
    pub queue_ms: f64,
    pub failed: usize,
}

impl Load {
    pub fn at(rate: f64, duration: f64) -> Self {
        Load {
            rate,
            duration,
            queue_ms: 0.0,
            failed: 0,
        }
    }

    pub fn queued(self, queue_ms: f64) -> Self {
        Load { queue_ms, ..self }
    }

    pub fn failing(self, failed: usize) -> Self {
        Load { failed, ..self }
    }
}

/// The real run transformed into a load point (see the module comment for what changes).
pub fn load_point(load: Load) -> Value {
    let mut v = real_run();
    let n = v["ttfts"].as_array().unwrap().len();
    let o = v.as_object_mut().unwrap();
    o.retain(|k, _| !(k.ends_with("_ms") || k.starts_with("request_goodput")));
    let mut ttfts = Vec::with_capacity(n);
    let mut itls = Vec::with_capacity(n);
    let mut outs = Vec::with_capacity(n);
    let mut errors = Vec::with_capacity(n);
    let (mut done, mut tokens_in, mut tokens_out) = (0usize, 0.0, 0.0);
    for i in 0..n {
        if i < load.failed {
            ttfts.push(json!(0.0));
            itls.push(json!([]));
            outs.push(json!(0));
            errors.push(json!("Timeout while waiting for the first token"));
            continue;
        }
        ttfts.push(json!(o["ttfts"][i].as_f64().unwrap() + load.queue_ms / 1000.0));
        itls.push(o["itls"][i].clone());
        outs.push(o["output_lens"][i].clone());
        errors.push(json!(""));
        done += 1;
        tokens_in += o["input_lens"][i].as_f64().unwrap();
        tokens_out += o["output_lens"][i].as_f64().unwrap();
    }
    o.insert("ttfts".into(), json!(ttfts));
    o.insert("itls".into(), json!(itls));
    o.insert("output_lens".into(), json!(outs));
    o.insert("errors".into(), json!(errors));
    o.insert("request_rate".into(), json!(load.rate));
    o.insert("duration".into(), json!(load.duration));
    o.insert("completed".into(), json!(done));
    o.insert("failed".into(), json!(load.failed));
    o.insert("total_input_tokens".into(), json!(tokens_in));
    o.insert("total_output_tokens".into(), json!(tokens_out));
    o.insert("request_throughput".into(), json!(done as f64 / load.duration));
    o.insert("output_throughput".into(), json!(tokens_out / load.duration));
    v
}

/// One request worked out by hand: vLLM's TPOT = the inter-token gaps ÷ (output tokens − 1).
pub struct Request {
    pub ok: bool,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub input_tokens: f64,
    pub output_tokens: f64,
}

pub fn requests(point: &Value) -> Vec<Request> {
    let arr = |k: &str| point[k].as_array().unwrap().clone();
    let (ttfts, itls, outs, ins, errors) = (
        arr("ttfts"),
        arr("itls"),
        arr("output_lens"),
        arr("input_lens"),
        arr("errors"),
    );
    (0..ttfts.len())
        .map(|i| {
            let gaps: f64 = itls[i]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .sum::<f64>()
                * 1000.0;
            let n = outs[i].as_f64().unwrap();
            Request {
                ok: errors[i].as_str().unwrap_or_default().is_empty(),
                ttft_ms: ttfts[i].as_f64().unwrap() * 1000.0,
                tpot_ms: if n > 1.0 { gaps / (n - 1.0) } else { 0.0 },
                input_tokens: ins[i].as_f64().unwrap(),
                output_tokens: n,
            }
        })
        .collect()
}

/// The good requests of a point against TTFT ≤ `ttft_ms` and TPOT ≤ `tpot_ms`, as vLLM's
/// `--goodput` judges them (a failed request is never good).
pub fn good(point: &Value, ttft_ms: f64, tpot_ms: f64) -> Vec<Request> {
    requests(point)
        .into_iter()
        .filter(|r| r.ok && r.ttft_ms <= ttft_ms && r.tpot_ms <= tpot_ms)
        .collect()
}

/// The brief's targets every test here uses: TTFT ≤ 500 ms and TPOT ≤ 60 ms (95th percentile),
/// at most 5 % errors.
pub const TTFT_MS: f64 = 500.0;
pub const TPOT_MS: f64 = 60.0;

pub fn targets() -> Value {
    json!({ "ttft_p95_ms": TTFT_MS, "itl_p95_ms": TPOT_MS, "error_rate": 0.05 })
}

/// A card of stage-3 criteria only, so a trial is accepted on its load test alone: TTFT p95 ≤ 500
/// ms, ≥ 95 % of requests inside every target, ≤ 5 % errors.
pub fn load_card() -> Value {
    json!([
        { "key": "serving.ttft_p95_ms", "op": "le", "threshold": TTFT_MS, "stage": 3, "required": true },
        { "key": "serving.slo_attainment", "op": "ge", "threshold": 0.95, "stage": 3, "required": true },
        { "key": "serving.error_rate", "op": "le", "threshold": 0.05, "stage": 3, "required": true },
    ])
}
