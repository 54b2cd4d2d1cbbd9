//! Serving-benchmark results → `serving.*` keys.
//!
//! Recognised, by content (the error for anything else lists them):
//! * vLLM `benchmark_serving.py --save-result` / `vllm bench serve` result JSON, and JSON Lines from
//!   `--append-result`; SGLang `bench_serving` JSON Lines (same key scheme, `e2e_latency` for e2e);
//! * its console `Serving Benchmark Result` block (vLLM and SGLang labels);
//! * the vLLM nightly results table (row list or pandas columnar dict);
//! * llmperf `*_summary.json` (`bench_serving` here);
//! * GenAI-Perf `profile_export_genai_perf.json` and AIPerf `profile_export_aiperf.json` (objects of
//!   statistics per metric), AIPerf per-request `profile_export.jsonl` (`bench_stats_json`);
//! * GuideLLM `benchmarks.json`, one run per load point (`bench_guidellm`);
//! * GenAI-Perf CSV exports (`bench_serving_text`).
//!
//! * a JSON array of such results (`vllm bench sweep`'s `summary.json`): a sweep, one load point per
//!   element;
//!
//! Keys: `serving.<metric>_<stat>_ms` with metric ∈ ttft, tpot, itl, e2e and stat ∈ mean, p50
//! (median), pNN as present (`p99.9` → `p99_9`); only percentiles the input contains are reported.
//! Per-request arrays (`ttfts`, `itls`, `errors`) give EXACT ttft/itl p50/p95/p99 (numpy-linear, as
//! vLLM computes them, over the requests that completed: an entry of a failed request is dropped
//! whatever the tool wrote there) and win over the summary. A run in which no request completed
//! has no latency: the tools still write 0 for every statistic, so its `_ms` keys are left out (with
//! a warning) while `serving.completed` = 0 and `serving.error_rate` = 1 are kept. Also
//! `serving.duration_s`, `serving.offered_rps` (the request rate asked for, when finite),
//! `serving.load_concurrency` (the requests the load tool kept in flight at most, its
//! `--max-concurrency`: not the KV cache's `serving.max_concurrency` of vLLM's start-up log),
//! `serving.mean_input_tokens` / `serving.mean_output_tokens` (per completed request),
//! `serving.request_throughput_rps`, `serving.output_tokens_per_s`, `serving.total_tokens_per_s`,
//! `serving.completed`, `serving.failed`, `serving.error_rate` = failed / (completed + failed) when
//! derivable, `serving.tool_goodput_rps` (the tool's own goodput, against the tool's `--goodput`
//! flags, not the brief's). With per-request data and the brief's targets ([`SloTargets`]):
//! `serving.slo_attainment` (good ÷ sent), `serving.good_requests`, `serving.goodput_rps` (good ÷
//! the run's duration), `serving.good_output_tokens_per_s` and the good requests' mean prompt and
//! output tokens (`serving.good_mean_input_tokens`, `serving.good_mean_output_tokens`) when the file
//! records tokens per request, and one `serving.slo_attainment_<ttft|itl|e2e>` per target (see `slo`). Inputs with several runs: see the module docs of `parsers`
//! (`serving.by_run.*`).

use super::bench_json_reader::{read_doc, Doc, Obj};
use super::bench_run::{exact, label_latency, latency_key, num, run_label, Run};
use super::slo::{self, RequestSample, SloTargets};
use super::{bench_guidellm, bench_serving_text, bench_stats_json, text, ParseError, Parsed};
use serde_json::{Map, Value};

/// Named in the error for input none of the readers recognises.
pub(crate) const READ_FORMATS: &str = "vLLM or SGLang bench_serving result JSON / JSON Lines, \
the vLLM nightly results table, llmperf *_summary.json, GenAI-Perf profile_export_genai_perf.json or its CSV, \
AIPerf profile_export_aiperf.json or profile_export.jsonl, GuideLLM benchmarks.json, \
or the `Serving Benchmark Result` console block";

/// The JSON the other kinds read, for the error on JSON that nothing recognises (`kind=auto` sends
/// such JSON here).
const OTHER_JSON: &str = "other kinds read dcgmi diag -j (dcgm-diag), {\"written\", \"restored\", …} \
(checkpoint-restore), {\"checks\": {…}} (probe) and {\"metrics\": {…}} (metrics); \
upload with kind=log to keep a file without metrics";

pub(crate) fn parse(s: &str, targets: &SloTargets) -> Result<Parsed, ParseError> {
    let t = s.trim_start();
    let mut p = Parsed::default();
    let runs = if t.starts_with('{') || t.starts_with('[') {
        // SGLang's bench_serving writes Python's json.dumps: `"request_rate": Infinity`, NaN.
        let json = text::python_json(s);
        if matches!(json, std::borrow::Cow::Owned(_)) {
            p.warn("read Python's non-JSON constants: Infinity as an unlimited rate (inf), NaN as no value");
        }
        json_runs(&json, &mut p)?
    } else if s.contains("Serving Benchmark Result") {
        // SGLang's client names its backends `sglang`, `sglang-oai`, `sglang-native`.
        let sglang = s.lines().any(|l| {
            l.trim_start()
                .strip_prefix("Backend:")
                .is_some_and(|b| b.trim().starts_with("sglang"))
        });
        p.tool = Some(
            if sglang {
                "sglang bench_serving"
            } else {
                "vllm bench serve"
            }
            .into(),
        );
        bench_serving_text::console(s, &mut p)?
    } else if s.contains("Time To First Token")
        || s.contains("Time to First Token")
        || s.contains("Request Throughput")
        || s.contains("Inter Token Latency")
    {
        p.tool = Some("genai-perf".into());
        bench_serving_text::genai_perf(s, &mut p)?
    } else {
        return Err(ParseError::at(
            1,
            format!("unrecognised benchmark output; read are: {READ_FORMATS}"),
        ));
    };
    emit(&mut p, runs, targets);
    Ok(p)
}

