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
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

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
    let v = match read_doc(s) {
        Ok(v) => v,
        Err(e) => {
            // JSON Lines (`--append-result`): one object per line.
            let lines: Vec<(usize, &str)> = s.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).collect();
            if lines.len() > 1 && lines.iter().all(|(_, l)| l.trim_start().starts_with('{')) {
                let mut out = Vec::new();
                for (i, l) in lines {
                    match read_doc(l) {
                        Ok(Doc::Object(o)) => out.push(o),
                        Ok(Doc::Other(_)) => p.warn(format!("line {}: not a JSON object; skipped", i + 1)),
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
        Doc::Other(Value::Array(rows)) if rows.iter().any(|r| r.get("Test name").is_some()) => {
            p.tool = Some("vllm nightly benchmark".into());
            Ok(rows.iter().filter_map(Value::as_object).map(table_row).collect())
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
            Ok(vec![llmperf(o)])
        }
        Doc::Object(obj)
            if obj.map.contains_key("completed")
                || obj.map.contains_key("request_throughput")
                || obj.map.keys().any(|k| k.ends_with("_ttft_ms")) =>
        {
            Ok(vec![vllm_result(obj, p)])
        }
        _ => Err(ParseError::at(
            1,
            "unrecognised benchmark JSON (no vLLM result keys, nightly table, or llmperf results_* keys)",
        )),
    }
}

fn vllm_result(obj: &Obj, p: &mut Parsed) -> Run {
    let o = &obj.map;
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
    let errors = obj.errors.as_deref();
    if r.get("failed").is_none() {
        if let Some(e) = errors {
            let f = e.iter().filter(|failed| **failed).count();
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
    let ok = |i: usize| errors.and_then(|e| e.get(i)).is_none_or(|failed| !failed);
    if let Some(t) = &obj.ttfts {
        // Non-numbers are NaN here and dropped by `exact` (NaN stays NaN after scaling).
        let xs: Vec<f64> = t
            .iter()
            .enumerate()
            .filter(|(i, _)| ok(*i))
            .map(|(_, x)| x * 1000.0)
            .collect();
        exact(&mut r, "ttft", xs);
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
        exact(&mut r, "itl", xs);
    }
    r
}

fn exact(r: &mut Run, metric: &str, mut xs: Vec<f64>) {
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

// ---------------------------------------------------------------------------------------------
// Reading the JSON document.
//
// A `--save-detailed` result is mostly per-request arrays (`ttfts`, `itls`, `errors`, `input_lens`,
// `output_lens`, `generated_texts`). Building a `serde_json::Value` for them (one enum per number,
// one `Vec` per request's ITLs) and dropping it again was most of the parse time, so the top-level
// object is read in one pass into [`Obj`]: the three arrays that are used become flat typed vectors,
// every other top-level array is checked and skipped, and everything else is a `Value` as before.
// Numbers are read with `deserialize_any` everywhere, so the input is validated exactly as a
// `Value` parse would (an out-of-range number is still an error). Anything this reader does not
// take (not an object; serde_json's private raw-value token) falls back to a `Value` parse, which
// [`Obj::from_map`] converts to the same shape.

enum Doc {
    Object(Obj),
    Other(Value),
}

fn read_doc(s: &str) -> Result<Doc, serde_json::Error> {
    if let Ok(o) = serde_json::from_str::<Obj>(s) {
        return Ok(Doc::Object(o));
    }
    Ok(match serde_json::from_str::<Value>(s)? {
        Value::Object(m) => Doc::Object(Obj::from_map(m)),
        v => Doc::Other(v),
    })
}

/// A top-level JSON object.
#[derive(Debug, Default, PartialEq)]
struct Obj {
    /// Every member (a later duplicate key replaces an earlier one, as in `Value`); array values are
    /// stored as `[]`: nothing reads a top-level array except the three below.
    map: Map<String, Value>,
    /// `ttfts` when it is an array: one entry per request, NaN where the element is not a number.
    ttfts: Option<Vec<f64>>,
    /// `itls` when it is an array.
    itls: Option<Itls>,
    /// `errors` when it is an array: per request, whether the element is a non-empty string.
    errors: Option<Vec<bool>>,
}

/// The numbers of every request's ITL array, flattened; request `i`'s are `values[ends[i-1]..ends[i]]`
/// (a request whose element is not an array has none).
#[derive(Debug, Default, PartialEq)]
struct Itls {
    values: Vec<f64>,
    ends: Vec<usize>,
}

impl Obj {
    /// The same shape from an already parsed `Value` object (the fallback path).
    fn from_map(mut map: Map<String, Value>) -> Obj {
        let mut o = Obj::default();
        for (k, v) in map.iter_mut() {
            let Value::Array(items) = v else { continue };
            let items = std::mem::take(items);
            match k.as_str() {
                "ttfts" => o.ttfts = Some(items.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect()),
                "itls" => {
                    let mut t = Itls::default();
                    for x in &items {
                        t.values
                            .extend(x.as_array().into_iter().flatten().filter_map(Value::as_f64));
                        t.ends.push(t.values.len());
                    }
                    o.itls = Some(t);
                }
                "errors" => {
                    o.errors = Some(
                        items
                            .iter()
                            .map(|x| x.as_str().is_some_and(|s| !s.is_empty()))
                            .collect(),
                    )
                }
                _ => {}
            }
        }
        o.map = map;
        o
    }
}

const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

impl<'de> serde::Deserialize<'de> for Obj {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Obj, D::Error> {
        d.deserialize_any(ObjVisitor)
    }
}

struct ObjVisitor;

impl<'de> Visitor<'de> for ObjVisitor {
    type Value = Obj;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Obj, A::Error> {
        let mut o = Obj::default();
        let mut first = true;
        while let Some(k) = m.next_key::<String>()? {
            if first && k == RAW_VALUE_TOKEN {
                return Err(de::Error::custom("raw value token: read as a Value"));
            }
            first = false;
            let v = match k.as_str() {
                "ttfts" => match m.next_value::<Member<Ttfts>>()? {
                    Member::Array(Ttfts(t)) => {
                        o.ttfts = Some(t);
                        Value::Array(Vec::new())
                    }
                    Member::Other(v) => {
                        o.ttfts = None;
                        v
                    }
                },
                "itls" => match m.next_value::<Member<Itls>>()? {
                    Member::Array(t) => {
                        o.itls = Some(t);
                        Value::Array(Vec::new())
                    }
                    Member::Other(v) => {
                        o.itls = None;
                        v
                    }
                },
                "errors" => match m.next_value::<Member<Errors>>()? {
                    Member::Array(Errors(e)) => {
                        o.errors = Some(e);
                        Value::Array(Vec::new())
                    }
                    Member::Other(v) => {
                        o.errors = None;
                        v
                    }
                },
                _ => match m.next_value::<Member<Skipped>>()? {
                    Member::Array(Skipped) => Value::Array(Vec::new()),
                    Member::Other(v) => v,
                },
            };
            o.map.insert(k, v);
        }
        Ok(o)
    }
}

/// Builds `T` from an array's elements.
trait FromSeq<'de>: Sized {
    fn from_seq<A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error>;
}

/// A top-level member: an array read as `T`, or any other value as a `Value`.
enum Member<T> {
    Array(T),
    Other(Value),
}

impl<'de, T: FromSeq<'de>> serde::Deserialize<'de> for Member<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MemberVisitor(std::marker::PhantomData))
    }
}

struct MemberVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: FromSeq<'de>> Visitor<'de> for MemberVisitor<T> {
    type Value = Member<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        T::from_seq(seq).map(Member::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
        serde::Deserialize::deserialize(de::value::MapAccessDeserializer::new(m)).map(Member::Other)
    }
    // The scalars as serde_json's own `Value` visitor builds them.
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::Number(v.into())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::Number(v.into())))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Member::Other(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::String(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        serde::Deserialize::deserialize(d).map(Member::Other)
    }
}

/// Any value, checked and dropped.
struct Ignored;

impl<'de> serde::Deserialize<'de> for Ignored {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberOrIgnored).map(|_| Ignored)
    }
}

