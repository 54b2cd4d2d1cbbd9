//! Sizing engine: how much accelerator memory a brief needs and which catalogue GPUs (and how
//! many) hold it, in a layout that can load. Pure: no I/O, no database, no async. The
//! catalogues are `data/*.csv` (see `data/README.md` for every row's source).
//!
//! # Units
//! Everything is computed in bytes. A GPU's memory is what its driver reports
//! (`GpuSpec::memory_total_mib`, from real `nvidia-smi` output: 81,559 MiB for an H100 SXM), the
//! figure vLLM's `gpu_memory_utilization` multiplies; the datasheet's decimal GB
//! (`GpuSpec::memory_gb`) only where no driver figure is known. All outputs are in **GiB**
//! (2^30 bytes): an H100 SXM reports `memory_gib = 79.65`.
//!
//! # The architecture
//! [`architecture::resolve`] combines what the brief states (explicit fields win), its
//! `model_config` (the model's Hugging Face config.json, read by [`model_config`]) and its
//! catalogue row. Disagreements and what the reader could not place are returned as notes and
//! end in `architecture_notes`; a layout it cannot place is sized as full attention and named.
//! Hybrid models ([`state`]) have attention layers, which hold the KV cache, and state layers
//! (Gated DeltaNet, Mamba-2), which keep a constant state per sequence.
//!
//! # Rules
//! * **Weights** (inference, media): fp32 4 B/param, bf16/fp16 2, fp8/int8 1, int4 = GPTQ/AWQ
//!   group-128, 4.15625 bits = 0.5195 B. For fp8/int8/int4 the embedding and `lm_head` stay
//!   16-bit when the vocabulary and hidden size are known (once when tied): vLLM's fp8 leaves
//!   `lm_head` unquantised and published fp8/MXFP4 checkpoints keep both in BF16. MoE: all
//!   (total) parameters are resident. MXFP4 checkpoints (gpt-oss): the expert MLPs stay MXFP4
//!   (4.25 bits, OCP microscaling) at every precision except fp32, the rest at the precision.
//!   Weights count `params_b`, or the config's own count when they disagree by more than 5 %
//!   (multimodal configs excepted when `params_b` is the larger: the encoders), plus the
//!   multi-token-prediction layers the checkpoint ships (`num_nextn_predict_layers`,
//!   `mtp_num_hidden_layers`) unless `params_b` already holds them. Experts are counted on the
//!   layers that have them only, 3 matrices per gated expert, 2 per `relu2` one.
//! * **KV cache** per KV layer and token: `2 × kv_heads × head_dim` elements, or for multi-head
//!   latent attention (DeepSeek-V2/V3) `kv_lora_rank + qk_rope_head_dim` (512 + 64 = 576; the
//!   DeepSeek-V2 paper's `(d_c + d_h^R)·l`), whatever the head count. Elements are the
//!   activation dtype — 2 bytes, 4 for fp32 — at every weight precision (vLLM's default
//!   `kv_cache_dtype=auto`), 1 byte when the brief sets `kv_cache_dtype` fp8. The KV layers are
//!   the attention layers (not a hybrid's state layers), plus the multi-token-prediction layers
//!   when the brief sets `speculative_decoding`. Each sequence is rounded up to 16-token blocks
//!   (vLLM `DEFAULT_BLOCK_SIZE`). Sliding-window layers (Gemma 2/3, gpt-oss, Mistral v0.1) keep
//!   `min(context, window)` tokens, chunked-attention layers (Llama 4) `min(context, chunk)`,
//!   the rest every token (vLLM `SlidingWindowSpec`, `ChunkedLocalAttentionSpec`).
//!   `kv_bytes_per_token` is one sequence's cache at the brief's context divided by its tokens,
//!   so windows count.
//! * **State** (`state_gib`): each state layer keeps a constant state per sequence whatever its
//!   length ([`state`]: recurrent/SSM state in its own dtype plus the convolution state), times
//!   `concurrency`. It splits over every tensor-parallel rank and the pipeline stages.
//! * **Training** (full, mixed-precision AdamW): `weights_gib` = 18 B/param (weights + fp32
//!   gradients + Adam states; Hugging Face "Model training anatomy"), sharded ZeRO-3/FSDP over
//!   the GPUs; `kv_cache_gib` = activations with selective recomputation, `34·s·h` bytes per
//!   layer per sequence (Korthikanti et al. 2022) + fp32 logits `s·vocab·4` when the vocabulary
//!   is known, `concurrency` sequences, each GPU holding its `ceil(concurrency / GPUs)`. `h` is
//!   the known hidden size or `√(P / 12L)`.
//! * **Fine-tune**: LoRA r = 16 on q, k, v, o, gate, up, down (every expert for MoE), adapters at
//!   12 B/param (2 weight + 2 grad + 8 Adam) in `weights_gib` with the frozen base — at the stated
//!   precision, or **QLoRA** NF4 (0.516 B/param, embeddings 16-bit) when the precision is int4.
//!   Activations (`kv_cache_gib`) assume gradient checkpointing: `2·s·h` per layer + one layer's
//!   `34·s·h` + logits, per sequence, split like training.
//! * **Media**: like inference on the weights; KV cache 0 unless a catalogue row or a
//!   config.json describes a language model.
//! * **Fit per GPU**: `weights/count + kv_per_gpu + reserve ≤ 0.9 × memory` (vLLM's default
//!   `gpu_memory_utilization`), reserve = max(1.5 GB, 5 % of memory) for activations, CUDA
//!   graphs and context. Counts 1, 2, 4, 8, then whole 8-GPU nodes up to 64; the smallest that
//!   fits, else the largest tried (64) with `fits = false`.
//! * **Layouts that load** ([`parallelism`]): the tensor-parallel degree divides the attention
//!   heads and divides, or is a multiple of, the KV heads (vLLM `QKVParallelLinear`), divides a
//!   hybrid's state heads (Gated DeltaNet key and value heads; Mamba-2 heads and groups), stays
//!   inside a node, and the rest of the count is pipeline stages — Phi-4's 10 KV heads run 8
//!   GPUs as TP 2 × PP 4. KV per GPU stops shrinking once TP exceeds the KV heads (replicated);
//!   pipeline stages still divide it; an MLA latent is whole on every TP rank. Each option
//!   carries `tensor_parallel` and `pipeline_parallel`.
//! * **One node before two**: when a full node misses with the defaults, the engine tries the
//!   setting that keeps it on one node — data-parallel attention with expert parallelism for MLA
//!   mixtures of experts (each GPU holds the shared weights, 1/N of the experts and its own
//!   sequences' latent; vLLM "Data Parallel Deployment"), then `--gpu-memory-utilization 0.95`
//!   — and names it in `load_note`.
//! * **Precision support** ([`precision`]): no bf16 on V100/T4 (fp16 instead, same memory); fp8
//!   W8A8 from compute capability 8.9, weight-only fp8 from 7.5 for dense models, none for MoE
//!   below 8.9; int8 from 7.5. An option the GPU cannot run is `fits = false` and its
//!   `load_note` says what it would take (the other precision and its count).
//! * **headroom_pct** = `(usable − need) / usable × 100` per GPU, usable = 0.9 × memory.
//! * **Order**: fitting options by memory rented (count × memory per GPU), then count, then name;
//!   then non-fitting ones, largest (least negative) headroom first.
//! * **interconnect_note**: `None` for one card (except MI250X, whose card is two GCDs); else
//!   the split (TP × PP, FSDP or data-parallel attention), the fabric it uses (NVLink /
//!   Infinity Fabric / optional bridge) or a PCIe-only warning, why TP is lower than the GPUs
//!   in a node, and for more than one node the InfiniBand-or-RoCE requirement.
//! * **overhead_gib** = count × (reserve + the 10 % utilisation margin) of the first option;
//!   `total_gib = weights + kv + state + overhead`. KV is reported unreplicated.
//! * **decode_tokens_per_s_max**: aggregate over all `concurrency` sequences, a ceiling with MBU
//!   1.0: `concurrency × bandwidth / bytes each GPU reads per step`, where those bytes are its
//!   weight shard plus its KV shard at the full context. MoE weights read per step = shared
//!   weights + experts × `1 − (1 − k/E)^concurrency` (= the active parameters at concurrency 1).
//!   0 for training and fine-tuning (no decode).
//!
//! # For pages
//! What a pasted config.json gave: [`model_config::read`] (or the first of
//! `Sizing::architecture_notes`). The state line: [`Sizing::state_text`]. Predicted KV capacity
//! beside vLLM's logged one (`serving.kv_cache_tokens`, `serving.max_concurrency`):
//! [`kv_capacity`] for the trial's GPU, count and `gpu_memory_utilization` — within 3 % of the
//! real vLLM 0.10.1 log in `tests/fixtures/vllm-log`.

