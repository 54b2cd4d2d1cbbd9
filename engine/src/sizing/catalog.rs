//! The embedded model and GPU catalogues (`data/model_catalog.csv`, `data/gpu_catalog.csv`).
//!
//! Both files are compiled into the binary and parsed once, on first use. A malformed file
//! panics at that first use; `tests::catalogues_parse` parses both so that cannot ship.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use super::state::{StateKind, StateLayers};

/// Bytes in a datasheet "GB" (decimal, 10^9).
pub const GB: f64 = 1e9;
/// Bytes in a GiB (binary, 2^30).
pub const GIB: f64 = 1_073_741_824.0;
/// Bytes in a MiB (binary, 2^20): the unit `nvidia-smi` reports memory in.
pub const MIB: f64 = 1_048_576.0;
/// FP8 W8A8 (activations in fp8 too) needs this NVIDIA compute capability: Ada, Hopper, Blackwell.
pub const FP8_W8A8_MIN_CC: f64 = 8.9;

const MODEL_CSV: &str = include_str!("../../../data/model_catalog.csv");
const GPU_CSV: &str = include_str!("../../../data/gpu_catalog.csv");

/// How a model's attention stores its KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    /// Grouped-query attention: `num_kv_heads` < query heads.
    Gqa,
    /// Multi-head attention: one KV head per query head.
    Mha,
    /// Multi-head latent attention (DeepSeek-V2/V3): one compressed latent per token and layer.
    Mla,
}

/// The format the model's published checkpoint stores its weights in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightFormat {
    /// 16-bit everywhere.
    Bf16,
    /// FP8 (e.g. DeepSeek-V3's block-scaled e4m3). Informational: the brief's precision decides.
    Fp8,
    /// MoE expert MLPs in MXFP4 (4.25 bits/param), everything else BF16 (gpt-oss).
    Mxfp4Moe,
}

/// One row of `data/model_catalog.csv`: architecture facts of an open LLM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub hf_id: String,
    pub name: String,
    /// Total parameters, billions (all experts for MoE: this is what must be resident).
    pub params_b: f64,
    /// Parameters used per token, billions (model card figure; equals `params_b` when dense).
    pub active_params_b: f64,
    pub num_layers: u32,
    pub hidden_size: u32,
    pub num_attention_heads: u32,
    pub num_kv_heads: u32,
    pub head_dim: u32,
    /// MLP width of the dense FFN, or of ONE expert for MoE models.
    pub intermediate_size: u32,
    pub vocab_size: u32,
    pub tie_word_embeddings: bool,
    pub max_context: u64,
    pub attention: Attention,
    /// KV bytes per token in BF16 with every layer at full attention (the MLA rule for MLA rows).
    pub kv_bytes_per_token_bf16: u64,
    /// Sliding-window length in tokens; 0 when the model has none.
    pub sliding_window: u64,
    /// How many of `num_layers` use the sliding window (0 when none).
    pub sliding_layers: u32,
    /// Chunked local attention (Llama 4): tokens per chunk; 0 when the model has none.
    pub attention_chunk_size: u64,
    /// How many of `num_layers` attend only within their chunk (0 when none).
    pub chunked_layers: u32,
    /// Multi-head latent attention: the compressed KV width per layer (0 = not MLA).
    pub kv_lora_rank: u32,
    /// Multi-head latent attention: the decoupled RoPE key width cached beside the latent.
    pub qk_rope_head_dim: u32,
    /// Routed experts per MoE layer (0 = dense).
    pub num_experts: u32,
    /// Routed experts each token uses (0 = dense).
    pub experts_per_token: u32,
    /// Parameters in routed expert MLPs, billions (0 = dense). The rest are shared by all tokens.
    pub expert_params_b: f64,
    /// Layers that hold a KV cache; 0 = every layer (a hybrid's state and MoE-only layers do not).
    pub attention_layers: u32,
    /// The constant-state layers of a hybrid model: `none`, `gdn` (Gated DeltaNet) or `mamba2`.
    pub state_kind: StateKind,
    pub state_layers: u32,
    /// Gated DeltaNet value heads / Mamba-2 heads.
    pub state_heads: u32,
    /// Gated DeltaNet key heads / Mamba-2 groups.
    pub state_groups: u32,
    /// Gated DeltaNet key head dim / Mamba-2 head dim.
    pub state_head_dim: u32,
    /// Gated DeltaNet value head dim / Mamba-2 `d_state`.
    pub state_size: u32,
    pub conv_kernel: u32,
    /// Bytes per element of the recurrent / SSM state (4 = float32); 0 = the model's dtype.
    pub ssm_state_bytes: u32,
    /// Multi-token-prediction layers (KV only with speculative decoding).
    pub mtp_layers: u32,
    /// Their parameters, billions (not in `params_b`, which is the model card's count).
    pub mtp_params_b: f64,
    pub weight_format: WeightFormat,
    pub source: String,
}

