//! GuideLLM `benchmarks.json`: one benchmark per load point of a run or sweep (`synchronous`,
//! `throughput`, `constant` / `poisson` at a rate, `concurrent` at a number of streams), each with
//! `metrics.<name>.successful` statistics (`mean`, `median`, `percentiles.pNN`) and, unless sampled
//! away, the requests themselves (`requests.successful[]`, `errored[]`, `incomplete[]`).
//!
//! Each load point becomes a run named by its rate (`constant_4_5rps`, `concurrent_32`,
//! `synchronous`). Latency metrics: `time_to_first_token_ms` → ttft, `inter_token_latency_ms` →
//! tpot and itl, `request_latency` (seconds) → e2e. GuideLLM's per-request
//! `inter_token_latency_ms` is (last token − first token) ÷ (output tokens − 1), vLLM's TPOT; its
//! `time_per_output_token_ms` is not: it counts from the request's start, TTFT included (from 0.3;
//! 0.2 divided by all the tokens), so it is not read. Requests that were still
//! running when the benchmark ended (`incomplete`) neither met nor missed a target: they are left out
//! of the attainment; errored ones are misses.
//!
//! The schema moved between GuideLLM releases (the strategy under `args`, `config` or `scheduler`;
//! `request_totals` inside or beside `metrics`); each figure is looked up in the places it has been.

use super::bench_run::{latency_key, num, run_label, Run};
use super::slo::RequestSample;
use super::{ParseError, Parsed};
use serde_json::{Map, Value};

/// A GuideLLM report: a `benchmarks` list whose entries carry `metrics`.
pub(crate) fn is_report(o: &Map<String, Value>) -> bool {
    o.get("benchmarks")
        .and_then(Value::as_array)
        .and_then(|b| b.first())
        .is_some_and(|b| b.get("metrics").is_some_and(Value::is_object))
}

/// Latency metrics: (GuideLLM name, key metric, ms per unit of the value).
const LATENCIES: [(&str, &str, f64); 5] = [
    ("time_to_first_token_ms", "ttft", 1.0),
    ("inter_token_latency_ms", "tpot", 1.0),
    ("inter_token_latency_ms", "itl", 1.0),
    ("request_latency", "e2e", 1000.0),
    ("request_latency_ms", "e2e", 1.0),
];

/// GuideLLM's percentile names → ours (`p999` is the 99.9th).
fn percentile(name: &str) -> Option<&'static str> {
    Some(match name {
        "p25" => "p25",
        "p50" => "p50",
        "p75" => "p75",
        "p90" => "p90",
        "p95" => "p95",
        "p99" => "p99",
        "p999" => "p99.9",
        _ => return None,
    })
}

