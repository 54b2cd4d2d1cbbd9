//! NVIDIA's load generators: GenAI-Perf `profile_export_genai_perf.json` and its successor AIPerf's
//! `profile_export_aiperf.json` (one object of statistics per metric:
//! `"time_to_first_token": {"unit": "ms", "avg": …, "p50": …, "p99": …}`), and AIPerf's per-request
//! `profile_export.jsonl` (`{"metadata": {…}, "metrics": {"time_to_first_token": {"value": …, "unit":
//! "ms"}, …}, "error": null}` per line).
//!
//! Metric names → keys: `time_to_first_token` → ttft, `inter_token_latency` → itl (both tools average
//! it per request, the same figure as vLLM's TPOT, so it also gives the tpot keys the brief's target
//! is judged on, where the file has no `time_per_output_token`), `time_per_output_token` → tpot,
//! `request_latency` → e2e; statistics `avg` → mean, `p50`, `pNN` as present; units converted to ms.
//! `request_throughput`, `output_token_throughput`, `total_token_throughput`, `request_count`,
//! `error_request_count`, `benchmark_duration` give the throughput, count and duration keys.

use super::bench_run::{exact, latency_key, ms_per, num, Run};
use super::slo::RequestSample;
use super::Parsed;
use serde_json::{Map, Value};

/// Metrics whose statistics are latencies, with the metric name `latency_key` knows them by.
/// Early AIPerf releases tag time to first token `ttft`.
const LATENCIES: [(&str, &str); 5] = [
    ("time_to_first_token", "ttft"),
    ("ttft", "ttft"),
    ("inter_token_latency", "itl"),
    ("time_per_output_token", "tpot"),
    ("request_latency", "e2e"),
];

/// An object of statistics: a `unit` and at least one number.
fn is_stats(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|o| o.contains_key("unit") && o.iter().any(|(k, v)| k != "unit" && num(v).is_some()))
}

/// A GenAI-Perf / AIPerf summary: two or more of the headline metrics as objects of statistics, at
/// the top level or (early AIPerf releases) under `records`.
pub(crate) fn is_summary(o: &Map<String, Value>) -> bool {
    has_headline_stats(o) || early_records(o).is_some()
}

fn has_headline_stats(o: &Map<String, Value>) -> bool {
    [
        "request_throughput",
        "request_latency",
        "time_to_first_token",
        "ttft",
        "inter_token_latency",
        "output_token_throughput",
    ]
    .iter()
    .filter(|k| o.get(**k).is_some_and(is_stats))
    .count()
        >= 2
}

/// The statistics of an early AIPerf export (2025): `{"records": {"ttft": {…}, …}, "input_config":
/// …, "error_summary": …}`.
fn early_records(o: &Map<String, Value>) -> Option<&Map<String, Value>> {
    o.get("records")
        .and_then(Value::as_object)
        .filter(|r| has_headline_stats(r))
}

/// An AIPerf per-request record: `metrics` holds one `{"value": …, "unit": …}` per figure (none
/// for a request that failed).
pub(crate) fn is_record(o: &Map<String, Value>) -> bool {
    o.get("metadata").is_some_and(Value::is_object)
        && !is_aggregate(o)
        && o.get("metrics").is_some_and(|m| {
            m.is_null()
                || m.as_object()
                    .is_some_and(|m| m.values().all(|v| v.get("value").is_some()))
        })
}

/// AIPerf's aggregate over several profile runs (`profile_export_aiperf_aggregate.json`:
/// `metadata.aggregation_type`, and per `<metric>_<stat>` the runs' mean, spread and confidence
/// bounds): no run's own figures, and no request counts.
pub(crate) fn is_aggregate(o: &Map<String, Value>) -> bool {
    o.get("metadata").and_then(|m| m.get("aggregation_type")).is_some()
}

/// The `avg` of a statistics object, scaled to ms when it is a duration with a unit we know.
fn avg(o: &Map<String, Value>, key: &str) -> Option<f64> {
    o.get(key)?.get("avg").and_then(num)
}

