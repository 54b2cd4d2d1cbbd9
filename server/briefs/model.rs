//! Workload briefs: the domain types and their validation. No I/O.
//!
//! Input arrives two ways — a JSON object from the API or string fields from an HTML form — and
//! both go through the same `validate`, which reports every bad field at once.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::{
    sizing::{self, ModelSpec, Precision, Sizing, SizingInput, WorkloadKind},
    text_enum,
    validation::{FieldError, FieldReader as Checker, Input, Raw},
};

text_enum!(
    /// How far the workload's data may travel.
    DataBoundary { SharedOk => "shared-ok", PrivateNetwork => "private-network", DedicatedHost => "dedicated-host" }
);
text_enum!(
    /// The kind of allocation the brief asks to rent.
    AllocationBoundary { Serverless => "serverless", Vm => "vm", DedicatedNode => "dedicated-node", Cluster => "cluster" }
);
text_enum!(
    /// What one "completed job" is, for cost per job.
    CostUnit { Request => "request", OneKTokens => "1k-tokens", Image => "image", Job => "job", Batch => "batch" }
);

pub const MAX_SHORT_TEXT: usize = 200;
pub const MAX_LONG_TEXT: usize = 10_000;
pub const MAX_MANIFEST: usize = 256 * 1024;
pub const MAX_PERSIST_ITEMS: usize = 20;
pub const MAX_PARAMS_B: f64 = 10_000.0;
pub const MAX_CONTEXT: i64 = 10_000_000;
pub const MAX_CONCURRENCY: i64 = 100_000;

/// Latency and throughput targets; each is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    pub ttft_p95_ms: Option<f64>,
    pub itl_p95_ms: Option<f64>,
    pub e2e_p95_ms: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub request_throughput_rps: Option<f64>,
    pub error_rate: Option<f64>,
}

pub const TARGET_FIELDS: [&str; 6] = [
    "ttft_p95_ms",
    "itl_p95_ms",
    "e2e_p95_ms",
    "output_tokens_per_s",
    "request_throughput_rps",
    "error_rate",
];

impl Targets {
    pub fn get(&self, field: &str) -> Option<f64> {
        match field {
            "ttft_p95_ms" => self.ttft_p95_ms,
            "itl_p95_ms" => self.itl_p95_ms,
            "e2e_p95_ms" => self.e2e_p95_ms,
            "output_tokens_per_s" => self.output_tokens_per_s,
            "request_throughput_rps" => self.request_throughput_rps,
            "error_rate" => self.error_rate,
            _ => None,
        }
    }

    fn set(&mut self, field: &str, value: Option<f64>) {
        match field {
            "ttft_p95_ms" => self.ttft_p95_ms = value,
            "itl_p95_ms" => self.itl_p95_ms = value,
            "e2e_p95_ms" => self.e2e_p95_ms = value,
            "output_tokens_per_s" => self.output_tokens_per_s = value,
            "request_throughput_rps" => self.request_throughput_rps = value,
            "error_rate" => self.error_rate = value,
            _ => {}
        }
    }
}

/// A brief's fields after validation: every value here is within its bounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BriefFields {
    pub name: String,
    pub owner: String,
    pub workload_kind: WorkloadKind,
    pub model_name: String,
    pub model_revision: Option<String>,
    pub catalog_model: Option<String>,
    pub params_b: f64,
    pub precision: Precision,
    pub context_length: i64,
    pub concurrency: i64,
    pub num_layers: Option<i32>,
    pub num_kv_heads: Option<i32>,
    pub head_dim: Option<i32>,
    pub targets: Targets,
    pub data_boundary: DataBoundary,
    pub needs_host_control: bool,
    pub only_needs_model_output: bool,
    pub persist: Vec<String>,
    pub restore_plan: Option<String>,
    pub fallback_plan: Option<String>,
    #[serde(with = "rust_decimal::serde::str_option")]
    pub max_cost_per_job: Option<Decimal>,
    pub currency: String,
    pub cost_unit: CostUnit,
    pub allocation_boundary: AllocationBoundary,
    pub trial_gpu: Option<String>,
    pub trial_gpu_count: Option<i32>,
    pub k8s_manifest: Option<String>,
}

/// A stored brief.
#[derive(Debug, Clone, Serialize)]
pub struct Brief {
    pub id: Uuid,
    #[serde(flatten)]
    pub fields: BriefFields,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl BriefFields {
    /// The catalogue entry the brief names, if any.
    pub fn catalog_entry(&self) -> Option<&'static ModelSpec> {
        self.catalog_model.as_deref().and_then(sizing::model_by_hf_id)
    }

