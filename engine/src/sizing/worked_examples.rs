//! Worked examples, computed by hand in the comments and the tests (GB = 1e9 B, GiB = 2^30 B,
//! MiB = 2^20 B). Each GPU's memory is what its driver reports (`nvidia-smi` `memory.total`, e.g.
//! 81,559 MiB for an H100 SXM); fit test per GPU: weights/count + KV per GPU + max(1.5 GB, 5 % of
//! memory) ≤ 0.9 × memory.

use super::tests::{close, input, option, MIB, RT};
use super::*;

const GIB_F: f64 = 1_073_741_824.0;

/// Driver-reported memory of the GPUs these examples use, in bytes.
const H100: f64 = 81_559.0 * MIB;
const H200: f64 = 143_771.0 * MIB;
const A100_80: f64 = 81_920.0 * MIB;
const L4: f64 = 23_034.0 * MIB;
const H100_NVL: f64 = 95_830.0 * MIB;

/// Headroom in % of the usable memory (`utilisation × memory`) for a need in bytes.
fn headroom(memory: f64, utilisation: f64, need: f64) -> f64 {
    (utilisation * memory - need) / (utilisation * memory) * 100.0
}

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
    // H100 SXM (81,559 MiB = 85.52 GB; usable 76.97 GB, reserve 4.28 GB): × 2 needs
    // 70.55 + 21.47 + 4.28 = 96.3 GB > 76.97; × 4 needs 35.275 + 10.737 + 4.28 = 50.29 GB.
    let kv = 327_680.0 * 8192.0 * 16.0;
    let h100 = option(&s, "H100 SXM");
    assert_eq!((h100.count, h100.fits), (4, true));
    close(
        h100.headroom_pct,
        headroom(H100, 0.9, 141.1e9 / 4.0 + kv / 4.0 + 0.05 * H100),
        0.01,
    ); // 34.66 %
       // decode: 16 × 3350e9 / (141.1e9/4 + 42.95e9/4) = 16 × 3350 / 46.012 = 1164.9 tok/s.
    close(h100.decode_tokens_per_s_max, 1164.9, 0.1);
    assert!(h100.interconnect_note.as_deref().unwrap().contains("NVLink"));
    // H200 × 2 (143,771 MiB = 150.75 GB): 70.55 + 21.47 + 7.54 = 99.56 ≤ 135.68 → 26.62 %.
    let h200 = option(&s, "H200 SXM");
    assert_eq!(h200.count, 2);
    close(
        h200.headroom_pct,
        headroom(H200, 0.9, 141.1e9 / 2.0 + kv / 2.0 + 0.05 * H200),
        0.01,
    );
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
    // L4 × 1 (23,034 MiB = 24.15 GB, usable 21.74): need 5.727 + 4.295 + 1.5 = 11.52 GB → 47 %;
    // decode 4 × 300e9 / 10.022e9 = 119.7 tok/s.
    let l4 = option(&s, "L4");
    assert_eq!((l4.count, l4.fits), (1, true));
    let weights = 2_101_346_304.0 + (8.03e9 - 1_050_673_152.0) * (4.0 + 20.0 / 128.0) / 8.0;
    close(l4.headroom_pct, headroom(L4, 0.9, weights + 4.0 * GIB_F + 1.5e9), 0.01);
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
    // H100 SXM × 1: 65.19 + 4.85 + 4.28 = 74.32 GB ≤ 76.97 (the README: "fits on a single 80 GB
    // GPU"; the datasheet's 80e9 bytes said it did not).
    assert_eq!(option(&g, "H100 SXM").count, 1);
}

