//! What every serving-benchmark reader produces: one [`Run`] per load point, with its figures under
//! key suffixes (`ttft_p99_ms`, `request_throughput_rps`, …) and, where the file has them, the
//! per-request figures the SLO attainment is computed from. Shared by the JSON readers
//! (`bench_serving`, `bench_stats_json`, `bench_guidellm`) and the text readers
//! (`bench_serving_text`), which import this module and never each other.

use super::slo::RequestSample;
use super::text;
use serde_json::Value;

#[derive(Default)]
pub(crate) struct Run {
    pub(crate) name: String,
    pub(crate) vals: Vec<(String, f64)>,
    /// Per-request figures, when the file has them (empty otherwise).
    pub(crate) requests: Vec<RequestSample>,
    /// The per-request e2e latency and TPOT were rebuilt from inter-token gaps (vLLM's arrays).
    pub(crate) latency_rebuilt: bool,
}

impl Run {
    pub(crate) fn named(name: impl Into<String>) -> Run {
        Run {
            name: name.into(),
            ..Default::default()
        }
    }
    pub(crate) fn set(&mut self, k: impl Into<String>, v: f64) {
        let k = k.into();
        self.vals.retain(|(x, _)| *x != k);
        // A tool's `-0.00` is 0 (SGLang prints a median TPOT of -0.00).
        self.vals.push((k, if v == 0.0 { 0.0 } else { v }));
    }
    pub(crate) fn get(&self, k: &str) -> Option<f64> {
        self.vals.iter().find(|(x, _)| x == k).map(|(_, v)| *v)
    }
}

/// `mean_ttft_ms`-style stat names → key suffix (`ttft_p50_ms`), None for std/unknown.
pub(crate) fn latency_key(metric: &str, stat: &str) -> Option<String> {
    let m = match metric.to_ascii_lowercase().as_str() {
        "ttft" | "time to first token" | "time_to_first_token" => "ttft",
        "tpot" | "time per output token" | "time_per_output_token" => "tpot",
        "itl" | "inter token latency" | "inter-token latency" | "inter_token_latency" => "itl",
        "e2el" | "e2e" | "e2e_latency" | "e2e latency" | "request latency" | "request_latency"
        | "end to end latency" => "e2e",
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

/// `Mean TTFT (ms)`, `P99 ITL (ms)`, `Median E2E Latency (ms)` … → key suffix.
pub(crate) fn label_latency(label: &str) -> Option<String> {
    let l = label.strip_suffix("(ms)")?.trim();
    let (stat, metric) = l.split_once(' ')?;
    latency_key(metric.trim(), stat)
}

/// A JSON number, or a string holding one (llmperf writes `"550"`).
pub(crate) fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => text::lenient_number(s),
        _ => None,
    }
}

/// Milliseconds per unit of a duration as the tools spell it; None for anything else.
pub(crate) fn ms_per(unit: &str) -> Option<f64> {
    match unit.trim().to_ascii_lowercase().as_str() {
        "ms" | "msec" | "milliseconds" => Some(1.0),
        "s" | "sec" | "secs" | "seconds" => Some(1000.0),
        "us" | "µs" | "usec" | "microseconds" => Some(1e-3),
        "ns" | "nsec" | "nanoseconds" => Some(1e-6),
        _ => None,
    }
}

/// A run name without spaces or dots, so `serving.by_run.<name>.<suffix>` splits cleanly.
pub(crate) fn run_label(kind: &str, value: Option<f64>, unit: &str) -> String {
    match value {
        Some(v) if v.is_finite() => {
            let v = if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v}").replace('.', "_")
            };
            format!("{kind}_{v}{unit}")
        }
        _ => kind.to_owned(),
    }
}

/// Exact p50 / p95 / p99 of `xs` (numpy's linear interpolation, as vLLM computes them) under
/// `<metric>_<pNN>_ms`; non-finite values are dropped.
pub(crate) fn exact(r: &mut Run, metric: &str, mut xs: Vec<f64>) {
    xs.retain(|x| x.is_finite());
    if xs.is_empty() {
        return;
    }
    // Order statistics by selection instead of a full sort. `total_cmp` is a total order, so the
    // k-th element is the same value a sort would put at k. The ranks only grow with q, so each
    // selection works on the part above the previous one: `xs[..base]` holds the `base` smallest.
    let last = xs.len() - 1;
    let mut base = 0;
    for (name, q) in [("p50", 0.50), ("p95", 0.95), ("p99", 0.99)] {
        let pos = q * last as f64;
        let lo = pos.floor() as usize;
        let Some(rest) = xs.get_mut(base..) else { continue };
        let Some(k) = lo.checked_sub(base).filter(|k| *k < rest.len()) else {
            continue;
        };
        let (_, a, above) = rest.select_nth_unstable_by(k, f64::total_cmp);
        let a = *a;
        // The next order statistic (rank lo + 1) is the smallest element above.
        let b = if lo >= last {
            a
        } else {
            match above
                .iter()
                .copied()
                .reduce(|m, x| if x.total_cmp(&m).is_lt() { x } else { m })
            {
                Some(b) => b,
                None => continue,
            }
        };
        base = lo;
        r.set(format!("{metric}_{name}_ms"), a + (b - a) * (pos - lo as f64));
    }
}
