//! Worked examples, computed by hand in the comments (GB = 1e9 B, GiB = 2^30 B). Fit test per
//! GPU: weights/count + KV per GPU + max(1.5 GB, 5 % of memory) ≤ 0.9 × memory.

use super::tests::{close, input, option, RT};
use super::*;

#[test]
fn llama_70b_bf16_8k_by_16() {
    let s = size(&input(
        RT,
        Precision::Bf16,
        "meta-llama/Llama-3.1-70B-Instruct",
        8192,
        16,
    ));
    // weights 70.55e9 × 2 B = 141.1e9 B = 131.41 GiB.
    close(s.weights_gib, 131.41, 0.01);
    // KV 2 × 80 × 8 × 128 × 2 B = 327,680 B = 320 KiB/token; × 8192 × 16 = 40 GiB exactly.
    close(s.kv_cache_gib, 40.0, 1e-9);
    // Best: MI325X × 1 (256 GB): need 141.1 + 42.95 + reserve 12.8 = 196.85 GB ≤ 0.9 × 256 = 230.4.
    // Rented 256 GB ties with 8 × RTX 5090, 8 × V100 32GB and 16 × T4: one card wins on count.
    let first = &s.options[0];
    assert_eq!(
        (first.gpu.as_str(), first.count, first.fits),
        ("Instinct MI325X", 1, true)
    );
    close(first.headroom_pct, 14.56, 0.01); // (230.4 − 196.85) / 230.4
    assert_eq!(first.interconnect_note, None);
    // overhead = 12.8 GB reserve + 25.6 GB margin = 38.4 GB = 35.76 GiB; total 131.41 + 40 + 35.76.
    close(s.overhead_gib, 35.76, 0.01);
    close(s.total_gib, 207.17, 0.01);
    // H100 SXM: × 2 needs 70.55 + 21.47 + 4 = 96.0 GB > 72; × 4 needs 35.275 + 10.737 + 4 = 50.01.
    let h100 = option(&s, "H100 SXM");
    assert_eq!((h100.count, h100.fits), (4, true));
    close(h100.headroom_pct, 30.54, 0.01); // (72 − 50.01) / 72
                                           // decode: 16 × 3350e9 / (141.1e9/4 + 42.95e9/4) = 16 × 3350 / 46.012 = 1164.9 tok/s.
    close(h100.decode_tokens_per_s_max, 1164.9, 0.1);
    assert!(h100.interconnect_note.as_deref().unwrap().contains("NVLink"));
    // H200 × 2: 70.55 + 21.47 + 7.05 = 99.07 ≤ 126.9 → headroom 21.93 %.
    let h200 = option(&s, "H200 SXM");
    assert_eq!(h200.count, 2);
    close(h200.headroom_pct, 21.93, 0.01);
}

#[test]
fn llama_8b_int4_keeps_embeddings_16_bit() {
    let s = size(&input(RT, Precision::Int4, "meta-llama/Llama-3.1-8B-Instruct", 8192, 4));
    // embed + lm_head (untied): 2 × 128256 × 4096 = 1,050,673,152 params × 2 B = 2.1013e9 B;
    // rest 8.03e9 − 1.0507e9 = 6.9793e9 × 0.51953125 (4.15625 bits, g128) = 3.6260e9 B;
    // total 5.7273e9 B = 5.33 GiB (sizing.md: "~5.7 GB, not 4 GB").
    close(s.weights_gib, 5.33, 0.01);
    // KV stays 16-bit: 131,072 B/token × 8192 × 4 = 4 GiB.
    close(s.kv_cache_gib, 4.0, 1e-9);
    // L4 × 1: need 5.727 + 4.295 + 1.5 = 11.52 GB ≤ 21.6 → headroom 46.66 %;
    // decode 4 × 300e9 / 10.022e9 = 119.7 tok/s.
    let l4 = option(&s, "L4");
    assert_eq!((l4.count, l4.fits), (1, true));
    close(l4.headroom_pct, 46.66, 0.01);
    close(l4.decode_tokens_per_s_max, 119.7, 0.1);
    // Without the catalogue every parameter is 4-bit: 8.03e9 × 0.51953125 = 3.885 GiB.
    let mut bare = input(RT, Precision::Int4, "meta-llama/Llama-3.1-8B-Instruct", 8192, 4);
    bare.architecture = Architecture::bare(32, 8, 128);
    close(size(&bare).weights_gib, 3.89, 0.01);
}

