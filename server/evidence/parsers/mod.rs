//! Pure evidence parsers: raw tool output (bytes) in, metric keys + warnings out.
//!
//! The contract (kinds, keys, rules) is `docs/metrics.md` in the shared docs. Every parser here is a
//! pure function, never panics on any input (they are fuzzed, see `fuzz/`), and reports failures as a
//! [`ParseError`] naming the line (and column where it helps). Partial success is `Ok` with warnings.
//!
//! Key conventions added by this module (the project may add keys, never rename the documented ones):
//! * per-model vLLM keys: `serving.by_model.<model_name>.<suffix>` (e.g.
//!   `serving.by_model.facebook/opt-125m.ttft_p95_ms`). The model name is kept verbatim (it may contain
//!   `/` and `.`); the suffix never contains a dot, so split at the LAST `.` to recover it.
//! * multi-run benchmark inputs (JSON Lines, nightly tables, GenAI-Perf configs):
//!   `serving.by_run.<run name>.<suffix>`; the un-suffixed keys come from the run with the highest
//!   request throughput (a warning says which).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

mod bench_serving;
mod bench_serving_text;
mod checkpoint_restore;
mod dcgm_diag;
mod dcgm_discovery;
mod detect;
mod generic_metrics;
mod nccl_tests;
mod nvidia_smi_list;
mod nvidia_smi_query;
mod nvidia_smi_topo;
mod probe;
pub mod prometheus;
mod text;
mod vllm_log;
pub mod vllm_metrics;

pub use vllm_metrics::histogram_quantile;

/// Bump when any parser's output changes, so stored evidence can be re-parsed.
pub const PARSER_VERSION: &str = "1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvidenceKind {
    NvidiaSmiList,
    NvidiaSmiTopo,
    NvidiaSmiQuery,
    DcgmDiscovery,
    DcgmDiag,
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
    pub const ALL: [EvidenceKind; 13] = [
        EvidenceKind::NvidiaSmiList,
        EvidenceKind::NvidiaSmiTopo,
        EvidenceKind::NvidiaSmiQuery,
        EvidenceKind::DcgmDiscovery,
        EvidenceKind::DcgmDiag,
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
        self.metrics.insert(key.to_string(), MetricValue::Number(v));
        true
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
        self.metrics.insert(key.to_string(), MetricValue::Bool(v));
    }

    pub(crate) fn text(&mut self, key: &str, v: impl Into<String>) {
        self.metrics.insert(key.to_string(), MetricValue::Text(v.into()));
    }

    pub(crate) fn list(&mut self, key: &str, v: Vec<String>) {
        self.metrics.insert(key.to_string(), MetricValue::List(v));
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

/// Recognise the kind of an upload from its content (`kind=auto`). `None` when unrecognised.
pub fn detect_kind(bytes: &[u8]) -> Option<EvidenceKind> {
    detect::detect(bytes)
}

/// Parse `bytes` as evidence of `kind`.
pub fn parse(kind: EvidenceKind, bytes: &[u8]) -> Result<Parsed, ParseError> {
    match kind {
        EvidenceKind::Log => Ok(Parsed::default()),
        EvidenceKind::NvidiaSmiList => nvidia_smi_list::parse(text::decode(bytes)?),
        EvidenceKind::NvidiaSmiTopo => nvidia_smi_topo::parse(text::decode(bytes)?),
        EvidenceKind::NvidiaSmiQuery => nvidia_smi_query::parse(text::decode(bytes)?),
        EvidenceKind::DcgmDiscovery => dcgm_discovery::parse(text::decode(bytes)?),
        EvidenceKind::DcgmDiag => dcgm_diag::parse(text::decode(bytes)?),
        EvidenceKind::VllmMetrics => vllm_metrics::parse(text::decode(bytes)?),
        EvidenceKind::VllmLog => vllm_log::parse(text::decode(bytes)?),
        EvidenceKind::BenchServing => bench_serving::parse(text::decode(bytes)?),
        EvidenceKind::NcclTests => nccl_tests::parse(text::decode(bytes)?),
        EvidenceKind::CheckpointRestore => checkpoint_restore::parse(text::decode(bytes)?),
        EvidenceKind::Probe => probe::parse(text::decode(bytes)?),
        EvidenceKind::Metrics => generic_metrics::parse(text::decode(bytes)?),
    }
}

/// vLLM before/after window (metrics.md): metrics of `after` computed from the difference to
/// `before` (quantiles from bucket deltas, totals from counter deltas, gauges as of `after`). A
/// counter that went down means the server restarted: warn and use `after` alone.
pub fn parse_vllm_window(before: &[u8], after: &[u8]) -> Result<Parsed, ParseError> {
    let before = text::decode(before).map_err(|e| ParseError {
        message: format!("`before` scrape: {}", e.message),
        ..e
    })?;
    let after = text::decode(after)?;
    vllm_metrics::parse_window(before, after)
}
