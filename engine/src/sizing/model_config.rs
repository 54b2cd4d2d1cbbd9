//! Reads a Hugging Face `config.json` into the facts the memory formula needs.
//!
//! Hybrid models name which layers attend and which keep a constant state: `layer_types`
//! (`linear_attention`, `mamba`), `full_attention_interval` (Qwen3-Next, Qwen3.5: every n-th layer
//! attends), `hybrid_override_pattern` (Nemotron-H: `M` Mamba-2, `*` attention, `E` mixture of
//! experts, `-` MLP) and `layers_block_type` (`mamba` / `attention`). Only the attention layers
//! hold a KV cache; the state layers' dimensions are read for [`StateLayers`]. The shapes also
//! give a parameter count ([`ParamCount`]): experts only on the layers that have them, two
//! matrices for non-gated (`relu2`) experts and three for gated ones, multi-token-prediction
//! layers (`num_nextn_predict_layers`, `mtp_num_hidden_layers`) apart.
//!
//! Multimodal configs nest the language model under `text_config` (Gemma 3, Llama 4),
//! `language_config` or `llm_config`; a key is looked up there first, then at the top level
//! (where `quantization_config` and `architectures` live). Values of the wrong type or out of
//! range are errors naming their path (`model_config.text_config.num_hidden_layers`); keys the
//! reader does not use are ignored. What it cannot place — which layers use a window, cache
//! kinds it does not model — goes into `notes` and is sized as full attention, an upper bound,
//! never a silent guess.
//!
//! Where a config omits a key, the default of the transformers config class of its
//! `model_type` applies, and the notes say so: Gemma 3's published configs, for instance, name
//! neither the layer pattern nor the vocabulary (`Gemma3TextConfig`: every 6th layer global,
//! 262208 tokens, tied embeddings), and Llama 4's leave `no_rope_layers` empty
//! (`Llama4TextConfig`: every 4th layer global, the rest chunked). Hand-written because no
//! crate reads these layouts; `serde_json` does the parsing.

use serde_json::{Map, Value};

use super::state::{StateKind, StateLayers};

/// Keys under which multimodal configs nest their language model.
pub const LANGUAGE_MODEL_KEYS: [&str; 3] = ["text_config", "language_config", "llm_config"];

/// Keys of cache layouts this reader does not model (Jamba's Mamba-1 layers, KV shared across
/// layers, a sparse-attention indexer), with what they are.
const UNMODELLED: [(&str, &str); 3] = [
    (
        "attn_layer_period",
        "attention on only some layers with Mamba-1 between (Jamba-style)",
    ),
    ("num_kv_shared_layers", "KV caches shared across layers"),
    ("index_topk", "a sparse-attention indexer with its own small cache"),
];

/// Layer-type names in `layer_types` (transformers' spelling) the reader models.
pub const FULL_ATTENTION: &str = "full_attention";
pub const SLIDING_ATTENTION: &str = "sliding_attention";
pub const CHUNKED_ATTENTION: &str = "chunked_attention";
/// Granite-H and other hybrids spell full attention this way.
pub const ATTENTION: &str = "attention";
/// Gated DeltaNet (Qwen3-Next, Qwen3.5): a constant state per sequence.
pub const LINEAR_ATTENTION: &str = "linear_attention";
/// Mamba-2: a constant state per sequence.
pub const MAMBA: &str = "mamba";
pub const LAYER_TYPES: [&str; 6] = [
    FULL_ATTENTION,
    SLIDING_ATTENTION,
    CHUNKED_ATTENTION,
    ATTENTION,
    LINEAR_ATTENTION,
    MAMBA,
];

/// Whether a `layer_types` entry keeps a state rather than a KV cache.
pub fn is_state_layer(name: &str) -> bool {
    matches!(name, LINEAR_ATTENTION | MAMBA)
}

/// Bounds: generous for any released model, tight enough that the arithmetic stays finite.
pub const MAX_LAYERS: u64 = 1_000;
pub const MAX_HEADS: u64 = 1_024;
pub const MAX_HEAD_DIM: u64 = 4_096;
pub const MAX_WIDTH: u64 = 1 << 20;
pub const MAX_VOCAB: u64 = 10_000_000;
pub const MAX_EXPERTS: u64 = 4_096;
pub const MAX_TOKENS: u64 = 100_000_000;

/// Some layers attend only to a bounded span of tokens (a sliding window or a chunk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerWindow {
    /// Tokens each of those layers keeps per sequence at most.
    pub tokens: u64,
    /// How many layers.
    pub layers: u32,
}

/// Parameters the config's shapes give, in units: the model itself and its multi-token-prediction
/// layers (which ship in the checkpoint beside it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ParamCount {
    pub main: f64,
    pub mtp: f64,
}

/// The facts read from one config.json; `None` where the config does not say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigReading {
    pub model_type: Option<String>,
    pub num_layers: Option<u32>,
    pub num_attention_heads: Option<u32>,
    pub num_kv_heads: Option<u32>,
    pub head_dim: Option<u32>,
    pub hidden_size: Option<u32>,
    /// The MLP width: one expert's for MoE models.
    pub intermediate_size: Option<u32>,
    pub vocab_size: Option<u32>,
    pub tie_word_embeddings: Option<bool>,
    pub max_position_embeddings: Option<u64>,
    /// `rope_scaling` is set: the positions reach past `max_position_embeddings` by a rule of the
    /// scaling's kind.
    pub rope_scaling: bool,
    /// Multi-head latent attention: (kv_lora_rank, qk_rope_head_dim).
    pub mla: Option<(u32, u32)>,
    pub sliding: Option<LayerWindow>,
    pub chunked: Option<LayerWindow>,
    /// (routed experts, experts per token).
    pub moe: Option<(u32, u32)>,
    /// Parameters in routed experts (units), from the shapes.
    pub expert_params: Option<f64>,
    /// Layers whose routed experts were counted.
    pub moe_layers: Option<u32>,
    /// Matrices per expert: 3 for gated activations (SwiGLU), 2 for non-gated ones (`relu2`).
    pub expert_matrices: Option<u32>,
    /// Layers holding a KV cache, when the config names a hybrid layout (else every layer).
    pub attention_layers: Option<u32>,
    /// The constant-state layers of a hybrid model.
    pub state: Option<StateLayers>,
    /// Multi-token-prediction layers (`num_nextn_predict_layers`, `mtp_num_hidden_layers`).
    pub mtp_layers: Option<u32>,
    /// Parameters from the shapes, when every shape the count needs is given.
    pub params: Option<ParamCount>,
    /// The config describes encoders beside the language model (`vision_config`, `audio_config`),
    /// which its parameter count leaves out.
    pub multimodal: bool,
    /// `quantization_config.quant_method`, lower-cased.
    pub quant_method: Option<String>,
    /// `quantization_config.weight_block_size` ([block_n, block_k]): the widest, which a
    /// tensor-parallel shard of a weight must be a multiple of. `None`: not block-scaled.
    pub weight_block: Option<u32>,
    /// What could not be read or placed, and defaults that were applied.
    pub notes: Vec<String>,
}