fn emit(p: &mut Parsed, mut runs: Vec<Run>, targets: &SloTargets) {
    let several = runs.len() > 1;
    for r in runs.iter_mut() {
        if let (Some(c), Some(f)) = (r.get("completed"), r.get("failed")) {
            if c + f > 0.0 && c >= 0.0 && f >= 0.0 {
                r.set("error_rate", f / (c + f));
            }
        }
        if r.get("completed") == Some(0.0) {
            nothing_completed(p, r, several);
        } else if r.get("completed").is_some_and(|c| c > 0.0) {
            nothing_measured(p, r, several);
        }
    }
    for r in runs.iter_mut() {
        attain(p, r, targets, several);
    }
    let put = |p: &mut Parsed, prefix: &str, r: &Run| {
        for (k, v) in &r.vals {
            let key = format!("{prefix}.{k}");
            if [
                "completed",
                "failed",
                "incomplete",
                "load_concurrency",
                "slo_requests",
                "good_requests",
            ]
            .contains(&k.as_str())
            {
                p.count(&key, *v);
            } else {
                p.nonneg(&key, *v);
            }
        }
    };
    if several {
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
        name_runs_apart(&mut runs);
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
    say_missing_tails(p, &runs);
}

/// Results that carry latencies but no tail percentile (SGLang's bench_serving of late 2024 writes
/// only mean and median): the p95/p99 keys a card judges are not measured; say which.
fn say_missing_tails(p: &mut Parsed, runs: &[Run]) {
    let latency = |k: &str| k.ends_with("_ms") && ["ttft_", "itl_", "tpot_", "e2e_"].iter().any(|m| k.starts_with(m));
    let tail = |k: &str| latency(k) && (k.contains("_p9") || k.contains("_p99"));
    let mean_median_only = runs
        .iter()
        .any(|r| r.vals.iter().any(|(k, _)| latency(k)) && !r.vals.iter().any(|(k, _)| tail(k)));
    if mean_median_only {
        p.warn(
            "this result gives only mean and median latencies (read as serving.*_mean_ms and serving.*_p50_ms); \
             serving.ttft_p95_ms, serving.ttft_p99_ms, serving.itl_p95_ms, serving.tpot_p95_ms and serving.e2e_p95_ms \
             are not measured, so criteria on them stay without a value: rerun with per-request output or a newer \
             bench_serving for tail latencies",
        );
    }
}

/// "run \"rate_4\": " in a file of several runs, else nothing.
fn which_run(r: &Run, several: bool) -> String {
    if several {
        format!("run {:?}: ", r.name)
    } else {
        String::new()
    }
}

/// A run in which no request completed has no latency: the tools write 0.0 for every statistic,
/// which would pass any target. Those keys are dropped (and said so); every request failed.
fn nothing_completed(p: &mut Parsed, r: &mut Run, several: bool) {
    let before = r.vals.len();
    r.vals.retain(|(k, _)| !k.ends_with("_ms"));
    r.set("error_rate", 1.0);
    if before > r.vals.len() {
        p.warn(format!(
            "{}no request completed: the latency figures the tool wrote (0) are left out",
            which_run(r, several)
        ));
    } else {
        p.warn(format!("{}no request completed", which_run(r, several)));
    }
}

/// Requests completed but a latency the tool wrote as 0 throughout: SGLang's `bench_serving`
/// without streaming prints `Mean ITL (ms): 0.00`, `P99 ITL (ms): 0.00` and `Median TPOT (ms):
/// -0.00` for 996 requests. Nothing was measured, and an ITL target must not pass on it: the
/// family's `_ms` keys are left out, with a warning.
fn nothing_measured(p: &mut Parsed, r: &mut Run, several: bool) {
    for family in ["ttft", "tpot", "itl", "e2e"] {
        let prefix = format!("{family}_");
        let of_family = |k: &str| k.starts_with(&prefix) && k.ends_with("_ms");
        let values: Vec<f64> = r.vals.iter().filter(|(k, _)| of_family(k)).map(|(_, v)| *v).collect();
        if values.len() >= 2 && values.iter().all(|v| *v == 0.0) {
            r.vals.retain(|(k, _)| !of_family(k));
            p.warn(format!(
                "{}every {} figure is 0 although requests completed (a run without streaming measures none): left out",
                which_run(r, several),
                family.to_ascii_uppercase()
            ));
        }
    }
}

/// SLO attainment of one run from its per-request figures (nothing without them or without targets).
fn attain(p: &mut Parsed, r: &mut Run, targets: &SloTargets, several: bool) {
    let Some(a) = slo::attainment(&r.requests, targets) else {
        return;
    };
    let which = which_run(r, several);
    if r.latency_rebuilt && (targets.tpot_ms.is_some() || targets.e2e_ms.is_some()) {
        p.warn(format!(
            "{which}per-request end-to-end latency and TPOT are rebuilt as TTFT + the inter-token gaps \
             (the file stores no per-request latency), which leaves out the time after the last token"
        ));
    }
    if !a.not_judged.is_empty() {
        p.warn(format!(
            "{which}the brief's {} target(s) cannot be judged from this file's per-request data: \
             attainment covers the other targets only",
            a.not_judged.join(", ")
        ));
    }
    if !a.fraction.is_finite() {
        return;
    }
    r.set("slo_attainment", a.fraction);
    r.set("slo_requests", a.total as f64);
    r.set("good_requests", a.met as f64);
    for (t, share) in &a.per_target {
        r.set(format!("slo_attainment_{t}"), *share);
    }
    if a.met > 0 {
        if let Some(n) = a.good_input_tokens {
            r.set("good_mean_input_tokens", n / a.met as f64);
        }
        if let Some(n) = a.good_output_tokens {
            r.set("good_mean_output_tokens", n / a.met as f64);
        }
    }
    // vLLM's request_goodput: good requests ÷ the run's duration. Without a duration, the one the
    // request throughput implies (completed ÷ throughput).
    let completed = r
        .get("completed")
        .unwrap_or_else(|| r.requests.iter().filter(|q| q.ok).count() as f64);
    let duration = r.get("duration_s").filter(|d| *d > 0.0).or_else(|| {
        r.get("request_throughput_rps")
            .filter(|rps| *rps > 0.0 && completed > 0.0)
            .map(|rps| completed / rps)
    });
    match duration {
        Some(d) => {
            r.set("goodput_rps", a.met as f64 / d);
            if let Some(n) = a.good_output_tokens {
                r.set("good_output_tokens_per_s", n / d);
            }
        }
        None if a.met == 0 => r.set("goodput_rps", 0.0),
        None => p.warn(format!(
            "{which}goodput needs the run's duration or its request throughput, which this file does not give"
        )),
    }
}

fn json_runs(s: &str, p: &mut Parsed) -> Result<Vec<Run>, ParseError> {
    super::limits::refuse_wide_json(s)?;
    let v = match read_doc(s) {
        Ok(v) => v,
        Err(_) => return json_lines(s, p),
    };
    match &v {
        Doc::Other(Value::Array(rows)) if rows.iter().any(|r| r.get("Test name").is_some()) => {
            p.tool = Some("vllm nightly benchmark".into());
            Ok(rows.iter().filter_map(Value::as_object).map(table_row).collect())
        }
        Doc::Other(Value::Array(rows)) if rows.iter().any(|r| r.as_object().is_some_and(is_vllm_result)) => {
            Ok(sweep(rows, p))
        }
        Doc::Object(Obj { map: o, .. }) if o.get("serving").is_some_and(Value::is_object) => {
            p.tool = Some("vllm nightly benchmark".into());
            Ok(columnar(
                o.get("serving").and_then(Value::as_object).unwrap_or(&Map::new()),
            ))
        }
        Doc::Object(Obj { map: o, .. }) if o.keys().any(|k| k.starts_with("results_")) => {
            p.tool = Some("llmperf".into());
            p.tool_version = o.get("version").and_then(Value::as_str).map(str::to_string);
            if o.keys().any(|k| k.starts_with("results_inter_token_latency_s_")) {
                // ray-project/llmperf's clients add the TTFT into the gaps they sum, then divide
                // by the output tokens: end-to-end ÷ tokens, not the gap between two tokens.
                p.warn(
                    "llmperf's inter_token_latency (read as itl) includes the wait for the first token: it is \
                     end-to-end latency ÷ output tokens, higher than the gaps between tokens",
                );
            }
            Ok(vec![llmperf(o)])
        }
        Doc::Object(Obj { map: o, .. }) if bench_guidellm::is_report(o) => bench_guidellm::runs(o, p),
        Doc::Object(Obj { map: o, .. }) if bench_stats_json::is_summary(o) => Ok(vec![bench_stats_json::summary(o, p)]),
        Doc::Object(Obj { map: o, .. }) if bench_stats_json::is_aggregate(o) => Err(ParseError::at(
            1,
            "an AIPerf aggregate over several profile runs (profile_export_aiperf_aggregate.json): it holds their \
             means, not a run's requests or error counts; upload one run's profile_export_aiperf.json instead",
        )),
        Doc::Object(Obj { map: o, .. }) if bench_stats_json::is_record(o) => {
            Ok(vec![bench_stats_json::records(std::iter::once((1, o)), p)])
        }
        Doc::Object(obj) if is_vllm_result(&obj.map) => Ok(vec![vllm_result(obj, p)]),
        Doc::Object(Obj { map: o, .. }) => Err(unrecognised_json(o.keys())),
        Doc::Other(_) => Err(ParseError::at(
            1,
            format!("unrecognised JSON (not an object); bench-serving reads {READ_FORMATS}; {OTHER_JSON}"),
        )),
    }
}

/// The error for a JSON object no reader recognises: what is read, and which keys this one has.
fn unrecognised_json<'a>(keys: impl Iterator<Item = &'a String>) -> ParseError {
    let keys: Vec<&str> = keys.take(8).map(String::as_str).collect();
    ParseError::at(
        1,
        format!(
            "unrecognised JSON (top-level keys: {}); bench-serving reads {READ_FORMATS}; {OTHER_JSON}",
            if keys.is_empty() {
                "none".to_owned()
            } else {
                keys.join(", ")
            }
        ),
    )
}

