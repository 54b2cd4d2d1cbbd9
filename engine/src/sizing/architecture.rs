//! The architecture the engine sizes, resolved from what a brief states (explicit fields win),
//! its `model_config` (the model's Hugging Face config.json) and its catalogue row, in that
//! order. Disagreements between the three and facts nobody gives are named in the notes;
//! contradictions among the explicit fields themselves, and malformed configs, are problems
//! (the brief is refused with the field named).

use std::fmt::Display;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::catalog::{Attention, ModelSpec, WeightFormat};
use super::model_config::{
    self, is_state_layer, ConfigReading, LayerWindow, CHUNKED_ATTENTION, LAYER_TYPES, SLIDING_ATTENTION,
};
use super::state::{StateKind, StateLayers};
use super::{KvCacheDtype, Precision};

/// The architecture fields a brief may state (as the API names them), each optional: they change the
/// memory formula for models the catalogue does not know.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ArchitectureFields {
    pub num_attention_heads: Option<u32>,
    /// Multi-head latent attention (DeepSeek-V2/V3): compressed KV width per layer.
    pub kv_lora_rank: Option<u32>,
    /// Multi-head latent attention: the RoPE key width cached beside the latent.
    pub qk_rope_head_dim: Option<u32>,
    /// Tokens a sliding-window layer keeps.
    pub sliding_window: Option<u64>,
    /// How many layers use the sliding window.
    pub sliding_window_layers: Option<u32>,
    /// One entry per layer: full_attention, sliding_attention, chunked_attention, or a state
    /// layer (linear_attention, mamba) whose dimensions come from the config.
    pub layer_types: Option<Vec<String>>,
    /// Tokens per chunk of chunked local attention (Llama 4).
    pub attention_chunk_size: Option<u64>,
    /// How many layers attend only within their chunk.
    pub chunked_layers: Option<u32>,
    pub num_experts: Option<u32>,
    pub experts_per_token: Option<u32>,
    /// Parameters each token uses, billions (MoE).
    pub active_params_b: Option<f64>,
    /// The KV cache's element type (vLLM `--kv-cache-dtype`): `auto` keeps 16-bit KV whatever the
    /// weight precision, `fp8` halves it. Not an architecture fact, but it changes the same
    /// formula, so it is kept beside them.
    pub kv_cache_dtype: KvCacheDtype,
    /// Serving with speculative decoding from the model's multi-token-prediction layers: their
    /// KV cache counts only then (their weights always do).
    pub speculative_decoding: bool,
}

/// The field names of [`ArchitectureFields`], as the API spells them.
pub const ARCHITECTURE_FIELDS: [&str; 13] = [
    "num_attention_heads",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "sliding_window",
    "sliding_window_layers",
    "layer_types",
    "attention_chunk_size",
    "chunked_layers",
    "num_experts",
    "experts_per_token",
    "active_params_b",
    "kv_cache_dtype",
    "speculative_decoding",
];

/// Mixture of experts: routed experts per MoE layer, how many each token uses, and the
/// parameters they hold (units), when known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moe {
    pub num_experts: u32,
    pub experts_per_token: u32,
    pub expert_params: Option<f64>,
}

/// Multi-head latent attention: what each layer caches per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mla {
    pub kv_lora_rank: u32,
    pub qk_rope_head_dim: u32,
}

/// The resolved facts the engine uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Architecture {
    pub num_layers: u32,
    /// Query heads; `None` when nobody says (tensor parallelism is then checked on KV heads only).
    pub num_attention_heads: Option<u32>,
    pub num_kv_heads: u32,
    pub head_dim: u32,
    pub hidden_size: Option<u32>,
    /// MLP width (one expert's for MoE), for LoRA adapter counts.
    pub intermediate_size: Option<u32>,
    pub vocab_size: Option<u32>,
    pub tie_word_embeddings: bool,
    pub mla: Option<Mla>,
    pub sliding: Option<LayerWindow>,
    pub chunked: Option<LayerWindow>,
    pub moe: Option<Moe>,
    /// Layers that hold a KV cache (attention, windowed or not); the others of a hybrid model keep
    /// a constant state ([`Architecture::state`]) or are feed-forward only.
    pub attention_layers: u32,
    /// The constant-state layers of a hybrid model (Gated DeltaNet, Mamba-2).
    pub state: Option<StateLayers>,
    /// Multi-token-prediction layers: full-attention layers whose KV counts with speculative
    /// decoding.
    pub mtp_layers: u32,
    /// Their parameters (units), added to the weights; 0 when unknown or already in `params_b`.
    pub mtp_params: f64,
    /// The config's parameter count when `params_b` disagrees with it by more than 5 %: the
    /// weights use it instead.
    pub config_params: Option<f64>,
    /// Expert MLPs published in MXFP4 (gpt-oss).
    pub mxfp4_experts: bool,
    /// The published weights are fp8.
    pub fp8_checkpoint: bool,
    /// The fp8 weights' block width (`weight_block_size`), when they are block-scaled: a
    /// tensor-parallel shard must hold whole blocks. The catalogue's fp8 checkpoints (DeepSeek's,
    /// Qwen's) are 128-wide.
    pub fp8_block: Option<u32>,
    /// Described by a catalogue row or a config.json: a language model with a KV cache even
    /// when the brief is a media workload.
    pub language_model: bool,
    /// The longest context the model takes as published (config.json's `max_position_embeddings`
    /// without `rope_scaling`, else the catalogue's), where known.
    pub max_context: Option<u64>,
}