pub(crate) fn runs(o: &Map<String, Value>, p: &mut Parsed) -> Result<Vec<Run>, ParseError> {
    p.tool = Some("guidellm".into());
    p.tool_version = o
        .get("metadata")
        .and_then(|m| m.get("guidellm_version"))
        .or_else(|| o.get("guidellm_version"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let benchmarks: &[Value] = o
        .get("benchmarks")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::new();
    for (i, b) in benchmarks.iter().enumerate() {
        let Some(b) = b.as_object() else {
            p.warn(format!("benchmarks[{i}] is not an object; skipped"));
            continue;
        };
        out.push(benchmark(b, i, p));
    }
    if out.is_empty() {
        return Err(ParseError::at(1, "GuideLLM report without a readable benchmark"));
    }
    if let Some(model) = o
        .get("args")
        .and_then(|a| a.get("model"))
        .or_else(|| benchmarks.first()?.get("config")?.get("backend")?.get("model"))
        .and_then(Value::as_str)
    {
        p.text("serving.model", model);
    }
    Ok(out)
}

/// The strategy of a benchmark, wherever this GuideLLM version put it.
fn strategy(b: &Map<String, Value>) -> Option<&Map<String, Value>> {
    ["config", "args", "scheduler"]
        .iter()
        .find_map(|k| b.get(*k)?.get("strategy")?.as_object())
}

fn name_of(b: &Map<String, Value>, i: usize) -> String {
    let Some(s) = strategy(b) else {
        return format!("benchmark{}", i + 1);
    };
    let kind = s
        .get("type_")
        .or_else(|| s.get("type"))
        .or_else(|| s.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("benchmark");
    match kind {
        "constant" | "poisson" | "async" => run_label(kind, s.get("rate").and_then(num), "rps"),
        "concurrent" => run_label(
            kind,
            s.get("streams").or_else(|| s.get("max_concurrency")).and_then(num),
            "",
        ),
        other => other.to_owned(),
    }
}

/// `metrics.<name>.successful` of a benchmark.
fn successful<'a>(m: &'a Map<String, Value>, name: &str) -> Option<&'a Map<String, Value>> {
    m.get(name)?.get("successful")?.as_object()
}

/// One read per field of a GuideLLM benchmark, in its order.
fn benchmark(b: &Map<String, Value>, i: usize, p: &mut Parsed) -> Run {
    let mut r = Run::named(name_of(b, i));
    read_load(b, &mut r);
    let empty = Map::new();
    let m = b.get("metrics").and_then(Value::as_object).unwrap_or(&empty);
    for (name, metric, scale) in LATENCIES {
        let Some(s) = successful(m, name) else { continue };
        for stat in ["mean", "median"] {
            if let (Some(key), Some(x)) = (latency_key(metric, stat), s.get(stat).and_then(num)) {
                r.set(key, x * scale);
            }
        }
        for (pname, v) in s.get("percentiles").and_then(Value::as_object).into_iter().flatten() {
            if let (Some(ours), Some(x)) = (percentile(pname), num(v)) {
                if let Some(key) = latency_key(metric, ours) {
                    r.set(key, x * scale);
                }
            }
        }
    }
    let means = [
        ("requests_per_second", "request_throughput_rps"),
        ("output_tokens_per_second", "output_tokens_per_s"),
        ("tokens_per_second", "total_tokens_per_s"),
    ];
    for (src, dst) in means {
        if let Some(x) = successful(m, src).and_then(|s| s.get("mean")).and_then(num) {
            r.set(dst, x);
        }
    }
    let totals = m
        .get("request_totals")
        .or_else(|| b.get("request_totals"))
        .or_else(|| b.get("scheduler_metrics")?.get("requests_made"))
        .and_then(Value::as_object);
    if let Some(t) = totals {
        for (src, dst) in [
            ("successful", "completed"),
            ("errored", "failed"),
            ("incomplete", "incomplete"),
        ] {
            if let Some(x) = t.get(src).and_then(num) {
                r.set(dst, x);
            }
        }
    }
    read_requests(b, &mut r, p);
    r
}

/// The load asked for (a rate, or a number of streams) and how long the point ran.
fn read_load(b: &Map<String, Value>, r: &mut Run) {
    if let Some(s) = strategy(b) {
        if let Some(rate) = s.get("rate").and_then(num).filter(|x| x.is_finite() && *x > 0.0) {
            r.set("offered_rps", rate);
        }
        if let Some(streams) = s.get("streams").or_else(|| s.get("max_concurrency")).and_then(num) {
            r.set("load_concurrency", streams);
        }
    }
    let seconds = |o: &Map<String, Value>| {
        o.get("duration").and_then(num).or_else(|| {
            let (start, end) = (o.get("start_time").and_then(num)?, o.get("end_time").and_then(num)?);
            Some(end - start)
        })
    };
    if let Some(d) = seconds(b)
        .or_else(|| b.get("run_stats").and_then(Value::as_object).and_then(seconds))
        .filter(|d| d.is_finite() && *d > 0.0)
    {
        r.set("duration_s", d);
    }
}

/// Per-request figures, when the report kept the requests.
fn read_requests(b: &Map<String, Value>, r: &mut Run, p: &mut Parsed) {
    let reqs = b.get("requests").and_then(Value::as_object);
    let list = |k: &str| reqs.and_then(|q| q.get(k)).and_then(Value::as_array);
    if let Some(ok) = list("successful") {
        let errored = list("errored").map_or(0, Vec::len);
        let kept = ok.len() + errored;
        let reported = r.get("completed").unwrap_or(0.0) + r.get("failed").unwrap_or(0.0);
        if kept > 0 && (kept as f64) < reported {
            // GuideLLM 0.4–0.5 keep 10 requests of each status unless told otherwise
            // (`--sample-requests`): the share of a stratified sample is not the run's, and its
            // good requests over the run's duration are a fraction of the goodput.
            p.warn(format!(
                "run {:?}: the report kept {kept} of {reported} requests (GuideLLM 0.4–0.5 keep 10 of each \
                 status unless run with --sample-requests -1): attainment and goodput are not computed from a sample",
                r.name
            ));
            return;
        }
        for q in ok {
            let Some(q) = q.as_object() else { continue };
            let get = |names: &[(&str, f64)]| {
                names
                    .iter()
                    .find_map(|(n, scale)| q.get(*n).and_then(num).map(|x| x * scale))
                    .filter(|x| x.is_finite())
            };
            r.requests.push(RequestSample {
                ok: true,
                ttft_ms: get(&[("time_to_first_token_ms", 1.0)]),
                tpot_ms: get(&[("inter_token_latency_ms", 1.0)]),
                e2e_ms: get(&[("request_latency_ms", 1.0), ("request_latency", 1000.0)]),
                input_tokens: get(&[("prompt_tokens", 1.0)]),
                output_tokens: get(&[("output_tokens", 1.0)]),
            });
        }
        r.requests
            .extend(std::iter::repeat_n(RequestSample::default(), errored));
    }
}
