//! Acceptance cards: criteria, their validation and the diff of two revisions. Pure: no I/O.
//!
//! A criterion names a metric key (docs/evidence.md lists every key a parser writes), an operator, a threshold, a unit,
//! the stage whose evidence it reads (1 smoke … 5 review) and whether it is required.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use chrono::{DateTime, Utc};

use crate::validation::FieldError;

/// How a measured value is compared with the threshold: `value <op> threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    pub const ALL: [Op; 6] = [Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::Eq, Op::Ne];

    pub fn as_str(&self) -> &'static str {
        match self {
            Op::Lt => "lt",
            Op::Le => "le",
            Op::Gt => "gt",
            Op::Ge => "ge",
            Op::Eq => "eq",
            Op::Ne => "ne",
        }
    }

    /// The mathematical sign, for people.
    pub fn symbol(&self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "≤",
            Op::Gt => ">",
            Op::Ge => "≥",
            Op::Eq => "=",
            Op::Ne => "≠",
        }
    }

    pub fn is_ordering(&self) -> bool {
        matches!(self, Op::Lt | Op::Le | Op::Gt | Op::Ge)
    }

    /// Applies the operator to an ordering of `value` against the threshold.
    pub fn holds(&self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Op::Lt => ord == Less,
            Op::Le => ord != Greater,
            Op::Gt => ord == Greater,
            Op::Ge => ord != Less,
            Op::Eq => ord == Equal,
            Op::Ne => ord != Equal,
        }
    }
}

impl std::str::FromStr for Op {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Op::ALL.into_iter().find(|o| o.as_str() == s).ok_or(())
    }
}

/// A threshold: a number, a boolean or a string (JSON's own types).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Threshold {
    Bool(bool),
    Number(f64),
    Text(String),
}

impl Threshold {
    pub fn type_name(&self) -> &'static str {
        match self {
            Threshold::Bool(_) => "bool",
            Threshold::Number(_) => "number",
            Threshold::Text(_) => "string",
        }
    }

    /// As a person types it in the editor.
    pub fn display(&self) -> String {
        match self {
            Threshold::Bool(b) => b.to_string(),
            Threshold::Number(n) => format_number(*n),
            Threshold::Text(s) => s.clone(),
        }
    }
}

/// Numbers without a spurious `.0`.
pub fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// One line of a card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Criterion {
    pub key: String,
    pub op: Op,
    pub threshold: Threshold,
    /// Free text for unknown keys; a known key's unit (empty for booleans and strings).
    pub unit: String,
    /// 1 smoke, 2 functional, 3 load, 4 failure, 5 review. Only evidence of this stage counts.
    pub stage: u8,
    pub required: bool,
    /// Why the criterion is there: one line, shown in the UI (the default card fills it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Criterion {
    /// `key ≥ threshold unit`, for people, as every page shows a threshold (`crate::figures::threshold`:
    /// "gpu.count ≥ 8", "serving.ttft_p95_ms ≤ 500 ms", "serving.slo_attainment ≥ 95 %").
    pub fn summary(&self) -> String {
        let threshold = serde_json::to_value(&self.threshold).unwrap_or(Value::Null);
        format!(
            "{} {}",
            self.key,
            crate::figures::threshold(self.op.as_str(), &threshold, &self.unit)
        )
    }
}

impl Criterion {
    /// Whether some value its key can take fails it. Every number a known key carries is zero or
    /// more (counts, times, rates, sizes, money), fractions are at most 1, and the utilisation
    /// percentages at most 100: a threshold at or past those ends is met by every value, so the
    /// criterion tests nothing (`gpu.count ≥ 0`, `serving.error_rate ≤ 1`). An unknown key, a
    /// probe or a non-numeric threshold is taken to be able to fail.
    pub fn can_fail(&self) -> bool {
        let Threshold::Number(t) = self.threshold else {
            return true;
        };
        let Some(known) = known_key(&self.key).filter(|k| k.kind == ValueKind::Number) else {
            return true;
        };
        let upper = match known.unit {
            "fraction" => Some(1.0),
            // Of the expected bandwidth: a fabric may beat the expectation, so no upper end.
            "%" if self.key != "nccl.busbw_pct_of_expected" => Some(100.0),
            _ => None,
        };
        match self.op {
            Op::Ge => t > 0.0,
            Op::Gt => t >= 0.0,
            Op::Le => upper.is_none_or(|u| t < u),
            Op::Lt => upper.is_none_or(|u| t <= u),
            Op::Eq => true,
            Op::Ne => t >= 0.0 && upper.is_none_or(|u| t <= u),
        }
    }
}

pub const STAGES: [(u8, &str); 5] = [
    (1, "Environment smoke test"),
    (2, "Functional test"),
    (3, "Representative load test"),
    (4, "Failure test"),
    (5, "Acceptance review"),
];

pub fn stage_name(stage: u8) -> &'static str {
    STAGES
        .iter()
        .find(|(n, _)| *n == stage)
        .map(|(_, name)| *name)
        .unwrap_or("unknown stage")
}

/// The type of value a known key carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Number,
    Bool,
    Text,
    List,
    /// Probe checks are `bool | number`.
    BoolOrNumber,
    /// `topo.worst_link`: a link class on an ordered scale (nearest first).
    LinkClass,
}

/// Where a key's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Parsed evidence metrics.
    Evidence,
    /// Computed elsewhere (ledger, manifest lint) and handed to `evaluate` in the `derived` map.
    Derived,
}

/// A key the project knows: its value type, unit and source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownKey {
    pub kind: ValueKind,
    pub unit: &'static str,
    pub source: Source,
}