pub mod architecture;
mod catalog;
#[cfg(test)]
mod config_examples;
#[cfg(test)]
mod hybrid_examples;
pub mod kv_check;
mod memory;
pub mod model_config;
mod options;
pub mod parallelism;
pub mod precision;
pub mod state;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod worked_examples;

use std::str::FromStr;

use crate::validation::TextEnum;

use serde::{Deserialize, Serialize};

pub use architecture::{resolve, Architecture, ArchitectureFields, ArchitectureRequest, Problem, Resolved};
pub use catalog::{gpu_by_name, gpus, model_by_hf_id, models, Attention, GpuSpec, ModelSpec, WeightFormat};
pub use state::{StateKind, StateLayers};

/// What the rented capacity will run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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

impl TextEnum for WorkloadKind {
    fn variants() -> &'static [Self] {
        &Self::ALL
    }
    fn text(self) -> &'static str {
        self.as_str()
    }
}

/// Numeric precision of the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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

impl TextEnum for Precision {
    fn variants() -> &'static [Self] {
        &Self::ALL
    }
    fn text(self) -> &'static str {
        self.as_str()
    }
}

/// The KV cache's element type (vLLM `--kv-cache-dtype`): `auto` keeps the model's 16-bit
/// activation type whatever the weight precision (fp32 for fp32 models); `fp8` halves it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum KvCacheDtype {
    #[default]
    Auto,
    Fp8,
}