#[test]
fn mixtral_weights_from_total_decode_from_active() {
    let s = size(&input(
        RT,
        Precision::Bf16,
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        4096,
        1,
    ));
    // All 46.70e9 params resident: × 2 B = 93.4e9 B = 86.99 GiB.
    close(s.weights_gib, 86.99, 0.01);
    // H100 SXM × 1: 93.4 GB > 72 → × 2 (46.7 + KV 0.537/2 + 4 = 50.97 GB).
    let h100 = option(&s, "H100 SXM");
    assert_eq!(h100.count, 2);
    // Batch-1 read: shared (46.70 − 45.097)e9 × 2 = 3.206e9 B + experts 90.194e9 B × 2/8
    // = 25.7545e9 B (12.88B params ≈ active); per GPU 12.877e9 + KV 0.268e9 = 13.146e9 B;
    // 3350e9 / 13.146e9 = 254.8 tok/s (dense reading would give 3350 / 46.97 = 71.3).
    close(h100.decode_tokens_per_s_max, 254.8, 0.1);
    // At batch 16 the tokens touch 1 − 0.75^16 ≈ 99 % of the experts: per-sequence speed drops.
    let busy = size(&input(
        RT,
        Precision::Bf16,
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        4096,
        16,
    ));
    let busy_h100 = option(&busy, "H100 SXM");
    assert!(busy_h100.decode_tokens_per_s_max / 16.0 < 80.0);
}

#[test]
fn sliding_window_layers_cap_their_kv() {
    // Gemma 2 9B at 8192 tokens (> window 4096): 2 × 8 × 256 × 2 B = 8192 B per layer-token;
    // 21 global layers × 8192 tokens + 21 local layers × 4096 = 258,048 layer-tokens
    // → 2,113,929,216 B = 1.96875 GiB per sequence (the full-attention bound is 2.625 GiB).
    let s = size(&input(RT, Precision::Bf16, "google/gemma-2-9b-it", 8192, 2));
    close(s.kv_cache_gib, 2.0 * 1.96875, 0.005);
    // gpt-oss-120b at 32768 × 4: per layer-token 2 × 8 × 64 × 2 = 2048 B;
    // (18 × 32768 + 18 × 128) × 2048 × 4 = 4.5176 GiB (full bound 9 GiB).
    let g = size(&input(RT, Precision::Bf16, "openai/gpt-oss-120b", 32768, 4));
    close(g.kv_cache_gib, 4.52, 0.005);
    // MXFP4 experts 114.702e9 × 0.53125 = 60.935e9 B; BF16 embeddings 1.1583e9 × 2 and the rest
    // 0.9697e9 × 2 → 65.19e9 B = 60.71 GiB (the gpt-oss README: 60.8 GiB checkpoint).
    close(g.weights_gib, 60.71, 0.01);
    // H100 SXM × 1: 65.19 + 4.85 + 4 = 74.04 GB > 72 → × 2.
    assert_eq!(option(&g, "H100 SXM").count, 2);
}