impl Architecture {
    /// Only the three numbers every brief can give.
    pub fn bare(num_layers: u32, num_kv_heads: u32, head_dim: u32) -> Self {
        Self {
            num_layers,
            num_attention_heads: None,
            num_kv_heads,
            head_dim,
            hidden_size: None,
            intermediate_size: None,
            vocab_size: None,
            tie_word_embeddings: false,
            mla: None,
            sliding: None,
            chunked: None,
            moe: None,
            attention_layers: num_layers,
            state: None,
            mtp_layers: 0,
            mtp_params: 0.0,
            config_params: None,
            mxfp4_experts: false,
            fp8_checkpoint: false,
            fp8_block: None,
            language_model: false,
            max_context: None,
        }
    }

    /// A catalogue row as it is, for a brief of `params_b` = the row's.
    pub fn from_catalog(m: &ModelSpec) -> Self {
        let window = |tokens: u64, layers: u32| (layers > 0 && tokens > 0).then_some(LayerWindow { tokens, layers });
        Self {
            num_layers: m.num_layers,
            num_attention_heads: Some(m.num_attention_heads),
            num_kv_heads: m.num_kv_heads,
            head_dim: m.head_dim,
            hidden_size: Some(m.hidden_size),
            intermediate_size: Some(m.intermediate_size),
            vocab_size: Some(m.vocab_size),
            tie_word_embeddings: m.tie_word_embeddings,
            mla: (m.attention == Attention::Mla).then_some(Mla {
                kv_lora_rank: m.kv_lora_rank,
                qk_rope_head_dim: m.qk_rope_head_dim,
            }),
            sliding: window(m.sliding_window, m.sliding_layers),
            chunked: window(m.attention_chunk_size, m.chunked_layers),
            moe: (m.num_experts > 0 && m.experts_per_token > 0).then_some(Moe {
                num_experts: m.num_experts,
                experts_per_token: m.experts_per_token,
                expert_params: (m.expert_params_b > 0.0).then_some(m.expert_params_b * 1e9),
            }),
            attention_layers: m.kv_layers(),
            state: m.state_layers(),
            mtp_layers: m.mtp_layers,
            mtp_params: m.mtp_params_b * 1e9,
            config_params: None,
            mxfp4_experts: m.weight_format == WeightFormat::Mxfp4Moe,
            fp8_checkpoint: m.weight_format == WeightFormat::Fp8,
            fp8_block: (m.weight_format == WeightFormat::Fp8).then_some(128),
            language_model: true,
            max_context: (m.max_context > 0).then_some(m.max_context),
        }
    }

    /// Parameters in the input embedding and the output head (once when tied); 0 when the
    /// vocabulary or hidden size is unknown.
    pub fn embedding_params(&self) -> f64 {
        match (self.vocab_size, self.hidden_size) {
            (Some(v), Some(h)) => {
                let one = f64::from(v) * f64::from(h);
                if self.tie_word_embeddings {
                    one
                } else {
                    2.0 * one
                }
            }
            _ => 0.0,
        }
    }

    /// Layers whose KV grows with the context: the attention layers, and the multi-token-
    /// prediction layers when speculative decoding runs them.
    pub fn kv_layers(&self, speculative_decoding: bool) -> u32 {
        self.attention_layers + if speculative_decoding { self.mtp_layers } else { 0 }
    }

    /// Elements one token adds to the cache of one layer: the MLA latent, or K and V of every
    /// KV head.
    pub fn kv_elements_per_layer_token(&self) -> f64 {
        match self.mla {
            Some(m) => f64::from(m.kv_lora_rank) + f64::from(m.qk_rope_head_dim),
            None => 2.0 * f64::from(self.num_kv_heads) * f64::from(self.head_dim),
        }
    }

