//! Memory footprint of one workload, independent of the GPU: weights, KV cache or activations,
//! and what one decode step reads. All quantities here are bytes; GiB only at the output edge.

use super::{KvCacheDtype, Precision, SizingInput, WorkloadKind};

/// INT4 GPTQ/AWQ with group size 128: 4 bits + (16-bit scale + 4-bit zero) / 128 = 4.15625 bits.
pub const INT4_G128_BYTES: f64 = (4.0 + 20.0 / 128.0) / 8.0;
/// NF4 with double quantisation (QLoRA): 4 + 8/64 + 32/(64·256) bits ≈ 4.127 bits ≈ 0.516 B.
pub const NF4_BYTES: f64 = (4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0)) / 8.0;
/// OCP MXFP4: 4-bit E2M1 + one 8-bit scale per 32 values = 4.25 bits.
pub const MXFP4_BYTES: f64 = 4.25 / 8.0;
/// Mixed-precision AdamW: 6 (fp32 master + 16-bit copy) + 4 (fp32 grads) + 8 (Adam m, v).
pub const TRAIN_BYTES_PER_PARAM: f64 = 18.0;
/// LoRA adapter parameters: 2 (bf16 weight) + 2 (bf16 grad) + 8 (fp32 Adam m, v).
pub const LORA_BYTES_PER_PARAM: f64 = 12.0;
/// LoRA rank on every linear projection.
pub const LORA_RANK: f64 = 16.0;
/// vLLM's KV block size in tokens: each sequence is rounded up to a whole block.
pub const KV_BLOCK_TOKENS: u64 = 16;

/// Weight bytes per parameter for the dense (non-embedding, non-MXFP4) tensors.
pub fn bytes_per_param(p: Precision) -> f64 {
    match p {
        Precision::Fp32 => 4.0,
        Precision::Bf16 | Precision::Fp16 => 2.0,
        Precision::Fp8 | Precision::Int8 => 1.0,
        Precision::Int4 => INT4_G128_BYTES,
    }
}

/// Bytes of one activation element: 4 for fp32 models, 2 for every other precision (weight
/// quantisation does not narrow the activations).
pub fn activation_bytes(p: Precision) -> f64 {
    if p == Precision::Fp32 {
        4.0
    } else {
        2.0
    }
}

/// KV-cache bytes per element: the activation dtype under vLLM's `kv_cache_dtype=auto` (4 for
/// fp32, 2 otherwise — an fp8 or int4 weight precision never implies fp8 KV), 1 with `fp8`.
pub fn kv_bytes_per_elem(p: Precision, kv: KvCacheDtype) -> f64 {
    match kv {
        KvCacheDtype::Auto => activation_bytes(p),
        KvCacheDtype::Fp8 => 1.0,
    }
}

fn is_quantised(p: Precision) -> bool {
    matches!(p, Precision::Fp8 | Precision::Int8 | Precision::Int4)
}

/// How the per-workload dynamic memory divides over GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Split {
    /// KV cache: split by KV head across tensor-parallel ranks, at most `shards` ways (KV heads;
    /// 1 for MLA, whose latent every rank keeps whole), and by layer across pipeline stages;
    /// `per_seq` bytes for each of `seqs` sequences (data-parallel attention splits by sequence).
    /// A hybrid's constant state, `state_per_seq` bytes a sequence, splits by head over every
    /// tensor-parallel rank (a valid degree divides its heads) and by layer over the stages.
    KvHeads {
        shards: u32,
        per_seq: f64,
        state_per_seq: f64,
        seqs: u64,
    },
    /// Activations: each device holds the sequences of its own micro-batch (data parallel).
    DataParallel { per_seq: f64, seqs: u64 },
}

/// Heads and layers: which tensor/pipeline layouts can load the model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub heads: Option<u32>,
    pub kv_heads: u32,
    pub layers: u32,
    /// The state layers, whose heads a tensor-parallel degree must divide too.
    pub state: Option<super::StateLayers>,
    /// One expert's MLP width and the block width of a block-scaled fp8 checkpoint of a mixture
    /// of experts: tensor parallelism must leave each shard a whole number of blocks.
    pub fp8_expert_blocks: Option<(u32, u32)>,
}

/// An MLA mixture of experts can run attention data-parallel: every GPU holds the shared
/// (non-expert) weights and the latent cache of its own sequences; experts are spread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DpAttention {
    pub shared_bytes: f64,
    pub expert_bytes: f64,
}

/// What one decode step reads from memory, for the bandwidth ceiling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decode {
    pub shared_bytes: f64,
    pub expert_bytes: f64,
    pub num_experts: u32,
    pub experts_per_token: u32,
    pub batch: u64,
}

impl Decode {
    /// Weight bytes one step reads: all shared weights plus the expected share of experts that
    /// `batch` tokens touch, `1 − (1 − k/E)^batch` (uniform routing). At batch 1 that is `k/E`,
    /// i.e. exactly the active parameters; at large batch it approaches all experts.
    pub fn weight_bytes_read(&self) -> f64 {
        self.shared_bytes + self.expert_bytes_read()
    }

