//! Memory footprint of one workload, independent of the GPU: weights, KV cache or activations,
//! and what one decode step reads. All quantities here are bytes; GiB only at the output edge.

use super::catalog::{Attention, ModelSpec, WeightFormat};
use super::{Precision, SizingInput, WorkloadKind};

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

/// KV-cache bytes per element: the activation dtype (vLLM `kv_cache_dtype=auto`), i.e. 4 for
/// fp32 and 2 for every other precision — weight quantisation does not shrink the KV cache.
pub fn kv_bytes_per_elem(p: Precision) -> f64 {
    if p == Precision::Fp32 {
        4.0
    } else {
        2.0
    }
}

fn is_quantised(p: Precision) -> bool {
    matches!(p, Precision::Fp8 | Precision::Int8 | Precision::Int4)
}

/// How the per-workload dynamic memory divides over GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Split {
    /// KV cache: split by KV head across tensor-parallel ranks, at most `shards` ways (KV heads;
    /// 1 for MLA, whose latent every rank keeps whole), and by layer across pipeline stages.
    KvHeads { shards: u32 },
    /// Activations: each device holds the sequences of its own micro-batch (data parallel).
    DataParallel { per_seq: f64, seqs: u64 },
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
        if self.num_experts == 0 {
            return self.shared_bytes + self.expert_bytes;
        }
        let miss = 1.0 - f64::from(self.experts_per_token) / f64::from(self.num_experts);
        let batch = i32::try_from(self.batch.max(1)).unwrap_or(i32::MAX);
        self.shared_bytes + self.expert_bytes * (1.0 - miss.powi(batch))
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
}

/// Parameter counts (units, not billions) by storage class.
struct Parts {
    expert: f64,
    embed: f64,
    other: f64,
}

fn parts(input: &SizingInput) -> Parts {
    let total = input.params_b * 1e9;
    let Some(m) = input.catalog_model else {
        return Parts {
            expert: 0.0,
            embed: 0.0,
            other: total,
        };
    };
    let expert = if m.is_moe() {
        total * m.expert_params_b / m.params_b
    } else {
        0.0
    };
    let embed = m.embedding_params().min(total - expert).max(0.0);
    Parts {
        expert,
        embed,
        other: total - expert - embed,
    }
}

fn is_mxfp4(m: Option<&ModelSpec>) -> bool {
    m.is_some_and(|m| m.weight_format == WeightFormat::Mxfp4Moe)
}

/// (shared bytes, expert bytes) of the weights as served at `input.precision`, with the dense
/// tensors at `dense_bpp`.
fn weight_bytes(input: &SizingInput, dense_bpp: f64) -> (f64, f64) {
    let p = parts(input);
    let embed_bpp = if is_quantised(input.precision) { 2.0 } else { dense_bpp };
    let expert_bpp = if is_mxfp4(input.catalog_model) && input.precision != Precision::Fp32 {
        MXFP4_BYTES
    } else {
        dense_bpp
    };
    (p.embed * embed_bpp + p.other * dense_bpp, p.expert * expert_bpp)
}

/// Hidden size: the catalogue's, else estimated from `P ≈ 12·L·h²`.
fn hidden(input: &SizingInput) -> f64 {
    match input.catalog_model {
        Some(m) => f64::from(m.hidden_size),
        None => (input.params_b * 1e9 / (12.0 * f64::from(input.num_layers))).sqrt(),
    }
}

/// fp32 logits kept for the loss, per sequence (only when the catalogue gives the vocabulary).
fn logits_bytes(input: &SizingInput) -> f64 {
    input
        .catalog_model
        .map_or(0.0, |m| input.context_length as f64 * f64::from(m.vocab_size) * 4.0)
}