#[test]
fn deepseek_v3_mla_uses_the_compressed_latent() {
    let s = size(&input(RT, Precision::Fp8, "deepseek-ai/DeepSeek-V3", 32768, 8));
    // 70,272 B/token × 32768 × 8 = 18,421,383,168 B = 17.16 GiB (the expanded 128-head form
    // would be 976 GiB). The multi-token-prediction layer caches nothing without speculative
    // decoding.
    let kv = 70_272.0 * 32768.0 * 8.0;
    close(s.kv_cache_gib, 17.16, 0.01);
    // FP8: experts 653.909e9 × 1 + embeddings 1.8534e9 × 2 + rest 15.2376e9 × 1 = 672.853e9 B,
    // and the MTP layer that ships in the checkpoint, 11.610e9 × 1 → 684.463e9 B = 637.46 GiB.
    let weights = 672.853e9 + 11.610e9;
    close(s.weights_gib, weights / GIB_F, 0.01);
    // The latent is not split by TP: H200 × 8 holds 85.56 + 18.42 + 7.54 = 111.52 GB ≤ 135.68.
    let h200 = option(&s, "H200 SXM");
    assert_eq!(h200.count, 8);
    close(
        h200.headroom_pct,
        headroom(H200, 0.9, weights / 8.0 + kv + 0.05 * H200),
        0.01,
    );
    // H100 × 8 = 108.0 GB > 76.97; × 16 (2 nodes, PP 2 halves the KV): the busier stage holds
    // 31 of the 61 layers (vLLM's split), (42.78 + 9.21) × 62/61 + 4.28.
    let h100 = option(&s, "H100 SXM");
    assert_eq!(h100.count, 16);
    close(
        h100.headroom_pct,
        headroom(H100, 0.9, (weights / 16.0 + kv / 2.0) * 62.0 / 61.0 + 0.05 * H100),
        0.01,
    );
    assert!(h100.interconnect_note.as_deref().unwrap().contains("multi-node"));
    // MI325X × 4 (1024 GB, datasheet: no driver figure found) rents least:
    // 171.12 + 18.42 + 12.8 = 202.34 ≤ 230.4.
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
    // H100 SXM × 4: 36.135 + 2 seqs × 20.355 + 4.28 = 81.12 GB > 76.97; × 8: 18.07 + 20.35 + 4.28.
    let per_seq = 34.0 * 4096.0 * 4096.0 * 32.0 + 4096.0 * 128_256.0 * 4.0;
    let h100 = option(&s, "H100 SXM");
    assert_eq!(h100.count, 8);
    close(
        h100.headroom_pct,
        headroom(H100, 0.9, 144.54e9 / 8.0 + per_seq + 0.05 * H100),
        0.01,
    );
    assert_eq!(h100.decode_tokens_per_s_max, 0.0);
    assert!(h100.interconnect_note.as_deref().unwrap().contains("FSDP"));
    // H100 NVL × 4 (4 × 95,830 MiB) fits: 36.135 + 40.71 + 5.02 = 81.87 ≤ 90.44 GB; B200 × 2
    // (2 × 183,359 MiB = 384.5 GB) rents less and fits too: 72.27 + 4 × 20.355 + 9.61 = 163.3 ≤
    // 173.0 GB (with the datasheet's 180e9 bytes it missed by 0.7 GB).
    assert!(option(&s, "H100 NVL").fits && option(&s, "H100 NVL").count == 4);
    assert!(144.54e9 / 4.0 + 2.0 * per_seq + 0.05 * H100_NVL <= 0.9 * H100_NVL);
    assert_eq!((s.options[0].gpu.as_str(), s.options[0].count), ("B200", 2));
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
    // A100 80GB (81,920 MiB = 85.9 GB): 42.0 + 8.61 + 4.3 = 54.9 GB ≤ 77.31 on one GPU.
    let a100 = option(&s, "A100 80GB SXM");
    assert_eq!((a100.count, a100.fits), (1, true));
    close(
        a100.headroom_pct,
        headroom(A100_80, 0.9, 41.998e9 + 8_610_906_112.0 + 0.05 * A100_80),
        0.02,
    );
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
        14,
    ));
    // H200 × 8 (TP 8, 143,771 MiB = 150.75 GB each): weights 405.85e9 × 2 / 8 = 101.46 GB; KV
    // 516,096 B × 32768 × 14 / 8 = 29.6 GB; reserve 7.54 GB → 138.6 GB > 0.9 × 150.75 = 135.68,
    // but ≤ 0.95 × 150.75 = 143.22.
    let need = 405.85e9 * 2.0 / 8.0 + 516_096.0 * 32768.0 * 14.0 / 8.0 + 0.05 * H200;
    assert!(need > 0.9 * H200 && need <= 0.95 * H200);
    let h200 = option(&s, "H200 SXM");
    assert_eq!((h200.count, h200.fits, h200.tensor_parallel), (8, true, 8));
    assert!(h200
        .load_note
        .as_deref()
        .unwrap()
        .contains("--gpu-memory-utilization 0.95"));
    close(h200.headroom_pct, headroom(H200, 0.95, need), 0.01);
    // H100 × 8 is far short (101.46 GB of weights alone > 85.5): two nodes, no setting.
    let h100 = option(&s, "H100 SXM");
    assert_eq!((h100.count, h100.load_note.as_deref()), (16, None));
    // Its decode ceiling: the two pipeline stages read in turn, so a step reads the weights a
    // tensor-parallel group holds (811.7e9 B / 8) plus one GPU's KV (516,096 B × 32768 × 14 / 16):
    // 14 × 3350e9 / (101.46e9 + 14.80e9) = 403.4 tok/s (reading the two stages as parallel gave
    // twice that).
    assert_eq!((h100.tensor_parallel, h100.pipeline_parallel), (8, 2));
    let kv_per_gpu = 516_096.0 * 32768.0 * 14.0 / 16.0;
    close(
        h100.decode_tokens_per_s_max,
        14.0 * 3350e9 / (405.85e9 * 2.0 / 8.0 + kv_per_gpu),
        0.5,
    );
}

#[test]
fn kv_capacity_is_the_memory_left_over_the_bytes_per_token() {
    let i = input(RT, Precision::Bf16, "meta-llama/Llama-3.1-70B-Instruct", 32768, 1);
    let h100 = gpu_by_name("H100 SXM").unwrap();
    let c = kv_capacity(&i, h100, 4, 0.9).unwrap();
    // Per GPU: 0.9 × 81,559 MiB (76.97 GB) − 141.1 GB / 4 − 4.28 GB reserve = 37.42 GB; TP 4
    // splits the 8 KV heads, so the four GPUs hold 149.7 GB of distinct KV at 327,680 B per token.
    let capacity: f64 = 4.0 * (0.9 * H100 - 70.55e9 * 2.0 / 4.0 - 0.05 * H100);
    assert_eq!(c.tokens, (capacity / 327_680.0).floor() as u64);
    close(c.max_concurrency, capacity / (327_680.0 * 32768.0), 0.01);
    // vLLM's own utilisation, when the run sets it, moves it: at 0.92 each GPU has 1.7 GB more.
    let c92 = kv_capacity(&i, h100, 4, 0.92).unwrap();
    assert_eq!(c92.tokens, ((capacity + 4.0 * 0.02 * H100) / 327_680.0).floor() as u64);
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