impl ModelSpec {
    /// True for mixture-of-experts rows.
    pub fn is_moe(&self) -> bool {
        self.num_experts > 0 && self.experts_per_token > 0 && self.expert_params_b > 0.0
    }

    /// Layers that hold a KV cache.
    pub fn kv_layers(&self) -> u32 {
        if self.attention_layers == 0 {
            self.num_layers
        } else {
            self.attention_layers
        }
    }

    /// The row's constant-state layers, if it is a hybrid.
    pub fn state_layers(&self) -> Option<StateLayers> {
        (self.state_kind != StateKind::None && self.state_layers > 0).then_some(StateLayers {
            kind: self.state_kind,
            layers: self.state_layers,
            heads: self.state_heads,
            groups: self.state_groups,
            head_dim: self.state_head_dim,
            state_size: self.state_size,
            conv_kernel: self.conv_kernel,
            ssm_bytes: (self.ssm_state_bytes > 0).then_some(f64::from(self.ssm_state_bytes)),
        })
    }

    /// Parameters in the input embedding and the output head (once when tied), in units.
    pub fn embedding_params(&self) -> f64 {
        let one = f64::from(self.vocab_size) * f64::from(self.hidden_size);
        if self.tie_word_embeddings {
            one
        } else {
            2.0 * one
        }
    }
}

/// One row of `data/gpu_catalog.csv`: a rentable accelerator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSpec {
    pub vendor: String,
    /// Catalogue name, e.g. "H100 SXM" — the name `gpu_by_name` and `SizingOption::gpu` use.
    pub model: String,
    pub form_factor: String,
    /// Memory as printed on the datasheet, in decimal GB (10^9 bytes): 80, 141, 192 … (labels only).
    pub memory_gb: f64,
    /// Memory per GPU as the driver reports it (`nvidia-smi` `memory.total`, MiB): 81,559 for an
    /// H100 SXM, 81,920 for an A100 80GB. What vLLM's `gpu_memory_utilization` multiplies, so the
    /// serving budget starts here. `None` where no real driver output was found (the datasheet
    /// figure is used instead, and `data/README.md` says so).
    pub memory_total_mib: Option<f64>,
    /// The memory the sizing uses, in GiB (81,559 MiB = 79.65 GiB). Filled in at load.
    #[serde(default)]
    pub memory_gib: f64,
    pub memory_type: String,
    /// Peak memory bandwidth, GB/s (10^9 bytes per second).
    pub memory_bandwidth_gbs: f64,
    pub fp16_bf16_dense_tflops: Option<f64>,
    pub fp8_dense_tflops: Option<f64>,
    pub supports_bf16: bool,
    /// FP8 tensor cores (W8A8): NVIDIA compute capability 8.9 and later, AMD CDNA3.
    pub supports_fp8: bool,
    /// NVIDIA CUDA compute capability (8.0 = A100, 8.9 = Ada, 9.0 = Hopper); `None` for AMD.
    pub compute_capability: Option<f64>,
    pub interconnect: String,
    /// Per-GPU scale-up fabric bandwidth (NVLink, or Infinity Fabric for AMD), GB/s; 0 = PCIe only.
    pub nvlink_gbs: f64,
    /// How many GPUs the fabric joins (8 on SXM/OAM boards, 2 or 4 for bridges, 0 for none).
    pub fabric_gpus: u32,
    /// True when the fabric is an optional bridge the provider may not have fitted.
    pub fabric_optional: bool,
    pub pcie_gen: u32,
    /// GPUs (cards) per node: counts above this are multi-node.
    pub gpus_per_node: u32,
    /// Devices software sees per card (2 for MI250X: two 64 GB GCDs).
    pub devices_per_card: u32,
    pub source: String,
}

impl GpuSpec {
    /// Not a GeForce card: DCGM runs only its level-1 diagnostic on GeForce ("Non-datacenter GPUs
    /// support level 1; use higher levels only where support is explicitly documented"), and its
    /// SKU list (`nvvs/diag-skus.yaml`) documents the workstation cards (RTX A6000, RTX 6000 Ada)
    /// for every level.
    pub fn is_datacenter(&self) -> bool {
        let f = self.form_factor.to_ascii_lowercase();
        !(f.contains("consumer") || f.contains("geforce"))
    }

    /// Memory per card in bytes: the driver's `memory.total` (MiB × 2^20), else the datasheet
    /// GB × 10^9 when no driver figure is known.
    pub fn memory_bytes(&self) -> f64 {
        match self.memory_total_mib {
            Some(mib) => mib * MIB,
            None => self.memory_gb * GB,
        }
    }

    /// True for NVIDIA rows (the ones with a CUDA compute capability).
    pub fn is_nvidia(&self) -> bool {
        self.vendor.eq_ignore_ascii_case("NVIDIA")
    }

    /// Name of the scale-up fabric for notes.
    pub fn fabric_name(&self) -> &'static str {
        if self.vendor.eq_ignore_ascii_case("AMD") {
            "Infinity Fabric"
        } else if self.fabric_optional || self.fabric_gpus < 8 {
            "NVLink bridge"
        } else {
            "NVLink"
        }
    }
}

