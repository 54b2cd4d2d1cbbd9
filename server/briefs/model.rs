//! Workload briefs: the domain types and their validation. No I/O.
//!
//! Input arrives two ways — a JSON object from the API or string fields from an HTML form — and
//! both go through the same `validate`, which reports every bad field at once.
//!
//! The architecture a brief is sized with comes from its explicit fields, its `model_config`
//! (the model's config.json, kept as given) and its catalogue row, in that order
//! ([`sizing::resolve`]); what that resolution refuses is a field error here, what it notes
//! ends in the sizing's `architecture_notes`.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    ids::BriefId,
    sizing::{
        self, architecture::ARCHITECTURE_FIELDS, model_config, ArchitectureFields, ArchitectureRequest, KvCacheDtype,
        ModelSpec, Precision, Resolved, Sizing, SizingInput, WorkloadKind,
    },
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
/// A config.json is a few KiB (Llama 4's is under 4 KiB); long `quantization_config` ignore
/// lists stay far below this.
pub const MAX_MODEL_CONFIG_BYTES: usize = 256 * 1024;
pub const MAX_PEAK_RPS: f64 = 1e9;
/// Money fields: at most this much, with at most six decimal places.
pub const MAX_MONEY: i64 = 1_000_000_000;
/// Headroom above the expected peak, percent.
pub const MAX_HEADROOM_PCT: f64 = 1000.0;

/// Latency and throughput targets; each is optional (error_rate: a fraction).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
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
    /// The model's Hugging Face config.json, as given.
    #[schema(value_type = Option<Object>)]
    pub model_config: Option<Map<String, Value>>,
    /// The architecture fields the brief states (as the API names them, flat in the JSON).
    #[serde(flatten)]
    pub architecture: ArchitectureFields,
    pub targets: Targets,
    pub data_boundary: DataBoundary,
    pub needs_host_control: bool,
    pub only_needs_model_output: bool,
    pub persist: Vec<String>,
    pub restore_plan: Option<String>,
    pub fallback_plan: Option<String>,
    /// A decimal string.
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub max_cost_per_job: Option<Decimal>,
    pub currency: String,
    pub cost_unit: CostUnit,
    pub allocation_boundary: AllocationBoundary,
    pub trial_gpu: Option<String>,
    pub trial_gpu_count: Option<i32>,
    pub k8s_manifest: Option<String>,
    /// Expected peak traffic, requests per second (trials: replicas needed at the SLO).
    pub expected_peak_rps: Option<f64>,
    /// A managed model API's price per million tokens, for the break-even (trials). The older
    /// single price: the output price, with input free.
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub api_price_per_million_tokens: Option<Decimal>,
    /// Spare capacity on top of the expected peak, percent (replicas at the SLO; default 0).
    pub headroom_pct: Option<f64>,
    /// A managed model API's prices per million input and per million output tokens.
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub api_price_input_per_million: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub api_price_output_per_million: Option<Decimal>,
}

/// A stored brief.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Brief {
    #[schema(value_type = Uuid)]
    pub id: BriefId,
    #[serde(flatten)]
    pub fields: BriefFields,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A brief as its own table holds it: every field but trial 1's allocation (`trial_gpu`,
/// `trial_gpu_count`), which the trials domain keeps. Only `trials::service` turns it into a
/// [`Brief`] ([`BriefRecord::with_first_allocation`]), so every `Brief` outside the two domains is
/// whole: one shape, one loader (`BriefPath::load`, `trials::service::load_brief`).
#[derive(Debug)]
pub struct BriefRecord(Brief);

impl BriefRecord {
    /// Wraps what the briefs' own statements read (their allocation fields empty).
    pub(crate) fn new(mut brief: Brief) -> Self {
        brief.fields.trial_gpu = None;
        brief.fields.trial_gpu_count = None;
        Self(brief)
    }

    pub fn id(&self) -> BriefId {
        self.0.id
    }

    /// The whole brief: these fields with trial 1's allocation, as the trials domain holds it.
    pub fn with_first_allocation(self, gpu: Option<String>, count: Option<i32>) -> Brief {
        let mut brief = self.0;
        brief.fields.trial_gpu = gpu;
        brief.fields.trial_gpu_count = count;
        brief
    }
}

