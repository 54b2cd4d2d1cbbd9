//! vLLM `/metrics` → `serving.*` keys: histogram quantiles (Prometheus `histogram_quantile`),
//! counters, gauges; one scrape (cumulative since server start) or a before/after window.
//!
//! * Names differ by version; the first family present wins and is recorded under `vllm.family.*`:
//!   ITL `vllm:inter_token_latency_seconds` (V1) then `vllm:time_per_output_token_seconds` (V0);
//!   KV usage `vllm:kv_cache_usage_perc` then `vllm:gpu_cache_usage_perc`; preemptions
//!   `vllm:num_preemptions_total` then `vllm:num_preemptions`. Ray Serve's `ray_vllm:` prefix is
//!   accepted, and its `ray_vllm_` form (vLLM ≥ 0.11 under Ray turns `:` into `_`). Other labels
//!   (`engine`, Ray's worker labels, `finished_reason`) are summed over; Ray's `Version` label is
//!   Ray's version, not vLLM's.
//! * Per model (`model_name` label): `serving.by_model.<model>.<suffix>`; un-suffixed keys merge all
//!   models (buckets summed per `le`, like `sum by (le)`).
//! * Latency quantiles: p50/p95/p99 for TTFT, ITL, e2e, queue, prefill, decode, in ms.
//! * Empty histogram (count 0): no quantile, a warning.
//! * With the brief's latency targets: `serving.slo_attainment_<ttft|itl|e2e>`, each target's share of
//!   observations estimated from its histogram (marked as an estimate by a warning).

use super::prometheus::{self, Exposition, Sample};
use super::slo::{histogram_share_at_or_below, SloTargets};
use super::{ParseError, Parsed};
use std::collections::{BTreeMap, HashMap};

/// Prometheus `histogram_quantile(q, …)` over cumulative buckets `(upper bound, cumulative count)`,
/// in any order. Same algorithm as Prometheus (`bucketQuantile`): buckets sorted and coalesced,
/// counts forced monotonic, linear interpolation inside the bucket holding rank `q·count`, lower bound
/// 0 for the first bucket (unless its upper bound is ≤ 0, which is then returned), and a rank in the
/// `+Inf` bucket answers with the upper bound of the last finite bucket. Returns `None` where
/// Prometheus returns NaN: no `+Inf` bucket, fewer than 2 buckets, zero observations, NaN input.
/// `q` outside [0, 1] gives ±∞ as in Prometheus. One deviation: an empty target bucket (only possible
/// for q = 0) answers with its lower bound instead of NaN.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    Prepared::new(buckets).quantile(q)
}

/// Buckets sorted, coalesced and made monotonic once, so several quantiles of one histogram do not
/// each copy and sort them.
enum Prepared {
    /// A NaN bound or count: no quantile at all.
    Nan,
    /// No `+Inf` bucket or fewer than 2 buckets: no quantile for q in [0, 1].
    Unusable,
    Buckets(Vec<(f64, f64)>),
}

impl Prepared {
    fn new(buckets: &[(f64, f64)]) -> Prepared {
        if buckets.iter().any(|(u, c)| u.is_nan() || c.is_nan()) {
            return Prepared::Nan;
        }
        let mut b: Vec<(f64, f64)> = buckets.to_vec();
        b.sort_by(|x, y| x.0.total_cmp(&y.0));
        // coalesce equal bounds
        let mut merged: Vec<(f64, f64)> = Vec::with_capacity(b.len());
        for (u, c) in b {
            match merged.last_mut() {
                Some(last) if last.0 == u => last.1 += c,
                _ => merged.push((u, c)),
            }
        }
        let mut b = merged;
        if b.last().map(|x| x.0) != Some(f64::INFINITY) || b.len() < 2 {
            return Prepared::Unusable;
        }
        // ensure monotonic
        let mut max = f64::NEG_INFINITY;
        for x in b.iter_mut() {
            if x.1 < max {
                x.1 = max;
            } else {
                max = x.1;
            }
        }
        Prepared::Buckets(b)
    }