/// A value of the wrong type or out of range, at `path` (e.g. `model_config.text_config.x`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

/// The transformers default for `key` in configs of `model_type`, where the reader relies on it.
fn model_type_default(model_type: &str, key: &str) -> Option<u64> {
    let v = match (model_type, key) {
        // transformers `Gemma3TextConfig`.
        ("gemma3" | "gemma3_text", "num_attention_heads") => 8,
        ("gemma3" | "gemma3_text", "num_key_value_heads") => 4,
        ("gemma3" | "gemma3_text", "head_dim") => 256,
        ("gemma3" | "gemma3_text", "vocab_size") => 262_208,
        ("gemma3" | "gemma3_text", "sliding_window") => 4_096,
        ("gemma3" | "gemma3_text", "sliding_window_pattern") => 6,
        ("gemma3" | "gemma3_text", "max_position_embeddings") => 131_072,
        // transformers `Gemma2Config`.
        ("gemma2", "vocab_size") => 256_000,
        ("gemma2", "head_dim") => 256,
        // transformers `Cohere2Config`.
        ("cohere2", "sliding_window_pattern") => 4,
        // transformers `Llama4TextConfig`.
        ("llama4" | "llama4_text", "no_rope_layer_interval") => 4,
        // transformers `DeepseekV2Config` / `DeepseekV3Config`.
        ("deepseek_v2" | "deepseek_v3", "qk_rope_head_dim") => 64,
        // transformers `Qwen3NextConfig` / `Qwen3_5TextConfig`: every 4th layer attends.
        ("qwen3_next" | "qwen3_5" | "qwen3_5_text" | "qwen3_5_moe" | "qwen3_5_moe_text", "full_attention_interval") => {
            4
        }
        _ => return None,
    };
    Some(v)
}

/// Whether the transformers config class of `model_type` ties embeddings when the key is absent.
fn ties_by_default(model_type: &str) -> Option<bool> {
    match model_type {
        "gemma" | "gemma2" | "gemma3" | "gemma3_text" => Some(true),
        "llama4" | "llama4_text" => Some(false),
        _ => None,
    }
}

struct Reader<'a> {
    root: &'a Map<String, Value>,
    /// The nested language model and its key, if any.
    lm: Option<(&'static str, &'a Map<String, Value>)>,
    model_type: Option<String>,
    errors: Vec<ConfigError>,
    defaults_used: Vec<String>,
}

impl<'a> Reader<'a> {
    /// The value of `key` (language model first, then top level) and its path; null is absent.
    fn get(&self, key: &str) -> Option<(&'a Value, String)> {
        if let Some((name, lm)) = self.lm {
            match lm.get(key) {
                Some(Value::Null) => return None,
                Some(v) => return Some((v, format!("model_config.{name}.{key}"))),
                None => {}
            }
        }
        match self.root.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some((v, format!("model_config.{key}"))),
        }
    }

    fn fail(&mut self, path: String, message: impl Into<String>) {
        self.errors.push(ConfigError {
            path,
            message: message.into(),
        });
    }

    /// A whole number in `min..=max` (`8192.0` counts as whole).
    fn whole(&mut self, key: &str, min: u64, max: u64) -> Option<u64> {
        let (v, path) = self.get(key)?;
        let n = match v {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= max as f64)
                    .map(|f| f as u64)
            }),
            _ => None,
        };
        match n {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.fail(path, format!("must be a whole number from {min} to {max}"));
                None
            }
        }
    }

    fn positive(&mut self, key: &str, max: u64) -> Option<u32> {
        self.whole(key, 1, max).and_then(|n| u32::try_from(n).ok())
    }

    /// Like `positive`, falling back to the model type's transformers default (noted).
    fn positive_or_default(&mut self, key: &str, max: u64) -> Option<u32> {
        if self.get(key).is_some() {
            return self.positive(key, max);
        }
        let d = self.default(key)?;
        u32::try_from(d).ok()
    }

    fn default(&mut self, key: &str) -> Option<u64> {
        let v = model_type_default(self.model_type.as_deref()?, key)?;
        self.defaults_used.push(format!("{key} {v}"));
        Some(v)
    }

    fn boolean(&mut self, key: &str) -> Option<bool> {
        let (v, path) = self.get(key)?;
        match v {
            Value::Bool(b) => Some(*b),
            _ => {
                self.fail(path, "must be true or false");
                None
            }
        }
    }

    fn text(&mut self, key: &str) -> Option<String> {
        let (v, path) = self.get(key)?;
        match v {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.fail(path, "must be a string");
                None
            }
        }
    }

    fn strings(&mut self, key: &str) -> Option<Vec<String>> {
        let (v, path) = self.get(key)?;
        let items = v.as_array().and_then(|a| {
            a.iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        });
        if items.is_none() {
            self.fail(path, "must be a list of strings");
        }
        items
    }

    fn numbers(&mut self, key: &str) -> Option<Vec<u64>> {
        let (v, path) = self.get(key)?;
        let items = v
            .as_array()
            .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<_>>>());
        if items.is_none() {
            self.fail(path, "must be a list of whole numbers");
        }
        items
    }
}