    /// Architecture numbers for sizing: explicit fields win over the catalogue entry.
    pub fn sizing_input(&self) -> SizingInput {
        let catalog = self.catalog_entry();
        let pick = |explicit: Option<i32>, from_catalog: Option<u32>| -> u32 {
            explicit
                .and_then(|v| u32::try_from(v).ok())
                .or(from_catalog)
                .unwrap_or(1)
        };
        SizingInput {
            workload_kind: self.workload_kind,
            precision: self.precision,
            params_b: self.params_b,
            context_length: self.context_length.unsigned_abs(),
            concurrency: self.concurrency.unsigned_abs(),
            num_layers: pick(self.num_layers, catalog.map(|m| m.num_layers)),
            num_kv_heads: pick(self.num_kv_heads, catalog.map(|m| m.num_kv_heads)),
            head_dim: pick(self.head_dim, catalog.map(|m| m.head_dim)),
            catalog_model: catalog,
        }
    }

    pub fn sizing(&self) -> Sizing {
        sizing::size(&self.sizing_input())
    }

    /// The fields as the strings an HTML form shows, keyed by input name.
    pub fn form_values(&self) -> HashMap<String, String> {
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        let num = |v: Option<i32>| v.map(|n| n.to_string()).unwrap_or_default();
        let mut m = HashMap::from([
            ("name".to_owned(), self.name.clone()),
            ("owner".to_owned(), self.owner.clone()),
            ("workload_kind".to_owned(), self.workload_kind.as_str().to_owned()),
            ("model_name".to_owned(), self.model_name.clone()),
            ("model_revision".to_owned(), opt(&self.model_revision)),
            ("catalog_model".to_owned(), opt(&self.catalog_model)),
            ("params_b".to_owned(), self.params_b.to_string()),
            ("precision".to_owned(), self.precision.as_str().to_owned()),
            ("context_length".to_owned(), self.context_length.to_string()),
            ("concurrency".to_owned(), self.concurrency.to_string()),
            ("num_layers".to_owned(), num(self.num_layers)),
            ("num_kv_heads".to_owned(), num(self.num_kv_heads)),
            ("head_dim".to_owned(), num(self.head_dim)),
            ("data_boundary".to_owned(), self.data_boundary.as_str().to_owned()),
            ("persist".to_owned(), self.persist.join(", ")),
            ("restore_plan".to_owned(), opt(&self.restore_plan)),
            ("fallback_plan".to_owned(), opt(&self.fallback_plan)),
            (
                "max_cost_per_job".to_owned(),
                self.max_cost_per_job.map(|d| d.to_string()).unwrap_or_default(),
            ),
            ("currency".to_owned(), self.currency.clone()),
            ("cost_unit".to_owned(), self.cost_unit.as_str().to_owned()),
            (
                "allocation_boundary".to_owned(),
                self.allocation_boundary.as_str().to_owned(),
            ),
            ("trial_gpu".to_owned(), opt(&self.trial_gpu)),
            ("trial_gpu_count".to_owned(), num(self.trial_gpu_count)),
            ("k8s_manifest".to_owned(), opt(&self.k8s_manifest)),
        ]);
        if self.needs_host_control {
            m.insert("needs_host_control".into(), "on".into());
        }
        if self.only_needs_model_output {
            m.insert("only_needs_model_output".into(), "on".into());
        }
        for field in TARGET_FIELDS {
            if let Some(v) = self.targets.get(field) {
                m.insert(format!("targets.{field}"), v.to_string());
            }
        }
        m
    }
}

/// Raw input before validation: a JSON object from the API or an HTML form's fields.
pub type BriefInput<'a> = Input<'a>;

/// Fields the API returns that a client may send back unchanged in a PUT; they are ignored.
const READ_ONLY_FIELDS: [&str; 5] = ["id", "sizing", "status", "created_at", "updated_at"];

const BRIEF_FIELDS: [&str; 28] = [
    "name",
    "owner",
    "workload_kind",
    "model_name",
    "model_revision",
    "catalog_model",
    "params_b",
    "precision",
    "context_length",
    "concurrency",
    "num_layers",
    "num_kv_heads",
    "head_dim",
    "targets",
    "data_boundary",
    "needs_host_control",
    "only_needs_model_output",
    "persist",
    "restore_plan",
    "fallback_plan",
    "max_cost_per_job",
    "currency",
    "cost_unit",
    "allocation_boundary",
    "trial_gpu",
    "trial_gpu_count",
    "k8s_manifest",
    // Form-only: which submit button was pressed.
    "intent",
];

