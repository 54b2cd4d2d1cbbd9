//! Sizing engine: how much accelerator memory a brief needs and which catalogue GPUs (and how
//! many) hold it. Pure: no I/O, no database, no async. Formulas and sources are in
//! `../shared/domain/sizing.md`; the catalogues are `data/*.csv` (see `data/README.md`).
//!
//! # Units
//! Everything is computed in bytes. The catalogue's GPU memory is the vendor datasheet figure in
//! decimal **GB** (10^9 bytes, `GpuSpec::memory_gb`), as `sizing.md` uses it; all outputs are in
//! **GiB** (2^30 bytes), so an 80 GB card reports `memory_gib = 74.51`. (HBM parts physically
//! carry about the datasheet number in GiB, so treating it as GB is conservative by ~7 %; the
//! authoritative figure is `nvidia-smi` / the engine's start-up log on the rented machine.)
//!
//! # Rules
//! * **Weights** (inference, media): fp32 4 B/param, bf16/fp16 2, fp8/int8 1, int4 = GPTQ/AWQ
//!   group-128, 4.15625 bits = 0.5195 B. For fp8/int8/int4 the embedding and `lm_head` stay
//!   16-bit when the catalogue model gives `vocab_size × hidden_size` (once when tied). MoE: all
//!   (total) parameters are resident. MXFP4 models (gpt-oss): the expert MLPs stay MXFP4
//!   (4.25 bits) at every precision except fp32 — that is the released format vLLM serves — and
//!   the precision applies to the rest (BF16 in the release).
//! * **KV cache**: `2 × layers × kv_heads × head_dim × bytes_per_elem` per token, where
//!   bytes_per_elem is the activation dtype — 2, or 4 for fp32 — for every weight precision
//!   (vLLM's default `kv_cache_dtype=auto`; FP8 KV is an opt-in the brief does not express, so
//!   sizing stays conservative). Tokens = concurrency × context rounded up to 16-token blocks.
//!   MLA (DeepSeek-V3): the catalogue's compressed bytes per token (576 elements per layer), not
//!   sharded by TP. Sliding-window layers cache `min(context, window)` tokens per sequence. The
//!   explicit `num_layers`/`num_kv_heads`/`head_dim` of the input are used; the catalogue adds
//!   only what they cannot say (MLA, windows, MoE experts, MXFP4, vocabulary, hidden size).
//! * **Training** (full, mixed-precision AdamW): `weights_gib` = 18 B/param (weights + fp32
//!   gradients + Adam states), sharded ZeRO-3/FSDP over the GPUs; `kv_cache_gib` = activations
//!   with selective recomputation, `34·s·h` bytes per layer per sequence (+ fp32 logits
//!   `s·vocab·4` when the catalogue gives the vocabulary), `concurrency` sequences, each GPU
//!   holding its `ceil(concurrency / GPUs)`. `h` is the catalogue hidden size or `√(P / 12L)`.
//! * **Fine-tune**: LoRA r = 16 on q, k, v, o, gate, up, down (every expert for MoE), adapters at
//!   12 B/param (2 weight + 2 grad + 8 Adam) in `weights_gib` with the frozen base — at the stated
//!   precision, or **QLoRA** NF4 (0.516 B/param, embeddings 16-bit) when the precision is int4.
//!   Activations (`kv_cache_gib`) assume gradient checkpointing: `2·s·h` per layer + one layer's
//!   `34·s·h` + logits, per sequence, split like training.
//! * **Media**: like inference on the weights; KV cache 0 unless a catalogue (LLM) model is set.
//! * **Fit per GPU** (`sizing.md` §3): `weights/count + kv_per_gpu + reserve ≤ 0.9 × memory`,
//!   reserve = max(1.5 GB, 5 % of memory). Counts 1, 2, 4, 8, then whole 8-GPU nodes up to 64
//!   (tensor parallel inside a node, pipeline parallel across nodes); the smallest that fits,
//!   else the largest tried (64) with `fits = false`. KV per GPU stops shrinking once the TP
//!   degree exceeds the KV heads (heads are replicated); pipeline stages still divide it.
//! * **headroom_pct** = `(usable − need) / usable × 100` per GPU, usable = 0.9 × memory.
//! * **Order**: fitting options by memory rented (count × datasheet GB), then count, then name;
//!   then non-fitting ones, largest (least negative) headroom first.
//! * **interconnect_note**: `None` for one card (except MI250X, whose card is two GCDs); else
//!   the fabric used for TP (NVLink / Infinity Fabric / optional bridge), a PCIe-only warning,
//!   and for more than one node the pipeline-parallel / InfiniBand-or-RoCE requirement.
//! * **overhead_gib** = count × (reserve + the 10 % utilisation margin) of the first option;
//!   `total_gib = weights + kv + overhead`. KV is reported unreplicated.
//! * **decode_tokens_per_s_max**: aggregate over all `concurrency` sequences, a ceiling with MBU
//!   1.0 (`sizing.md` §6): `concurrency × bandwidth / bytes each GPU reads per step`, where those
//!   bytes are its weight shard plus its KV shard at the full context. MoE weights read per step
//!   = shared weights + experts × `1 − (1 − k/E)^concurrency` (= the active parameters at
//!   concurrency 1). 0 for training and fine-tuning (no decode).