    /// [`histogram_quantile`] of these buckets.
    fn quantile(&self, q: f64) -> Option<f64> {
        if q.is_nan() {
            return None;
        }
        let b = match self {
            Prepared::Nan => return None,
            _ if q < 0.0 => return Some(f64::NEG_INFINITY),
            _ if q > 1.0 => return Some(f64::INFINITY),
            Prepared::Unusable => return None,
            Prepared::Buckets(b) => b,
        };
        let n = b.len();
        let obs = b.get(n - 1)?.1;
        if obs <= 0.0 {
            return None;
        }
        let mut rank = q * obs;
        let idx = b.get(..n - 1)?.iter().position(|x| x.1 >= rank).unwrap_or(n - 1);
        if idx == n - 1 {
            return Some(b.get(n - 2)?.0);
        }
        let first = b.first()?;
        if idx == 0 && first.0 <= 0.0 {
            return Some(first.0);
        }
        let (end, mut count) = *b.get(idx)?;
        let mut start = 0.0;
        if idx > 0 {
            let prev = b.get(idx - 1)?;
            start = prev.0;
            count -= prev.1;
            rank -= prev.1;
        }
        if count <= 0.0 {
            return Some(start);
        }
        Some(start + (end - start) * (rank / count))
    }
}

/// (metric-key stem, candidate families in preference order)
const LATENCIES: &[(&str, &[&str])] = &[
    ("ttft", &["vllm:time_to_first_token_seconds"]),
    (
        "itl",
        &["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"],
    ),
    // Each request's mean time per output token: the figure the brief's inter-token target (and the
    // SLO attainment) judges. `itl` above is every gap, a different distribution.
    ("tpot", &["vllm:request_time_per_output_token_seconds"]),
    ("e2e", &["vllm:e2e_request_latency_seconds"]),
    ("queue_time", &["vllm:request_queue_time_seconds"]),
    ("prefill", &["vllm:request_prefill_time_seconds"]),
    ("decode", &["vllm:request_decode_time_seconds"]),
];
const QUANTILES: &[(&str, f64)] = &[("p50", 0.50), ("p95", 0.95), ("p99", 0.99)];

pub(crate) fn parse(s: &str, targets: &SloTargets) -> Result<Parsed, ParseError> {
    let s = ray_underscored(s);
    let e = prometheus::parse(&s)?;
    let (samples, repeated) = last_of_each_series(&e.samples);
    let mut p = compute(&samples, targets);
    if let Some(w) = repeated {
        p.warn(w);
    }
    if let Some(w) = no_vllm_series(&e.samples) {
        p.warn(w);
    }
    for w in e.warnings {
        p.warn(w);
    }
    Ok(p)
}

fn series_key(s: &Sample) -> String {
    let mut l: Vec<&(&str, std::borrow::Cow<'_, str>)> = s.labels.iter().collect();
    l.sort();
    let mut k = s.name.to_string();
    for (a, b) in l {
        k.push('\u{1f}');
        k.push_str(a);
        k.push('=');
        k.push_str(b);
    }
    k
}

/// A series by its name and its labels in the order written.
type SeriesAsWritten<'s, 'a> = (&'a str, &'s [(&'a str, std::borrow::Cow<'a, str>)]);

/// Each series once, its last sample: two scrapes appended to one file (`curl … >> metrics.txt`) or
/// two collectors of one pod repeat every series, and counted twice their counters and buckets
/// double. Prometheus refuses a repeated series; here the last of each is read, with a warning.
fn last_of_each_series<'s, 'a>(samples: &'s [Sample<'a>]) -> (std::borrow::Cow<'s, [Sample<'a>]>, Option<String>) {
    // A file of two scrapes repeats its first series; without that, nothing more is looked for
    // (the look-up below costs half a millisecond a megabyte).
    let Some(first) = samples.first() else {
        return (std::borrow::Cow::Borrowed(samples), None);
    };
    if !samples[1..]
        .iter()
        .any(|s| s.name == first.name && s.labels == first.labels)
    {
        return (std::borrow::Cow::Borrowed(samples), None);
    }
    // Keyed by the name and the labels as written, borrowed: one exporter writes a series' labels
    // in one order, and a key built per sample (sorted, owned) cost 1.5 ms a megabyte.
    let mut last: HashMap<SeriesAsWritten<'_, '_>, usize> = HashMap::with_capacity(samples.len());
    for (i, s) in samples.iter().enumerate() {
        last.insert((s.name, s.labels.as_slice()), i);
    }
    if last.len() == samples.len() {
        return (std::borrow::Cow::Borrowed(samples), None);
    }
    let keep: std::collections::HashSet<usize> = last.into_values().collect();
    let repeats = samples.len() - keep.len();
    let kept: Vec<Sample<'a>> = samples
        .iter()
        .enumerate()
        .filter(|(i, _)| keep.contains(i))
        .map(|(_, s)| s.clone())
        .collect();
    let first = samples
        .iter()
        .enumerate()
        .find(|(i, _)| !keep.contains(i))
        .map(|(_, s)| s.line)
        .unwrap_or(1);
    (
        std::borrow::Cow::Owned(kept),
        Some(format!(
            "line {first}: {repeats} samples repeat a series already in this file (two scrapes in one file?): \
             the last of each is read"
        )),
    )
}

