//! Serving-benchmark results → `serving.*` keys.
//!
//! Recognised: vLLM `benchmark_serving.py --save-result` / `vllm bench serve` result JSON (also JSON
//! Lines from `--append-result`), its console `Serving Benchmark Result` block, the vLLM nightly
//! results table (row list or pandas columnar dict), llmperf `*_summary.json`, GenAI-Perf CSV exports
//! (`analyze` column-wise and `profile` row-wise layouts). GuideLLM / AIPerf exports are not
//! recognised yet (no real sample): they fail with a clear error.
//!
//! Keys: `serving.<metric>_<stat>_ms` with metric ∈ ttft, tpot, itl, e2e and stat ∈ mean, p50
//! (median), pNN as present (`p99.9` → `p99_9`); only percentiles the input contains are reported.
//! Per-request arrays (`ttfts`, `itls`, `errors`) give EXACT ttft/itl p50/p95/p99 (numpy-linear, as
//! vLLM computes them, successful requests only) and win over the summary. Also
//! `serving.request_throughput_rps`, `serving.output_tokens_per_s`, `serving.total_tokens_per_s`,
//! `serving.completed`, `serving.failed`, `serving.error_rate` = failed / (completed + failed) when
//! derivable. Inputs with several runs: see the module docs of `parsers` (`serving.by_run.*`).

use super::{bench_serving_text, text, ParseError, Parsed};
use serde_json::{Map, Value};

#[derive(Default)]
pub(crate) struct Run {
    pub(crate) name: String,
    pub(crate) vals: Vec<(String, f64)>,
}

impl Run {
    pub(crate) fn set(&mut self, k: impl Into<String>, v: f64) {
        let k = k.into();
        self.vals.retain(|(x, _)| *x != k);
        self.vals.push((k, v));
    }
    pub(crate) fn get(&self, k: &str) -> Option<f64> {
        self.vals.iter().find(|(x, _)| x == k).map(|(_, v)| *v)
    }
}

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let t = s.trim_start();
    let mut p = Parsed::default();
    let runs = if t.starts_with('{') || t.starts_with('[') {
        json_runs(s, &mut p)?
    } else if s.contains("Serving Benchmark Result") {
        p.tool = Some("vllm bench serve".into());
        vec![bench_serving_text::console(s, &mut p)?]
    } else if s.contains("Time To First Token") || s.contains("Request Throughput") || s.contains("Inter Token Latency")
    {
        p.tool = Some("genai-perf".into());
        bench_serving_text::genai_perf(s, &mut p)?
    } else {
        return Err(ParseError::at(
            1,
            "unrecognised benchmark output (expected vLLM result JSON/console, nightly table, llmperf summary or GenAI-Perf CSV)",
        ));
    };
    emit(&mut p, runs);
    Ok(p)
}

fn emit(p: &mut Parsed, mut runs: Vec<Run>) {
    for r in runs.iter_mut() {
        if let (Some(c), Some(f)) = (r.get("completed"), r.get("failed")) {
            if c + f > 0.0 && c >= 0.0 && f >= 0.0 {
                r.set("error_rate", f / (c + f));
            }
        }
    }
    let put = |p: &mut Parsed, prefix: &str, r: &Run| {
        for (k, v) in &r.vals {
            let key = format!("{prefix}.{k}");
            if k == "completed" || k == "failed" || k == "max_concurrency" {
                p.count(&key, *v);
            } else {
                p.nonneg(&key, *v);
            }
        }
    };
    if runs.len() > 1 {
        let best = runs
            .iter()
            .enumerate()
            .max_by(|a, b| {
                let x = a.1.get("request_throughput_rps").unwrap_or(f64::NEG_INFINITY);
                let y = b.1.get("request_throughput_rps").unwrap_or(f64::NEG_INFINITY);
                x.total_cmp(&y).then(b.0.cmp(&a.0))
            })
            .map(|(i, _)| i)
            .unwrap_or(0);
        for (i, r) in runs.iter_mut().enumerate() {
            if r.name.is_empty() || r.name.contains(char::is_whitespace) {
                r.name = if r.name.is_empty() {
                    format!("run{}", i + 1)
                } else {
                    r.name.replace(char::is_whitespace, "_")
                };
            }
        }
        for r in &runs {
            put(p, &format!("serving.by_run.{}", r.name), r);
        }
        if let Some(r) = runs.get(best) {
            p.warn(format!(
                "{} runs in this file; un-suffixed keys are from {:?}, the run with the highest request throughput",
                runs.len(),
                r.name
            ));
            put(p, "serving", r);
            p.text("serving.run", r.name.clone());
        }
    } else if let Some(r) = runs.first() {
        put(p, "serving", r);
    }
    if runs.iter().all(|r| r.vals.is_empty()) {
        p.warn("no serving metrics found");
    }
}