impl KvCacheDtype {
    pub const ALL: [Self; 2] = [Self::Auto, Self::Fp8];

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Fp8 => "fp8",
        }
    }
}

impl FromStr for KvCacheDtype {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|k| k.as_str() == s).ok_or(())
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
    /// The resolved architecture ([`architecture::resolve`]).
    pub architecture: Architecture,
    /// What resolving it noted; the start of `Sizing::architecture_notes`.
    pub architecture_notes: Vec<String>,
    /// The KV cache's element type (the brief's `kv_cache_dtype`).
    pub kv_cache_dtype: KvCacheDtype,
    /// Multi-token-prediction layers serve speculative decoding: their KV counts.
    pub speculative_decoding: bool,
}

impl SizingInput {
    /// A catalogue model as it is (tests, the demo).
    pub fn from_catalog(
        workload_kind: WorkloadKind,
        precision: Precision,
        model: &ModelSpec,
        context_length: u64,
        concurrency: u64,
    ) -> Self {
        Self {
            workload_kind,
            precision,
            params_b: model.params_b,
            context_length,
            concurrency,
            architecture: Architecture::from_catalog(model),
            architecture_notes: Vec::new(),
            kv_cache_dtype: KvCacheDtype::Auto,
            speculative_decoding: false,
        }
    }

    /// Parameters resident on the GPUs (units): `params_b`, or the config's count where they
    /// disagree by more than 5 %, plus the multi-token-prediction layers the checkpoint ships.
    pub fn resident_params(&self) -> f64 {
        let a = &self.architecture;
        a.config_params.unwrap_or(self.params_b * 1e9) + a.mtp_params
    }
}