/// LoRA parameters with rank 16 on q, k, v, o and the three MLP projections of every layer
/// (every expert's MLP for MoE models): `r·(d_in + d_out)` per projection.
pub fn lora_params(input: &SizingInput) -> f64 {
    let h = hidden(input);
    let m = input.catalog_model;
    let q_dim = m.map_or(h, |m| f64::from(m.num_attention_heads) * f64::from(input.head_dim));
    let kv_dim = f64::from(input.num_kv_heads) * f64::from(input.head_dim);
    let inter = m.map_or(3.5 * h, |m| f64::from(m.intermediate_size));
    let mlps = m.filter(|m| m.is_moe()).map_or(1.0, |m| f64::from(m.num_experts));
    let per_layer = 2.0 * (h + q_dim) + 2.0 * (h + kv_dim) + 3.0 * mlps * (h + inter);
    LORA_RANK * per_layer * f64::from(input.num_layers)
}

/// Tokens one sequence occupies in the KV cache: the context rounded up to whole blocks.
pub fn kv_tokens(context: u64) -> u64 {
    context.div_ceil(KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
}

/// KV-cache bytes of ONE sequence at `input.context_length`, and the number of ways TP can
/// shard it.
pub fn kv_per_sequence(input: &SizingInput) -> (f64, u32) {
    let elem = kv_bytes_per_elem(input.precision);
    let m = input.catalog_model;
    let mla = m.filter(|m| m.attention == Attention::Mla);
    let per_layer_token = match mla {
        // The catalogue's compressed bytes (576 elements per layer for DeepSeek-V3), per layer.
        Some(m) => m.kv_bytes_per_token_bf16 as f64 / f64::from(m.num_layers) / 2.0 * elem,
        None => 2.0 * f64::from(input.num_kv_heads) * f64::from(input.head_dim) * elem,
    };
    let shards = if mla.is_some() { 1 } else { input.num_kv_heads };
    let ctx = kv_tokens(input.context_length);
    let (sliding, window) = m.map_or((0, 0), |m| {
        (m.sliding_layers.min(input.num_layers), kv_tokens(m.sliding_window))
    });
    let full = input.num_layers - sliding;
    let tokens = f64::from(full) * ctx as f64 + f64::from(sliding) * ctx.min(window) as f64;
    (per_layer_token * tokens, shards)
}

/// The footprint of `input` per the rules in the module documentation.
pub fn footprint(input: &SizingInput) -> Footprint {
    let conc = input.concurrency;
    let s = input.context_length as f64;
    let layers = f64::from(input.num_layers);
    match input.workload_kind {
        WorkloadKind::Training => {
            // Selective recomputation (Korthikanti et al.): 34·s·b·h bytes per layer, 16-bit.
            let per_seq = 34.0 * s * hidden(input) * layers + logits_bytes(input);
            Footprint {
                weights: TRAIN_BYTES_PER_PARAM * input.params_b * 1e9,
                dynamic: per_seq * conc as f64,
                split: Split::DataParallel { per_seq, seqs: conc },
                decode: None,
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
            }
        }
        WorkloadKind::RealtimeInference | WorkloadKind::BatchInference | WorkloadKind::Media => {
            let (shared, expert) = weight_bytes(input, bytes_per_param(input.precision));
            let (per_seq, shards) = kv_per_sequence(input);
            // Media (diffusion, ASR, TTS …) has no KV cache unless it is a catalogue LLM.
            let kv = if input.workload_kind == WorkloadKind::Media && input.catalog_model.is_none() {
                0.0
            } else {
                per_seq * conc as f64
            };
            let moe = input.catalog_model.filter(|m| m.is_moe());
            Footprint {
                weights: shared + expert,
                dynamic: kv,
                split: Split::KvHeads { shards },
                decode: Some(Decode {
                    shared_bytes: shared,
                    expert_bytes: expert,
                    num_experts: moe.map_or(0, |m| m.num_experts),
                    experts_per_token: moe.map_or(0, |m| m.experts_per_token),
                    batch: conc.max(1),
                }),
            }
        }
    }
}