/// Any value; a number as `f64`, anything else (checked, then dropped) as NaN.
struct NumberOrIgnored;

struct Num(f64);

impl<'de> serde::Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberOrIgnored).map(Num)
    }
}

impl<'de> Visitor<'de> for NumberOrIgnored {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_i64<E>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_u64<E>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_f64<E>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
    fn visit_bool<E>(self, _: bool) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_str<E>(self, _: &str) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_unit<E>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_none<E>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        <Ignored as serde::Deserialize>::deserialize(d).map(|_| f64::NAN)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<f64, A::Error> {
        while seq.next_element::<Ignored>()?.is_some() {}
        Ok(f64::NAN)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<f64, A::Error> {
        while m.next_key::<Ignored>()?.is_some() {
            m.next_value::<Ignored>()?;
        }
        Ok(f64::NAN)
    }
}

/// A top-level array nothing reads.
struct Skipped;

impl<'de> FromSeq<'de> for Skipped {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<Ignored>()?.is_some() {}
        Ok(Skipped)
    }
}

struct Ttfts(Vec<f64>);

impl<'de> FromSeq<'de> for Ttfts {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut v = Vec::new();
        while let Some(Num(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(Ttfts(v))
    }
}

impl<'de> FromSeq<'de> for Itls {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut t = Itls::default();
        while seq.next_element_seed(ItlRow(&mut t.values))?.is_some() {
            t.ends.push(t.values.len());
        }
        Ok(t)
    }
}