/// Reads `config`; every value of the wrong type is an error. One read per config.json key, in
/// the order the reading is documented.
pub fn read(config: &Map<String, Value>) -> Result<ConfigReading, Vec<ConfigError>> {
    let mut r = Reader {
        root: config,
        lm: None,
        model_type: None,
        errors: Vec::new(),
        defaults_used: Vec::new(),
    };
    find_language_model(&mut r, config);
    let mut out = ConfigReading {
        model_type: r.text("model_type"),
        ..ConfigReading::default()
    };
    r.model_type = out.model_type.clone();
    let model_type = out.model_type.clone().unwrap_or_default();

    out.num_layers = r.positive("num_hidden_layers", MAX_LAYERS);
    out.num_attention_heads = r.positive_or_default("num_attention_heads", MAX_HEADS);
    out.hidden_size = r.positive("hidden_size", MAX_WIDTH);
    out.vocab_size = r.positive_or_default("vocab_size", MAX_VOCAB);
    out.max_position_embeddings = if r.get("max_position_embeddings").is_some() {
        r.whole("max_position_embeddings", 1, MAX_TOKENS)
    } else {
        r.default("max_position_embeddings")
    };
    // `rope_parameters` is where newer transformers configs write it (`rope_type` default: none).
    out.rope_scaling = r.get("rope_scaling").is_some_and(|(v, _)| v.is_object())
        || r.get("rope_parameters").is_some_and(|(v, _)| {
            v.get("rope_type")
                .and_then(Value::as_str)
                .is_some_and(|t| t != "default")
        });
    out.tie_word_embeddings = r
        .boolean("tie_word_embeddings")
        .or_else(|| ties_by_default(&model_type));

    read_heads(&mut r, &mut out);

    let layout = read_layout(&mut r, &mut out);
    let moe_layers = read_moe(&mut r, &mut out, layout.as_ref());
    read_windows(&mut r, &mut out, &model_type);
    read_state(&mut r, &mut out, layout.as_ref());
    out.mtp_layers = ["num_nextn_predict_layers", "mtp_num_hidden_layers", "mtp_num_layers"]
        .into_iter()
        .find(|k| r.get(k).is_some())
        .and_then(|k| r.whole(k, 0, MAX_LAYERS))
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0);
    out.params = count_params(&mut r, &out, layout.as_ref(), moe_layers.as_deref());
    out.multimodal = ["vision_config", "audio_config", "vision_tower"]
        .into_iter()
        .any(|k| config.get(k).is_some_and(|v| !v.is_null()));

    read_quantization(&mut r, &mut out);
    closing_notes(&r, &mut out, &model_type);
    if r.errors.is_empty() {
        Ok(out)
    } else {
        Err(r.errors)
    }
}

/// The nested language model's config (`text_config`, …), if the config has one: its keys are read
/// before the top level's.
fn find_language_model<'a>(r: &mut Reader<'a>, config: &'a Map<String, Value>) {
    for key in LANGUAGE_MODEL_KEYS {
        match config.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Object(lm)) => {
                r.lm = Some((key, lm));
                break;
            }
            Some(_) => r.fail(
                format!("model_config.{key}"),
                "must be an object (the language model's config)",
            ),
        }
    }
}

/// The attention's shape: the latent cache of multi-head latent attention, the KV heads and the
/// head width.
fn read_heads(r: &mut Reader<'_>, out: &mut ConfigReading) {
    // Multi-head latent attention: one compressed latent (+ its RoPE key) per token and layer.
    if let Some(rank) = r.positive("kv_lora_rank", MAX_WIDTH) {
        let rope = r.positive_or_default("qk_rope_head_dim", MAX_HEAD_DIM);
        match rope {
            Some(rope) => out.mla = Some((rank, rope)),
            None => out.notes.push(
                "config.json has kv_lora_rank but no qk_rope_head_dim: give qk_rope_head_dim to size the latent cache"
                    .into(),
            ),
        }
    }

    // The flag first, as vLLM reads it: a first Falcon's config repeats its 71 heads as KV heads.
    out.num_kv_heads = match r.get("num_key_value_heads") {
        _ if multi_query(r) => Some(1),
        Some(_) => r.positive("num_key_value_heads", MAX_HEADS),
        // Falcon (`num_kv_heads`, `n_head_kv` in its older configs) and ChatGLM
        // (`multi_query_group_num`) name their KV heads otherwise; vLLM reads these keys too.
        None if KV_HEAD_KEYS.iter().any(|k| r.get(k).is_some()) => first_positive(r, &KV_HEAD_KEYS, MAX_HEADS),
        None => match r.default("num_key_value_heads") {
            Some(d) => u32::try_from(d).ok(),
            None if out.mla.is_none() => {
                // transformers' own fallback: without the key, every attention head has its own
                // K and V (multi-head attention).
                if out.num_attention_heads.is_some() {
                    out.notes.push(
                        "config.json has no num_key_value_heads: one KV head per attention head (multi-head attention, the transformers default)".into(),
                    );
                }
                out.num_attention_heads
            }
            None => out.num_attention_heads,
        },
    };

    let explicit_head_dim = r.positive_or_default("head_dim", MAX_HEAD_DIM);
    let nope = r.positive("qk_nope_head_dim", MAX_HEAD_DIM);
    out.head_dim = explicit_head_dim
        .or_else(|| out.mla.zip(nope).map(|((_, rope), nope)| rope + nope))
        .or_else(|| match (out.hidden_size, out.num_attention_heads) {
            (Some(h), Some(n)) if h % n == 0 => Some(h / n),
            _ => None,
        });
}

/// Other names of `num_key_value_heads`, in the order vLLM reads them.
const KV_HEAD_KEYS: [&str; 3] = ["n_head_kv", "num_kv_heads", "multi_query_group_num"];