/// A vLLM / SGLang result: its figures are plain numbers (a GenAI-Perf export has a
/// `request_throughput` too, but as an object of statistics).
fn is_vllm_result(o: &Map<String, Value>) -> bool {
    let number = |k: &str| o.get(k).is_some_and(|v| num(v).is_some());
    number("completed")
        || number("request_throughput")
        || o.iter().any(|(k, v)| k.ends_with("_ttft_ms") && num(v).is_some())
}

/// JSON Lines: vLLM `--append-result`, SGLang `--output-file` (one result per run), or AIPerf's
/// per-request `profile_export.jsonl` (one record per request). The first record decides.
fn json_lines(s: &str, p: &mut Parsed) -> Result<Vec<Run>, ParseError> {
    let lines: Vec<(usize, &str)> = s
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l))
        .collect();
    if lines.len() < 2 || !lines.iter().all(|(_, l)| l.trim_start().starts_with('{')) {
        // Not JSON Lines: report the document's own JSON error (line and column).
        return text::json_value(s).map(|_| Vec::new());
    }
    let mut out: Vec<(usize, Obj)> = Vec::new();
    for (ln, l) in lines {
        match read_doc(l) {
            Ok(Doc::Object(o)) => out.push((ln, o)),
            Ok(Doc::Other(_)) => p.warn(format!("line {ln}: not a JSON object; skipped")),
            Err(e) if out.is_empty() => {
                return Err(ParseError::at_col(
                    ln,
                    e.column().max(1),
                    format!("invalid JSON Lines record: {e}"),
                ));
            }
            Err(e) => p.warn(format!("line {ln}: invalid JSON Lines record skipped ({e})")),
        }
    }
    let Some((_, first)) = out.first() else {
        return Err(ParseError::at(1, "no JSON object in the JSON Lines input"));
    };
    if bench_stats_json::is_record(&first.map) {
        return Ok(vec![bench_stats_json::records(
            out.iter().map(|(ln, o)| (*ln, &o.map)),
            p,
        )]);
    }
    if !is_vllm_result(&first.map) {
        return Err(unrecognised_json(first.map.keys()));
    }
    let mut runs = Vec::new();
    for (i, (_, o)) in out.iter().enumerate() {
        let mut r = vllm_result(o, p);
        if r.name.is_empty() {
            r.name = load_point(&o.map).unwrap_or_else(|| format!("run{}", i + 1));
        }
        runs.push(r);
    }
    Ok(runs)
}

