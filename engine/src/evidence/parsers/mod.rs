//! Pure evidence parsers: raw tool output (bytes) in, metric keys + warnings out.
//!
//! The contract (kinds, keys, rules) is `docs/evidence.md`. Every parser here is a
//! pure function, never panics on any input (they are fuzzed, see `fuzz/`), and reports failures as a
//! [`ParseError`] naming the line (and column where it helps). Partial success is `Ok` with warnings.
//!
//! Key conventions added by this module (the project may add keys, never rename the documented ones):
//! * per-model vLLM keys: `serving.by_model.<model_name>.<suffix>` (e.g.
//!   `serving.by_model.facebook/opt-125m.ttft_p95_ms`). The model name is kept verbatim (it may contain
//!   `/` and `.`); the suffix never contains a dot, so split at the LAST `.` to recover it.
//! * multi-run benchmark inputs (JSON Lines, nightly tables, GenAI-Perf configs, GuideLLM sweeps):
//!   `serving.by_run.<run name>.<suffix>`, a sweep's runs named by their load point
//!   (`constant_4_5rps`, `rate_8`); the un-suffixed keys come from the run with the highest request
//!   throughput (a warning says which).
//!
//! Imports go one way: `mod.rs` dispatches to the format modules; helpers shared by several formats
//! live in their own modules (`bench_run`, `nvidia_smi_gpu`, `text`, `prometheus`, `slo`) that import
//! no format module.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

mod bench_guidellm;
mod bench_json_reader;
mod bench_run;
mod bench_serving;
mod bench_serving_text;
mod bench_stats_json;
mod checkpoint_restore;
mod dcgm_diag;
mod dcgm_discovery;
mod dcgm_exporter;
mod detect;
mod generic_metrics;
pub mod launcher;
pub mod limits;
mod nccl;
pub mod nccl_expected;
mod nvidia_smi_gpu;
mod nvidia_smi_list;
mod nvidia_smi_query;
mod nvidia_smi_text;
mod nvidia_smi_topo;
mod probe;
pub mod prometheus;
pub mod slo;
mod text;
mod vllm_log;
pub mod vllm_metrics;

#[cfg(test)]
mod shapes_tests;

pub use launcher::{strip as strip_launcher_prefixes, Launcher, Stripped};
pub use nccl_expected::{expected_busbw, pct_of_expected, ExpectedBusbw, Nics};
pub use slo::{attainment, histogram_share_at_or_below, Attainment, RequestSample, SloTargets};
pub use vllm_metrics::histogram_quantile;

/// Bump when any parser's output changes, so stored evidence can be re-parsed.
pub const PARSER_VERSION: &str = "8";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvidenceKind {
    NvidiaSmiList,
    NvidiaSmiTopo,
    NvidiaSmiQuery,
    DcgmDiscovery,
    DcgmDiag,
    DcgmExporter,
    VllmMetrics,
    VllmLog,
    BenchServing,
    NcclTests,
    CheckpointRestore,
    Probe,
    Metrics,
    Log,
}

impl EvidenceKind {
    pub const ALL: [EvidenceKind; 14] = [
        EvidenceKind::NvidiaSmiList,
        EvidenceKind::NvidiaSmiTopo,
        EvidenceKind::NvidiaSmiQuery,
        EvidenceKind::DcgmDiscovery,
        EvidenceKind::DcgmDiag,
        EvidenceKind::DcgmExporter,
        EvidenceKind::VllmMetrics,
        EvidenceKind::VllmLog,
        EvidenceKind::BenchServing,
        EvidenceKind::NcclTests,
        EvidenceKind::CheckpointRestore,
        EvidenceKind::Probe,
        EvidenceKind::Metrics,
        EvidenceKind::Log,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            EvidenceKind::NvidiaSmiList => "nvidia-smi-list",
            EvidenceKind::NvidiaSmiTopo => "nvidia-smi-topo",
            EvidenceKind::NvidiaSmiQuery => "nvidia-smi-query",
            EvidenceKind::DcgmDiscovery => "dcgm-discovery",
            EvidenceKind::DcgmDiag => "dcgm-diag",
            EvidenceKind::DcgmExporter => "dcgm-exporter",
            EvidenceKind::VllmMetrics => "vllm-metrics",
            EvidenceKind::VllmLog => "vllm-log",
            EvidenceKind::BenchServing => "bench-serving",
            EvidenceKind::NcclTests => "nccl-tests",
            EvidenceKind::CheckpointRestore => "checkpoint-restore",
            EvidenceKind::Probe => "probe",
            EvidenceKind::Metrics => "metrics",
            EvidenceKind::Log => "log",
        }
    }

    /// Kinds whose `phase=after` upload is computed from the difference to its `phase=before` one
    /// (Prometheus scrapes: counters since the process started).
    pub fn has_window(&self) -> bool {
        matches!(self, EvidenceKind::VllmMetrics | EvidenceKind::DcgmExporter)
    }
}