/// The sizing of a brief: weights_gib, kv_cache_gib (the KV total: the attention layers' KV,
/// growing with tokens, plus a hybrid model's state), state_gib (the part of it that is the
/// constant per-sequence state of Gated DeltaNet / Mamba-2 layers, for all sequences; 0
/// otherwise), overhead_gib, total_gib, kv_bytes_per_token, architecture_notes, options per GPU
/// and billing_advice (docs/sizing.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Sizing {
    pub weights_gib: f64,
    /// The KV total (the contract's "KV total"): the attention layers' KV, which grows with every
    /// token of every sequence, plus `state_gib`.
    pub kv_cache_gib: f64,
    /// The part of `kv_cache_gib` that is the constant state of a hybrid model's state layers
    /// (Gated DeltaNet, Mamba-2), for all `concurrency` sequences: independent of the context. 0
    /// for other models.
    pub state_gib: f64,
    pub overhead_gib: f64,
    pub total_gib: f64,
    /// One sequence's KV cache at the brief's context, per token (windows applied).
    pub kv_bytes_per_token: u64,
    /// How many sequences `state_gib` is for (the brief's concurrency).
    #[serde(skip)]
    pub state_sequences: u64,
    /// What was read from config.json, what disagreed, and how the architecture shapes the
    /// sizing; empty for a plain model.
    pub architecture_notes: Vec<String>,
    pub options: Vec<SizingOption>,
    pub billing_advice: String,
}

impl Sizing {
    /// The attention layers' KV alone (the KV total less the state), as pages print it beside the state.
    pub fn attention_kv_gib(&self) -> f64 {
        round2(self.kv_cache_gib - self.state_gib)
    }

    /// The state line as pages print it ("0.96 GiB for 16 sequences, independent of context").
    pub fn state_text(&self) -> String {
        let seqs = self.state_sequences.max(1);
        format!(
            "{:.2} GiB for {} sequence{}, independent of context",
            self.state_gib,
            crate::figures::count(i64::try_from(seqs).unwrap_or(i64::MAX)),
            if seqs == 1 { "" } else { "s" }
        )
    }

    /// `kv_bytes_per_token` as pages print it ("163,840").
    pub fn kv_bytes_per_token_text(&self) -> String {
        crate::figures::count(i64::try_from(self.kv_bytes_per_token).unwrap_or(i64::MAX))
    }
}

/// One catalogue GPU at the count it needs; the price fields are there when a price sheet prices
/// it in the brief's currency (the sizing route fills them; a brief's own sizing has none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SizingOption {
    pub gpu: String,
    /// Datasheet memory converted to GiB (80 GB → 74.51): the driver's memory.total.
    pub memory_gib: f64,
    pub count: u32,
    pub fits: bool,
    /// Null when it cannot be computed (a number that is not finite).
    #[schema(value_type = Option<f64>, required = true)]
    pub headroom_pct: f64,
    /// Null when there is no bound (nothing to read per token).
    #[schema(value_type = Option<f64>, required = true)]
    pub decode_tokens_per_s_max: f64,
    pub interconnect_note: Option<String>,
    /// Tensor-parallel degree (1 for FSDP and data-parallel attention).
    pub tensor_parallel: u32,
    /// Pipeline stages (inside the node and across nodes).
    pub pipeline_parallel: u32,
    /// What loading takes beyond the defaults (a setting, weight-only fp8), or why the GPU
    /// cannot run the brief's precision and what would; null when the defaults load it.
    pub load_note: Option<String>,
    /// The cheapest current price of this allocation from the imported price sheets, in the brief's
    /// currency, its billing named; filled by the prices module, absent when no sheet prices this
    /// GPU. Its fields appear on the option itself (`price_per_hour`, `price_per_month`,
    /// `provider`, `billing`, …).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = OptionPrice::fields_when_priced)]
    pub price: Option<OptionPrice>,
}

