//! Which tensor-/pipeline-parallel layouts can load a model.
//!
//! vLLM's `QKVParallelLinear` gives each tensor-parallel rank `heads / tp` query heads, and
//! either `kv_heads / tp` KV heads (tp ≤ KV heads) or one replicated KV head (tp > KV heads):
//! so tp must divide the attention heads, and divide or be a multiple of the KV heads. Phi-4's
//! 40 heads over 10 KV heads allow tp 1, 2, 5 and 10, not 4 or 8. Tensor parallelism stays
//! inside a node; the remaining factor of the GPU count becomes pipeline stages (at most one
//! per layer).

/// Tensor-parallel degree × pipeline stages = the devices used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub tp: u32,
    pub pp: u32,
}

/// Whether `tp` ranks can split `heads` query heads (unknown: not checked) and `kv_heads`.
pub fn tp_valid(tp: u32, heads: Option<u32>, kv_heads: u32) -> bool {
    tp > 0 && heads.is_none_or(|h| h % tp == 0) && (kv_heads.is_multiple_of(tp) || tp.is_multiple_of(kv_heads))
}

/// The valid tensor-parallel degrees from 1 to `up_to`, for notes.
pub fn valid_degrees(heads: Option<u32>, kv_heads: u32, up_to: u32) -> Vec<u32> {
    (1..=up_to).filter(|t| tp_valid(*t, heads, kv_heads)).collect()
}

/// The layout for `devices` in all, `per_node` of them in each node: the largest valid
/// tensor-parallel degree that divides the devices of a node, the rest pipeline stages.
/// `None` when even that needs more stages than the model has layers.
pub fn layout(devices: u32, per_node: u32, heads: Option<u32>, kv_heads: u32, layers: u32) -> Option<Layout> {
    let tp = (1..=per_node)
        .rev()
        .find(|t| per_node.is_multiple_of(*t) && devices.is_multiple_of(*t) && tp_valid(*t, heads, kv_heads))?;
    let pp = devices / tp;
    (pp <= layers.max(1)).then_some(Layout { tp, pp })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_parallel_follows_the_heads() {
        // Phi-4: 40 heads, 10 KV heads.
        assert_eq!(valid_degrees(Some(40), 10, 10), [1, 2, 5, 10]);
        // Llama 3.1 70B: 64 heads, 8 KV heads — TP 16 replicates each KV head twice.
        assert_eq!(valid_degrees(Some(64), 8, 16), [1, 2, 4, 8, 16]);
        // Qwen2.5-7B: 28 heads, 4 KV heads: TP 8 cannot split 28 heads.
        assert!(!tp_valid(8, Some(28), 4));
        assert_eq!(layout(8, 8, Some(28), 4, 28), Some(Layout { tp: 4, pp: 2 }));
        assert_eq!(layout(8, 8, Some(40), 10, 40), Some(Layout { tp: 2, pp: 4 }));
        // Two nodes of 8: TP inside a node, 2 stages across.
        assert_eq!(layout(16, 8, Some(64), 8, 80), Some(Layout { tp: 8, pp: 2 }));
        // More stages than layers cannot load.
        assert_eq!(layout(64, 8, None, 1, 4), None);
    }
}