/// Multi-query attention named by a flag, one KV head for every query head: GPT-BigCode
/// (`multi_query`) and the first Falcons (`multi_query` without `new_decoder_architecture`, which
/// later Falcons set to use `num_kv_heads`), as vLLM's `get_total_num_kv_heads` reads them.
fn multi_query(r: &mut Reader<'_>) -> bool {
    r.boolean("multi_query") == Some(true) && r.boolean("new_decoder_architecture") != Some(true)
}

/// The published weights' format (fp8 checkpoints, MXFP4 experts, AWQ/GPTQ …).
fn read_quantization(r: &mut Reader<'_>, out: &mut ConfigReading) {
    if let Some((Value::Object(q), _)) = r.get("quantization_config") {
        match q.get("quant_method") {
            Some(Value::String(m)) => out.quant_method = Some(m.to_ascii_lowercase()),
            None | Some(Value::Null) => {}
            Some(_) => r.fail(
                "model_config.quantization_config.quant_method".into(),
                "must be a string",
            ),
        }
        out.weight_block = q
            .get("weight_block_size")
            .and_then(Value::as_array)
            .and_then(|dims| {
                dims.iter()
                    .map(|d| d.as_u64().filter(|n| *n > 0))
                    .collect::<Option<Vec<u64>>>()
            })
            .and_then(|dims| dims.into_iter().max())
            .and_then(|n| u32::try_from(n).ok());
    } else if let Some((_, path)) = r.get("quantization_config") {
        r.fail(path, "must be an object");
    }
}

/// The notes on what the reading leaves out: cache layouts it does not model, defaults it used.
fn closing_notes(r: &Reader<'_>, out: &mut ConfigReading, model_type: &str) {
    for (key, what) in UNMODELLED {
        if r.get(key).is_some() {
            out.notes.push(format!(
                "config.json has {key} ({what}), a cache layout this reader does not model: the KV cache is sized as if every layer kept full attention (an upper bound)"
            ));
        }
    }
    if !r.defaults_used.is_empty() {
        out.notes.push(format!(
            "config.json omits {}; the transformers defaults for model_type {model_type} apply",
            r.defaults_used.join(", ")
        ));
    }
}

/// What mixes tokens in one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mixer {
    Attention,
    Gdn,
    Mamba,
    /// A feed-forward-only layer of a hybrid pattern (Nemotron-H `E` and `-`).
    None,
}

/// The feed-forward block of one layer, where a hybrid pattern says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ffn {
    Dense,
    Moe,
    None,
}

/// A hybrid model's per-layer layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub mixers: Vec<Mixer>,
    /// Nemotron-H's pattern names the feed-forward block of each layer too.
    pub ffn: Option<Vec<Ffn>>,
}

impl Layout {
    fn count(&self, m: Mixer) -> u32 {
        self.mixers.iter().filter(|x| **x == m).count() as u32
    }
}

/// The hybrid layout, if the config names one (`None` for a model that attends on every layer):
/// one arm per way a config names it.
fn read_layout(r: &mut Reader<'_>, out: &mut ConfigReading) -> Option<Layout> {
    let layers = out.num_layers? as usize;
    let mismatch = |out: &mut ConfigReading, key: &str, n: usize| {
        out.notes.push(format!(
            "config.json's {key} has {n} entries for {layers} layers: it contradicts itself, so every layer is sized at full attention (an upper bound)"
        ));
    };
    if let Some((v, path)) = r.get("hybrid_override_pattern") {
        let Some(pattern) = v.as_str() else {
            r.fail(path, "must be a string of layer letters (M, *, E, -)");
            return None;
        };
        if pattern.chars().count() != layers {
            mismatch(out, "hybrid_override_pattern", pattern.chars().count());
            return None;
        }
        return pattern_layout(out, pattern, layers);
    }
    let named = |r: &mut Reader<'_>, key: &str| -> Option<Vec<String>> {
        r.get(key).is_some().then(|| r.strings(key)).flatten()
    };
    if let Some(types) = named(r, "layers_block_type") {
        if types.len() != layers {
            mismatch(out, "layers_block_type", types.len());
            return None;
        }
        let mut mixers = Vec::with_capacity(layers);
        for t in &types {
            mixers.push(match t.as_str() {
                "attention" => Mixer::Attention,
                "mamba" => Mixer::Mamba,
                other => {
                    out.notes.push(format!(
                        "config.json's layers_block_type has {other:?} layers, which this reader does not model: every layer is sized at full attention (an upper bound)"
                    ));
                    return None;
                }
            });
        }
        return Some(Layout { mixers, ffn: None });
    }
    if let Some((Value::Array(types), _)) = r.get("layer_types") {
        // Windows and unknown names are read (and noted) by `read_windows`; here only whether
        // some layers keep a state.
        let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
        if names.len() != layers || !names.iter().any(|t| is_state_layer(t)) {
            return None;
        }
        let mixers = names
            .iter()
            .map(|t| match *t {
                LINEAR_ATTENTION => Mixer::Gdn,
                MAMBA => Mixer::Mamba,
                _ => Mixer::Attention,
            })
            .collect();
        return Some(Layout { mixers, ffn: None });
    }
    interval_layout(r, out, layers)
}

/// The layers of a Nemotron-H `hybrid_override_pattern`, one letter per layer.
fn pattern_layout(out: &mut ConfigReading, pattern: &str, layers: usize) -> Option<Layout> {
    let mut mixers = Vec::with_capacity(layers);
    let mut ffn = Vec::with_capacity(layers);
    for c in pattern.chars() {
        let (m, f) = match c {
            'M' => (Mixer::Mamba, Ffn::None),
            '*' => (Mixer::Attention, Ffn::None),
            'E' => (Mixer::None, Ffn::Moe),
            '-' => (Mixer::None, Ffn::Dense),
            other => {
                out.notes.push(format!(
                    "config.json's hybrid_override_pattern has the layer letter {other:?}, which this reader does not know (M Mamba-2, * attention, E experts, - MLP): every layer is sized at full attention (an upper bound)"
                ));
                return None;
            }
        };
        mixers.push(m);
        ffn.push(f);
    }
    Some(Layout { mixers, ffn: Some(ffn) })
}