    /// The MoE facts decode needs: experts, top-k and their parameters all known.
    pub fn moe_with_params(&self) -> Option<(Moe, f64)> {
        self.moe.and_then(|m| m.expert_params.map(|p| (m, p)))
    }
}

/// What `resolve` works from.
#[derive(Debug, Clone)]
pub struct ArchitectureRequest<'a> {
    pub params_b: f64,
    pub precision: Precision,
    pub num_layers: Option<u32>,
    pub num_kv_heads: Option<u32>,
    pub head_dim: Option<u32>,
    pub fields: &'a ArchitectureFields,
    pub model_config: Option<&'a Map<String, Value>>,
    pub catalog: Option<&'a ModelSpec>,
}

/// A field the brief must change, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

/// The architecture, what was noted on the way, and what makes the brief invalid.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub architecture: Architecture,
    pub notes: Vec<String>,
    pub problems: Vec<Problem>,
}

struct Resolver<'a> {
    req: &'a ArchitectureRequest<'a>,
    config: ConfigReading,
    notes: Vec<String>,
    problems: Vec<Problem>,
}

impl Resolver<'_> {
    fn problem(&mut self, field: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            field: field.to_owned(),
            message: message.into(),
        });
    }

    fn catalog_name(&self) -> String {
        self.req.catalog.map(|m| m.hf_id.clone()).unwrap_or_default()
    }

    /// Explicit, else config.json, else catalogue; disagreements are noted.
    fn pick<T: PartialEq + Display + Copy>(
        &mut self,
        name: &str,
        explicit: Option<T>,
        config: Option<T>,
        catalog: Option<T>,
    ) -> Option<T> {
        if let (Some(e), Some(c)) = (explicit, config) {
            if e != c {
                self.notes.push(format!(
                    "{name} {e} as given; config.json says {c}: the brief's value is used"
                ));
            }
        } else if let (Some(e), None, Some(k)) = (explicit, config, catalog) {
            if e != k {
                let row = self.catalog_name();
                self.notes.push(format!(
                    "{name} {e} as given; the catalogue row {row} says {k}: the brief's value is used"
                ));
            }
        }
        if let (None, Some(c), Some(k)) = (explicit, config, catalog) {
            if c != k {
                let row = self.catalog_name();
                self.notes.push(format!(
                    "config.json says {name} {c} but the catalogue row {row} says {k}: config.json is used"
                ));
            }
        }
        explicit.or(config).or(catalog)
    }

    fn required(&mut self, name: &str, config_key: &str, value: Option<u32>, hint: &str) -> u32 {
        if let Some(v) = value {
            return v;
        }
        if self.req.model_config.is_some() {
            self.problem(
                &format!("model_config.{config_key}"),
                format!("is missing from config.json (and its text_config){hint}: give {name}"),
            );
        } else {
            self.problem(name, "is required unless a catalogue model or model_config gives it");
        }
        1
    }
}

/// Resolves the architecture; never fails, but `problems` must be empty for a valid brief. One
/// field at a time, brief over config.json over catalogue, each check where its value is read.
pub fn resolve(req: &ArchitectureRequest<'_>) -> Resolved {
    let mut r = Resolver {
        req,
        config: ConfigReading::default(),
        notes: Vec::new(),
        problems: Vec::new(),
    };
    let config_ok = read_config(&mut r);
    let cat = req.catalog;
    let c = r.config.clone();

    let layers = r.pick("num_layers", req.num_layers, c.num_layers, cat.map(|m| m.num_layers));
    let num_layers = r.required("num_layers", "num_hidden_layers", layers, "");
    let (heads, num_kv_heads, head_dim) = resolve_heads(&mut r);
    let hidden_size = r.pick("hidden_size", None, c.hidden_size, cat.map(|m| m.hidden_size));
    let intermediate_size = c.intermediate_size.or(cat.map(|m| m.intermediate_size));
    let vocab_size = r.pick("vocab_size", None, c.vocab_size, cat.map(|m| m.vocab_size));
    let tie_word_embeddings = tied_embeddings(&mut r, config_ok, vocab_size.is_some());

    if let Some(h) = heads {
        check_head_groups(&mut r, h, num_kv_heads);
    }

    let mla = resolve_mla(&mut r);
    let typed = typed_layers(&mut r, num_layers);
    let (attention_layers, state) = resolve_state(&mut r, num_layers, typed, config_ok);
    let (sliding, chunked) = resolve_windows(&mut r, attention_layers, typed);
    let moe = resolve_moe(&mut r);
    let (mtp_layers, mtp_params, config_params) = resolve_params(&mut r, config_ok);

    let (fp8_checkpoint, mxfp4_experts) = weight_format(&mut r, moe);

    if config_ok {
        let summary = summary(&c);
        r.notes.insert(0, summary);
        let config_notes = c.notes.clone();
        r.notes.splice(1..1, config_notes);
    }

    Resolved {
        architecture: Architecture {
            num_layers,
            num_attention_heads: heads,
            num_kv_heads,
            head_dim,
            hidden_size,
            intermediate_size,
            vocab_size,
            tie_word_embeddings,
            mla,
            sliding,
            chunked,
            moe,
            attention_layers,
            state,
            mtp_layers,
            mtp_params,
            config_params,
            mxfp4_experts,
            fp8_checkpoint,
            // A config says whether its weights are block-scaled; without one, the catalogue row.
            fp8_block: if config_ok && c.quant_method.is_some() {
                c.weight_block.filter(|_| fp8_checkpoint)
            } else {
                cat.filter(|m| fp8_checkpoint && m.weight_format == WeightFormat::Fp8)
                    .map(|_| 128)
            },
            language_model: cat.is_some() || config_ok,
            // A config with rope scaling reaches further by its kind's rule (YaRN, linear …),
            // which is not modelled here: no maximum rather than a wrong one.
            max_context: if config_ok {
                c.max_position_embeddings.filter(|_| !c.rope_scaling)
            } else {
                cat.map(|m| m.max_context).filter(|n| *n > 0)
            },
        },
        notes: r.notes,
        problems: r.problems,
    }
}