/// `mean_ttft_ms`-style stat names → key suffix (`ttft_p50_ms`), None for std/unknown.
pub(crate) fn latency_key(metric: &str, stat: &str) -> Option<String> {
    let m = match metric.to_ascii_lowercase().as_str() {
        "ttft" | "time to first token" => "ttft",
        "tpot" | "time per output token" => "tpot",
        "itl" | "inter token latency" | "inter-token latency" => "itl",
        "e2el" | "e2e" | "request latency" | "end to end latency" => "e2e",
        _ => return None,
    };
    let st = stat.to_ascii_lowercase();
    let st = st.trim_end_matches('.');
    let s = match st {
        "mean" | "avg" | "average" => "mean".to_string(),
        "median" | "p50" => "p50".to_string(),
        x if x.starts_with('p') && x.len() > 1 && x[1..].chars().all(|c| c.is_ascii_digit() || c == '.') => {
            x.replace('.', "_")
        }
        _ => return None,
    };
    Some(format!("{m}_{s}_ms"))
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => text::lenient_number(s),
        _ => None,
    }
}

fn json_runs(s: &str, p: &mut Parsed) -> Result<Vec<Run>, ParseError> {
    let v = match serde_json::from_str::<Value>(s) {
        Ok(v) => v,
        Err(e) => {
            // JSON Lines (`--append-result`): one object per line.
            let lines: Vec<(usize, &str)> = s.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).collect();
            if lines.len() > 1 && lines.iter().all(|(_, l)| l.trim_start().starts_with('{')) {
                let mut out = Vec::new();
                for (i, l) in lines {
                    match serde_json::from_str::<Value>(l) {
                        Ok(Value::Object(o)) => out.push(o),
                        Ok(_) => p.warn(format!("line {}: not a JSON object; skipped", i + 1)),
                        Err(e) if out.is_empty() => {
                            return Err(ParseError::at_col(
                                i + 1,
                                e.column().max(1),
                                format!("invalid JSON Lines record: {e}"),
                            ));
                        }
                        Err(e) => p.warn(format!("line {}: invalid JSON Lines record skipped ({e})", i + 1)),
                    }
                }
                let mut runs = Vec::new();
                for (i, o) in out.iter().enumerate() {
                    let mut r = vllm_result(o, p);
                    if r.name.is_empty() {
                        r.name = format!("run{}", i + 1);
                    }
                    runs.push(r);
                }
                return Ok(runs);
            }
            let _ = e;
            return text::json_value(s).map(|_| Vec::new());
        }
    };
    match &v {
        Value::Array(rows) if rows.iter().any(|r| r.get("Test name").is_some()) => {
            p.tool = Some("vllm nightly benchmark".into());
            Ok(rows.iter().filter_map(Value::as_object).map(table_row).collect())
        }
        Value::Object(o) if o.get("serving").is_some_and(Value::is_object) => {
            p.tool = Some("vllm nightly benchmark".into());
            Ok(columnar(
                o.get("serving").and_then(Value::as_object).unwrap_or(&Map::new()),
            ))
        }
        Value::Object(o) if o.keys().any(|k| k.starts_with("results_")) => {
            p.tool = Some("llmperf".into());
            p.tool_version = o.get("version").and_then(Value::as_str).map(str::to_string);
            Ok(vec![llmperf(o)])
        }
        Value::Object(o)
            if o.contains_key("completed")
                || o.contains_key("request_throughput")
                || o.keys().any(|k| k.ends_with("_ttft_ms")) =>
        {
            Ok(vec![vllm_result(o, p)])
        }
        _ => Err(ParseError::at(
            1,
            "unrecognised benchmark JSON (no vLLM result keys, nightly table, or llmperf results_* keys)",
        )),
    }
}