/// One read per field of the stats JSON, in its order.
pub(crate) fn summary(top: &Map<String, Value>, p: &mut Parsed) -> Run {
    // The statistics; the run's configuration and errors stay at the top level in either shape.
    let o = early_records(top).unwrap_or(top);
    if let Some(v) = top.get("aiperf_version").and_then(Value::as_str) {
        p.tool = Some("aiperf".into());
        p.tool_version = Some(v.to_owned());
    } else if early_records(top).is_some() {
        p.tool = Some("aiperf".into());
    } else {
        p.tool = Some("genai-perf".into());
        p.tool_version = o.get("genai_perf_version").and_then(Value::as_str).map(str::to_owned);
    }
    let mut r = Run::default();
    read_latencies(o, &mut r, p);
    let plain = [
        ("request_throughput", "request_throughput_rps"),
        ("output_token_throughput", "output_tokens_per_s"),
        ("total_token_throughput", "total_tokens_per_s"),
        ("request_count", "completed"),
        ("error_request_count", "failed"),
    ];
    for (src, dst) in plain {
        if let Some(x) = avg(o, src) {
            r.set(dst, x);
        }
    }
    if let Some(stats) = o.get("benchmark_duration").and_then(Value::as_object) {
        let unit = stats.get("unit").and_then(Value::as_str).unwrap_or("sec");
        if let (Some(x), Some(scale)) = (stats.get("avg").and_then(num), ms_per(unit)) {
            r.set("duration_s", x * scale / 1000.0);
        }
    }
    if r.get("completed").is_some() && r.get("failed").is_none() {
        // AIPerf writes error_request_count only when there were errors.
        if top
            .get("error_summary")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            r.set("failed", 0.0);
        }
    }
    if let Some(errs) = top
        .get("error_summary")
        .and_then(Value::as_array)
        .filter(|e| !e.is_empty() && r.get("failed").is_none())
    {
        // Errors without a count of the requests they failed: no error rate can be given.
        p.warn(format!(
            "the run reported {} kind(s) of request error but no count of failed requests (error_request_count): \
             serving.error_rate is not given",
            errs.len()
        ));
    }
    if top.get("was_cancelled").and_then(Value::as_bool) == Some(true) {
        p.warn("the run was cancelled before it finished");
    }
    if let Some(cfg) = top.get("input_config").and_then(Value::as_object) {
        read_input_config(cfg, &mut r, p);
    }
    r
}

/// The latency statistics, scaled to ms; a statistic in a unit that is no duration is not read.
fn read_latencies(o: &Map<String, Value>, r: &mut Run, p: &mut Parsed) {
    for (name, metric) in LATENCIES {
        let Some(stats) = o.get(name).and_then(Value::as_object) else {
            continue;
        };
        let unit = stats.get("unit").and_then(Value::as_str).unwrap_or("ms");
        let Some(scale) = ms_per(unit) else {
            p.warn(format!("{name}: unit {unit:?} is not a duration; not read"));
            continue;
        };
        // Both tools' inter-token latency is per request, (latency − TTFT) ÷ (tokens − 1): TPOT.
        let also_tpot = name == "inter_token_latency" && !o.contains_key("time_per_output_token");
        for (stat, v) in stats {
            let Some(x) = num(v) else { continue };
            if let Some(key) = latency_key(metric, stat) {
                r.set(key, x * scale);
            }
            if let Some(key) = latency_key("tpot", stat).filter(|_| also_tpot) {
                r.set(key, x * scale);
            }
        }
    }
}

/// The model and the concurrency from the run's configuration, in any of the shapes GenAI-Perf
/// and AIPerf have written it.
fn read_input_config(cfg: &Map<String, Value>, r: &mut Run, p: &mut Parsed) {
    // GenAI-Perf: "model": ["name"]; AIPerf: "models": {"items": [{"name": …}]}; early AIPerf:
    // "endpoint": {"model_names": ["name"]}.
    let model = cfg
        .get("model")
        .and_then(|m| m.as_array().and_then(|a| a.first()).or(Some(m)))
        .and_then(Value::as_str)
        .or_else(|| {
            cfg.get("models")?
                .get("items")?
                .as_array()?
                .first()?
                .get("name")?
                .as_str()
        })
        .or_else(|| cfg.get("endpoint")?.get("model_names")?.as_array()?.first()?.as_str());
    if let Some(m) = model {
        p.text("serving.model", m);
    }
    let concurrency = cfg
        .get("concurrency")
        .or_else(|| cfg.get("loadgen")?.get("concurrency"))
        .and_then(num)
        .or_else(|| {
            cfg.get("phases")?
                .as_array()?
                .iter()
                .find(|ph| ph.get("name").and_then(Value::as_str) == Some("profiling"))?
                .get("concurrency")
                .and_then(num)
        });
    if let Some(c) = concurrency {
        r.set("load_concurrency", c);
    }
}