/// The attention heads (when known), the KV heads and the head width.
fn resolve_heads(r: &mut Resolver<'_>) -> (Option<u32>, u32, u32) {
    let req = r.req;
    let f = req.fields;
    let cat = req.catalog;
    let heads = r.pick(
        "num_attention_heads",
        f.num_attention_heads,
        r.config.num_attention_heads,
        cat.map(|m| m.num_attention_heads),
    );
    let kv = r.pick(
        "num_kv_heads",
        req.num_kv_heads,
        r.config.num_kv_heads,
        cat.map(|m| m.num_kv_heads),
    );
    let num_kv_heads = r.required("num_kv_heads", "num_key_value_heads", kv, ", as is num_attention_heads");
    let hd = r.pick("head_dim", req.head_dim, r.config.head_dim, cat.map(|m| m.head_dim));
    let head_dim = r.required(
        "head_dim",
        "head_dim",
        hd,
        " and cannot be derived as hidden_size / num_attention_heads",
    );
    (heads, num_kv_heads, head_dim)
}

/// Reads the brief's config.json, its errors becoming the brief's problems; whether it read.
fn read_config(r: &mut Resolver<'_>) -> bool {
    let mut config_ok = false;
    if let Some(map) = r.req.model_config {
        match model_config::read(map) {
            Ok(reading) => {
                config_ok = true;
                r.config = reading;
            }
            Err(errors) => {
                for e in errors {
                    r.problem(&e.path, e.message);
                }
            }
        }
    }
    config_ok
}

/// Whether the embeddings are tied; untied (and said so) when config.json does not say.
fn tied_embeddings(r: &mut Resolver<'_>, config_ok: bool, vocab_known: bool) -> bool {
    match r
        .config
        .tie_word_embeddings
        .or(r.req.catalog.map(|m| m.tie_word_embeddings))
    {
        Some(t) => t,
        None => {
            if config_ok && vocab_known {
                r.notes.push(
                    "config.json does not say whether the embeddings are tied: counted untied (two 16-bit matrices when the weights are quantised)".into(),
                );
            }
            false
        }
    }
}

/// Heads and KV heads must agree (GQA groups heads over KV heads); MLA models list as many KV
/// heads as heads.
fn check_head_groups(r: &mut Resolver<'_>, h: u32, num_kv_heads: u32) {
    let f = r.req.fields;
    let req = r.req;
    if !h.is_multiple_of(num_kv_heads) {
        let msg = format!("{num_kv_heads} KV heads do not divide {h} attention heads");
        if f.num_attention_heads.is_some() || req.num_kv_heads.is_some() {
            let field = if f.num_attention_heads.is_some() {
                "num_attention_heads"
            } else {
                "num_kv_heads"
            };
            r.problem(
                field,
                format!("{msg}: grouped-query attention needs a whole number of heads per KV head"),
            );
        } else {
            r.notes
                .push(format!("{msg}: the model's description contradicts itself"));
        }
    }
}