/// What an option costs on its cheapest current offer (the engine leaves it empty).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct OptionPrice {
    /// The cheapest current price per hour of this allocation, a decimal string.
    #[serde(rename = "price_per_hour", with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub per_hour: rust_decimal::Decimal,
    /// A decimal string.
    #[serde(rename = "price_per_month", with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub per_month: rust_decimal::Decimal,
    pub provider: String,
    /// The offer's billing (on-demand, spot, reserved, serverless): pages name it beside the price,
    /// so a spot price is never read as the on-demand one.
    #[serde(rename = "price_billing")]
    pub billing: String,
    pub currency: String,
    /// The price row it comes from.
    pub price_id: uuid::Uuid,
    /// GPUs paid for (whole instances of the offer's size).
    pub gpus_billed: u32,
    /// The offer's node shape: GPUs per instance (the row's `gpu_count`).
    pub gpus_per_node: u32,
    /// Instances (nodes) of that shape the allocation rents.
    pub nodes: u32,
    /// Why this price is not one to serve on: "interruptible: not for real-time serving" for a
    /// spot price of a real-time brief (shown only when no on-demand or reserved price exists).
    #[serde(rename = "price_note", skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl OptionPrice {
    /// The price's fields as they appear on an option: all of them, or none when no sheet prices it.
    fn fields_when_priced() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::{schema::Schema, RefOr};
        let mut schema = <Self as utoipa::PartialSchema>::schema();
        if let RefOr::T(Schema::Object(object)) = &mut schema {
            object.required.clear();
        }
        schema
    }
}

pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

pub(crate) fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Billing model advice by workload kind.
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
    let moe = input.architecture.moe.is_some();
    // Footprints at the precision a GPU runs instead, computed once per precision.
    let mut instead: Vec<(Precision, memory::Footprint)> = Vec::new();
    let mut opts: Vec<(SizingOption, &'static GpuSpec)> = gpus()
        .iter()
        .map(|g| {
            let mut o = options::option_for(&fp, g);
            match precision::support(input.precision, moe, g) {
                precision::Support::Native => {}
                precision::Support::Loads(note) => {
                    o.load_note = Some(match o.load_note.take() {
                        Some(setting) => format!("{note}; {setting}"),
                        None => note,
                    });
                }
                precision::Support::Refused { why, instead: p } => {
                    let alt_fp = match instead.iter().find(|(q, _)| *q == p) {
                        Some((_, f)) => *f,
                        None => {
                            let f = memory::footprint(&SizingInput {
                                precision: p,
                                ..input.clone()
                            });
                            instead.push((p, f));
                            f
                        }
                    };
                    let alt = options::option_for(&alt_fp, g);
                    let takes = if alt.fits {
                        format!("{} × {}", alt.count, g.model)
                    } else {
                        format!("more than {} × {}", alt.count, g.model)
                    };
                    o.fits = false;
                    o.load_note = Some(format!("{why}: in {} it takes {takes}", p.as_str()));
                }
            }
            (o, g)
        })
        .collect();
    opts.sort_by(|a, b| options::order((&a.0, a.1), (&b.0, b.1)));
    let overhead = opts.first().map_or(0.0, |(o, g)| options::overhead_gib(g, o.count));
    let weights = fp.weights / catalog::GIB;
    let (kv, state) = match fp.split {
        memory::Split::KvHeads {
            per_seq,
            state_per_seq,
            seqs,
            ..
        } => (per_seq * seqs as f64, state_per_seq * seqs as f64),
        memory::Split::DataParallel { .. } => (fp.dynamic, 0.0),
    };
    let (kv, state) = (kv / catalog::GIB, state / catalog::GIB);
    Sizing {
        weights_gib: round2(weights),
        // sizing.md: KV total = attention layers' KV + state layers × state × concurrency.
        kv_cache_gib: round2(kv + state),
        state_gib: round2(state),
        overhead_gib: round2(overhead),
        total_gib: round2(weights + kv + state + overhead),
        kv_bytes_per_token: kv_bytes_per_token(input, &fp),
        state_sequences: input.concurrency,
        architecture_notes: architecture_notes(input, &fp),
        options: opts.into_iter().map(|(o, _)| o).collect(),
        billing_advice: billing_advice(input.workload_kind).to_string(),
    }
}

fn kv_bytes_per_token(input: &SizingInput, fp: &memory::Footprint) -> u64 {
    match fp.split {
        memory::Split::KvHeads { per_seq, .. } if per_seq > 0.0 => memory::kv_bytes_per_token(input).round() as u64,
        _ => 0,
    }
}