/// A scrape with no vLLM series is no vLLM scrape (another server's, or vLLM run with
/// `--disable-log-stats`): a warning that names what it has, so the item reads partial with no
/// figures. Not an error: a test plan's load point holds its scrapes with its result, and a failed
/// scrape would run a point of hours again against a server that will never export vLLM's series.
fn no_vllm_series(samples: &[Sample]) -> Option<String> {
    if samples.iter().any(|s| norm_name(s.name).starts_with("vllm:")) {
        return None;
    }
    let mut seen: Vec<&str> = Vec::new();
    for s in samples {
        if seen.len() == 5 {
            break;
        }
        if !seen.contains(&s.name) {
            seen.push(s.name);
        }
    }
    let has = if seen.is_empty() {
        "no series at all".to_owned()
    } else {
        format!("series such as {}", seen.join(", "))
    };
    Some(format!(
        "no vllm: series in this scrape ({has}): send vLLM's own /metrics (a server started with \
         --disable-log-stats exports none)"
    ))
}

/// Whether a sample only grows while the server runs. A family declared `gauge` is none whatever
/// its name says (the vLLM router's `vllm:healthy_pods_total`); otherwise the suffixes of counters
/// and histograms, or a `counter` declaration.
fn cumulative(s: &Sample, e: &Exposition) -> bool {
    let n = s.name;
    if n.ends_with("_created") || e.types.get(n).is_some_and(|t| *t == "gauge") {
        return false;
    }
    n.ends_with("_bucket")
        || n.ends_with("_count")
        || n.ends_with("_sum")
        || n.ends_with("_total")
        || e.types.get(n).is_some_and(|t| *t == "counter")
}

pub(crate) fn parse_window(before: &str, after: &str, targets: &SloTargets) -> Result<Parsed, ParseError> {
    let (before, after) = (ray_underscored(before), ray_underscored(after));
    let mut a = prometheus::parse(&after)?;
    let (samples, repeated) = last_of_each_series(&a.samples);
    if let std::borrow::Cow::Owned(kept) = samples {
        a.samples = kept;
    }
    let not_vllm = no_vllm_series(&a.samples);
    let b = match prometheus::parse(&before) {
        Ok(b) => b,
        Err(err) => {
            let mut p = compute(&a.samples, targets);
            for w in [&repeated, &not_vllm].into_iter().flatten() {
                p.warn(w.clone());
            }
            p.warn(format!(
                "`before` scrape unreadable ({err}); values are cumulative since server start"
            ));
            return Ok(p);
        }
    };
    let prev: HashMap<String, f64> = b
        .samples
        .iter()
        .filter(|s| cumulative(s, &b))
        .map(|s| (series_key(s), s.value))
        .collect();
    let mut restarted = started_again(&b, &a);
    let mut diffed = Vec::with_capacity(a.samples.len());
    for s in &a.samples {
        let mut d = s.clone();
        if cumulative(s, &a) {
            let before_v = prev.get(&series_key(s)).copied().unwrap_or(0.0);
            d.value = s.value - before_v;
            // Only vLLM's own counters say its server restarted: a scrape through a proxy or
            // `/federate` carries other processes' counters too.
            if d.value < 0.0 && restarted.is_none() && norm_name(s.name).starts_with("vllm:") {
                restarted = Some(format!("counter {} went down between the scrapes", s.name));
            }
        }
        diffed.push(d);
    }
    let mut p = match &restarted {
        Some(why) => {
            let mut p = compute(&a.samples, targets);
            p.warn(format!(
                "{why}: the server restarted; using the `after` scrape alone (cumulative)"
            ));
            p
        }
        None => compute(&diffed, targets),
    };
    p.boolean("serving.window", restarted.is_none());
    if let Some(w) = repeated {
        p.warn(w);
    }
    if let Some(w) = not_vllm {
        p.warn(w);
    }
    for w in b.warnings {
        p.warn(format!("`before` scrape: {w}"));
    }
    for w in a.warnings {
        p.warn(w);
    }
    Ok(p)
}

/// A restart the counters may hide (the new process counted past the old one's figures by the
/// `after` scrape): the process's start time (`process_start_time_seconds`), or a vLLM series'
/// creation time (`…_created`, which prometheus_client writes beside each counter and histogram),
/// differs between the scrapes.
fn started_again(before: &Exposition, after: &Exposition) -> Option<String> {
    let marker = |s: &Sample| {
        s.name == "process_start_time_seconds"
            || (s.name.ends_with("_created") && norm_name(s.name).starts_with("vllm:"))
    };
    let then: HashMap<String, f64> = before
        .samples
        .iter()
        .filter(|s| marker(s))
        .map(|s| (series_key(s), s.value))
        .collect();
    after.samples.iter().filter(|s| marker(s)).find_map(|s| {
        let old = then.get(&series_key(s))?;
        (*old != s.value).then(|| format!("{} changed between the scrapes ({old} → {})", s.name, s.value))
    })
}