impl BriefFields {
    /// The catalogue entry the brief names, if any.
    pub fn catalog_entry(&self) -> Option<&'static ModelSpec> {
        self.catalog_model.as_deref().and_then(sizing::model_by_hf_id)
    }

    /// What [`sizing::resolve`] works from: the explicit fields, the config.json and the
    /// catalogue row.
    pub fn architecture_request(&self) -> ArchitectureRequest<'_> {
        let positive = |v: Option<i32>| v.and_then(|v| u32::try_from(v).ok());
        ArchitectureRequest {
            params_b: self.params_b,
            precision: self.precision,
            num_layers: positive(self.num_layers),
            num_kv_heads: positive(self.num_kv_heads),
            head_dim: positive(self.head_dim),
            fields: &self.architecture,
            model_config: self.model_config.as_ref(),
            catalog: self.catalog_entry(),
        }
    }

    /// The architecture the brief is sized with, and what resolving it noted.
    pub fn resolved_architecture(&self) -> Resolved {
        sizing::resolve(&self.architecture_request())
    }

    /// The sizing request. A stored brief was valid when saved; should a later rule refuse
    /// it, the refusal becomes a note instead of an error page.
    pub fn sizing_input(&self) -> SizingInput {
        let resolved = self.resolved_architecture();
        let mut notes = resolved.notes;
        notes.extend(
            resolved
                .problems
                .iter()
                .map(|p| format!("{} {} (edit the brief to fix it)", p.field, p.message)),
        );
        SizingInput {
            workload_kind: self.workload_kind,
            precision: self.precision,
            params_b: self.params_b,
            context_length: self.context_length.unsigned_abs(),
            concurrency: self.concurrency.unsigned_abs(),
            architecture: resolved.architecture,
            architecture_notes: notes,
            kv_cache_dtype: self.architecture.kv_cache_dtype,
            speculative_decoding: self.architecture.speculative_decoding,
        }
    }

    pub fn sizing(&self) -> Sizing {
        sizing::size(&self.sizing_input())
    }

    /// The fields as the strings an HTML form shows, keyed by input name: one entry per form field.
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
            ("currency".to_owned(), self.currency.clone()),
            ("cost_unit".to_owned(), self.cost_unit.as_str().to_owned()),
            (
                "allocation_boundary".to_owned(),
                self.allocation_boundary.as_str().to_owned(),
            ),
            ("trial_gpu".to_owned(), opt(&self.trial_gpu)),
            ("trial_gpu_count".to_owned(), num(self.trial_gpu_count)),
            ("k8s_manifest".to_owned(), opt(&self.k8s_manifest)),
            (
                "model_config".to_owned(),
                self.model_config
                    .as_ref()
                    .and_then(|c| serde_json::to_string_pretty(c).ok())
                    .unwrap_or_default(),
            ),
        ]);
        m.extend(self.money_values());
        self.architecture_values(&mut m);
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

    /// The form's money fields: the cost ceiling, the expected peak and headroom, the API prices.
    fn money_values(&self) -> [(String, String); 6] {
        [
            (
                "max_cost_per_job".to_owned(),
                self.max_cost_per_job.map(|d| d.to_string()).unwrap_or_default(),
            ),
            (
                "expected_peak_rps".to_owned(),
                self.expected_peak_rps.map(|v| v.to_string()).unwrap_or_default(),
            ),
            (
                "api_price_per_million_tokens".to_owned(),
                self.api_price_per_million_tokens
                    .map(|d| d.to_string())
                    .unwrap_or_default(),
            ),
            (
                "headroom_pct".to_owned(),
                self.headroom_pct.map(|v| v.to_string()).unwrap_or_default(),
            ),
            (
                "api_price_input_per_million".to_owned(),
                self.api_price_input_per_million
                    .map(|d| d.to_string())
                    .unwrap_or_default(),
            ),
            (
                "api_price_output_per_million".to_owned(),
                self.api_price_output_per_million
                    .map(|d| d.to_string())
                    .unwrap_or_default(),
            ),
        ]
    }

    /// The form's architecture fields, each empty when the brief leaves it to the model's config.
    fn architecture_values(&self, m: &mut HashMap<String, String>) {
        let a = &self.architecture;
        let mut arch = |field: &str, v: Option<String>| {
            m.insert(field.to_owned(), v.unwrap_or_default());
        };
        arch("num_attention_heads", a.num_attention_heads.map(|v| v.to_string()));
        arch("kv_lora_rank", a.kv_lora_rank.map(|v| v.to_string()));
        arch("qk_rope_head_dim", a.qk_rope_head_dim.map(|v| v.to_string()));
        arch("sliding_window", a.sliding_window.map(|v| v.to_string()));
        arch("sliding_window_layers", a.sliding_window_layers.map(|v| v.to_string()));
        arch("layer_types", a.layer_types.as_ref().map(|t| t.join(", ")));
        arch("attention_chunk_size", a.attention_chunk_size.map(|v| v.to_string()));
        arch("chunked_layers", a.chunked_layers.map(|v| v.to_string()));
        arch("num_experts", a.num_experts.map(|v| v.to_string()));
        arch("experts_per_token", a.experts_per_token.map(|v| v.to_string()));
        arch("active_params_b", a.active_params_b.map(|v| v.to_string()));
        arch("kv_cache_dtype", Some(a.kv_cache_dtype.as_str().to_owned()));
        if a.speculative_decoding {
            m.insert("speculative_decoding".into(), "on".into());
        }
    }
}