/// The resolver's notes, then how the architecture shapes this sizing: one note per architecture
/// feature, in the order the page lists them.
fn architecture_notes(input: &SizingInput, fp: &memory::Footprint) -> Vec<String> {
    let mut notes = input.architecture_notes.clone();
    let a = &input.architecture;
    if let Some(max) = a.max_context.filter(|max| input.context_length > *max) {
        notes.push(format!(
            "the context asked, {} tokens, is longer than the model takes as published ({} tokens): vLLM refuses a longer --max-model-len unless the config adds rope scaling (YaRN); this sizing is for the context asked",
            crate::figures::count(i64::try_from(input.context_length).unwrap_or(i64::MAX)),
            crate::figures::count(i64::try_from(max).unwrap_or(i64::MAX))
        ));
    }
    let memory::Split::KvHeads {
        per_seq, state_per_seq, ..
    } = fp.split
    else {
        return notes;
    };
    if per_seq <= 0.0 && state_per_seq <= 0.0 {
        return notes;
    }
    let ctx = memory::kv_tokens(input.context_length);
    let kv_layers = a.kv_layers(input.speculative_decoding);
    notes.extend(window_note(input, per_seq, ctx, kv_layers));
    if let Some(s) = a.state {
        notes.push(state_note(input, &s, state_per_seq, ctx));
    }
    if a.mtp_layers > 0 {
        notes.push(if input.speculative_decoding {
            format!(
                "speculative decoding: the {} multi-token-prediction layer(s) cache every token like attention layers ({kv_layers} KV layers)",
                a.mtp_layers
            )
        } else {
            format!(
                "the {} multi-token-prediction layer(s) are in the weights; their KV cache counts only with speculative_decoding",
                a.mtp_layers
            )
        });
    }
    match input.kv_cache_dtype {
        KvCacheDtype::Fp8 => notes.push(
            "KV cache in fp8 (kv_cache_dtype fp8): 1 byte per element, half of 16-bit; the state layers keep their own dtype".into(),
        ),
        KvCacheDtype::Auto if matches!(input.precision, Precision::Fp8 | Precision::Int8 | Precision::Int4) => notes.push(format!(
            "the KV cache stays 16-bit although the weights are {} (kv_cache_dtype auto, as vLLM does); kv_cache_dtype fp8 would halve it",
            input.precision.as_str()
        )),
        KvCacheDtype::Auto => {}
    }
    if let Some(m) = a.mla {
        notes.push(format!(
            "multi-head latent attention caches {} + {} elements per layer and token, whatever the head count; tensor parallel keeps the whole latent on every GPU",
            m.kv_lora_rank, m.qk_rope_head_dim
        ));
    }
    if let (Some(d), Some((m, _))) = (fp.decode, a.moe_with_params()) {
        if d.expert_bytes > 0.0 {
            notes.push(format!(
                "{} experts, {} per token: a decode step at {} sequences reads the shared weights and {:.0} % of the expert weights",
                m.num_experts,
                m.experts_per_token,
                input.concurrency.max(1),
                d.expert_bytes_read() / d.expert_bytes * 100.0
            ));
        }
    }
    notes
}

/// What the sliding windows and attention chunks save on a `ctx`-token sequence, when they keep
/// fewer tokens than it has.
fn window_note(input: &SizingInput, per_seq: f64, ctx: u64, kv_layers: u32) -> Option<String> {
    let a = &input.architecture;
    let windows: Vec<String> = [("a sliding window", a.sliding), ("chunked attention", a.chunked)]
        .into_iter()
        .filter_map(|(kind, w)| w.filter(|w| memory::kv_tokens(w.tokens) < ctx).map(|w| (kind, w)))
        .map(|(kind, w)| {
            format!(
                "{} of {kv_layers} attention layers keep only {} tokens ({kind})",
                w.layers, w.tokens
            )
        })
        .collect();
    if windows.is_empty() {
        return None;
    }
    let full = SizingInput {
        architecture: Architecture {
            sliding: None,
            chunked: None,
            ..a.clone()
        },
        ..input.clone()
    };
    let (full_seq, _) = memory::kv_per_sequence(&full);
    Some(format!(
        "{}: a {ctx}-token sequence caches {:.2} GiB, not the {:.2} GiB of full attention on every layer",
        windows.join(" and "),
        per_seq / catalog::GIB,
        full_seq / catalog::GIB
    ))
}

