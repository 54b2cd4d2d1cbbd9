//! Which tensor-/pipeline-parallel layouts can load a model.
//!
//! vLLM's `QKVParallelLinear` gives each tensor-parallel rank `heads / tp` query heads, and
//! either `kv_heads / tp` KV heads (tp ≤ KV heads) or one replicated KV head (tp > KV heads):
//! so tp must divide the attention heads, and divide or be a multiple of the KV heads. Phi-4's
//! 40 heads over 10 KV heads allow tp 1, 2, 5 and 10, not 4 or 8. A hybrid's state layers split
//! by head too: tp must divide Gated DeltaNet's key and value heads, and Mamba-2's heads and
//! groups (a single group is kept whole on every rank). Tensor parallelism stays inside a node;
//! the remaining factor of the GPU count becomes pipeline stages (at most one per layer).

use super::memory::Shape;
use super::state::StateLayers;

/// Tensor-parallel degree × pipeline stages = the devices used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub tp: u32,
    pub pp: u32,
}

/// The heads a tensor-parallel degree has to split.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Heads {
    /// Query heads (unknown: not checked).
    pub attention: Option<u32>,
    pub kv: u32,
    /// A hybrid's state layers.
    pub state: Option<StateLayers>,
}

impl Heads {
    pub fn of(shape: &Shape) -> Self {
        Self {
            attention: shape.heads,
            kv: shape.kv_heads,
            state: shape.state,
        }
    }

    /// Attention heads only (plain models, tests).
    pub fn attention(heads: Option<u32>, kv: u32) -> Self {
        Self {
            attention: heads,
            kv,
            state: None,
        }
    }
}

/// Whether `tp` ranks can split `heads` query heads (unknown: not checked) and `kv_heads`.
pub fn tp_valid(tp: u32, heads: Option<u32>, kv_heads: u32) -> bool {
    tp > 0 && heads.is_none_or(|h| h % tp == 0) && (kv_heads.is_multiple_of(tp) || tp.is_multiple_of(kv_heads))
}

/// Whether `tp` ranks can split the attention heads and, for a hybrid, its state layers' heads.
pub fn tp_valid_for(tp: u32, heads: &Heads) -> bool {
    tp_valid(tp, heads.attention, heads.kv) && heads.state.is_none_or(|s| s.tp_valid(tp))
}

/// The valid tensor-parallel degrees from 1 to `up_to`, for notes.
pub fn valid_degrees(heads: &Heads, up_to: u32) -> Vec<u32> {
    (1..=up_to).filter(|t| tp_valid_for(*t, heads)).collect()
}

/// The layout for `devices` in all, `per_node` of them in each node: the largest valid
/// tensor-parallel degree that divides the devices of a node, the rest pipeline stages.
/// `None` when even that needs more stages than the model has layers.
pub fn layout(devices: u32, per_node: u32, heads: &Heads, layers: u32) -> Option<Layout> {
    let tp = (1..=per_node)
        .rev()
        .find(|t| per_node.is_multiple_of(*t) && devices.is_multiple_of(*t) && tp_valid_for(*t, heads))?;
    let pp = devices / tp;
    (pp <= layers.max(1)).then_some(Layout { tp, pp })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_parallel_follows_the_heads() {
        let h = Heads::attention;
        // Phi-4: 40 heads, 10 KV heads.
        assert_eq!(valid_degrees(&h(Some(40), 10), 10), [1, 2, 5, 10]);
        // Llama 3.1 70B: 64 heads, 8 KV heads — TP 16 replicates each KV head twice.
        assert_eq!(valid_degrees(&h(Some(64), 8), 16), [1, 2, 4, 8, 16]);
        // Qwen2.5-7B: 28 heads, 4 KV heads: TP 8 cannot split 28 heads.
        assert!(!tp_valid(8, Some(28), 4));
        assert_eq!(layout(8, 8, &h(Some(28), 4), 28), Some(Layout { tp: 4, pp: 2 }));
        assert_eq!(layout(8, 8, &h(Some(40), 10), 40), Some(Layout { tp: 2, pp: 4 }));
        // Two nodes of 8: TP inside a node, 2 stages across.
        assert_eq!(layout(16, 8, &h(Some(64), 8), 80), Some(Layout { tp: 8, pp: 2 }));
        // More stages than layers cannot load.
        assert_eq!(layout(64, 8, &h(None, 1), 4), None);
    }
}