const fn ev(kind: ValueKind, unit: &'static str) -> KnownKey {
    KnownKey {
        kind,
        unit,
        source: Source::Evidence,
    }
}

/// Keys derived outside the evidence table; `evaluate` reads them from its `derived` map.
pub const COST_PER_JOB: &str = "ledger.cost_per_job";
pub const LINT_ERRORS: &str = "manifest.lint_errors";

/// The metric keys of docs/evidence.md (and the derived ones), with their types and units.
pub fn known_key(key: &str) -> Option<KnownKey> {
    use ValueKind::*;
    let k = match key {
        "gpu.count"
        | "gpu.mig_count"
        | "topo.gpu_count"
        | "dcgm.gpu_count"
        | "nccl.world_size"
        | "nccl.wrong"
        | "gpu.ecc_errors_uncorrected"
        | "dcgm.diag.warnings"
        | "topo.min_nvlinks"
        | "dcgm.diag.level" => ev(Number, "count"),
        "gpu.models" | "gpu.uuids" | "dcgm.diag.failed_tests" | "dcgm.diag.skipped_tests" | "dcgm.diag.tests_run" => {
            ev(List, "")
        }
        "topo.worst_link" => ev(LinkClass, ""),
        "topo.nvlink_all_pairs" | "dcgm.diag.passed" | "checkpoint.restore_ok" => ev(Bool, ""),
        "gpu.memory_total_mib" | "gpu.memory_used_mib_max" => ev(Number, "MiB"),
        "gpu.driver_version" | "gpu.cuda_version" => ev(Text, ""),
        "serving.ttft_p50_ms"
        | "serving.ttft_p95_ms"
        | "serving.ttft_p99_ms"
        | "serving.itl_p95_ms"
        | "serving.tpot_p95_ms"
        | "serving.e2e_p95_ms"
        | "serving.e2e_p99_ms"
        | "serving.queue_time_p95_ms"
        | "serving.prefill_p95_ms"
        | "serving.decode_p95_ms" => ev(Number, "ms"),
        "serving.requests_total"
        | "serving.preemptions_total"
        | "serving.requests_waiting_max"
        | "serving.completed"
        | "serving.kv_cache_tokens" => ev(Number, "count"),
        "serving.max_concurrency" | "serving.load_concurrency" => ev(Number, "requests"),
        "serving.kv_cache_usage_max_pct" => ev(Number, "%"),
        "serving.gpu_memory_utilization" => ev(Number, "fraction"),
        "serving.request_throughput_rps" => ev(Number, "req/s"),
        "serving.output_tokens_per_s" => ev(Number, "tok/s"),
        "serving.error_rate"
        | "serving.slo_attainment"
        | "serving.slo_attainment_ttft"
        | "serving.slo_attainment_itl"
        | "serving.slo_attainment_e2e" => ev(Number, "fraction"),
        "serving.goodput_rps" => ev(Number, "req/s"),
        "nccl.busbw_peak_gbps" | "nccl.busbw_avg_gbps" | "nccl.expected_busbw_gbps" => ev(Number, "GB/s"),
        "nccl.busbw_pct_of_expected" | "gpu.util_pct_avg" => ev(Number, "%"),
        "gpu.xid_errors" => ev(Number, "count"),
        "checkpoint.restore_seconds" => ev(Number, "s"),
        COST_PER_JOB => KnownKey {
            kind: Number,
            // The brief's currency per cost unit: free text, checked as a number only.
            unit: "",
            source: Source::Derived,
        },
        LINT_ERRORS => KnownKey {
            kind: Number,
            unit: "count",
            source: Source::Derived,
        },
        _ if key.starts_with("probe.") && key.len() > "probe.".len() => ev(BoolOrNumber, ""),
        _ => return None,
    };
    Some(k)
}

pub fn is_derived(key: &str) -> bool {
    known_key(key).is_some_and(|k| k.source == Source::Derived)
}

/// `nvidia-smi topo -m` link classes, nearest first; `NV#` stands for any NVLink count.
pub const LINK_CLASSES: [&str; 7] = ["X", "NV#", "PIX", "PXB", "PHB", "NODE", "SYS"];

/// The rank of a link class on the scale (`NV12` → the rank of `NV#`).
pub fn link_rank(s: &str) -> Option<usize> {
    let s = s.trim().to_ascii_uppercase();
    let s = match s.strip_prefix("NV") {
        Some(rest) if rest == "#" || (!rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())) => "NV#".to_owned(),
        _ => s,
    };
    LINK_CLASSES.iter().position(|c| *c == s)
}

/// The most criteria one card may hold.
pub const MAX_CRITERIA: usize = 200;
const MAX_KEY: usize = 120;
const MAX_UNIT: usize = 32;
const MAX_TEXT_THRESHOLD: usize = 200;
const MAX_WHY: usize = 300;

/// A card that passed validation, and the warnings it still deserves.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidCard {
    pub criteria: Vec<Criterion>,
    pub warnings: Vec<String>,
}

/// Checks a JSON list of criteria (the PUT body's `criteria`), reporting every bad field as
/// `criteria[i].field`. Unknown metric keys pass with a warning. Read-only fields a GET returned
/// (`status`, `value`, `evidence_id`, `reason`, `source`) are ignored so a client can send a card back.
pub fn validate_json(criteria: &Value) -> Result<ValidCard, Vec<FieldError>> {
    let Value::Array(items) = criteria else {
        return Err(vec![FieldError::new("criteria", "must be a list of criteria")]);
    };
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let f = |name: &str| format!("criteria[{i}].{name}");
        let Value::Object(map) = item else {
            errors.push(FieldError::new(format!("criteria[{i}]"), "must be an object"));
            continue;
        };
        match read_json_criterion(map, &f) {
            Ok(c) => out.push(c),
            Err(mut e) => errors.append(&mut e),
        }
    }
    finish(out, errors)
}