#[test]
fn deepseek_v3_mla_uses_the_compressed_latent() {
    let s = size(&input(RT, Precision::Fp8, "deepseek-ai/DeepSeek-V3", 32768, 8));
    // 70,272 B/token × 32768 × 8 = 18,421,383,168 B = 17.16 GiB (the expanded 128-head form
    // would be 976 GiB).
    close(s.kv_cache_gib, 17.16, 0.01);
    // FP8: experts 653.909e9 × 1 + embeddings 1.8534e9 × 2 + rest 15.2376e9 × 1 = 672.853e9 B.
    close(s.weights_gib, 626.64, 0.01);
    // The latent is not split by TP: H200 × 8 holds 84.107 + 18.421 + 7.05 = 109.58 GB ≤ 126.9.
    let h200 = option(&s, "H200 SXM");
    assert_eq!(h200.count, 8);
    close(h200.headroom_pct, 13.65, 0.01);
    // H100 × 8 = 106.5 GB > 72; × 16 (2 nodes, PP 2 halves the KV): 42.05 + 9.21 + 4 = 55.26.
    let h100 = option(&s, "H100 SXM");
    assert_eq!(h100.count, 16);
    close(h100.headroom_pct, 23.24, 0.01);
    assert!(h100.interconnect_note.as_deref().unwrap().contains("multi-node"));
    // MI325X × 4 (1024 GB) rents least: 168.21 + 18.42 + 12.8 = 199.43 ≤ 230.4.
    assert_eq!((s.options[0].gpu.as_str(), s.options[0].count), ("Instinct MI325X", 4));
}

#[test]
fn training_8b_is_18_bytes_per_param_plus_activations() {
    let s = size(&input(
        WorkloadKind::Training,
        Precision::Bf16,
        "meta-llama/Llama-3.1-8B-Instruct",
        4096,
        8,
    ));
    // 18 × 8.03e9 = 144.54e9 B = 134.61 GiB (weights + grads + Adam).
    close(s.weights_gib, 134.61, 0.01);
    // Activations per sequence: 34 × 4096 × 4096 × 32 = 17 GiB + fp32 logits 4096 × 128256 × 4
    // = 2.1013e9 B → 20.355e9 B; × 8 sequences = 151.66 GiB.
    close(s.kv_cache_gib, 151.66, 0.01);
    // H100 SXM × 4: 36.135 + 2 seqs × 20.355 + 4 = 80.84 GB > 72; × 8: 18.07 + 20.35 + 4 = 42.42.
    let h100 = option(&s, "H100 SXM");
    assert_eq!(h100.count, 8);
    close(h100.headroom_pct, 41.08, 0.01);
    assert_eq!(h100.decode_tokens_per_s_max, 0.0);
    assert!(h100.interconnect_note.as_deref().unwrap().contains("FSDP"));
    // H100 NVL × 4 (376 GB): 36.135 + 40.71 + 4.7 = 81.54 ≤ 84.6 is the least memory rented.
    assert_eq!((s.options[0].gpu.as_str(), s.options[0].count), ("H100 NVL", 4));
    assert!(s.billing_advice.contains("checkpoint"));
}

#[test]
fn qlora_70b() {
    let s = size(&input(
        WorkloadKind::Finetune,
        Precision::Int4,
        "meta-llama/Llama-3.1-70B-Instruct",
        4096,
        1,
    ));
    // Base: embeddings 2 × 128256 × 8192 = 2.1013e9 params × 2 B = 4.2027e9 B;
    // rest 68.4487e9 × 0.515869 (NF4 + double quant) = 35.3106e9 B.
    // LoRA r=16 per layer: q,o 2 × 16 × (8192 + 8192) + k,v 2 × 16 × (8192 + 1024)
    // + gate,up,down 3 × 16 × (8192 + 28672) = 2,588,672; × 80 = 207.09M × 12 B = 2.485e9 B.
    // Total 41.998e9 B = 39.11 GiB.
    close(s.weights_gib, 39.11, 0.01);
    // Activations (checkpointing): 2 × 4096 × 8192 × 80 + 34 × 4096 × 8192 + 4096 × 128256 × 4
    // = 8,610,906,112 B = 8.02 GiB.
    close(s.kv_cache_gib, 8.02, 0.01);
    // A100 80GB: 42.0 + 8.61 + 4 = 54.61 GB ≤ 72 on one GPU, headroom 24.15 %.
    let a100 = option(&s, "A100 80GB SXM");
    assert_eq!((a100.count, a100.fits), (1, true));
    close(a100.headroom_pct, 24.15, 0.01);
}