/// The text with Ray's underscored names (`ray_vllm_time_to_first_token_seconds_bucket`, since
/// vllm-project/vllm#25439 sanitizes names for OpenTelemetry) written as vLLM's own
/// (`vllm:time_to_first_token_seconds_bucket`); every vLLM metric's name starts `vllm:`, so the
/// mapping is exact. Untouched, and not copied, when no such name is present.
fn ray_underscored(s: &str) -> std::borrow::Cow<'_, str> {
    const RAY: &str = "ray_vllm_";
    if !s.contains(RAY) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    for line in s.split_inclusive('\n') {
        let (head, name) = match line.strip_prefix("# TYPE ").or_else(|| line.strip_prefix("# HELP ")) {
            Some(rest) => (&line[..7], rest),
            None => ("", line),
        };
        out.push_str(head);
        match name.strip_prefix(RAY) {
            Some(rest) => {
                out.push_str("vllm:");
                out.push_str(rest);
            }
            None => out.push_str(name),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// vLLM's name of a series that Ray (`ray_vllm:`) or KServe (`kserve_vllm:`, its
/// LLMInferenceService relabels the families) exported under a prefix of its own.
fn norm_name(n: &str) -> &str {
    n.strip_prefix("ray_")
        .or_else(|| n.strip_prefix("kserve_"))
        .filter(|r| r.starts_with("vllm:"))
        .unwrap_or(n)
}

fn model_of<'a>(s: &'a Sample<'_>) -> &'a str {
    s.label("model_name").or_else(|| s.label("model")).unwrap_or("")
}

type Buckets = Vec<(f64, f64)>;
/// Histogram family → model → buckets.
type Histograms<'a> = HashMap<&'a str, BTreeMap<&'a str, Buckets>>;
/// Counter or gauge name → model → values.
type Values<'a> = HashMap<&'a str, BTreeMap<&'a str, Vec<f64>>>;

/// One figure per metric family, in the order of docs/evidence.md.
fn compute(samples: &[Sample], targets: &SloTargets) -> Parsed {
    let mut p = Parsed {
        tool: Some("vllm".into()),
        ..Default::default()
    };
    let (hist, vals) = group_samples(samples, &mut p);
    let models = models_of(&hist, &vals);

    latency_figures(&mut p, &hist, &models, targets);

    counter_and_gauge_figures(&mut p, &vals, &models);
    p
}

/// The vLLM samples by family and model: histogram buckets apart from counters and gauges.
fn group_samples<'a>(samples: &'a [Sample<'_>], p: &mut Parsed) -> (Histograms<'a>, Values<'a>) {
    // family → model → buckets; counters/gauges: name → model → values
    let mut hist: Histograms<'a> = HashMap::new();
    let mut vals: Values<'a> = HashMap::new();
    for s in samples {
        let name = norm_name(s.name);
        if !name.starts_with("vllm:") {
            continue;
        }
        // Ray stamps its own version on every series it exports, beside its worker labels.
        let from_ray = s.label("WorkerId").is_some() || s.label("SessionName").is_some();
        if let Some(ver) = s.label("Version").or_else(|| s.label("version")).filter(|_| !from_ray) {
            if name == "vllm:cache_config_info" || s.label("Version").is_some() {
                p.tool_version.get_or_insert_with(|| ver.to_string());
            }
        }
        if s.value.is_nan() {
            p.warn(format!("line {}: {} is NaN; ignored", s.line, s.name));
            continue;
        }
        if let Some(fam) = name.strip_suffix("_bucket") {
            let Some(le) = s.label("le").and_then(prometheus::parse_value) else {
                p.warn(format!("line {}: bucket without a readable `le`", s.line));
                continue;
            };
            hist.entry(fam)
                .or_default()
                .entry(model_of(s))
                .or_default()
                .push((le, s.value));
        } else {
            vals.entry(name)
                .or_default()
                .entry(model_of(s))
                .or_default()
                .push(s.value);
        }
    }
    (hist, vals)
}

/// Every model named in the samples, sorted.
fn models_of<'a>(hist: &Histograms<'a>, vals: &Values<'a>) -> Vec<&'a str> {
    // Each family's models are already sorted (BTreeMap keys): merge them into one sorted list
    // rather than sorting every family's copy of every model name.
    let mut m: Vec<&str> = Vec::new();
    for h in hist.values() {
        m = sorted_union(&m, h.keys().copied().filter(|k| !k.is_empty()));
    }
    for v in vals.values() {
        m = sorted_union(&m, v.keys().copied().filter(|k| !k.is_empty()));
    }
    m
}

/// The latency quantiles (and estimated SLO attainment) of each latency histogram, over all
/// models and per model.
fn latency_figures(p: &mut Parsed, hist: &Histograms<'_>, models: &[&str], targets: &SloTargets) {
    for (stem, fams) in LATENCIES {
        let Some((fam, per_model)) = fams.iter().find_map(|f| hist.get(f).map(|h| (*f, h))) else {
            continue;
        };
        if fams.len() > 1 {
            p.text(&format!("vllm.family.{stem}"), fam);
        }
        // A model whose buckets lack `+Inf` (cut-off paste) is left out of the merge: its partial
        // cumulative counts would distort every quantile.
        let merged: Buckets = per_model
            .values()
            .filter(|b| b.iter().any(|(u, _)| *u == f64::INFINITY))
            .flatten()
            .copied()
            .collect();
        quantiles(p, &format!("serving.{stem}"), fam, &merged);
        estimate_attainment(p, stem, targets, &merged);
        for m in models {
            if let Some(b) = per_model.get(m) {
                quantiles(p, &format!("serving.by_model.{m}.{stem}"), fam, b);
            }
        }
    }
    if !hist.contains_key("vllm:time_to_first_token_seconds") {
        p.warn("no vllm:time_to_first_token_seconds histogram");
    }
}

/// The counters (summed), the request-count gauges (summed: the server's queue is every engine's,
/// as `sum(vllm:num_requests_waiting)`) and the KV-cache gauge (the fullest), over all models and
/// per model.
fn counter_and_gauge_figures(p: &mut Parsed, vals: &Values<'_>, models: &[&str]) {
    // One model: a map lookup (not a scan of every model, which made this quadratic in models).
    let sum_of = |v: &BTreeMap<&str, Vec<f64>>, m: Option<&str>| -> f64 {
        match m {
            None => v.values().flat_map(|x| x.iter()).sum(),
            Some(m) => v.get(m).into_iter().flat_map(|x| x.iter()).sum(),
        }
    };
    let max_of = |v: &BTreeMap<&str, Vec<f64>>, m: Option<&str>| -> Option<f64> {
        match m {
            None => v.values().flat_map(|x| x.iter().copied()).reduce(f64::max),
            Some(m) => v.get(m).into_iter().flat_map(|x| x.iter().copied()).reduce(f64::max),
        }
    };
    let scopes: Vec<(String, Option<&str>)> = std::iter::once(("serving".to_string(), None))
        .chain(models.iter().map(|m| (format!("serving.by_model.{m}"), Some(*m))))
        .collect();
    let counters: &[(&str, &[&str])] = &[
        ("requests_total", &["vllm:request_success_total"]),
        (
            "preemptions_total",
            &["vllm:num_preemptions_total", "vllm:num_preemptions"],
        ),
        ("prompt_tokens_total", &["vllm:prompt_tokens_total"]),
        ("generation_tokens_total", &["vllm:generation_tokens_total"]),
    ];
    for (key, fams) in counters {
        if let Some((fam, v)) = fams.iter().find_map(|f| vals.get(f).map(|v| (*f, v))) {
            if fams.len() > 1 && fam != fams[0] {
                p.text(&format!("vllm.family.{key}"), fam);
            }
            for (scope, m) in &scopes {
                if m.is_none() || v.contains_key(m.unwrap_or_default()) {
                    p.count(&format!("{scope}.{key}"), sum_of(v, *m));
                }
            }
        }
    }
    let gauges: &[(&str, &[&str], f64)] = &[
        (
            "kv_cache_usage_max_pct",
            &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
            100.0,
        ),
        ("requests_waiting_max", &["vllm:num_requests_waiting"], 1.0),
        ("requests_running_max", &["vllm:num_requests_running"], 1.0),
    ];
    for (key, fams, scale) in gauges {
        if let Some((fam, v)) = fams.iter().find_map(|f| vals.get(f).map(|v| (*f, v))) {
            if fams.len() > 1 {
                p.text(&format!("vllm.family.{key}"), fam);
            }
            // Requests add up over data-parallel engines (two engines of 30 and 25 waiting: 55);
            // a share of each engine's cache does not.
            let counts_requests = *scale == 1.0;
            for (scope, m) in &scopes {
                let value = if counts_requests {
                    (m.is_none() || v.contains_key(m.unwrap_or_default())).then(|| sum_of(v, *m))
                } else {
                    max_of(v, *m)
                };
                if let Some(x) = value {
                    let k = format!("{scope}.{key}");
                    if *scale == 1.0 {
                        p.count(&k, x);
                    } else if x > 1.0 {
                        // vLLM's `_perc` gauges are fractions: above 1 is no share of a cache
                        // (a translating middleware that writes percent, or a corrupt sample).
                        p.warn(format!(
                            "{fam} is {x}, above 1 (a fraction of the cache); {k} is not given"
                        ));
                    } else {
                        p.nonneg(&k, x * scale);
                    }
                }
            }
        }
    }
}

/// The sorted, duplicate-free union of sorted `a` and sorted `b`.
fn sorted_union<'a>(a: &[&'a str], b: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out = Vec::with_capacity(a.len());
    let mut a = a.iter().copied().peekable();
    for x in b {
        while let Some(y) = a.next_if(|y| *y < x) {
            out.push(y);
        }
        a.next_if(|y| *y == x);
        if out.last() != Some(&x) {
            out.push(x);
        }
    }
    out.extend(a);
    out
}