const READ_ONLY: [&str; 5] = ["status", "value", "evidence_id", "reason", "source"];
const FIELDS: [&str; 7] = ["key", "op", "threshold", "unit", "stage", "required", "why"];

/// One read per JSON field of a criterion, every error collected.
fn read_json_criterion(map: &Map<String, Value>, f: &dyn Fn(&str) -> String) -> Result<Criterion, Vec<FieldError>> {
    let mut errors = Vec::new();
    for k in map.keys() {
        if !FIELDS.contains(&k.as_str()) && !READ_ONLY.contains(&k.as_str()) {
            errors.push(FieldError::new(f(k), "is not a criterion field"));
        }
    }
    let key = match map.get("key") {
        Some(Value::String(s)) => Some(s.trim().to_owned()),
        None | Some(Value::Null) => {
            errors.push(FieldError::new(f("key"), "is required"));
            None
        }
        Some(_) => {
            errors.push(FieldError::new(f("key"), "must be a string"));
            None
        }
    };
    let op = json_op(map, f, &mut errors);
    let threshold = json_threshold(map, f, &mut errors);
    let unit = match map.get("unit") {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.trim().to_owned()),
        Some(_) => {
            errors.push(FieldError::new(f("unit"), "must be a string"));
            None
        }
    };
    let stage = json_stage(map, f, &mut errors);
    let required = match map.get("required") {
        None | Some(Value::Null) => Some(true),
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            errors.push(FieldError::new(f("required"), "must be true or false"));
            None
        }
    };
    let why = match map.get("why") {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) if s.trim().is_empty() => Some(None),
        Some(Value::String(s)) => Some(Some(s.trim().to_owned())),
        Some(_) => {
            errors.push(FieldError::new(f("why"), "must be a string"));
            None
        }
    };
    match (key, op, threshold, unit, stage, required, why) {
        (Some(key), Some(op), Some(threshold), Some(unit), Some(stage), Some(required), Some(why))
            if errors.is_empty() =>
        {
            let c = Criterion {
                key,
                op,
                threshold,
                unit,
                stage,
                required,
                why,
            };
            check(c, f)
        }
        _ => Err(errors),
    }
}

/// The criterion's `op`, one of lt, le, gt, ge, eq, ne.
fn json_op(map: &Map<String, Value>, f: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) -> Option<Op> {
    match map.get("op") {
        Some(Value::String(s)) => match s.parse::<Op>() {
            Ok(op) => Some(op),
            Err(()) => {
                errors.push(FieldError::new(f("op"), "must be one of lt, le, gt, ge, eq, ne"));
                None
            }
        },
        None | Some(Value::Null) => {
            errors.push(FieldError::new(f("op"), "is required"));
            None
        }
        Some(_) => {
            errors.push(FieldError::new(f("op"), "must be one of lt, le, gt, ge, eq, ne"));
            None
        }
    }
}

/// The criterion's `threshold`: a number, a boolean or a string.
fn json_threshold(
    map: &Map<String, Value>,
    f: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) -> Option<Threshold> {
    match map.get("threshold") {
        Some(Value::Bool(b)) => Some(Threshold::Bool(*b)),
        Some(Value::Number(n)) => n.as_f64().map(Threshold::Number),
        Some(Value::String(s)) => Some(Threshold::Text(s.trim().to_owned())),
        None | Some(Value::Null) => {
            errors.push(FieldError::new(f("threshold"), "is required"));
            None
        }
        Some(_) => {
            errors.push(FieldError::new(
                f("threshold"),
                "must be a number, a boolean or a string",
            ));
            None
        }
    }
}

/// The criterion's `stage`, 1 to 5.
fn json_stage(map: &Map<String, Value>, f: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) -> Option<u8> {
    match map.get("stage") {
        Some(Value::Number(n)) => match n.as_u64() {
            Some(s @ 1..=5) => Some(s as u8),
            _ => {
                errors.push(FieldError::new(f("stage"), "must be an integer from 1 to 5"));
                None
            }
        },
        None | Some(Value::Null) => {
            errors.push(FieldError::new(f("stage"), "is required"));
            None
        }
        Some(_) => {
            errors.push(FieldError::new(f("stage"), "must be an integer from 1 to 5"));
            None
        }
    }
}

/// Parses a threshold typed into the editor: `true`/`false`, a number, else text. A known key's
/// type decides when the text is ambiguous (a string key keeps "1" as text).
pub fn parse_threshold_text(key: &str, raw: &str) -> Threshold {
    let raw = raw.trim();
    let kind = known_key(key).map(|k| k.kind);
    if matches!(kind, Some(ValueKind::Text | ValueKind::LinkClass)) {
        return Threshold::Text(raw.to_owned());
    }
    match raw {
        "true" => Threshold::Bool(true),
        "false" => Threshold::Bool(false),
        _ => match raw.parse::<f64>() {
            Ok(n) if n.is_finite() => Threshold::Number(n),
            _ => Threshold::Text(raw.to_owned()),
        },
    }
}