#[test]
fn lora_params_match_sizing_md() {
    // sizing.md §5: Llama 3.1 8B, r = 16 on all 7 projections → 41.9M.
    let i = input(
        WorkloadKind::Finetune,
        Precision::Bf16,
        "meta-llama/Llama-3.1-8B-Instruct",
        2048,
        1,
    );
    assert_eq!(memory::lora_params(&i), 41_943_040.0);
}

#[test]
fn one_full_node_with_a_higher_utilisation_before_two_nodes() {
    let s = size(&input(
        RT,
        Precision::Bf16,
        "meta-llama/Llama-3.1-405B-Instruct",
        32768,
        10,
    ));
    // H200 × 8 (TP 8): weights 405.85e9 × 2 / 8 = 101.46 GB; KV 516,096 B × 32768 × 10 / 8
    // = 21.14 GB; reserve 7.05 GB → 129.65 GB > 0.9 × 141 = 126.9, but ≤ 0.95 × 141 = 133.95.
    let need = 405.85e9 * 2.0 / 8.0 + 516_096.0 * 32768.0 * 10.0 / 8.0 + 7.05e9;
    assert!(need > 126.9e9 && need <= 133.95e9);
    let h200 = option(&s, "H200 SXM");
    assert_eq!((h200.count, h200.fits, h200.tensor_parallel), (8, true, 8));
    assert!(h200
        .load_note
        .as_deref()
        .unwrap()
        .contains("--gpu-memory-utilization 0.95"));
    close(h200.headroom_pct, (133.95e9 - need) / 133.95e9 * 100.0, 0.01);
    // H100 × 8 is far short (101.46 GB of weights alone > 80): two nodes, no setting.
    let h100 = option(&s, "H100 SXM");
    assert_eq!((h100.count, h100.load_note.as_deref()), (16, None));
}

#[test]
fn kv_capacity_is_the_memory_left_over_the_bytes_per_token() {
    let i = input(RT, Precision::Bf16, "meta-llama/Llama-3.1-70B-Instruct", 32768, 1);
    let h100 = gpu_by_name("H100 SXM").unwrap();
    let c = kv_capacity(&i, h100, 4, 0.9).unwrap();
    // Per GPU: 0.9 × 80 GB − 141.1 GB / 4 − 4 GB reserve = 32.725 GB; TP 4 splits the 8 KV
    // heads, so the four GPUs hold 130.9 GB of distinct KV at 327,680 B per token.
    let capacity: f64 = 4.0 * (72e9 - 70.55e9 * 2.0 / 4.0 - 4e9);
    assert_eq!(c.tokens, (capacity / 327_680.0).floor() as u64);
    close(c.max_concurrency, capacity / (327_680.0 * 32768.0), 0.01);
    // vLLM's own utilisation, when the run sets it, moves it: at 0.92 each GPU has 1.6 GB more.
    let c92 = kv_capacity(&i, h100, 4, 0.92).unwrap();
    assert_eq!(c92.tokens, ((capacity + 4.0 * 1.6e9) / 327_680.0).floor() as u64);
    // One H100 cannot even hold the weights: no capacity, not a negative one.
    assert_eq!(kv_capacity(&i, h100, 1, 0.9).unwrap().tokens, 0);
    // Training has no KV cache.
    let t = input(
        WorkloadKind::Training,
        Precision::Bf16,
        "meta-llama/Llama-3.1-8B-Instruct",
        4096,
        1,
    );
    assert_eq!(kv_capacity(&t, h100, 1, 0.9), None);
}