/// One request's ITL array: its numbers are appended to the shared vector.
struct ItlRow<'v>(&'v mut Vec<f64>);

impl<'de> DeserializeSeed<'de> for ItlRow<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItlRow<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(Num(x)) = seq.next_element()? {
            // JSON numbers are never NaN: NaN marks a non-number, which `as_f64` would skip.
            if !x.is_nan() {
                self.0.push(x);
            }
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<(), A::Error> {
        NumberOrIgnored.visit_map(m).map(|_| ())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        <Ignored as serde::Deserialize>::deserialize(d).map(|_| ())
    }
}

struct Errors(Vec<bool>);

impl<'de> FromSeq<'de> for Errors {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut v = Vec::new();
        while let Some(Failed(f)) = seq.next_element()? {
            v.push(f);
        }
        Ok(Errors(v))
    }
}

/// An `errors` element: true for a non-empty string.
struct Failed(bool);

impl<'de> serde::Deserialize<'de> for Failed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, v: &str) -> Result<bool, E> {
                Ok(!v.is_empty())
            }
            fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_unit<E>(self) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_none<E>(self) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
                <Ignored as serde::Deserialize>::deserialize(d).map(|_| false)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
                NumberOrIgnored.visit_seq(seq).map(|_| false)
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<bool, A::Error> {
                NumberOrIgnored.visit_map(m).map(|_| false)
            }
        }
        d.deserialize_any(V).map(Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass reader gives what a `Value` parse converted by `Obj::from_map` gives.
    #[test]
    fn typed_reader_matches_value_parse() {
        let inputs = [
            r#"{"completed": 3, "ttfts": [0.1, 2, -3, "x", null, [1], {"a": 1}], "errors": ["", "boom", 5, null, [], {}, "e"]}"#,
            r#"{"itls": [[0.01, 0.02], 7, [], [1, "a", [2], {"b": 3}, 4e-3], "s", null, {"k": [1]}], "ttfts": 5}"#,
            r#"{"ttfts": [1, 2], "ttfts": "again", "itls": "no", "itls": [[1]], "errors": {"a": 1}}"#,
            r#"{"input_lens": [1, 2, 3], "generated_texts": ["a\"b", "\u00e9"], "x": {"nested": [1, [2, {"y": null}]]}}"#,
            r#"{"a": true, "b": false, "c": null, "d": -12, "e": 18446744073709551615, "f": 1.5e300, "g": "t"}"#,
            r#"{}"#,
        ];
        for s in inputs {
            let typed: Obj = serde_json::from_str(s).unwrap();
            let Value::Object(m) = serde_json::from_str::<Value>(s).unwrap() else {
                panic!("not an object: {s}")
            };
            let via_value = Obj::from_map(m);
            // NaN != NaN: compare the bit patterns of the typed arrays.
            let bits = |o: &Obj| {
                o.ttfts
                    .as_ref()
                    .map(|t| t.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
            };
            assert_eq!(bits(&typed), bits(&via_value), "{s}");
            assert_eq!(typed.map, via_value.map, "{s}");
            assert_eq!(typed.itls, via_value.itls, "{s}");
            assert_eq!(typed.errors, via_value.errors, "{s}");
        }
        // Invalid input is rejected by both, including a number out of range in a skipped array.
        for s in [
            r#"{"input_lens": [1e999]}"#,
            r#"{"ttfts": [1,]}"#,
            r#"{"a": 1"#,
            r#"[1, 2]"#,
        ] {
            assert!(serde_json::from_str::<Obj>(s).is_err(), "{s}");
        }
        assert!(read_doc(r#"{"input_lens": [1e999]}"#).is_err());
        assert!(matches!(read_doc("[1, 2]"), Ok(Doc::Other(Value::Array(_)))));
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
}