/// `vllm bench sweep`'s `summary.json`: a JSON array of `vllm bench serve` results, one load point
/// each (named by its label, else its request rate and concurrency).
fn sweep(rows: &[Value], p: &mut Parsed) -> Vec<Run> {
    p.tool = Some("vllm bench sweep".into());
    let mut runs = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let Some(o) = row.as_object().filter(|o| is_vllm_result(o)) else {
            p.warn(format!(
                "element {} of the sweep is not a vllm bench serve result; skipped",
                i + 1
            ));
            continue;
        };
        let obj = Obj::from_map(o.clone());
        let mut r = vllm_result(&obj, p);
        if r.name.is_empty() {
            r.name = load_point(o).unwrap_or_else(|| format!("run{}", i + 1));
        }
        runs.push(r);
    }
    runs
}

/// A run's load point as a name: `rate_4`, `rate_inf_conc_64`; None when the record says neither.
fn load_point(o: &Map<String, Value>) -> Option<String> {
    let rate = match o.get("request_rate") {
        Some(Value::String(s)) if s.eq_ignore_ascii_case("inf") => Some("rate_inf".to_owned()),
        Some(v) => num(v).map(|r| run_label("rate", Some(r), "")),
        None => None,
    };
    let conc = o
        .get("max_concurrency")
        .and_then(num)
        .map(|c| run_label("conc", Some(c), ""));
    match (rate, conc) {
        (Some(r), Some(c)) => Some(format!("{r}_{c}")),
        (r, c) => r.or(c),
    }
}

/// The tool a vLLM-format result is of: rentcheck's own generator names itself (`rentcheck
/// loadgen 0.1.0`; its TTFT starts at the first content chunk, not at vLLM's client's first chunk),
/// SGLang's by its own keys, else vLLM's client.
fn name_tool(o: &Map<String, Value>, sglang: bool, p: &mut Parsed) {
    if let Some(version) = o
        .get("generator")
        .and_then(Value::as_str)
        .and_then(|g| g.strip_prefix("rentcheck loadgen"))
        .map(str::trim)
    {
        p.tool.get_or_insert_with(|| "rentcheck loadgen".into());
        if !version.is_empty() {
            p.tool_version.get_or_insert_with(|| version.into());
        }
    }
    p.tool.get_or_insert_with(|| {
        if sglang {
            "sglang bench_serving"
        } else {
            "vllm bench serve"
        }
        .into()
    });
}

/// One read per field of vLLM's result JSON, in its order.
fn vllm_result(obj: &Obj, p: &mut Parsed) -> Run {
    let o = &obj.map;
    // SGLang's own bench_serving writes the same key scheme plus a few keys vLLM's does not.
    let sglang = [
        "total_output_tokens_retokenized",
        "sharegpt_output_len",
        "random_range_ratio",
    ]
    .iter()
    .any(|k| o.contains_key(*k));
    name_tool(o, sglang, p);
    let mut r = Run::named(o.get("label").and_then(Value::as_str).unwrap_or_default());
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
        ("total_throughput", "total_tokens_per_s"),
        ("request_goodput", "tool_goodput_rps"),
        ("request_goodput:", "tool_goodput_rps"),
        ("duration", "duration_s"),
        ("max_concurrency", "load_concurrency"),
    ];
    for (src, dst) in map {
        if let Some(x) = o.get(src).and_then(num) {
            r.set(dst, x);
        }
    }
    // The load asked for: a finite request rate (`inf` sends everything at once: no offered rate).
    if let Some(rate) = o
        .get("request_rate")
        .and_then(num)
        .filter(|r| r.is_finite() && *r > 0.0)
    {
        r.set("offered_rps", rate);
    }
    if let Some(c) = r.get("completed").filter(|c| *c > 0.0) {
        for (src, dst) in [
            ("total_input_tokens", "mean_input_tokens"),
            ("total_output_tokens", "mean_output_tokens"),
        ] {
            if let Some(total) = o.get(src).and_then(num) {
                r.set(dst, total / c);
            }
        }
    }
    fill_throughput_and_failures(obj, &mut r);
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
    exact_latencies(obj, &mut r);
    r.requests = requests(obj);
    r.latency_rebuilt = obj.itls.is_some() && obj.latencies.is_none();
    tpot_from_requests(&mut r);
    r
}