/// Whether the checkpoint is fp8 and whether its experts are MXFP4, with the notes on both.
fn weight_format(r: &mut Resolver<'_>, moe: Option<Moe>) -> (bool, bool) {
    let quant = r.config.quant_method.clone();
    let cat = r.req.catalog;
    let fp8_checkpoint = matches!(quant.as_deref(), Some("fp8" | "fbgemm_fp8"))
        || (quant.is_none() && cat.is_some_and(|m| m.weight_format == WeightFormat::Fp8));
    let mxfp4 = quant.as_deref() == Some("mxfp4")
        || (quant.is_none() && cat.is_some_and(|m| m.weight_format == WeightFormat::Mxfp4Moe));
    let mxfp4_experts = mxfp4 && moe.is_some_and(|m| m.expert_params.is_some());
    if mxfp4 && !mxfp4_experts {
        r.notes.push(
            "MXFP4 experts but their parameter count is unknown: every weight is sized at the brief's precision".into(),
        );
    }
    quantisation_notes(r, quant.as_deref(), fp8_checkpoint);
    (fp8_checkpoint, mxfp4_experts)
}

fn resolve_mla(r: &mut Resolver<'_>) -> Option<Mla> {
    let f = r.req.fields;
    let cat_mla = r
        .req
        .catalog
        .filter(|m| m.attention == Attention::Mla)
        .map(|m| (m.kv_lora_rank, m.qk_rope_head_dim));
    let config_mla = r.config.mla;
    let rank = r.pick(
        "kv_lora_rank",
        f.kv_lora_rank,
        config_mla.map(|m| m.0),
        cat_mla.map(|m| m.0),
    );
    let rope = r.pick(
        "qk_rope_head_dim",
        f.qk_rope_head_dim,
        config_mla.map(|m| m.1),
        cat_mla.map(|m| m.1),
    );
    match (rank, rope) {
        (Some(kv_lora_rank), Some(qk_rope_head_dim)) => Some(Mla {
            kv_lora_rank,
            qk_rope_head_dim,
        }),
        (Some(_), None) => {
            r.problem("qk_rope_head_dim", "is required with kv_lora_rank (DeepSeek-V2/V3: 64)");
            None
        }
        (None, Some(_)) if f.qk_rope_head_dim.is_some() => {
            r.problem("kv_lora_rank", "is required with qk_rope_head_dim");
            None
        }
        _ => None,
    }
}

/// What the brief's own `layer_types` list says: windowed and state layers per kind.
#[derive(Debug, Clone, Copy, Default)]
struct TypedLayers {
    sliding: u32,
    chunked: u32,
    /// Layers that hold a KV cache (every attention kind).
    attention: u32,
    gdn: u32,
    mamba: u32,
}

/// The brief's `layer_types`, checked: one known name per layer.
fn typed_layers(r: &mut Resolver<'_>, num_layers: u32) -> Option<TypedLayers> {
    let types = r.req.fields.layer_types.as_ref()?;
    if let Some(bad) = types.iter().find(|t| !LAYER_TYPES.contains(&t.as_str())) {
        r.problem(
            "layer_types",
            format!("has {bad:?}: each entry must be one of {}", LAYER_TYPES.join(", ")),
        );
        return None;
    }
    if types.len() != num_layers as usize {
        r.problem(
            "layer_types",
            format!(
                "has {} entries for {num_layers} layers: give one per layer",
                types.len()
            ),
        );
        return None;
    }
    let count = |name: &str| types.iter().filter(|t| t.as_str() == name).count() as u32;
    let gdn = count(model_config::LINEAR_ATTENTION);
    let mamba = count(model_config::MAMBA);
    Some(TypedLayers {
        sliding: count(SLIDING_ATTENTION),
        chunked: count(CHUNKED_ATTENTION),
        attention: types.iter().filter(|t| !is_state_layer(t)).count() as u32,
        gdn,
        mamba,
    })
}

/// Which layers hold a KV cache and which keep a constant state: the brief's `layer_types`,
/// else config.json, else the catalogue. A state layer's dimensions come from config.json or the
/// catalogue row; without them the brief is refused on `layer_types`.
fn resolve_state(
    r: &mut Resolver<'_>,
    num_layers: u32,
    typed: Option<TypedLayers>,
    config_ok: bool,
) -> (u32, Option<StateLayers>) {
    let cat_state = r.req.catalog.and_then(ModelSpec::state_layers);
    let known = r.config.state.or(cat_state);
    if let Some(t) = typed {
        if t.gdn == 0 && t.mamba == 0 {
            if known.is_some() {
                r.notes.push(format!(
                    "layer_types as given has no state layers: all {num_layers} layers are sized as attention, though the model's description has {} state layers",
                    known.map_or(0, |s| s.layers)
                ));
            }
            return (t.attention, None);
        }
        if t.gdn > 0 && t.mamba > 0 {
            r.problem(
                "layer_types",
                "mixes linear_attention and mamba layers, which the sizing does not size together",
            );
            return (num_layers, None);
        }
        let (kind, layers) = if t.gdn > 0 {
            (StateKind::Gdn, t.gdn)
        } else {
            (StateKind::Mamba2, t.mamba)
        };
        return match known.filter(|s| s.kind == kind) {
            Some(s) => (t.attention, Some(StateLayers { layers, ..s })),
            None => {
                r.problem(
                    "layer_types",
                    format!(
                        "lists {layers} {} layers, whose state is sized from the model's config.json: give model_config",
                        if kind == StateKind::Gdn { "linear_attention" } else { "mamba" }
                    ),
                );
                (t.attention, None)
            }
        };
    }
    if config_ok {
        // A config that names no hybrid layout attends on every layer.
        let attention = r.config.attention_layers.unwrap_or(num_layers);
        return (attention.min(num_layers), r.config.state);
    }
    match r.req.catalog {
        // A hybrid row names its attention layers; a plain one attends on every layer, as many
        // as the brief says it has.
        Some(m) if m.attention_layers > 0 => (m.attention_layers.min(num_layers), cat_state),
        _ => (num_layers, None),
    }
}