mod catalog;
mod memory;
mod options;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod worked_examples;

use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use catalog::{gpu_by_name, gpus, model_by_hf_id, models, Attention, GpuSpec, ModelSpec, WeightFormat};

/// What the rented capacity will run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    RealtimeInference,
    BatchInference,
    Training,
    Finetune,
    Media,
}

impl WorkloadKind {
    pub const ALL: [Self; 5] = [
        Self::RealtimeInference,
        Self::BatchInference,
        Self::Training,
        Self::Finetune,
        Self::Media,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::RealtimeInference => "realtime-inference",
            Self::BatchInference => "batch-inference",
            Self::Training => "training",
            Self::Finetune => "finetune",
            Self::Media => "media",
        }
    }
}

impl FromStr for WorkloadKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|k| k.as_str() == s).ok_or(())
    }
}

/// Numeric precision of the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Bf16,
    Fp16,
    Fp8,
    Int8,
    Int4,
}

impl Precision {
    pub const ALL: [Self; 6] = [Self::Fp32, Self::Bf16, Self::Fp16, Self::Fp8, Self::Int8, Self::Int4];

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Fp32 => "fp32",
            Self::Bf16 => "bf16",
            Self::Fp16 => "fp16",
            Self::Fp8 => "fp8",
            Self::Int8 => "int8",
            Self::Int4 => "int4",
        }
    }
}

impl FromStr for Precision {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|p| p.as_str() == s).ok_or(())
    }
}

/// A validated sizing request (ranges checked by the caller).
#[derive(Debug, Clone)]
pub struct SizingInput {
    pub workload_kind: WorkloadKind,
    pub precision: Precision,
    /// Total parameters, billions.
    pub params_b: f64,
    /// Tokens per sequence.
    pub context_length: u64,
    /// Live sequences (micro-batch for training / fine-tuning).
    pub concurrency: u64,
    pub num_layers: u32,
    pub num_kv_heads: u32,
    pub head_dim: u32,
    /// When set, gives the architecture facts the explicit numbers cannot: MLA, sliding windows,
    /// MoE experts and active parameters, MXFP4, vocabulary and hidden size.
    pub catalog_model: Option<&'static ModelSpec>,
}

/// The sizing of one brief (api.md "Sizing").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sizing {
    pub weights_gib: f64,
    pub kv_cache_gib: f64,
    pub overhead_gib: f64,
    pub total_gib: f64,
    pub options: Vec<SizingOption>,
    pub billing_advice: String,
}

/// One catalogue GPU at the count it needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizingOption {
    pub gpu: String,
    /// Datasheet memory converted to GiB (80 GB → 74.51).
    pub memory_gib: f64,
    pub count: u32,
    pub fits: bool,
    pub headroom_pct: f64,
    pub decode_tokens_per_s_max: f64,
    pub interconnect_note: Option<String>,
}

pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

pub(crate) fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Billing model advice by workload kind (product.md §2).
pub fn billing_advice(kind: WorkloadKind) -> &'static str {
    match kind {
        WorkloadKind::RealtimeInference => {
            "On-demand capacity with fine billing granularity (per second or minute), so idle replicas can be scaled down; keep a warm minimum for the latency targets, and consider a reservation only once the load test shows steady utilisation."
        }
        WorkloadKind::BatchInference => {
            "Interruptible/spot capacity with a resumable queue: idempotent work items, results written outside the instance, and an on-demand fallback when spot capacity is short."
        }
        WorkloadKind::Training => {
            "Spot/interruptible only with frequent checkpoints to durable storage and a tested resume; without checkpointing use on-demand, or reserved capacity for long runs."
        }
        WorkloadKind::Finetune => {
            "Spot/interruptible with checkpoints every few hundred steps and a tested resume; otherwise on-demand billed per minute. A reservation rarely pays off for a one-off fine-tune."
        }
        WorkloadKind::Media => {
            "Offline generation: interruptible/spot with a resumable queue of jobs; interactive generation: on-demand with fine billing granularity, scaled to zero when idle."
        }
    }
}

/// Size `input` against every catalogue GPU. Infallible for validated inputs.
pub fn size(input: &SizingInput) -> Sizing {
    let fp = memory::footprint(input);
    let mut opts: Vec<(SizingOption, &'static GpuSpec)> =
        gpus().iter().map(|g| (options::option_for(&fp, g), g)).collect();
    opts.sort_by(|a, b| options::order((&a.0, a.1), (&b.0, b.1)));
    let overhead = opts.first().map_or(0.0, |(o, g)| options::overhead_gib(g, o.count));
    let weights = fp.weights / catalog::GIB;
    let kv = fp.dynamic / catalog::GIB;
    Sizing {
        weights_gib: round2(weights),
        kv_cache_gib: round2(kv),
        overhead_gib: round2(overhead),
        total_gib: round2(weights + kv + overhead),
        options: opts.into_iter().map(|(o, _)| o).collect(),
        billing_advice: billing_advice(input.workload_kind).to_string(),
    }
}