/// The request throughput older SGLang results leave out, and the failures a result does not
/// count: from the per-request errors, else the prompts sent less those completed.
fn fill_throughput_and_failures(obj: &Obj, r: &mut Run) {
    let o = &obj.map;
    // Older SGLang results give completed and duration but no request throughput: it is their
    // quotient, as both tools define it.
    if r.get("request_throughput_rps").is_none() {
        if let (Some(c), Some(d)) = (r.get("completed"), r.get("duration_s")) {
            if d > 0.0 {
                r.set("request_throughput_rps", c / d);
            }
        }
    }
    if r.get("failed").is_none() {
        if let Some(e) = obj.errors.as_deref() {
            let f = e.iter().filter(|failed| **failed).count();
            r.set("failed", f as f64);
        } else if let (Some(n), Some(c)) = (o.get("num_prompts").and_then(num), r.get("completed")) {
            if n >= c {
                r.set("failed", n - c);
            }
        }
    }
}

/// Exact TTFT and inter-token percentiles from the per-request data, over the requests that
/// did not fail.
fn exact_latencies(obj: &Obj, r: &mut Run) {
    let errors = obj.errors.as_deref();
    let ok = |i: usize| errors.and_then(|e| e.get(i)).is_none_or(|failed| !failed);
    // Without `--save-detailed`, newer `vllm bench serve` keeps every request's latency but not
    // its errors, and a failed request's latency stays at its 0.0 default: no completed request
    // takes 0 s, so those are the failed ones.
    let completed = |x: &f64| errors.is_some() || *x > 0.0;
    if let Some(t) = &obj.ttfts {
        // Non-numbers are NaN here and dropped by `exact` (NaN stays NaN after scaling).
        let xs: Vec<f64> = t
            .iter()
            .enumerate()
            .filter(|(i, x)| ok(*i) && completed(x))
            .map(|(_, x)| x * 1000.0)
            .collect();
        exact(r, "ttft", xs);
    }
    // Newer `vllm bench serve --save-detailed` files keep each request's latency: the exact
    // end-to-end percentiles, which the default `--percentile-metrics` leave out of the summary.
    if let Some(l) = &obj.latencies {
        let xs: Vec<f64> = l
            .iter()
            .enumerate()
            .filter(|(i, x)| ok(*i) && completed(x))
            .map(|(_, x)| x * 1000.0)
            .collect();
        exact(r, "e2e", xs);
    }
    if let Some(t) = &obj.itls {
        let mut xs = Vec::with_capacity(t.values.len());
        let mut start = 0;
        for (i, &end) in t.ends.iter().enumerate() {
            if ok(i) {
                xs.extend(t.values.get(start..end).unwrap_or_default().iter().map(|x| x * 1000.0));
            }
            start = end;
        }
        exact(r, "itl", xs);
    }
}

/// The per-request time per output token's percentiles where the summary lacks them (`vllm bench
/// serve` writes p95 only with `--metric-percentiles` 95, yet `serving.tpot_p95_ms` is the figure the
/// brief's inter-token target is judged on). Over completed requests with more than one output token,
/// as vLLM's own TPOT statistics are; a percentile the summary has is kept (it includes the time after
/// the last token, which the rebuilt figure leaves out).
fn tpot_from_requests(r: &mut Run) {
    let xs: Vec<f64> = r
        .requests
        .iter()
        .filter(|q| q.ok)
        .filter_map(|q| {
            let t = q.tpot_ms?;
            q.output_tokens.map_or(t > 0.0, |n| n > 1.0).then_some(t)
        })
        .collect();
    let mut exact_run = Run::default();
    exact(&mut exact_run, "tpot", xs);
    for (k, v) in exact_run.vals {
        if r.get(&k).is_none() {
            r.set(k, v);
        }
    }
}