/// Sliding-window and chunked layers: explicit counts, else explicit `layer_types`, else
/// config.json, else the catalogue; at most the attention layers.
fn resolve_windows(
    r: &mut Resolver<'_>,
    attention_layers: u32,
    typed: Option<TypedLayers>,
) -> (Option<LayerWindow>, Option<LayerWindow>) {
    let f = r.req.fields;
    let cat = r.req.catalog;
    let typed = typed.map(|t| (t.sliding, t.chunked));
    let sliding_kind = WindowKind {
        tokens_field: "sliding_window",
        layers_field: "sliding_window_layers",
        explicit_tokens: f.sliding_window,
        explicit_layers: f.sliding_window_layers,
        typed_layers: typed.map(|t| t.0),
        config: r.config.sliding,
        catalog: cat.and_then(|m| {
            (m.sliding_layers > 0).then_some(LayerWindow {
                tokens: m.sliding_window,
                layers: m.sliding_layers,
            })
        }),
    };
    let chunked_kind = WindowKind {
        tokens_field: "attention_chunk_size",
        layers_field: "chunked_layers",
        explicit_tokens: f.attention_chunk_size,
        explicit_layers: f.chunked_layers,
        typed_layers: typed.map(|t| t.1),
        config: r.config.chunked,
        catalog: cat.and_then(|m| {
            (m.chunked_layers > 0).then_some(LayerWindow {
                tokens: m.attention_chunk_size,
                layers: m.chunked_layers,
            })
        }),
    };
    let sliding = one_window(r, sliding_kind);
    let chunked = one_window(r, chunked_kind);
    let windowed = sliding.map_or(0, |w| w.layers) + chunked.map_or(0, |w| w.layers);
    if windowed > attention_layers {
        let explicit = f.sliding_window_layers.is_some() || f.chunked_layers.is_some();
        let msg = format!("{windowed} windowed layers are more than the model's {attention_layers} attention layers");
        if explicit {
            let field = if f.sliding_window_layers.is_some() {
                "sliding_window_layers"
            } else {
                "chunked_layers"
            };
            r.problem(field, msg);
        } else {
            r.notes.push(format!(
                "{msg}: every layer is sized at full attention (an upper bound)"
            ));
        }
        return (None, None);
    }
    (sliding, chunked)
}

struct WindowKind {
    tokens_field: &'static str,
    layers_field: &'static str,
    explicit_tokens: Option<u64>,
    explicit_layers: Option<u32>,
    typed_layers: Option<u32>,
    config: Option<LayerWindow>,
    catalog: Option<LayerWindow>,
}

fn one_window(r: &mut Resolver<'_>, k: WindowKind) -> Option<LayerWindow> {
    if let (Some(l), Some(t)) = (k.explicit_layers, k.typed_layers) {
        if l != t {
            r.problem(
                k.layers_field,
                format!("says {l} layers but layer_types lists {t}: give one of them"),
            );
        }
    }
    let tokens = r.pick(
        k.tokens_field,
        k.explicit_tokens,
        k.config.map(|w| w.tokens),
        k.catalog.map(|w| w.tokens),
    );
    let explicit_layers = k.explicit_layers.or(k.typed_layers);
    let layers = r.pick(
        k.layers_field,
        explicit_layers,
        k.config.map(|w| w.layers),
        k.catalog.map(|w| w.layers),
    );
    match (tokens, layers) {
        (Some(tokens), Some(layers)) if layers > 0 => Some(LayerWindow { tokens, layers }),
        (Some(_), None) if k.explicit_tokens.is_some() => {
            r.problem(
                k.tokens_field,
                format!(
                    "needs {} or layer_types: how many layers keep only these tokens",
                    k.layers_field
                ),
            );
            None
        }
        (None, Some(layers)) if layers > 0 && explicit_layers.is_some() => {
            let field = if k.explicit_layers.is_some() {
                k.layers_field
            } else {
                "layer_types"
            };
            r.problem(
                field,
                format!("needs {}: how many tokens those layers keep", k.tokens_field),
            );
            None
        }
        _ => None,
    }
}

