//! TEMPORARY interface stub; replaced by the real engine.
use serde::{Deserialize, Serialize};
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
impl std::str::FromStr for WorkloadKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|k| k.as_str() == s).ok_or(())
    }
}
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
impl std::str::FromStr for Precision {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|k| k.as_str() == s).ok_or(())
    }
}
#[derive(Debug)]
pub struct ModelSpec {
    pub name: String,
    pub hf_id: String,
    pub params_b: f64,
    pub active_params_b: f64,
    pub num_layers: u32,
    pub num_kv_heads: u32,
    pub head_dim: u32,
    pub max_context: u64,
}
#[derive(Debug)]
pub struct GpuSpec {
    pub vendor: String,
    pub model: String,
    pub memory_gib: f64,
    pub memory_bandwidth_gbs: f64,
    pub nvlink_gbs: f64,
    pub interconnect: String,
}
pub fn models() -> &'static [ModelSpec] {
    &[]
}
pub fn gpus() -> &'static [GpuSpec] {
    &[]
}
pub fn model_by_hf_id(_h: &str) -> Option<&'static ModelSpec> {
    None
}
pub fn gpu_by_name(_h: &str) -> Option<&'static GpuSpec> {
    None
}
#[derive(Debug, Clone)]
pub struct SizingInput {
    pub workload_kind: WorkloadKind,
    pub precision: Precision,
    pub params_b: f64,
    pub context_length: u64,
    pub concurrency: u64,
    pub num_layers: u32,
    pub num_kv_heads: u32,
    pub head_dim: u32,
    pub catalog_model: Option<&'static ModelSpec>,
}
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sizing {
    pub weights_gib: f64,
    pub kv_cache_gib: f64,
    pub overhead_gib: f64,
    pub total_gib: f64,
    pub options: Vec<SizingOption>,
    pub billing_advice: String,
}
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizingOption {
    pub gpu: String,
    pub memory_gib: f64,
    pub count: u32,
    pub fits: bool,
    pub headroom_pct: f64,
    pub decode_tokens_per_s_max: f64,
    pub interconnect_note: Option<String>,
}
pub fn size(i: &SizingInput) -> Sizing {
    Sizing {
        weights_gib: i.params_b * 2.0,
        kv_cache_gib: 0.0,
        overhead_gib: 0.0,
        total_gib: 0.0,
        options: vec![],
        billing_advice: String::new(),
    }
}