fn names<T: Copy>(all: &[T], name: fn(&T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(name).collect()
}

/// Checks every field and returns the brief, or every problem found.
pub fn validate(input: &BriefInput<'_>) -> Result<BriefFields, Vec<FieldError>> {
    let mut c = Checker::new(input);

    if let BriefInput::Json(map) = input {
        for key in map.keys() {
            if !BRIEF_FIELDS.contains(&key.as_str()) && !READ_ONLY_FIELDS.contains(&key.as_str()) {
                c.fail(key, "is not a brief field");
            }
        }
        match map.get("targets") {
            None | Some(Value::Null) => {}
            Some(Value::Object(t)) => {
                for key in t.keys() {
                    if !TARGET_FIELDS.contains(&key.as_str()) {
                        c.fail(&format!("targets.{key}"), "is not a target field");
                    }
                }
            }
            Some(_) => c.fail("targets", "must be an object"),
        }
    }

    let name = c.required_text("name", MAX_SHORT_TEXT);
    let owner = c.required_text("owner", MAX_SHORT_TEXT);
    let workload_kind: Option<WorkloadKind> =
        c.choice("workload_kind", &names(&WorkloadKind::ALL, WorkloadKind::as_str), true);
    let catalog_model = c.text("catalog_model", MAX_SHORT_TEXT);
    let catalog = match &catalog_model {
        Some(id) => match sizing::model_by_hf_id(id) {
            Some(m) => Some(m),
            None => {
                c.fail(
                    "catalog_model",
                    "is not in the model catalogue; leave it empty and give the architecture fields",
                );
                None
            }
        },
        None => None,
    };
    let catalog_known = catalog.is_some();
    let model_name = c
        .text("model_name", MAX_SHORT_TEXT)
        .or_else(|| catalog.map(|m| m.hf_id.clone()));
    if model_name.is_none() && !c.errors.iter().any(|e| e.field == "model_name") {
        c.fail("model_name", "is required (or pick a catalogue model)");
    }
    let model_revision = c.text("model_revision", MAX_SHORT_TEXT);
    let params_b = c.positive_number("params_b", MAX_PARAMS_B).or_else(|| {
        if matches!(input.raw("params_b"), Raw::Absent) {
            catalog.map(|m| m.params_b)
        } else {
            None
        }
    });
    if params_b.is_none() && !catalog_known && matches!(input.raw("params_b"), Raw::Absent) {
        c.fail("params_b", "is required (or pick a catalogue model)");
    }
    let precision: Option<Precision> = c.choice("precision", &names(&Precision::ALL, Precision::as_str), true);
    let context_length = c.positive_integer("context_length", MAX_CONTEXT);
    if context_length.is_none() && matches!(input.raw("context_length"), Raw::Absent) {
        c.fail("context_length", "is required");
    }
    let concurrency = c.positive_integer("concurrency", MAX_CONCURRENCY);
    if concurrency.is_none() && matches!(input.raw("concurrency"), Raw::Absent) {
        c.fail("concurrency", "is required");
    }
    let arch = |c: &mut Checker<'_>, field: &str, max: i64| -> Option<i32> {
        let v = c.positive_integer(field, max).and_then(|v| i32::try_from(v).ok());
        if v.is_none() && !catalog_known && matches!(input.raw(field), Raw::Absent) {
            c.fail(field, "is required unless a catalogue model gives it");
        }
        v
    };
    let num_layers = arch(&mut c, "num_layers", 1_000);
    let num_kv_heads = arch(&mut c, "num_kv_heads", 1_024);
    let head_dim = arch(&mut c, "head_dim", 4_096);

    let mut targets = Targets::default();
    for field in TARGET_FIELDS {
        let key = format!("targets.{field}");
        let max = if field == "error_rate" { 1.0 } else { 1e9 };
        let value = c.read(&key, Raw::number);
        match value {
            Some(v) if field == "error_rate" && !(0.0..=max).contains(&v) => {
                c.fail(&key, "must be a fraction between 0 and 1")
            }
            Some(v) if field != "error_rate" && v <= 0.0 => c.fail(&key, "must be greater than 0"),
            Some(v) if v > max => c.fail(&key, format!("must be at most {max}")),
            other => targets.set(field, other),
        }
    }

    let data_boundary: Option<DataBoundary> =
        c.choice("data_boundary", &names(DataBoundary::ALL, DataBoundary::as_str), true);
    let needs_host_control = c.read("needs_host_control", Raw::boolean).unwrap_or(false);
    let only_needs_model_output = c.read("only_needs_model_output", Raw::boolean).unwrap_or(false);
    let persist = c.read("persist", Raw::list).unwrap_or_default();
    if persist.len() > MAX_PERSIST_ITEMS || persist.iter().any(|p| p.chars().count() > 100) {
        c.fail(
            "persist",
            format!("at most {MAX_PERSIST_ITEMS} items of at most 100 characters"),
        );
    }
    let restore_plan = c.text("restore_plan", MAX_LONG_TEXT);
    let fallback_plan = c.text("fallback_plan", MAX_LONG_TEXT);
    let max_cost_per_job = match input.raw("max_cost_per_job") {
        Raw::Absent => None,
        Raw::Json(Value::String(s)) => parse_money(&mut c, s),
        Raw::FormText(s) => parse_money(&mut c, s),
        Raw::Json(_) => {
            c.fail("max_cost_per_job", "must be a decimal string such as \"0.25\"");
            None
        }
    };
    let currency = c.text("currency", MAX_SHORT_TEXT).map(|s| s.to_ascii_uppercase());
    if let Some(cur) = &currency {
        if cur.len() != 3 || !cur.chars().all(|ch| ch.is_ascii_alphabetic()) {
            c.fail("currency", "must be a three-letter ISO 4217 code such as USD");
        }
    }
    let cost_unit: Option<CostUnit> = c.choice("cost_unit", &names(CostUnit::ALL, CostUnit::as_str), false);
    let allocation_boundary: Option<AllocationBoundary> = c.choice(
        "allocation_boundary",
        &names(AllocationBoundary::ALL, AllocationBoundary::as_str),
        true,
    );
    let trial_gpu = c
        .text("trial_gpu", MAX_SHORT_TEXT)
        .and_then(|g| match sizing::gpu_by_name(&g) {
            Some(spec) => Some(spec.model.clone()),
            None => {
                c.fail("trial_gpu", "is not in the GPU catalogue");
                None
            }
        });
    let trial_gpu_count = c.positive_integer("trial_gpu_count", 64).and_then(|n| {
        if n <= 8 && (n as u32).is_power_of_two() || n % 8 == 0 {
            i32::try_from(n).ok()
        } else {
            c.fail("trial_gpu_count", "must be 1, 2, 4, 8 or a multiple of 8 (whole nodes)");
            None
        }
    });
    let k8s_manifest = c.text("k8s_manifest", MAX_MANIFEST);

    if !c.errors.is_empty() {
        return Err(c.errors);
    }
    // Every required value was present, or an error was recorded above.
    let (
        Some(name),
        Some(owner),
        Some(workload_kind),
        Some(model_name),
        Some(params_b),
        Some(precision),
        Some(context_length),
        Some(concurrency),
        Some(data_boundary),
        Some(allocation_boundary),
    ) = (
        name,
        owner,
        workload_kind,
        model_name,
        params_b,
        precision,
        context_length,
        concurrency,
        data_boundary,
        allocation_boundary,
    )
    else {
        return Err(vec![FieldError::new("brief", "is incomplete")]);
    };
    Ok(BriefFields {
        name,
        owner,
        workload_kind,
        model_name,
        model_revision,
        catalog_model: catalog.map(|m| m.hf_id.clone()),
        params_b,
        precision,
        context_length,
        concurrency,
        num_layers,
        num_kv_heads,
        head_dim,
        targets,
        data_boundary,
        needs_host_control,
        only_needs_model_output,
        persist,
        restore_plan,
        fallback_plan,
        max_cost_per_job,
        currency: currency.unwrap_or_else(|| "USD".to_owned()),
        cost_unit: cost_unit.unwrap_or(CostUnit::Request),
        allocation_boundary,
        trial_gpu,
        trial_gpu_count,
        k8s_manifest,
    })
}