fn resolve_moe(r: &mut Resolver<'_>) -> Option<Moe> {
    let f = r.req.fields;
    let cat = r.req.catalog.filter(|m| m.num_experts > 0 && m.experts_per_token > 0);
    let e = r.pick(
        "num_experts",
        f.num_experts,
        r.config.moe.map(|m| m.0),
        cat.map(|m| m.num_experts),
    );
    let k = r.pick(
        "experts_per_token",
        f.experts_per_token,
        r.config.moe.map(|m| m.1),
        cat.map(|m| m.experts_per_token),
    );
    let total = r.req.params_b * 1e9;
    if f.active_params_b.is_some_and(|a| a > r.req.params_b) {
        r.problem(
            "active_params_b",
            format!("must be at most params_b ({})", r.req.params_b),
        );
    }
    let (e, k) = match (e, k) {
        (Some(e), Some(k)) if k <= e => (e, k),
        (Some(e), Some(k)) => {
            let field = if f.experts_per_token.is_some() {
                "experts_per_token"
            } else {
                "num_experts"
            };
            r.problem(field, format!("each token cannot use {k} of {e} experts"));
            return None;
        }
        (None, Some(_)) if f.experts_per_token.is_some() => {
            r.problem("experts_per_token", "needs num_experts");
            return None;
        }
        (Some(_), None) if f.num_experts.is_some() => {
            r.problem(
                "num_experts",
                "needs experts_per_token (how many experts each token uses)",
            );
            return None;
        }
        _ => {
            if f.active_params_b.is_some() {
                r.notes.push(
                    "active_params_b counts only with num_experts and experts_per_token: without them decode is bounded as if the model were dense".into(),
                );
            }
            return None;
        }
    };
    let share = f64::from(k) / f64::from(e);
    let expert_params = if let Some(a) = f.active_params_b {
        // active = shared + experts × k/E and total = shared + experts.
        (share < 1.0).then(|| ((total - (a * 1e9).min(total)) / (1.0 - share)).clamp(0.0, total))
    } else if let Some(p) = r.config.expert_params {
        if p > total {
            r.notes.push(format!(
                "config.json's experts hold {:.2}B parameters, more than params_b {}: params_b looks too small",
                p / 1e9,
                r.req.params_b
            ));
        }
        Some(p.min(total))
    } else if let Some(m) = cat.filter(|m| m.expert_params_b > 0.0) {
        Some((total * m.expert_params_b / m.params_b).min(total))
    } else {
        r.notes.push(format!(
            "{e} experts, {k} per token, but their parameters are unknown: give active_params_b for a decode bound that reads only the active experts"
        ));
        None
    };
    Some(Moe {
        num_experts: e,
        experts_per_token: k,
        expert_params,
    })
}

/// Multi-token-prediction layers, what of their parameters the weights add, and the config's
/// parameter count when `params_b` disagrees with it by more than 5 % (sizing.md "MoE
/// parameters"). A `params_b` within 5 % of the model without its MTP layers gets them added; one
/// within 5 % of the model with them already has them.
fn resolve_params(r: &mut Resolver<'_>, config_ok: bool) -> (u32, f64, Option<f64>) {
    let given_b = r.req.params_b;
    let given = given_b * 1e9;
    let Some(count) = r.config.params.filter(|_| config_ok) else {
        return match r.req.catalog {
            Some(m) if !config_ok => (m.mtp_layers, m.mtp_params_b * 1e9, None),
            _ => {
                let layers = r.config.mtp_layers.unwrap_or(0);
                if layers > 0 {
                    r.notes.push(format!(
                        "config.json has {layers} multi-token-prediction layer(s) but not every shape their parameters are counted from: their weights are left out"
                    ));
                }
                (layers, 0.0, None)
            }
        };
    };
    let layers = r.config.mtp_layers.unwrap_or(0);
    let close = |a: f64, b: f64| b > 0.0 && (a / b - 1.0).abs() <= 0.05;
    let billions = |x: f64| format!("{:.2}B", x / 1e9);
    let mtp_note = |mtp: f64| {
        format!(
            "{layers} multi-token-prediction layer(s) add {} parameters to the weights (they ship in the checkpoint)",
            billions(mtp)
        )
    };
    if close(given, count.main) {
        if layers > 0 {
            r.notes.push(mtp_note(count.mtp));
        }
        return (layers, count.mtp, None);
    }
    if count.mtp > 0.0 && close(given, count.main + count.mtp) {
        r.notes.push(format!(
            "params_b {given_b} includes the {} parameters of the {layers} multi-token-prediction layer(s) config.json describes",
            billions(count.mtp)
        ));
        return (layers, 0.0, None);
    }
    if r.config.multimodal && given > count.main {
        r.notes.push(format!(
            "params_b {given_b} is {} more than the language model config.json describes ({}): the difference is taken as its vision or audio encoder",
            billions(given - count.main),
            billions(count.main)
        ));
        if layers > 0 {
            r.notes.push(mtp_note(count.mtp));
        }
        return (layers, count.mtp, None);
    }
    r.notes.push(format!(
        "params_b {given_b} disagrees by more than 5 % with the {} parameters config.json's shapes give{}: the config's count is used for the weights",
        billions(count.main),
        if layers > 0 {
            format!(" (and {} in its multi-token-prediction layers)", billions(count.mtp))
        } else {
            String::new()
        }
    ));
    (layers, count.mtp, Some(count.main))
}

