//! Reads a Hugging Face `config.json` into the facts the memory formula needs.
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

/// Keys under which multimodal configs nest their language model.
pub const LANGUAGE_MODEL_KEYS: [&str; 3] = ["text_config", "language_config", "llm_config"];

/// Keys of cache layouts this reader does not model (state-space layers, KV shared across
/// layers, linear attention), with what they are.
const UNMODELLED: [(&str, &str); 6] = [
    ("hybrid_override_pattern", "a hybrid Mamba/attention layer pattern"),
    ("attn_layer_period", "attention on only some layers (Jamba-style)"),
    ("layers_block_type", "a per-layer block type (hybrid model)"),
    ("num_kv_shared_layers", "KV caches shared across layers"),
    ("linear_conv_kernel_dim", "linear-attention layers"),
    ("index_topk", "a sparse-attention indexer with its own small cache"),
];

/// Layer-type names in `layer_types` (transformers' spelling) the reader models.
pub const FULL_ATTENTION: &str = "full_attention";
pub const SLIDING_ATTENTION: &str = "sliding_attention";
pub const CHUNKED_ATTENTION: &str = "chunked_attention";
pub const LAYER_TYPES: [&str; 3] = [FULL_ATTENTION, SLIDING_ATTENTION, CHUNKED_ATTENTION];

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
    /// Multi-head latent attention: (kv_lora_rank, qk_rope_head_dim).
    pub mla: Option<(u32, u32)>,
    pub sliding: Option<LayerWindow>,
    pub chunked: Option<LayerWindow>,
    /// (routed experts, experts per token).
    pub moe: Option<(u32, u32)>,
    /// Parameters in routed experts (units), from the shapes.
    pub expert_params: Option<f64>,
    /// `quantization_config.quant_method`, lower-cased.
    pub quant_method: Option<String>,
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

/// Reads `config`; every value of the wrong type is an error.
pub fn read(config: &Map<String, Value>) -> Result<ConfigReading, Vec<ConfigError>> {
    let mut r = Reader {
        root: config,
        lm: None,
        model_type: None,
        errors: Vec::new(),
        defaults_used: Vec::new(),
    };
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
    out.tie_word_embeddings = r
        .boolean("tie_word_embeddings")
        .or_else(|| ties_by_default(&model_type));

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

    out.num_kv_heads = match r.get("num_key_value_heads") {
        Some(_) => r.positive("num_key_value_heads", MAX_HEADS),
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

    read_moe(&mut r, &mut out);
    read_windows(&mut r, &mut out, &model_type);

    // The published weights' format (fp8 checkpoints, MXFP4 experts, AWQ/GPTQ …).
    if let Some((Value::Object(q), _)) = r.get("quantization_config") {
        match q.get("quant_method") {
            Some(Value::String(m)) => out.quant_method = Some(m.to_ascii_lowercase()),
            None | Some(Value::Null) => {}
            Some(_) => r.fail(
                "model_config.quantization_config.quant_method".into(),
                "must be a string",
            ),
        }
    } else if let Some((_, path)) = r.get("quantization_config") {
        r.fail(path, "must be an object");
    }

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
    if r.errors.is_empty() {
        Ok(out)
    } else {
        Err(r.errors)
    }
}

/// Routed experts, experts per token and the expert parameter count from the shapes.
fn read_moe(r: &mut Reader<'_>, out: &mut ConfigReading) {
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
        return;
    };
    if k > e {
        out.notes.push(format!(
            "config.json says each token uses {k} of {e} experts, which cannot be: the model is treated as dense"
        ));
        out.intermediate_size = dense_width;
        return;
    }
    out.moe = Some((e, k));
    let width = moe_width.or(dense_width);
    out.intermediate_size = width;
    let Some(layers) = out.num_layers else { return };
    // Which layers carry experts: DeepSeek replaces the first k dense layers, Llama 4
    // interleaves every n-th layer, Qwen MoE every `decoder_sparse_step`-th minus `mlp_only_layers`.
    let moe_layers = if let Some(dense) = r.whole("first_k_dense_replace", 0, MAX_LAYERS) {
        if r.whole("moe_layer_freq", 1, MAX_LAYERS).unwrap_or(1) > 1 {
            out.notes.push("config.json has moe_layer_freq above 1: expert parameters counted on every layer after the dense ones (an upper bound)".into());
        }
        u64::from(layers).saturating_sub(dense)
    } else if let Some(step) = r.whole("interleave_moe_layer_step", 1, MAX_LAYERS) {
        u64::from(layers) / step
    } else if let Some(step) = r.whole("decoder_sparse_step", 1, MAX_LAYERS) {
        let dense_only = r.numbers("mlp_only_layers").unwrap_or_default();
        (0..u64::from(layers))
            .filter(|i| (i + 1) % step == 0 && !dense_only.contains(i))
            .count() as u64
    } else {
        u64::from(layers)
    };
    if let (Some(h), Some(w)) = (out.hidden_size, width) {
        // Gate, up and down projections of a SwiGLU expert.
        out.expert_params = Some(moe_layers as f64 * f64::from(e) * 3.0 * f64::from(h) * f64::from(w));
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

    if let (Some(c), Some(l)) = (chunk, layers) {
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