    /// The expert part of [`Decode::weight_bytes_read`].
    pub fn expert_bytes_read(&self) -> f64 {
        if self.num_experts == 0 {
            return self.expert_bytes;
        }
        let miss = 1.0 - f64::from(self.experts_per_token) / f64::from(self.num_experts);
        let batch = i32::try_from(self.batch.max(1)).unwrap_or(i32::MAX);
        self.expert_bytes * (1.0 - miss.powi(batch))
    }
}

/// The GPU-independent footprint of a sizing input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Footprint {
    /// Resident weights; for training weights + gradients + optimizer states; for fine-tuning
    /// the frozen base + adapter weights, gradients and optimizer states.
    pub weights: f64,
    /// KV cache (inference, media) or activations (training, fine-tuning), all sequences.
    pub dynamic: f64,
    pub split: Split,
    /// `None` for training and fine-tuning: no decode ceiling is reported.
    pub decode: Option<Decode>,
    pub shape: Shape,
    /// `Some` for MLA mixtures of experts served for inference.
    pub dp_attention: Option<DpAttention>,
}

/// Parameter counts (units, not billions) by storage class.
struct Parts {
    expert: f64,
    embed: f64,
    other: f64,
}

fn parts(input: &SizingInput) -> Parts {
    let total = input.resident_params();
    let a = &input.architecture;
    let expert = a.moe_with_params().map_or(0.0, |(_, p)| p.clamp(0.0, total));
    let embed = a.embedding_params().min(total - expert).max(0.0);
    Parts {
        expert,
        embed,
        other: total - expert - embed,
    }
}

/// (shared bytes, expert bytes) of the weights as served at `input.precision`, with the dense
/// tensors at `dense_bpp`. Quantised weights keep the embedding and `lm_head` at 16 bits.
fn weight_bytes(input: &SizingInput, dense_bpp: f64) -> (f64, f64) {
    let p = parts(input);
    let embed_bpp = if is_quantised(input.precision) { 2.0 } else { dense_bpp };
    let expert_bpp = if input.architecture.mxfp4_experts && input.precision != Precision::Fp32 {
        MXFP4_BYTES
    } else {
        dense_bpp
    };
    (p.embed * embed_bpp + p.other * dense_bpp, p.expert * expert_bpp)
}

/// Hidden size: the architecture's, else estimated from `P ≈ 12·L·h²`.
fn hidden(input: &SizingInput) -> f64 {
    match input.architecture.hidden_size {
        Some(h) => f64::from(h),
        None => (input.params_b * 1e9 / (12.0 * f64::from(input.architecture.num_layers))).sqrt(),
    }
}

/// fp32 logits kept for the loss, per sequence (only when the vocabulary is known).
fn logits_bytes(input: &SizingInput) -> f64 {
    input
        .architecture
        .vocab_size
        .map_or(0.0, |v| input.context_length as f64 * f64::from(v) * 4.0)
}

/// LoRA parameters with rank 16 on q, k, v, o and the three MLP projections of every layer
/// (every expert's MLP for MoE models): `r·(d_in + d_out)` per projection.
pub fn lora_params(input: &SizingInput) -> f64 {
    let a = &input.architecture;
    let h = hidden(input);
    let head_dim = f64::from(a.head_dim);
    let q_dim = a.num_attention_heads.map_or(h, |n| f64::from(n) * head_dim);
    let kv_dim = f64::from(a.num_kv_heads) * head_dim;
    let inter = a.intermediate_size.map_or(3.5 * h, f64::from);
    let mlps = a.moe_with_params().map_or(1.0, |(m, _)| f64::from(m.num_experts));
    let per_layer = 2.0 * (h + q_dim) + 2.0 * (h + kv_dim) + 3.0 * mlps * (h + inter);
    LORA_RANK * per_layer * f64::from(a.num_layers)
}