fn vllm_result(o: &Map<String, Value>, p: &mut Parsed) -> Run {
    p.tool.get_or_insert_with(|| "vllm bench serve".into());
    let mut r = Run {
        name: o.get("label").and_then(Value::as_str).unwrap_or_default().to_string(),
        ..Default::default()
    };
    for (k, v) in o {
        if let Some(rest) = k.strip_suffix("_ms") {
            if let Some((stat, metric)) = rest.split_once('_') {
                if let (Some(key), Some(x)) = (latency_key(metric, stat), num(v)) {
                    r.set(key, x);
                }
            }
        }
    }
    let map = [
        ("completed", "completed"),
        ("failed", "failed"),
        ("request_throughput", "request_throughput_rps"),
        ("output_throughput", "output_tokens_per_s"),
        ("total_token_throughput", "total_tokens_per_s"),
        ("request_goodput", "goodput_rps"),
        ("request_goodput:", "goodput_rps"),
        ("duration", "duration_s"),
        ("max_concurrency", "max_concurrency"),
    ];
    for (src, dst) in map {
        if let Some(x) = o.get(src).and_then(num) {
            r.set(dst, x);
        }
    }
    let errors = o.get("errors").and_then(Value::as_array);
    if r.get("failed").is_none() {
        if let Some(e) = errors {
            let f = e.iter().filter(|x| x.as_str().is_some_and(|s| !s.is_empty())).count();
            r.set("failed", f as f64);
        } else if let (Some(n), Some(c)) = (o.get("num_prompts").and_then(num), r.get("completed")) {
            if n >= c {
                r.set("failed", n - c);
            }
        }
    }
    if let Some(m) = o.get("model_id").and_then(Value::as_str) {
        p.text("serving.model", m);
    }
    if let Some(b) = o
        .get("backend")
        .or_else(|| o.get("endpoint_type"))
        .and_then(Value::as_str)
    {
        p.text("serving.backend", b);
    }
    // exact percentiles from per-request data
    let ok = |i: usize| {
        errors
            .and_then(|e| e.get(i))
            .is_none_or(|x| x.as_str().is_none_or(str::is_empty))
    };
    if let Some(t) = o.get("ttfts").and_then(Value::as_array) {
        let xs: Vec<f64> = t
            .iter()
            .enumerate()
            .filter(|(i, _)| ok(*i))
            .filter_map(|(_, x)| x.as_f64())
            .map(|x| x * 1000.0)
            .collect();
        exact(&mut r, "ttft", xs);
    }
    if let Some(t) = o.get("itls").and_then(Value::as_array) {
        let xs: Vec<f64> = t
            .iter()
            .enumerate()
            .filter(|(i, _)| ok(*i))
            .filter_map(|(_, x)| x.as_array())
            .flatten()
            .filter_map(Value::as_f64)
            .map(|x| x * 1000.0)
            .collect();
        exact(&mut r, "itl", xs);
    }
    r
}

fn exact(r: &mut Run, metric: &str, mut xs: Vec<f64>) {
    xs.retain(|x| x.is_finite());
    if xs.is_empty() {
        return;
    }
    xs.sort_by(f64::total_cmp);
    for (name, q) in [("p50", 0.50), ("p95", 0.95), ("p99", 0.99)] {
        let pos = q * (xs.len() - 1) as f64;
        let lo = pos.floor() as usize;
        let hi = (lo + 1).min(xs.len() - 1);
        if let (Some(a), Some(b)) = (xs.get(lo), xs.get(hi)) {
            r.set(format!("{metric}_{name}_ms"), a + (b - a) * (pos - lo as f64));
        }
    }
}

/// `Mean TTFT (ms)`, `P99 ITL (ms)`, … → key suffix.
pub(crate) fn label_latency(label: &str) -> Option<String> {
    let l = label.strip_suffix("(ms)")?.trim();
    let (stat, metric) = l.split_once(' ')?;
    latency_key(metric.trim(), stat)
}

fn table_row(o: &Map<String, Value>) -> Run {
    let mut r = Run {
        name: o
            .get("Test name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        ..Default::default()
    };
    for (k, v) in o {
        let Some(x) = num(v) else { continue };
        if let Some(key) = label_latency(k) {
            r.set(key, x);
        }
        match k.as_str() {
            "Tput (req/s)" => r.set("request_throughput_rps", x),
            "Output Tput (tok/s)" => r.set("output_tokens_per_s", x),
            "Total Tput (tok/s)" => r.set("total_tokens_per_s", x),
            _ => {}
        }
    }
    r
}

fn columnar(cols: &Map<String, Value>) -> Vec<Run> {
    let mut rows: Vec<(String, Map<String, Value>)> = Vec::new();
    for (col, cells) in cols {
        for (rk, v) in cells.as_object().into_iter().flatten() {
            if let Some(row) = rows.iter_mut().find(|(k, _)| k == rk) {
                row.1.insert(col.clone(), v.clone());
            } else if rows.len() < 10_000 {
                let mut m = Map::new();
                m.insert(col.clone(), v.clone());
                rows.push((rk.clone(), m));
            }
        }
    }
    rows.iter().map(|(_, m)| table_row(m)).collect()
}

fn llmperf(o: &Map<String, Value>) -> Run {
    let mut r = Run {
        name: o.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
        ..Default::default()
    };
    for (k, v) in o {
        let Some(x) = num(v) else { continue };
        for (src, metric) in [
            ("results_ttft_s_", "ttft"),
            ("results_inter_token_latency_s_", "itl"),
            ("results_end_to_end_latency_s_", "e2e"),
        ] {
            if let Some(stat) = k.strip_prefix(src) {
                let stat = stat.strip_prefix("quantiles_").unwrap_or(stat);
                if let Some(key) = latency_key(metric, stat) {
                    r.set(key, x * 1000.0);
                }
            }
        }
    }
    let g = |k: &str| o.get(k).and_then(num);
    if let Some(c) = g("results_num_completed_requests") {
        r.set("completed", c);
    }
    if let Some(f) = g("results_number_errors") {
        r.set("failed", f);
    }
    if let Some(x) = g("results_mean_output_throughput_token_per_s") {
        r.set("output_tokens_per_s", x);
    }
    if let Some(x) = g("results_num_completed_requests_per_min") {
        r.set("request_throughput_rps", x / 60.0);
    }
    r
}