/// Qwen3-Next / Qwen3.5 layers without `layer_types`: full attention every
/// `full_attention_interval`-th layer, Gated DeltaNet between.
fn interval_layout(r: &mut Reader<'_>, out: &mut ConfigReading, layers: usize) -> Option<Layout> {
    let linear = r.get("linear_num_value_heads").is_some() || r.get("linear_conv_kernel_dim").is_some();
    let interval = if r.get("full_attention_interval").is_some() {
        r.whole("full_attention_interval", 1, MAX_LAYERS)
    } else if linear {
        let default = r.default("full_attention_interval");
        if default.is_none() {
            out.notes.push(
                "config.json has linear-attention dimensions but says neither layer_types nor full_attention_interval: every layer is sized at full attention (an upper bound); give layer_types".into(),
            );
        }
        default
    } else {
        None
    }?;
    // transformers Qwen3Next / Qwen3.5: layer i attends when (i + 1) is a multiple of the interval.
    let mixers = (0..layers as u64)
        .map(|i| {
            if (i + 1).is_multiple_of(interval) {
                Mixer::Attention
            } else {
                Mixer::Gdn
            }
        })
        .collect();
    Some(Layout { mixers, ffn: None })
}

/// An element type named in a config (`float32`, `bfloat16` …) in bytes; `None` for `auto`.
fn dtype_bytes(name: &str) -> Result<Option<f64>, ()> {
    match name.to_ascii_lowercase().trim_start_matches("torch.") {
        "float32" | "fp32" | "float" => Ok(Some(4.0)),
        "bfloat16" | "bf16" | "float16" | "fp16" | "half" => Ok(Some(2.0)),
        "auto" => Ok(None),
        _ => Err(()),
    }
}

/// The first of `keys` the config has, as a positive whole number.
fn first_positive(r: &mut Reader<'_>, keys: &[&str], max: u64) -> Option<u32> {
    let key = keys.iter().find(|k| r.get(k).is_some())?;
    r.positive(key, max)
}

/// The state layers' dimensions, and how many layers attend.
fn read_state(r: &mut Reader<'_>, out: &mut ConfigReading, layout: Option<&Layout>) {
    let Some(layout) = layout else { return };
    let gdn = layout.count(Mixer::Gdn);
    let mamba = layout.count(Mixer::Mamba);
    let attention = layout.count(Mixer::Attention);
    let layers = out.num_layers.unwrap_or(0);
    if gdn > 0 && mamba > 0 {
        out.notes.push(format!(
            "config.json mixes {gdn} Gated DeltaNet and {mamba} Mamba layers, which this reader does not size together: every layer is sized at full attention (an upper bound)"
        ));
        return;
    }
    if gdn == 0 && mamba == 0 {
        out.attention_layers = Some(attention);
        return;
    }
    let (kind, count) = if gdn > 0 {
        (StateKind::Gdn, gdn)
    } else {
        (StateKind::Mamba2, mamba)
    };
    let dims = state_dims(r, out, kind);
    let Some(((((heads, groups), head_dim), state_size), conv_kernel)) = dims else {
        let what = match kind {
            StateKind::Gdn => "linear_num_value_heads, linear_num_key_heads, linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim",
            _ => "mamba_num_heads, mamba_head_dim, n_groups, ssm_state_size, conv_kernel",
        };
        out.notes.push(format!(
            "config.json has {count} {} layers but not all of their state dimensions ({what}): they are sized as full-attention layers (an upper bound) until it gives them",
            kind.label()
        ));
        out.attention_layers = Some(layers);
        return;
    };
    let ssm_bytes = state_bytes(r, out, kind);
    out.attention_layers = Some(attention);
    out.state = Some(StateLayers {
        kind,
        layers: count,
        heads,
        groups,
        head_dim,
        state_size,
        conv_kernel,
        ssm_bytes,
    });
}

/// ((((heads, groups), head width), state size), convolution kernel), nested as `zip` nests them.
type StateDims = ((((u32, u32), u32), u32), u32);

/// Heads, groups, head width, state size and convolution kernel of the state layers, one arm per
/// state-layer family (Gated DeltaNet, Mamba-2), each reading its own keys.
fn state_dims(r: &mut Reader<'_>, out: &ConfigReading, kind: StateKind) -> Option<StateDims> {
    match kind {
        StateKind::Gdn => {
            let heads = first_positive(r, &["linear_num_value_heads"], MAX_HEADS);
            let groups = first_positive(r, &["linear_num_key_heads"], MAX_HEADS);
            let head_dim = first_positive(r, &["linear_key_head_dim"], MAX_HEAD_DIM);
            let size = first_positive(r, &["linear_value_head_dim"], MAX_HEAD_DIM);
            let conv = first_positive(r, &["linear_conv_kernel_dim"], 64);
            heads.zip(groups).zip(head_dim).zip(size).zip(conv)
        }
        StateKind::Mamba2 | StateKind::None => {
            let head_dim = first_positive(r, &["mamba_head_dim", "mamba_d_head", "mamba_headdim"], MAX_HEAD_DIM);
            let heads =
                first_positive(r, &["mamba_num_heads", "mamba_n_heads", "n_mamba_heads"], MAX_WIDTH).or_else(|| {
                    // Mamba-2's inner width is `expand × hidden_size`, cut into heads of `head_dim`.
                    let expand = first_positive(r, &["expand", "mamba_expand"], 64)?;
                    let inner = expand.checked_mul(out.hidden_size?)?;
                    head_dim.filter(|d| inner.is_multiple_of(*d)).map(|d| inner / d)
                });
            let groups = first_positive(r, &["n_groups", "mamba_n_groups", "mamba_ngroups"], MAX_HEADS);
            let size = first_positive(r, &["ssm_state_size", "mamba_d_state", "state_size"], MAX_WIDTH);
            let conv = first_positive(r, &["conv_kernel", "mamba_d_conv", "mamba_conv_kernel"], 64);
            heads.zip(groups).zip(head_dim).zip(size).zip(conv)
        }
    }
}