impl fmt::Display for EvidenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EvidenceKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        EvidenceKind::ALL.iter().copied().find(|k| k.as_str() == s).ok_or(())
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum MetricValue {
    Bool(bool),
    Number(f64),
    Text(String),
    List(Vec<String>),
}

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Parsed {
    pub metrics: BTreeMap<String, MetricValue>,
    pub warnings: Vec<String>,
    pub tool: Option<String>,
    pub tool_version: Option<String>,
    /// The first limit (`limits`) the input broke: the item is then failed with this as its error.
    #[serde(skip)]
    pub(crate) over_limit: Option<String>,
}

/// 2^53: counts above this cannot be represented exactly as f64 and are rejected.
pub(crate) const MAX_COUNT: f64 = 9_007_199_254_740_992.0;
/// Cap on the number of warnings kept, so a hostile file cannot blow up the record.
const MAX_WARNINGS: usize = 200;

impl Parsed {
    pub(crate) fn warn(&mut self, msg: impl Into<String>) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(msg.into());
        } else if self.warnings.len() == MAX_WARNINGS {
            self.warnings.push("further warnings suppressed".to_string());
        }
    }

    /// Any finite number. NaN and ±Inf are rejected with a warning.
    pub(crate) fn num(&mut self, key: &str, v: f64) -> bool {
        if !v.is_finite() {
            self.warn(format!("{key}: value {v} is not finite; not stored"));
            return false;
        }
        self.put(key, MetricValue::Number(v));
        true
    }

    /// Every metric goes in here: past a limit nothing more is taken (so a hostile input never
    /// builds a large map) and the first limit broken is kept as the item's error.
    fn put(&mut self, key: &str, value: MetricValue) {
        if self.over_limit.is_some() {
            return;
        }
        if let Some(v) = limits::violation(key, &value) {
            self.over_limit = Some(v);
            return;
        }
        if self.metrics.len() >= limits::MAX_METRIC_KEYS && !self.metrics.contains_key(key) {
            self.over_limit = Some(limits::too_many_keys());
            return;
        }
        self.metrics.insert(key.to_string(), value);
    }

    /// A duration, throughput or other quantity that cannot be negative.
    pub(crate) fn nonneg(&mut self, key: &str, v: f64) -> bool {
        if v.is_finite() && v < 0.0 {
            self.warn(format!("{key}: negative value {v} rejected; not stored"));
            return false;
        }
        self.num(key, v)
    }

    /// A count: finite, >= 0 and <= 2^53.
    pub(crate) fn count(&mut self, key: &str, v: f64) -> bool {
        if v.is_finite() && v > MAX_COUNT {
            self.warn(format!("{key}: count {v:e} exceeds 2^53; not stored"));
            return false;
        }
        self.nonneg(key, v)
    }

    pub(crate) fn boolean(&mut self, key: &str, v: bool) {
        self.put(key, MetricValue::Bool(v));
    }

    pub(crate) fn text(&mut self, key: &str, v: impl Into<String>) {
        self.put(key, MetricValue::Text(v.into()));
    }

    pub(crate) fn list(&mut self, key: &str, v: Vec<String>) {
        self.put(key, MetricValue::List(v));
    }

    /// The number stored under `key`, if any.
    pub fn get_num(&self, key: &str) -> Option<f64> {
        match self.metrics.get(key) {
            Some(MetricValue::Number(n)) => Some(*n),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ParseError {
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(line: Option<usize>, column: Option<usize>, message: impl Into<String>) -> Self {
        ParseError {
            line,
            column,
            message: message.into(),
        }
    }
    pub(crate) fn at(line: usize, message: impl Into<String>) -> Self {
        Self::new(Some(line), None, message)
    }
    pub(crate) fn at_col(line: usize, column: usize, message: impl Into<String>) -> Self {
        Self::new(Some(line), Some(column), message)
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "line {l}, column {c}: {}", self.message),
            (Some(l), None) => write!(f, "line {l}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ParseError {}

/// Recognise the kind of an upload from its content (`kind=auto`). `None` for text nothing
/// recognises (the caller stores it as `log`); JSON that matches no kind is `BenchServing`, whose
/// reader then fails with the list of JSON formats read.
pub fn detect_kind(bytes: &[u8]) -> Option<EvidenceKind> {
    detect::detect(bytes)
}

/// Parse `bytes` as evidence of `kind`.
pub fn parse(kind: EvidenceKind, bytes: &[u8]) -> Result<Parsed, ParseError> {
    parse_with(kind, bytes, &SloTargets::default())
}

/// Parse `bytes` as evidence of `kind`, judging serving latencies against the brief's `targets`
/// (`serving.slo_attainment`, `serving.goodput_rps`; other kinds ignore them). Launcher line
/// prefixes (`mpirun --tag-output`, `srun -l`, Ray, `kubectl logs --prefix`) are stripped first, with
/// a warning; errors and `line N:` warnings still name lines of the input as uploaded.
pub fn parse_with(kind: EvidenceKind, bytes: &[u8], targets: &SloTargets) -> Result<Parsed, ParseError> {
    if kind == EvidenceKind::Log {
        return Ok(Parsed::default());
    }
    let decoded = text::decode(bytes)?;
    let s: &str = &decoded;
    let stripped = launcher::strip(s);
    let t: &str = &stripped.text;
    let result = match kind {
        EvidenceKind::Log => Ok(Parsed::default()),
        EvidenceKind::NvidiaSmiList => nvidia_smi_list::parse(t),
        EvidenceKind::NvidiaSmiTopo => nvidia_smi_topo::parse(t),
        EvidenceKind::NvidiaSmiQuery => nvidia_smi_query::parse(t),
        EvidenceKind::DcgmDiscovery => dcgm_discovery::parse(t),
        EvidenceKind::DcgmDiag => dcgm_diag::parse(t),
        EvidenceKind::DcgmExporter => dcgm_exporter::parse(t),
        EvidenceKind::VllmMetrics => vllm_metrics::parse(t, targets),
        EvidenceKind::VllmLog => {
            // The data-parallel engine of a line is in its process prefix, which a stripped layer
            // took away: read it from the line as uploaded.
            let uploaded: Vec<&str> = if stripped.launchers.is_empty() {
                Vec::new()
            } else {
                s.lines().collect()
            };
            vllm_log::parse(t, |n, line| {
                let original = stripped.original_line(n).checked_sub(1).and_then(|i| uploaded.get(i));
                vllm_log::engine_tag(original.copied().unwrap_or(line))
            })
        }
        EvidenceKind::BenchServing => bench_serving::parse(t, targets),
        EvidenceKind::NcclTests => nccl::parse(t),
        EvidenceKind::CheckpointRestore => checkpoint_restore::parse(t),
        EvidenceKind::Probe => probe::parse(t),
        EvidenceKind::Metrics => generic_metrics::parse(t),
    };
    within_limits(with_launcher(result, &stripped))
}

/// An item over a limit (`limits`) is failed with the limit as its error, and no metrics.
fn within_limits(result: Result<Parsed, ParseError>) -> Result<Parsed, ParseError> {
    let p = result?;
    limits::check(&p)?;
    Ok(p)
}

/// Puts the launcher's warnings first, and maps line numbers back to the input when lines of other
/// sources were dropped.
fn with_launcher(result: Result<Parsed, ParseError>, stripped: &Stripped<'_>) -> Result<Parsed, ParseError> {
    if stripped.launchers.is_empty() {
        return result;
    }
    match result {
        Ok(mut p) => {
            let mut warnings = stripped.warnings.clone();
            for w in p.warnings.drain(..) {
                warnings.push(remap_line(&w, stripped));
            }
            p.warnings = warnings;
            Ok(p)
        }
        Err(mut e) => {
            e.line = e.line.map(|l| stripped.original_line(l));
            Err(e)
        }
    }
}

/// `line 12: …` → `line 17: …` when the stripped text's line 12 was the input's line 17.
fn remap_line(w: &str, stripped: &Stripped<'_>) -> String {
    let Some(rest) = w.strip_prefix("line ") else {
        return w.to_owned();
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    match rest.get(..digits).and_then(|d| d.parse::<usize>().ok()) {
        Some(n) => format!(
            "line {}{}",
            stripped.original_line(n),
            rest.get(digits..).unwrap_or_default()
        ),
        None => w.to_owned(),
    }
}

/// A before/after window of a Prometheus kind (vLLM `/metrics`, dcgm-exporter): the `after`
/// scrape's metrics from the difference to `before` (quantiles from bucket deltas, totals from
/// counter deltas, gauges as of `after`). A counter that went down means the process restarted:
/// warn and use `after` alone. Other kinds parse `after` alone.
pub fn parse_window(
    kind: EvidenceKind,
    before: &[u8],
    after: &[u8],
    targets: &SloTargets,
) -> Result<Parsed, ParseError> {
    if !kind.has_window() {
        return parse_with(kind, after, targets);
    }
    let before = text::decode(before).map_err(|e| ParseError {
        message: format!("`before` scrape: {}", e.message),
        ..e
    })?;
    let after = text::decode(after)?;
    // Scrapes taken through a launcher carry its prefixes as any other upload does; the `after`
    // scrape's lines are the ones warnings and errors name.
    let before = launcher::strip(&before);
    let stripped = launcher::strip(&after);
    let (before, after): (&str, &str) = (&before.text, &stripped.text);
    within_limits(with_launcher(
        match kind {
            EvidenceKind::DcgmExporter => dcgm_exporter::parse_window(before, after),
            _ => vllm_metrics::parse_window(before, after, targets),
        },
        &stripped,
    ))
}

/// [`parse_window`] for vLLM `/metrics` without targets.
pub fn parse_vllm_window(before: &[u8], after: &[u8]) -> Result<Parsed, ParseError> {
    parse_window(EvidenceKind::VllmMetrics, before, after, &SloTargets::default())
}