fn quantiles(p: &mut Parsed, prefix: &str, fam: &str, b: &[(f64, f64)]) {
    let total = b
        .iter()
        .filter(|(u, _)| *u == f64::INFINITY)
        .map(|(_, c)| *c)
        .sum::<f64>();
    if !b.iter().any(|(u, _)| *u == f64::INFINITY) {
        p.warn(format!("{fam}: no le=\"+Inf\" bucket; no quantiles ({prefix})"));
        return;
    }
    if total <= 0.0 {
        p.warn(format!(
            "{fam}: histogram is empty (count 0); no quantiles for {prefix}"
        ));
        return;
    }
    let prepared = Prepared::new(b);
    for (qn, q) in QUANTILES {
        match prepared.quantile(*q) {
            Some(v) => {
                p.nonneg(&format!("{prefix}_{qn}_ms"), v * 1000.0);
            }
            None => p.warn(format!("{fam}: {qn} not computable")),
        }
    }
}

/// Per-target SLO attainment estimated from one histogram: the share of observations at or below the
/// brief's target, from the per-request histograms only (TTFT, the request's mean time per output
/// token, end-to-end latency): the inter-token histogram holds every gap, not each request's mean,
/// so it judges nothing. One target at a time (no request can be followed across histograms), so
/// the joint share is at most the smallest of these.
fn estimate_attainment(p: &mut Parsed, stem: &str, targets: &SloTargets, buckets: &[(f64, f64)]) {
    let (target, key) = match stem {
        "ttft" => (targets.ttft_ms, "ttft"),
        "tpot" => (targets.tpot_ms, "itl"),
        "e2e" => (targets.e2e_ms, "e2e"),
        _ => return,
    };
    let Some(ms) = target.filter(|t| t.is_finite() && *t > 0.0) else {
        return;
    };
    if let Some(share) = histogram_share_at_or_below(ms / 1000.0, buckets) {
        p.nonneg(&format!("serving.slo_attainment_{key}"), share);
        // Marked as an estimate by a flag, not a warning: nothing failed to be read, so the upload
        // stays `ok`; the review shows the flag beside the figure. The joint attainment over all
        // targets needs per-request data.
        p.boolean("serving.slo_attainment_estimated", true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::parsers::MetricValue;

    /// A scrape in the shape Ray exports vLLM ≥ 0.11's metrics: `:` made `_` (vLLM's
    /// `ray_wrappers.py`), Ray's labels beside vLLM's, Ray's own version in `Version`.
    const RAY_UNDERSCORED: &str = "\
# HELP ray_vllm_time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE ray_vllm_time_to_first_token_seconds histogram
ray_vllm_time_to_first_token_seconds_bucket{Component=\"core_worker\",NodeAddress=\"10.0.0.5\",SessionName=\"session_2025-10-10_12-00-00_000000_1\",Version=\"2.49.2\",WorkerId=\"ab12\",model_name=\"m\",le=\"0.1\"} 40.0
ray_vllm_time_to_first_token_seconds_bucket{Component=\"core_worker\",NodeAddress=\"10.0.0.5\",SessionName=\"session_2025-10-10_12-00-00_000000_1\",Version=\"2.49.2\",WorkerId=\"ab12\",model_name=\"m\",le=\"0.5\"} 100.0
ray_vllm_time_to_first_token_seconds_bucket{Component=\"core_worker\",NodeAddress=\"10.0.0.5\",SessionName=\"session_2025-10-10_12-00-00_000000_1\",Version=\"2.49.2\",WorkerId=\"ab12\",model_name=\"m\",le=\"+Inf\"} 100.0
ray_vllm_time_to_first_token_seconds_count{Component=\"core_worker\",NodeAddress=\"10.0.0.5\",SessionName=\"session_2025-10-10_12-00-00_000000_1\",Version=\"2.49.2\",WorkerId=\"ab12\",model_name=\"m\"} 100.0
# TYPE ray_vllm_request_success_total counter
ray_vllm_request_success_total{SessionName=\"session_2025-10-10_12-00-00_000000_1\",Version=\"2.49.2\",WorkerId=\"ab12\",finished_reason=\"length\",model_name=\"m\"} 100.0
# TYPE ray_vllm_kv_cache_usage_perc gauge
ray_vllm_kv_cache_usage_perc{SessionName=\"session_2025-10-10_12-00-00_000000_1\",Version=\"2.49.2\",WorkerId=\"ab12\",model_name=\"m\"} 0.5
";

    #[test]
    fn ray_underscored_names_read_as_vllm_and_rays_version_is_not_vllms() {
        let p = parse(RAY_UNDERSCORED, &SloTargets::default()).unwrap();
        assert_eq!(p.get_num("serving.requests_total"), Some(100.0));
        assert_eq!(p.get_num("serving.kv_cache_usage_max_pct"), Some(50.0));
        // 40 of 100 under 0.1 s: the 95th percentile lies in (0.1, 0.5], linearly.
        let p95 = p.get_num("serving.ttft_p95_ms").unwrap();
        assert!((p95 - 466.67).abs() < 0.01, "{p95}");
        assert_eq!(p.tool_version, None, "2.49.2 is Ray's version");
        // The older `ray_vllm:` form is the same scrape.
        let colon = RAY_UNDERSCORED.replace("ray_vllm_", "ray_vllm:");
        let q = parse(&colon, &SloTargets::default()).unwrap();
        assert_eq!(q.metrics, p.metrics);
        // A window of two such scrapes diffs the same series.
        let w = parse_window(RAY_UNDERSCORED, RAY_UNDERSCORED, &SloTargets::default()).unwrap();
        assert_eq!(w.get_num("serving.requests_total"), Some(0.0));
        // Sent without a kind, it is known for what it is.
        assert_eq!(
            super::super::detect_kind(RAY_UNDERSCORED.as_bytes()),
            Some(super::super::EvidenceKind::VllmMetrics)
        );
    }

    /// A small vLLM scrape: one counter, its creation time, the process's start, and the TTFT
    /// histogram of two data-parallel engines.
    fn scrape(requests: u32, created: &str, started: &str, router_pods: u32) -> String {
        format!(
            "# TYPE process_start_time_seconds gauge\n\
             process_start_time_seconds {started}\n\
             # TYPE vllm:request_success counter\n\
             vllm:request_success_total{{engine=\"0\",finished_reason=\"length\",model_name=\"m\"}} {requests}\n\
             vllm:request_success_created{{engine=\"0\",finished_reason=\"length\",model_name=\"m\"}} {created}\n\
             # TYPE vllm:healthy_pods_total gauge\n\
             vllm:healthy_pods_total{{server=\"router\"}} {router_pods}\n\
             # TYPE vllm:time_to_first_token_seconds histogram\n\
             vllm:time_to_first_token_seconds_bucket{{engine=\"0\",model_name=\"m\",le=\"0.25\"}} 90\n\
             vllm:time_to_first_token_seconds_bucket{{engine=\"0\",model_name=\"m\",le=\"+Inf\"}} 100\n\
             vllm:time_to_first_token_seconds_bucket{{engine=\"1\",model_name=\"m\",le=\"0.25\"}} 10\n\
             vllm:time_to_first_token_seconds_bucket{{engine=\"1\",model_name=\"m\",le=\"+Inf\"}} 100\n"
        )
    }

    #[test]
    fn two_engines_attainment_is_over_both() {
        let targets = SloTargets {
            ttft_ms: Some(250.0),
            ..SloTargets::default()
        };
        let p = parse(&scrape(200, "1.7e9", "1.7e9", 2), &targets).unwrap();
        // 90 + 10 of 200 requests within 250 ms (the first engine's alone said 90 %).
        assert_eq!(p.get_num("serving.slo_attainment_ttft"), Some(0.5));
    }

    #[test]
    fn a_restart_the_counters_hide_is_read_from_the_start_times() {
        let t = SloTargets::default();
        // The same process: a window of 50 requests.
        let p = parse_window(&scrape(150, "1.7e9", "1.7e9", 2), &scrape(200, "1.7e9", "1.7e9", 2), &t).unwrap();
        assert_eq!(
            p.metrics.get("serving.window"),
            Some(&MetricValue::Bool(true)),
            "{:?}",
            p.warnings
        );
        assert_eq!(p.get_num("serving.requests_total"), Some(50.0));
        // The router's gauge of healthy pods fell: a gauge, whatever its name says, is no restart.
        let p = parse_window(&scrape(150, "1.7e9", "1.7e9", 2), &scrape(200, "1.7e9", "1.7e9", 1), &t).unwrap();
        assert_eq!(
            p.metrics.get("serving.window"),
            Some(&MetricValue::Bool(true)),
            "{:?}",
            p.warnings
        );
        // A new process counted past the old one's 150 by the second scrape: its start time and the
        // counter's creation time say so, and the window is not a difference of two processes.
        let p = parse_window(&scrape(150, "1.7e9", "1.7e9", 2), &scrape(200, "1.8e9", "1.8e9", 2), &t).unwrap();
        assert_eq!(p.metrics.get("serving.window"), Some(&MetricValue::Bool(false)));
        assert!(
            p.warnings.iter().any(|w| w.contains("changed between the scrapes")),
            "{:?}",
            p.warnings
        );
        assert_eq!(p.get_num("serving.requests_total"), Some(200.0));
    }

    #[test]
    fn a_scrape_without_vllm_series_says_what_it_has_and_gives_no_figure() {
        let sglang = "# TYPE sglang:time_to_first_token_seconds histogram\n\
                      sglang:time_to_first_token_seconds_bucket{le=\"+Inf\"} 10\n";
        for p in [
            parse(sglang, &SloTargets::default()).unwrap(),
            parse_window(sglang, sglang, &SloTargets::default()).unwrap(),
        ] {
            assert!(
                p.warnings
                    .iter()
                    .any(|w| w.contains("no vllm: series") && w.contains("sglang:time_to_first_token_seconds_bucket")),
                "{:?}",
                p.warnings
            );
            assert!(!p
                .metrics
                .keys()
                .any(|k| k.starts_with("serving.") && k != "serving.window"));
        }
        // KServe's relabelled families are vLLM's.
        let kserve = scrape(200, "1.7e9", "1.7e9", 2).replace("vllm:", "kserve_vllm:");
        let p = parse(&kserve, &SloTargets::default()).unwrap();
        assert_eq!(p.get_num("serving.requests_total"), Some(200.0));
    }

    #[test]
    fn a_cache_share_above_one_is_no_figure() {
        let text = "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{model_name=\"m\"} 87.5\n";
        let p = parse(text, &SloTargets::default()).unwrap();
        assert_eq!(p.get_num("serving.kv_cache_usage_max_pct"), None);
        assert!(p.warnings.iter().any(|w| w.contains("above 1")), "{:?}", p.warnings);
    }

    #[test]
    fn a_window_of_scrapes_under_a_launchers_prefixes_reads_as_without() {
        let tag = |text: String| text.lines().map(|l| format!("[1,0]<stdout>:{l}\n")).collect::<String>();
        let (before, after) = (scrape(150, "1.7e9", "1.7e9", 2), scrape(200, "1.7e9", "1.7e9", 2));
        let kind = super::super::EvidenceKind::VllmMetrics;
        let t = SloTargets::default();
        let plain = super::super::parse_window(kind, before.as_bytes(), after.as_bytes(), &t).unwrap();
        let tagged = super::super::parse_window(kind, tag(before).as_bytes(), tag(after).as_bytes(), &t).unwrap();
        assert_eq!(tagged.get_num("serving.requests_total"), Some(50.0));
        assert_eq!(tagged.metrics, plain.metrics);
    }

    #[test]
    fn two_scrapes_appended_to_one_file_count_each_series_once() {
        let one = scrape(200, "1.7e9", "1.7e9", 2);
        let appended = format!("{one}{}", scrape(250, "1.7e9", "1.7e9", 2));
        let p = parse(&appended, &SloTargets::default()).unwrap();
        // The last scrape's 250, not 200 + 250.
        assert_eq!(p.get_num("serving.requests_total"), Some(250.0));
        assert!(
            p.warnings.iter().any(|w| w.contains("repeat a series")),
            "{:?}",
            p.warnings
        );
        // A window whose `after` file holds both: its last scrape against `before`.
        let w = parse_window(&one, &appended, &SloTargets::default()).unwrap();
        assert_eq!(w.get_num("serving.requests_total"), Some(50.0));
        // One scrape: nothing said.
        let p = parse(&one, &SloTargets::default()).unwrap();
        assert!(
            !p.warnings.iter().any(|w| w.contains("repeat a series")),
            "{:?}",
            p.warnings
        );
    }
}