/// The bytes per value of the recurrent state.
fn state_bytes(r: &mut Reader<'_>, out: &mut ConfigReading, kind: StateKind) -> Option<f64> {
    // The recurrent state's own dtype: Gated DeltaNet keeps it in float32 unless the config
    // says otherwise; Mamba-2 in the model's dtype unless the config names one.
    let ssm_key = ["mamba_ssm_cache_dtype", "mamba_ssm_dtype"]
        .into_iter()
        .find(|k| r.get(k).is_some());
    let named = match ssm_key {
        Some(key) => match r.text(key) {
            Some(t) => match dtype_bytes(&t) {
                Ok(b) => b,
                Err(()) => {
                    out.notes.push(format!(
                        "config.json's {key} {t:?} is not a dtype this reader knows: the state is sized in float32 (an upper bound)"
                    ));
                    Some(4.0)
                }
            },
            None => None,
        },
        None => None,
    };
    match kind {
        StateKind::Gdn => named.or(Some(4.0)),
        _ => named,
    }
}

/// Whether an activation makes a non-gated MLP (two matrices, not three).
fn non_gated(act: &str) -> bool {
    matches!(act, "relu2" | "squared_relu" | "relu_squared")
}

/// Routed experts, experts per token and the expert parameter count from the shapes; returns
/// which layers carry experts.
fn read_moe(r: &mut Reader<'_>, out: &mut ConfigReading, layout: Option<&Layout>) -> Option<Vec<bool>> {
    let experts = ["num_local_experts", "num_experts", "n_routed_experts"]
        .into_iter()
        .find(|k| r.get(k).is_some())
        .and_then(|k| r.whole(k, 0, MAX_EXPERTS))
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0);
    let per_token = ["num_experts_per_tok", "experts_per_token"]
        .into_iter()
        .find(|k| r.get(k).is_some())
        .and_then(|k| r.whole(k, 0, MAX_EXPERTS))
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0);
    let moe_width = r.positive("moe_intermediate_size", MAX_WIDTH);
    let dense_width = r.positive("intermediate_size", MAX_WIDTH);
    let (Some(e), Some(k)) = (experts, per_token) else {
        out.intermediate_size = dense_width;
        if experts.is_some() {
            out.notes.push(
                "config.json names routed experts but not how many each token uses: decode is bounded as if the model were dense".into(),
            );
        }
        return None;
    };
    if k > e {
        out.notes.push(format!(
            "config.json says each token uses {k} of {e} experts, which cannot be: the model is treated as dense"
        ));
        out.intermediate_size = dense_width;
        return None;
    }
    out.moe = Some((e, k));
    let width = moe_width.or(dense_width);
    out.intermediate_size = width;
    let layers = u64::from(out.num_layers?);
    // Which layers carry experts: a hybrid pattern names them (Nemotron-H `E`); DeepSeek replaces
    // the first k layers with dense ones and then has experts every `moe_layer_freq`-th layer;
    // Llama 4 interleaves every n-th layer; Qwen every `decoder_sparse_step`-th minus
    // `mlp_only_layers`.
    let flags: Vec<bool> = if let Some(ffn) = layout.and_then(|l| l.ffn.as_ref()) {
        ffn.iter().map(|f| *f == Ffn::Moe).collect()
    } else if let Some(dense) = r.whole("first_k_dense_replace", 0, MAX_LAYERS) {
        let freq = r.whole("moe_layer_freq", 1, MAX_LAYERS).unwrap_or(1);
        (0..layers).map(|i| i >= dense && i.is_multiple_of(freq)).collect()
    } else if let Some(step) = r.whole("interleave_moe_layer_step", 1, MAX_LAYERS) {
        (0..layers).map(|i| (i + 1).is_multiple_of(step)).collect()
    } else if let Some(step) = r.whole("decoder_sparse_step", 1, MAX_LAYERS) {
        let dense_only = r.numbers("mlp_only_layers").unwrap_or_default();
        (0..layers)
            .map(|i| (i + 1).is_multiple_of(step) && !dense_only.contains(&i))
            .collect()
    } else {
        vec![true; layers as usize]
    };
    let moe_layers = flags.iter().filter(|f| **f).count() as u32;
    // Gate, up and down projections of a gated (SwiGLU) expert; up and down of a non-gated one.
    let act = ["mlp_hidden_act", "hidden_act", "hidden_activation"]
        .into_iter()
        .find(|k| r.get(k).is_some())
        .and_then(|k| r.text(k))
        .unwrap_or_default();
    let matrices: u32 = if non_gated(&act) { 2 } else { 3 };
    out.moe_layers = Some(moe_layers);
    out.expert_matrices = Some(matrices);
    if let (Some(h), Some(w)) = (out.hidden_size, width) {
        out.expert_params =
            Some(f64::from(moe_layers) * f64::from(e) * f64::from(matrices) * f64::from(h) * f64::from(w));
    }
    Some(flags)
}