fn quantisation_notes(r: &mut Resolver<'_>, quant: Option<&str>, fp8_checkpoint: bool) {
    let p = r.req.precision;
    if fp8_checkpoint && matches!(p, Precision::Bf16 | Precision::Fp16 | Precision::Fp32) {
        r.notes.push(format!(
            "the published weights are fp8; sizing at {} needs a {}-bit copy of them (or set precision fp8)",
            p.as_str(),
            if p == Precision::Fp32 { 32 } else { 16 }
        ));
    }
    match quant {
        Some("awq" | "gptq" | "awq_marlin" | "gptq_marlin") if p != Precision::Int4 => r.notes.push(format!(
            "config.json describes a 4-bit {} checkpoint but the brief says {}",
            quant.unwrap_or_default(),
            p.as_str()
        )),
        Some(m)
            if !matches!(
                m,
                "fp8" | "fbgemm_fp8" | "mxfp4" | "awq" | "gptq" | "awq_marlin" | "gptq_marlin"
            ) =>
        {
            r.notes.push(format!(
                "config.json describes a quantised checkpoint ({m}); check that the brief's precision ({}) matches it",
                p.as_str()
            ))
        }
        _ => {}
    }
}

/// One line saying what config.json gave.
fn summary(c: &ConfigReading) -> String {
    let mut parts = Vec::new();
    let mut push = |label: &str, v: Option<String>| {
        if let Some(v) = v {
            parts.push(format!("{v} {label}"));
        }
    };
    push("layers", c.num_layers.map(|v| v.to_string()));
    push("attention heads", c.num_attention_heads.map(|v| v.to_string()));
    push("KV heads", c.num_kv_heads.map(|v| v.to_string()));
    let mut s = format!(
        "config.json{}: {}",
        c.model_type.as_deref().map(|t| format!(" ({t})")).unwrap_or_default(),
        parts.join(", ")
    );
    if let Some(d) = c.head_dim {
        s.push_str(&format!(", head_dim {d}"));
    }
    if let Some((rank, rope)) = c.mla {
        s.push_str(&format!(
            ", multi-head latent attention caching {rank} + {rope} = {} elements per layer and token",
            rank + rope
        ));
    }
    if let Some(w) = c.sliding {
        s.push_str(&format!(", a {}-token sliding window on {} layers", w.tokens, w.layers));
    }
    if let Some(w) = c.chunked {
        s.push_str(&format!(
            ", {}-token chunked attention on {} layers",
            w.tokens, w.layers
        ));
    }
    if let (Some(state), Some(attention)) = (c.state, c.attention_layers) {
        s.push_str(&format!(
            ", {attention} attention layers and {} {} layers keeping a constant state",
            state.layers,
            state.kind.label()
        ));
    }
    if let Some((e, k)) = c.moe {
        s.push_str(&format!(", {e} experts with {k} per token"));
        if let (Some(p), Some(layers), Some(m)) = (c.expert_params, c.moe_layers, c.expert_matrices) {
            s.push_str(&format!(
                " on {layers} layers ({:.2}B expert parameters, {m} matrices each)",
                p / 1e9
            ));
        }
    }
    if let Some(n) = c.mtp_layers {
        s.push_str(&format!(", {n} multi-token-prediction layer(s)"));
    }
    if let Some(v) = c.vocab_size {
        s.push_str(&format!(", vocabulary {v}"));
    }
    if let Some(q) = &c.quant_method {
        s.push_str(&format!(", {q} weights"));
    }
    s
}