fn parse_money(c: &mut Checker<'_>, s: &str) -> Option<Decimal> {
    match s.trim().parse::<Decimal>() {
        Ok(d) if d.is_sign_negative() => {
            c.fail("max_cost_per_job", "must not be negative");
            None
        }
        Ok(d) if d > Decimal::from(1_000_000_000_i64) || d.scale() > 6 => {
            c.fail(
                "max_cost_per_job",
                "must be at most 1000000000 with at most 6 decimal places",
            );
            None
        }
        Ok(d) => Some(d.normalize()),
        Err(_) => {
            c.fail("max_cost_per_job", "must be a decimal number such as 0.25");
            None
        }
    }
}

/// The label a person reads for a latency or throughput target field.
pub fn target_label(field: &str) -> &'static str {
    match field {
        "ttft_p95_ms" => "Time to first token, p95 (ms)",
        "itl_p95_ms" => "Inter-token latency, p95 (ms)",
        "e2e_p95_ms" => "End-to-end latency, p95 (ms)",
        "output_tokens_per_s" => "Output tokens per second",
        "request_throughput_rps" => "Requests per second",
        "error_rate" => "Error rate (0–1)",
        _ => "target",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn base_form() -> HashMap<String, String> {
        form(&[
            ("name", "  Batch embeddings  "),
            ("owner", "data@example.com"),
            ("workload_kind", "batch-inference"),
            ("catalog_model", "meta-llama/Llama-3.1-8B-Instruct"),
            ("precision", "int4"),
            ("context_length", "4096"),
            ("concurrency", "32"),
            ("data_boundary", "shared-ok"),
            ("allocation_boundary", "serverless"),
            ("persist", "weights, outputs,\ncaches"),
            ("needs_host_control", "on"),
            ("max_cost_per_job", "0.0020"),
            ("currency", "eur"),
        ])
    }

    #[test]
    fn a_form_with_a_catalogue_model_fills_the_architecture_from_it() {
        let values = base_form();
        let brief = validate(&BriefInput::Form(&values)).unwrap();
        assert_eq!(brief.name, "Batch embeddings", "text is trimmed");
        assert_eq!(brief.model_name, "meta-llama/Llama-3.1-8B-Instruct");
        assert_eq!(brief.params_b, 8.03);
        assert_eq!(brief.num_layers, None, "architecture stays implicit");
        let input = brief.sizing_input();
        assert_eq!((input.num_layers, input.num_kv_heads, input.head_dim), (32, 8, 128));
        assert_eq!(brief.persist, ["weights", "outputs", "caches"]);
        assert!(brief.needs_host_control);
        assert!(!brief.only_needs_model_output, "an unchecked box is false");
        assert_eq!(brief.max_cost_per_job, Some(Decimal::new(2, 3)));
        assert_eq!(brief.currency, "EUR");
        assert_eq!(brief.cost_unit, CostUnit::Request, "default unit");
    }

    #[test]
    fn explicit_architecture_overrides_the_catalogue() {
        let mut values = base_form();
        values.insert("num_layers".into(), "40".into());
        let brief = validate(&BriefInput::Form(&values)).unwrap();
        assert_eq!(brief.sizing_input().num_layers, 40);
        assert_eq!(brief.sizing_input().num_kv_heads, 8);
    }

    #[test]
    fn without_a_catalogue_model_the_architecture_is_required() {
        let mut values = base_form();
        values.remove("catalog_model");
        let errors = validate(&BriefInput::Form(&values)).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        for f in ["model_name", "params_b", "num_layers", "num_kv_heads", "head_dim"] {
            assert!(fields.contains(&f), "{f} missing from {fields:?}");
        }
    }

    #[test]
    fn form_numbers_that_are_not_numbers_are_named() {
        let mut values = base_form();
        values.insert("context_length".into(), "8k".into());
        values.insert("targets.ttft_p95_ms".into(), "fast".into());
        values.insert("trial_gpu".into(), "GTX 480".into());
        values.insert("trial_gpu_count".into(), "16".into());
        let errors = validate(&BriefInput::Form(&values)).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["context_length", "targets.ttft_p95_ms", "trial_gpu"]);
        assert_eq!(errors[0].message, "must be a whole number");
    }

    #[test]
    fn trial_gpu_is_normalised_to_the_catalogue_name() {
        let mut values = base_form();
        values.insert("trial_gpu".into(), "h100 sxm".into());
        values.insert("trial_gpu_count".into(), "8".into());
        let brief = validate(&BriefInput::Form(&values)).unwrap();
        assert_eq!(brief.trial_gpu.as_deref(), Some("H100 SXM"));
        assert_eq!(brief.trial_gpu_count, Some(8));
    }

    #[test]
    fn control_characters_and_overlong_text_are_refused() {
        let mut values = base_form();
        values.insert("owner".into(), "a\u{0007}b".into());
        values.insert("restore_plan".into(), "r".repeat(MAX_LONG_TEXT + 1));
        let errors = validate(&BriefInput::Form(&values)).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["owner", "restore_plan"]);
    }
}