/// A metric of a per-request record in ms: `{"value": x, "unit": "ms"}` or a bare number.
fn record_ms(metrics: &Map<String, Value>, key: &str) -> Option<f64> {
    match metrics.get(key)? {
        Value::Object(m) => {
            let x = m.get("value").and_then(num)?;
            let unit = m.get("unit").and_then(Value::as_str).unwrap_or("ms");
            Some(x * ms_per(unit)?)
        }
        v => num(v),
    }
    .filter(|x| x.is_finite())
}

fn record_count(metrics: &Map<String, Value>, key: &str) -> Option<f64> {
    match metrics.get(key)? {
        Value::Object(m) => m.get("value").and_then(num),
        v => num(v),
    }
    .filter(|x| x.is_finite() && *x >= 0.0)
}

/// One run from AIPerf per-request records `(line, record)`. Warm-up records are left out.
pub(crate) fn records<'a>(recs: impl Iterator<Item = (usize, &'a Map<String, Value>)>, p: &mut Parsed) -> Run {
    p.tool = Some("aiperf".into());
    let mut r = Run::default();
    let (mut ttfts, mut e2es, mut itls) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ok, mut failed, mut warmup) = (0usize, 0usize, 0usize);
    let mut tokens = 0.0;
    let (mut start, mut end) = (f64::INFINITY, f64::NEG_INFINITY);
    for (ln, rec) in recs {
        let meta = rec.get("metadata").and_then(Value::as_object);
        if let Some(phase) = meta.and_then(|m| m.get("benchmark_phase")).and_then(Value::as_str) {
            if phase != "profiling" {
                warmup += 1;
                continue;
            }
        }
        if let Some(m) = meta {
            if let Some(s) = m.get("request_start_ns").and_then(num) {
                start = start.min(s);
            }
            if let Some(e) = m.get("request_end_ns").and_then(num) {
                end = end.max(e);
            }
        }
        let error = rec.get("error").is_some_and(|e| !e.is_null());
        let metrics = rec.get("metrics").and_then(Value::as_object);
        if error || metrics.is_none() {
            failed += 1;
            r.requests.push(RequestSample::default());
            continue;
        }
        let Some(m) = metrics else { continue };
        let sample = RequestSample {
            ok: true,
            ttft_ms: record_ms(m, "time_to_first_token"),
            tpot_ms: record_ms(m, "inter_token_latency"),
            e2e_ms: record_ms(m, "request_latency"),
            ..RequestSample::default()
        };
        if sample.ttft_ms.is_none() && sample.e2e_ms.is_none() {
            p.warn(format!(
                "line {ln}: a record without time_to_first_token or request_latency"
            ));
        }
        ttfts.extend(sample.ttft_ms);
        e2es.extend(sample.e2e_ms);
        itls.extend(sample.tpot_ms);
        tokens += record_count(m, "output_sequence_length")
            .or_else(|| record_count(m, "output_token_count"))
            .unwrap_or(0.0);
        ok += 1;
        r.requests.push(sample);
    }
    if warmup > 0 {
        p.warn(format!("{warmup} warm-up record(s) left out"));
    }
    exact(&mut r, "ttft", ttfts);
    exact(&mut r, "e2e", e2es);
    // Each record's inter-token latency is its own average gap: TPOT as vLLM computes it.
    exact(&mut r, "tpot", itls.clone());
    exact(&mut r, "itl", itls);
    r.set("completed", ok as f64);
    r.set("failed", failed as f64);
    // The window runs from the first request sent to the last answer received, as AIPerf's own
    // benchmark duration does.
    if end > start {
        let secs = (end - start) / 1e9;
        r.set("duration_s", secs);
        r.set("request_throughput_rps", ok as f64 / secs);
        if tokens > 0.0 {
            r.set("output_tokens_per_s", tokens / secs);
        }
    }
    r
}