/// What the state layers keep per sequence, against what attention would cache.
fn state_note(input: &SizingInput, s: &StateLayers, state_per_seq: f64, ctx: u64) -> String {
    let a = &input.architecture;
    let as_attention = memory::kv_bytes_per_layer_token(input) * f64::from(s.layers) * ctx as f64;
    format!(
        "{} of {} layers are {} layers: each keeps a constant {:.2} MiB per sequence whatever its length ({:.2} GiB for {} sequences, independent of context), where attention would cache {:.2} GiB per {ctx}-token sequence; only the {} attention layers grow with tokens",
        s.layers,
        a.num_layers,
        s.kind.label(),
        s.bytes_per_layer(memory::activation_bytes(input.precision)) / catalog::MIB,
        state_per_seq * input.concurrency as f64 / catalog::GIB,
        input.concurrency,
        as_attention / catalog::GIB,
        a.attention_layers
    )
}

/// Predicted KV-cache capacity of `count` × `gpu` for the brief: the tokens vLLM would log and
/// the sequences of the brief's context that fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KvCapacity {
    pub tokens: u64,
    pub max_concurrency: f64,
}

/// What vLLM would report as "GPU KV cache size" and "Maximum concurrency" for this brief on
/// `count` × `gpu` at `gpu_memory_utilization` (0.9 unless the run set another), with the
/// engine's default layout. Each device has the driver's memory × utilisation, less its share of
/// the weights and the reserve, for the cache. Sequences of the brief's context that fit: that
/// memory over what one sequence takes on a device (its KV share at the context, windows
/// applied, and its state share). Tokens: the memory left for attention KV once those sequences
/// hold their state, over the bytes a token adds to every KV layer on a device — vLLM's figure,
/// which counts a token in every attention layer, windows or not. `None` when no layout loads or
/// nothing is cached.
pub fn kv_capacity(input: &SizingInput, gpu: &GpuSpec, count: u32, utilisation: f64) -> Option<KvCapacity> {
    let fp = memory::footprint(input);
    let memory::Split::KvHeads {
        shards,
        per_seq,
        state_per_seq,
        ..
    } = fp.split
    else {
        return None;
    };
    let placement = options::Placement {
        utilisation,
        ..options::default_placement(&fp, gpu, count)?
    };
    let per_token = memory::kv_bytes_per_token_full(input);
    if per_seq <= 0.0 || per_token <= 0.0 {
        return None;
    }
    let (weights, _) = options::per_card_at(&fp, gpu, &placement);
    let free_per_card = (utilisation * gpu.memory_bytes() - weights - options::reserve_bytes(gpu)).max(0.0);
    let free = free_per_card / f64::from(gpu.devices_per_card);
    let (tp, pp) = (f64::from(placement.layout.tp), f64::from(placement.layout.pp));
    // KV is split over min(TP, KV heads) ranks and the pipeline stages (the rest replicate it);
    // the state over every TP rank, whose degree divides its heads, and the stages. The busiest
    // stage, with ⌈layers / stages⌉ layers, is the one that runs out first.
    let busiest = options::busiest_stage_share(fp.shape.layers, placement.layout.pp);
    let kv_ways = f64::from(placement.layout.tp.min(shards.max(1))) * pp / busiest;
    let state_ways = tp * pp / busiest;
    let seq_bytes = per_seq / kv_ways + state_per_seq / state_ways;
    let max_concurrency = free / seq_bytes;
    let kv_free = free - max_concurrency * state_per_seq / state_ways;
    Some(KvCapacity {
        tokens: (kv_free / (per_token / kv_ways)).floor() as u64,
        max_concurrency: round2(max_concurrency),
    })
}