/// Tokens one sequence occupies in the KV cache: the context rounded up to whole blocks.
pub fn kv_tokens(context: u64) -> u64 {
    context.div_ceil(KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
}

/// Bytes one token adds to one attention layer's cache (the MLA latent, or K and V).
pub fn kv_bytes_per_layer_token(input: &SizingInput) -> f64 {
    input.architecture.kv_elements_per_layer_token() * kv_bytes_per_elem(input.precision, input.kv_cache_dtype)
}

/// Bytes one token adds to every KV-holding layer at once, windows not applied: what vLLM's
/// "GPU KV cache size: N tokens" divides its cache memory by.
pub fn kv_bytes_per_token_full(input: &SizingInput) -> f64 {
    kv_bytes_per_layer_token(input) * f64::from(input.architecture.kv_layers(input.speculative_decoding))
}

/// The constant state ONE sequence keeps in the state layers of a hybrid model, whatever its
/// length; 0 for models that attend on every layer.
pub fn state_per_sequence(input: &SizingInput) -> f64 {
    input
        .architecture
        .state
        .map_or(0.0, |s| s.bytes_per_sequence(activation_bytes(input.precision)))
}

/// KV-cache bytes of ONE sequence at `input.context_length`, and the number of ways TP can
/// shard it. Only attention layers (and multi-token-prediction layers under speculative
/// decoding) cache tokens; sliding-window and chunked layers keep at most their window.
pub fn kv_per_sequence(input: &SizingInput) -> (f64, u32) {
    let a = &input.architecture;
    let per_layer_token = kv_bytes_per_layer_token(input);
    let shards = if a.mla.is_some() { 1 } else { a.num_kv_heads };
    let ctx = kv_tokens(input.context_length) as f64;
    let mut layers_left = a.kv_layers(input.speculative_decoding);
    let mut layer_tokens = 0.0;
    for w in [a.sliding, a.chunked].into_iter().flatten() {
        let layers = w.layers.min(layers_left);
        layers_left -= layers;
        layer_tokens += f64::from(layers) * ctx.min(kv_tokens(w.tokens) as f64);
    }
    layer_tokens += f64::from(layers_left) * ctx;
    (per_layer_token * layer_tokens, shards)
}

/// The sizing answer's `kv_bytes_per_token`: one sequence's cache at the brief's context
/// divided by its tokens, so windows count (0 for the empty context).
pub fn kv_bytes_per_token(input: &SizingInput) -> f64 {
    let tokens = kv_tokens(input.context_length);
    if tokens == 0 {
        return 0.0;
    }
    kv_per_sequence(input).0 / tokens as f64
}

/// What placing the model over GPUs has to respect: heads, layers, state heads, fp8 blocks.
fn shape_of(a: &super::Architecture) -> Shape {
    Shape {
        heads: a.num_attention_heads,
        kv_heads: a.num_kv_heads,
        layers: a.num_layers,
        state: a.state,
        fp8_expert_blocks: a
            .intermediate_size
            .zip(a.fp8_block)
            .filter(|_| a.fp8_checkpoint && a.moe.is_some()),
    }
}

/// The footprint of `input` per the rules in the module documentation.
pub fn footprint(input: &SizingInput) -> Footprint {
    let conc = input.concurrency;
    let s = input.context_length as f64;
    let a = &input.architecture;
    let layers = f64::from(a.num_layers);
    let shape = shape_of(a);
    match input.workload_kind {
        WorkloadKind::Training => {
            // Selective recomputation (Korthikanti et al.): 34·s·b·h bytes per layer, 16-bit.
            let per_seq = 34.0 * s * hidden(input) * layers + logits_bytes(input);
            Footprint {
                weights: TRAIN_BYTES_PER_PARAM * input.resident_params(),
                dynamic: per_seq * conc as f64,
                split: Split::DataParallel { per_seq, seqs: conc },
                decode: None,
                shape,
                dp_attention: None,
            }
        }
        WorkloadKind::Finetune => {
            let base = if input.precision == Precision::Int4 {
                // QLoRA: NF4 base, 16-bit embeddings/head, MXFP4 experts stay MXFP4.
                let (shared, expert) = weight_bytes(input, NF4_BYTES);
                shared + expert
            } else {
                let (shared, expert) = weight_bytes(input, bytes_per_param(input.precision));
                shared + expert
            };
            // Gradient checkpointing: each layer's 16-bit input (2·s·h) is kept, one layer's
            // full 34·s·h is live during its recomputation.
            let h = hidden(input);
            let per_seq = 2.0 * s * h * layers + 34.0 * s * h + logits_bytes(input);
            Footprint {
                weights: base + lora_params(input) * LORA_BYTES_PER_PARAM,
                dynamic: per_seq * conc as f64,
                split: Split::DataParallel { per_seq, seqs: conc },
                decode: None,
                shape,
                dp_attention: None,
            }
        }
        WorkloadKind::RealtimeInference | WorkloadKind::BatchInference | WorkloadKind::Media => {
            let (shared, expert) = weight_bytes(input, bytes_per_param(input.precision));
            let (per_seq, shards) = kv_per_sequence(input);
            // Media (diffusion, ASR, TTS …) has no KV cache unless it is a described language model.
            let cached = input.workload_kind != WorkloadKind::Media || a.language_model;
            let per_seq = if cached { per_seq } else { 0.0 };
            let state_per_seq = if cached { state_per_sequence(input) } else { 0.0 };
            let moe = a.moe_with_params().map(|(m, _)| m);
            Footprint {
                weights: shared + expert,
                dynamic: (per_seq + state_per_seq) * conc as f64,
                split: Split::KvHeads {
                    shards,
                    per_seq,
                    state_per_seq,
                    seqs: conc,
                },
                decode: Some(Decode {
                    shared_bytes: shared,
                    expert_bytes: expert,
                    num_experts: moe.map_or(0, |m| m.num_experts),
                    experts_per_token: moe.map_or(0, |m| m.experts_per_token),
                    batch: conc.max(1),
                }),
                shape,
                dp_attention: (a.mla.is_some() && moe.is_some()).then_some(DpAttention {
                    shared_bytes: shared,
                    expert_bytes: expert,
                }),
            }
        }
    }
}
