//! Whether a GPU runs the brief's precision, per vLLM's documented kernel support, and what
//! to use instead when it does not.
//!
//! * bf16 needs bf16 tensor cores: V100 and T4 have none (fp16 takes the same memory).
//! * fp8 W8A8 needs compute capability 8.9 (Ada, Hopper, Blackwell) or AMD CDNA3 (vLLM "FP8
//!   W8A8"). From 7.5 (Turing, Ampere) vLLM runs fp8 checkpoints weight-only (W8A16, FP8
//!   Marlin): the memory of fp8, 16-bit compute. fp8 MoE models need 8.9 outright: the fused
//!   MoE kernel has no weight-only path (Red Hat AI, neuralmagic/DeepSeek-Coder-V2-Instruct-FP8
//!   discussion 1).
//! * int8 W8A8 needs INT8 tensor cores, 7.5 and later; AWQ needs 7.5 as well, GPTQ runs on
//!   Volta (vLLM "Supported Hardware" table).

use super::catalog::{GpuSpec, FP8_W8A8_MIN_CC};
use super::Precision;

/// Turing: INT8 tensor cores, FP8 Marlin, AWQ.
pub const TURING_CC: f64 = 7.5;

/// How `gpu` runs a precision.
#[derive(Debug, Clone, PartialEq)]
pub enum Support {
    Native,
    /// It loads, in a way worth knowing.
    Loads(String),
    /// It does not load; `instead` has the same or the next memory footprint.
    Refused {
        why: String,
        instead: Precision,
    },
}

fn sixteen_bit(gpu: &GpuSpec) -> Precision {
    if gpu.supports_bf16 {
        Precision::Bf16
    } else {
        Precision::Fp16
    }
}

fn cc_text(gpu: &GpuSpec) -> String {
    gpu.compute_capability
        .map_or_else(|| "this GPU".to_owned(), |cc| format!("compute capability {cc:.1}"))
}

/// Whether `gpu` runs `precision` for a model that is (`moe`) or is not a mixture of experts.
pub fn support(precision: Precision, moe: bool, gpu: &GpuSpec) -> Support {
    let cc = gpu.compute_capability;
    let below = |min: f64| gpu.is_nvidia() && cc.is_none_or(|cc| cc < min);
    match precision {
        Precision::Fp32 | Precision::Fp16 => Support::Native,
        Precision::Bf16 if gpu.supports_bf16 => Support::Native,
        Precision::Bf16 => Support::Refused {
            why: format!("the {} has no bf16", gpu.model),
            instead: Precision::Fp16,
        },
        Precision::Fp8 if gpu.supports_fp8 => Support::Native,
        Precision::Fp8 if moe && gpu.is_nvidia() => Support::Refused {
            why: format!(
                "fp8 mixture-of-experts weights need compute capability {FP8_W8A8_MIN_CC} (Ada, Hopper, Blackwell) in vLLM; the {} has {}",
                gpu.model,
                cc_text(gpu)
            ),
            instead: sixteen_bit(gpu),
        },
        Precision::Fp8 if gpu.is_nvidia() && !below(TURING_CC) => Support::Loads(format!(
            "weight-only fp8 (W8A16 through FP8 Marlin): fp8 memory, 16-bit compute; W8A8 needs compute capability {FP8_W8A8_MIN_CC}"
        )),
        Precision::Fp8 => Support::Refused {
            why: format!("the {} runs no fp8 (W8A8 needs compute capability {FP8_W8A8_MIN_CC}, weight-only fp8 {TURING_CC})", gpu.model),
            instead: sixteen_bit(gpu),
        },
        Precision::Int8 if below(TURING_CC) => Support::Refused {
            why: format!(
                "the {} has no INT8 tensor cores (int8 W8A8 needs compute capability {TURING_CC})",
                gpu.model
            ),
            instead: sixteen_bit(gpu),
        },
        Precision::Int4 if below(TURING_CC) => Support::Loads(format!(
            "use a GPTQ checkpoint: AWQ needs compute capability {TURING_CC}"
        )),
        Precision::Int8 | Precision::Int4 => Support::Native,
    }
}

#[cfg(test)]
mod tests {
    use super::super::gpu_by_name;
    use super::*;

    #[test]
    fn precision_support_follows_compute_capability() {
        let g = |n: &str| gpu_by_name(n).unwrap();
        assert!(matches!(
            support(Precision::Bf16, false, g("T4")),
            Support::Refused {
                instead: Precision::Fp16,
                ..
            }
        ));
        assert_eq!(support(Precision::Fp16, false, g("T4")), Support::Native);
        assert_eq!(support(Precision::Fp8, true, g("H100 SXM")), Support::Native);
        assert_eq!(support(Precision::Fp8, true, g("L40S")), Support::Native);
        assert!(matches!(
            support(Precision::Fp8, true, g("A100 80GB SXM")),
            Support::Refused {
                instead: Precision::Bf16,
                ..
            }
        ));
        assert!(matches!(
            support(Precision::Fp8, false, g("A100 80GB SXM")),
            Support::Loads(_)
        ));
        assert!(matches!(
            support(Precision::Fp8, false, g("V100 32GB SXM2")),
            Support::Refused {
                instead: Precision::Fp16,
                ..
            }
        ));
        assert!(matches!(
            support(Precision::Fp8, false, g("Instinct MI250X")),
            Support::Refused {
                instead: Precision::Bf16,
                ..
            }
        ));
        assert_eq!(support(Precision::Fp8, true, g("Instinct MI300X")), Support::Native);
        assert!(matches!(
            support(Precision::Int8, false, g("V100 32GB PCIe")),
            Support::Refused { .. }
        ));
        assert_eq!(support(Precision::Int8, false, g("T4")), Support::Native);
        assert!(matches!(
            support(Precision::Int4, false, g("V100 32GB PCIe")),
            Support::Loads(_)
        ));
    }
}
