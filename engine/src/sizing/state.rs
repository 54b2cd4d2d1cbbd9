//! Layers that keep a constant state per sequence instead of a KV cache that grows with every
//! token: Gated DeltaNet (linear attention: Qwen3-Next, Qwen3.5) and Mamba-2 (Nemotron-H, Jamba,
//! Granite-H). Their memory is fixed per sequence whatever the context (vLLM `MambaSpec`):
//!
//! * **Gated DeltaNet**: recurrent state `value_heads × key_head_dim × value_head_dim`, float32
//!   unless the config says otherwise (`mamba_ssm_dtype`), plus the convolution state
//!   `(conv_kernel − 1) × (2 × key_heads × key_head_dim + value_heads × value_head_dim)` in the
//!   model's dtype.
//! * **Mamba-2**: SSM state `heads × head_dim × d_state`, in `mamba_ssm_cache_dtype` /
//!   `mamba_ssm_dtype` when the config names one (float32 for Nemotron-H), else the model's
//!   dtype; convolution state `(conv_kernel − 1) × (heads × head_dim + 2 × n_groups × d_state)`.
//!
//! Both split across tensor-parallel ranks by head, so a degree must divide them (vLLM
//! `MambaMixer2`: the heads, and the groups unless there is a single group, which every rank
//! keeps; Gated DeltaNet: its key and value heads).

use serde::{Deserialize, Serialize};

/// Which recurrent mixer a state layer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateKind {
    /// No state layers (catalogue rows of plain attention models).
    None,
    /// Gated DeltaNet linear attention.
    Gdn,
    /// Mamba-2 selective state space.
    Mamba2,
}

impl StateKind {
    /// What a person reads for the kind.
    pub fn label(&self) -> &'static str {
        match self {
            Self::None => "attention",
            Self::Gdn => "Gated DeltaNet (linear attention)",
            Self::Mamba2 => "Mamba-2",
        }
    }
}

/// The state layers of a hybrid model and the dimensions their state is sized from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateLayers {
    pub kind: StateKind,
    /// How many layers keep a state instead of a KV cache.
    pub layers: u32,
    /// Gated DeltaNet: value heads; Mamba-2: heads.
    pub heads: u32,
    /// Gated DeltaNet: key heads; Mamba-2: groups (`n_groups`).
    pub groups: u32,
    /// Gated DeltaNet: key head dim; Mamba-2: head dim.
    pub head_dim: u32,
    /// Gated DeltaNet: value head dim; Mamba-2: `d_state` (`ssm_state_size`).
    pub state_size: u32,
    pub conv_kernel: u32,
    /// Bytes per element of the recurrent / SSM state; `None` = the model's dtype.
    pub ssm_bytes: Option<f64>,
}

impl StateLayers {
    /// Elements of the recurrent (GDN) or SSM (Mamba-2) state of one layer and sequence.
    pub fn ssm_elements(&self) -> f64 {
        f64::from(self.heads) * f64::from(self.head_dim) * f64::from(self.state_size)
    }

    /// Elements of the convolution state of one layer and sequence: the last `conv_kernel − 1`
    /// inputs of the channels the short convolution runs over.
    pub fn conv_elements(&self) -> f64 {
        let channels = match self.kind {
            StateKind::Gdn => {
                2.0 * f64::from(self.groups) * f64::from(self.head_dim)
                    + f64::from(self.heads) * f64::from(self.state_size)
            }
            StateKind::Mamba2 | StateKind::None => {
                f64::from(self.heads) * f64::from(self.head_dim)
                    + 2.0 * f64::from(self.groups) * f64::from(self.state_size)
            }
        };
        f64::from(self.conv_kernel.saturating_sub(1)) * channels
    }

    /// Bytes one layer keeps for one sequence, the model's activations being `act_bytes` wide.
    pub fn bytes_per_layer(&self, act_bytes: f64) -> f64 {
        self.ssm_elements() * self.ssm_bytes.unwrap_or(act_bytes) + self.conv_elements() * act_bytes
    }

    /// Bytes every state layer keeps for one sequence, whatever its length.
    pub fn bytes_per_sequence(&self, act_bytes: f64) -> f64 {
        f64::from(self.layers) * self.bytes_per_layer(act_bytes)
    }

    /// Whether `tp` ranks can split these layers' heads.
    pub fn tp_valid(&self, tp: u32) -> bool {
        if tp == 0 {
            return false;
        }
        match self.kind {
            StateKind::Gdn => self.heads.is_multiple_of(tp) && self.groups.is_multiple_of(tp),
            StateKind::Mamba2 | StateKind::None => {
                self.heads.is_multiple_of(tp) && (self.groups.is_multiple_of(tp) || self.groups == 1)
            }
        }
    }

    /// The heads that bound tensor parallelism, as notes name them.
    pub fn heads_text(&self) -> String {
        match self.kind {
            StateKind::Gdn => format!(
                "{} linear-attention key heads and {} value heads",
                self.groups, self.heads
            ),
            StateKind::Mamba2 | StateKind::None => {
                format!("{} Mamba heads in {} groups", self.heads, self.groups)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gated_deltanet_and_mamba2_states_follow_their_formulas() {
        // Qwen3.5-35B-A3B's Gated DeltaNet: 32 value heads × 128 × 128 fp32 = 2 MiB, conv
        // 3 × (2 × 16 × 128 + 32 × 128) × 2 B = 49,152 B.
        let gdn = StateLayers {
            kind: StateKind::Gdn,
            layers: 30,
            heads: 32,
            groups: 16,
            head_dim: 128,
            state_size: 128,
            conv_kernel: 4,
            ssm_bytes: Some(4.0),
        };
        assert_eq!(gdn.bytes_per_layer(2.0), 2_097_152.0 + 49_152.0);
        assert!(gdn.tp_valid(8) && !gdn.tp_valid(3) && !gdn.tp_valid(32));
        // Nemotron-3 Nano's Mamba-2: 64 heads × 64 × 128 fp32, conv 3 × (4096 + 2 × 8 × 128) × 2 B.
        let mamba = StateLayers {
            kind: StateKind::Mamba2,
            layers: 23,
            heads: 64,
            groups: 8,
            head_dim: 64,
            state_size: 128,
            conv_kernel: 4,
            ssm_bytes: Some(4.0),
        };
        assert_eq!(
            mamba.bytes_per_layer(2.0),
            64.0 * 64.0 * 128.0 * 4.0 + 3.0 * 6144.0 * 2.0
        );
        assert!(mamba.tp_valid(8) && !mamba.tp_valid(16));
        // One group is kept whole on every rank (vLLM replicates it): only the heads bind.
        let one_group = StateLayers { groups: 1, ..mamba };
        assert!(one_group.tp_valid(16));
        // Without a dtype of its own the state is in the model's.
        let model_dtype = StateLayers {
            ssm_bytes: None,
            ..mamba
        };
        assert_eq!(
            model_dtype.bytes_per_layer(2.0),
            (64.0 * 64.0 * 128.0 + 3.0 * 6144.0) * 2.0
        );
    }
}