fn parse<T: for<'de> Deserialize<'de>>(what: &str, text: &str) -> Result<Vec<T>, String> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let rows = reader
        .deserialize()
        .enumerate()
        .map(|(i, row)| row.map_err(|e| format!("{what} row {}: {e}", i + 2)))
        .collect::<Result<Vec<T>, String>>()?;
    if rows.is_empty() {
        return Err(format!("{what}: no rows"));
    }
    Ok(rows)
}

pub(crate) fn parse_models(text: &str) -> Result<Vec<ModelSpec>, String> {
    let rows: Vec<ModelSpec> = parse("model_catalog.csv", text)?;
    for m in &rows {
        let ok = m.params_b > 0.0
            && m.active_params_b > 0.0
            && m.active_params_b <= m.params_b
            && m.num_layers > 0
            && m.num_kv_heads > 0
            && m.head_dim > 0
            && m.hidden_size > 0
            && m.sliding_layers + m.chunked_layers <= m.num_layers
            && (m.sliding_layers == 0) == (m.sliding_window == 0)
            && (m.chunked_layers == 0) == (m.attention_chunk_size == 0)
            && (m.attention == Attention::Mla) == (m.kv_lora_rank > 0 && m.qk_rope_head_dim > 0)
            && m.num_attention_heads > 0
            && m.expert_params_b < m.params_b
            && m.experts_per_token <= m.num_experts
            && (m.weight_format != WeightFormat::Mxfp4Moe || m.is_moe())
            && m.kv_layers() <= m.num_layers
            && m.kv_layers() + m.state_layers <= m.num_layers
            && m.sliding_layers + m.chunked_layers <= m.kv_layers()
            && (m.state_kind == StateKind::None) == (m.state_layers == 0)
            && (m.state_kind == StateKind::None
                || m.state_heads > 0
                    && m.state_groups > 0
                    && m.state_head_dim > 0
                    && m.state_size > 0
                    && m.conv_kernel > 1)
            && (m.mtp_layers == 0) == (m.mtp_params_b == 0.0);
        if !ok {
            return Err(format!("model_catalog.csv: inconsistent row {}", m.hf_id));
        }
    }
    Ok(rows)
}

pub(crate) fn parse_gpus(text: &str) -> Result<Vec<GpuSpec>, String> {
    let mut rows: Vec<GpuSpec> = parse("gpu_catalog.csv", text)?;
    for g in &mut rows {
        let nvidia = g.vendor.eq_ignore_ascii_case("NVIDIA");
        // FP8 tensor cores arrive with compute capability 8.9 (Ada); the two columns must agree.
        let fp8_consistent = !nvidia
            || g.compute_capability
                .is_some_and(|cc| g.supports_fp8 == (cc >= FP8_W8A8_MIN_CC));
        // The driver reports a little more than the datasheet's decimal GB (80 GB → 81,559 MiB =
        // 85.5e9 bytes); a figure far from it is a typo, not a measurement.
        let driver_plausible = g
            .memory_total_mib
            .is_none_or(|mib| (0.95..=1.10).contains(&(mib * MIB / (g.memory_gb * GB))));
        if g.memory_gb <= 0.0
            || !driver_plausible
            || g.memory_bandwidth_gbs <= 0.0
            || g.gpus_per_node == 0
            || g.devices_per_card == 0
            || !fp8_consistent
        {
            return Err(format!("gpu_catalog.csv: inconsistent row {}", g.model));
        }
        g.memory_gib = g.memory_bytes() / GIB;
    }
    Ok(rows)
}

static MODELS: LazyLock<Vec<ModelSpec>> =
    LazyLock::new(|| parse_models(MODEL_CSV).unwrap_or_else(|e| panic!("embedded catalogue is malformed: {e}")));

static GPUS: LazyLock<Vec<GpuSpec>> =
    LazyLock::new(|| parse_gpus(GPU_CSV).unwrap_or_else(|e| panic!("embedded catalogue is malformed: {e}")));

/// Every catalogue model, in file order.
pub fn models() -> &'static [ModelSpec] {
    &MODELS
}

/// Every catalogue GPU, in file order.
pub fn gpus() -> &'static [GpuSpec] {
    &GPUS
}

/// The catalogue model with this Hugging Face id (ASCII case-insensitive).
pub fn model_by_hf_id(hf_id: &str) -> Option<&'static ModelSpec> {
    let hf_id = hf_id.trim();
    models().iter().find(|m| m.hf_id.eq_ignore_ascii_case(hf_id))
}

/// The catalogue GPU with this model name, e.g. "H100 SXM" (ASCII case-insensitive).
pub fn gpu_by_name(name: &str) -> Option<&'static GpuSpec> {
    let name = name.trim();
    gpus().iter().find(|g| g.model.eq_ignore_ascii_case(name))
}

#[cfg(test)]
pub(crate) fn raw_csvs() -> (&'static str, &'static str) {
    (MODEL_CSV, GPU_CSV)
}