/// Raw input before validation: a JSON object from the API or an HTML form's fields.
pub type BriefInput<'a> = Input<'a>;

/// Fields the API returns that a client may send back unchanged in a PUT; they are ignored.
const READ_ONLY_FIELDS: [&str; 5] = ["id", "sizing", "status", "created_at", "updated_at"];

const BRIEF_FIELDS: [&str; 34] = [
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
    "model_config",
    "expected_peak_rps",
    "api_price_per_million_tokens",
    "headroom_pct",
    "api_price_input_per_million",
    "api_price_output_per_million",
    // Form-only: which submit button was pressed.
    "intent",
];

/// The model's config.json: a JSON object from the API, JSON text from the form.
fn read_model_config(c: &mut Checker<'_>) -> Option<Map<String, Value>> {
    const FIELD: &str = "model_config";
    let value = match c.input.raw(FIELD) {
        Raw::Absent => return None,
        Raw::Json(v) => v.clone(),
        Raw::FormText(s) => match serde_json::from_str::<Value>(s) {
            Ok(v) => v,
            Err(e) => {
                c.fail(FIELD, format!("is not valid JSON ({e})"));
                return None;
            }
        },
    };
    let Value::Object(map) = value else {
        c.fail(FIELD, "must be a JSON object: the model's config.json");
        return None;
    };
    // Its size as stored (compact JSON), whatever the spacing it came with.
    let bytes = serde_json::to_vec(&map).map_or(usize::MAX, |v| v.len());
    if bytes > MAX_MODEL_CONFIG_BYTES {
        c.fail(
            FIELD,
            format!(
                "is {} KiB; a config.json is a few KiB and at most {} KiB is kept",
                bytes.div_ceil(1024),
                MAX_MODEL_CONFIG_BYTES / 1024
            ),
        );
        return None;
    }
    Some(map)
}

fn names<T: Copy>(all: &[T], name: fn(&T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(name).collect()
}

/// Reads and checks a brief, from a JSON object or an HTML form, reporting every bad field at once.
/// Each group of fields is read by its own function below, in the order the errors are reported.
pub fn validate(input: &BriefInput<'_>) -> Result<BriefFields, Vec<FieldError>> {
    let mut c = Checker::new(input);
    refuse_unknown_fields(&mut c);
    let who = read_who(&mut c);
    let model = read_model(&mut c);
    let targets = read_targets(&mut c);
    let placement = read_placement(&mut c);
    let cost = read_cost(&mut c);
    let allocation = read_allocation(&mut c);
    let demand = read_demand(&mut c);
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
        who.name,
        who.owner,
        who.workload_kind,
        model.model_name,
        model.params_b,
        model.precision,
        model.context_length,
        model.concurrency,
        placement.data_boundary,
        allocation.boundary,
    )
    else {
        return Err(vec![FieldError::new("brief", "is incomplete")]);
    };
    Ok(BriefFields {
        name,
        owner,
        workload_kind,
        model_name,
        model_revision: model.model_revision,
        catalog_model: model.catalog.map(|m| m.hf_id.clone()),
        params_b,
        precision,
        context_length,
        concurrency,
        num_layers: model.num_layers,
        num_kv_heads: model.num_kv_heads,
        head_dim: model.head_dim,
        model_config: model.model_config,
        architecture: model.architecture,
        targets,
        data_boundary,
        needs_host_control: placement.needs_host_control,
        only_needs_model_output: placement.only_needs_model_output,
        persist: placement.persist,
        restore_plan: placement.restore_plan,
        fallback_plan: placement.fallback_plan,
        max_cost_per_job: cost.max_cost_per_job,
        currency: cost.currency.unwrap_or_else(|| "USD".to_owned()),
        cost_unit: cost.cost_unit.unwrap_or(CostUnit::Request),
        allocation_boundary,
        trial_gpu: allocation.trial_gpu,
        trial_gpu_count: allocation.trial_gpu_count,
        k8s_manifest: allocation.k8s_manifest,
        expected_peak_rps: demand.expected_peak_rps,
        api_price_per_million_tokens: demand.api_price_per_million_tokens,
        headroom_pct: demand.headroom_pct,
        api_price_input_per_million: demand.api_price_input_per_million,
        api_price_output_per_million: demand.api_price_output_per_million,
    })
}