/// The per-criterion rules shared by the API and the editor; fills a known key's unit when empty.
pub fn check(mut c: Criterion, f: &dyn Fn(&str) -> String) -> Result<Criterion, Vec<FieldError>> {
    let mut errors = Vec::new();
    for rule in CRITERION_RULES {
        rule(&c, f, &mut errors);
    }
    match known_key(&c.key) {
        Some(k) => {
            threshold_fits_the_key(&c, &k, f, &mut errors);
            unit_of_the_key(&mut c, &k, f, &mut errors);
        }
        None if !matches!(c.threshold, Threshold::Number(_)) && !c.unit.is_empty() => {
            errors.push(FieldError::new(f("unit"), "only a number threshold takes a unit"));
        }
        None => {}
    }
    if errors.is_empty() {
        Ok(c)
    } else {
        Err(errors)
    }
}

/// A rule about one criterion's own fields: one error per problem it finds, named by `f(field)`.
type CriterionRule = fn(&Criterion, &dyn Fn(&str) -> String, &mut Vec<FieldError>);

/// The rules every criterion meets, known key or not, in the order their errors are reported.
const CRITERION_RULES: [CriterionRule; 6] = [
    key_is_a_metric_key,
    stage_is_1_to_5,
    unit_is_short,
    why_is_short,
    threshold_is_well_formed,
    op_fits_the_threshold,
];

fn key_is_a_metric_key(c: &Criterion, f: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) {
    if c.key.is_empty() {
        errors.push(FieldError::new(f("key"), "is required"));
    } else if c.key.len() > MAX_KEY
        || !c
            .key
            .chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '.' | '_' | '-'))
    {
        errors.push(FieldError::new(
            f("key"),
            format!("must be a lower-case dotted metric key (a-z, 0-9, '.', '_', '-'), at most {MAX_KEY} characters"),
        ));
    }
}

fn stage_is_1_to_5(c: &Criterion, f: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) {
    if !(1..=5).contains(&c.stage) {
        errors.push(FieldError::new(f("stage"), "must be an integer from 1 to 5"));
    }
}

fn unit_is_short(c: &Criterion, f: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) {
    if c.unit.chars().count() > MAX_UNIT || c.unit.chars().any(char::is_control) {
        errors.push(FieldError::new(
            f("unit"),
            format!("must be at most {MAX_UNIT} characters"),
        ));
    }
}

fn why_is_short(c: &Criterion, f: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) {
    if c.why.as_ref().is_some_and(|why| why.chars().count() > MAX_WHY) {
        errors.push(FieldError::new(
            f("why"),
            format!("must be at most {MAX_WHY} characters"),
        ));
    }
}

fn threshold_is_well_formed(c: &Criterion, f: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) {
    match &c.threshold {
        Threshold::Number(n) if !n.is_finite() => {
            errors.push(FieldError::new(f("threshold"), "must be a finite number"));
        }
        Threshold::Text(s) if s.is_empty() => errors.push(FieldError::new(f("threshold"), "is required")),
        Threshold::Text(s) if s.chars().count() > MAX_TEXT_THRESHOLD => errors.push(FieldError::new(
            f("threshold"),
            format!("must be at most {MAX_TEXT_THRESHOLD} characters"),
        )),
        _ => {}
    }
}

/// Operators: ordering only for numbers (and the ordered link-class scale); eq/ne for any type.
fn op_fits_the_threshold(c: &Criterion, f: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) {
    let link_class = known_key(&c.key).is_some_and(|k| k.kind == ValueKind::LinkClass);
    if c.op.is_ordering() && !matches!(c.threshold, Threshold::Number(_)) && !link_class {
        errors.push(FieldError::new(
            f("op"),
            format!(
                "{} compares numbers; a {} threshold takes eq or ne",
                c.op.as_str(),
                c.threshold.type_name()
            ),
        ));
    }
}

/// A known key's threshold has the key's type (a link class names one of the classes).
fn threshold_fits_the_key(c: &Criterion, k: &KnownKey, f: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) {
    let type_ok = match (k.kind, &c.threshold) {
        (ValueKind::Number, Threshold::Number(_)) => true,
        (ValueKind::Bool, Threshold::Bool(_)) => true,
        (ValueKind::Text, Threshold::Text(_)) => true,
        (ValueKind::BoolOrNumber, Threshold::Bool(_) | Threshold::Number(_)) => true,
        (ValueKind::LinkClass, Threshold::Text(s)) => {
            if link_rank(s).is_none() {
                errors.push(FieldError::new(
                    f("threshold"),
                    format!("must be a link class: one of {}", LINK_CLASSES.join(", ")),
                ));
            }
            true
        }
        _ => false,
    };
    if !type_ok && k.kind == ValueKind::List {
        errors.push(FieldError::new(
            f("threshold"),
            format!(
                "{} is a list and cannot be compared; compare a count key instead",
                c.key
            ),
        ));
    } else if !type_ok {
        let expected = match k.kind {
            ValueKind::Number => "a number",
            ValueKind::Bool => "true or false",
            ValueKind::Text => "a string",
            ValueKind::List => "a list",
            ValueKind::BoolOrNumber => "true, false or a number",
            ValueKind::LinkClass => "a link class",
        };
        errors.push(FieldError::new(
            f("threshold"),
            format!("{} is {expected}, not a {}", c.key, c.threshold.type_name()),
        ));
    }
}

/// Units: a known key has one unit (or none); empty means "the key's own", which is filled in.
fn unit_of_the_key(c: &mut Criterion, k: &KnownKey, f: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) {
    let expected_unit = k.unit;
    if k.source != Source::Evidence && expected_unit.is_empty() {
        return;
    }
    if c.unit.is_empty() {
        c.unit = expected_unit.to_owned();
    } else if c.unit != expected_unit {
        let message = if expected_unit.is_empty() {
            format!("{} has no unit; leave it empty", c.key)
        } else {
            format!("{} is measured in {expected_unit}", c.key)
        };
        errors.push(FieldError::new(f("unit"), message));
    }
}