/// The parameters the shapes give: embeddings, every layer's mixer (attention, latent attention,
/// Gated DeltaNet, Mamba-2) and feed-forward block (dense or experts with shared experts and
/// router), and the multi-token-prediction layers apart. `None` when a shape it needs is missing.
fn count_params(
    r: &mut Reader<'_>,
    out: &ConfigReading,
    layout: Option<&Layout>,
    moe: Option<&[bool]>,
) -> Option<ParamCount> {
    let h = f64::from(out.hidden_size?);
    let vocab = f64::from(out.vocab_size?);
    let layers = out.num_layers? as usize;
    let heads = f64::from(out.num_attention_heads?);
    let kv = f64::from(out.num_kv_heads?);
    let hd = f64::from(out.head_dim?);
    let act = ["mlp_hidden_act", "hidden_act", "hidden_activation"]
        .into_iter()
        .find(|k| r.get(k).is_some())
        .and_then(|k| r.text(k))
        .unwrap_or_default();
    let m = if non_gated(&act) { 2.0 } else { 3.0 };
    let embed = vocab
        * h
        * if out.tie_word_embeddings.unwrap_or(false) {
            1.0
        } else {
            2.0
        };

    let attention = attention_params(r, out, h, heads, kv, hd)?;
    let state = state_params(out, h);
    let llama4 = matches!(out.model_type.as_deref(), Some("llama4" | "llama4_text"));
    let intermediate = r.positive("intermediate_size", MAX_WIDTH).map(f64::from);
    // Llama 4 names its dense layers' width apart (`intermediate_size_mlp`).
    let dense_width = if llama4 {
        r.positive("intermediate_size_mlp", MAX_WIDTH)
            .map(f64::from)
            .or(intermediate)
    } else {
        intermediate
    };
    let experts = out.moe.map(|(e, _)| f64::from(e));
    let moe_width = r
        .positive("moe_intermediate_size", MAX_WIDTH)
        .map(f64::from)
        .or(intermediate);
    let shared = shared_expert_params(r, llama4, m, h, moe_width);
    let moe_block = match (experts, moe_width) {
        (Some(e), Some(w)) => Some(e * m * h * w + shared + e * h),
        _ => None,
    };
    let dense_block = dense_width.map(|w| m * h * w);

    let mut main = embed;
    for i in 0..layers {
        let mixer = layout.map_or(Mixer::Attention, |l| l.mixers[i]);
        main += match mixer {
            Mixer::Attention => attention,
            Mixer::Gdn | Mixer::Mamba => {
                out.state?;
                state
            }
            Mixer::None => 0.0,
        };
        let ffn = match layout.and_then(|l| l.ffn.as_ref()) {
            Some(ffn) => ffn[i],
            None if moe.is_some_and(|f| f[i]) => Ffn::Moe,
            None => Ffn::Dense,
        };
        main += match ffn {
            Ffn::Moe => moe_block?,
            Ffn::Dense => dense_block?,
            Ffn::None => 0.0,
        };
    }
    // A multi-token-prediction layer: one full decoder layer (its attention and its experts or
    // MLP) and the projection of [embedding; hidden] back to the hidden width.
    let mtp_layer = attention + moe_block.or(dense_block)? + 2.0 * h * h;
    Some(ParamCount {
        main,
        mtp: f64::from(out.mtp_layers.unwrap_or(0)) * mtp_layer,
    })
}

/// One layer's attention: latent attention's projections through the compressed latent, or the
/// query, key, value and output projections (with Qwen3-Next's output gate).
fn attention_params(r: &mut Reader<'_>, out: &ConfigReading, h: f64, heads: f64, kv: f64, hd: f64) -> Option<f64> {
    let params = match out.mla {
        Some((rank, rope)) => {
            let nope = f64::from(r.positive("qk_nope_head_dim", MAX_HEAD_DIM)?);
            let v = f64::from(r.positive("v_head_dim", MAX_HEAD_DIM).unwrap_or(out.head_dim?));
            let q_dim = heads * (nope + f64::from(rope));
            let q = match r.positive("q_lora_rank", MAX_WIDTH) {
                Some(q_lora) => h * f64::from(q_lora) + f64::from(q_lora) * q_dim,
                None => h * q_dim,
            };
            q + h * f64::from(rank + rope) + f64::from(rank) * heads * (nope + v) + heads * v * h
        }
        None => {
            // Qwen3-Next / Qwen3.5 gate the attention output with a second query-sized projection.
            let gate = if r.get("attn_output_gate").is_some() && r.boolean("attn_output_gate") == Some(true)
                || matches!(out.model_type.as_deref(), Some("qwen3_next"))
            {
                2.0
            } else {
                1.0
            };
            gate * h * heads * hd + 2.0 * h * kv * hd + heads * hd * h
        }
    };
    Some(params)
}

/// One state layer's parameters (Gated DeltaNet or Mamba-2); 0 without state layers.
fn state_params(out: &ConfigReading, h: f64) -> f64 {
    out.state.map_or(0.0, |s| {
        let (heads, groups, head_dim, size, k) = (
            f64::from(s.heads),
            f64::from(s.groups),
            f64::from(s.head_dim),
            f64::from(s.state_size),
            f64::from(s.conv_kernel),
        );
        match s.kind {
            StateKind::Gdn => {
                let qkv = 2.0 * groups * head_dim + heads * size;
                // in_proj_qkvz (q, k, v and the output gate z), in_proj_ba, conv, out_proj.
                h * (qkv + heads * size) + h * 2.0 * heads + qkv * k + heads * size * h
            }
            _ => {
                let inner = heads * head_dim;
                // in_proj (z, x, B, C, dt), conv, out_proj.
                h * (2.0 * inner + 2.0 * groups * size + heads) + (inner + 2.0 * groups * size) * k + inner * h
            }
        }
    })
}

/// The shared experts of one expert layer: DeepSeek-style `n_shared_experts` of the expert width
/// (Nemotron-H names its own width), Qwen's one shared expert of
/// `shared_expert_intermediate_size`, Llama 4's one shared expert as wide as a routed one.
fn shared_expert_params(r: &mut Reader<'_>, llama4: bool, m: f64, h: f64, moe_width: Option<f64>) -> f64 {
    if llama4 {
        moe_width.map_or(0.0, |w| m * h * w)
    } else if let Some(w) = r.positive("shared_expert_intermediate_size", MAX_WIDTH) {
        m * h * f64::from(w) + h
    } else {
        let n = r.whole("n_shared_experts", 0, MAX_EXPERTS).unwrap_or(0) as f64;
        let w = r
            .positive("moe_shared_expert_intermediate_size", MAX_WIDTH)
            .map(f64::from)
            .or(moe_width)
            .unwrap_or(0.0);
        if r.get("moe_shared_expert_intermediate_size").is_some() {
            // Nemotron-H: the width is that of all shared experts together.
            m * h * w * n.min(1.0)
        } else {
            m * h * w * n
        }
    }
}