/// A JSON body names only brief fields (and read-only ones it got back), and only known targets.
fn refuse_unknown_fields(c: &mut Checker<'_>) {
    let input = c.input;
    let BriefInput::Json(map) = input else {
        return;
    };
    for key in map.keys() {
        let key_str = key.as_str();
        if !BRIEF_FIELDS.contains(&key_str)
            && !ARCHITECTURE_FIELDS.contains(&key_str)
            && !READ_ONLY_FIELDS.contains(&key_str)
        {
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

/// Name, owner and workload kind: who asks for what kind of work.
struct Who {
    name: Option<String>,
    owner: Option<String>,
    workload_kind: Option<WorkloadKind>,
}

fn read_who(c: &mut Checker<'_>) -> Who {
    Who {
        name: c.required_text("name", MAX_SHORT_TEXT),
        owner: c.required_text("owner", MAX_SHORT_TEXT),
        workload_kind: c.choice("workload_kind", &names(&WorkloadKind::ALL, WorkloadKind::as_str), true),
    }
}

/// The model and its architecture; a catalogue model fills what the brief leaves out.
struct ModelFields {
    catalog: Option<&'static ModelSpec>,
    model_name: Option<String>,
    model_revision: Option<String>,
    params_b: Option<f64>,
    precision: Option<Precision>,
    context_length: Option<i64>,
    concurrency: Option<i64>,
    num_layers: Option<i32>,
    num_kv_heads: Option<i32>,
    head_dim: Option<i32>,
    model_config: Option<Map<String, Value>>,
    architecture: ArchitectureFields,
}

/// The catalogue model the brief names, if it names one; an unknown one is refused on its field.
fn read_catalog_model(c: &mut Checker<'_>) -> Option<&'static ModelSpec> {
    let id = c.text("catalog_model", MAX_SHORT_TEXT)?;
    let found = sizing::model_by_hf_id(&id);
    if found.is_none() {
        c.fail(
            "catalog_model",
            "is not in the model catalogue; leave it empty and give the architecture fields",
        );
    }
    found
}

fn read_model(c: &mut Checker<'_>) -> ModelFields {
    let input = c.input;
    let catalog = read_catalog_model(c);
    let model_name = c
        .model_id("model_name", MAX_SHORT_TEXT)
        .or_else(|| catalog.map(|m| m.hf_id.clone()));
    if model_name.is_none() && !c.errors.iter().any(|e| e.field == "model_name") {
        c.fail("model_name", "is required (or pick a catalogue model)");
    }
    let model_revision = c.text("model_revision", MAX_SHORT_TEXT);
    let params_absent = matches!(input.raw("params_b"), Raw::Absent);
    let params_b = c
        .positive_number("params_b", MAX_PARAMS_B)
        .or_else(|| catalog.filter(|_| params_absent).map(|m| m.params_b));
    if params_b.is_none() && catalog.is_none() && params_absent {
        c.fail("params_b", "is required (or pick a catalogue model)");
    }
    let precision: Option<Precision> = c.choice("precision", &names(&Precision::ALL, Precision::as_str), true);
    let context_length = required_positive_integer(c, "context_length", MAX_CONTEXT);
    let concurrency = required_positive_integer(c, "concurrency", MAX_CONCURRENCY);
    let arch = |c: &mut Checker<'_>, field: &str, max: i64| -> Option<i32> {
        c.positive_integer(field, max).and_then(|v| i32::try_from(v).ok())
    };
    let num_layers = arch(c, "num_layers", 1_000);
    let num_kv_heads = arch(c, "num_kv_heads", 1_024);
    let head_dim = arch(c, "head_dim", 4_096);
    let model_config = read_model_config(c);
    let architecture = read_architecture(c);
    // The architecture as the brief, its config.json and its catalogue row give it: what that
    // refuses is named on its field (one error per field).
    let positive = |v: Option<i32>| v.and_then(|v| u32::try_from(v).ok());
    let resolved = sizing::resolve(&ArchitectureRequest {
        params_b: params_b.unwrap_or(MAX_PARAMS_B),
        precision: precision.unwrap_or(Precision::Bf16),
        num_layers: positive(num_layers),
        num_kv_heads: positive(num_kv_heads),
        head_dim: positive(head_dim),
        fields: &architecture,
        model_config: model_config.as_ref(),
        catalog,
    });
    for p in resolved.problems {
        if !c.errors.iter().any(|e| e.field == p.field) {
            c.fail(&p.field, p.message);
        }
    }
    ModelFields {
        catalog,
        model_name,
        model_revision,
        params_b,
        precision,
        context_length,
        concurrency,
        num_layers,
        num_kv_heads,
        head_dim,
        model_config,
        architecture,
    }
}

/// A positive integer that must be given: absent is "is required", a bad value its own error.
fn required_positive_integer(c: &mut Checker<'_>, field: &str, max: i64) -> Option<i64> {
    let value = c.positive_integer(field, max);
    if value.is_none() && matches!(c.input.raw(field), Raw::Absent) {
        c.fail(field, "is required");
    }
    value
}

/// The optional architecture fields sizing reads beyond layers, KV heads and head size.
fn read_architecture(c: &mut Checker<'_>) -> ArchitectureFields {
    let max_layers = model_config::MAX_LAYERS as i64;
    let max_tokens = model_config::MAX_TOKENS as i64;
    let layer_types = c.read("layer_types", Raw::list);
    if layer_types
        .as_ref()
        .is_some_and(|t| t.len() > model_config::MAX_LAYERS as usize)
    {
        c.fail("layer_types", format!("must have at most {max_layers} entries"));
    }
    ArchitectureFields {
        num_attention_heads: c.positive_u32("num_attention_heads", model_config::MAX_HEADS as i64),
        kv_lora_rank: c.positive_u32("kv_lora_rank", model_config::MAX_WIDTH as i64),
        qk_rope_head_dim: c.positive_u32("qk_rope_head_dim", model_config::MAX_HEAD_DIM as i64),
        sliding_window: c.positive_u64("sliding_window", max_tokens),
        sliding_window_layers: c.count("sliding_window_layers", max_layers),
        layer_types,
        attention_chunk_size: c.positive_u64("attention_chunk_size", max_tokens),
        chunked_layers: c.count("chunked_layers", max_layers),
        num_experts: c.positive_u32("num_experts", model_config::MAX_EXPERTS as i64),
        experts_per_token: c.positive_u32("experts_per_token", model_config::MAX_EXPERTS as i64),
        active_params_b: c.positive_number("active_params_b", MAX_PARAMS_B),
        kv_cache_dtype: c
            .choice(
                "kv_cache_dtype",
                &names(&KvCacheDtype::ALL, KvCacheDtype::as_str),
                false,
            )
            .unwrap_or_default(),
        speculative_decoding: c.read("speculative_decoding", Raw::boolean).unwrap_or(false),
    }
}

/// Latency and throughput targets: positive, and the error rate a fraction.
fn read_targets(c: &mut Checker<'_>) -> Targets {
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
    targets
}

/// Where the work may run and what it must keep: the data boundary, host control, persistence.
struct Placement {
    data_boundary: Option<DataBoundary>,
    needs_host_control: bool,
    only_needs_model_output: bool,
    persist: Vec<String>,
    restore_plan: Option<String>,
    fallback_plan: Option<String>,
}

fn read_placement(c: &mut Checker<'_>) -> Placement {
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
    Placement {
        data_boundary,
        needs_host_control,
        only_needs_model_output,
        persist,
        restore_plan: c.multiline_text("restore_plan", MAX_LONG_TEXT),
        fallback_plan: c.multiline_text("fallback_plan", MAX_LONG_TEXT),
    }
}

/// The cost ceiling, its currency and what one completed job is.
struct Cost {
    max_cost_per_job: Option<Decimal>,
    currency: Option<String>,
    cost_unit: Option<CostUnit>,
}

fn read_cost(c: &mut Checker<'_>) -> Cost {
    let max_cost_per_job = c.money("max_cost_per_job", MAX_MONEY);
    let currency = c.text("currency", MAX_SHORT_TEXT).map(|s| s.to_ascii_uppercase());
    if let Some(cur) = &currency {
        if cur.len() != 3 || !cur.chars().all(|ch| ch.is_ascii_alphabetic()) {
            c.fail("currency", "must be a three-letter ISO 4217 code such as USD");
        }
    }
    Cost {
        max_cost_per_job,
        currency,
        cost_unit: c.choice("cost_unit", &names(CostUnit::ALL, CostUnit::as_str), false),
    }
}

/// The allocation asked for: its kind, the first trial's GPU and count, its manifest.
struct AllocationFields {
    boundary: Option<AllocationBoundary>,
    trial_gpu: Option<String>,
    trial_gpu_count: Option<i32>,
    k8s_manifest: Option<String>,
}

fn read_allocation(c: &mut Checker<'_>) -> AllocationFields {
    let boundary: Option<AllocationBoundary> = c.choice(
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
    AllocationFields {
        boundary,
        trial_gpu,
        trial_gpu_count,
        k8s_manifest: c.multiline_text("k8s_manifest", MAX_MANIFEST),
    }
}

/// Expected demand and the managed API's prices, for the money at the SLO.
struct Demand {
    expected_peak_rps: Option<f64>,
    api_price_per_million_tokens: Option<Decimal>,
    headroom_pct: Option<f64>,
    api_price_input_per_million: Option<Decimal>,
    api_price_output_per_million: Option<Decimal>,
}

fn read_demand(c: &mut Checker<'_>) -> Demand {
    let expected_peak_rps = c.positive_number("expected_peak_rps", MAX_PEAK_RPS);
    let api_price_per_million_tokens = c.money("api_price_per_million_tokens", MAX_MONEY);
    let headroom_pct = c.read("headroom_pct", Raw::number).and_then(|v| {
        if (0.0..=MAX_HEADROOM_PCT).contains(&v) {
            Some(v)
        } else {
            c.fail(
                "headroom_pct",
                format!("must be a percentage from 0 to {MAX_HEADROOM_PCT}"),
            );
            None
        }
    });
    Demand {
        expected_peak_rps,
        api_price_per_million_tokens,
        headroom_pct,
        api_price_input_per_million: c.money("api_price_input_per_million", MAX_MONEY),
        api_price_output_per_million: c.money("api_price_output_per_million", MAX_MONEY),
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
        let a = brief.sizing_input().architecture;
        assert_eq!((a.num_layers, a.num_kv_heads, a.head_dim), (32, 8, 128));
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
        let input = brief.sizing_input();
        assert_eq!(input.architecture.num_layers, 40);
        // A plain model attends on every layer the brief says it has.
        assert_eq!(input.architecture.attention_layers, 40);
        assert_eq!(input.architecture.num_kv_heads, 8);
        assert!(
            input.architecture_notes[0].contains("num_layers 40 as given"),
            "{:?}",
            input.architecture_notes
        );
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

    const GEMMA3: &str = include_str!("../../tests/fixtures/model-configs/gemma-3-27b-it.json");

    fn config_form() -> HashMap<String, String> {
        let mut values = base_form();
        values.remove("catalog_model");
        values.insert("model_name".into(), "google/gemma-3-27b-it".into());
        values.insert("params_b".into(), "27.43".into());
        values.insert("precision".into(), "bf16".into());
        values.insert("model_config".into(), GEMMA3.into());
        values
    }

    #[test]
    fn a_pasted_config_json_gives_the_architecture_and_is_kept() {
        let brief = validate(&BriefInput::Form(&config_form())).unwrap();
        // Kept as given, not as read.
        let kept = brief.model_config.as_ref().unwrap();
        assert_eq!(kept["text_config"]["num_hidden_layers"], 62);
        assert_eq!(brief.num_layers, None, "the explicit fields stay empty");
        let input = brief.sizing_input();
        let a = &input.architecture;
        assert_eq!((a.num_layers, a.num_kv_heads, a.head_dim), (62, 16, 128));
        assert_eq!(a.sliding.map(|w| (w.tokens, w.layers)), Some((1024, 52)));
        assert!(input.architecture_notes[0].starts_with("config.json (gemma3_text): 62 layers"));
        // The form shows the config back as text, and re-validating it gives the same brief.
        let again = validate(&BriefInput::Form(&brief.form_values())).unwrap();
        assert_eq!(again, brief);
    }

    #[test]
    fn bad_model_configs_are_refused_on_the_field() {
        let cases: [(&str, &str, &str); 5] = [
            ("{\"num_hidden_layers\": 32,", "model_config", "is not valid JSON"),
            ("[1, 2, 3]", "model_config", "must be a JSON object"),
            (
                "{\"num_hidden_layers\": \"32\", \"num_attention_heads\": 32, \"hidden_size\": 4096}",
                "model_config.num_hidden_layers",
                "must be a whole number",
            ),
            (
                "{\"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"hidden_size\": 4096}",
                "model_config.num_hidden_layers",
                "is missing from config.json",
            ),
            (
                "{\"text_config\": {\"num_hidden_layers\": 0}}",
                "model_config.text_config.num_hidden_layers",
                "from 1 to 1000",
            ),
        ];
        for (text, field, message) in cases {
            let mut values = config_form();
            values.insert("model_config".into(), text.into());
            let errors = validate(&BriefInput::Form(&values)).unwrap_err();
            let e = errors
                .iter()
                .find(|e| e.field == field)
                .unwrap_or_else(|| panic!("{field} not in {errors:?}"));
            assert!(e.message.contains(message), "{field}: {}", e.message);
        }
        // One megabyte of config: refused by size, naming the field.
        let mut big = serde_json::Map::new();
        big.insert("num_hidden_layers".into(), Value::from(32));
        big.insert("padding".into(), Value::String("x".repeat(1_000_000)));
        let mut body: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "name": "n", "owner": "o", "workload_kind": "realtime-inference", "model_name": "m",
            "params_b": 8, "precision": "bf16", "context_length": 4096, "concurrency": 1,
            "data_boundary": "shared-ok", "allocation_boundary": "vm",
        }))
        .unwrap();
        body.insert("model_config".into(), Value::Object(big));
        let errors = validate(&BriefInput::Json(&body)).unwrap_err();
        let e = errors.iter().find(|e| e.field == "model_config").unwrap();
        assert!(e.message.contains("977 KiB"), "{}", e.message);
    }

    #[test]
    fn architecture_fields_are_read_and_checked() {
        let mut values = base_form();
        values.remove("catalog_model");
        values.insert("model_name".into(), "my-org/window-moe".into());
        values.insert("params_b".into(), "47".into());
        for (k, v) in [
            ("num_layers", "32"),
            ("num_kv_heads", "8"),
            ("head_dim", "128"),
            ("num_attention_heads", "32"),
            ("sliding_window", "4096"),
            ("layer_types", &"sliding_attention, full_attention, ".repeat(16)),
            ("num_experts", "8"),
            ("experts_per_token", "2"),
            ("active_params_b", "13"),
            ("expected_peak_rps", "12.5"),
            ("api_price_per_million_tokens", "0.60"),
        ] {
            values.insert(k.into(), v.to_string());
        }
        let brief = validate(&BriefInput::Form(&values)).unwrap();
        assert_eq!(brief.expected_peak_rps, Some(12.5));
        assert_eq!(brief.api_price_per_million_tokens, Some(Decimal::new(6, 1)));
        let a = brief.sizing_input().architecture;
        assert_eq!(a.sliding.map(|w| (w.tokens, w.layers)), Some((4096, 16)));
        // active = shared + experts × 2/8 and total = shared + experts: experts = (47 − 13) / 0.75.
        let experts = a.moe.unwrap().expert_params.unwrap();
        assert!((experts - 34e9 / 0.75).abs() < 1.0, "{experts}");

        // Contradictions and out-of-range values are named.
        for (k, v) in [
            ("experts_per_token", "9"),
            ("active_params_b", "48"),
            ("api_price_per_million_tokens", "-1"),
            ("expected_peak_rps", "0"),
            ("sliding_window_layers", "3"),
        ] {
            values.insert(k.into(), v.into());
        }
        let errors = validate(&BriefInput::Form(&values)).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "sliding_window_layers",
                "active_params_b",
                "experts_per_token",
                "expected_peak_rps",
                "api_price_per_million_tokens"
            ],
            "{errors:?}"
        );
    }
    // One test per group of fields `validate` reads, each on its own reader.

    fn read<T>(pairs: &[(&str, &str)], group: fn(&mut Checker<'_>) -> T) -> (T, Vec<String>) {
        let values = form(pairs);
        let input = BriefInput::Form(&values);
        let mut c = Checker::new(&input);
        let out = group(&mut c);
        (
            out,
            c.errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect(),
        )
    }

    #[test]
    fn unknown_json_fields_and_targets_are_named() {
        let body = serde_json::json!({ "name": "x", "colour": "red", "targets": { "ttft_p95_ms": 1, "speed": 2 } });
        let map = body.as_object().unwrap();
        let input = BriefInput::Json(map);
        let mut c = Checker::new(&input);
        refuse_unknown_fields(&mut c);
        let fields: Vec<&str> = c.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["colour", "targets.speed"]);
        let not_an_object = serde_json::json!({ "targets": [1] });
        let input = BriefInput::Json(not_an_object.as_object().unwrap());
        let mut c = Checker::new(&input);
        refuse_unknown_fields(&mut c);
        assert_eq!(c.errors[0].field, "targets");
        // A form has no unknown fields to refuse: it sends what the page shows.
        let (_, errors) = read(&[("colour", "red")], refuse_unknown_fields);
        assert!(errors.is_empty());
    }

    #[test]
    fn who_needs_a_name_an_owner_and_a_known_workload_kind() {
        let (who, errors) = read(
            &[("name", " A "), ("owner", "o"), ("workload_kind", "training")],
            read_who,
        );
        assert_eq!((who.name.as_deref(), errors.len()), (Some("A"), 0));
        assert_eq!(who.workload_kind, Some(WorkloadKind::Training));
        let (_, errors) = read(&[("workload_kind", "mining")], read_who);
        assert_eq!(errors.len(), 3, "{errors:?}");
    }

    #[test]
    fn the_model_group_fills_params_from_the_catalogue_and_requires_the_rest() {
        let (m, errors) = read(
            &[
                ("catalog_model", "meta-llama/Llama-3.1-8B-Instruct"),
                ("precision", "bf16"),
                ("context_length", "4096"),
                ("concurrency", "8"),
            ],
            read_model,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            (m.params_b, m.model_name.as_deref()),
            (Some(8.03), Some("meta-llama/Llama-3.1-8B-Instruct"))
        );
        let (_, errors) = read(&[("catalog_model", "no/such-model")], read_model);
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("catalog_model: is not in the model catalogue")),
            "{errors:?}"
        );
        assert!(errors.contains(&"params_b: is required (or pick a catalogue model)".to_owned()));
        assert!(errors.contains(&"context_length: is required".to_owned()));
        assert!(errors.contains(&"concurrency: is required".to_owned()));
    }

    #[test]
    fn the_architecture_group_caps_layer_types() {
        let many = vec!["full_attention"; model_config::MAX_LAYERS as usize + 1].join(",");
        let (_, errors) = read(&[("layer_types", many.as_str())], read_architecture);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("layer_types: must have at most"));
        let (a, errors) = read(&[("speculative_decoding", "on")], read_architecture);
        assert!(errors.is_empty() && a.speculative_decoding);
    }

    #[test]
    fn targets_are_positive_and_the_error_rate_a_fraction() {
        let (t, errors) = read(
            &[("targets.ttft_p95_ms", "500"), ("targets.error_rate", "0.01")],
            read_targets,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!((t.ttft_p95_ms, t.error_rate), (Some(500.0), Some(0.01)));
        let (t, errors) = read(
            &[("targets.itl_p95_ms", "0"), ("targets.error_rate", "2")],
            read_targets,
        );
        assert_eq!(
            errors,
            [
                "targets.itl_p95_ms: must be greater than 0",
                "targets.error_rate: must be a fraction between 0 and 1"
            ]
        );
        assert_eq!((t.itl_p95_ms, t.error_rate), (None, None));
    }

    #[test]
    fn placement_caps_what_must_persist() {
        let (p, errors) = read(
            &[("data_boundary", "dedicated-host"), ("persist", "a, b")],
            read_placement,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            (p.data_boundary, p.persist.len()),
            (Some(DataBoundary::DedicatedHost), 2)
        );
        let long = "x".repeat(101);
        let (_, errors) = read(
            &[("data_boundary", "shared-ok"), ("persist", long.as_str())],
            read_placement,
        );
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("persist: at most"));
    }

    #[test]
    fn the_currency_is_upper_cased_and_three_letters() {
        let (cost, errors) = read(&[("currency", "eur"), ("cost_unit", "image")], read_cost);
        assert!(errors.is_empty());
        assert_eq!(
            (cost.currency.as_deref(), cost.cost_unit),
            (Some("EUR"), Some(CostUnit::Image))
        );
        let (_, errors) = read(&[("currency", "euro")], read_cost);
        assert_eq!(errors, ["currency: must be a three-letter ISO 4217 code such as USD"]);
    }

    #[test]
    fn the_trial_gpu_count_is_a_power_of_two_up_to_8_or_whole_nodes() {
        for (n, ok) in [
            ("1", true),
            ("4", true),
            ("8", true),
            ("16", true),
            ("3", false),
            ("12", false),
        ] {
            let (a, errors) = read(
                &[("allocation_boundary", "vm"), ("trial_gpu_count", n)],
                read_allocation,
            );
            assert_eq!(errors.is_empty(), ok, "{n}: {errors:?}");
            assert_eq!(a.trial_gpu_count.is_some(), ok, "{n}");
        }
        let (_, errors) = read(
            &[("allocation_boundary", "vm"), ("trial_gpu", "Voodoo 5")],
            read_allocation,
        );
        assert_eq!(errors, ["trial_gpu: is not in the GPU catalogue"]);
    }

    #[test]
    fn headroom_is_a_percentage_within_bounds() {
        let (d, errors) = read(&[("headroom_pct", "20")], read_demand);
        assert_eq!((d.headroom_pct, errors.len()), (Some(20.0), 0));
        let (d, errors) = read(&[("headroom_pct", "-1")], read_demand);
        assert_eq!((d.headroom_pct, errors.len()), (None, 1));
    }
}

/// A brief as the API answers it: its fields (those of `BriefBody`, with the defaults filled in),
/// `id`, the computed `sizing` and `status`.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Brief)]
pub struct BriefView<'a> {
    #[serde(flatten)]
    #[schema(inline)]
    pub brief: &'a Brief,
    pub sizing: Sizing,
    /// Where the brief's review stands, as the list's summary says: awaiting-evidence,
    /// needs-approval, stale, approved or rejected.
    pub status: &'a str,
}

/// The status of a brief nothing was sent to yet.
pub const NEW_BRIEF_STATUS: &str = "awaiting-evidence";

impl<'a> BriefView<'a> {
    /// A brief as its review stands (`status`: its summary's state).
    pub fn new(brief: &'a Brief, status: &'a str) -> Self {
        Self {
            brief,
            sizing: brief.fields.sizing(),
            status,
        }
    }
}