/// Card-level rules after each criterion: a size cap, one criterion per (key, stage), and the
/// warnings for unknown keys.
fn finish(criteria: Vec<Criterion>, mut errors: Vec<FieldError>) -> Result<ValidCard, Vec<FieldError>> {
    if criteria.len() > MAX_CRITERIA {
        errors.push(FieldError::new("criteria", format!("at most {MAX_CRITERIA} criteria")));
    }
    let mut seen = HashSet::new();
    for (i, c) in criteria.iter().enumerate() {
        if !seen.insert((c.key.clone(), c.stage)) {
            errors.push(FieldError::new(
                format!("criteria[{i}].key"),
                format!(
                    "{} appears twice at stage {}; a key may appear once per stage",
                    c.key, c.stage
                ),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let warnings = unknown_key_warnings(&criteria);
    Ok(ValidCard { criteria, warnings })
}

/// Validates criteria already built (the editor's rows), with the card-level rules.
pub fn validate_criteria(criteria: Vec<Criterion>, field_prefix: &str) -> Result<ValidCard, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for (i, c) in criteria.into_iter().enumerate() {
        let f = |name: &str| format!("{field_prefix}[{i}].{name}");
        match check(c, &f) {
            Ok(c) => out.push(c),
            Err(mut e) => errors.append(&mut e),
        }
    }
    finish(out, errors)
}

/// A warning for each criterion whose key no parser produces: allowed (the generic `metrics`
/// evidence kind carries any key) but probably a typo.
pub fn unknown_key_warnings(criteria: &[Criterion]) -> Vec<String> {
    criteria
        .iter()
        .filter(|c| known_key(&c.key).is_none())
        .map(|c| {
            format!(
                "{} is not a metric key rentcheck's parsers produce; only evidence of kind `metrics` can give it a value",
                c.key
            )
        })
        .collect()
}

/// What changed between two revisions, criteria matched by (key, stage).
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CardDiff {
    pub added: Vec<Criterion>,
    pub removed: Vec<Criterion>,
    pub changed: Vec<ChangedCriterion>,
}

/// A criterion whose op, threshold, unit, required or why changed.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ChangedCriterion {
    pub key: String,
    pub stage: u8,
    pub before: Criterion,
    pub after: Criterion,
    /// The fields that differ: op, threshold, unit, required, why.
    pub fields: Vec<&'static str>,
}

impl CardDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

pub fn diff(before: &[Criterion], after: &[Criterion]) -> CardDiff {
    let find = |list: &[Criterion], c: &Criterion| list.iter().find(|x| x.key == c.key && x.stage == c.stage).cloned();
    let mut d = CardDiff::default();
    for a in after {
        match find(before, a) {
            None => d.added.push(a.clone()),
            Some(b) => {
                let mut fields = Vec::new();
                if b.op != a.op {
                    fields.push("op");
                }
                if b.threshold != a.threshold {
                    fields.push("threshold");
                }
                if b.unit != a.unit {
                    fields.push("unit");
                }
                if b.required != a.required {
                    fields.push("required");
                }
                if b.why != a.why {
                    fields.push("why");
                }
                if !fields.is_empty() {
                    d.changed.push(ChangedCriterion {
                        key: a.key.clone(),
                        stage: a.stage,
                        before: b,
                        after: a.clone(),
                        fields,
                    });
                }
            }
        }
    }
    for b in before {
        if find(after, b).is_none() {
            d.removed.push(b.clone());
        }
    }
    d
}

/// The card in force for a brief: its newest saved revision, or the generated default (revision 0).
#[derive(Debug, Clone)]
pub struct Card {
    pub revision: i32,
    pub is_default: bool,
    pub criteria: Vec<Criterion>,
    pub created_by: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    /// A saved card: the allocation under test (GPU model, count) its allocation-dependent
    /// thresholds were generated for, when known.
    pub allocation: Option<(String, i32)>,
}

/// Every metric key `known_key` names, `probe.<name>` aside: the keys "did you mean" suggests.
/// A unit test checks each is known; add a key here when `known_key` learns one.
pub const KNOWN_KEYS: [&str; 59] = [
    "gpu.count",
    "gpu.mig_count",
    "topo.gpu_count",
    "dcgm.gpu_count",
    "nccl.world_size",
    "nccl.wrong",
    "gpu.ecc_errors_uncorrected",
    "dcgm.diag.warnings",
    "topo.min_nvlinks",
    "dcgm.diag.level",
    "gpu.models",
    "gpu.uuids",
    "dcgm.diag.failed_tests",
    "dcgm.diag.skipped_tests",
    "dcgm.diag.tests_run",
    "topo.worst_link",
    "topo.nvlink_all_pairs",
    "dcgm.diag.passed",
    "checkpoint.restore_ok",
    "gpu.memory_total_mib",
    "gpu.memory_used_mib_max",
    "gpu.driver_version",
    "gpu.cuda_version",
    "serving.ttft_p50_ms",
    "serving.ttft_p95_ms",
    "serving.ttft_p99_ms",
    "serving.itl_p95_ms",
    "serving.tpot_p95_ms",
    "serving.e2e_p95_ms",
    "serving.e2e_p99_ms",
    "serving.queue_time_p95_ms",
    "serving.prefill_p95_ms",
    "serving.decode_p95_ms",
    "serving.requests_total",
    "serving.preemptions_total",
    "serving.requests_waiting_max",
    "serving.completed",
    "serving.kv_cache_tokens",
    "serving.max_concurrency",
    "serving.load_concurrency",
    "serving.kv_cache_usage_max_pct",
    "serving.gpu_memory_utilization",
    "serving.request_throughput_rps",
    "serving.output_tokens_per_s",
    "serving.error_rate",
    "serving.slo_attainment",
    "serving.slo_attainment_ttft",
    "serving.slo_attainment_itl",
    "serving.slo_attainment_e2e",
    "serving.goodput_rps",
    "nccl.busbw_peak_gbps",
    "nccl.busbw_avg_gbps",
    "nccl.expected_busbw_gbps",
    "nccl.busbw_pct_of_expected",
    "gpu.util_pct_avg",
    "gpu.xid_errors",
    "checkpoint.restore_seconds",
    COST_PER_JOB,
    LINT_ERRORS,
];

/// The known key a mistyped one most likely meant: the nearest by edit distance (a swap of two
/// letters counts once), when it is near enough to be a typo (at most 2 edits, 3 on long keys).
/// `None` for a known key or one with no near neighbour.
pub fn did_you_mean(key: &str) -> Option<&'static str> {
    if known_key(key).is_some() {
        return None;
    }
    KNOWN_KEYS
        .iter()
        .map(|k| (strsim::damerau_levenshtein(key, k), *k))
        .filter(|(d, k)| *d <= if k.len() > 16 { 3 } else { 2 })
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// A unit and how many of the dimension's smallest unit it is: times in microseconds, shares in
/// percent, memory in MiB. Other units convert only to themselves.
fn unit_scale(unit: &str) -> Option<(&'static str, &'static str, f64)> {
    let u = unit.trim().to_ascii_lowercase();
    Some(match u.as_str() {
        "us" | "µs" | "μs" | "microseconds" => ("time", "us", 1.0),
        "ms" | "msec" | "millisecond" | "milliseconds" => ("time", "ms", 1e3),
        "s" | "sec" | "secs" | "second" | "seconds" => ("time", "s", 1e6),
        "min" | "mins" | "minute" | "minutes" => ("time", "min", 6e7),
        "%" | "pct" | "percent" => ("share", "%", 1.0),
        "fraction" => ("share", "fraction", 100.0),
        "mib" => ("memory", "MiB", 1.0),
        "gib" => ("memory", "GiB", 1024.0),
        _ => return None,
    })
}

/// A threshold typed with its unit, as people type it (`60ms`, `0.5 s`, `90 %`, `80 GiB`), in
/// the key's own unit: `Ok(Some((threshold, unit)))`. `Ok(None)` when nothing follows the number
/// (read it with `parse_threshold_text`). `Err` says which unit the key is measured in when the
/// typed one cannot be converted. A key without a known unit keeps the number and the typed unit.
pub fn threshold_with_unit(key: &str, raw: &str) -> Result<Option<(Threshold, String)>, String> {
    let raw = raw.trim();
    let split = raw
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || (*i == 0 && matches!(c, '-' | '+'))))
        .map(|(i, _)| i)
        .unwrap_or(raw.len());
    let (number, typed_unit) = (raw[..split].trim(), raw[split..].trim());
    let Ok(value) = number.parse::<f64>() else {
        return Ok(None);
    };
    if typed_unit.is_empty() || !value.is_finite() {
        return Ok(None);
    }
    let target = known_key(key).map(|k| k.unit).unwrap_or("");
    if target.is_empty() {
        return Ok(Some((Threshold::Number(value), typed_unit.to_owned())));
    }
    let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b) || a.eq_ignore_ascii_case(&format!("{b}s"));
    if same(typed_unit, target) {
        return Ok(Some((Threshold::Number(value), target.to_owned())));
    }
    match (unit_scale(typed_unit), unit_scale(target)) {
        (Some((from_dim, _, from)), Some((to_dim, _, to))) if from_dim == to_dim => {
            // Round off the binary noise of the scaling (0.07 s is 70 ms, not 70.00000000000001).
            let converted = (value * from / to * 1e9).round() / 1e9;
            Ok(Some((Threshold::Number(converted), target.to_owned())))
        }
        _ => Err(format!(
            "{typed_unit} is not a unit of {key}, which is measured in {target}: type a number, or a number in {target}"
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_criterion_every_value_meets_cannot_fail() {
        use super::{Criterion, Op, Threshold};
        let c = |key: &str, op: Op, t: f64| Criterion {
            key: key.into(),
            op,
            threshold: Threshold::Number(t),
            unit: String::new(),
            stage: 1,
            required: true,
            why: None,
        };
        // Met by every value: nothing is tested.
        assert!(!c("gpu.count", Op::Ge, 0.0).can_fail());
        assert!(!c("gpu.count", Op::Gt, -1.0).can_fail());
        assert!(!c("serving.error_rate", Op::Le, 1.0).can_fail());
        assert!(!c("serving.kv_cache_usage_max_pct", Op::Le, 100.0).can_fail());
        assert!(!c("serving.ttft_p95_ms", Op::Ne, -5.0).can_fail());
        // Real tests.
        assert!(c("gpu.count", Op::Ge, 1.0).can_fail());
        assert!(c("gpu.count", Op::Gt, 0.0).can_fail());
        assert!(c("serving.error_rate", Op::Le, 0.01).can_fail());
        assert!(
            c("serving.ttft_p95_ms", Op::Le, 1e9).can_fail(),
            "no upper end to times"
        );
        assert!(
            c("nccl.busbw_pct_of_expected", Op::Le, 100.0).can_fail(),
            "a fabric may beat the expectation"
        );
        assert!(c("probe.custom", Op::Ge, 0.0).can_fail(), "a probe's range is unknown");
        assert!(c("gpu.xid_errors", Op::Eq, 0.0).can_fail());
    }

    #[test]
    fn every_suggested_key_is_known() {
        for key in KNOWN_KEYS {
            assert!(known_key(key).is_some(), "{key}");
        }
    }

    #[test]
    fn a_mistyped_key_gets_the_nearest_known_one() {
        assert_eq!(did_you_mean("serving.ttft_p95ms"), Some("serving.ttft_p95_ms"));
        assert_eq!(
            did_you_mean("serving.queue_tiem_p95_ms"),
            Some("serving.queue_time_p95_ms")
        );
        assert_eq!(did_you_mean("gpu.cuont"), Some("gpu.count"));
        assert_eq!(did_you_mean("dcgm.diag.pased"), Some("dcgm.diag.passed"));
        assert_eq!(
            did_you_mean("serving.ttft_p95_ms"),
            None,
            "known keys need no suggestion"
        );
        assert_eq!(did_you_mean("warehouse.temperature"), None, "nothing near");
    }

    #[test]
    fn thresholds_typed_with_units_become_the_keys_unit() {
        let n = |key: &str, raw: &str| match threshold_with_unit(key, raw) {
            Ok(Some((Threshold::Number(n), unit))) => (n, unit),
            other => panic!("{raw}: {other:?}"),
        };
        assert_eq!(n("serving.ttft_p95_ms", "60ms"), (60.0, "ms".into()));
        assert_eq!(n("serving.ttft_p95_ms", "0.5 s"), (500.0, "ms".into()));
        assert_eq!(n("serving.ttft_p95_ms", "0.07s"), (70.0, "ms".into()));
        assert_eq!(n("serving.kv_cache_usage_max_pct", "90 %"), (90.0, "%".into()));
        assert_eq!(n("serving.slo_attainment", "95%"), (0.95, "fraction".into()));
        assert_eq!(n("gpu.memory_total_mib", "80 GiB"), (81920.0, "MiB".into()));
        assert_eq!(n("checkpoint.restore_seconds", "2 min"), (120.0, "s".into()));
        assert_eq!(
            n("probe.latency", "60ms"),
            (60.0, "ms".into()),
            "a key without a unit keeps the typed one"
        );
        assert_eq!(threshold_with_unit("serving.ttft_p95_ms", "60").unwrap(), None);
        assert_eq!(threshold_with_unit("dcgm.diag.passed", "true").unwrap(), None);
        let wrong = threshold_with_unit("serving.ttft_p95_ms", "60 GiB").unwrap_err();
        assert!(wrong.contains("measured in ms"), "{wrong}");
    }

    use serde_json::json;

    use super::*;

    fn criterion(key: &str, op: Op, threshold: Threshold, unit: &str) -> Criterion {
        Criterion {
            key: key.into(),
            op,
            threshold,
            unit: unit.into(),
            stage: 3,
            required: true,
            why: None,
        }
    }

    fn errors_of(rule: CriterionRule, c: &Criterion) -> Vec<String> {
        let mut errors = Vec::new();
        rule(c, &|field| field.to_owned(), &mut errors);
        errors
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    #[test]
    fn each_criterion_rule_names_its_own_field() {
        let good = criterion("serving.ttft_p95_ms", Op::Le, Threshold::Number(500.0), "ms");
        for rule in CRITERION_RULES {
            assert!(errors_of(rule, &good).is_empty());
        }
        let bad_key = criterion("Serving TTFT", Op::Le, Threshold::Number(1.0), "");
        assert!(errors_of(key_is_a_metric_key, &bad_key)[0].starts_with("key: must be a lower-case"));
        let mut stage_6 = good.clone();
        stage_6.stage = 6;
        assert_eq!(
            errors_of(stage_is_1_to_5, &stage_6),
            ["stage: must be an integer from 1 to 5"]
        );
        let long_unit = criterion("x", Op::Eq, Threshold::Number(1.0), &"u".repeat(MAX_UNIT + 1));
        assert_eq!(errors_of(unit_is_short, &long_unit).len(), 1);
        let mut long_why = good.clone();
        long_why.why = Some("w".repeat(MAX_WHY + 1));
        assert_eq!(errors_of(why_is_short, &long_why).len(), 1);
        let empty_text = criterion("x", Op::Eq, Threshold::Text(String::new()), "");
        assert_eq!(
            errors_of(threshold_is_well_formed, &empty_text),
            ["threshold: is required"]
        );
        let ordered_bool = criterion("x", Op::Lt, Threshold::Bool(true), "");
        assert!(errors_of(op_fits_the_threshold, &ordered_bool)[0].starts_with("op: lt compares numbers"));
        let ordered_link = criterion("topo.worst_link", Op::Le, Threshold::Text("NV#".into()), "");
        assert!(
            errors_of(op_fits_the_threshold, &ordered_link).is_empty(),
            "link classes are ordered"
        );
    }

    #[test]
    fn a_known_key_fixes_the_threshold_type_and_fills_its_unit() {
        let f = |field: &str| field.to_owned();
        let k = known_key("serving.ttft_p95_ms").unwrap();
        let mut errors = Vec::new();
        let text = criterion("serving.ttft_p95_ms", Op::Eq, Threshold::Text("fast".into()), "");
        threshold_fits_the_key(&text, &k, &f, &mut errors);
        assert!(errors[0].message.contains("is a number, not a"), "{errors:?}");
        let mut no_unit = criterion("serving.ttft_p95_ms", Op::Le, Threshold::Number(1.0), "");
        let mut errors = Vec::new();
        unit_of_the_key(&mut no_unit, &k, &f, &mut errors);
        assert_eq!((no_unit.unit.as_str(), errors.len()), ("ms", 0));
        let mut wrong_unit = criterion("serving.ttft_p95_ms", Op::Le, Threshold::Number(1.0), "s");
        unit_of_the_key(&mut wrong_unit, &k, &f, &mut errors);
        assert_eq!(errors[0].message, "serving.ttft_p95_ms is measured in ms");
    }

    fn fields(r: Result<ValidCard, Vec<FieldError>>) -> Vec<String> {
        r.unwrap_err()
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    #[test]
    fn a_valid_card_fills_known_units_and_warns_on_unknown_keys() {
        let card = validate_json(&json!([
            { "key": "serving.ttft_p95_ms", "op": "le", "threshold": 500, "stage": 3, "required": true },
            { "key": "dcgm.diag.passed", "op": "eq", "threshold": true, "unit": "", "stage": 1 },
            { "key": "team.custom_score", "op": "ge", "threshold": 0.9, "unit": "points", "stage": 2, "status": "pass" },
            { "key": "topo.worst_link", "op": "le", "threshold": "NV#", "stage": 1, "required": true }
        ]))
        .unwrap();
        assert_eq!(card.criteria[0].unit, "ms");
        assert!(card.criteria[1].required, "required defaults to true");
        assert_eq!(card.warnings.len(), 1);
        assert!(card.warnings[0].contains("team.custom_score"));
    }

    #[test]
    fn operators_thresholds_units_and_stages_are_checked() {
        let errors = fields(validate_json(&json!([
            { "key": "dcgm.diag.passed", "op": "ge", "threshold": true, "stage": 1 },
            { "key": "serving.ttft_p95_ms", "op": "le", "threshold": "fast", "stage": 3 },
            { "key": "serving.ttft_p95_ms", "op": "le", "threshold": 500, "unit": "s", "stage": 3 },
            { "key": "x.y", "op": "between", "threshold": 1, "stage": 2 },
            { "key": "Bad Key", "op": "eq", "threshold": 1, "stage": 2 },
            { "key": "x.label", "op": "eq", "threshold": "a", "unit": "ms", "stage": 2 },
            { "key": "topo.worst_link", "op": "le", "threshold": "NVLINK", "stage": 1 },
            { "key": "gpu.models", "op": "eq", "threshold": "H100", "stage": 1 },
            { "key": "x.y", "op": "eq", "threshold": [1], "stage": 2 },
            { "key": "x.z", "op": "eq", "threshold": 1, "stage": 6 }
        ])));
        let has = |s: &str| errors.iter().any(|e| e.contains(s));
        assert!(has("criteria[0].op: ge compares numbers"), "{errors:?}");
        assert!(
            has("criteria[1].threshold: serving.ttft_p95_ms is a number"),
            "{errors:?}"
        );
        assert!(has("criteria[9].stage: must be an integer from 1 to 5"), "{errors:?}");
        assert!(
            has("criteria[2].unit: serving.ttft_p95_ms is measured in ms"),
            "{errors:?}"
        );
        assert!(has("criteria[3].op"), "{errors:?}");
        assert!(has("criteria[4].key"), "{errors:?}");
        assert!(has("criteria[5].unit: only a number threshold"), "{errors:?}");
        assert!(has("criteria[6].threshold: must be a link class"), "{errors:?}");
        assert!(has("criteria[7].threshold: gpu.models is a list"), "{errors:?}");
        assert!(
            has("criteria[8].threshold: must be a number, a boolean or a string"),
            "{errors:?}"
        );
    }

    #[test]
    fn a_key_appears_once_per_stage() {
        let errors = fields(validate_json(&json!([
            { "key": "checkpoint.restore_ok", "op": "eq", "threshold": true, "stage": 2 },
            { "key": "checkpoint.restore_ok", "op": "eq", "threshold": true, "stage": 4 },
            { "key": "checkpoint.restore_ok", "op": "eq", "threshold": false, "stage": 4 }
        ])));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("criteria[2].key"));
    }

    #[test]
    fn thresholds_typed_in_the_editor() {
        assert_eq!(parse_threshold_text("a.b", "true"), Threshold::Bool(true));
        assert_eq!(parse_threshold_text("a.b", " 12.5 "), Threshold::Number(12.5));
        assert_eq!(parse_threshold_text("a.b", "fast"), Threshold::Text("fast".into()));
        assert_eq!(
            parse_threshold_text("gpu.driver_version", "550"),
            Threshold::Text("550".into())
        );
    }

    #[test]
    fn link_classes_are_ordered_nearest_first() {
        assert!(link_rank("NV12") < link_rank("PIX"));
        assert_eq!(link_rank("nv18"), link_rank("NV#"));
        assert!(link_rank("PHB") < link_rank("SYS"));
        assert_eq!(link_rank("NV"), None);
    }

    #[test]
    fn the_diff_names_added_removed_and_changed_criteria() {
        let c = |key: &str, t: f64, stage: u8| Criterion {
            key: key.into(),
            op: Op::Le,
            threshold: Threshold::Number(t),
            unit: "ms".into(),
            stage,
            required: true,
            why: None,
        };
        let before = vec![c("serving.ttft_p95_ms", 500.0, 3), c("serving.itl_p95_ms", 50.0, 3)];
        let after = vec![c("serving.ttft_p95_ms", 400.0, 3), c("serving.e2e_p95_ms", 9000.0, 3)];
        let d = diff(&before, &after);
        assert_eq!(d.added.len(), 1);
        assert_eq!(d.added[0].key, "serving.e2e_p95_ms");
        assert_eq!(d.removed[0].key, "serving.itl_p95_ms");
        assert_eq!(d.changed[0].fields, vec!["threshold"]);
        assert!(diff(&after, &after).is_empty());
    }
}