/// Per-request figures from the `--save-detailed` arrays. The file keeps each request's TTFT and
/// its inter-token gaps but not its latency, so the end-to-end latency is rebuilt as TTFT + the sum of
/// the gaps (the time after the last token is not in it) and TPOT as that sum over
/// `output tokens − 1`, as vLLM computes TPOT.
fn requests(obj: &Obj) -> Vec<RequestSample> {
    let Some(ttfts) = &obj.ttfts else {
        return Vec::new();
    };
    let errors = obj.errors.as_deref();
    let itl_sums: Option<Vec<(f64, usize)>> = obj.itls.as_ref().map(|t| {
        let mut start = 0;
        t.ends
            .iter()
            .map(|&end| {
                let gaps = t.values.get(start..end).unwrap_or_default();
                start = end;
                (gaps.iter().sum::<f64>(), gaps.len())
            })
            .collect()
    });
    ttfts
        .iter()
        .enumerate()
        .map(|(i, &ttft)| {
            // Without an `errors` list, a failed request is known by its TTFT left at 0: no
            // completed request has none (the exact percentiles leave it out the same way).
            let failed = match errors {
                Some(e) => e.get(i).copied().unwrap_or(false),
                None => ttft.is_nan() || ttft <= 0.0,
            };
            let ttft_ms = (ttft.is_finite() && ttft >= 0.0).then_some(ttft * 1000.0);
            let gaps = itl_sums.as_ref().and_then(|s| s.get(i)).copied();
            let latency_ms = obj
                .latencies
                .as_ref()
                .and_then(|l| l.get(i))
                .copied()
                .filter(|l| l.is_finite() && *l >= 0.0)
                .map(|l| l * 1000.0);
            // The recorded latency where the file keeps it, else TTFT + the gaps.
            let e2e_ms = latency_ms.or(match (ttft_ms, gaps) {
                (Some(t), Some((sum, _))) if sum.is_finite() => Some(t + sum * 1000.0),
                _ => None,
            });
            let recorded = obj
                .output_lens
                .as_ref()
                .and_then(|l| l.get(i))
                .copied()
                .filter(|n| n.is_finite() && *n >= 0.0);
            // Without output_lens, every streamed chunk after the first is one token.
            let tokens = recorded.or_else(|| gaps.map(|(_, n)| (n + 1) as f64));
            // vLLM: (latency − TTFT) ÷ (tokens − 1), 0 for a one-token answer; a completed request
            // with no output token has no time per output token.
            let after_first_ms = match (latency_ms, ttft_ms, gaps) {
                (Some(l), Some(t), _) => Some((l - t).max(0.0)),
                (_, _, Some((sum, _))) => Some(sum * 1000.0),
                _ => None,
            };
            let tpot_ms = match (after_first_ms, tokens) {
                (Some(after), Some(n)) if n > 1.0 => Some(after / (n - 1.0)),
                (Some(_), Some(n)) if n >= 1.0 => Some(0.0),
                _ => None,
            };
            RequestSample {
                ok: !failed && ttft_ms.is_some(),
                ttft_ms,
                tpot_ms,
                e2e_ms,
                input_tokens: obj
                    .input_lens
                    .as_ref()
                    .and_then(|l| l.get(i))
                    .copied()
                    .filter(|n| n.is_finite() && *n >= 0.0),
                output_tokens: recorded,
            }
        })
        .collect()
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
        // The columns of vLLM's nightly tables (`serving_column_mapping` in its
        // convert-results-json-to-markdown.py): `# of req.` is `completed`.
        match k.as_str() {
            "Tput (req/s)" => r.set("request_throughput_rps", x),
            "Output Tput (tok/s)" => r.set("output_tokens_per_s", x),
            "Total Tput (tok/s)" | "Total Token Tput (tok/s)" => r.set("total_tokens_per_s", x),
            "# of req." => r.set("completed", x),
            _ => {}
        }
    }
    r
}

/// Gives every run a name a metric key can hold, each its own: two load points with one label (a
/// sweep repeated) must not overwrite each other.
fn name_runs_apart(runs: &mut [Run]) {
    // A set: a hostile sweep of 70,000 runs made a list's lookups quadratic (6 s for 1 MB).
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (i, r) in runs.iter_mut().enumerate() {
        if r.name.is_empty() || r.name.contains(char::is_whitespace) || r.name.contains('.') {
            r.name = if r.name.is_empty() {
                format!("run{}", i + 1)
            } else {
                r.name.replace([' ', '\t', '.'], "_")
            };
        }
        if seen.contains(&r.name) {
            r.name = format!("{}_run{}", r.name, i + 1);
        }
        seen.insert(r.name.clone());
    }
}