/// Which layers keep only a sliding window or a chunk of the tokens.
fn read_windows(r: &mut Reader<'_>, out: &mut ConfigReading, model_type: &str) {
    let layers = out.num_layers;
    let window = if r.get("sliding_window").is_some() {
        r.whole("sliding_window", 1, MAX_TOKENS)
    } else if r.get("layer_types").is_some() || matches!(model_type, "gemma3" | "gemma3_text") {
        r.default("sliding_window")
    } else {
        None
    };
    let chunk = r.whole("attention_chunk_size", 1, MAX_TOKENS);

    if let Some(types) = r.strings("layer_types") {
        let Some(layers) = layers else { return };
        if types.len() != layers as usize {
            out.notes.push(format!(
                "config.json lists {} layer_types for {layers} layers: it contradicts itself, so every layer is sized at full attention",
                types.len()
            ));
            return;
        }
        let count = |name: &str| types.iter().filter(|t| t.as_str() == name).count() as u32;
        let unknown: Vec<&str> = types
            .iter()
            .map(String::as_str)
            .filter(|t| !LAYER_TYPES.contains(t))
            .collect();
        if let Some(first) = unknown.first() {
            out.notes.push(format!(
                "config.json has {} layers of type {first}, which this reader does not model: they are sized at full attention (an upper bound)",
                unknown.iter().filter(|t| *t == first).count()
            ));
        }
        let sliding = count(SLIDING_ATTENTION);
        let chunked = count(CHUNKED_ATTENTION);
        out.sliding = place(out, sliding, window, "sliding_attention", "sliding_window");
        out.chunked = place(out, chunked, chunk, "chunked_attention", "attention_chunk_size");
        return;
    }

    if let (Some(w), Some(l)) = (window, layers) {
        read_sliding(r, out, model_type, w, l);
    }

    if let (Some(c), Some(l)) = (chunk, layers) {
        read_chunked(r, out, c, l);
    }
}

/// How many of the `l` layers keep only the sliding window of `w` tokens, when `layer_types` does
/// not list them: one arm per way a config says it.
fn read_sliding(r: &mut Reader<'_>, out: &mut ConfigReading, model_type: &str, w: u64, l: u32) {
    let use_window = r.boolean("use_sliding_window");
    let pattern = match r.get("sliding_window_pattern") {
        Some(_) => r.whole("sliding_window_pattern", 1, MAX_LAYERS),
        None if r.get("_sliding_window_pattern").is_some() => r.whole("_sliding_window_pattern", 1, MAX_LAYERS),
        None => r.default("sliding_window_pattern"),
    };
    let sliding = if use_window == Some(false) {
        // Qwen2/Qwen3 configs carry a window they do not use.
        Some(0)
    } else if let (Some(true), Some(max)) = (use_window, r.whole("max_window_layers", 0, MAX_LAYERS)) {
        // Qwen2: the first `max_window_layers` layers attend fully, the rest use the window.
        Some(u64::from(l).saturating_sub(max))
    } else if let Some(p) = pattern {
        // Every p-th layer (1-based) is global, the others local.
        Some(u64::from(l) - u64::from(l) / p)
    } else if model_type == "gemma2" {
        // transformers Gemma2: even-indexed layers are local.
        Some(u64::from(l).div_ceil(2))
    } else if matches!(model_type, "mistral" | "mixtral") {
        // Mistral's window applies to every layer.
        Some(u64::from(l))
    } else {
        out.notes.push(format!(
            "config.json has sliding_window {w} but does not say which layers use it: every layer is sized at full attention (an upper bound); give sliding_window_layers to size the window"
        ));
        None
    };
    if let Some(s) = sliding.and_then(|s| u32::try_from(s).ok()).filter(|s| *s > 0) {
        out.sliding = Some(LayerWindow { tokens: w, layers: s });
    }
}

/// How many of the `l` layers attend only within their chunk of `c` tokens (Llama 4).
fn read_chunked(r: &mut Reader<'_>, out: &mut ConfigReading, c: u64, l: u32) {
    let rope_layers = r.numbers("no_rope_layers").unwrap_or_default();
    let chunked = if !rope_layers.is_empty() {
        if rope_layers.len() != l as usize {
            out.notes.push(format!(
                "config.json lists {} no_rope_layers for {l} layers: every layer is sized at full attention",
                rope_layers.len()
            ));
            None
        } else {
            // Llama 4: RoPE layers (1) attend within their chunk; NoPE layers (0) are global.
            Some(rope_layers.iter().filter(|v| **v == 1).count() as u64)
        }
    } else {
        let interval = match r.get("no_rope_layer_interval") {
            Some(_) => r.whole("no_rope_layer_interval", 1, MAX_LAYERS),
            None => r.default("no_rope_layer_interval"),
        };
        match interval {
            Some(i) => Some(u64::from(l) - u64::from(l) / i),
            None => {
                out.notes.push(format!(
                    "config.json has attention_chunk_size {c} but does not say which layers use it: every layer is sized at full attention (an upper bound); give chunked_layers to size the chunks"
                ));
                None
            }
        }
    };
    if let Some(n) = chunked.and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0) {
        out.chunked = Some(LayerWindow { tokens: c, layers: n });
    }
}

/// `count` layers of a windowed type need the window size `tokens`.
fn place(out: &mut ConfigReading, count: u32, tokens: Option<u64>, kind: &str, key: &str) -> Option<LayerWindow> {
    if count == 0 {
        return None;
    }
    match tokens {
        Some(tokens) => Some(LayerWindow { tokens, layers: count }),
        None => {
            out.notes.push(format!(
                "config.json has {count} {kind} layers but no {key}: they are sized at full attention"
            ));
            None
        }
    }
}