fn columnar(cols: &Map<String, Value>) -> Vec<Run> {
    // Rows in first-seen order, found by key through a map (a list's lookups were quadratic).
    let mut rows: Vec<Map<String, Value>> = Vec::new();
    let mut row_of: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (col, cells) in cols {
        for (rk, v) in cells.as_object().into_iter().flatten() {
            if let Some(&i) = row_of.get(rk.as_str()) {
                rows[i].insert(col.clone(), v.clone());
            } else if rows.len() < 10_000 {
                let mut m = Map::new();
                m.insert(col.clone(), v.clone());
                row_of.insert(rk, rows.len());
                rows.push(m);
            }
        }
    }
    rows.iter().map(table_row).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sglang_lines_with_pythons_infinity_and_nan_are_read_and_say_what_is_missing() {
        // tests/fixtures/bench-serving/PROVENANCE.md: two real SGLang results, the second with
        // `"request_rate": Infinity` and `"median_itl_ms": NaN` as Python writes them.
        let text = include_str!(
            "../../../../tests/fixtures/bench-serving/sglang-bench-serving-request-rate-infinity-nan.jsonl"
        );
        let got = parse(text, &SloTargets::default()).unwrap();
        let v = |k: &str| got.get_num(k);
        // Both lines are runs; the unlimited rate is named `rate_inf`, not dropped.
        assert_eq!(v("serving.by_run.rate_1.completed"), Some(300.0));
        assert_eq!(v("serving.by_run.rate_inf.completed"), Some(3200.0));
        // 3,200 completed in 383.073250005953 s = 8.3535… requests per second (this SGLang writes no
        // request throughput), the highest of the two: the un-suffixed keys are its.
        let rps = v("serving.request_throughput_rps").unwrap();
        assert!((rps - 3200.0 / 383.073250005953).abs() < 1e-9, "{rps}");
        assert_eq!(v("serving.ttft_p50_ms"), Some(614.2499720444903));
        assert_eq!(v("serving.e2e_mean_ms"), Some(149037.25147111146));
        assert_eq!(v("serving.e2e_p50_ms"), Some(159469.04255752452));
        // NaN is no value; an unlimited rate offers no rate.
        assert_eq!(v("serving.itl_p50_ms"), None);
        assert_eq!(v("serving.offered_rps"), None);
        assert!(v("serving.by_run.rate_1.itl_p50_ms").is_some());
        assert!(
            got.warnings.iter().any(|w| w.contains("Infinity")),
            "{:?}",
            got.warnings
        );
        assert!(
            got.warnings
                .iter()
                .any(|w| w.contains("only mean and median") && w.contains("serving.ttft_p99_ms")),
            "{:?}",
            got.warnings
        );
    }

    #[test]
    fn exact_quantiles_match_a_sort() {
        let sorted = |mut xs: Vec<f64>| {
            xs.sort_by(f64::total_cmp);
            let mut out = Vec::new();
            for q in [0.5, 0.95, 0.99] {
                let pos = q * (xs.len() - 1) as f64;
                let lo = pos.floor() as usize;
                let hi = (lo + 1).min(xs.len() - 1);
                out.push(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo as f64));
            }
            out
        };
        for n in [1usize, 2, 3, 7, 100, 1001] {
            let xs: Vec<f64> = (0..n).map(|i| ((i * 7919) % 1009) as f64 * 0.5 - 3.0).collect();
            let mut r = Run::default();
            exact(&mut r, "t", xs.clone());
            let want = sorted(xs);
            let got: Vec<f64> = ["p50", "p95", "p99"]
                .iter()
                .map(|s| r.get(&format!("t_{s}_ms")).unwrap())
                .collect();
            assert_eq!(got, want, "n = {n}");
        }
    }

    /// A console block as SGLang's `bench_serving.py` prints it (the load inside the block), and a
    /// log of two such runs, as a sweep leaves: one load point each, named by its rate.
    #[test]
    fn console_blocks_carry_their_load_and_a_log_of_several_is_a_sweep() {
        let block = |rate: &str, rps: &str| {
            format!(
                "============ Serving Benchmark Result ============\n\
                 Backend:                                 sglang-oai\n\
                 Traffic request rate:                    {rate}\n\
                 Max request concurrency:                 64\n\
                 Successful requests:                     500\n\
                 Benchmark duration (s):                  50.00\n\
                 Request throughput (req/s):              {rps}\n\
                 ---------------Time to First Token----------------\n\
                 Mean TTFT (ms):                          120.00\n\
                 P99 TTFT (ms):                           300.00\n\
                 ==================================================\n"
            )
        };
        let one = parse(&block("20.0", "9.80"), &SloTargets::default()).unwrap();
        assert_eq!(one.tool.as_deref(), Some("sglang bench_serving"));
        assert_eq!(one.get_num("serving.offered_rps"), Some(20.0));
        assert_eq!(one.get_num("serving.load_concurrency"), Some(64.0));
        assert_eq!(one.get_num("serving.max_concurrency"), None);
        assert_eq!(one.get_num("serving.ttft_p99_ms"), Some(300.0));

        let sweep = format!("{}\n{}", block("4.0", "3.95"), block("inf", "10.20"));
        let got = parse(&sweep, &SloTargets::default()).unwrap();
        assert_eq!(
            got.get_num("serving.by_run.rate_4_conc_64.request_throughput_rps"),
            Some(3.95)
        );
        assert_eq!(
            got.get_num("serving.by_run.rate_inf_conc_64.request_throughput_rps"),
            Some(10.2)
        );
        // The busiest point is the un-suffixed one; an unlimited rate offers none.
        assert_eq!(got.get_num("serving.request_throughput_rps"), Some(10.2));
        assert_eq!(got.get_num("serving.by_run.rate_4_conc_64.offered_rps"), Some(4.0));

        // vLLM ≥ 0.10 names the rate inside the block; older ones print it just before.
        let vllm = "Traffic request rate: 2.0\nMaximum request concurrency: None\n\
                    ============ Serving Benchmark Result ============\n\
                    Successful requests:                     16\n\
                    Request rate configured (RPS):           2.00\n\
                    Request throughput (req/s):              1.90\n\
                    ==================================================\n";
        let got = parse(vllm, &SloTargets::default()).unwrap();
        assert_eq!(got.tool.as_deref(), Some("vllm bench serve"));
        assert_eq!(got.get_num("serving.offered_rps"), Some(2.0));
        assert_eq!(got.get_num("serving.load_concurrency"), None);
    }

    /// GenAI-Perf of early 2024 wrote its latencies in nanoseconds
    /// (triton-inference-server/client 62edd0a0, genai-perf/tests/test_llm_metrics.py).
    #[test]
    fn a_genai_perf_csv_in_nanoseconds_is_read_in_milliseconds() {
        let csv = "Metric,avg,min,max,p99,p95,p90,p75,p50,p25\n\
                   Time To First Token (ns),2000000,2000000,2000000,2500000,2400000,2300000,2200000,2100000,2000000\n\
                   Inter Token Latency (ns),20000000,15000000,30000000,29000000,28000000,26000000,22000000,20000000,18000000\n\
                   Request Latency (ns),800000000,700000000,900000000,890000000,880000000,860000000,820000000,800000000,780000000\n\
                   \n\
                   Metric,Value\n\
                   Request Throughput (per sec),4.5\n";
        let got = parse(csv, &SloTargets::default()).unwrap();
        assert_eq!(got.get_num("serving.ttft_p99_ms"), Some(2.5));
        assert_eq!(got.get_num("serving.itl_p95_ms"), Some(28.0));
        assert_eq!(got.get_num("serving.e2e_p99_ms"), Some(890.0));
    }

    /// AIPerf's aggregate of several runs (ai-dynamo/aiperf, exporters/aggregate: the runs' mean and
    /// confidence bounds per `<metric>_<stat>`) has no request of its own: read as one request, it
    /// gave 1 completed and an error rate of 0 whatever the runs' errors. It is refused by name.
    #[test]
    fn an_aiperf_aggregate_of_runs_is_refused_by_name_not_read_as_one_request() {
        let aggregate = r#"{"schema_version": "1.0", "aiperf_version": "0.3.0",
            "metadata": {"aggregation_type": "confidence", "num_profile_runs": 3, "confidence_level": 0.95},
            "metrics": {"time_to_first_token_p99": {"mean": 121.5, "std": 4.2, "ci_low": 111.1, "ci_high": 131.9, "unit": "ms"},
                        "request_count_avg": {"mean": 1000.0, "std": 0.0, "ci_low": 1000.0, "ci_high": 1000.0, "unit": "requests"}}}"#;
        assert_eq!(
            super::super::detect_kind(aggregate.as_bytes()),
            Some(super::super::EvidenceKind::BenchServing)
        );
        let err = parse(aggregate, &SloTargets::default()).unwrap_err();
        assert!(err.to_string().contains("AIPerf aggregate"), "{err}");
        assert!(err.to_string().contains("profile_export_aiperf.json"), "{err}");
    }

    /// Newer `vllm bench serve` without `--save-detailed` keeps `latencies` for every request but
    /// strips `errors`; a failed request's latency stays 0.0 (vllm/benchmarks/serve.py,
    /// `RequestFuncOutput`). The exact end-to-end percentiles are over the completed ones.
    #[test]
    fn failed_requests_zero_latencies_stay_out_of_the_exact_percentiles() {
        let mut latencies = vec![0.0; 3];
        latencies.extend((1..=7).map(|i| f64::from(i) / 10.0));
        let result = serde_json::json!({
            "backend": "vllm", "date": "20260901-120000", "num_prompts": 10, "completed": 7,
            "failed": 3, "duration": 10.0, "request_throughput": 0.7,
            "mean_ttft_ms": 50.0, "median_ttft_ms": 50.0, "p99_ttft_ms": 90.0,
            "median_e2el_ms": 0.0, "latencies": latencies,
        });
        let got = parse(&result.to_string(), &SloTargets::default()).unwrap();
        // 0.1 … 0.7 s: the median of the seven completed is 0.4 s (the zeros made it 0.3 s).
        assert_eq!(got.get_num("serving.e2e_p50_ms"), Some(400.0));
        assert_eq!(got.get_num("serving.completed"), Some(7.0));

        // With each request's TTFT too, the three failed ones (TTFT 0) are not good requests: they
        // met every target at 0 ms.
        let mut detailed = result.clone();
        let mut ttfts = vec![0.0; 3];
        ttfts.extend([0.05; 7]);
        detailed["ttfts"] = serde_json::json!(ttfts);
        let targets = SloTargets {
            ttft_ms: Some(100.0),
            ..SloTargets::default()
        };
        let got = parse(&detailed.to_string(), &targets).unwrap();
        assert_eq!(got.get_num("serving.slo_attainment"), Some(0.7));
    }

    /// AIPerf lists its kinds of request error in `error_summary`; a summary that has them but no
    /// `error_request_count` gives no error rate (the emptied list read as "no errors": 0 %).
    #[test]
    fn aiperf_errors_without_their_count_give_no_error_rate() {
        let summary = |errors: &str| {
            format!(
                r#"{{"aiperf_version": "0.2.0",
                    "request_throughput": {{"unit": "requests/sec", "avg": 2.0}},
                    "time_to_first_token": {{"unit": "ms", "avg": 100.0, "p99": 200.0}},
                    "request_count": {{"unit": "requests", "avg": 96}},
                    "error_summary": [{errors}]}}"#
            )
        };
        let clean = parse(&summary(""), &SloTargets::default()).unwrap();
        assert_eq!(clean.get_num("serving.error_rate"), Some(0.0));
        let errored = summary(
            r#"{"error_details": {"code": 500, "type": "InternalServerError", "message": "boom"}, "count": 4}"#,
        );
        let got = parse(&errored, &SloTargets::default()).unwrap();
        assert_eq!(got.get_num("serving.error_rate"), None);
        assert!(
            got.warnings.iter().any(|w| w.contains("no count of failed requests")),
            "{:?}",
            got.warnings
        );
    }

    /// GuideLLM 0.4+'s CSV export has three header rows (vllm-project/guidellm,
    /// benchmark/outputs/csv.py `_write_multirow_header`): refused naming the JSON report, not
    /// stored as a run named "Run_ID" with no figures.
    #[test]
    fn guidellms_three_row_csv_is_refused_naming_its_json() {
        let csv = "Run Info,Run Info,Time to First Token,Time to First Token,Inter Token Latency\n\
                   Run_ID,Benchmark,Successful ms,Successful ms,Successful ms\n\
                   ,,Mean,Median,Mean\n\
                   3f2a,synchronous,120.5,118.0,21.3\n";
        assert_eq!(
            super::super::detect_kind(csv.as_bytes()),
            Some(super::super::EvidenceKind::BenchServing)
        );
        let err = parse(csv, &SloTargets::default()).unwrap_err();
        assert!(err.to_string().contains("benchmarks.json"), "{err}");
    }
}
